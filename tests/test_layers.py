"""The package layering of expmgr, read from the source: imports only go down, and no
package's modules import each other in a circle.

Every ``import`` and ``from ... import`` counts, at any depth: inside functions
(lazy imports are still dependencies). Imports under ``if TYPE_CHECKING:`` count for
the layer order (a type is part of what a module depends on) but not for cycles: they
never run, and they are how a lower module names the type of what it is handed (as
``config/_validate.py`` does for ExperimentConfig).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "expmgr"

LAYERS: list[set[str]] = [  # top first; a unit may import its own modules and any unit in a lower layer
    {"cli", "trial_path"},     # trial_path: not a package; the folder of NNI's names (`nni`, `expmgr`), put on
                               # trials', the dispatcher's and `expctl run`'s path, answered by the layers below
    {"experiment"},            # Experiment and the Manager/Viewer hosts that start engine + server
    {"server"},
    {"engine"},
    {"training", "store", "dispatcher"},
    {"config"},                # below training: a training service is built from its part of the config
    {"algorithms"},
    {"trial"},                 # the trial-side API (and the `expmgr` package that re-exports it)
    {"layout", "log", "states", "metrics", "logreader", "strict_json"},
    {"rotation"},              # how log files are bounded: the log handlers, the training services, readers
]
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


@dataclass(frozen=True)
class Import:
    module: str        # the importing module, dotted
    target: str        # the imported module (or package), dotted
    where: str         # file:line, for the failure message
    type_only: bool = False   # under `if TYPE_CHECKING:`


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str, root: Path = PACKAGE_ROOT) -> bool:
    path = root.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path, root: Path = PACKAGE_ROOT) -> list[Import]:
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    type_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
                 for child in node.body for inner in ast.walk(child)}
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, where, id(node) in type_only)
                      for alias in node.names if alias.name.split(".")[0] == "expmgr"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "expmgr":
                continue
            for alias in node.names:  # `from pkg import submodule` depends on the submodule itself
                candidate = f"{source}.{alias.name}"
                found.append(Import(module, candidate if is_module(candidate, root) else source, where,
                                    id(node) in type_only))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def all_imports() -> list[Import]:
    return [found for path in sorted(PACKAGE_ROOT.rglob("*.py")) for found in imports_of(path)]


def unit_of(dotted: str) -> str:
    parts = dotted.split(".")
    return "trial" if len(parts) == 1 else parts[1]  # `expmgr` itself is the trial API's front


def test_every_module_of_expmgr_belongs_to_a_layer():
    units = {unit_of(module_name(path)) for path in PACKAGE_ROOT.rglob("*.py")}
    assert units - RANK.keys() == set(), "add these packages/modules to LAYERS"


def test_imports_only_go_down_the_layers():
    wrong = []
    for found in all_imports():
        source, target = unit_of(found.module), unit_of(found.target)
        if source == target:
            continue
        if RANK[target] <= RANK[source]:
            direction = "sideways" if RANK[target] == RANK[source] else "up"
            wrong.append(f"{found.where}: {found.module} imports {found.target} ({direction}: {source} -> {target})")
    assert wrong == [], "imports against the layer order:\n" + "\n".join(wrong)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("package", sorted(path.parent.name for path in PACKAGE_ROOT.glob("*/__init__.py")))
def test_no_import_cycle_between_the_modules_of_a_package(package: str):
    # A package's __init__ that re-exports its modules is not part of a cycle: it is what
    # imports them, not what they need (they import the modules themselves).
    edges: dict[str, set[str]] = {}
    for found in all_imports():
        if (unit_of(found.module) == package == unit_of(found.target) and found.target != f"expmgr.{package}"
                and not found.type_only):
            edges.setdefault(found.module, set()).add(found.target)
    circles = cycles(edges)
    assert circles == [], f"modules of expmgr.{package} that import each other in a circle: {circles}"


def test_every_package_says_what_it_is_for_and_what_it_may_import():
    silent = []
    for init in sorted(PACKAGE_ROOT.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        if "May import" not in docstring:
            silent.append(str(init.relative_to(PACKAGE_ROOT.parent)))
    assert silent == [], f"__init__ docstrings without a 'May import: ...' paragraph: {silent}"


def test_the_checks_see_lazy_and_type_checking_imports(tmp_path: Path):
    # The parser itself: imports inside a function, under TYPE_CHECKING, relative ones.
    module = tmp_path / "expmgr" / "engine" / "example.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\nfrom . import runner\n"
                      "if TYPE_CHECKING:\n    from expmgr.config import ExperimentConfig\n"
                      "def later():\n    import expmgr.server.rest\n")
    found = [(item.module, item.target, item.type_only) for item in imports_of(module, root=tmp_path / "expmgr")]
    assert found == [("expmgr.engine.example", "expmgr.engine", False), ("expmgr.engine.example", "expmgr.config", True),
                     ("expmgr.engine.example", "expmgr.server.rest", False)]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


COMPOSITION_ROOT = {"expmgr.experiment.manager"}
"""Where the concrete parts are built and handed to the runner (which knows them by their protocols)."""


def test_the_dispatcher_client_is_imported_only_by_the_composition_root_and_its_own_package():
    wrong = [f"{found.where}: {found.module} imports {found.target}" for found in all_imports()
             if found.target == "expmgr.dispatcher.client" and unit_of(found.module) != "dispatcher"
             and found.module not in COMPOSITION_ROOT]
    assert wrong == [], ("the engine and the layers above know the dispatcher by engine.dispatching.Dispatcher; "
                         "only the composition root builds a DispatcherClient:\n" + "\n".join(wrong))


SQLITE_MODULES = {"sqlite3", "_sqlite3"}
"""SQLite's Python modules: only the store talks to SQLite, and above it code catches the
store's own errors (``expmgr/store/errors.py``), so another backend changes nothing there."""


def sqlite_imports_of(path: Path, root: Path = PACKAGE_ROOT) -> list[str]:
    """file:line of each import of SQLite's modules in ``path``: ``import``, ``from ...
    import`` and ``importlib.import_module``/``__import__`` of a constant name, at any depth."""
    def is_sqlite(name: str | None) -> bool:
        return (name or "").split(".")[0] in SQLITE_MODULES

    found: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            hit = any(is_sqlite(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            hit = node.level == 0 and is_sqlite(node.module)
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            hit = (called in ("import_module", "__import__") and bool(node.args)
                   and isinstance(node.args[0], ast.Constant) and is_sqlite(str(node.args[0].value)))
        else:
            continue
        if hit:
            found.append(node.lineno)
    return [f"{path.relative_to(root.parent)}:{line}" for line in sorted(found)]


def test_no_module_outside_the_store_imports_sqlite():
    outside = [where for path in sorted(PACKAGE_ROOT.rglob("*.py")) if unit_of(module_name(path)) != "store"
               for where in sqlite_imports_of(path)]
    assert outside == [], ("SQLite is the store's business: catch expmgr.store's errors (StoreUnavailable, "
                           "StoreUnreadable, ...) instead of sqlite3's:\n" + "\n".join(outside))


def test_the_sqlite_check_sees_every_way_of_importing_it(tmp_path: Path):
    module = tmp_path / "expmgr" / "engine" / "example.py"
    module.parent.mkdir(parents=True)
    module.write_text("import os, sqlite3\nfrom sqlite3 import OperationalError\nimport sqlite3x\n"
                      "def later():\n    import sqlite3.dbapi2 as db\n    from _sqlite3 import Error\n"
                      "    import importlib\n    return importlib.import_module('sqlite3'), __import__('sqlite3')\n"
                      "from .sqlite3 import nothing\n")
    assert sqlite_imports_of(module, root=tmp_path / "expmgr") == [
        f"expmgr/engine/example.py:{line}" for line in (1, 2, 5, 6, 8, 8)]


def test_the_trial_runner_is_imported_only_by_the_composition_root_and_its_own_package():
    wrong = [f"{found.where}: {found.module} imports {found.target}" for found in all_imports()
             if found.target == "expmgr.engine.runner" and unit_of(found.module) != "engine"
             and found.module not in COMPOSITION_ROOT]
    assert wrong == [], ("the server and the layers above know a running search by engine.serving.ServedSearch "
                         "and send it engine.commands' records; only the composition root builds a TrialRunner:\n"
                         + "\n".join(wrong))


def runner_importers_in_the_engine(imports: list[Import]) -> list[str]:
    """file:line of each engine module (the runner aside) that imports the runner, type-only too."""
    return [f"{found.where}: {found.module} imports {found.target}" for found in imports
            if found.target == "expmgr.engine.runner" and unit_of(found.module) == "engine"
            and found.module != "expmgr.engine.runner"]


def test_the_runners_collaborators_never_import_the_runner():
    # The runner keeps the loop and asks its collaborators (deadlines, resume plan, command
    # checks, ...) for decisions; one that imported the runner back would share its private
    # state as a mixin does, and close an import circle.
    wrong = runner_importers_in_the_engine(all_imports())
    assert wrong == [], ("engine modules are told what they need and return decisions; they never import "
                         "the runner:\n" + "\n".join(wrong))


def test_the_collaborator_check_sees_an_engine_module_naming_the_runner(tmp_path: Path):
    engine = tmp_path / "expmgr" / "engine"
    engine.mkdir(parents=True)
    (engine / "runner.py").write_text("from expmgr.engine import helper\n")
    (engine / "helper.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from expmgr.engine.runner import TrialRunner\n")
    (engine / "other.py").write_text("def later():\n    from expmgr.engine import runner\n")
    found = [item for path in sorted(engine.glob("*.py")) for item in imports_of(path, root=tmp_path / "expmgr")]
    assert runner_importers_in_the_engine(found) == [
        "expmgr/engine/helper.py:3: expmgr.engine.helper imports expmgr.engine.runner",
        "expmgr/engine/other.py:2: expmgr.engine.other imports expmgr.engine.runner"]

"""NNI's launcher scripts and notebooks, run as they are (``expctl run``): their
``from nni.experiment import Experiment`` gets expmgr's Experiment.

    with nni_names(port=None):          # what `expctl run` does around the script
        run_script(Path("main.py"), ["--epochs", "3"])

``nni_names`` makes ``nni.experiment`` expmgr's (``expmgr.experiment``'s names, under
NNI's module name) for this process and puts NNI's light ``nni`` package
(``expmgr/trial_path``) last on ``sys.path``. A real NNI installed in this environment
is still found first for everything else (``nni.compression``, ``nni.trace``, ...), as
``import nni`` loads it; only ``nni.experiment`` (and so ``nni.Experiment``) is expmgr's,
so the script starts expmgr's manager, never NNI's. With ``port`` given, every experiment
the script starts listens there, whatever port the script names (``run(8080)``).

A notebook (``.ipynb``) runs as "Run All" does: its code cells in order in one namespace,
in the notebook's folder, the value of a cell's last expression printed as Jupyter shows it;
IPython's own lines (``%magic``, ``!shell``) are skipped with a note on stderr.
"""
from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.util
import json
import os
import runpy
import sys
import types
from collections.abc import Iterator, Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

NNI_EXPERIMENT = "nni.experiment"


class NotebookError(Exception):
    """A notebook that cannot be read as one (what is wrong, and where)."""


def nni_experiment_module(port: int | None) -> types.ModuleType:
    """A module named ``nni.experiment`` holding ``expmgr.experiment``'s names; with ``port``,
    its ``Experiment`` starts every experiment on ``port`` whatever port it is given."""
    import expmgr.experiment as ours
    module = types.ModuleType(NNI_EXPERIMENT, "NNI's nni.experiment, answered by expmgr.experiment (expctl run).")
    for name in ours.__all__:
        setattr(module, name, getattr(ours, name))
    module.__all__ = list(ours.__all__)  # type: ignore[attr-defined]
    if port is not None:
        module.Experiment = _experiment_on_port(ours.Experiment, port)  # type: ignore[attr-defined]
    return module


def _experiment_on_port(base: type, fixed_port: int) -> type:
    class Experiment(base):  # type: ignore[valid-type, misc]
        __doc__ = base.__doc__

        def start(self, port: int = 8080, *args: Any, **kwargs: Any) -> None:
            """``start`` on the port ``expctl run --port`` gave, whatever ``port`` says (so
            ``run``, ``resume`` and ``run_or_resume``, which call it, too)."""
            super().start(fixed_port, *args, **kwargs)
    Experiment.__module__ = NNI_EXPERIMENT
    return Experiment


class _NniExperimentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import nni.experiment`` with ``module``; its submodules are NNI's alone."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
                  ) -> ModuleSpec | None:
        if fullname == NNI_EXPERIMENT:
            return importlib.util.spec_from_loader(fullname, self)
        if fullname.startswith(NNI_EXPERIMENT + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}: under expctl run, nni.experiment is "
                                      f"expmgr's (expmgr.experiment: {', '.join(self.module.__all__)})",
                                      name=fullname)
        return None

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is made already."""


@contextlib.contextmanager
def nni_names(port: int | None = None) -> Iterator[types.ModuleType]:
    """Within: ``nni.experiment`` is expmgr's (see the module docstring); yields that module."""
    from expmgr.trial import TRIAL_PATH
    finder = _NniExperimentFinder(nni_experiment_module(port))
    saved = {name: module for name, module in sys.modules.items() if name == "nni" or name.startswith("nni.")}
    for name in saved:
        del sys.modules[name]   # an nni imported before (say by expmgr's caller) would keep NNI's
    sys.meta_path.insert(0, finder)
    added_path = TRIAL_PATH not in sys.path
    if added_path:
        sys.path.append(TRIAL_PATH)
    try:
        yield finder.module
    finally:
        sys.meta_path.remove(finder)
        if added_path and TRIAL_PATH in sys.path:
            sys.path.remove(TRIAL_PATH)
        for name in [name for name in sys.modules if name == "nni" or name.startswith("nni.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def run_script(script: Path, args: Sequence[str]) -> None:
    """Run ``script`` as ``python script args`` does: as ``__main__``, with ``sys.argv`` and
    ``sys.path[0]`` set as Python sets them. Its exceptions and ``SystemExit`` propagate."""
    saved_argv = sys.argv
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved_argv
        if sys.path and sys.path[0] == str(script.resolve().parent):
            del sys.path[0]


def notebook_cells(notebook: Path) -> list[str]:
    """The code cells' sources of ``notebook``, in order; NotebookError when it is not a notebook."""
    try:
        content = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise NotebookError(f"cannot read the notebook {str(notebook)!r}: {error}") from None
    cells = content.get("cells") if isinstance(content, dict) else None
    if not isinstance(cells, list):
        raise NotebookError(f"{notebook}: not a Jupyter notebook (no list of 'cells')")
    sources = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"{notebook}: cell {index + 1}: 'source' is not text")
        sources.append(source)
    return sources


def run_notebook(notebook: Path) -> None:
    """Run the code cells of ``notebook`` in order, in its folder (as Jupyter does), printing
    each cell's last expression's value when it is not None. Exceptions propagate."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    saved_cwd = os.getcwd()
    folder = notebook.resolve().parent
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    try:
        for number, source in enumerate(notebook_cells(notebook), start=1):
            _run_cell(_python_lines(source, number), f"<{notebook.name} cell {number}>", namespace)
    finally:
        os.chdir(saved_cwd)
        if str(folder) in sys.path:
            sys.path.remove(str(folder))


def _python_lines(source: str, number: int) -> str:
    """``source`` without IPython's own lines (``%magic``, ``!shell``), each noted on stderr."""
    kept = []
    for line in source.splitlines():
        if line.lstrip().startswith(("%", "!")):
            print(f"expctl run: cell {number}: skipped IPython's line {line.strip()!r}", file=sys.stderr)
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def _run_cell(source: str, filename: str, namespace: dict[str, Any]) -> None:
    tree = ast.parse(source, filename)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - running the user's notebook is the point
    if last is not None:
        value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)  # noqa: S307
        if value is not None:
            print(repr(value))

"""The tests' own layout: no test module or conftest imports a test module or a conftest; what
tests share lives in ``tests/helpers`` (fixtures in conftest.py files, or in tests/helpers when
several folders use them), so that each test file can be read, moved and run on its own."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.common import REPO

TESTS = REPO / "tests"


def _imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, dotted module) of each import in ``source``, a module of ``package``; relative
    imports made absolute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from tests.server import conftest` names the module in the imported names
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _is_test_module_or_conftest(module: str) -> bool:
    last = module.split(".")[-1]
    return last == "conftest" or last.startswith("test_")


def test_no_test_module_or_conftest_imports_another_test_module_or_a_conftest():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if "nni_examples" in path.parts:  # NNI's example code, run as NNI's users run it
            continue
        package = ".".join(path.relative_to(REPO).parent.parts)
        for line, module in _imported_modules(path.read_text(), package):
            if _is_test_module_or_conftest(module):
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not offenders, "import from tests.helpers instead:\n" + "\n".join(offenders)


def test_the_layout_check_sees_absolute_relative_and_module_imports():
    # The check above passing on the real tree means something only if it notices each spelling.
    source = ("from tests.server.conftest import get\nfrom .test_rest import x\n"
              "import tests.store.test_store\nfrom tests.server import conftest\nfrom tests.helpers.server import get\n")
    modules = [module for _, module in _imported_modules(source, "tests.server") if _is_test_module_or_conftest(module)]
    assert modules == ["tests.server.conftest", "tests.server.test_rest", "tests.store.test_store",
                       "tests.server.conftest"]

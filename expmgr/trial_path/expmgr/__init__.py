"""``import expmgr`` in a trial: the manager's own expmgr, found by its path.

This folder is first on every trial's PYTHONPATH (see ../../docs/nni-migration.md),
so a trial's interpreter finds this module even when expmgr is not installed in its
environment, or is another version there. It loads the expmgr package that holds
this folder, the one whose manager launched the trial (so the trial speaks its
protocol), and replaces itself with it in ``sys.modules``. ``expmgr/__init__.py``
imports only ``expmgr.trial`` (standard library alone, Python 3.8+); the rest of the
package loads on first use, as usual.
"""
import os
import sys
from importlib.machinery import SourceFileLoader, ModuleSpec

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_manager_package() -> None:
    init = os.path.join(_PACKAGE_DIR, "__init__.py")
    spec = ModuleSpec(__name__, SourceFileLoader(__name__, init), origin=init, is_package=True)
    spec.submodule_search_locations = [_PACKAGE_DIR]
    spec.has_location = True
    package = type(sys)(__name__)
    for name, value in (("__spec__", spec), ("__loader__", spec.loader), ("__file__", init),
                        ("__path__", [_PACKAGE_DIR]), ("__package__", __name__)):
        setattr(package, name, value)
    shim = sys.modules[__name__]
    sys.modules[__name__] = package  # the import system returns what sys.modules holds
    try:
        spec.loader.exec_module(package)  # type: ignore[union-attr]
    except BaseException:
        sys.modules[__name__] = shim
        raise


_load_manager_package()

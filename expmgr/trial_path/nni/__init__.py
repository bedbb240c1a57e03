"""NNI's ``nni`` package where expmgr runs NNI's code, real NNI or not: trials, the
dispatcher (custom tuners and assessors) and scripts run by ``expctl run``.

This folder (``expmgr/trial_path``) is first on every trial's PYTHONPATH, and last on the
dispatcher's ``sys.path`` and on that of a script run by ``expctl run``: the user's other
code never sees it. When a real NNI is importable elsewhere on ``sys.path``, this module
hands over to it at once (it loads it and replaces itself in ``sys.modules``), so all of
NNI (``nni.compression``, ``nni.nas``, ...) keeps working; NNI's own trial runtime then
reports to expmgr through the channel in ``NNI_TRIAL_COMMAND_CHANNEL``
(``expmgr_nni_channel.py``, next to this package). Without a real NNI, the light API
answers: ``nni.trial`` through ``expmgr.trial``, ``nni.tuner``/``nni.assessor`` with
expmgr's base classes, ``nni.utils`` as NNI 3.0 defines it.

Standard library only, Python 3.8+: the trial's interpreter may not be expmgr's. Names
that need more of expmgr (``NoMoreTrialError``, ``silence_stdout``, the search-space
helpers) load on first use, so ``import nni`` in a trial stays cheap. Run by hand with
this folder on the path and no experiment's environment, it behaves as NNI's standalone
mode: empty parameters, metrics logged.
"""
import os
import sys
from importlib.machinery import PathFinder

_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _hand_over_to_real_nni() -> bool:
    """Load the first ``nni`` on ``sys.path`` outside this folder in place of this one."""
    elsewhere = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _FOLDER]
    spec = PathFinder.find_spec(__name__, elsewhere)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return False
    import importlib.util
    real = importlib.util.module_from_spec(spec)
    shim = sys.modules[__name__]
    sys.modules[__name__] = real  # the import system returns what sys.modules holds
    try:
        spec.loader.exec_module(real)
    except BaseException:
        sys.modules[__name__] = shim
        raise
    return True


# NNI 3.0's top-level names that need more than this package: name -> (module, attribute).
_LAZY = {
    "NoMoreTrialError": ("expmgr.algorithms.tuner", "NoMoreTrialError"),
    "silence_stdout": ("expmgr.log", "silence_stdout"),
    "Experiment": ("nni.experiment", "Experiment"),
    **{name: ("nni.mutable", name)
       for name in ("choice", "uniform", "quniform", "loguniform", "qloguniform", "normal", "qnormal")},
}


def __getattr__(name):
    """The names of ``_LAZY``, imported on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError("module 'nni' has no attribute %r" % name)
    import importlib
    module_name, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


if not _hand_over_to_real_nni():
    __version__ = "3.0"
    """The NNI API this package answers (NNI 3.0's), for code that checks it."""

    from nni.trial import (  # noqa: F401 - NNI's `from .trial import *`
        get_current_parameter,
        get_experiment_id,
        get_next_parameter,
        get_next_parameters,
        get_sequence_id,
        get_trial_id,
        report_final_result,
        report_intermediate_result,
    )

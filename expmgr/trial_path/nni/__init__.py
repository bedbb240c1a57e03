"""NNI's trial API in a trial launched by expmgr: ``import nni`` works, real NNI or not.

This folder (``expmgr/trial_path``) is first on every trial's PYTHONPATH, and only
there: the user's other code never sees it. When a real NNI is importable further
along ``sys.path``, this module hands over to it at once (it loads it and replaces
itself in ``sys.modules``), so all of NNI (``nni.compression``, ``nni.nas``, ...) keeps
working; NNI's own trial runtime then reports to expmgr through the channel in
``NNI_TRIAL_COMMAND_CHANNEL`` (``expmgr_nni_channel.py``, next to this package).
Without a real NNI, the light API in ``nni.trial`` answers, through ``expmgr.trial``.

Standard library only, Python 3.8+: the trial's interpreter may not be expmgr's.
Run by hand with this folder on the path and no experiment's environment, it behaves
as NNI's standalone mode: empty parameters, metrics logged.
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


if not _hand_over_to_real_nni():
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

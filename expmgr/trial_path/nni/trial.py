"""NNI 3.0's trial functions (``nni.trial``, re-exported as ``nni.*``), answered by
``expmgr.trial``: one home for the protocol with expmgr's manager.

Differences from NNI, where a trial could tell: ``get_next_parameter()`` may be called
again (it returns the same parameters; NNI returns None), and reporting before it is
allowed (NNI asserts). A trial launched by an experiment that cannot get its
parameters raises ``expmgr.trial.TrialConnectionError``, never returns empty ones.
"""
from expmgr import trial as _trial

__all__ = [
    "get_next_parameter", "get_next_parameters", "get_current_parameter", "report_intermediate_result",
    "report_final_result", "get_experiment_id", "get_trial_id", "get_sequence_id",
]

_parameters = None


def get_next_parameter():
    """The hyperparameters the tuner chose for this trial (``{}`` when run by hand)."""
    global _parameters
    _parameters = _trial.get_next_parameter()
    return _parameters


def get_next_parameters():
    """Alias of :func:`get_next_parameter`."""
    return get_next_parameter()


def get_current_parameter(tag=None):
    """The parameters :func:`get_next_parameter` returned (or the one named ``tag``); None before it."""
    if _parameters is None:
        return None
    return _parameters if tag is None else _parameters[tag]


def report_intermediate_result(metric):
    """Report a metric during training: a number, or a dict with a ``default`` number."""
    _trial.report_intermediate_result(metric)


def report_final_result(metric):
    """Report the trial's result: a number, or a dict with a ``default`` number."""
    _trial.report_final_result(metric)


def overwrite_intermediate_seq(value):
    """Number the next report ``value`` (forward only; see ``expmgr.trial``)."""
    _trial.overwrite_intermediate_seq(value)


def get_experiment_id():
    return _trial.get_experiment_id()


def get_trial_id():
    return _trial.get_trial_id()


def get_sequence_id():
    return _trial.get_sequence_id()

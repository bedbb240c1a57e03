"""The trial command channel a real NNI 3.0 in a trial uses to talk to expmgr.

expmgr sets ``NNI_TRIAL_COMMAND_CHANNEL=import://expmgr_nni_channel.ExpmgrTrialCommandChannel``
for every trial; NNI's ``nni.runtime.trial_command_channel`` imports this module (this
folder is on the trial's PYTHONPATH) and builds the class with no arguments. Each call
goes to ``expmgr.trial``, the one home of the protocol with expmgr's manager.
"""
from nni.runtime.trial_command_channel.base import TrialCommandChannel

from expmgr import trial as _trial


class ExpmgrTrialCommandChannel(TrialCommandChannel):
    """Parameters from the trial's parameter.json, metrics to expmgr's manager."""

    def receive_parameter(self):
        # A TrialConnectionError here (launched, but no way to the manager) is meant to end the trial.
        parameters = _trial.get_next_parameter()
        return {"parameter_id": _trial.get_sequence_id(), "parameters": parameters}

    def send_metric(self, type, parameter_id, trial_job_id, sequence, value):  # noqa: A002 - NNI's names
        if type == "FINAL":
            _trial.report_final_result(value)
        elif type == "PERIODICAL":
            _trial.report_intermediate_result(value)
        else:
            raise ValueError(f"NNI sent a metric of unknown type {type!r}")

"""NNI 3.0's ``nni.recoverable.Recoverable``, the base of its tuners and assessors: the
checkpoint hooks and the bookkeeping of parameters replayed on a resume."""
import json
import os

__all__ = ["Recoverable"]


class Recoverable:

    def __init__(self):
        self.recovered_max_param_id = -1
        self.recovered_trial_params = {}

    def load_checkpoint(self):
        pass

    def save_checkpoint(self):
        pass

    def get_checkpoint_path(self):
        """``NNI_CHECKPOINT_DIRECTORY`` when it is a folder, else None (expmgr sets none:
        its store keeps what a tuner learns, replayed on a resume)."""
        path = os.getenv('NNI_CHECKPOINT_DIRECTORY')
        if path is not None and os.path.isdir(path):
            return path
        return None

    def recover_parameter_id(self, data):
        if not isinstance(data, list):
            data = [data]
        previous_max_param_id = 0
        for trial in data:
            if isinstance(trial, str):
                trial = json.loads(trial)
            if not isinstance(trial['parameter_id'], int):
                continue   # a customized trial's
            self.recovered_trial_params[trial['parameter_id']] = trial['parameters']
            if previous_max_param_id < trial['parameter_id']:
                previous_max_param_id = trial['parameter_id']
        self.recovered_max_param_id = previous_max_param_id
        return previous_max_param_id

    def is_created_in_previous_exp(self, param_id):
        if param_id is None:
            return False
        return param_id <= self.recovered_max_param_id

    def get_previous_param(self, param_id):
        return self.recovered_trial_params[param_id]

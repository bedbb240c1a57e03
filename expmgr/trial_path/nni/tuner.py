"""``nni.tuner.Tuner`` without NNI: NNI 3.0's tuner base class, made of expmgr's
(``expmgr.algorithms.tuner.Tuner``, the same method names), so that a custom tuner
written for NNI (``class MyTuner(nni.tuner.Tuner)``) runs in expmgr's dispatcher.

Like NNI's dispatcher, expmgr's only gives such a tuner the search space
(``update_search_space``) when it checks a new one; it does not draw from it first.
"""
import logging

from expmgr.algorithms.tuner import Tuner as _ExpmgrTuner

from nni.recoverable import Recoverable

__all__ = ["Tuner"]

_logger = logging.getLogger(__name__)


class Tuner(_ExpmgrTuner, Recoverable):
    """NNI's tuner base: override ``update_search_space``, ``generate_parameters`` and
    ``receive_trial_result``; raise ``nni.NoMoreTrialError`` when the space is explored."""

    def check_search_space(self, search_space):
        self.update_search_space(search_space)

    def load_checkpoint(self):
        _logger.info('Load checkpoint ignored by tuner, checkpoint path: %s', self.get_checkpoint_path())

    def save_checkpoint(self):
        _logger.info('Save checkpoint ignored by tuner, checkpoint path: %s', self.get_checkpoint_path())

    def _on_exit(self):
        pass

    def _on_error(self):
        pass

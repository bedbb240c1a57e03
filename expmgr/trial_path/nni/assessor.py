"""``nni.assessor`` without NNI: ``AssessResult`` is expmgr's (NNI's names and values) and
``Assessor`` NNI 3.0's base class made of expmgr's, so that a custom assessor written
for NNI (``class MyAssessor(nni.assessor.Assessor)``) runs in expmgr's dispatcher."""
import logging

from expmgr.algorithms.assessor import AssessResult
from expmgr.algorithms.assessor import Assessor as _ExpmgrAssessor

from nni.recoverable import Recoverable

__all__ = ["AssessResult", "Assessor"]

_logger = logging.getLogger(__name__)


class Assessor(_ExpmgrAssessor, Recoverable):
    """NNI's assessor base: override ``assess_trial`` (and ``trial_end`` if it keeps state)."""

    def load_checkpoint(self):
        _logger.info('Load checkpoint ignored by assessor, checkpoint path: %s', self.get_checkpoint_path())

    def save_checkpoint(self):
        _logger.info('Save checkpoint ignored by assessor, checkpoint path: %s', self.get_checkpoint_path())

    def _on_exit(self):
        pass

    def _on_error(self):
        pass

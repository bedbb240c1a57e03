"""New trials: each gets an id no trial of the experiment has (5 letters and digits, its
folder not there), and PBT's ``TRIAL_CHECKPOINT_DIR`` parameter becomes its own checkpoint
folder, as the training service names it::

    new_trials = NewTrials(folder_of=paths.trial_dir, checkpoint_dir=files.checkpoint_dir)
    new_trials.taken(store_trial_ids)                  # on resume: ids the experiment has
    record = new_trials.record(sequence_id, {"lr": 0.1}, "algorithm", now)   # the runner stores it
"""
from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from expmgr.algorithms.tuner import TRIAL_CHECKPOINT_DIR
from expmgr.states import TrialState
from expmgr.store import TrialRecord

TRIAL_ID_ALPHABET = string.ascii_letters + string.digits
TRIAL_ID_LENGTH = 5


class NewTrials:
    """Makes the records of new trials; knows every trial id the experiment has."""

    def __init__(self, *, folder_of: Callable[[str], Path], checkpoint_dir: Callable[[str], str],
                 choose: Callable[[str], str] = secrets.choice) -> None:
        """``folder_of(id)``: where a trial's folder would be (an id whose folder is there is
        taken); ``checkpoint_dir(id)``: its checkpoint folder as its trial sees it;
        ``choose``: picks one character of the alphabet (a test's own)."""
        self._folder_of, self._checkpoint_dir, self._choose = folder_of, checkpoint_dir, choose
        self._ids: set[str] = set()

    def taken(self, trial_ids: Iterable[str]) -> None:
        """These ids are the experiment's already (a resume's stored trials)."""
        self._ids |= set(trial_ids)

    def record(self, sequence_id: int, parameters: dict[str, Any], parameter_source: str,
               submit_time: float) -> TrialRecord:
        """A new WAITING trial; ``parameter_source`` is NNI's ("algorithm", "customized")."""
        trial_id = self._new_id()
        self._ids.add(trial_id)
        if TRIAL_CHECKPOINT_DIR in parameters.values():   # PBT's NNI parameters: the trial's own folder
            parameters = {name: self._checkpoint_dir(trial_id) if value == TRIAL_CHECKPOINT_DIR else value
                          for name, value in parameters.items()}
        return TrialRecord(trial_id=trial_id, sequence_id=sequence_id, parameters=parameters,
                           status=TrialState.WAITING, submit_time=submit_time, parameter_source=parameter_source)

    def _new_id(self) -> str:
        while True:
            trial_id = "".join(self._choose(TRIAL_ID_ALPHABET) for _ in range(TRIAL_ID_LENGTH))
            if trial_id not in self._ids and not self._folder_of(trial_id).exists():
                return trial_id

"""New trials (engine/new_trials.py): ids no trial of the experiment has, and PBT's
checkpoint parameter made the trial's own folder."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from expmgr.algorithms.tuner import TRIAL_CHECKPOINT_DIR
from expmgr.engine.new_trials import NewTrials
from expmgr.states import TrialState


def scripted(*ids: str) -> object:
    """A chooser giving the characters of ``ids`` one after the other."""
    characters: Iterator[str] = iter("".join(ids))
    return lambda alphabet: next(characters)


def test_an_id_taken_by_a_stored_trial_or_a_leftover_folder_is_not_given_again(tmp_path: Path):
    (tmp_path / "bbbbb").mkdir()   # a folder a trial of an earlier run left
    new_trials = NewTrials(folder_of=lambda trial_id: tmp_path / trial_id, checkpoint_dir=str,
                           choose=scripted("aaaaa", "bbbbb", "aaaaa", "ccccc", "ddddd"))  # type: ignore[arg-type]
    new_trials.taken(["aaaaa"])
    first = new_trials.record(0, {"x": 1}, "algorithm", 10.0)
    second = new_trials.record(1, {"x": 2}, "customized", 11.0)
    assert (first.trial_id, second.trial_id) == ("ccccc", "ddddd")
    assert (first.status, first.sequence_id, first.submit_time, first.parameter_source) == \
        (TrialState.WAITING, 0, 10.0, "algorithm")
    assert second.parameter_source == "customized"


def test_an_id_given_once_is_not_given_again(tmp_path: Path):
    new_trials = NewTrials(folder_of=lambda trial_id: tmp_path / trial_id, checkpoint_dir=str,
                           choose=scripted("aaaaa", "aaaaa", "eeeee"))  # type: ignore[arg-type]
    assert [new_trials.record(n, {}, "algorithm", 0.0).trial_id for n in (0, 1)] == ["aaaaa", "eeeee"]


def test_pbts_checkpoint_parameter_becomes_the_trials_own_checkpoint_folder(tmp_path: Path):
    new_trials = NewTrials(folder_of=lambda trial_id: tmp_path / trial_id,
                           checkpoint_dir=lambda trial_id: f"/trials/{trial_id}/checkpoint")
    record = new_trials.record(0, {"lr": 0.1, "save_to": TRIAL_CHECKPOINT_DIR}, "algorithm", 0.0)
    assert record.parameters == {"lr": 0.1, "save_to": f"/trials/{record.trial_id}/checkpoint"}
    assert len(record.trial_id) == 5 and record.trial_id.isalnum()

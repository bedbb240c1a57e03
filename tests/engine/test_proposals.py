"""The tuner's side of the search (engine/proposals.py): sequence ids against
maxTrialNumber, the tuner's "no more" and "wait", and what it hears of a trial's end.
A recording dispatcher stands for the tuner (only the ``tell_*`` calls are used)."""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest

from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.engine.dispatching import DispatcherError, NoMoreTrials, TunerWaits
from expmgr.engine.proposals import Proposals, checkpoint_source_of
from expmgr.states import TrialState
from expmgr.store import TrialRecord


class Told:
    def __init__(self) -> None:
        self.told: list[tuple[Any, ...]] = []

    def tell_result(self, parameter_id: int, parameters: dict[str, Any], value: Any) -> None:
        self.told.append(("result", parameter_id, value))

    def tell_end(self, parameter_id: int, trial_id: str, success: bool, *, assessor_only: bool = False) -> None:
        self.told.append(("end", parameter_id, success, assessor_only))


def config(tmp_path: Path, **fields: Any) -> ResolvedConfig:
    return ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="true", trial_code_directory=tmp_path,
        tuner={"name": "GridSearch"}, trial_concurrency=1, **fields))


def proposals(told: Told | None = None, next_sequence_id: int = 0) -> Proposals:
    return Proposals(told, next_sequence_id=next_sequence_id, logger=logging.getLogger("test-proposals"))  # type: ignore[arg-type]


def record(sequence_id: int) -> TrialRecord:
    return TrialRecord(trial_id=f"t{sequence_id}", sequence_id=sequence_id, parameters={"x": sequence_id},
                       status=TrialState.RUNNING, submit_time=0.0)


def test_sequence_ids_count_against_max_trial_number_from_the_earlier_runs_on(tmp_path: Path):
    limited = config(tmp_path, max_trial_number=3)
    tuner = proposals(next_sequence_id=2)             # a resume: two trials were made before
    assert tuner.may_ask(limited)
    assert tuner.reserve()[0] == 2
    assert not tuner.budget_left(limited) and not tuner.has_more(limited)
    tuner.release(2)                                   # not created: its id is given again
    assert tuner.budget_left(limited) and tuner.reserve()[0] == 2


def test_a_released_id_is_reused_only_if_it_was_the_last(tmp_path: Path):
    tuner = proposals()
    first, _ = tuner.reserve()
    second, _ = tuner.reserve()
    tuner.release(first)
    assert tuner.reserve()[0] == 2, "the id after the last one given; the released one is not reused"
    assert tuner.submitted == 2


def test_a_tuner_that_waits_is_asked_again_at_once_if_a_trial_ended_meanwhile(tmp_path: Path):
    told, limits = Told(), config(tmp_path)
    tuner = proposals(told)
    _, asked = tuner.reserve()
    tuner.trial_ended(record(9), TrialState.SUCCEEDED, 0.5, True, strategy_trial=False, assessed=False)
    assert tuner.declined(TunerWaits(), asked) is True and tuner.may_ask(limits)
    _, asked = tuner.reserve()
    assert tuner.declined(TunerWaits(), asked) is False
    assert not tuner.may_ask(limits) and tuner.has_more(limits), "it waits: not asked, but not done"
    assert tuner.waits_in_vain(anything_running=True) is False
    assert tuner.waits_in_vain(anything_running=False) is True and not tuner.has_more(limits)
    tuner.space_changed()
    assert tuner.may_ask(limits), "a new space: the tuner may have new points"


def test_no_more_trials_ends_the_asking(tmp_path: Path):
    tuner = proposals()
    _, asked = tuner.reserve()
    assert tuner.declined(NoMoreTrials(), asked) is False
    assert not tuner.has_more(config(tmp_path))


def test_the_tuner_hears_a_usable_result_and_a_non_finite_one_as_a_failure(tmp_path: Path):
    told = Told()
    tuner = proposals(told)
    tuner.trial_ended(record(0), TrialState.SUCCEEDED, 0.5, True, strategy_trial=False, assessed=True)
    tuner.trial_ended(record(1), TrialState.SUCCEEDED, math.nan, True, strategy_trial=False, assessed=True)
    tuner.trial_ended(record(2), TrialState.SUCCEEDED, None, False, strategy_trial=False, assessed=True)
    tuner.trial_ended(record(3), TrialState.FAILED, None, False, strategy_trial=False, assessed=True)
    assert told.told == [("result", 0, 0.5), ("end", 0, True, False), ("end", 1, False, False),
                         ("end", 2, True, False), ("end", 3, False, False)]


def test_of_a_strategys_trial_only_the_assessor_hears(tmp_path: Path):
    told = Told()
    tuner = proposals(told)
    tuner.trial_ended(record(0), TrialState.SUCCEEDED, 0.5, True, strategy_trial=True, assessed=False)
    assert told.told == []
    tuner.trial_ended(record(1), TrialState.SUCCEEDED, 0.5, True, strategy_trial=True, assessed=True)
    assert told.told == [("end", 1, True, True)]


def test_a_checkpoint_source_is_a_trial_the_tuner_names_by_its_parameter_id():
    trials = {3: record(3)}
    assert checkpoint_source_of(None, trials.get) is None
    assert checkpoint_source_of(3, trials.get) == record(3)
    for unknown in (4, "3"):
        with pytest.raises(DispatcherError, match=f"the tuner named parameter id {unknown!r} as a checkpoint source, "
                                                  "but no trial has it"):
            checkpoint_source_of(unknown, trials.get)


class Generating(Told):
    """Answers each ``generate`` with the next of ``answers``."""

    def __init__(self, *answers: Any) -> None:
        super().__init__()
        self.answers = list(answers)
        self.asked: list[int] = []

    async def generate(self, parameter_id: int) -> Any:
        self.asked.append(parameter_id)
        return self.answers.pop(0)


def test_asking_gives_the_proposal_with_its_sequence_id_or_says_whether_to_ask_again(tmp_path: Path):
    import asyncio
    from expmgr.engine.dispatching import Generated
    proposal = Generated({"x": 0})
    tuner_side = Generating(proposal, NoMoreTrials())
    tuner = proposals(tuner_side)
    assert asyncio.run(tuner.ask(stopping=lambda: False)) == (0, proposal)
    assert asyncio.run(tuner.ask(stopping=lambda: False)) is False   # no more: its id is released
    assert tuner.submitted == 1 and tuner.no_more_trials and tuner_side.asked == [0, 1]
    stopping = proposals(Generating(proposal))
    assert asyncio.run(stopping.ask(stopping=lambda: True)) is False, "the experiment stops: the trial is not made"
    assert stopping.submitted == 0

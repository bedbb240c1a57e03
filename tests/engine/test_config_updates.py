"""Config updates while running (engine/updates.py), over real configs and the real checks:
what is applied at once, what waits for the tuner, in which order, and what a refusal leaves."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.engine import command_checks as checks
from expmgr.engine.dispatching import DispatcherError
from expmgr.engine.errors import RefusalKind, UpdateRefused
from expmgr.engine.updates import ConfigUpdates, change_line, raises_budget
from expmgr.states import ExperimentState

SPACE = {"x": {"_type": "choice", "_value": [0, 1]}}


class Tuner:
    """Takes (or refuses) each new space; a gate holds the first answer until the test opens it."""

    def __init__(self) -> None:
        self.spaces: list[dict[str, Any]] = []
        self.refuse: DispatcherError | None = None
        self.gate: asyncio.Event | None = None

    async def update_search_space(self, space: dict[str, Any]) -> None:
        self.spaces.append(space)
        if self.gate is not None:
            gate, self.gate = self.gate, None
            await gate.wait()
        if self.refuse is not None:
            raise self.refuse


class Runner:
    """What the runner keeps: its config, and each change applied to it."""

    def __init__(self, tmp_path: Path, tuner: Tuner | None) -> None:
        self.config = ResolvedConfig.from_config(ExperimentConfig(
            search_space=SPACE, trial_command="true", trial_code_directory=tmp_path, tuner={"name": "GridSearch"},
            trial_concurrency=1, max_trial_number=5))
        self.applied: list[tuple[str, Any]] = []
        self.spaces_taken = 0
        self.updates = ConfigUpdates(tuner, updated=self.updated, apply=self.apply,  # type: ignore[arg-type]
                                     space_taken=self.space_taken)

    def updated(self, field: str, value: Any) -> ResolvedConfig:
        return checks.updated_config(self.config, field, value, exp_id="exp", state=ExperimentState.RUNNING,
                                     stopping=False)

    def apply(self, field: str, config: ResolvedConfig) -> None:
        self.config = config
        self.applied.append((field, config.search_space if field == "searchSpace" else config.max_trial_number))

    def space_taken(self) -> None:
        self.spaces_taken += 1


def test_a_field_is_checked_and_applied_at_once(tmp_path):
    runner = Runner(tmp_path, Tuner())
    assert runner.updates.update("maxTrialNumber", 9) is None
    assert runner.applied == [("maxTrialNumber", 9)]
    with pytest.raises(UpdateRefused) as refused:
        runner.updates.update("maxTrialNumber", "many")
    assert refused.value.kind == RefusalKind.INVALID and runner.applied == [("maxTrialNumber", 9)]


def test_a_new_space_is_applied_only_once_the_tuner_took_it(tmp_path):
    async def test() -> None:
        tuner = Tuner()
        runner = Runner(tmp_path, tuner)
        space = {"x": {"_type": "choice", "_value": [2, 3]}}
        pending = runner.updates.update("searchSpace", space)
        assert pending is not None and runner.applied == []
        await pending
        assert tuner.spaces == [space] and runner.spaces_taken == 1 and runner.applied == [("searchSpace", space)]
    asyncio.run(test())


def test_a_space_the_tuner_refuses_leaves_the_old_one(tmp_path):
    async def test() -> None:
        tuner = Tuner()
        tuner.refuse = DispatcherError("x: not a grid", fatal=False)
        runner = Runner(tmp_path, tuner)
        pending = runner.updates.update("searchSpace", {"x": {"_type": "uniform", "_value": [0, 1]}})
        assert pending is not None
        with pytest.raises(UpdateRefused) as refused:
            await pending
        assert refused.value.kind == RefusalKind.INVALID and "keeps the old search space" in str(refused.value)
        assert runner.applied == [] and runner.spaces_taken == 0 and runner.config.search_space == SPACE
    asyncio.run(test())


def test_spaces_reach_the_tuner_one_at_a_time_in_order(tmp_path):
    async def test() -> None:
        tuner = Tuner()
        tuner.gate = gate = asyncio.Event()
        runner = Runner(tmp_path, tuner)
        first, second = ({"x": {"_type": "choice", "_value": [value]}} for value in (7, 8))
        one = asyncio.ensure_future(runner.updates.update("searchSpace", first))  # type: ignore[arg-type]
        two = asyncio.ensure_future(runner.updates.update("searchSpace", second))  # type: ignore[arg-type]
        while not tuner.spaces:
            await asyncio.sleep(0)
        for _ in range(10):   # turns of the loop in which the second could overtake
            await asyncio.sleep(0)
        assert tuner.spaces == [first]
        gate.set()
        await asyncio.gather(one, two)
        assert [space for _, space in runner.applied] == [first, second]
    asyncio.run(test())


def test_without_a_tuner_a_space_is_applied_at_once(tmp_path):
    runner = Runner(tmp_path, None)
    space = {"x": {"_type": "choice", "_value": [5]}}
    assert runner.updates.update("searchSpace", space) is None
    assert runner.applied == [("searchSpace", space)]


def test_the_budget_fields_and_the_line_said():
    assert raises_budget("maxTrialNumber") and raises_budget("maxExperimentDuration")
    assert not raises_budget("trialConcurrency")


def test_the_change_line_names_the_field_and_its_new_value(tmp_path):
    runner = Runner(tmp_path, None)
    runner.updates.update("maxTrialNumber", 12)
    assert change_line("maxTrialNumber", runner.config) == "maxTrialNumber changed to 12"

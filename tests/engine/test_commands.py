"""``apply_command``: each command record reaches the one method of the running search it
names, with its fields, and its result or refusal comes back as the search gave it. The
search is a recorder here (the real runner answers the same calls in test_runner_unit.py
and, through REST and the Python API, in tests/server and tests/experiment)."""
from __future__ import annotations

import concurrent.futures
from typing import Any, Callable

import pytest

from expmgr.engine.commands import (AddCustomizedTrial, CommandedSearch, ImportData, KillTrial, StopSearch,
                                    StrategyFinished, SubmitTrial, UpdateConfig, apply_command)
from expmgr.engine.errors import RefusalKind, UpdateRefused
from expmgr.engine.imports import ImportBatch


class RecordingSearch:
    """Records each call by the runner's method name; answers with ``answers[name]``."""

    def __init__(self, **answers: Any) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.answers = answers
        self.stop_requested = False

    def _record(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((name, args, kwargs))
        answer = self.answers.get(name)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def request_stop(self, *, kill_now: bool = False) -> None:
        self._record("request_stop", kill_now=kill_now)
        self.stop_requested = True

    def kill_trial(self, trial_id: str) -> None:
        self._record("kill_trial", trial_id)

    def update_config(self, field: str, value: Any) -> Any:
        return self._record("update_config", field, value)

    def submit_trial(self, parameters: dict[str, Any]) -> Any:
        return self._record("submit_trial", parameters)

    def add_customized_trial(self, parameters: Any) -> Any:
        return self._record("add_customized_trial", parameters)

    def import_data(self, batch: ImportBatch, on_taken: Callable[[], None] | None = None) -> Any:
        return self._record("import_data", batch, on_taken=on_taken)

    def strategy_finished(self, error: str | None) -> None:
        self._record("strategy_finished", error)


def _checked(search: RecordingSearch) -> CommandedSearch:
    return search   # mypy: the recorder has the search's methods


def test_each_command_calls_its_method_of_the_search_with_its_fields() -> None:
    search = RecordingSearch()
    batch = ImportBatch(frames=[], count=0)

    def taken() -> None:
        pass
    apply_command(_checked(search), KillTrial("a1b2c"))
    apply_command(search, UpdateConfig("trialConcurrency", 3))
    apply_command(search, SubmitTrial({"x": 1}))
    apply_command(search, AddCustomizedTrial({"x": 2}))
    apply_command(search, ImportData(batch, on_taken=taken))
    apply_command(search, StrategyFinished("Traceback ..."))
    assert search.calls == [("kill_trial", ("a1b2c",), {}),
                            ("update_config", ("trialConcurrency", 3), {}),
                            ("submit_trial", ({"x": 1},), {}),
                            ("add_customized_trial", ({"x": 2},), {}),
                            ("import_data", (batch,), {"on_taken": taken}),
                            ("strategy_finished", ("Traceback ...",), {})]


def test_a_command_returns_what_the_search_answered() -> None:
    future: concurrent.futures.Future = concurrent.futures.Future()
    pending = object()
    search = RecordingSearch(submit_trial=("a1b2c", future), update_config=pending, import_data=7)
    assert apply_command(search, SubmitTrial({"x": 1})) == ("a1b2c", future)
    assert apply_command(search, UpdateConfig("searchSpace", {})) is pending, "a space: the tuner's to take"
    assert apply_command(search, ImportData(ImportBatch(frames=[], count=7))) == 7
    assert apply_command(search, KillTrial("a1b2c")) is None


def test_the_searchs_refusal_is_raised_as_it_is() -> None:
    refusal = UpdateRefused(RefusalKind.NOT_FOUND, "no trial 'nosuch'")
    search = RecordingSearch(kill_trial=refusal)
    with pytest.raises(UpdateRefused) as refused:
        apply_command(search, KillTrial("nosuch"))
    assert refused.value is refusal and refused.value.kind is RefusalKind.NOT_FOUND


def test_a_stop_asked_again_changes_nothing() -> None:
    """NNI's DELETE experiment twice: one graceful stop (a second request_stop would kill the trials)."""
    search = RecordingSearch()
    apply_command(search, StopSearch())
    apply_command(search, StopSearch())
    assert search.calls == [("request_stop", (), {"kill_now": False})]


def test_what_is_not_a_command_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"not a command to a running search: 'kill_trial'"):
        apply_command(RecordingSearch(), "kill_trial")  # type: ignore[arg-type]


def test_commands_are_frozen_records_equal_by_their_fields() -> None:
    assert KillTrial("a1b2c") == KillTrial("a1b2c") and UpdateConfig("x", 1) != UpdateConfig("x", 2)
    with pytest.raises(AttributeError):
        KillTrial("a1b2c").trial_id = "other"  # type: ignore[misc]

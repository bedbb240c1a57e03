"""The checks of users' commands (engine/command_checks.py): each refusal's kind and the
message that names what is wrong, and the config an update makes."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.engine import command_checks as checks
from expmgr.engine.errors import RefusalKind, SubmissionRefused, UpdateRefused
from expmgr.states import ExperimentState, TrialState
from expmgr.store import TrialRecord

RUNNING = ExperimentState.RUNNING


def config(tmp_path: Path) -> ResolvedConfig:
    return ResolvedConfig.from_config(ExperimentConfig(
        search_space={"lr": {"_type": "choice", "_value": [0.1, 0.01]}}, trial_command="true",
        trial_code_directory=tmp_path, tuner={"name": "GridSearch"}, trial_concurrency=1))


def test_an_update_gives_the_new_config_and_leaves_the_old_one_as_it_was(tmp_path: Path):
    old = config(tmp_path)
    new = checks.updated_config(old, "trialConcurrency", 3, exp_id="e1", state=RUNNING, stopping=False)
    assert (new.trial_concurrency, old.trial_concurrency) == (3, 1)


@pytest.mark.parametrize("field, value, state, stopping, kind, message", [
    ("trialCommand", "x", RUNNING, False, RefusalKind.INVALID, "trialCommand: cannot be changed while running; one of"),
    ("trialConcurrency", 0, RUNNING, False, RefusalKind.INVALID, "trialConcurrency: expected a positive integer"),
    ("trialConcurrency", 2, RUNNING, True, RefusalKind.CONFLICT, "experiment e1 is RUNNING; it cannot be changed"),
    ("trialConcurrency", 2, ExperimentState.STOPPING, False, RefusalKind.CONFLICT, "experiment e1 is STOPPING"),
    ("trialConcurrency", 2, ExperimentState.DONE, False, RefusalKind.CONFLICT, "experiment e1 is DONE"),
])
def test_an_update_is_refused_naming_why(tmp_path: Path, field: str, value: object, state: ExperimentState,
                                         stopping: bool, kind: RefusalKind, message: str):
    with pytest.raises(UpdateRefused) as refused:
        checks.updated_config(config(tmp_path), field, value, exp_id="e1", state=state, stopping=stopping)
    assert refused.value.kind is kind and str(refused.value).startswith(message)


def test_a_kill_is_refused_for_an_unknown_or_not_running_trial_and_asks_the_store_only_then():
    looked_up: list[str] = []
    waiting = TrialRecord(trial_id="t2", sequence_id=1, parameters={}, status=TrialState.WAITING, submit_time=0.0)

    def lookup(trial_id: str) -> TrialRecord | None:
        looked_up.append(trial_id)
        return waiting if trial_id == "t2" else None

    checks.refuse_kill("e1", RUNNING, "t1", stopping=False, running=True, lookup=lookup)
    assert looked_up == []
    with pytest.raises(UpdateRefused, match=r"^no trial 't9'$") as unknown:
        checks.refuse_kill("e1", RUNNING, "t9", stopping=False, running=False, lookup=lookup)
    assert unknown.value.kind is RefusalKind.NOT_FOUND
    with pytest.raises(UpdateRefused, match=r"^trial t2 is not running \(WAITING\)$") as not_running:
        checks.refuse_kill("e1", RUNNING, "t2", stopping=False, running=False, lookup=lookup)
    assert not_running.value.kind is RefusalKind.CONFLICT
    with pytest.raises(UpdateRefused, match="it cannot be changed"):
        checks.refuse_kill("e1", RUNNING, "t1", stopping=True, running=True, lookup=lookup)


def test_an_import_needs_a_tuner():
    checks.refuse_import("e1", RUNNING, stopping=False, has_tuner=True)
    with pytest.raises(UpdateRefused, match="experiment e1 has no tuner to import results into") as refused:
        checks.refuse_import("e1", RUNNING, stopping=False, has_tuner=False)
    assert refused.value.kind is RefusalKind.CONFLICT


def test_a_new_trial_is_refused_while_ending_or_once_max_trial_number_were_submitted():
    checks.refuse_new_trial("e1", RUNNING, stopping=False, trials=4, max_trial_number=5)
    checks.refuse_new_trial("e1", RUNNING, stopping=False, trials=9, max_trial_number=None)
    checks.refuse_new_trial("e1", RUNNING, stopping=False, trials=None, max_trial_number=5)   # budget not asked
    with pytest.raises(SubmissionRefused, match=r"^maxTrialNumber \(5\) trials were submitted already"):
        checks.refuse_new_trial("e1", RUNNING, stopping=False, trials=5, max_trial_number=5)
    with pytest.raises(SubmissionRefused, match="experiment e1 is NO_MORE_TRIAL; it takes no new trials"):
        checks.refuse_new_trial("e1", ExperimentState.NO_MORE_TRIAL, stopping=True)


def test_submitted_parameters_are_a_json_dict_and_a_customized_trial_lies_in_the_space():
    checks.check_submitted_parameters({"lr": 0.1})
    with pytest.raises(SubmissionRefused, match="parameters: expected a dict, got list"):
        checks.check_submitted_parameters([0.1])
    with pytest.raises(SubmissionRefused, match=r"parameters: not JSON-serialisable"):
        checks.check_submitted_parameters({"lr": object()})
    space = {"lr": {"_type": "choice", "_value": [0.1, 0.01]}}
    checks.check_customized_parameters({"lr": 0.1}, space)
    checks.check_customized_parameters({"lr": 7}, None)
    with pytest.raises(SubmissionRefused, match="lr") as refused:
        checks.check_customized_parameters({"lr": 7}, space)
    assert refused.value.kind is RefusalKind.INVALID


def test_a_space_the_tuner_refused_is_invalid_and_one_it_failed_on_a_conflict():
    from expmgr.engine.dispatching import DispatcherError
    refused = checks.space_refused(DispatcherError("no choice here", fatal=False))
    assert (refused.kind, str(refused)) == (RefusalKind.INVALID,
                                            "searchSpace: no choice here; the tuner keeps the old search space")
    failed = checks.space_refused(DispatcherError("it crashed", fatal=True))
    assert (failed.kind, str(failed)) == (RefusalKind.CONFLICT, "searchSpace: the tuner failed on it: it crashed")

"""How an attempt's exit ends it (engine/outcomes.py): the exit-code contract, and whether
the trial runs again."""
from __future__ import annotations

import signal

from expmgr.engine.outcomes import ExitOutcome, exit_outcome
from expmgr.states import TrialState


def outcome(exit_code: int | None, signum: int | None = None, *, stop_reason: TrialState | None = None,
            preempted: bool = False, failed: bool = False, stopping: bool = False, marked: bool = False,
            failures: int = 0, max_retries: int = 0) -> ExitOutcome:
    asked: list[str] = []

    def marked_preempting() -> bool:
        asked.append("marked")
        return marked

    result = exit_outcome(exit_code, signum, stop_reason=stop_reason, preempted=preempted, failed=failed,
                          stopping=stopping, marked_preempting=marked_preempting,
                          failed_attempts=lambda: failures, max_retries=max_retries)
    if exit_code == 0 and not preempted:
        assert asked == [], "a success never reads the trial's preemption mark"
    return result


def test_exit_codes_and_signals_end_the_attempt_as_the_contract_says():
    assert outcome(0) == ExitOutcome(TrialState.SUCCEEDED, again=False)
    assert outcome(1) == ExitOutcome(TrialState.FAILED, again=False)
    assert outcome(None, signal.SIGKILL) == ExitOutcome(TrialState.CRASHED, again=False)
    assert outcome(None, signal.SIGKILL, failed=True).status == TrialState.FAILED, "killed for its own fault"


def test_a_stop_the_runner_asked_for_is_the_attempts_end_whatever_the_exit():
    assert outcome(None, signal.SIGTERM, stop_reason=TrialState.EARLY_STOPPED).status == TrialState.EARLY_STOPPED
    assert outcome(0, stop_reason=TrialState.USER_CANCELED).status == TrialState.USER_CANCELED


def test_failures_and_crashes_run_again_while_retries_allow_and_never_once_stopping():
    assert outcome(1, failures=1, max_retries=2) == ExitOutcome(TrialState.FAILED, again=True)
    assert outcome(1, failures=2, max_retries=2).again is False
    assert outcome(None, signal.SIGKILL, failures=0, max_retries=1).again is True
    assert outcome(1, failures=0, max_retries=1, stopping=True).again is False
    assert outcome(0, max_retries=5).again is False, "a success is not retried"
    assert outcome(None, signal.SIGTERM, stop_reason=TrialState.USER_CANCELED, max_retries=5).again is False


def test_a_preempted_trial_runs_again_first_unless_the_experiment_stops():
    by_mark = outcome(143, marked=True)
    assert by_mark == ExitOutcome(TrialState.PREEMPTED, again=True) and by_mark.first
    assert outcome(None, signal.SIGKILL, preempted=True).first, "the service says its node was taken"
    stopped = outcome(143, marked=True, stopping=True)
    assert stopped == ExitOutcome(TrialState.PREEMPTED, again=False) and not stopped.first
    assert outcome(143, marked=True, stop_reason=TrialState.EARLY_STOPPED).status == TrialState.EARLY_STOPPED, \
        "a trial stopped early is not preempted by its own mark"


def test_the_log_line_says_how_it_ended_and_warns_of_failures_and_preemptions():
    import logging
    assert outcome(0).describe("t1", 1, 0, None) == (logging.INFO, "trial t1 SUCCEEDED (exit code 0)")
    assert outcome(1, failures=0, max_retries=1).describe("t1", 1, 1, None) == \
        (logging.WARNING, "trial t1 attempt 1 FAILED (exit code 1); retrying")
    assert outcome(None, 9).describe("t1", 2, None, 9) == (logging.WARNING, "trial t1 CRASHED (signal 9)")
    assert outcome(143, marked=True, stopping=True).describe("t1", 1, 143, None) == \
        (logging.WARNING, "trial t1 attempt 1 PREEMPTED; a resume runs it again first")


def test_the_experiment_ends_stopped_done_or_in_error_and_its_trials_as_canceled_by_whom():
    from expmgr.engine.outcomes import cancel_reason, final_state
    from expmgr.states import ExperimentState
    assert (final_state(None, True), cancel_reason(None, True)) == (ExperimentState.STOPPED, TrialState.USER_CANCELED)
    assert (final_state(None, False), cancel_reason(None, False)) == (ExperimentState.DONE, TrialState.SYS_CANCELED)
    assert (final_state("boom", True), cancel_reason("boom", True)) == (ExperimentState.ERROR, TrialState.SYS_CANCELED)


def test_the_experiments_error_says_what_failed():
    from expmgr.engine.dispatching import DispatcherError
    from expmgr.engine.outcomes import HandlerFailed, StrategyFailed, failure_text
    from expmgr.training.base import TrainingServiceError
    assert failure_text(DispatcherError("Traceback: tuner")) == "the tuner failed:\nTraceback: tuner"
    assert failure_text(StrategyFailed("Traceback: strategy")) == "the strategy failed:\nTraceback: strategy"
    assert failure_text(HandlerFailed("the manager's x failed")) == "the manager's x failed"
    assert failure_text(TrainingServiceError("the service broke")) == "the service broke"
    try:
        raise KeyError("ours")
    except KeyError as bug:
        text = failure_text(bug)
    assert text.startswith("Traceback") and "KeyError: 'ours'" in text

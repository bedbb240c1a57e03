"""The progress line (engine/progress.py) and the launch queue (engine/waiting.py)."""
from __future__ import annotations

import math

from expmgr.engine.progress import Progress
from expmgr.engine.waiting import WaitingTrials
from expmgr.states import TrialState
from expmgr.store import TrialRecord


def test_the_progress_line_counts_ends_by_state_and_names_the_best_finite_result():
    progress = Progress(minimize=True)
    progress.restore({TrialState.SUCCEEDED: 2}, [("old", 0.3)])
    progress.trial_ended("nan", TrialState.SUCCEEDED, math.nan, has_final=True)
    progress.trial_ended("low", TrialState.SUCCEEDED, {"default": 0.1, "loss": 4}, has_final=True)
    progress.trial_ended("bad", TrialState.FAILED, None, has_final=False)
    assert progress.best == (0.1, "low")
    assert progress.line(max_trial_number=10, running=2) == \
        "progress: 5/10 trials ended (4 succeeded, 1 failed), 2 running, best 0.1 (trial low)"
    assert Progress(minimize=False).line(max_trial_number=None, running=0) == "progress: 0 trials ended (), 0 running"


def test_a_maximized_metric_keeps_the_highest_and_the_first_of_equals():
    progress = Progress(minimize=False)
    for trial_id, value in (("a", 0.5), ("b", 0.9), ("c", 0.9), ("d", math.inf)):
        progress.trial_ended(trial_id, TrialState.SUCCEEDED, value, has_final=True)
    assert progress.best == (0.9, "b")


def record(trial_id: str) -> TrialRecord:
    return TrialRecord(trial_id=trial_id, sequence_id=0, parameters={}, status=TrialState.WAITING, submit_time=0.0)


def test_the_runners_own_trials_go_before_submitted_ones_and_a_preempted_one_first():
    waiting = WaitingTrials()
    waiting.submitted(record("s1"))
    waiting.requeue(record("r1"), 2)
    waiting.requeue(record("p1"), 3, first=True)
    assert (len(waiting), waiting.requeued, waiting.last_submitted.trial_id) == (3, 2, "s1")
    assert [(r.trial_id, a) for r, a in (waiting.next(), waiting.next(), waiting.next())] == \
        [("p1", 3), ("r1", 2), ("s1", 1)]
    assert not waiting


def test_waiting_reasons_are_stored_only_when_they_change_and_cleared_by_a_start():
    waiting = WaitingTrials()
    waiting.requeue(record("a"), 1)
    waiting.requeue(record("b"), 1)
    waiting.restored_reason("b", "no GPU")              # what the last run stored
    waiting.submitted(record("s"))                      # a submitted trial has no reason stored
    assert waiting.reasons_changed("no GPU") == ["a"]
    assert waiting.reasons_changed("no GPU") == []
    assert waiting.reasons_changed(None) == ["a", "b"]
    assert waiting.reasons_changed("no GPU") == ["a", "b"]
    waiting.started("a")          # starting cleared a's stored reason
    assert waiting.reasons_changed("no GPU") == ["a"], "said again for a, which waits again"
    assert [r.trial_id for r in waiting.take_all()] == ["a", "b", "s"] and len(waiting) == 0


def test_a_submitted_trials_future_is_settled_once_with_its_end():
    from expmgr.engine.strategy import StrategyTrials
    strategy = StrategyTrials(running=True)
    future = strategy.submitted("s1")
    assert "s1" in strategy and not future.done()
    strategy.settle("s1", TrialState.SUCCEEDED, 0.5)
    strategy.settle("s1", TrialState.FAILED, None)     # told again: the first answer stands
    assert future.result(timeout=0) == (TrialState.SUCCEEDED, 0.5) and "s1" not in strategy
    strategy.settle("never-submitted", TrialState.FAILED, None)   # a tuner's trial: nothing to settle
    strategy.finished("Traceback ...")
    assert (strategy.running, strategy.error) == (False, "Traceback ...")

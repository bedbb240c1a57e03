"""The launch queue (engine/waiting.py): which trial is launched next, and when a waiting
reason is stored."""
from __future__ import annotations

from expmgr.engine.waiting import WaitingTrials
from expmgr.states import TrialState
from expmgr.store import TrialRecord


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

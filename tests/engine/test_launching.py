"""Launching paused (engine/launching.py): when the loop wakes to try again."""
from __future__ import annotations

from expmgr.engine.launching import RETRY_FIRST, LaunchPause


def test_the_loop_wakes_for_the_next_try_only_while_paused_with_a_trial_waiting():
    pause = LaunchPause()
    assert pause.retry_at(0.0, anything_waits=True) == []             # not paused
    pause.failed("no free file descriptor", 100.0)
    assert pause.retry_at(100.0, anything_waits=True) == [100.0 + RETRY_FIRST]
    assert pause.retry_at(100.0, anything_waits=False) == []          # nothing to launch
    assert pause.retry_at(100.0 + RETRY_FIRST, anything_waits=True) == [], "past: a freed slot wakes the loop"
    pause.succeeded()
    assert pause.retry_at(100.0, anything_waits=True) == []

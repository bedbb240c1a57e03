"""The progress line (engine/progress.py): trials ended by state, and the best final result."""
from __future__ import annotations

import math

from expmgr.engine.progress import Progress
from expmgr.states import TrialState


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

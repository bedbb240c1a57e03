"""A strategy's trials as the runner answers for them (engine/strategy.py)."""
from __future__ import annotations

from expmgr.engine.strategy import StrategyTrials
from expmgr.states import TrialState


def test_a_submitted_trials_future_is_settled_once_with_its_end():
    strategy = StrategyTrials(running=True)
    future = strategy.submitted("s1")
    assert "s1" in strategy and not future.done()
    strategy.settle("s1", TrialState.SUCCEEDED, 0.5)
    strategy.settle("s1", TrialState.FAILED, None)     # told again: the first answer stands
    assert future.result(timeout=0) == (TrialState.SUCCEEDED, 0.5) and "s1" not in strategy
    strategy.settle("never-submitted", TrialState.FAILED, None)   # a tuner's trial: nothing to settle
    strategy.finished("Traceback ...")
    assert (strategy.running, strategy.error) == (False, "Traceback ...")

"""The tuner's side of the search, as the runner keeps it: sequence ids handed out against
``maxTrialNumber``, whether the tuner may have more trials or waits for running ones, and
what the tuner (and the assessor) hear when a trial ends::

    proposals = Proposals(dispatcher, next_sequence_id=store.next_sequence_id(), logger=logger)
    while proposals.may_ask(config):
        proposal = await proposals.ask(stopping=lambda: False)
        if proposal is True: continue          # declined, but a trial ended meanwhile: ask again
        if proposal is False: break            # it waits for results, or has no more
        sequence_id, generated = proposal      # create the trial
    proposals.trial_ended(record, TrialState.SUCCEEDED, 0.9, has_final=True, strategy_trial=False, assessed=False)
    source = checkpoint_source_of(answer.checkpoint_from, store.trial_by_sequence)   # PBT's exploit
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from expmgr.engine.dispatching import Dispatcher, DispatcherError, GenerateAnswer, Generated, TunerWaits
from expmgr.metrics import metric_number
from expmgr.states import TrialState
from expmgr.store import TrialRecord

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig


class Proposals:
    """Sequence ids, the budget they count against, and the tuner's last word (no more
    trials, or it waits for results)."""

    def __init__(self, dispatcher: Dispatcher | None, *, next_sequence_id: int, logger: logging.Logger) -> None:
        self._dispatcher = dispatcher
        self._logger = logger
        self._next_sequence_id = next_sequence_id
        self.submitted = next_sequence_id
        """Trials counted against maxTrialNumber (earlier runs' included)."""
        self.no_more_trials = False
        self.waiting = False
        """The tuner has nothing until a running trial reports or ends (NoTrialYetError)."""
        self._ends_told = 0
        """Trial ends told to the tuner; a wait it asked for while one came does not count."""

    def budget_left(self, config: "ResolvedConfig") -> bool:
        limit = config.max_trial_number
        return limit is None or self.submitted < limit

    def has_more(self, config: "ResolvedConfig") -> bool:
        """Whether the tuner may still propose trials, now or once running ones report."""
        return config.tuner is not None and not self.no_more_trials and self.budget_left(config)

    def may_ask(self, config: "ResolvedConfig") -> bool:
        """Whether the tuner is to be asked for a trial now (it does not wait)."""
        return self.has_more(config) and not self.waiting

    def reserve(self) -> tuple[int, int]:
        """Count a trial against maxTrialNumber and give it the next sequence id; with a mark
        for ``declined`` (the trial ends told so far)."""
        self.submitted += 1
        self._next_sequence_id += 1
        return self._next_sequence_id - 1, self._ends_told

    def release(self, sequence_id: int) -> None:
        """Undo a reservation whose trial was not created (its id is reused if it was the last)."""
        self.submitted -= 1
        if self._next_sequence_id == sequence_id + 1:
            self._next_sequence_id = sequence_id

    async def ask(self, *, stopping: Callable[[], bool]) -> tuple[int, Generated] | bool:
        """Ask the tuner for the next trial: its sequence id and the tuner's proposal; else
        (its reservation undone) True to ask again at once, False to stop asking this turn
        (the tuner waits or has no more, or ``stopping()``: the experiment stops)."""
        assert self._dispatcher is not None   # may_ask says no without a tuner
        sequence_id, asked = self.reserve()
        # Asked only now: the tuner has seen every result that came in (a dispatcher may
        # have computed these ahead only for a tuner that declares results change nothing).
        answer = await self._dispatcher.generate(sequence_id)
        if stopping() or not isinstance(answer, Generated):
            self.release(sequence_id)
            return not stopping() and self.declined(answer, asked)
        return sequence_id, answer

    def declined(self, answer: GenerateAnswer, asked: int) -> bool:
        """The tuner gave no trial when asked (at mark ``asked``): it waits for running trials
        or has no more. True: ask again at once (a trial ended meanwhile, so what it waited
        for may have come)."""
        if isinstance(answer, TunerWaits):
            if self._ends_told != asked:
                return True
            self._logger.debug("the tuner waits for running trials to report")
            self.waiting = True
        else:
            self._logger.info("the tuner has no more trials")
            self.no_more_trials = True
        return False

    def waits_in_vain(self, anything_running: bool) -> bool:
        """The tuner waits for results but nothing runs that could give one: it has no more
        trials (said, and True)."""
        if self.waiting and not anything_running:
            self._logger.warning("the tuner waits for results but no trial is running; it has no more trials")
            self.no_more_trials = True
            return True
        return False

    def space_changed(self) -> None:
        """A tuner that had no more trials (a used-up grid) or waited may have new points now."""
        self.no_more_trials = self.waiting = False

    def trial_ended(self, record: TrialRecord, status: TrialState, final_value: Any, has_final: bool, *,
                    strategy_trial: bool, assessed: bool) -> None:
        """Tell the tuner how its trial ended (once); of a strategy's or a user's trial
        (``strategy_trial``) only the assessor hears (``assessed``), the tuner did not propose it."""
        if self._dispatcher is None:
            return
        if strategy_trial:
            if assessed:   # the assessor compares running trials with ended ones, the strategy's too
                self._dispatcher.tell_end(record.sequence_id, record.trial_id, status == TrialState.SUCCEEDED,
                                          assessor_only=True)
            return
        self.waiting = False  # what it waited for may have come
        self._ends_told += 1
        # A non-finite result (NaN from a diverging trial) would poison the tuner's model:
        # the tuner hears of that trial as a failure, without the result.
        usable = has_final and metric_number(final_value) is not None
        if usable:
            self._dispatcher.tell_result(record.sequence_id, record.parameters, final_value)
        elif has_final:
            self._logger.warning("trial %s: its final result %s is not a finite number; the tuner "
                                 "is told the trial failed", record.trial_id, final_value)
        self._dispatcher.tell_end(record.sequence_id, record.trial_id,
                                  status == TrialState.SUCCEEDED and (usable or not has_final))


def checkpoint_source_of(parameter_id: Any, trial_by_sequence: Callable[[int], TrialRecord | None]) -> TrialRecord | None:
    """The trial whose checkpoint the tuner wants a new trial to start from, by its parameter
    id (``trial_by_sequence``: the store's), None for none; DispatcherError when no trial has
    that id (the tuner's fault: the experiment ends in ERROR)."""
    if parameter_id is None:
        return None
    source = trial_by_sequence(parameter_id) if isinstance(parameter_id, int) else None
    if source is None:
        raise DispatcherError(f"the tuner named parameter id {parameter_id!r} as a checkpoint source, but no trial has it")
    return source

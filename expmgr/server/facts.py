"""The experiment-wide facts of the web UI's changes answers kept up to date rather than
read again: the best trial, whether trials ran on several hosts, the count of trials in
each state and whether the last run was preempted. Read afresh they cost a pass over every
trial (the best trial alone a fifth of a second at 10,000 trials), and the websocket asks
for them up to four times a second while trials end.

``refresh(store)`` reads what changed since its last refresh (the store's changes, trials
alone, and the events added since) and updates the facts from it; a change it cannot
account for incrementally (a trial's final result replaced or gone, as when a failed trial
is retried) makes it read that fact afresh. The facts equal what ``views`` reads afresh
(``experiment_view``'s ``bestTrialId``, ``multiHost``, ``preempted`` and ``resultKeys``,
``job_statistics_view``)::

    facts = ExperimentFacts()
    with store.snapshot():
        facts.refresh(store)
        view = views.experiment_view(store, read_only, facts=facts)
"""
from __future__ import annotations

from collections import Counter

from expmgr.metrics import best_result, is_better, metric_number
from expmgr.server.results import add_result_keys, stored_result_keys
from expmgr.states import TrialState
from expmgr.store import Changes, Store


class ExperimentFacts:
    """See the module docstring. One thread at a time (the server's store reader)."""

    def __init__(self) -> None:
        self._cursor: str | None = None
        self._statuses: dict[str, TrialState] = {}
        self._numbers: dict[str, float | None] = {}
        """Each trial's final result's number, for trials with a final result."""
        self._minimize: bool | None = None
        self._best: tuple[str, float] | None = None
        self._hosts: set[str] = set()
        self._last_event = 0
        self._preempted_at: float | None = None
        self.status_counts: Counter[TrialState] = Counter()
        self.result_keys: list[str] = []
        """The keys of the final results seen (``results.result_keys``); they only grow."""
        self.full_reads = 0
        """How many refreshes read a fact afresh (the first one does)."""

    @property
    def best(self) -> tuple[str, float] | None:
        """(trial id, number) of the best final result, as ``views.experiment_view`` finds it."""
        return self._best

    @property
    def multi_host(self) -> bool:
        """``views.runs_on_several_hosts``."""
        return len(self._hosts) > 1

    def was_preempted(self, store: Store) -> bool:
        """``store.was_preempted()``, from the preemption notices seen by the last refresh."""
        return store.preempted_in_last_run(self._preempted_at)

    def refresh(self, store: Store) -> None:
        """Update the facts to the store's present state; call inside ``store.snapshot()``."""
        minimize = store.profile().minimizes
        changes = store.changes(self._cursor, metrics=False)
        if changes.full or minimize != self._minimize:  # first time, or another store
            self._read_afresh(store, minimize, changes)
            self._cursor = changes.cursor
            return
        self._cursor = changes.cursor
        best_changed = False
        for trial in changes.trials:
            old = self._statuses.get(trial.trial_id)
            if old != trial.status:
                if old is not None:
                    self._count(old, -1)
                self._count(trial.status, 1)
                self._statuses[trial.trial_id] = trial.status
            if len(self._hosts) < 2:
                self._add_hosts(store, trial.trial_id, trial.host, trial.attempts)
            final = changes.finals.get(trial.trial_id)
            if final is not None:
                add_result_keys(self.result_keys, final.value)
            number = None if final is None else metric_number(final.value)
            had = trial.trial_id in self._numbers
            if final is None and not had:
                continue
            if had and (final is None or self._numbers[trial.trial_id] != number):
                best_changed = True  # replaced or gone: its place among equals is not known here
                continue
            if not had:  # a new final result: after every earlier one, so it wins only if better
                self._numbers[trial.trial_id] = number
                if number is not None and is_better(number, None if self._best is None else self._best[1],
                                                    minimize):
                    self._best = (trial.trial_id, number)
        if best_changed:
            self._read_numbers(store, minimize)
        notice, self._last_event = store.latest_preemption(self._last_event)
        if notice is not None:
            self._preempted_at = notice if self._preempted_at is None else max(self._preempted_at, notice)

    def _count(self, status: TrialState, delta: int) -> None:
        self.status_counts[status] += delta
        if self.status_counts[status] <= 0:
            del self.status_counts[status]

    def _add_hosts(self, store: Store, trial_id: str, latest: str | None, attempts: int) -> None:
        if attempts > 1:  # an earlier attempt may have run elsewhere, and ended before this refresh
            self._hosts.update(attempt.host for attempt in store.attempts(trial_id) if attempt.host is not None)
        elif latest is not None:
            self._hosts.add(latest)

    def _read_numbers(self, store: Store, minimize: bool) -> None:
        self.full_reads += 1
        self._numbers = store.final_numbers()
        self._best = best_result(self._numbers.items(), minimize)

    def _read_afresh(self, store: Store, minimize: bool, everything: Changes) -> None:
        self._minimize = minimize
        self._read_numbers(store, minimize)
        self._statuses = {trial.trial_id: trial.status for trial in everything.trials}
        self.status_counts = Counter(self._statuses.values())
        self._hosts = set(store.hosts())
        self.result_keys = stored_result_keys(store)
        self._preempted_at, self._last_event = store.latest_preemption()

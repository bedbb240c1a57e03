"""The trial runner: the one loop that decides (after Ray Tune's TrialRunner).

It asks the tuner for parameters, gives trials to the training service within
``trialConcurrency`` and ``maxTrialNumber``, ingests metrics, enforces the
duration limits, and commits every step to the store before acting on it.
Everything here runs on the manager's event loop::

    resolved = ResolvedConfig.from_config(config)
    runner = TrialRunner(exp_id, resolved, store, paths, port, logger, dispatcher=dispatcher,
                         training=functools.partial(create_training_service, resolved, paths=paths))
    final_state = await runner.run()        # from another task: runner.request_stop()

Checking reports is in ``reports.py``, an attempt's reports and the decision each
returns in ``intake.py``, what the dispatcher answers in ``dispatching.py``, and queueing
the writes the store refuses in ``writes.py``. This module is still over ~450 lines because the rest is one state
machine: every handler reads and changes the same live trials, queues and limits.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import secrets
import signal
import string
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from expmgr import trial as trial_api
from expmgr.algorithms.tuner import TRIAL_CHECKPOINT_DIR
from expmgr.config import BUDGET_FIELDS, UPDATABLE_FIELDS as UPDATABLE_TABLE, ConfigError, check_parameters
from expmgr.layout import ExperimentPaths
from expmgr.engine import reports, writes
from expmgr.engine.dispatching import Assessment, Dispatcher, DispatcherError, Generated, TunerWaits
from expmgr.engine.imports import ImportBatch
from expmgr.engine.intake import AskAssessor, AttemptReports
from expmgr.engine.launching import RETRY_MAX as LAUNCH_RETRY_MAX, LaunchPause
from expmgr.engine.errors import MetricRejected, RefusalKind, SubmissionRefused, UpdateRefused
from expmgr.engine.writes import WRITE_BUSY_TIMEOUT_MS, WriteQueue
from expmgr.metrics import is_better, metric_number
from expmgr.store import AttemptRecord, MetricRecord, StoreUnavailable, TrialRecord, WritableStore
from expmgr.states import ExperimentState, TrialState
from expmgr.training.base import SystemLaunchError, TrainingService, TrainingServiceError, TrialEvents, TrialLaunch

if TYPE_CHECKING:
    from expmgr.config import AlgorithmConfig, ResolvedConfig

_TRIAL_ID_ALPHABET = string.ascii_letters + string.digits

_REQUEUED_ON_RESUME = frozenset({TrialState.WAITING, TrialState.RUNNING, TrialState.USER_CANCELED,
                                 TrialState.SYS_CANCELED, TrialState.PREEMPTED})
"""Trials a resume runs again: those the previous run did not let finish, whether it was
stopped or ended by a failure (a dispatcher crash cancels its trials SYS_CANCELED), but
not those the user killed one by one."""


UPDATABLE_FIELDS = {entry.field: entry.attribute for entry in UPDATABLE_TABLE}
"""Config fields that may change while the experiment runs (camelCase -> attribute)."""


class _StrategyFailed(Exception):
    """The strategy raised; its traceback is the message."""


class _HandlerFailed(Exception):
    """An event handler of the loop raised (a bug of ours); its traceback is the message."""


@dataclass
class _LiveTrial:
    """A trial whose attempt is running, as the runner tracks it."""

    record: TrialRecord
    attempt: int
    token: str
    deadline: float | None
    """When ``maxTrialDuration`` runs out; set when its process starts."""
    last_activity: float
    """When the trial last reported or wrote output; for ``trialIdleTimeout``."""
    reports: AttemptReports
    """What the attempt reported (stored), and its history for the assessor."""
    started: bool = False
    """Its process runs: a remote service may take a while to place it, and the trial's
    clocks start here, not at the launch."""
    stop_reason: TrialState | None = None


class _BestResult:
    """The best final result seen (by its ``default`` number) and its trial; a non-finite
    one (NaN, an infinity) is never the best."""

    def __init__(self, minimize: bool) -> None:
        self._minimize = minimize
        self._best: tuple[float, str] | None = None

    def offer(self, trial_id: str, value: Any) -> None:
        number = metric_number(value)
        if number is not None and is_better(number, None if self._best is None else self._best[0], self._minimize):
            self._best = (number, trial_id)

    def describe(self) -> str:
        return "" if self._best is None else f", best {self._best[0]:g} (trial {self._best[1]})"


def _algorithm_spec(algorithm: "AlgorithmConfig | None") -> dict[str, Any] | None:
    if algorithm is None:
        return None
    return {"name": algorithm.name, "className": algorithm.class_name,
            "codeDirectory": str(algorithm.code_directory) if algorithm.code_directory else None,
            "classArgs": algorithm.class_args or {}}


def _loop_handler(handler: Callable[..., Any]) -> Callable[..., Any]:
    """An event handler of the loop (a trial event, a timer, a queued write): whatever it
    raises ends the experiment in ERROR with the traceback instead of being lost
    (which would leave a trial RUNNING and the experiment hanging)."""
    @functools.wraps(handler)
    def run(self: "TrialRunner", *args: Any, **kwargs: Any) -> Any:
        try:
            return handler(self, *args, **kwargs)
        except Exception:
            self._handler_failed(handler.__name__)
            return None
    return run


class TrialRunner:
    """Drives one experiment's trials to the end; see the module docstring."""

    def __init__(self, exp_id: str, config: "ResolvedConfig", store: WritableStore,
                 paths: ExperimentPaths, port: int, logger: logging.Logger, *,
                 training: Callable[[TrialEvents], TrainingService], dispatcher: Dispatcher | None,
                 on_state_change: Callable[[ExperimentState], None] = lambda state: None,
                 with_strategy: bool = False, resumed: bool = False, url_prefix: str = "",
                 on_store_unwritable: Callable[[str | None], None] = lambda notice: None,
                 clock: Callable[[], float] = time.time) -> None:
        """``training`` builds the training service, given the runner as its listener;
        ``dispatcher`` hosts the tuner and assessor (None when the experiment has neither);
        ``clock`` is what the duration limits are measured with (a test's own clock)."""
        self.exp_id = exp_id
        self.url_prefix = url_prefix
        """Where trials send their reports: the server's url prefix (the host is the service's)."""
        self.config = config
        self.store = store
        self.paths = paths
        self.port = port
        self.logger = logger
        self._on_state_change = on_state_change
        self._on_store_unwritable = on_store_unwritable
        """Told ``launching_paused`` when launching pauses (the store cannot be written, or
        trials cannot be started), when why changes, and None when it goes on."""
        self.state = ExperimentState.INITIALIZED
        self._clock = clock
        self.dispatcher = dispatcher
        self.training = training(self)
        self._live: dict[str, _LiveTrial] = {}
        self._retries: deque[tuple[TrialRecord, int]] = deque()
        self._submitted_by_strategy: deque[TrialRecord] = deque()
        self._outcomes: dict[str, concurrent.futures.Future] = {}
        """Futures of the strategy's trials, resolved with (final state, final value)."""
        self._strategy_running = with_strategy
        self._resumed = resumed
        self._strategy_error: str | None = None
        self._handler_error: str | None = None
        self._trial_ids: set[str] = set()
        self._secret = b""  # set by run(): see reports.TRIAL_SECRET_FILE
        self._writes = WriteQueue(record_outage=store.record_store_outage, on_paused=self._store_paused,
                                  on_resumed=self._store_resumed, on_failed=self._handler_failed)
        """Every store write goes through it: while the store refuses writes (locked,
        read-only, full) they wait there, in order, and no trial is launched meanwhile."""
        self._launching = LaunchPause()
        """Paused while trials cannot be started for the system's reason (SystemLaunchError)."""
        self._waiting_reasons: dict[str, str | None] = {}
        """The waiting reason stored for each trial that waits to start (``_note_waiting_reasons``)."""
        self._ended: dict[TrialState, int] = {}
        self._progress = _BestResult(minimize=config.minimizes)
        self._wake = asyncio.Event()
        self._space_updates = asyncio.Lock()
        """Held while the dispatcher is asked to take a new search space."""
        self._imports = asyncio.Lock()
        """Held while an import is sent: frames of several in one turn of the loop would add up to a stall."""
        self._stop_requested = False
        self._ending = False
        self.budget_raised_while_ending = False
        """maxTrialNumber or maxExperimentDuration changed after the search began to end: the
        manager runs the experiment again for them once it ended DONE (see more_trials.py)."""
        self._preempted = False
        self._no_more_trials = False
        self._tuner_waiting = False
        """The tuner has nothing until a running trial reports or ends (NoTrialYetError)."""
        self._ends_told = 0
        """Trial ends told to the tuner; a wait it asked for while one came does not count."""
        self._next_sequence_id = store.next_sequence_id()
        self._submitted = self._next_sequence_id
        self._start = 0.0  # when the experiment's clock started, earlier runs included; set by run()
        self._run_id: int | None = None
        self._dead_run: tuple[int, float] | None = None
        """On resume: the run whose manager died (no end recorded), and its last recorded event."""
        self._tasks: set[asyncio.Task] = set()
        """Tasks in flight (imports, assessments, the dispatcher-exit waiter): the loop keeps
        only weak references to tasks, so one nobody holds could vanish mid-flight."""

    # -- the loop -----------------------------------------------------------

    async def run(self) -> ExperimentState:
        """Run until DONE, STOPPED or ERROR; returns that state, committed."""
        error: str | None = None
        self.store.set_busy_timeout(WRITE_BUSY_TIMEOUT_MS)
        try:
            self._secret = reports.load_trial_secret(self.paths.root)
            # maxExperimentDuration counts the time earlier runs (before a resume) took too.
            self._start = self._clock() - self.store.seconds_run()
            # A run its manager died in has no end: read before this run begins (_restore ends it).
            self._dead_run = self.store.open_run() if self._resumed else None
            self._writes.commit(self._begin_run, time.time())
            await self._start_components()
            self._set_state(ExperimentState.RUNNING)
            await self._loop()
        except DispatcherError as failure:
            error = f"the tuner failed:\n{failure}"
        except _StrategyFailed as failure:
            error = f"the strategy failed:\n{failure}"
        except _HandlerFailed as failure:
            error = str(failure)
        except TrainingServiceError as failure:
            error = str(failure)
        except Exception:  # a bug of ours: the experiment must still end cleanly
            error = traceback.format_exc()
        return await self._finish(error)

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        """Run ``coroutine`` as a task held in ``_tasks`` until it is done."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _begin_run(self, started: float) -> None:
        self._run_id = self.store.begin_run(started)

    def _end_run(self, ended: float) -> None:
        if self._run_id is not None:
            self.store.end_run(self._run_id, ended)

    async def _start_components(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.start()   # the manager may have started it already: nothing then
            self._spawn(self._wake_when_dispatcher_exits(self.dispatcher))
        await self.training.start()   # while the dispatcher's interpreter starts and imports
        if self.dispatcher is not None:
            await self.dispatcher.initialize(self.config.search_space, _algorithm_spec(self.config.tuner),
                                             _algorithm_spec(self.config.assessor))
        if self._resumed:
            self._restore()

    def _restore(self) -> None:
        """On resume: pick up what trials reported while no manager ran, requeue the
        trials that did not finish (first, with their parameters and next attempt),
        count the ended ones for the progress line, and replay every stored result to the
        fresh tuner."""
        now = time.time()
        finals = self.store.final_metrics()
        open_attempts = {a.trial_id: a for a in self.store.attempts() if a.end_time is None}
        died = self._end_dead_run(open_attempts, now)
        killed = self.store.killed_trials()
        history = []
        for record in self.store.trials():
            self._trial_ids.add(record.trial_id)
            if record.status in _REQUEUED_ON_RESUME and record.trial_id not in killed:
                open_attempt = open_attempts.get(record.trial_id)
                if open_attempt is not None:  # its manager died under it
                    self._end_leftover_process(record.trial_id, open_attempt)
                    attempt = open_attempt.attempt
                    live = _LiveTrial(record, attempt, reports.attempt_token(self._secret, record.trial_id, attempt), None,
                                      last_activity=self._clock(), reports=AttemptReports(
                                          assessed=self._assessed, attempt=attempt,
                                          stored=self.store.metrics(record.trial_id)))
                    self._writes.commit(self._ingest_metrics_file, live)
                    self._writes.commit(functools.partial(self.store.end_attempt, record.trial_id, attempt,
                                                   TrialState.CRASHED, max(open_attempt.start_time, died),
                                                   None, None, trial_status=TrialState.WAITING))
                else:
                    self._writes.commit(self.store.set_trial_status, record.trial_id, TrialState.WAITING)
                requeue = self._retries.appendleft if record.status == TrialState.PREEMPTED else self._retries.append
                requeue((record, record.attempts + 1))
                self._waiting_reasons[record.trial_id] = record.waiting_reason  # the last run's: said again or cleared
                self.logger.info("trial %s is run again (it was %s)", record.trial_id, record.status.value)
            elif record.status.is_finished():  # the progress line goes on from the earlier runs' count
                self._ended[record.status] = self._ended.get(record.status, 0) + 1
                if record.trial_id in finals:
                    self._progress.offer(record.trial_id, finals[record.trial_id].value)
            final = finals.get(record.trial_id)
            usable = final is not None and metric_number(final.value) is not None   # never NaN to the tuner
            history.append({"parameter": record.parameters,
                            "value": final.value if final is not None and usable else None})
        if history and self.dispatcher is not None:
            self.dispatcher.replay_results(history)

    def _end_dead_run(self, open_attempts: dict[str, AttemptRecord], now: float) -> float:
        """When the manager of the run that died was last known alive: its last write to the
        store, or the last output of a trial it ran (the watchdog notes the kill of each
        trial in its stderr as the manager dies). The run and its trials' open attempts end
        there: the time no manager ran counts neither as the experiment's nor as a trial's."""
        if self._dead_run is None:
            return now
        run_id, last_event = self._dead_run
        outputs = [self.training.files.last_output_time(trial_id) for trial_id in open_attempts]
        died = min(now, max([last_event, *outputs]))
        self._writes.commit(self.store.end_run, run_id, died)
        self.logger.info("the last run's manager was last known alive %s; its trials' attempts end there",
                         time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(died)))
        return died

    def _end_leftover_process(self, trial_id: str, attempt: AttemptRecord) -> None:
        """A trial process that outlived its manager is ended by the training service
        (found by pid and start time, never by name)."""
        if attempt.pid is None or attempt.pid_started is None:
            return
        if self.training.end_leftover(trial_id, attempt.pid, attempt.pid_started):
            self.logger.warning("trial %s: its process %d outlived the last run; its group was killed",
                                trial_id, attempt.pid)

    async def _wake_when_dispatcher_exits(self, dispatcher: Dispatcher) -> None:
        await dispatcher.exited.wait()
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            if self.dispatcher is not None and self.dispatcher.failure is not None:
                raise self.dispatcher.failure
            if self._strategy_error is not None:
                raise _StrategyFailed(self._strategy_error)
            if self._handler_error is not None:
                raise _HandlerFailed(self._handler_error)
            if self._stop_requested:
                return
            now = self._clock()
            if self._experiment_time_left(now) == 0:
                self.logger.info("maxExperimentDuration reached; stopping the running trials")
                await self._stop_trials(TrialState.SYS_CANCELED)
                return
            self._enforce_trial_deadlines(now)
            await self._fill_slots()
            self._note_waiting_reasons()
            if self._tuner_waiting and not (self._live or self._retries or self._writes):
                self.logger.warning("the tuner waits for results but no trial is running; it has no more trials")
                self._no_more_trials = True
            no_more_trials = not self._tuner_has_more() and not self._strategy_running
            if no_more_trials and not (self._live or self._retries or self._submitted_by_strategy
                                       or self._writes):
                return
            if no_more_trials and self.state == ExperimentState.RUNNING:
                self._set_state(ExperimentState.NO_MORE_TRIAL)
            try:
                await asyncio.wait_for(self._wake.wait(), self._seconds_to_next_deadline(self._clock()))
            except asyncio.TimeoutError:
                pass

    def _budget_left(self) -> bool:
        limit = self.config.max_trial_number
        return limit is None or self._submitted < limit

    def _tuner_has_more(self) -> bool:
        """Whether the tuner may still propose trials, now or once running ones report."""
        return self.config.tuner is not None and not self._no_more_trials and self._budget_left()

    def _tuner_may_submit(self) -> bool:
        return self._tuner_has_more() and not self._tuner_waiting

    def _may_launch(self) -> bool:
        """Whether a trial may be launched now, capacity of the training service aside."""
        return (len(self._live) < self.config.trial_concurrency
                and not self._stop_requested and self._writes.unwritable is None and not self._writes
                and self._launching.ready(self._clock()))

    def _has_free_slot(self) -> bool:
        return self._may_launch() and self.training.has_capacity()

    def _may_create_waiting(self) -> bool:
        """Whether the tuner's next trial may be created to wait for the training service's
        capacity (``TrainingService.waiting_reason``: no free GPU), as NNI's trials wait:
        within ``trialConcurrency``, the trials already waiting counted."""
        return (self._may_launch() and len(self._live) + len(self._retries) < self.config.trial_concurrency
                and self.training.waiting_reason() is not None)

    async def _fill_slots(self) -> None:
        while self._retries and self._has_free_slot():
            record, attempt = self._retries.popleft()
            await self._launch_attempt(record, attempt)
        while self._submitted_by_strategy and self._has_free_slot():
            record = self._submitted_by_strategy.popleft()
            await self._launch_attempt(record, attempt=1)
        while self._tuner_may_submit() and (self._has_free_slot() or self._may_create_waiting()):
            assert self.dispatcher is not None
            sequence_id = self._reserve_trial()
            ends_told = self._ends_told
            # Asked only now: the tuner has seen every result that came in (a dispatcher may
            # have computed these ahead only for a tuner that declares results change nothing).
            answer = await self.dispatcher.generate(sequence_id)
            if self._stop_requested or not isinstance(answer, Generated):
                self._release_trial(sequence_id)
                if self._stop_requested:
                    return
                if isinstance(answer, TunerWaits):
                    if self._ends_told != ends_told:
                        continue  # a trial ended meanwhile: what the tuner waited for may have come
                    self.logger.debug("the tuner waits for running trials to report")
                    self._tuner_waiting = True
                else:
                    self.logger.info("the tuner has no more trials")
                    self._no_more_trials = True
                return
            checkpoint_source = self._checkpoint_source(answer.checkpoint_from)
            record = self._create_trial(sequence_id, answer.parameters)
            if checkpoint_source is not None:
                await self._copy_checkpoint(checkpoint_source, record)
                if self._stop_requested:  # stopped during the copy: it ends with the trials never run
                    self._retries.append((record, 1))
                    return
            if self._writes:  # the store refused to record it: it starts once the store takes writes
                self._retries.append((record, 1))
                return
            if not self.training.has_capacity():  # it waits, first of the tuner's, with the reason said
                self._retries.append((record, 1))
                self._note_waiting_reasons()
                continue
            await self._launch_attempt(record, attempt=1)

    def _note_waiting_reasons(self) -> None:
        """Store why each trial queued to start is not started yet, when that changed: the
        training service's reason (no free GPU), or none while it has capacity."""
        reason = None if self.training.has_capacity() else self.training.waiting_reason()
        for record, _ in self._retries:
            if self._waiting_reasons.get(record.trial_id) != reason:
                self._waiting_reasons[record.trial_id] = reason
                self._writes.commit(self.store.set_waiting_reason, record.trial_id, reason)

    def _reserve_trial(self) -> int:
        """Count a trial against maxTrialNumber and give it the next sequence id."""
        self._submitted += 1
        self._next_sequence_id += 1
        return self._next_sequence_id - 1

    def _release_trial(self, sequence_id: int) -> None:
        """Undo a reservation whose trial was not created (its id is reused if it was the last)."""
        self._submitted -= 1
        if self._next_sequence_id == sequence_id + 1:
            self._next_sequence_id = sequence_id

    def _create_trial(self, sequence_id: int, parameters: dict[str, Any],
                      parameter_source: str = "algorithm") -> TrialRecord:
        """A new WAITING trial, stored (its folder is the training service's, made at launch);
        ``parameter_source`` is NNI's (``_parameter_record``)."""
        trial_id = self._new_trial_id()
        self._trial_ids.add(trial_id)
        if TRIAL_CHECKPOINT_DIR in parameters.values():   # PBT's NNI parameters: the trial's own folder
            parameters = {name: self.training.files.checkpoint_dir(trial_id) if value == TRIAL_CHECKPOINT_DIR else value
                          for name, value in parameters.items()}
        record = TrialRecord(trial_id=trial_id, sequence_id=sequence_id, parameters=parameters,
                             status=TrialState.WAITING, submit_time=time.time(), parameter_source=parameter_source)
        self._writes.commit(self.store.add_trial, record)  # queued if refused: its launch's writes come after it
        return record

    def _checkpoint_source(self, parameter_id: Any) -> TrialRecord | None:
        """The trial whose checkpoint the tuner wants a new trial to start from (by its
        parameter id), None for none; a DispatcherError if no trial has that id."""
        if parameter_id is None:
            return None
        source = self.store.trial_by_sequence(parameter_id) if isinstance(parameter_id, int) else None
        if source is None:
            raise DispatcherError(f"the tuner named parameter id {parameter_id!r} as a checkpoint source, "
                                  "but no trial has it")
        return source

    async def _copy_checkpoint(self, source: TrialRecord, record: TrialRecord) -> None:
        """Start ``record`` from a copy of ``source``'s checkpoint folder, as the tuner
        asked (PBT's exploit); the source folder is left as it is."""
        await self.training.files.copy_checkpoint(source.trial_id, record.trial_id)
        self._writes.commit(self.store.record_checkpoint_source, record.trial_id, source.trial_id)
        self.logger.info("trial %s starts from the checkpoint of trial %s", record.trial_id, source.trial_id)

    # -- changes while running (expctl update, trial kill) ---------------------------

    def update_config(self, field: str, value: Any) -> Awaitable[None] | None:
        """Change ``field`` (camelCase, one of UPDATABLE_FIELDS) to ``value``, validated as
        in a config file; the loop acts on it at once. Raises UpdateRefused. A new search
        space is the tuner's to accept too: then this returns an awaitable, done once the
        dispatcher took it, that raises UpdateRefused if the tuner refused it (the old
        space stays, the experiment goes on)."""
        config = self._updated(field, value)
        if field == "searchSpace" and self.dispatcher is not None and self.config.tuner is not None:
            assert config.search_space is not None   # an update gives one
            return self._update_search_space(config.search_space)
        self._commit_update(field, config)
        return None

    def _updated(self, field: str, value: Any) -> ResolvedConfig:
        """The config with ``field`` set to ``value``; UpdateRefused when it cannot be."""
        from expmgr.config import ConfigError
        if field not in UPDATABLE_FIELDS:
            raise UpdateRefused(RefusalKind.INVALID, f"{field}: cannot be changed while running; "
                                                      f"one of {', '.join(UPDATABLE_FIELDS)} can")
        self._refuse_unless_running()
        try:
            return self.config.with_update(field, value)
        except ConfigError as error:
            raise UpdateRefused(RefusalKind.INVALID, str(error)) from None

    async def _update_search_space(self, space: dict[str, Any]) -> None:
        """Tell the tuner the new (validated) space and wait for its answer; only a space it
        took becomes the config's. One update at a time, so that they apply in order."""
        assert self.dispatcher is not None
        async with self._space_updates:
            try:
                await self.dispatcher.update_search_space(space)
            except DispatcherError as error:
                if error.fatal:   # it ended: the loop ends the experiment
                    raise UpdateRefused(RefusalKind.CONFLICT, f"searchSpace: the tuner failed on it: {error}") from None
                raise UpdateRefused(RefusalKind.INVALID,
                                    f"searchSpace: {error}; the tuner keeps the old search space") from None
            # A tuner that had no more trials (a used-up grid) or waited may have new points now.
            self._no_more_trials = self._tuner_waiting = False
            # Made again from the config now: another field may have changed meanwhile.
            self._commit_update("searchSpace", self._updated("searchSpace", space))

    def _commit_update(self, field: str, config: ResolvedConfig) -> None:
        self.config = config
        if self._ending and any(entry.field == field for entry in BUDGET_FIELDS):
            self.budget_raised_while_ending = True
        new_value = getattr(self.config, UPDATABLE_FIELDS[field])
        self.store.set_config(self.config.to_dict())
        self.logger.info("%s changed to %s", field, json.dumps(new_value))
        if self.state == ExperimentState.NO_MORE_TRIAL and self._tuner_may_submit():
            self._set_state(ExperimentState.RUNNING)
        self._wake.set()

    def import_data(self, batch: ImportBatch, on_taken: Callable[[], None] | None = None) -> int:
        """Give the tuner earlier results (NNI's import, checked by imports.read_import);
        returns how many. They are stored and sent in chunks by a task, the loop running
        between chunks, so that a large import neither blocks the loop nor overflows the
        channel; ``on_taken`` is called once the task is done with them (sent, or failed)."""
        self._refuse_unless_running()
        if self.dispatcher is None or self.config.tuner is None:
            raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {self.exp_id} has no tuner to import results into")
        self._spawn(self._apply_import(batch, on_taken))
        return batch.count

    async def _apply_import(self, batch: ImportBatch, on_taken: Callable[[], None] | None) -> None:
        assert self.dispatcher is not None
        count = batch.count
        try:
            async with self._imports:
                sent = await self.dispatcher.import_frames(batch.chunks(), before_each=self.store.record_import)
        except Exception:  # the import's problem (say the store refused a write), not the experiment's
            self.logger.error("importing %d results failed:\n%s", count, traceback.format_exc())
            return
        finally:
            batch.frames.clear()
            if on_taken is not None:
                on_taken()
        if sent < count:
            self.logger.warning("%d of %d imported results reached the tuner before it ended", sent, count)
        else:
            self.logger.info("%d results imported into the tuner", count)

    def kill_trial(self, trial_id: str) -> None:
        """Stop one trial as USER_CANCELED (SIGTERM, then SIGKILL after the grace period)."""
        self._refuse_unless_running()
        live = self._live.get(trial_id)
        if live is None:
            known = self.store.trial(trial_id)
            raise UpdateRefused(RefusalKind.NOT_FOUND if known is None else RefusalKind.CONFLICT,
                                f"no trial {trial_id!r}" if known is None
                                else f"trial {trial_id} is not running ({known.status.value})")
        self.logger.info("trial %s is killed on request", trial_id)
        self._writes.commit(self.store.record_kill, trial_id)
        self._stop_trial(live, TrialState.USER_CANCELED)

    def _refuse_unless_running(self) -> None:
        if self._stop_requested or self.state.is_finished() or self.state == ExperimentState.STOPPING:
            raise UpdateRefused(RefusalKind.CONFLICT,
                                f"experiment {self.exp_id} is {self.state.value}; it cannot be changed")

    # -- trials submitted by a strategy (NAS-style code in the experiment process) --

    def submit_trial(self, parameters: dict[str, Any]) -> tuple[str, concurrent.futures.Future]:
        """Queue a trial with these parameters; returns its id and a future of its
        (final state, final value). Raises SubmissionRefused."""
        self._refuse_new_trial(budget=False)
        if not isinstance(parameters, dict):
            raise SubmissionRefused(RefusalKind.INVALID,
                                    f"parameters: expected a dict, got {type(parameters).__name__}")
        try:
            json.dumps(parameters)
        except (TypeError, ValueError) as error:
            raise SubmissionRefused(RefusalKind.INVALID, f"parameters: not JSON-serialisable ({error})") from None
        self._refuse_new_trial()
        record = self._create_trial(self._reserve_trial(), parameters, parameter_source="customized")
        outcome: concurrent.futures.Future = concurrent.futures.Future()
        self._outcomes[record.trial_id] = outcome
        self._submitted_by_strategy.append(record)
        self._wake.set()
        return record.trial_id, outcome

    def add_customized_trial(self, parameters: Any) -> TrialRecord:
        """NNI's customized trial: a trial with parameters a user chose (the web UI's "Add
        trial" and "Clone", ``POST trial-jobs``), run as a strategy's is (the tuner does not
        hear of its result, as NNI's tuners ignore customized ones) and counted against
        maxTrialNumber. Raises SubmissionRefused: CONFLICT when the experiment takes no new
        trial or its budget is spent, INVALID naming the parameter the search space refuses."""
        self._refuse_new_trial()
        if self.config.search_space is not None:
            try:
                check_parameters(parameters, self.config.search_space)
            except ConfigError as error:
                raise SubmissionRefused(RefusalKind.INVALID, str(error)) from None
        self.submit_trial(parameters)
        return self._submitted_by_strategy[-1]   # the one just queued

    def _refuse_new_trial(self, budget: bool = True) -> None:
        """SubmissionRefused (CONFLICT) when the experiment takes no new trial: it is ending,
        or (``budget``) maxTrialNumber trials were submitted."""
        if self._stop_requested or self.state.is_finished() or self.state == ExperimentState.STOPPING:
            raise SubmissionRefused(RefusalKind.CONFLICT,
                                    f"experiment {self.exp_id} is {self.state.value}; it takes no new trials")
        if budget and not self._budget_left():
            raise SubmissionRefused(RefusalKind.CONFLICT,
                                    f"maxTrialNumber ({self.config.max_trial_number}) trials were submitted already; "
                                    "raise maxTrialNumber to add one")

    def strategy_finished(self, error: str | None) -> None:
        """The strategy returned (``error`` None) or raised (its traceback)."""
        self._strategy_running = False
        self._strategy_error = error
        self._wake.set()

    def _settle_outcome(self, trial_id: str, status: TrialState, value: Any) -> None:
        outcome = self._outcomes.pop(trial_id, None)
        if outcome is not None and not outcome.done():
            outcome.set_result((status, value))

    async def _launch_attempt(self, record: TrialRecord, attempt: int) -> None:
        token = reports.attempt_token(self._secret, record.trial_id, attempt)
        self._live[record.trial_id] = _LiveTrial(record, attempt, token, deadline=None, last_activity=self._clock(),
                                                 reports=AttemptReports(assessed=self._assessed))
        env: dict[str, str] = {
            trial_api.ENV_EXPERIMENT_ID: self.exp_id,
            trial_api.ENV_TRIAL_ID: record.trial_id,
            trial_api.ENV_SEQUENCE_ID: str(record.sequence_id),
            trial_api.ENV_ATTEMPT: str(attempt),
            trial_api.ENV_MANAGER_HOST: self.training.manager_host(),
            trial_api.ENV_MANAGER_URL_PREFIX: self.url_prefix,
            trial_api.ENV_MANAGER_PORT: str(self.port),
            trial_api.ENV_TOKEN: token,
            trial_api.ENV_LOG_LEVEL: self.config.log_level,
            trial_api.ENV_LOG_LIMITS: self.config.log_limits.as_env(),
        }
        launch = TrialLaunch(trial_id=record.trial_id, attempt=attempt, command=self.config.trial_command,
                             code_directory=self.config.trial_code_directory,
                             parameter_record=self._parameter_record(record), env=env)
        try:
            await self.training.launch(launch)
        except SystemLaunchError as error:   # not the trial's fault: it waits, launching pauses
            self._system_kept_from_starting(record.trial_id, attempt, str(error))
        except TrainingServiceError as error:
            self._not_started(record.trial_id, attempt, str(error))

    def _parameter_record(self, record: TrialRecord) -> dict[str, Any]:
        """The trial's parameter.json; ``parameter_source`` is NNI's, as stored with the trial:
        "customized" for a strategy's trial, "algorithm" for the tuner's."""
        return {"parameter_id": record.sequence_id, "parameter_source": record.parameter_source,
                "parameters": record.parameters, "parameter_index": 0}

    def _not_started(self, trial_id: str, attempt: int, reason: str) -> None:
        """The attempt could not be started (at launch, or later: trial_launch_failed): FAILED."""
        live = self._live.get(trial_id)
        if live is None or live.attempt != attempt:
            return  # not this attempt (it ended already)
        del self._live[trial_id]
        self.logger.error("trial %s could not start: %s", trial_id, reason)
        now = time.time()
        self._writes.commit(self.store.start_attempt, trial_id, attempt, now)
        self._waiting_reasons.pop(trial_id, None)  # starting clears it
        self._writes.commit(self._launch_failed, live.record, attempt, now)
        self._wake.set()

    def _system_kept_from_starting(self, trial_id: str, attempt: int, reason: str) -> None:
        """The attempt could not be started for a reason outside the trial (a full or
        read-only disk, no free descriptor): nothing is recorded against it. The trial
        stays WAITING, first in line with the same attempt, counted neither as a failure
        nor as a new trial; launching pauses (said once) and is tried again with backoff."""
        live = self._live.get(trial_id)
        if live is None or live.attempt != attempt:
            return  # not this attempt (it ended already)
        del self._live[trial_id]
        self._retries.appendleft((live.record, attempt))
        if self._launching.failed(reason, self._clock()):
            self.logger.warning("%s", self.launching_paused)
            self._on_store_unwritable(self.launching_paused)
        else:
            self.logger.debug("trial %s still cannot start: %s", trial_id, reason)
        self._wake.set()

    def _launch_failed(self, record: TrialRecord, attempt: int, now: float) -> None:
        self.store.end_attempt(record.trial_id, attempt, TrialState.FAILED, now, None, None)
        self._trial_ended(record, TrialState.FAILED, None, has_final=False)

    def _new_trial_id(self) -> str:
        while True:
            trial_id = "".join(secrets.choice(_TRIAL_ID_ALPHABET) for _ in range(5))
            if trial_id not in self._trial_ids and not self.paths.trial_dir(trial_id).exists():
                return trial_id

    # -- limits -------------------------------------------------------------

    def _experiment_time_left(self, now: float) -> float | None:
        limit = self.config.max_experiment_duration
        return None if limit is None else max(0.0, self._start + limit - now)

    def _seconds_to_next_deadline(self, now: float) -> float | None:
        deadlines = []
        idle_timeout = self.config.trial_idle_timeout
        for live in self._live.values():
            if live.stop_reason is None and live.started:
                if live.deadline is not None:
                    deadlines.append(live.deadline)
                if idle_timeout is not None:
                    deadlines.append(live.last_activity + idle_timeout)
        left = self._experiment_time_left(now)
        if left is not None:
            deadlines.append(now + left)
        if self._launching.reason is not None and self._retries and self._launching.next_try > now:
            deadlines.append(self._launching.next_try)   # once past, a slot freeing wakes the loop
        return max(0.0, min(deadlines) - now) if deadlines else None

    def _enforce_trial_deadlines(self, now: float) -> None:
        idle_timeout = self.config.trial_idle_timeout
        for live in self._live.values():
            if live.stop_reason is not None or not live.started:
                continue
            if live.deadline is not None and now >= live.deadline:
                self.logger.info("trial %s ran past maxTrialDuration; stopping it", live.record.trial_id)
                self._stop_trial(live, TrialState.EARLY_STOPPED)
            elif idle_timeout is not None and now >= live.last_activity + idle_timeout:
                live.last_activity = max(live.last_activity, self.training.files.last_output_time(live.record.trial_id))
                if now >= live.last_activity + idle_timeout:
                    self.logger.warning("trial %s was silent for %gs (trialIdleTimeout); stopping it as crashed",
                                        live.record.trial_id, idle_timeout)
                    self._stop_trial(live, TrialState.CRASHED)

    def _stop_trial(self, live: _LiveTrial, reason: TrialState) -> None:
        live.stop_reason = reason
        self.training.signal(live.record.trial_id, signal.SIGTERM)
        asyncio.get_running_loop().call_later(self.config.trial_grace_period, self._kill_if_alive,
                                              live.record.trial_id, live.attempt)

    @_loop_handler
    def _kill_if_alive(self, trial_id: str, attempt: int) -> None:
        live = self._live.get(trial_id)
        if live is not None and live.attempt == attempt:
            self.training.signal(trial_id, signal.SIGKILL)

    async def _stop_trials(self, reason: TrialState) -> None:
        for live in self._live.values():
            live.stop_reason = live.stop_reason or reason
        # A preemption tells trials with SIGUSR1 (the cluster's notice), so they can checkpoint.
        await self.training.stop(self.config.trial_grace_period,
                                 signal.SIGUSR1 if self._preempted else signal.SIGTERM)

    # -- stopping -------------------------------------------------------------

    def request_preemption(self) -> None:
        """The machine is being taken away (SIGUSR1): trials get SIGUSR1 to checkpoint and
        ``mark_preempting()``; the experiment stops, resumable, preempted trials first."""
        if not self._stop_requested:
            self._preempted = True
            self._writes.commit(self.store.record_preemption)
            self.logger.warning("experiment %s is preempted; its trials are told with SIGUSR1", self.exp_id)
        self.request_stop()

    @property
    def stop_requested(self) -> bool:
        """Whether a stop (or a preemption) was asked for."""
        return self._stop_requested

    def request_stop(self, *, kill_now: bool = False) -> None:
        """Stop gracefully: no new trials, running ones get SIGTERM then SIGKILL after
        ``trialGracePeriod``; with ``kill_now`` (or when asked twice), SIGKILL at once."""
        if kill_now or self._stop_requested:
            for trial_id in list(self._live):
                self.training.signal(trial_id, signal.SIGKILL)
        self._stop_requested = True
        self._wake.set()

    async def _finish(self, error: str | None) -> ExperimentState:
        self._ending = True
        if self._stop_requested and error is None:
            self._set_state(ExperimentState.STOPPING)
        reason = TrialState.USER_CANCELED if error is None and self._stop_requested else TrialState.SYS_CANCELED
        await self._stop_trials(reason)
        never_run = [record for record, _ in self._retries] + list(self._submitted_by_strategy)
        self._retries.clear()
        self._submitted_by_strategy.clear()
        for record in never_run:
            self._writes.commit(self._never_run, record, reason, time.time())
        write_deadline = time.monotonic() + writes.FINAL_WRITE_PATIENCE
        await self._writes.drain(write_deadline)  # trial ends reach the tuner before it stops
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if error is None and self._handler_error is not None:  # a handler failed while trials stopped
            error = self._handler_error
        if error is not None:
            self.logger.error("experiment failed: %s", error)
            final = ExperimentState.ERROR
        elif self._stop_requested:
            final = ExperimentState.STOPPED
        else:
            final = ExperimentState.DONE
        self._set_state(final, error=error, end_time=time.time())
        self._writes.commit(self._end_run, time.time())
        unrecorded = not await self._writes.drain(write_deadline)
        self._writes.close()
        if unrecorded:
            self.logger.error(
                "the experiment ended %s, but %s could not be written for %gs (%s): its last %d change(s) "
                "(trial and experiment states, results) are not recorded there; the trials' reports are kept "
                "in their metrics.jsonl", final.value, self.store.path, writes.FINAL_WRITE_PATIENCE,
                self._writes.unwritable, len(self._writes))
        return final

    def _never_run(self, record: TrialRecord, reason: TrialState, end_time: float) -> None:
        self.store.set_trial_status(record.trial_id, reason, end_time=end_time)
        self._trial_ended(record, reason, None, has_final=False)

    def _set_state(self, state: ExperimentState, *, error: str | None = None,
                   end_time: float | None = None) -> None:
        self.state = state
        self._writes.commit(functools.partial(self.store.set_experiment_status, state, error=error, end_time=end_time))
        self._on_state_change(state)
        self.logger.info("experiment %s is %s", self.exp_id, state.value)

    # -- writes the store refuses, and handlers that fail ------------------------------

    @property
    def launching_paused(self) -> str | None:
        """What users are told while launching is paused, or None: the store cannot be
        written, or trials cannot be started for a reason outside them (a full or read-only
        disk, no free file descriptor). check-status (``storeUnwritable``), the web UI and
        experiment.log say this."""
        if self._writes.unwritable is not None:
            return f"launching new trials is paused: {self.store.path} cannot be written ({self._writes.unwritable})"
        if self._launching.reason is not None:
            return (f"launching new trials is paused: {self._launching.reason}; not the trial's fault: it waits, "
                    f"and a launch is tried again (every {LAUNCH_RETRY_MAX:g} s at most) until one succeeds")
        return None

    def _store_paused(self, reason: str) -> None:
        self.logger.warning("%s; retrying until it can", self.launching_paused)
        self._on_store_unwritable(self.launching_paused)

    def _store_resumed(self) -> None:
        self.logger.info("%s can be written again%s", self.store.path,
                         "" if self._launching.reason else "; launching new trials goes on")
        self._on_store_unwritable(self.launching_paused)
        self._wake.set()

    def _handler_failed(self, handler: str) -> None:
        """An event handler raised: the experiment ends in ERROR with its traceback."""
        if self._handler_error is None:
            self._handler_error = f"the manager's {handler} failed:\n{traceback.format_exc()}"
        self.logger.error("%s failed; the experiment ends in ERROR", handler, exc_info=True)
        self._wake.set()

    # -- events from the training service (TrialEvents) ------------------------

    @_loop_handler
    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *,
                      pid_started: float | None = None, host: str | None = None) -> None:
        live = self._live.get(trial_id)
        if live is not None and live.attempt == attempt:
            live.started, live.last_activity = True, self._clock()
            if self.config.max_trial_duration is not None:
                live.deadline = live.last_activity + self.config.max_trial_duration
            self._wake.set()  # its deadlines count from now
        self._writes.commit(self.store.start_attempt, trial_id, attempt, time.time(), pid, pid_started, host)
        self._waiting_reasons.pop(trial_id, None)  # starting clears it
        self.logger.debug("trial %s attempt %d started (pid %s%s)", trial_id, attempt, pid,
                          f" on {host}" if host else "")
        if self._launching.succeeded():   # a trial started: the trouble that paused launching is over
            self.logger.info("trial %s started; launching new trials goes on", trial_id)
            self._on_store_unwritable(self.launching_paused)
            self._wake.set()

    @_loop_handler
    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signum: int | None,
                     preempted: bool = False, *, failed: bool = False) -> None:
        live = self._live.pop(trial_id)
        self._writes.commit(self._conclude_exit, live, time.time(), exit_code, signum, preempted, failed)
        self._wake.set()

    @_loop_handler
    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        if system:
            self._system_kept_from_starting(trial_id, attempt, reason)
        else:
            self._not_started(trial_id, attempt, reason)

    @_loop_handler
    def capacity_changed(self) -> None:
        self._wake.set()  # waiting trials may start now, or their reason changed

    @_loop_handler
    def service_failed(self, error: str) -> None:
        """The training service broke (a bug of ours): the experiment ends in ERROR."""
        if self._handler_error is None:
            self._handler_error = f"the training service failed:\n{error}"
        self._wake.set()

    def _conclude_exit(self, live: _LiveTrial, ended: float, exit_code: int | None, signum: int | None,
                       preempted: bool = False, failed: bool = False) -> None:
        """Store the reports the attempt could not send, then its end; queued as one
        write while the store refuses writes (the lines already stored are skipped)."""
        trial_id, attempt = live.record.trial_id, live.attempt
        self._ingest_metrics_file(live)
        if preempted or (exit_code != 0 and live.stop_reason != TrialState.EARLY_STOPPED
                         and self.training.files.marked_preempting(trial_id, attempt)):
            self._trial_preempted(live, ended, exit_code, signum)
            return
        if live.stop_reason is not None:
            status = live.stop_reason
        elif exit_code == 0:
            status = TrialState.SUCCEEDED
        elif signum is not None and not failed:
            status = TrialState.CRASHED
        else:
            status = TrialState.FAILED
        # Only failures count against maxTrialRetries (preemptions and stops do not).
        retry = (status in (TrialState.FAILED, TrialState.CRASHED) and not self._stop_requested
                 and self.store.failed_attempts(trial_id) < self.config.max_trial_retries)
        self.store.end_attempt(trial_id, attempt, status, ended, exit_code, signum,
                               trial_status=TrialState.WAITING if retry else status)
        how = f"exit code {exit_code}" if signum is None else f"signal {signum}"
        # A failure or crash is a WARNING (yellow on a terminal), so that it does not look like a success.
        level = logging.WARNING if status in (TrialState.FAILED, TrialState.CRASHED) else logging.INFO
        if retry:
            self.logger.log(level, "trial %s attempt %d %s (%s); retrying", trial_id, attempt, status.value, how)
            self._retries.append((live.record, attempt + 1))
        else:
            self.logger.log(level, "trial %s %s (%s)", trial_id, status.value, how)
            self._trial_ended(live.record, status, live.reports.final_value, live.reports.has_final)
        self._wake.set()

    def _trial_preempted(self, live: _LiveTrial, ended: float, exit_code: int | None, signum: int | None) -> None:
        """PREEMPTED: run again first, same parameters and checkpoint folder, next attempt,
        counted neither as a failure nor as a new trial; after a stop, on resume."""
        trial_id, requeue = live.record.trial_id, not self._stop_requested
        self.store.end_attempt(trial_id, live.attempt, TrialState.PREEMPTED, ended, exit_code, signum,
                               trial_status=TrialState.WAITING if requeue else TrialState.PREEMPTED)
        self.logger.warning("trial %s attempt %d PREEMPTED; %s", trial_id, live.attempt,
                         "it runs again first" if requeue else "a resume runs it again first")
        if requeue:
            self._retries.appendleft((live.record, live.attempt + 1))
        elif trial_id in self._outcomes:
            self._settle_outcome(trial_id, TrialState.PREEMPTED, None)
        self._wake.set()

    def _trial_ended(self, record: TrialRecord, status: TrialState, final_value: Any, has_final: bool) -> None:
        """Tell whoever asked for the trial (the tuner or the strategy) how it ended, once."""
        self._ended[status] = self._ended.get(status, 0) + 1
        if has_final:
            self._progress.offer(record.trial_id, final_value)
        self._log_progress()
        if record.trial_id in self._outcomes:
            self._settle_outcome(record.trial_id, status, final_value if has_final else None)
            if self.dispatcher is not None and self.config.assessor is not None:
                # The assessor compares running trials with ended ones, the strategy's too;
                # the tuner did not propose this trial, so it is not told.
                self.dispatcher.tell_end(record.sequence_id, record.trial_id, status == TrialState.SUCCEEDED,
                                         assessor_only=True)
            return
        if self.dispatcher is None:
            return
        self._tuner_waiting = False  # what it waited for may have come
        self._ends_told += 1
        # A non-finite result (NaN from a diverging trial) would poison the tuner's model:
        # the tuner hears of that trial as a failure, without the result.
        usable = has_final and metric_number(final_value) is not None
        if usable:
            self.dispatcher.tell_result(record.sequence_id, record.parameters, final_value)
        elif has_final:
            self.logger.warning("trial %s: its final result %s is not a finite number; the tuner "
                                "is told the trial failed", record.trial_id, final_value)
        self.dispatcher.tell_end(record.sequence_id, record.trial_id,
                                 status == TrialState.SUCCEEDED and (usable or not has_final))

    def _log_progress(self) -> None:
        """One line a trial: how many ended how, how many run, and the best result so far."""
        done = sum(self._ended.values())
        limit = self.config.max_trial_number
        counts = ", ".join(f"{count} {state.value.lower()}" for state, count in sorted(
            self._ended.items(), key=lambda item: -item[1]))
        self.logger.info("progress: %d%s trials ended (%s), %d running%s", done, f"/{limit}" if limit else "",
                         counts, len(self._live), self._progress.describe())

    @_loop_handler
    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        """A lost attempt: CRASHED (as if SIGKILLed), or PREEMPTED and run again first."""
        self.logger.warning("trial %s was %s: %s", trial_id, "preempted" if preempted else "lost", reason)
        self.trial_exited(trial_id, attempt, None, signal.SIGKILL, preempted)

    # -- metrics ----------------------------------------------------------------

    def receive_metric(self, trial_id: str, token: str | None, report: Any) -> None:
        """Store a report POSTed by a running trial and tell the tuner or assessor.

        Raises MetricRejected: FORBIDDEN for a wrong token, INVALID for a bad field,
        CONFLICT for another attempt, UNAVAILABLE when the store cannot take it now (the
        trial's line in metrics.jsonl is stored when the trial ends).
        """
        try:
            self._receive_metric(trial_id, token, report)
        except MetricRejected:
            raise
        except Exception:
            self._handler_failed("receive_metric")
            raise MetricRejected(RefusalKind.FAILED,
                                 "the manager failed on this report; the experiment ends in ERROR") from None

    def _receive_metric(self, trial_id: str, token: str | None, report: Any) -> None:
        live = self._live.get(trial_id)
        if live is None or token is None or not secrets.compare_digest(token, live.token):
            raise MetricRejected(RefusalKind.FORBIDDEN, f"no running trial {trial_id!r} with this token")
        if not isinstance(report, dict):
            raise MetricRejected(RefusalKind.INVALID, "body: expected a JSON object")
        metric = reports.parse_report(trial_id, report)
        if metric.attempt != live.attempt:
            raise MetricRejected(RefusalKind.CONFLICT,
                                 f"attempt: {metric.attempt} is not the running attempt {live.attempt}")
        if not live.reports.is_new(metric.sequence):
            return  # seen before: reports are idempotent
        not_now = ("the experiment's database cannot be written now ({}); the report is kept in "
                   "metrics.jsonl and stored when the trial ends")
        if self._writes.unwritable is not None or self._writes:
            raise MetricRejected(RefusalKind.UNAVAILABLE,
                                 not_now.format(self._writes.unwritable or "earlier writes wait"))
        try:
            self._accept_metric(live, metric)
        except StoreUnavailable as error:
            self._writes.refused(error)
            raise MetricRejected(RefusalKind.UNAVAILABLE, not_now.format(error.reason)) from None

    def _accept_metric(self, live: _LiveTrial, metric: MetricRecord) -> None:
        """Store the metric (StoreUnavailable if the store refuses it: then it is not
        seen, and its line in metrics.jsonl is read again later)."""
        if not live.reports.is_new(metric.sequence):
            return  # seen before: reports are idempotent
        # Counted as seen only once committed (the store's refusal raises before).
        decision = live.reports.stored(metric, newly=self.store.add_metric(metric))
        live.last_activity = self._clock()
        if isinstance(decision, AskAssessor) and live.stop_reason is None:
            self._spawn(self._assess(live, decision.history))

    @property
    def _assessed(self) -> bool:
        """Whether an assessor judges the trials' intermediate results."""
        return self.dispatcher is not None and self.config.assessor is not None

    async def _assess(self, live: _LiveTrial, history: Sequence[Any]) -> None:
        try:
            await self._assess_now(live, history)
        except Exception:
            self._handler_failed("_assess")

    async def _assess_now(self, live: _LiveTrial, history: Sequence[Any]) -> None:
        assert self.dispatcher is not None
        try:
            assessment = await self.dispatcher.assess(live.record.trial_id, history)
        except DispatcherError:
            return  # the loop sees the dispatcher's failure
        # Only the attempt assessed is stopped (a resume's dead attempt is assessed too).
        if assessment is Assessment.STOP and live.stop_reason is None and self._live.get(live.record.trial_id) is live:
            self.logger.info("the assessor stops trial %s early", live.record.trial_id)
            self._stop_trial(live, TrialState.EARLY_STOPPED)

    def _ingest_metrics_file(self, live: _LiveTrial) -> None:
        """Pick up reports the trial wrote but could not send (the service reads them, from
        metrics.jsonl): lines of this attempt whose MAC matches its token. A bad line (not
        UTF-8, not JSON, a bad field, over its size limit, not signed by this attempt) is
        skipped with a warning naming its line, in experiment.log and the trial's log."""
        for number, line in self.training.files.unsent_reports(live.record.trial_id):
            try:
                metric = reports.parse_metrics_line(line, live.record.trial_id, live.attempt, live.token)
            except reports.BadReportLine as error:
                self._skip_line(live, number, str(error))
                continue
            if metric is not None:
                self._accept_metric(live, metric)

    def _skip_line(self, live: _LiveTrial, number: int, reason: str) -> None:
        if not live.reports.first_skip(number):
            return
        message = self.training.files.note_skipped(live.record.trial_id, number, reason)
        self.logger.warning("trial %s: %s", live.record.trial_id, message)

"""The trial runner: the one loop that decides (after Ray Tune's TrialRunner).

It asks the tuner for parameters, gives trials to the training service within
``trialConcurrency`` and ``maxTrialNumber``, ingests metrics, enforces the
duration limits, and commits every step to the store before acting on it.
Everything here runs on the manager's event loop::

    resolved = ResolvedConfig.from_config(config)
    runner = TrialRunner(exp_id, resolved, store, paths, port, logger, dispatcher=dispatcher,
                         training=functools.partial(create_training_service, resolved, paths=paths))
    final_state = await runner.run()        # from another task: runner.request_stop()

The decisions are its collaborators', each owning its state and returning an answer
(as Ray Tune's schedulers do); they never import the runner (tests/test_layers.py):
the live attempts, started and stopped through the training service (``live.py``, as
Tune's executor), taking reports in (``receiving.py``, ``intake.py``, ``reports.py``),
the tuner's sequence ids and budget (``proposals.py``), new trials (``new_trials.py``),
deadlines, exits (``outcomes.py``), the resume plan, config updates (``updates.py``),
command checks, the launch queue (``waiting.py``), pausing launches and queued writes.
This module keeps the loop, the training service's events, and applies what they decide.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import signal
import time
import traceback
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from expmgr.layout import ExperimentPaths
from expmgr.engine import command_checks as checks, reports, writes
from expmgr.engine.deadlines import Deadlines, overdue_line
from expmgr.engine.dispatching import Dispatcher, algorithm_spec
from expmgr.engine.imports import ImportBatch, send_import
from expmgr.engine.intake import AttemptReports
from expmgr.engine.launching import LaunchPause, trial_launch
from expmgr.engine.live import LiveAttempt, LiveAttempts
from expmgr.engine.new_trials import NewTrials
from expmgr.engine.outcomes import (HandlerFailed, StrategyFailed, cancel_reason, exit_outcome, failure_text,
                                    final_state)
from expmgr.engine.progress import Progress
from expmgr.engine.proposals import Proposals, checkpoint_source_of
from expmgr.engine.receiving import ReportReceiver
from expmgr.engine.resume import plan_resume
from expmgr.engine.strategy import StrategyTrials
from expmgr.engine.updates import ConfigUpdates, change_line, raises_budget
from expmgr.engine.waiting import WaitingTrials
from expmgr.engine.writes import WRITE_BUSY_TIMEOUT_MS, WriteQueue
from expmgr.store import AttemptRecord, TrialRecord, WritableStore
from expmgr.states import ExperimentState, TrialState
from expmgr.training.base import TrainingService, TrialEvents

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig


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
                 with_strategy: bool = False, resumed: bool = False, same_manager: bool = False,
                 url_prefix: str = "",
                 on_store_unwritable: Callable[[str | None], None] = lambda notice: None,
                 clock: Callable[[], float] = time.time) -> None:
        """``training`` builds the training service, given the runner as its listener;
        ``dispatcher`` hosts the tuner and assessor (None when the experiment has neither);
        ``clock`` is what the duration limits are measured with (a test's own clock);
        ``same_manager``: this process served the experiment since its last run (more trials
        for a DONE experiment), so its new run follows no time away."""
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
        self._live = LiveAttempts(self.training, on_failed=self._handler_failed)
        self._waiting = WaitingTrials()
        self._strategy = StrategyTrials(running=with_strategy)
        self._resumed = resumed
        self._same_manager = same_manager
        self._handler_error: str | None = None
        self._new_trials = NewTrials(folder_of=paths.trial_dir, checkpoint_dir=self.training.files.checkpoint_dir)
        self._writes = WriteQueue(record_outage=store.record_store_outage, on_paused=self._store_paused,
                                  on_resumed=self._store_resumed, on_failed=self._handler_failed)
        """Every store write goes through it: while the store refuses writes (locked,
        read-only, full) they wait there, in order, and no trial is launched meanwhile."""
        self._launching = LaunchPause()
        """Paused while trials cannot be started for the system's reason (SystemLaunchError)."""
        self._progress = Progress(minimize=config.minimizes)
        self._wake = asyncio.Event()
        self._imports = asyncio.Lock()
        """Held while an import is sent: frames of several in one turn of the loop would add up to a stall."""
        self._stop_requested = False
        self._ending = False
        self.budget_raised_while_ending = False
        """maxTrialNumber or maxExperimentDuration changed after the search began to end: the
        manager runs the experiment again for them once it ended DONE (see more_trials.py)."""
        self._preempted = False
        self._keep_trials = False
        """A stop that leaves the running trials running (expctl stop --keep-trials)."""
        self._proposals = Proposals(dispatcher, next_sequence_id=store.next_sequence_id(), logger=logger)
        self._deadlines = Deadlines()   # its clock's start is set by run()
        self._updates = ConfigUpdates(dispatcher, updated=self._updated, apply=self._apply_update,
                                      space_taken=self._proposals.space_changed)
        self._receiver = ReportReceiver(
            self._live, store, self._writes, self.training.files, logger, dispatcher=dispatcher, spawn=self._spawn,
            on_stored=lambda live: self._deadlines.active(live.trial_id, live.attempt, self._clock()),
            stop_early=lambda live: self._stop_trial(live, TrialState.EARLY_STOPPED), on_failed=self._handler_failed)
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
            self._live.secret = reports.load_trial_secret(self.paths.root)
            # maxExperimentDuration counts the time earlier runs (before a resume) took too.
            self._deadlines.started = self._clock() - self.store.seconds_run()
            # A run its manager died in has no end: read before this run begins (_restore ends it).
            self._dead_run = self.store.open_run() if self._resumed else None
            self._writes.commit(self._begin_run, time.time())
            if await self._start_components():
                self._set_state(ExperimentState.RUNNING)
                await self._loop()
        except Exception as failure:  # the tuner, the strategy, a handler, the service, or a bug of ours
            error = failure_text(failure)
        return await self._finish(error)

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        """Run ``coroutine`` as a task held in ``_tasks`` until it is done."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _begin_run(self, started: float) -> None:
        self._run_id = self.store.begin_run(started, same_manager=self._same_manager)

    def _end_run(self, ended: float) -> None:
        if self._run_id is not None:
            self.store.end_run(self._run_id, ended)

    async def _start_components(self) -> bool:
        """Start the dispatcher and the training service; False if a stop came first."""
        if self.dispatcher is not None:
            await self.dispatcher.start()   # the manager may have started it already: nothing then
            self._spawn(self._wake_when_dispatcher_exits(self.dispatcher))
        # While the dispatcher's interpreter starts and imports. A service may take seconds to
        # reach its cluster or hosts: a stop meanwhile cancels that.
        if not await self._unless_stopped(self.training.start()):
            return False
        if self.dispatcher is not None:
            await self.dispatcher.initialize(self.config.search_space, algorithm_spec(self.config.tuner),
                                             algorithm_spec(self.config.assessor))
        if self._resumed:
            self._restore()
        return True

    async def _unless_stopped(self, starting: Awaitable[None]) -> bool:
        """Await ``starting``; cancel it when a stop is requested first (False then)."""
        task = asyncio.ensure_future(starting)
        while not task.done():
            if self._stop_requested:
                task.cancel()
                await asyncio.wait({task})
                if not task.cancelled() and task.exception() is not None:
                    self.logger.info("the training service failed while it was stopped: %s", task.exception())
                return False
            self._wake.clear()
            woken = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait({task, woken}, return_when=asyncio.FIRST_COMPLETED)
            woken.cancel()
        task.result()
        return True

    def _restore(self) -> None:
        """On resume: apply the plan (resume.py): end the run whose manager died and the
        attempts it left open (picking up what they reported while no manager ran, and
        ending their leftover processes), requeue the trials that did not finish (first,
        with their parameters and next attempt), and replay every stored result to the
        fresh tuner."""
        plan = plan_resume(self.store, dead_run=self._dead_run, now=time.time(),
                           last_output_time=self.training.files.last_output_time,
                           manager_gone_at=self.training.manager_gone_at())
        if plan.dead_run is not None:
            self._writes.commit(self.store.end_run, plan.dead_run, plan.died)
            self.logger.info("the last run's manager was last known alive %s; its trials' attempts end there",
                             time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(plan.died)))
        self._new_trials.taken(plan.trial_ids)
        for requeued in plan.requeued:
            record, open_attempt = requeued.record, requeued.open_attempt
            if open_attempt is not None and self._adopt(record, open_attempt):
                continue
            if open_attempt is not None:  # its manager died under it
                if self._live.end_leftover(open_attempt):
                    self.logger.warning("trial %s: its process %d outlived the last run; its group was killed",
                                        record.trial_id, open_attempt.pid)
                attempt = open_attempt.attempt
                live = self._live.attempt(record, attempt, AttemptReports(
                    assessed=self._assessed, attempt=attempt, stored=self.store.metrics(record.trial_id)))
                self._writes.commit(self._receiver.ingest_unsent, live)
                self._writes.commit(functools.partial(self.store.end_attempt, record.trial_id, attempt,
                                                      TrialState.CRASHED, plan.open_attempt_ends(open_attempt),
                                                      None, None, trial_status=TrialState.WAITING))
            else:
                self._writes.commit(self.store.set_trial_status, record.trial_id, TrialState.WAITING)
            self._waiting.requeue(record, requeued.next_attempt, first=requeued.first)
            self._waiting.restored_reason(record.trial_id, record.waiting_reason)
            self.logger.info("trial %s is run again (it was %s)", record.trial_id, record.status.value)
        self.training.end_adoption()
        self._progress.restore(plan.ended, plan.results)
        if plan.history and self.dispatcher is not None:
            self.dispatcher.replay_results(plan.history)

    def _adopt(self, record: TrialRecord, open_attempt: AttemptRecord) -> bool:
        """Take over an attempt that ran on while no manager did (reattachWindow): it goes on
        as it was, its reports made meanwhile picked up from its metrics.jsonl, its deadline
        counted from its start. False when the training service has no such attempt."""
        attempt = open_attempt.attempt
        live = self._live.attempt(record, attempt, AttemptReports(
            assessed=self._assessed, attempt=attempt, stored=self.store.metrics(record.trial_id)))
        if not self._live.adopt(live, open_attempt):
            return False
        self._writes.commit(self._receiver.ingest_unsent, live)
        self._deadlines.trial_started(record.trial_id, attempt,
                                      self._clock() - max(0.0, time.time() - open_attempt.start_time),
                                      max_trial_duration=self.config.max_trial_duration)
        self.logger.info("trial %s: attempt %d ran on while no manager did (process %d); this run takes it over",
                         record.trial_id, attempt, open_attempt.pid)
        return True

    async def _wake_when_dispatcher_exits(self, dispatcher: Dispatcher) -> None:
        await dispatcher.exited.wait()
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            if self.dispatcher is not None and self.dispatcher.failure is not None:
                raise self.dispatcher.failure
            if self._strategy.error is not None:
                raise StrategyFailed(self._strategy.error)
            if self._handler_error is not None:
                raise HandlerFailed(self._handler_error)
            if self._stop_requested:
                return
            now = self._clock()
            if self._deadlines.experiment_time_left(now, self.config.max_experiment_duration) == 0:
                self.logger.info("maxExperimentDuration reached; stopping the running trials")
                await self._stop_trials(TrialState.SYS_CANCELED)
                return
            self._enforce_trial_deadlines(now)
            await self._fill_slots()
            self._note_waiting_reasons()
            self._proposals.waits_in_vain(bool(self._live or self._waiting.requeued or self._writes))
            no_more_trials = not self._proposals.has_more(self.config) and not self._strategy.running
            if no_more_trials and not (self._live or self._waiting or self._writes):
                return
            if no_more_trials and self.state == ExperimentState.RUNNING:
                self._set_state(ExperimentState.NO_MORE_TRIAL)
            try:
                await asyncio.wait_for(self._wake.wait(), self._seconds_to_next_deadline())
            except asyncio.TimeoutError:
                pass

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
        return (self._may_launch() and len(self._live) + self._waiting.requeued < self.config.trial_concurrency
                and self.training.waiting_reason() is not None)

    async def _fill_slots(self) -> None:
        while self._waiting and self._has_free_slot():   # retries and requeued trials first
            await self._launch_attempt(*self._waiting.next())
        while self._proposals.may_ask(self.config) and (self._has_free_slot() or self._may_create_waiting()):
            proposal = await self._proposals.ask(stopping=lambda: self._stop_requested)
            if isinstance(proposal, bool):   # True: a trial ended meanwhile: what the tuner waited for may have come
                if proposal:
                    continue
                return
            sequence_id, answer = proposal
            checkpoint_source = checkpoint_source_of(answer.checkpoint_from, self.store.trial_by_sequence)
            record = self._create_trial(sequence_id, answer.parameters)
            if checkpoint_source is not None:
                await self._copy_checkpoint(checkpoint_source, record)
                if self._stop_requested:  # stopped during the copy: it ends with the trials never run
                    self._waiting.requeue(record, 1)
                    return
            if self._writes:  # the store refused to record it: it starts once the store takes writes
                self._waiting.requeue(record, 1)
                return
            if not self.training.has_capacity():  # it waits, first of the tuner's, with the reason said
                self._waiting.requeue(record, 1)
                self._note_waiting_reasons()
                continue
            await self._launch_attempt(record, attempt=1)

    def _note_waiting_reasons(self) -> None:
        """Store why each trial queued to start is not started yet, when that changed: the
        training service's reason (no free GPU), or none while it has capacity."""
        reason = None if self.training.has_capacity() else self.training.waiting_reason()
        for trial_id in self._waiting.reasons_changed(reason):
            self._writes.commit(self.store.set_waiting_reason, trial_id, reason)

    def _create_trial(self, sequence_id: int, parameters: dict[str, Any],
                      parameter_source: str = "algorithm") -> TrialRecord:
        """A new WAITING trial, stored (its folder is the training service's, made at launch)."""
        record = self._new_trials.record(sequence_id, parameters, parameter_source, time.time())
        self._writes.commit(self.store.add_trial, record)  # queued if refused: its launch's writes come after it
        return record

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
        return self._updates.update(field, value)

    def _updated(self, field: str, value: Any) -> ResolvedConfig:
        """The config with ``field`` set to ``value``; UpdateRefused when it cannot be."""
        return checks.updated_config(self.config, field, value, exp_id=self.exp_id, state=self.state,
                                     stopping=self._stop_requested)

    def _apply_update(self, field: str, config: ResolvedConfig) -> None:
        self.config = config
        if self._ending and raises_budget(field):
            self.budget_raised_while_ending = True
        self.store.set_config(self.config.to_dict())
        self.logger.info("%s", change_line(field, config))
        if self.state == ExperimentState.NO_MORE_TRIAL and self._proposals.may_ask(self.config):
            self._set_state(ExperimentState.RUNNING)
        self._wake.set()

    def import_data(self, batch: ImportBatch, on_taken: Callable[[], None] | None = None) -> int:
        """Give the tuner earlier results (NNI's import, checked by imports.read_import);
        returns how many. They are stored and sent in chunks by a task, the loop running
        between chunks, so that a large import neither blocks the loop nor overflows the
        channel; ``on_taken`` is called once the task is done with them (sent, or failed)."""
        checks.refuse_import(self.exp_id, self.state, stopping=self._stop_requested,
                             has_tuner=self.dispatcher is not None and self.config.tuner is not None)
        assert self.dispatcher is not None
        self._spawn(send_import(self.dispatcher, batch, self._imports, record_import=self.store.record_import,
                                logger=self.logger, on_taken=on_taken))
        return batch.count

    def kill_trial(self, trial_id: str) -> None:
        """Stop one trial as USER_CANCELED (SIGTERM, then SIGKILL after the grace period)."""
        live = self._live.get(trial_id)
        checks.refuse_kill(self.exp_id, self.state, trial_id, stopping=self._stop_requested,
                           running=live is not None, lookup=self.store.trial)
        assert live is not None
        self.logger.info("trial %s is killed on request", trial_id)
        self._writes.commit(self.store.record_kill, trial_id)
        self._stop_trial(live, TrialState.USER_CANCELED)

    # -- trials submitted by a strategy (NAS-style code in the experiment process) --

    def submit_trial(self, parameters: dict[str, Any]) -> tuple[str, concurrent.futures.Future]:
        """Queue a trial with these parameters; returns its id and a future of its
        (final state, final value). Raises SubmissionRefused."""
        self._refuse_new_trial(budget=False)
        checks.check_submitted_parameters(parameters)
        self._refuse_new_trial()
        record = self._create_trial(self._proposals.reserve()[0], parameters, parameter_source="customized")
        outcome = self._strategy.submitted(record.trial_id)
        self._waiting.submitted(record)
        self._wake.set()
        return record.trial_id, outcome

    def add_customized_trial(self, parameters: Any) -> TrialRecord:
        """NNI's customized trial: a trial with parameters a user chose (the web UI's "Add
        trial" and "Clone", ``POST trial-jobs``), run as a strategy's is (the tuner does not
        hear of its result, as NNI's tuners ignore customized ones) and counted against
        maxTrialNumber. Raises SubmissionRefused: CONFLICT when the experiment takes no new
        trial or its budget is spent, INVALID naming the parameter the search space refuses."""
        self._refuse_new_trial()
        checks.check_customized_parameters(parameters, self.config.search_space)
        self.submit_trial(parameters)
        return self._waiting.last_submitted   # the one just queued

    def _refuse_new_trial(self, budget: bool = True) -> None:
        """SubmissionRefused (CONFLICT) when the experiment takes no new trial: it is ending,
        or (``budget``) maxTrialNumber trials were submitted."""
        checks.refuse_new_trial(self.exp_id, self.state, stopping=self._stop_requested,
                                trials=self._proposals.submitted if budget else None,
                                max_trial_number=self.config.max_trial_number)

    def strategy_finished(self, error: str | None) -> None:
        """The strategy returned (``error`` None) or raised (its traceback)."""
        self._strategy.finished(error)
        self._wake.set()

    async def _launch_attempt(self, record: TrialRecord, attempt: int) -> None:
        live = self._live.attempt(record, attempt, AttemptReports(assessed=self._assessed))
        refused = await self._live.launch(live, trial_launch(
            record, attempt, live.token, self.config, exp_id=self.exp_id, url_prefix=self.url_prefix,
            manager_host=self.training.manager_host(), port=self.port))
        if refused is not None:
            self._not_started(record.trial_id, attempt, refused.reason, system=refused.system)

    def _not_started(self, trial_id: str, attempt: int, reason: str, *, system: bool) -> None:
        """The attempt could not be started (at launch, or later: trial_launch_failed): FAILED;
        or (``system``) for a reason outside the trial (a full or read-only disk, no free
        descriptor): nothing is recorded against it. The trial stays WAITING, first in line
        with the same attempt, counted neither as a failure nor as a new trial; launching
        pauses (said once) and is tried again with backoff."""
        live = self._live.not_started(trial_id, attempt)
        if live is None:
            return  # not this attempt (it ended already)
        self._deadlines.forget(trial_id)
        if system:
            self._waiting.requeue(live.record, attempt, first=True)
            if self._launching.failed(reason, self._clock()):
                self.logger.warning("%s", self.launching_paused)
                self._on_store_unwritable(self.launching_paused)
            else:
                self.logger.debug("trial %s still cannot start: %s", trial_id, reason)
        else:
            self.logger.error("trial %s could not start: %s", trial_id, reason)
            now = time.time()
            self._writes.commit(self.store.start_attempt, trial_id, attempt, now)
            self._waiting.started(trial_id)
            self._writes.commit(self._launch_failed, live.record, attempt, now)
        self._wake.set()

    def _launch_failed(self, record: TrialRecord, attempt: int, now: float) -> None:
        self.store.end_attempt(record.trial_id, attempt, TrialState.FAILED, now, None, None)
        self._trial_ended(record, TrialState.FAILED, None, has_final=False)

    # -- limits -------------------------------------------------------------

    def _seconds_to_next_deadline(self) -> float | None:
        now = self._clock()
        return self._deadlines.seconds_to_next(now, self.config,
                                               also=self._launching.retry_at(now, bool(self._waiting.requeued)))

    def _enforce_trial_deadlines(self, now: float) -> None:
        idle_timeout = self.config.trial_idle_timeout
        def last_output_time(trial_id: str) -> float:   # read only when an idle deadline comes
            return self.training.files.last_output_time(trial_id)
        for trial_id, reason in self._deadlines.overdue(now, idle_timeout, last_output_time):
            self.logger.log(*overdue_line(trial_id, reason, idle_timeout))
            self._stop_trial(self._live[trial_id], reason)

    def _stop_trial(self, live: LiveAttempt, reason: TrialState) -> None:
        self._deadlines.forget(live.trial_id)   # a trial being stopped has no deadline left
        self._live.stop(live, reason, grace_period=self.config.trial_grace_period)

    async def _stop_trials(self, reason: TrialState) -> None:
        self._deadlines.clear()
        # A preemption tells trials with SIGUSR1 (the cluster's notice), so they can checkpoint.
        await self._live.stop_all(reason, grace_period=self.config.trial_grace_period,
                                  signum=signal.SIGUSR1 if self._preempted else signal.SIGTERM)

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

    def request_stop(self, *, kill_now: bool = False, keep_trials: bool = False) -> None:
        """Stop gracefully: no new trials, running ones get SIGTERM then SIGKILL after
        ``trialGracePeriod``; with ``kill_now`` (or when asked twice), SIGKILL at once; with
        ``keep_trials`` (a first request only), left running for a resume if the training
        service can keep them (TrainingService.leave_running)."""
        if kill_now or self._stop_requested:
            self._live.kill_all()
            self._keep_trials = False
        else:
            self._keep_trials = keep_trials
        self._stop_requested = True
        self._wake.set()

    async def _finish(self, error: str | None) -> ExperimentState:
        self._ending = True
        if self._stop_requested and error is None:
            self._set_state(ExperimentState.STOPPING)
        reason = cancel_reason(error, self._stop_requested)
        if self._keep_trials and error is None and await self.training.leave_running():
            self.logger.info("%d running trial(s) left running for `expctl resume` to take over", len(self._live))
        else:
            await self._stop_trials(reason)
        for record in self._waiting.take_all():
            self._writes.commit(self._never_run, record, reason, time.time())
        write_deadline = time.monotonic() + writes.FINAL_WRITE_PATIENCE
        await self._writes.drain(write_deadline)  # trial ends reach the tuner before it stops
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if error is None and self._handler_error is not None:  # a handler failed while trials stopped
            error = self._handler_error
        if error is not None:
            self.logger.error("experiment failed: %s", error)
        final = final_state(error, self._stop_requested)
        self._set_state(final, error=error, end_time=time.time())
        self._writes.commit(self._end_run, time.time())
        unrecorded = not await self._writes.drain(write_deadline)
        self._writes.close()
        if unrecorded:
            self.logger.error("%s", self._writes.unrecorded(final.value, str(self.store.path)))
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
        return self._launching.notice(str(self.store.path), self._writes.unwritable)

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
        live = self._live.started(trial_id, attempt, pid=pid, host=host, at=time.time())
        if live is not None:
            if live.stop_reason is None:   # a trial being stopped has no deadline left
                self._deadlines.trial_started(trial_id, attempt, self._clock(),
                                              max_trial_duration=self.config.max_trial_duration)
            self._wake.set()  # its deadlines count from now
        self._writes.commit(self.store.start_attempt, trial_id, attempt, time.time(), pid, pid_started, host)
        self._waiting.started(trial_id)
        self.logger.debug("trial %s attempt %d started (pid %s%s)", trial_id, attempt, pid,
                          f" on {host}" if host else "")
        if self._launching.succeeded():   # a trial started: the trouble that paused launching is over
            self.logger.info("trial %s started; launching new trials goes on", trial_id)
            self._on_store_unwritable(self.launching_paused)
            self._wake.set()

    @_loop_handler
    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signum: int | None,
                     preempted: bool = False, *, failed: bool = False) -> None:
        live = self._live.exited(trial_id)
        self._deadlines.forget(trial_id)
        self._writes.commit(self._conclude_exit, live, time.time(), exit_code, signum, preempted, failed)
        self._wake.set()

    @_loop_handler
    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        self._not_started(trial_id, attempt, reason, system=system)

    @_loop_handler
    def capacity_changed(self) -> None:
        self._wake.set()  # waiting trials may start now, or their reason changed

    @_loop_handler
    def service_failed(self, error: str) -> None:
        """The training service broke (a bug of ours, or a cluster that cannot serve the
        experiment): the experiment ends in ERROR; a one-line reason stays one line."""
        if self._handler_error is None:
            error = error.strip()
            self._handler_error = f"the training service failed:{chr(10) if chr(10) in error else ' '}{error}"
        self._wake.set()

    def _conclude_exit(self, live: LiveAttempt, ended: float, exit_code: int | None, signum: int | None,
                       preempted: bool = False, failed: bool = False) -> None:
        """Store the reports the attempt could not send, then its end (outcomes.py decides
        which); queued as one write while the store refuses writes (the lines already
        stored are skipped)."""
        trial_id, attempt = live.record.trial_id, live.attempt
        self._receiver.ingest_unsent(live)
        outcome = exit_outcome(exit_code, signum, stop_reason=live.stop_reason, preempted=preempted, failed=failed,
                               stopping=self._stop_requested,
                               marked_preempting=lambda: self.training.files.marked_preempting(trial_id, attempt),
                               failed_attempts=lambda: self.store.failed_attempts(trial_id),
                               max_retries=self.config.max_trial_retries)
        self.store.end_attempt(trial_id, attempt, outcome.status, ended, exit_code, signum,
                               trial_status=TrialState.WAITING if outcome.again else outcome.status)
        level, line = outcome.describe(trial_id, attempt, exit_code, signum)
        self.logger.log(level, "%s", line)
        if outcome.again:   # a preempted trial first, same parameters and checkpoint folder
            self._waiting.requeue(live.record, attempt + 1, first=outcome.first)
        elif outcome.status == TrialState.PREEMPTED:   # a strategy waiting for it hears now; a resume runs it
            self._strategy.settle(trial_id, TrialState.PREEMPTED, None)
        else:
            self._trial_ended(live.record, outcome.status, live.reports.final_value, live.reports.has_final)
        self._wake.set()

    def _trial_ended(self, record: TrialRecord, status: TrialState, final_value: Any, has_final: bool) -> None:
        """Tell whoever asked for the trial (the tuner or the strategy) how it ended, once."""
        self._progress.trial_ended(record.trial_id, status, final_value, has_final)
        self.logger.info("%s", self._progress.line(max_trial_number=self.config.max_trial_number,
                                                   running=len(self._live)))
        strategy_trial = record.trial_id in self._strategy
        self._strategy.settle(record.trial_id, status, final_value if has_final else None)
        self._proposals.trial_ended(record, status, final_value, has_final, strategy_trial=strategy_trial,
                                    assessed=self._assessed)

    @_loop_handler
    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        """A lost attempt: CRASHED (as if SIGKILLed), or PREEMPTED and run again first."""
        self.logger.warning("trial %s was %s: %s", trial_id, "preempted" if preempted else "lost", reason)
        self.trial_exited(trial_id, attempt, None, signal.SIGKILL, preempted)

    # -- metrics ----------------------------------------------------------------

    def receive_metric(self, trial_id: str, token: str | None, report: Any) -> None:
        """Store a report POSTed by a running trial and tell the assessor. Raises
        MetricRejected (receiving.ReportReceiver.receive says which kind when)."""
        self._receiver.receive(trial_id, token, report)

    @property
    def _assessed(self) -> bool:
        """Whether an assessor judges the trials' intermediate results."""
        return self.dispatcher is not None and self.config.assessor is not None

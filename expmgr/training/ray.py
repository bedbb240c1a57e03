"""The Ray training service: trials run on a Ray cluster, each its own process started by a
trial slot (``ray_slot.TrialSlot``, an actor with the trial's resources) on some node, with
the local service's contracts: command rules, exit codes and signals, the trial's files,
no orphans. The experiment process is the Ray driver and owns every slot (never detached),
so when it dies Ray ends the slots and their watchdogs end the trials.

The trials' folders are on a filesystem that every node shares at the same path (checked at
start by ``probe_shared_folder``), or, with ``storagePath``, on each trial's node, their output
streamed back and their checkpoints kept in the store (``ray_files``, ``ray_node_files``); the
store stays on the driver's disk. A slot is kept
for the next trial after its trial ends (a new actor costs seconds, a reused one a task's
milliseconds); the trial itself is always a new process. docs/ray.md is the user's guide.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import signal as signals
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expmgr import trial as trial_api
from expmgr.layout import ExperimentPaths
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._folder import SharedTrialFolders, prepare_folder
from expmgr.training._process import UNBUFFERED_ENV
from expmgr.training.ray_autoscale import ScaleUp, check_some_node_fits
from expmgr.training.ray_connect import check_reachable
from expmgr.training.ray_files import NoSharedFolder
from expmgr.training.ray_group import GroupParts, TrialGroups, check_group_fits
from expmgr.training.base import TrainingService, TrainingServiceError, TrialEvents, TrialLaunch
from expmgr.training.base import is_system_error, launch_error

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig, ResolvedRayConfig, ResolvedTrialResources

INSTALL_HINT = "platform: ray needs Ray: pip install 'expmgr[ray]'"
_PROBE_TIMEOUT = 60.0
FAILURE_HANDLER_ENV = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"
_DRAIN_CHECK_INTERVAL = 1.0
"""How often the drained nodes are looked up, only while trials run (Ray has no event for it)."""
_STOP_TIMEOUT = 30.0
"""How long ``stop`` waits, after SIGKILL, for slots to say their trials ended before it ends
the slots themselves (their watchdogs then end the trials)."""


@dataclass(eq=False)
class _Slot:
    actor: Any
    number: int
    pump: asyncio.Task | None = None
    node_id: str | None = None
    """The Ray node it was placed on, once known."""
    address: str = ""
    """Its node's address, once placed."""


@dataclass(eq=False)
class _Run:
    """One attempt handed to a slot."""

    launch: TrialLaunch
    env: dict[str, str]
    """The runner's env and the trial's folder (the slot adds its node's part)."""
    slot: _Slot
    manager_url: str
    host: str | None = None
    """The node it runs on, once started."""
    placed: bool = False
    """Its slot was placed on a node already (a reused one); a new one may wait for resources."""
    started: bool = False
    signal_at_start: int | None = None
    """A signal sent while it waited for resources: given to it once it starts."""
    slot_ready: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set once its slot is placed (``placed``), or could not be (``placement_error``)."""
    placement_error: BaseException | None = None
    preempted: bool = False
    """Its node is being taken away (drained): its end is a preemption."""
    task: asyncio.Task | None = field(default=None, repr=False)


class RayTrainingService(TrainingService):
    """Trials on a Ray cluster; see the module docstring."""

    def __init__(self, config: "ResolvedRayConfig", events: TrialEvents, paths: ExperimentPaths,
                 manager_host: str = "127.0.0.1", log_limits: RotationLimits = UNBOUNDED,
                 code_directory: Path | None = None, trial_grace_period: float = 30.0,
                 trials_at_once: int = 1) -> None:
        self._config = config
        self._trial_grace_period = trial_grace_period
        self._groups: TrialGroups | None = None
        """Multi-node trials (``trialPlacement``): every trial is one of them (``ray_group``)."""
        self._trials_at_once = trials_at_once
        """Bundles asked of an autoscaler (trialConcurrency, or fewer trials in all)."""
        self._scale_up: ScaleUp | None = None
        self._log_limits = log_limits
        # The experiment's own choice of Python's output buffering reaches every node's trials
        # (without one, each slot makes trials unbuffered: _process.trial_environment).
        self._forwarded_env = {name: os.environ[name] for name in (UNBUFFERED_ENV,) if name in os.environ}
        self._events = events
        self._paths = paths
        self.files: SharedTrialFolders = SharedTrialFolders(paths)
        self._manager_host = manager_host
        self._session = ""
        self._slot_class: Any = None
        self._slot_actor: Any = None
        self._slot_options: dict[str, Any] = {}
        self._slots: list[_Slot] = []
        self._slots_made = 0
        self._idle: list[_Slot] = []
        self._spare: list[_Slot] = []
        """Slots Ray has not placed yet that no trial waits on (a freed slot took their
        trial): the next launch takes one; placed, one becomes idle (``_placed``)."""
        self._runs: dict[str, _Run] = {}
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self._stop_signal: int = signals.SIGTERM
        self._started = False
        self._http: Any = None
        self._trials_run = asyncio.Event()
        self._node_names: dict[str, str] = {}
        self._failed_nodes: set[str] = set()
        """Nodes where a slot could not start a trial (no shared folder): no new slot goes there."""
        self._log = logging.getLogger(f"nni.{paths.root.name}.training")  # into experiment.log
        self._no_share = None if config.storage_path is None else NoSharedFolder(
            config.storage_path, paths, code_directory, log_limits, self._log)  # storagePath: ray_files
        self.files = self.files if self._no_share is None else self._no_share.files

    # -- start and stop --------------------------------------------------------

    async def start(self) -> None:
        # Ray's C++ failure-signal handler, installed by ray.init, aborts the driver (this process)
        # a few seconds after a SIGTERM: a graceful stop would lose its trials' grace period.
        # Ray reads the switch when it is imported, so it is set before (kept if the user set it).
        os.environ.setdefault(FAILURE_HANDLER_ENV, "1")
        try:
            import ray
            from ray._private import ray_constants
        except ImportError as error:
            raise TrainingServiceError(f"{INSTALL_HINT} ({error})") from None
        # Imported already (by the user's own code, or an earlier experiment): read it again.
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = os.environ[FAILURE_HANDLER_ENV].lower() in ("1", "true")
        from expmgr.training.ray_slot import TrialSlot
        self._session = secrets.token_hex(6)
        await check_reachable(self._config.address)
        _RAY_WORKER_LOG.addFilter(_without_expected_noise)
        ready = False
        try:
            self._connect(ray)
            if self._config.trial_placement is not None:
                check_group_fits(self._config.trial_placement, [n for n in ray.nodes() if n.get("Alive")])
            else:
                # No node has the resources: asked of the autoscaler, trials wait (or an error without one).
                self._scale_up = await ScaleUp.begin(self._config.trial_resources, self._trials_at_once,
                                                     self._config.scale_up_timeout, self._events, self._log)
            await (probe_shared_folder(self._paths, self._log) if self._no_share is None else self._no_share.check())
            ready = True
        finally:
            if not ready:
                if self._scale_up is not None:
                    self._scale_up.end()
                if ray.is_initialized():
                    ray.shutdown()
                _RAY_WORKER_LOG.removeFilter(_without_expected_noise)
        self._started = True
        resources = self._config.trial_resources
        self._slot_options = dict(
            num_cpus=resources.cpu, num_gpus=resources.gpu, memory=resources.memory,
            resources=dict(resources.custom) or None, max_restarts=0, max_task_retries=0)
        # Spread over every node that fits, not the head's first; once a node failed, a label
        # rule keeps new slots off it instead (_new_slot).
        self._slot_class = ray.remote(TrialSlot).options(**self._slot_options, scheduling_strategy="SPREAD")
        self._slot_actor = ray.remote(TrialSlot)
        if self._config.trial_placement is not None:
            self._groups = TrialGroups(self._config.trial_placement, GroupParts(
                self._events, self._session, self._slot_actor, self._forwarded_env, self._log_limits.as_env(),
                self._forward, self._node_name, self._trial_grace_period, self._log, _reason,
                trial_python=self._config.trial_python))
        from tornado.httpclient import AsyncHTTPClient
        self._http = AsyncHTTPClient(force_instance=True)
        self._trials_run = asyncio.Event()
        self._spawn(self._watch_drains())

    def _connect(self, ray: Any) -> None:
        try:
            # On the loop's thread, not the main one: Ray leaves the experiment's signal handling
            # alone (and would warn that it does).
            runtime_env = self._config.runtime_env if self._no_share is None else \
                self._no_share.runtime_env(self._config.runtime_env)  # the code shipped as its working_dir
            ray.init(address=self._config.address, runtime_env=runtime_env,
                     logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)
        except ConnectionError as error:
            raise TrainingServiceError(f"cannot connect to the Ray cluster at trainingService.address "
                                       f"{self._config.address!r}: {error}") from None
        except Exception as error:  # RuntimeError, ValueError: each says what is wrong
            where = " (see trainingService.runtimeEnv)" if self._config.runtime_env else ""
            raise TrainingServiceError(f"Ray refused this experiment as a driver of the cluster at "
                                       f"{self._config.address!r}{where}: {error}") from None

    async def stop(self, grace_period: float, signum: int = signals.SIGTERM) -> None:
        if not self._started:
            return
        self._stopping, self._stop_signal = True, signum
        if self._groups is not None:
            await self._groups.stop(grace_period, signum)
        for trial_id in list(self._runs):
            self.signal(trial_id, signum)
        for run in list(self._runs.values()):
            if not run.started:
                self._end_slot(run.slot)  # waiting for resources: nothing runs yet
        waiting = {run.task for run in self._runs.values() if run.task is not None}
        if waiting:
            _, waiting = await asyncio.wait(waiting, timeout=grace_period)
        if waiting:
            for trial_id in list(self._runs):
                self.signal(trial_id, signals.SIGKILL)
            _, waiting = await asyncio.wait(waiting, timeout=_STOP_TIMEOUT)
        for slot in list(self._slots):
            self._end_slot(slot)
        if waiting:
            await asyncio.wait(waiting, timeout=_STOP_TIMEOUT)
        for task in list(self._tasks):
            task.cancel()
        if self._http is not None:
            self._http.close()
        if self._scale_up is not None:
            self._scale_up.end()  # the request to the autoscaler is withdrawn
        import ray
        ray.shutdown()
        _RAY_WORKER_LOG.removeFilter(_without_expected_noise)
        self._started = False

    # -- trials ----------------------------------------------------------------

    def has_capacity(self) -> bool:
        """At most ``maxPendingTrials`` trials wait for their resources at once."""
        if self._scale_up is not None and self._scale_up.waiting:
            return False  # no node has the resources yet (waiting_reason)
        limit = self._config.max_pending_trials
        return limit is None or self._waiting_for_resources() < limit

    def waiting_reason(self) -> str | None:
        """While the autoscaler is to add a node with the trials' resources, they wait for it."""
        return self._scale_up.reason if self._scale_up is not None else None

    def _waiting_for_resources(self) -> int:
        """Trials whose new slot Ray has not placed yet."""
        return (sum(1 for run in self._runs.values() if not run.placed)
                + (self._groups.waiting() if self._groups is not None else 0))

    async def launch(self, trial: TrialLaunch) -> None:
        files = self.files.folder_of(trial.trial_id)
        try:
            prepare_folder(files, trial.parameter_record)
        except OSError as error:
            raise launch_error(trial.trial_id, error, in_trial_folder=True) from error
        env = {**trial.env, trial_api.ENV_TRIAL_DIR: str(files.root)}
        host = env.get(trial_api.ENV_MANAGER_HOST, self._manager_host)
        url = (f"http://{f'[{host}]' if ':' in host else host}:{env.get(trial_api.ENV_MANAGER_PORT, '0')}")
        if self._groups is not None:
            self._groups.launch(trial, env, url)
            self._trials_run.set()
            return
        placed = bool(self._idle)
        if placed:
            slot = self._idle.pop()
        else:
            slot = self._spare.pop(0) if self._spare else self._new_slot()
        run = _Run(trial, env, slot, url, placed=placed)
        if placed:
            run.slot_ready.set()
        self._runs[trial.trial_id] = run
        self._trials_run.set()
        run.task = self._spawn(self._follow(run))

    def signal(self, trial_id: str, signum: int) -> bool:
        """A trial still waiting for its resources gets the signal the moment it starts."""
        if self._groups is not None:
            return self._groups.signal(trial_id, signum)
        run = self._runs.get(trial_id)
        if run is None:
            return False
        if not run.started:
            run.signal_at_start = signum
            return True
        run.slot.actor.signal.remote(trial_id, signum)
        return True

    def manager_host(self) -> str:
        return self._manager_host

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        """Nothing to end: a trial whose slot is gone was ended by its node's watchdog."""
        return False

    async def _watch_drains(self) -> None:
        """While trials run, look up the nodes being drained; their trials are preempted."""
        from expmgr.training.ray_drain import draining_nodes
        drained: set[str] = set()
        while True:
            if not self._runs and not (self._groups is not None and self._groups.running()):
                self._trials_run.clear()
                await self._trials_run.wait()  # nothing to look after: no lookups while idle
            try:
                nodes = await asyncio.to_thread(draining_nodes)
            except Exception:
                self._events.service_failed(traceback.format_exc())
                return
            for node_id in set(nodes) - drained:
                self._preempt_node(node_id)
            drained = set(nodes)
            await asyncio.sleep(_DRAIN_CHECK_INTERVAL)

    def _preempt_node(self, node_id: str) -> None:
        """The node is being taken away: its trials get SIGUSR1 and end PREEMPTED (run again
        first, elsewhere); its idle slots are ended so that no trial goes there."""
        if self._groups is not None:
            self._groups.preempt_node(node_id)
        for slot in [slot for slot in self._idle if slot.node_id == node_id]:
            self._end_slot(slot)  # (a slot never used is placed on a node too: _placed)
        for trial_id, run in self._runs.items():
            if run.started and run.slot.node_id == node_id and not run.preempted:
                run.preempted = True
                self.signal(trial_id, signals.SIGUSR1)

    def _new_slot(self) -> _Slot:
        # Numbered for good, not by position: a slot's watchdog ends every process marked with
        # its session, so no two slots may ever share one.
        self._slots_made += 1
        slot_class = self._slot_class
        if self._failed_nodes:
            from ray.util.placement_group import NODE_ID_LABEL_KEY
            from ray.util.scheduling_strategies import NodeLabelSchedulingStrategy, NotIn
            slot_class = self._slot_actor.options(**self._slot_options, scheduling_strategy=NodeLabelSchedulingStrategy(
                hard={NODE_ID_LABEL_KEY: NotIn(*self._failed_nodes)}))
        slot = _Slot(slot_class.remote(f"{self._session}-{self._slots_made}"), self._slots_made)
        self._slots.append(slot)
        slot.pump = self._spawn(self._pump(slot))
        self._spawn(self._placed(slot))
        return slot

    async def _placed(self, slot: _Slot) -> None:
        """Wait until Ray places the new slot; then the trial waiting on it starts there, or,
        when a freed slot took that trial meanwhile, it is released (to a waiting trial or
        idle): a slot once asked for is used, not withdrawn and asked for again (a new actor
        takes longer to start than a short trial runs)."""
        from ray import exceptions
        try:
            slot.address, slot.node_id = await slot.actor.node.remote()
        except exceptions.RayError as error:
            waiting = self._run_on(slot)
            if waiting is None:
                self._end_slot(slot)
            else:
                waiting.placement_error = error
                waiting.slot_ready.set()
            return
        if slot in self._spare:
            self._spare.remove(slot)
        waiting = self._run_on(slot)
        if waiting is None:
            self._release(slot)
        else:
            waiting.placed = True
            waiting.slot_ready.set()

    def _run_on(self, slot: _Slot) -> _Run | None:
        return next((run for run in self._runs.values() if run.slot is slot), None)

    def _end_slot(self, slot: _Slot) -> None:
        import ray
        if slot in self._idle:
            self._idle.remove(slot)
        if slot in self._spare:
            self._spare.remove(slot)
        if slot in self._slots:
            self._slots.remove(slot)
            ray.kill(slot.actor, no_restart=True)
        if slot.pump is not None:
            slot.pump.cancel()

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _follow(self, run: _Run) -> None:
        try:
            await self._run_attempt(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # a task's exception would be lost, the trial left RUNNING
            self._events.service_failed(traceback.format_exc())

    async def _run_attempt(self, run: _Run) -> None:
        from ray import exceptions
        trial = run.launch
        spec = {"trial_id": trial.trial_id, "attempt": trial.attempt, "command": trial.command,
                "code_directory": str(trial.code_directory), "trial_dir": run.env[trial_api.ENV_TRIAL_DIR],
                "env": {**self._forwarded_env, **run.env}, "log_limits": self._log_limits.as_env(),
                "trial_python": self._config.trial_python}
        if self._no_share is not None:
            spec.update(self._no_share.spec_fields(trial))
        await run.slot_ready.wait()  # its new slot placed, or a freed one handed to it (_release)
        if run.placement_error is not None:
            await self._not_started(run, run.placement_error)
            return
        try:
            pid, pid_started, address, run.slot.node_id = await run.slot.actor.start_trial.remote(spec)
        except (exceptions.RayError, OSError) as error:
            await self._not_started(run, error)
            return
        host = await self._node_name(run.slot.node_id, address)
        output = None if self._no_share is None else self._spawn(
            self._no_share.follow_output(run.slot.actor, trial.trial_id, trial.attempt))

        run.started, run.host = True, host
        self._events.trial_started(trial.trial_id, trial.attempt, pid, pid_started=pid_started, host=host)
        if self._stopping:
            run.signal_at_start = signals.SIGKILL
        if run.signal_at_start is not None:
            run.slot.actor.signal.remote(trial.trial_id, run.signal_at_start)
        while True:
            try:
                returncode = await run.slot.actor.wait_trial.remote(trial.trial_id, trial.attempt)
                break
            except exceptions.ActorUnavailableError:
                await asyncio.sleep(1.0)  # unreachable for now: it answers again, or it dies
            except exceptions.RayError as error:  # its node or its actor died
                if output is not None:
                    await asyncio.wait([output], timeout=_STOP_TIMEOUT)  # what came is kept
                self._runs.pop(trial.trial_id, None)
                self._end_slot(run.slot)
                self._events.trial_lost(trial.trial_id, trial.attempt, f"its node {host} or slot is gone: "
                                        f"{_reason(error)}", preempted=run.preempted)
                return
        if output is not None:
            await output  # every byte it wrote is in trials/<id>/ before its end is told
        self._runs.pop(trial.trial_id, None)
        self._release(run.slot, run.preempted)
        if run.preempted:
            self._events.trial_lost(trial.trial_id, trial.attempt, f"its node {host} is being drained",
                                    preempted=True)
        elif returncode < 0:
            self._events.trial_exited(trial.trial_id, trial.attempt, None, -returncode)
        else:
            self._events.trial_exited(trial.trial_id, trial.attempt, returncode, None)

    async def _node_name(self, node_id: str | None, address: str) -> str:
        """The node's name as Ray knows it (``ray start --node-name``; its address by default)."""
        if node_id not in self._node_names:
            import ray
            nodes = await asyncio.to_thread(ray.nodes)
            self._node_names.update((node["NodeID"], node.get("NodeName") or node.get("NodeManagerAddress", ""))
                                    for node in nodes)
        return self._node_names.get(node_id or "") or address

    async def _not_started(self, run: _Run, error: BaseException) -> None:
        from ray import exceptions
        trial = run.launch
        self._runs.pop(trial.trial_id, None)
        from expmgr.training.ray_slot import FolderNotSharedError
        # The slot's node does not see the experiment's folder: no trial can start there. Any
        # other error starting the trial (its code folder missing, say) is the trial's.
        node_failed = isinstance(error, exceptions.RayTaskError) and isinstance(error.cause, FolderNotSharedError)
        if isinstance(error, exceptions.RayTaskError) and not node_failed:
            self._release(run.slot)  # the slot is fine; the trial could not start
        else:
            self._end_slot(run.slot)  # never reused: the next trial would fail there too
        if node_failed and not self._stopping:
            host = await self._node_name(run.slot.node_id, run.slot.address) or None
            if run.slot.node_id:
                self._failed_nodes.add(run.slot.node_id)  # new slots go elsewhere
                for idle in [idle for idle in self._idle if idle.node_id == run.slot.node_id]:
                    self._end_slot(idle)
            self._log.warning("slot %s on node %s is ended, and no new slot goes there: %s",
                              run.slot.number, host or "?", _reason(error))
            self._events.trial_started(trial.trial_id, trial.attempt, None, host=host)
            self._events.trial_lost(trial.trial_id, trial.attempt,
                                    f"its slot on node {host or '?'} could not start it: {_reason(error)}")
            return
        if self._stopping:  # ended while it waited for resources
            self._events.trial_started(trial.trial_id, trial.attempt, None)
            self._events.trial_lost(trial.trial_id, trial.attempt, "stopped before it started",
                                    preempted=self._stop_signal == signals.SIGUSR1)
        else:
            # The slot's own OSError (no descriptor, a full disk on its node) is the system's.
            system = is_system_error(getattr(error, "cause", None) or error, in_trial_folder=False)
            self._events.trial_launch_failed(trial.trial_id, trial.attempt, _reason(error), system=system)

    def _release(self, slot: _Slot, preempted: bool = False) -> None:
        """A placed slot that is free (its trial ended, or it was just placed) goes to a trial
        waiting for a slot Ray has not placed yet, whose slot becomes a spare (the next launch
        takes it; once placed it is free in turn); or it waits for the next trial; unless its
        node is going away. So a run makes about trialConcurrency slots, whatever the trials' length."""
        if slot not in self._slots:
            return
        if self._stopping or preempted:
            self._end_slot(slot)
            return
        waiting = next((run for run in self._runs.values()
                        if not run.placed and run.placement_error is None), None)
        if waiting is None:
            self._idle.append(slot)
            return
        spare, waiting.slot, waiting.placed = waiting.slot, slot, True
        self._spare.append(spare)
        waiting.slot_ready.set()

    # -- the metric relay -------------------------------------------------------

    async def _pump(self, slot: _Slot) -> None:
        """Take the reports the slot's trials posted, have the manager's server answer them,
        hand the answers back; until the slot ends."""
        from ray import exceptions
        while True:
            try:
                batch = await slot.actor.take_requests.remote()
            except exceptions.ActorUnavailableError:
                await asyncio.sleep(1.0)
                continue
            except exceptions.RayError:
                return  # the slot is gone; _run_attempt tells what became of its trial
            run = next((r for r in self._runs.values() if r.slot is slot), None)
            answers = [await self._forward(run.manager_url if run else None, path, token, body)
                       for request_id, path, token, body in batch]
            slot.actor.answer.remote([(request_id, status, body)
                                      for (request_id, *_), (status, body) in zip(batch, answers)])

    async def _forward(self, manager_url: str | None, path: bytes, token: bytes, body: bytes) -> tuple[int, bytes]:
        from tornado.httpclient import HTTPRequest
        if manager_url is None:
            return 409, b'{"error": "no trial runs on this slot"}'
        request = HTTPRequest(manager_url + path.decode("latin-1"), method="POST", body=body,
                              headers={"Content-Type": "application/json",
                                       trial_api.TOKEN_HEADER: token.decode("latin-1")},
                              request_timeout=20.0)
        try:
            response = await self._http.fetch(request, raise_error=False)
        except Exception as error:  # the pump must go on for the slot's next reports
            return 502, json.dumps({"error": f"relaying the report failed: {error}"}).encode()
        if response.code == 599:  # no answer at all
            return 502, b'{"error": "the manager could not be reached; the report is kept in metrics.jsonl"}'
        return response.code, response.body or b""


_RAY_WORKER_LOG = logging.getLogger("ray._private.worker")


def _without_expected_noise(record: logging.LogRecord) -> bool:
    """Drop what Ray's driver logs of our own choices: no SIGTERM handler off the main thread
    (on purpose), and the failure of a signal or an answer sent to a slot that has died
    meanwhile (told to the runner through the slot's own end)."""
    message = record.getMessage()
    return "SIGTERM handler is not set" not in message and not message.startswith("Unhandled error")


async def probe_shared_folder(paths: ExperimentPaths, log: logging.Logger | None = None,
                              nodes: list[dict[str, Any]] | None = None) -> None:
    """Check that every node sees the experiment's trial folders: a file written here is read
    on each node, and one written there is read here. TrainingServiceError if not."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    token = secrets.token_hex(8)
    probe_dir = paths.trials_dir
    probe_dir.mkdir(parents=True, exist_ok=True)
    sent = probe_dir / f".shared-folder-probe-{token}"
    sent.write_text(token, encoding="utf-8")
    check = ray.remote(num_cpus=0, max_retries=0)(_probe_on_node)
    if nodes is None:  # those Ray lists alive now (one may die before its probe runs)
        nodes = [node for node in ray.nodes() if node.get("Alive")]
    refs = [check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
            .remote(str(sent), token) for node in nodes]
    try:
        answers = await asyncio.wait_for(asyncio.gather(*refs, return_exceptions=True), _PROBE_TIMEOUT)
        failed = [(node, answer) for node, answer in zip(nodes, answers) if isinstance(answer, BaseException)]
        # A node that died since it was listed (Ray: "NodeAffinitySchedulingStrategy ... doesn't exist
        # any more") runs no trial: skipped, and named. A failure on a live node is the experiment's.
        alive_now = {node["NodeID"] for node in ray.nodes() if node.get("Alive")} if failed else set()
        for node, failure in failed:
            name = node.get("NodeName") or node.get("NodeManagerAddress", "?")
            if node["NodeID"] not in alive_now:
                (log or logging.getLogger(__name__)).warning(
                    "node %s left the Ray cluster during the shared-folder probe; skipped (%s)",
                    name, _last_reason(failure))
            elif isinstance(failure, ray.exceptions.RuntimeEnvSetupError):
                raise TrainingServiceError(f"trainingService.runtimeEnv could not be set up on node {name}: "
                                           f"{_last_reason(failure)}")
            else:
                raise TrainingServiceError(f"the shared-folder probe failed on node {name}: {_last_reason(failure)}")
    except asyncio.TimeoutError:
        raise TrainingServiceError(f"the shared-folder probe got no answer from every node within "
                                   f"{_PROBE_TIMEOUT:.0f} s") from None
    finally:
        sent.unlink(missing_ok=True)
    problems: list[str] = []
    for node, answer in zip(nodes, answers):
        if isinstance(answer, BaseException):
            continue  # a node gone meanwhile
        host, answer_path, problem = answer
        if problem is None and _read_and_remove(answer_path) != f"{token} {host}":
            problem = f"its file {answer_path} is not seen here"
        if problem is not None:
            problems.append(f"node {node.get('NodeName') or host}: {problem}")
    if problems:
        raise TrainingServiceError(
            f"the experiment's folder {paths.root} is not shared by every node of the Ray cluster ("
            + "; ".join(problems) + "). The Ray service needs it on a filesystem every node mounts at the "
            "same path (docs/ray.md, 'Shared folder'); set experimentWorkingDirectory to such a folder.")


def _probe_on_node(sent: str, token: str) -> tuple[str, str, str | None]:
    """Runs on a node: read the driver's probe file, write one back. (host, its path, error)."""
    import os

    import ray
    host = ray.util.get_node_ip_address()
    answer = f"{sent}.{host}.{os.getpid()}"
    try:
        with open(sent, encoding="utf-8") as file:
            if file.read() != token:
                return host, answer, f"{sent} holds something else here"
        with open(answer, "w", encoding="utf-8") as file:
            file.write(f"{token} {host}")
    except OSError as error:
        return host, answer, f"cannot read {sent} or write beside it: {error.strerror or error}"
    return host, answer, None


def _read_and_remove(path: str) -> str | None:
    import os
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def _last_reason(error: BaseException) -> str:
    """The last line of a Ray error that is not part of a traceback: what went wrong, last."""
    lines = [line.strip() for line in str(error).splitlines()
             if line.strip() and not line.startswith((" ", "Traceback", "During handling", "[Node"))]
    return (lines[-1] if lines else type(error).__name__)[:500]


def _reason(error: BaseException) -> str:
    """A Ray error's first line: its cause's (the exception raised in the slot, not Ray's
    header naming the task), without terminal colour codes."""
    cause = getattr(error, "cause", None)
    text = _TERMINAL_CODES.sub("", str(cause if isinstance(cause, BaseException) else error)).strip()
    return text.splitlines()[0][:500] if text else type(cause or error).__name__


_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def create_ray_service(config: "ResolvedConfig", events: TrialEvents, paths: ExperimentPaths,
                       manager_host: str, report_socket: Path | None = None) -> RayTrainingService:
    """The ray platform's service factory (``config.PLATFORMS["ray"].service``). The
    manager's ``report_socket`` is not given to Ray trials: they report through their
    slot's relay, on whichever node they run."""
    from expmgr.config import ResolvedRayConfig
    if not isinstance(config.training_service, ResolvedRayConfig):
        raise TrainingServiceError(f"not a Ray config: platform {config.training_service.platform!r}")
    return RayTrainingService(config.training_service, events, paths, manager_host=manager_host,
                              log_limits=config.log_limits, code_directory=config.trial_code_directory,
                              trial_grace_period=config.trial_grace_period,
                              trials_at_once=min(config.trial_concurrency, config.max_trial_number or 1 << 30))

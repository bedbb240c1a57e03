"""Multi-node trials on Ray (``trainingService.trialPlacement``): each attempt of a trial gets a
placement group of ``workers`` bundles and one trial slot (``ray_slot.TrialSlot``) in each
bundle; every slot runs the trial command as one rank, with the variables torchrun gives
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT). The ranks are one trial to every contract::

    groups = TrialGroups(placement, parts)      # made by RayTrainingService.start
    groups.launch(trial, env, manager_url)      # its ranks start once Ray places the group
    groups.signal(trial_id, signal.SIGTERM)     # to every rank
    await groups.stop(grace_period)             # every rank of every trial, then the groups

- A signal goes to every rank. When a rank fails (exits non-zero, is killed, or its node or
  slot is lost), the others get SIGTERM, and SIGKILL after ``trialGracePeriod``; the trial's
  end is the first failing rank's (a lost rank: CRASHED), or 0 once every rank succeeded.
- Rank 0 writes the trial's ``stdout``, ``stderr`` and ``trial.log``; rank k writes
  ``rank<k>.stdout``, ``rank<k>.stderr`` and ``rank<k>.trial.log`` beside them. Only rank 0's
  metric reports are stored, as Ray Train keeps rank 0's (``trial.ENV_TRIAL_RANK``; a report
  that reaches rank k's relay anyway is answered 409).
- The placement group and its slots are made for each attempt and removed at its end (so a
  retry is placed afresh, away from a lost node); each slot's watchdog ends its rank and
  what it started when the slot, its node or the experiment process dies.

docs/ray.md, "Multi-node trials", is the user's guide.
"""
from __future__ import annotations

import asyncio
import logging
import signal as signals
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from expmgr import trial as trial_api
from expmgr.training.base import TrainingServiceError, TrialEvents, TrialLaunch, is_system_error

if TYPE_CHECKING:
    from expmgr.config import ResolvedTrialPlacement, ResolvedTrialResources

_STOP_TIMEOUT = 30.0
"""How long ``stop`` waits, after SIGKILL, for ranks to say they ended before it removes their
slots (their watchdogs then end them)."""


@dataclass(frozen=True)
class GroupParts:
    """What the Ray service lends its multi-node trials."""

    events: TrialEvents
    session: str
    """The experiment's Ray session: each rank's slot gets ``<session>-g<n>r<rank>``."""
    slot_actor: Any
    """``ray.remote(TrialSlot)``."""
    base_env: dict[str, str]
    """What every trial gets before its own variables (the experiment's output buffering)."""
    log_limits: str
    """The trial logs' bounds (``RotationLimits.as_env()``)."""
    forward: Callable[[str | None, bytes, bytes, bytes], Awaitable[tuple[int, bytes]]]
    """Has the manager's server answer a report (manager URL, path, token, body)."""
    node_name: Callable[[str | None, str], Awaitable[str]]
    """A node's name as Ray knows it (node id, address)."""
    grace_period: float
    """``trialGracePeriod``: the other ranks' time to end after one failed."""
    log: logging.Logger
    reason: Callable[[BaseException], str]
    trial_python: str = "ray"
    """``trainingService.trialPython``: whose ``python3`` the ranks run."""
    """A Ray error's cause, in one line without terminal colour codes."""


@dataclass(eq=False)
class _Rank:
    number: int
    actor: Any
    node_id: str = ""
    address: str = ""
    host: str = ""
    started: bool = False
    """Its process was started and has not been lost."""
    pid: int | None = None
    pid_started: float | None = None
    pump: asyncio.Task | None = None


@dataclass(eq=False)
class _GroupRun:
    """One attempt of a multi-node trial."""

    launch: TrialLaunch
    env: dict[str, str]
    manager_url: str
    group: Any
    """Its placement group."""
    ranks: list[_Rank] = field(default_factory=list)
    placed: bool = False
    started: bool = False
    cancelled: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    """Set by a stop while it waits for its placement group."""
    signal_at_start: int | None = None
    preempted: bool = False
    """A node of one of its ranks is being drained: its end is a preemption."""
    task: asyncio.Task | None = field(default=None, repr=False)


class TrialGroups:
    """The multi-node trials of one Ray experiment; see the module docstring."""

    def __init__(self, placement: "ResolvedTrialPlacement", parts: GroupParts) -> None:
        self._placement = placement
        self._parts = parts
        self._runs: dict[str, _GroupRun] = {}
        self._made = 0
        self._stopping = False
        self._stop_signal: int = signals.SIGTERM
        self._tasks: set[asyncio.Task] = set()

    def waiting(self) -> int:
        """Trials whose placement group Ray has not placed yet."""
        return sum(1 for run in self._runs.values() if not run.placed)

    def running(self) -> bool:
        return bool(self._runs)

    def launch(self, trial: TrialLaunch, env: dict[str, str], manager_url: str) -> None:
        from ray.util.placement_group import placement_group
        bundle = ray_bundle(self._placement.resources)
        group = placement_group([dict(bundle) for _ in range(self._placement.workers)],
                                strategy=self._placement.strategy)
        run = _GroupRun(trial, env, manager_url, group)
        self._runs[trial.trial_id] = run
        run.task = self._spawn(self._follow(run))

    def signal(self, trial_id: str, signum: int) -> bool:
        """To every rank; a trial still waiting for its placement gets it the moment it starts."""
        run = self._runs.get(trial_id)
        if run is None:
            return False
        if not run.started:
            run.signal_at_start = signum
            return True
        self._signal_ranks(run, signum)
        return True

    def preempt_node(self, node_id: str) -> None:
        """A node is being drained: each trial with a rank there gets SIGUSR1 on every rank and
        ends PREEMPTED."""
        for run in self._runs.values():
            if run.started and not run.preempted and any(rank.node_id == node_id for rank in run.ranks):
                run.preempted = True
                self._signal_ranks(run, signals.SIGUSR1)

    async def stop(self, grace_period: float, signum: int = signals.SIGTERM) -> None:
        """``signum`` to every rank, SIGKILL after ``grace_period``; trials waiting for their
        placement are cancelled; then every group is removed."""
        self._stopping, self._stop_signal = True, signum
        for trial_id, run in list(self._runs.items()):
            if run.started:
                self._signal_ranks(run, signum)
            else:
                run.cancelled.set()
        waiting = {run.task for run in self._runs.values() if run.task is not None}
        if waiting:
            _, waiting = await asyncio.wait(waiting, timeout=grace_period)
        if waiting:
            for run in list(self._runs.values()):
                self._signal_ranks(run, signals.SIGKILL)
            _, waiting = await asyncio.wait(waiting, timeout=_STOP_TIMEOUT)
        for run in list(self._runs.values()):
            self._remove(run)  # their watchdogs end what is left
        if waiting:
            await asyncio.wait(waiting, timeout=_STOP_TIMEOUT)
        for task in list(self._tasks):
            task.cancel()

    # -- one attempt -------------------------------------------------------------

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _follow(self, run: _GroupRun) -> None:
        try:
            await self._run_attempt(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # a task's exception would be lost, the trial left RUNNING
            self._parts.events.service_failed(traceback.format_exc())
        finally:
            self._runs.pop(run.launch.trial_id, None)
            self._remove(run)

    async def _run_attempt(self, run: _GroupRun) -> None:
        trial = run.launch
        events = self._parts.events
        if not await self._placed(run):
            events.trial_started(trial.trial_id, trial.attempt, None)
            events.trial_lost(trial.trial_id, trial.attempt, "stopped before it started",
                              preempted=self._stop_signal == signals.SIGUSR1)
            return
        failure = await self._start_ranks(run)
        if failure is not None:
            await self._not_started(run, failure)
            return
        leader = run.ranks[0]
        hosts = list(dict.fromkeys(rank.host for rank in run.ranks))
        run.started = True
        events.trial_started(trial.trial_id, trial.attempt, leader.pid, pid_started=leader.pid_started,
                             host=",".join(hosts))
        if self._stopping:
            run.signal_at_start = signals.SIGKILL
        if run.signal_at_start is not None:
            self._signal_ranks(run, run.signal_at_start)
        end = await self._wait_ranks(run)
        if isinstance(end, str):
            events.trial_lost(trial.trial_id, trial.attempt, end, preempted=run.preempted)
        elif run.preempted:
            events.trial_lost(trial.trial_id, trial.attempt, "a node of its ranks is being drained", preempted=True)
        elif end < 0:
            events.trial_exited(trial.trial_id, trial.attempt, None, -end)
        else:
            events.trial_exited(trial.trial_id, trial.attempt, end, None)

    async def _placed(self, run: _GroupRun) -> bool:
        """Wait until Ray places the trial's group; False if a stop came first."""
        ready = asyncio.ensure_future(_ready(run.group))
        cancelled = asyncio.ensure_future(run.cancelled.wait())
        try:
            await asyncio.wait({ready, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if not ready.done():
            ready.cancel()
            return False
        ready.result()  # a placement group Ray refused: the trial's launch failed (_follow)
        run.placed = True
        return True

    async def _start_ranks(self, run: _GroupRun) -> BaseException | None:
        """A slot in each bundle, the ranks' variables, each rank started; the first error, if any."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        parts, trial = self._parts, run.launch
        self._made += 1
        options = slot_options(self._placement.resources)
        for number in range(self._placement.workers):
            strategy = PlacementGroupSchedulingStrategy(run.group, placement_group_bundle_index=number)
            actor = parts.slot_actor.options(**options, scheduling_strategy=strategy).remote(
                f"{parts.session}-g{self._made}r{number}")
            run.ranks.append(_Rank(number, actor))
        try:
            places = await asyncio.gather(*(rank.actor.node.remote() for rank in run.ranks))
            master_port = await run.ranks[0].actor.free_port.remote()
        except Exception as error:
            return error
        for rank, (address, node_id) in zip(run.ranks, places):
            rank.address, rank.node_id = address, node_id
            rank.host = await parts.node_name(node_id, address)
            rank.pump = self._spawn(self._pump(run, rank))
        specs = [{"trial_id": trial.trial_id, "attempt": trial.attempt, "command": trial.command,
                  "code_directory": str(trial.code_directory), "trial_dir": run.env[trial_api.ENV_TRIAL_DIR],
                  "env": {**parts.base_env, **run.env, **env},
                  "log_limits": parts.log_limits, "trial_python": parts.trial_python} for env in rank_environments(places, master_port)]
        answers = await asyncio.gather(*(rank.actor.start_trial.remote(spec) for rank, spec in zip(run.ranks, specs)),
                                       return_exceptions=True)
        failure: BaseException | None = None
        for rank, answer in zip(run.ranks, answers):
            if isinstance(answer, BaseException):
                failure = failure or answer
            else:
                rank.started = True
                rank.pid, rank.pid_started = answer[0], answer[1]
        if failure is not None:
            self._signal_ranks(run, signals.SIGKILL)  # those started: one rank alone is no trial
        return failure

    async def _not_started(self, run: _GroupRun, error: BaseException) -> None:
        """A rank could not start: a slot that could not be placed or its node died (CRASHED, run
        again), a node without the experiment's folder (CRASHED: another placement may do), or
        the trial's own fault, its code folder missing, say (FAILED)."""
        from ray import exceptions

        from expmgr.training.ray_slot import FolderNotSharedError
        reason = self._parts.reason
        trial, events = run.launch, self._parts.events
        trial_fault = isinstance(error, exceptions.RayTaskError) and not isinstance(error.cause, FolderNotSharedError)
        if self._stopping:
            events.trial_started(trial.trial_id, trial.attempt, None)
            events.trial_lost(trial.trial_id, trial.attempt, "stopped before it started",
                              preempted=self._stop_signal == signals.SIGUSR1)
        elif trial_fault:
            system = is_system_error(getattr(error, "cause", None) or error, in_trial_folder=False)
            events.trial_launch_failed(trial.trial_id, trial.attempt, reason(error), system=system)
        else:
            hosts = ",".join(dict.fromkeys(rank.host for rank in run.ranks if rank.host)) or None
            self._parts.log.warning("trial %s: a rank could not start on its node: %s", trial.trial_id,
                                    reason(error))
            events.trial_started(trial.trial_id, trial.attempt, None, host=hosts)
            events.trial_lost(trial.trial_id, trial.attempt, f"a rank could not start: {reason(error)}")

    async def _wait_ranks(self, run: _GroupRun) -> int | str:
        """Every rank's end: the first failing rank's return code (negative: its signal), or a
        reason when a rank was lost; 0 when all succeeded. Once one fails, the others get
        SIGTERM, and SIGKILL after the grace period."""
        waits = {asyncio.ensure_future(self._wait_rank(run, rank)): rank for rank in run.ranks}
        first_failure: int | str | None = None
        kill_later: asyncio.TimerHandle | None = None
        try:
            pending = set(waits)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    end = finished.result()
                    if end == 0 or first_failure is not None:
                        continue
                    rank = waits[finished]
                    first_failure = end if isinstance(end, int) else f"rank {rank.number}'s {end}"
                    self._parts.log.info("trial %s: rank %s ended (%s); ending its other ranks",
                                         run.launch.trial_id, rank.number, first_failure)
                    self._signal_ranks(run, signals.SIGTERM)
                    kill_later = asyncio.get_running_loop().call_later(
                        self._parts.grace_period, self._signal_ranks, run, signals.SIGKILL)
        finally:
            if kill_later is not None:
                kill_later.cancel()
            for wait in waits:
                wait.cancel()
        return 0 if first_failure is None else first_failure

    async def _wait_rank(self, run: _GroupRun, rank: _Rank) -> int | str:
        """The rank's return code, or why it was lost (its node or slot gone)."""
        from ray import exceptions
        while True:
            try:
                return await rank.actor.wait_trial.remote(run.launch.trial_id, run.launch.attempt)
            except exceptions.ActorUnavailableError:
                await asyncio.sleep(1.0)  # unreachable for now: it answers again, or it dies
            except exceptions.RayError as error:
                rank.started = False
                return f"node {rank.host} or slot is gone: {self._parts.reason(error)}"

    def _signal_ranks(self, run: _GroupRun, signum: int) -> None:
        for rank in run.ranks:
            if rank.started:
                rank.actor.signal.remote(run.launch.trial_id, signum)

    def _remove(self, run: _GroupRun) -> None:
        """End the attempt's slots (their watchdogs end what is left) and its placement group."""
        import ray
        from ray.util.placement_group import remove_placement_group
        for rank in run.ranks:
            if rank.pump is not None:
                rank.pump.cancel()
            ray.kill(rank.actor, no_restart=True)
        run.ranks = []
        if run.group is not None:
            try:
                remove_placement_group(run.group)
            except Exception as error:  # already removed with a dead node, say: nothing to free
                self._parts.log.debug("removing a placement group: %s", error)
            run.group = None

    async def _pump(self, run: _GroupRun, rank: _Rank) -> None:
        """Take the reports the rank's trial posted and hand back the manager's answers (rank
        0's) or a 409 (only rank 0 reports); until its slot ends."""
        from ray import exceptions
        while True:
            try:
                batch = await rank.actor.take_requests.remote()
            except exceptions.ActorUnavailableError:
                await asyncio.sleep(1.0)
                continue
            except exceptions.RayError:
                return
            answers = []
            for _request_id, path, token, body in batch:
                if rank.number == 0:
                    answers.append(await self._parts.forward(run.manager_url, path, token, body))
                else:
                    answers.append((409, b'{"error": "only rank 0 of a multi-node trial reports its results"}'))
            rank.actor.answer.remote([(request_id, status, body)
                                      for (request_id, *_), (status, body) in zip(batch, answers)])


async def _ready(group: Any) -> None:
    await group.ready()


def rank_environments(places: list[tuple[str, str]], master_port: int) -> list[dict[str, str]]:
    """Each rank's variables, as torchrun gives them, from each rank's (node address, node id)
    in rank order: ranks on one node are numbered locally in rank order, nodes in the order of
    their first rank; MASTER_ADDR is rank 0's node, MASTER_PORT a port free there."""
    nodes = list(dict.fromkeys(node_id for _, node_id in places))
    local: dict[str, int] = {}
    envs = []
    for rank, (_address, node_id) in enumerate(places):
        envs.append({"RANK": str(rank), "WORLD_SIZE": str(len(places)),
                     "LOCAL_RANK": str(local.get(node_id, 0)),
                     "LOCAL_WORLD_SIZE": str(sum(1 for _, other in places if other == node_id)),
                     "GROUP_RANK": str(nodes.index(node_id)), "GROUP_WORLD_SIZE": str(len(nodes)),
                     "MASTER_ADDR": places[0][0], "MASTER_PORT": str(master_port),
                     trial_api.ENV_TRIAL_RANK: str(rank)})
        local[node_id] = local.get(node_id, 0) + 1
    return envs


def ray_bundle(resources: "ResolvedTrialResources") -> dict[str, float]:
    """One rank's bundle, in Ray's resource names (amounts of 0 left out)."""
    bundle = {"CPU": resources.cpu, "GPU": resources.gpu, **dict(resources.custom)}
    if resources.memory is not None:
        bundle["memory"] = float(resources.memory)
    return {name: amount for name, amount in bundle.items() if amount}


def slot_options(resources: "ResolvedTrialResources") -> dict[str, Any]:
    """A rank's slot's actor options: its bundle's resources, never restarted."""
    return dict(num_cpus=resources.cpu, num_gpus=resources.gpu, memory=resources.memory,
                resources=dict(resources.custom) or None, max_restarts=0, max_task_retries=0)


def check_group_fits(placement: "ResolvedTrialPlacement", nodes: list[dict[str, Any]]) -> None:
    """TrainingServiceError unless the cluster's nodes, as they are, could hold the trial's
    placement group (Ray would keep it waiting forever): STRICT_PACK, every bundle on one node;
    STRICT_SPREAD, each on a node of its own; PACK and SPREAD, the bundles packed onto the nodes."""
    bundle = ray_bundle(placement.resources)
    if not bundle:
        raise TrainingServiceError("trainingService.trialPlacement.resourcesPerWorker asks for nothing; "
                                   "a Ray placement group needs each worker to ask for some resource (cpu: 1, say)")
    free = [dict(node.get("Resources", {})) for node in nodes]

    def fits(node: dict[str, float], times: int = 1) -> bool:
        return all(node.get(name, 0) >= amount * times for name, amount in bundle.items())

    workers, strategy = placement.workers, placement.strategy
    if strategy == "STRICT_PACK":
        ok = any(fits(node, workers) for node in free)
    elif strategy == "STRICT_SPREAD":
        ok = sum(1 for node in free if fits(node)) >= workers
    else:  # first fit: each bundle on the first node with room left
        placed = 0
        for node in free:
            while placed < workers and fits(node):
                for name, amount in bundle.items():
                    node[name] = node.get(name, 0) - amount
                placed += 1
        ok = placed == workers
    if ok:
        return
    names = {"CPU": "cpu", "GPU": "gpu"}
    asked = ", ".join(f"{names.get(name, name)}: {amount:g}" for name, amount in bundle.items())
    have = "; ".join(f"{node.get('NodeManagerAddress', '?')}: " + ", ".join(
        f"{names.get(name, name)} {node.get('Resources', {}).get(name, 0):g}" for name in bundle) for node in nodes)
    raise TrainingServiceError(f"the Ray cluster cannot place trialPlacement's {workers} workers of ({asked}) "
                               f"with strategy {strategy}; its nodes have {have or 'nothing'}")

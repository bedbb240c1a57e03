"""A real local Ray cluster for the tests of the Ray training service: a head node and a
worker node on this machine, each its own raylet, started by a fixture and always stopped.

    def test_something(ray_cluster):
        driver = subprocess.run([PYTHON, "-c", f"import ray; ray.init(address={ray_cluster.address!r}); ..."])
        ray_cluster.kill_worker()      # the worker node dies as a host would (SIGKILL)
        ray_cluster.add_worker()       # and a new one joins

Each node is one ``ray start --block`` process (a child of the test process, in a session of
its own) with Ray's processes under it; stopping a node is SIGTERM to that process, which
stops its processes, and SIGKILL to whatever of its tree is left. Every port is chosen by the
OS and every cluster has its own temporary directory, so two pytest-xdist workers can each
run one. ``ray stop`` is never used: it stops every Ray process of the machine.

Why not ``ray.cluster_utils.Cluster``: it runs the nodes' processes from the test process
itself, and with its exit hooks on (the default) Ray's ``start_reaper`` calls ``os.setpgrp()``
in that process (the pytest worker leaves the terminal's process group) and installs SIGTERM
and atexit handlers there; with them off, nothing stops the cluster if pytest is killed. Each
``ray start --block`` here is a process of its own whose Ray children die with it (Ray sets
their parent-death signal), and which dies with the test process (we set its own).
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from tests.helpers.common import fixture_process_roots, wait_until

NODE_START_TIMEOUT = 60.0
"""Seconds a node has to register with the GCS (one takes about 3-6 s on the 2-core machine)."""
STOP_GRACE = 10.0
"""Seconds a node's processes have to end after SIGTERM before they are SIGKILLed."""
NODE_DEATH_TIMEOUT = 30.0
"""Seconds the GCS has to mark a killed node dead (its health check, tuned below, takes ~2 s)."""

OBJECT_STORE_BYTES = 80 * 1024 * 1024
"""Each node's object store; Ray's minimum is 75 MiB."""

SYSTEM_CONFIG = {
    # A dead raylet is declared dead after about period * threshold (Ray's default: 3 s * 5).
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}
"""Ray internal settings of the cluster, given to the head node (``ray start --system-config``)."""

NODE_ENV = {
    # SIGTERM to `ray start --block` first drains the node (Ray 2.60, up to 30 s by default)
    # and only then stops it; the fixture drains on purpose (drain_worker), never when stopping.
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray 2.60's `ray start` turns token authentication on when it finds ~/.ray/auth_token (which
    # any local `ray.init()` on this machine writes), and then refuses this process's clients.
    "RAY_AUTH_MODE": "disabled",
}

DRAIN_REASONS = {
    "preemption": "DRAIN_NODE_REASON_PREEMPTION",
    "idle": "DRAIN_NODE_REASON_IDLE_TERMINATION",
}
"""The reasons ``drain_worker`` accepts, and Ray's names for them (autoscaler.proto DrainNodeReason)."""

_PR_SET_PDEATHSIG = 1


def _node_environment() -> dict[str, str]:
    """A node's environment: this one with the cluster's settings, less PYTHONUNBUFFERED,
    which these machines export and a user's shell does not (the trial-output tests must see
    Python's own buffering on the nodes too)."""
    env = {**os.environ, **NODE_ENV}
    env.pop("PYTHONUNBUFFERED", None)
    return env


class RayClusterError(Exception):
    """The local Ray cluster could not be started or changed as asked."""


@dataclass
class RayNode:
    """One node of the cluster: its ``ray start --block`` process and the GCS's id for it."""

    role: str  # "head" or "worker"
    process: subprocess.Popen
    log: Path
    node_id: str = ""
    tree: set[int] = field(default_factory=set)
    """Every pid seen in the node's process tree, kept after the processes end."""

    def processes(self) -> list[psutil.Process]:
        """The node's processes still running: ``ray start`` and its descendants."""
        try:
            root = psutil.Process(self.process.pid)
            found = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            found = []
        self.tree.update(p.pid for p in found)
        return found


class RayCluster:
    """A head node and worker nodes on this machine; ``start()``, then ``stop()`` (idempotent).

    ``address`` is the GCS's "host:port", for ``ray.init(address=...)`` in another process.
    Node ids are hex strings, as ``ray.get_runtime_context().get_node_id()`` gives them.
    """

    def __init__(self, *, num_cpus: int = 2, num_gpus: int = 2, private_worker_dir: Path | None = None) -> None:
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.private_worker_dir = private_worker_dir
        """A folder the worker nodes see as an empty tmpfs of their own (a mount namespace):
        a node that does not share the experiment's folder. Needs root."""
        self.temp_dir: Path | None = None
        self.address = ""
        self.head: RayNode | None = None
        self.workers: list[RayNode] = []
        self._stopped = False
        self._gcs = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> RayCluster:
        """Start the head node and one worker node; return when both are alive in the GCS."""
        # /tmp, not pytest's deeper tmp_path: the session's unix sockets must fit in 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="expmgr-ray-", dir="/tmp"))
        try:
            self.head = self._start_node("head", ["--head", "--port=0", "--include-dashboard=false",
                                                  "--dashboard-port=0",
                                                  f"--system-config={json.dumps(SYSTEM_CONFIG)}"])
            # `ray start` writes the GCS address here just after its "Ray runtime started."
            address_file = self.temp_dir / "ray_current_cluster"
            self.address = str(wait_until(lambda: address_file.exists() and address_file.read_text().strip(),
                                          NODE_START_TIMEOUT, "the head node's GCS address"))
            self.head.node_id = self._await_registered(self.head, "node_head")
            self.add_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node (workers first): SIGTERM, then SIGKILL what is left after
        STOP_GRACE; remove the cluster's temporary directory. Safe to call again."""
        if self._stopped:
            return
        self._stopped = True
        for node in [*reversed(self.workers), *filter(None, [self.head])]:
            self._end(node, signal.SIGTERM)
        self._gcs = None
        fixture_process_roots.difference_update(n.process.pid for n in self.nodes())
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- nodes -----------------------------------------------------------------------------

    @property
    def head_node_id(self) -> str:
        assert self.head is not None
        return self.head.node_id

    @property
    def worker(self) -> RayNode:
        """The worker node added last (alive unless a test killed it)."""
        if not self.workers:
            raise RayClusterError("the cluster has no worker node")
        return self.workers[-1]

    @property
    def worker_name(self) -> str:
        """The Ray node name of the worker node added last (``worker-<n>``)."""
        self.worker  # noqa: B018 - raises when there is none
        return f"worker-{len(self.workers)}"

    @property
    def worker_node_id(self) -> str:
        return self.worker.node_id

    def nodes(self) -> list[RayNode]:
        return [*filter(None, [self.head]), *self.workers]

    def add_worker(self) -> str:
        """Start a worker node (resources ``{"node_worker": 1}``); return its node id once
        the GCS lists it alive."""
        node = self._start_node("worker", [f"--address={self.address}"])
        self.workers.append(node)
        node.node_id = self._await_registered(node, "node_worker")
        return node.node_id

    def kill_worker(self, *, wait_dead: bool = True) -> str:
        """SIGKILL every process of the last worker node at once (a host that died), then,
        unless ``wait_dead`` is false, wait until the GCS marks the node dead. Return its id."""
        node = self.worker
        self._end(node, signal.SIGKILL)
        if wait_dead:
            wait_until(lambda: self.node_state(node.node_id) == "DEAD", NODE_DEATH_TIMEOUT,
                       f"the GCS to mark node {node.node_id} dead")
        return node.node_id

    def ensure_worker(self) -> None:
        """Add a worker node if the last one no longer runs (a test killed it)."""
        if not self.workers or self.workers[-1].process.poll() is not None:
            self.add_worker()

    def drain_worker(self, reason: str = "preemption", deadline_s: float | None = None,
                     message: str = "drained by a test") -> None:
        """Ask the GCS to drain the last worker node, as Ray's autoscaler does before it
        removes one and as ``ray drain-node`` does: Ray's private GCS client
        (``ray._raylet.GcsClient.drain_node``, the DrainNode RPC of the autoscaler state
        service). The node takes no new work from then on; it is not killed at the deadline
        (Ray leaves that to the caller: call ``kill_worker()``). A drain for "idle" is refused
        while the node has work; that refusal raises RayClusterError."""
        from ray.core.generated import autoscaler_pb2
        if reason not in DRAIN_REASONS:
            raise RayClusterError(f"drain reason {reason!r} is not one of {sorted(DRAIN_REASONS)}")
        deadline_ms = 0 if deadline_s is None else int(time.time() * 1000 + deadline_s * 1000)
        accepted, refusal = self._gcs_client().drain_node(
            self.worker_node_id, autoscaler_pb2.DrainNodeReason.Value(  # type: ignore[attr-defined]
                DRAIN_REASONS[reason]),
            message, deadline_ms)
        if not accepted:
            raise RayClusterError(f"the GCS refused to drain node {self.worker_node_id}: {refusal}")

    def node_state(self, node_id: str) -> str:
        """The GCS's state of a node: "ALIVE", "DRAINING" (alive, being drained) or "DEAD"."""
        info = self.node_info(node_id)
        if info.state == info.DEAD:
            return "DEAD"
        return "DRAINING" if node_id in self.draining_nodes() else "ALIVE"

    def node_info(self, node_id: str):
        """The GCS's record of a node (``gcs_pb2.GcsNodeInfo``: state, death_info, resources...)."""
        import ray
        for key, info in self._gcs_client().get_all_node_info(timeout=10).items():
            if ray.NodeID.from_binary(info.node_id).hex() == node_id:
                return info
        raise RayClusterError(f"the GCS has no node {node_id}")

    def draining_nodes(self) -> dict[str, int]:
        """Nodes being drained, with their deadlines in ms since the epoch (0: none), read as
        Ray Train's PreemptionWatcher reads them (GlobalStateAccessor.get_draining_nodes)."""
        from ray._private.state import GlobalState
        from ray._raylet import GcsClientOptions  # type: ignore[attr-defined]
        state = GlobalState()
        state._initialize_global_state(GcsClientOptions.create(
            self.address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False))
        try:
            return state.get_draining_nodes()
        finally:
            state.disconnect()

    def actors(self, class_name: str) -> list[dict]:
        """Every actor of that class the cluster has had, alive or dead, as the GCS's actor table
        lists them (``GlobalState.actor_table``: ActorID, State, Address.NodeID, ...). The state
        API (``ray.util.state``) needs the dashboard, which these nodes do not run."""
        from ray._private.state import GlobalState
        from ray._raylet import GcsClientOptions  # type: ignore[attr-defined]
        state = GlobalState()
        state._initialize_global_state(GcsClientOptions.create(
            self.address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False))
        try:
            return [actor for actor in state.actor_table(None).values() if actor["ActorClassName"] == class_name]
        finally:
            state.disconnect()

    def pids(self) -> set[int]:
        """Every pid the cluster has had, running or not: the ``ray start`` processes and all
        their descendants seen so far (new ones are looked for at each call)."""
        found: set[int] = set()
        for node in self.nodes():
            node.processes()
            found |= node.tree
        return found

    # -- inside ----------------------------------------------------------------------------

    def _start_node(self, role: str, args: list[str]) -> RayNode:
        assert self.temp_dir is not None
        log = self.temp_dir / f"{role}-{len(self.workers)}.log"
        resources = {f"node_{role}": 1}
        # Named "head", "worker-1", ...: on one machine every node has the same address.
        name = "head" if role == "head" else f"worker-{len(self.workers) + 1}"
        command = [_ray_command(), "start", "--block", *args, f"--node-name={name}",
                   f"--num-cpus={self.num_cpus}", f"--num-gpus={self.num_gpus}",
                   f"--resources={json.dumps(resources)}",
                   f"--object-store-memory={OBJECT_STORE_BYTES}",
                   f"--temp-dir={self.temp_dir}",
                   "--dashboard-agent-listen-port=0", "--disable-usage-stats"]
        if role == "worker" and self.private_worker_dir is not None:
            command = ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                       'mount -t tmpfs tmpfs "$0" && exec "$@"', str(self.private_worker_dir), *command]
        with open(log, "wb") as out:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=_node_environment(), start_new_session=True,
                                       preexec_fn=_die_with_parent)
        node = RayNode(role, process, log)
        fixture_process_roots.add(process.pid)
        # Until it prints this, `ray start` is still setting the node up, after the raylet has
        # registered: a node drained or killed then leaves `ray start` waiting for ever.
        wait_until(lambda: self._died(node, fail=True) or b"Ray runtime started." in log.read_bytes(),
                   NODE_START_TIMEOUT, f"`ray start` of the {role} node")
        return node

    def _await_registered(self, node: RayNode, marker: str) -> str:
        """The id of the alive node with resource ``marker`` the cluster does not know yet."""
        known = {n.node_id for n in self.nodes()}
        def registered() -> str | None:
            self._died(node, fail=True)
            import ray
            for info in self._gcs_client().get_all_node_info(timeout=10).values():
                node_id = ray.NodeID.from_binary(info.node_id).hex()
                if info.state == info.ALIVE and marker in info.resources_total and node_id not in known:
                    return node_id
            return None
        return str(wait_until(registered, NODE_START_TIMEOUT, f"the {node.role} node to register"))

    def _died(self, node: RayNode, fail: bool = False) -> bool:
        if node.process.poll() is None:
            return False
        if fail:
            raise RayClusterError(f"the {node.role} node's `ray start` exited with {node.process.returncode}: "
                                  + node.log.read_text(errors="replace")[-3000:])
        return True

    def _end(self, node: RayNode, first: signal.Signals) -> None:
        """Send ``first`` to the node's ``ray start`` (SIGKILL: to all its processes at once),
        SIGKILL what is left after STOP_GRACE, and wait until none runs."""
        processes = node.processes()
        targets = processes if first == signal.SIGKILL else processes[:1]
        for process in targets:
            _signal(process, first)
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline and _running(processes) and node.process.poll() is None:
            time.sleep(0.05)
            processes = _union(processes, node.processes())
        # `ray start` has ended (or is killed now): what of its tree still runs is killed.
        processes = _union(processes, node.processes())
        for process in processes:
            _signal(process, signal.SIGKILL)
        node.process.wait()
        psutil.wait_procs(processes, timeout=STOP_GRACE)
        left = _running(processes)
        if left:
            raise RayClusterError(f"{node.role} node processes still running after SIGKILL: {[p.pid for p in left]}")

    def _gcs_client(self):
        if self._gcs is None:
            from ray._raylet import GcsClient
            self._gcs = GcsClient(address=self.address)
        return self._gcs


def _ray_command() -> str:
    """The `ray` command of the interpreter running the tests."""
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, so even a killed
    pytest leaves no cluster (``ray start`` then stops its own processes)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal(process: psutil.Process, sig: signal.Signals) -> None:
    try:
        process.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    return alive


def _union(a: list[psutil.Process], b: list[psutil.Process]) -> list[psutil.Process]:
    pids = {p.pid for p in a}
    return a + [p for p in b if p.pid not in pids]


def ray_importable() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def ray_cluster_module() -> Iterator[RayCluster]:
    """One cluster for a test module (starting one takes ~10 s of the two cores)."""
    if not ray_importable():
        pytest.skip("Ray is not installed (pip install 'ray>=2.60,<2.61')")
    with RayCluster() as cluster:
        yield cluster


@pytest.fixture
def ray_cluster(ray_cluster_module: RayCluster) -> RayCluster:
    """The module's cluster, with a live worker node again if an earlier test killed it."""
    ray_cluster_module.ensure_worker()
    return ray_cluster_module

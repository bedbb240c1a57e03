"""A real local Ray cluster with an autoscaler, for the tests of the Ray service on clusters
that scale: a head node whose autoscaler (Ray's own, with its ``fake_multinode`` provider)
starts and stops real worker nodes on this machine, as a cloud provider would add machines.

    with AutoscalingRayCluster(worker_resources={"CPU": 1, "scaled": 1}) as cluster:
        ...  # ray.init(address=cluster.address) in another process; cluster.worker_node_ids()

The head is one ``ray start --head --block --autoscaling-config=...`` process (a child of the
test process, in a session of its own); the autoscaler's monitor runs under it and starts each
worker node's processes itself (``ray._private.node.Node``), under the same temporary
directory. Stopping ends the head's whole process tree and every process that names the
cluster's temporary directory (a worker node's processes may have left the tree): SIGTERM,
then SIGKILL after a grace, until none is left. Its own temporary directory and GCS port,
so it runs beside other clusters of the machine. Not ``ray.cluster_utils.AutoscalingCluster``:
its ``start`` and ``shutdown`` run ``ray stop --force``, which kills every Ray of the machine.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest

from tests.helpers.common import fixture_process_roots, wait_until
from tests.helpers.ray_cluster import (NODE_ENV, NODE_START_TIMEOUT, OBJECT_STORE_BYTES, STOP_GRACE, SYSTEM_CONFIG,
                                       RayClusterError, _die_with_parent, _ray_command, _running, _signal,
                                       ray_importable)

WORKER_TYPE = "ray.worker.scaled"
"""The one worker node type the autoscaler may add."""
IDLE_TIMEOUT_MINUTES = 60
"""An added node is not taken away while a test runs (a test asks for it on purpose)."""


class AutoscalingRayCluster:
    """A head with ``head_cpus`` CPUs and an autoscaler that may add up to ``max_workers``
    worker nodes with ``worker_resources`` (Ray's names: ``CPU``, ``GPU``, custom ones);
    ``start()``, then ``stop()`` (idempotent)."""

    def __init__(self, *, head_cpus: int = 0, worker_resources: dict[str, float] | None = None,
                 max_workers: int = 2) -> None:
        self.head_cpus = head_cpus
        self.worker_resources = dict(worker_resources or {"CPU": 1, "scaled": 1})
        self.max_workers = max_workers
        self.temp_dir: Path | None = None
        self.address = ""
        self.head: subprocess.Popen | None = None
        self.log: Path | None = None
        self._seen: dict[int, psutil.Process] = {}
        self._stopped = False

    def start(self) -> AutoscalingRayCluster:
        """Start the head (and its autoscaler); return once its GCS answers."""
        import ray._private.services as services
        # /tmp, not pytest's deeper tmp_path: the session's unix sockets must fit in 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="expmgr-ray-as-", dir="/tmp"))
        host = services.get_node_ip_address()
        port = _free_port()
        self.address = f"{host}:{port}"
        config_file = self.temp_dir / "autoscaling.json"
        config_file.write_text(json.dumps(self._autoscaling_config()))
        self.log = self.temp_dir / "head.log"
        command = [_ray_command(), "start", "--head", "--block", f"--port={port}", "--node-name=head",
                   f"--autoscaling-config={config_file}", f"--num-cpus={self.head_cpus}", "--num-gpus=0",
                   f"--object-store-memory={OBJECT_STORE_BYTES}", f"--temp-dir={self.temp_dir}",
                   "--include-dashboard=false", "--dashboard-port=0", "--dashboard-agent-listen-port=0",
                   f"--system-config={json.dumps(SYSTEM_CONFIG)}", "--disable-usage-stats"]
        env = {**os.environ, **NODE_ENV, "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"}
        env.pop("PYTHONUNBUFFERED", None)
        try:
            with open(self.log, "wb") as out:
                self.head = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                             preexec_fn=_die_with_parent)
            fixture_process_roots.add(self.head.pid)
            wait_until(lambda: self._head_died() or b"Ray runtime started." in self.log.read_bytes(),
                       NODE_START_TIMEOUT, "`ray start` of the autoscaling head")
            # Its first report says the autoscaler runs (what the service reads, and pause_autoscaler needs).
            wait_until(lambda: self._head_died() or self._autoscaler_reported(), NODE_START_TIMEOUT,
                       "the autoscaler's first report")
        except BaseException:
            self.stop()
            raise
        return self

    def _autoscaling_config(self) -> dict[str, Any]:
        """Ray's cluster config for the fake provider (as ray.cluster_utils.AutoscalingCluster
        writes it), with this cluster's GCS address."""
        worker = {**self.worker_resources, "object_store_memory": OBJECT_STORE_BYTES}
        return {
            "cluster_name": f"expmgr-test-{os.getpid()}",
            "max_workers": self.max_workers,
            # No updater (it would run setup commands over SSH) and the node's id as its address.
            "provider": {"type": "fake_multinode", "gcs_address": self.address, "use_node_id_as_ip": True,
                         "disable_node_updaters": True, "disable_launch_config_check": True},
            "available_node_types": {
                "ray.head.default": {"resources": {"CPU": self.head_cpus}, "node_config": {}, "max_workers": 0},
                WORKER_TYPE: {"resources": worker, "node_config": {}, "min_workers": 0,
                              "max_workers": self.max_workers},
            },
            "head_node_type": "ray.head.default",
            "upscaling_speed": 1.0,
            "idle_timeout_minutes": IDLE_TIMEOUT_MINUTES,
            "docker": {}, "auth": {"ssh_user": "nobody"}, "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
            "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": [],
        }

    def stop(self) -> None:
        """End the head's process tree and every process of this cluster's temporary directory
        (the nodes the autoscaler started): SIGTERM to the head, SIGKILL to what is left after
        STOP_GRACE; remove the temporary directory. Safe to call again."""
        if self._stopped:
            return
        self._stopped = True
        if self.head is not None:
            self.processes()
            _signal_pid(self.head.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while time.monotonic() < deadline and self.head.poll() is None:
                time.sleep(0.05)
                self.processes()
            for _ in range(10):  # a node's process may start another while it is killed
                left = self.processes()
                if not left:
                    break
                for process in left:
                    _signal(process, signal.SIGKILL)
                psutil.wait_procs(left, timeout=STOP_GRACE)
            self.head.wait()
            fixture_process_roots.discard(self.head.pid)
            left = _running(list(self._seen.values()))
            if left:
                raise RayClusterError(f"autoscaling cluster processes still running after SIGKILL: "
                                      f"{[p.pid for p in left]}")
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> AutoscalingRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def processes(self) -> list[psutil.Process]:
        """The cluster's processes still running: the head's tree, and every process whose
        command line names the cluster's temporary directory (an added node's raylet, its
        workers); each is remembered, so that ``stop`` checks that it ended."""
        found: dict[int, psutil.Process] = {}
        if self.head is not None:
            try:
                root = psutil.Process(self.head.pid)
                found.update((p.pid, p) for p in [root, *root.children(recursive=True)])
            except psutil.NoSuchProcess:
                pass
        marker = str(self.temp_dir)
        for process in psutil.process_iter(["cmdline"]):
            try:
                if process.pid not in found and any(marker in part for part in process.info["cmdline"] or ()):
                    found[process.pid] = process
                    found.update((p.pid, p) for p in process.children(recursive=True))
            except psutil.Error:
                pass
        for pid, process in found.items():
            self._seen.setdefault(pid, process)
        return _running(list(found.values()))

    @contextlib.contextmanager
    def autoscaler_paused(self) -> Iterator[None]:
        """The autoscaler adds no node meanwhile (its monitor process is stopped, SIGSTOP; then
        SIGCONT): a test sees what happens before a node comes, whatever the machine's speed."""
        [monitor] = [p for p in self.processes() if any(part.endswith("autoscaler/_private/monitor.py") for part in p.cmdline())]
        monitor.suspend()
        try:
            yield
        finally:
            monitor.resume()

    def _autoscaler_reported(self) -> bool:
        from ray._private import ray_constants
        from ray._raylet import GcsClient
        status = GcsClient(address=self.address).internal_kv_get(
            ray_constants.DEBUG_AUTOSCALING_STATUS.encode(), namespace=None)
        return bool(status) and "autoscaler_report" in json.loads(status)

    def worker_node_ids(self) -> list[str]:
        """The alive nodes the autoscaler added (those with the worker type's resources)."""
        return [node["NodeID"] for node in self.alive_nodes() if node["NodeID"] and not self._is_head(node)]

    def alive_nodes(self) -> list[dict[str, Any]]:
        """The GCS's alive nodes, as ``ray.nodes()`` lists them (NodeID, Resources, ...)."""
        import ray
        from ray._raylet import GcsClient
        client = GcsClient(address=self.address)
        nodes = []
        for info in client.get_all_node_info(timeout=10).values():
            if info.state == info.ALIVE:
                nodes.append({"NodeID": ray.NodeID.from_binary(info.node_id).hex(),
                              "Resources": dict(info.resources_total), "NodeName": info.node_name})
        return nodes

    @staticmethod
    def _is_head(node: dict[str, Any]) -> bool:
        return node.get("NodeName") == "head"

    def _head_died(self) -> bool:
        assert self.head is not None and self.log is not None
        if self.head.poll() is None:
            return False
        raise RayClusterError(f"the autoscaling head's `ray start` exited with {self.head.returncode}: "
                              + self.log.read_text(errors="replace")[-3000:])


def _free_port() -> int:
    """A TCP port free now (the GCS's, which the autoscaler's config must name before start)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _signal_pid(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


SCALED_RESOURCE = "scaled"
"""The custom resource only the nodes the autoscaler adds have."""


@pytest.fixture(scope="module")
def autoscaling_cluster() -> Iterator[AutoscalingRayCluster]:
    """One autoscaling cluster for a test module: a head with no CPU for trials, and up to two
    nodes of ``{CPU: 1, scaled: 1}`` its autoscaler may add (each added node stays for the
    module: an hour's idle timeout)."""
    if not ray_importable():
        pytest.skip("Ray is not installed (pip install 'ray>=2.60,<2.61')")
    with AutoscalingRayCluster(head_cpus=0, worker_resources={"CPU": 1, SCALED_RESOURCE: 1}, max_workers=2) as cluster:
        yield cluster

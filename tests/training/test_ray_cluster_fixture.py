"""The local Ray cluster the Ray training service is tested on (tests/helpers/ray_cluster.py): what a
driver in another process sees of it, GPUs without hardware, a worker node that dies or is
drained, and nothing of it left after it stops."""
from __future__ import annotations

import json
import subprocess
import textwrap

import psutil
import pytest

from tests.helpers.common import PYTHON, wait_until
from tests.helpers.ray_cluster import RayCluster, ray_cluster, ray_cluster_module, ray_importable  # noqa: F401

DEADLINE = 60.0


def run_driver(address: str, body: str) -> dict:
    """Run ``body`` in a new Ray driver process connected to ``address``; it sets ``out``,
    a dict, which comes back as JSON."""
    script = "import json, ray\n" \
             f"ray.init(address={address!r}, log_to_driver=False)\n" \
             "out = {}\n" + textwrap.dedent(body) + "\nprint('OUT' + json.dumps(out))\n"
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=DEADLINE)
    lines = [line for line in done.stdout.splitlines() if line.startswith("OUT")]
    assert done.returncode == 0 and lines, f"driver failed ({done.returncode}): {done.stdout}\n{done.stderr}"
    return json.loads(lines[-1][3:])


def start_driver(address: str, body: str) -> subprocess.Popen:
    """A driver that runs ``body`` and talks with the test line by line over stdin/stdout."""
    script = "import json, sys, ray\n" \
             f"ray.init(address={address!r}, log_to_driver=False)\n" + textwrap.dedent(body)
    return subprocess.Popen([PYTHON, "-u", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def read_line(driver: subprocess.Popen) -> str:
    """The driver's next answer: a line it printed starting "@" (Ray prints its own lines too)."""
    while True:
        line = driver.stdout.readline()
        assert line, f"driver ended ({driver.wait(DEADLINE)}) without answering"
        if line.startswith("@"):
            return line[1:].strip()


def test_a_driver_in_another_process_sees_two_alive_nodes_with_their_resources(ray_cluster):
    out = run_driver(ray_cluster.address, """
        out["nodes"] = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
    """)
    assert set(out["nodes"]) == {ray_cluster.head_node_id, ray_cluster.worker_node_id}
    head, worker = out["nodes"][ray_cluster.head_node_id], out["nodes"][ray_cluster.worker_node_id]
    assert (head["CPU"], head["GPU"], head["node_head"]) == (2, 2, 1)
    assert (worker["CPU"], worker["GPU"], worker["node_worker"]) == (2, 2, 1)


def test_two_one_gpu_actors_on_a_node_see_distinct_gpu_ids(ray_cluster):
    out = run_driver(ray_cluster.address, """
        @ray.remote(num_gpus=1, num_cpus=0, resources={"node_worker": 0.1})
        class Gpu:
            def ids(self):
                return (ray.get_runtime_context().get_node_id(),
                        ray.get_runtime_context().get_accelerator_ids()["GPU"])
        actors = [Gpu.remote(), Gpu.remote()]
        out["ids"] = ray.get([a.ids.remote() for a in actors], timeout=50)
    """)
    (node_a, gpus_a), (node_b, gpus_b) = out["ids"]
    assert node_a == node_b == ray_cluster.worker_node_id
    assert len(gpus_a) == len(gpus_b) == 1 and gpus_a != gpus_b


PINNED_ACTOR = """
    @ray.remote(num_cpus=0, resources={"node_worker": 0.1})
    class Pinned:
        def node(self):
            return ray.get_runtime_context().get_node_id()
    actor = Pinned.remote()
    print("@" + ray.get(actor.node.remote(), timeout=50), flush=True)
"""


def test_an_actor_on_a_killed_worker_node_is_dead_for_the_driver(ray_cluster):
    driver = start_driver(ray_cluster.address, PINNED_ACTOR + """
    sys.stdin.readline()
    try:
        ray.get(actor.node.remote(), timeout=50)
        print("@alive")
    except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError) as error:
        print("@" + type(error).__name__)
    """)
    try:
        assert read_line(driver) == ray_cluster.worker_node_id
        ray_cluster.kill_worker()
        driver.stdin.write("go\n")
        driver.stdin.flush()
        assert read_line(driver) in ("ActorDiedError", "ActorUnavailableError")
    finally:
        driver.kill()
        driver.wait()
    assert ray_cluster.node_state(ray_cluster.worker_node_id) == "DEAD"


def test_a_driver_sees_a_worker_node_drained_for_preemption_before_it_dies(ray_cluster):
    """Ray 2.60 has no public API for it: Ray Train's PreemptionWatcher polls
    ``ray._private.state.state.get_draining_nodes()``, as this driver does."""
    driver = start_driver(ray_cluster.address, PINNED_ACTOR + """
    for line in sys.stdin:
        print("@" + json.dumps(ray._private.state.state.get_draining_nodes()), flush=True)
    """)
    try:
        worker = read_line(driver)
        driver.stdin.write("?\n")
        driver.stdin.flush()
        assert json.loads(read_line(driver)) == {}
        ray_cluster.drain_worker("preemption", deadline_s=120)
        def draining() -> dict:
            driver.stdin.write("?\n")
            driver.stdin.flush()
            return json.loads(read_line(driver))
        seen = wait_until(draining, DEADLINE, "the driver to see the worker node draining")
        assert list(seen) == [worker] and seen[worker] > 0  # the deadline, ms since the epoch
        assert ray_cluster.node_state(worker) == "DRAINING"  # busy (the actor): alive until killed
        ray_cluster.kill_worker()
        death = ray_cluster.node_info(worker).death_info
        # Killed before it drained: the GCS's death reason does not say "preempted"
        # (AUTOSCALER_DRAIN_PREEMPTED is for a raylet that ends itself, drained).
        assert death.Reason.Name(death.reason) == "UNEXPECTED_TERMINATION"
    finally:
        driver.kill()
        driver.wait()


def test_nothing_of_a_cluster_is_left_after_it_stops():
    if not ray_importable():
        pytest.skip("Ray is not installed")
    with RayCluster() as cluster:
        run_driver(cluster.address, """
            @ray.remote(num_cpus=1, resources={"node_worker": 0.1})
            def where():
                return ray.get_runtime_context().get_node_id()
            out["node"] = ray.get(where.remote(), timeout=50)
        """)
        cluster.kill_worker()
        cluster.add_worker()
        pids = cluster.pids()
        assert len(pids) > 10  # two `ray start`, the head's GCS, raylets, agents, workers...
    left = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"cluster processes still running: {left}"
    assert not cluster.temp_dir.exists()


def test_nothing_of_an_autoscaling_cluster_is_left_after_it_stops_the_nodes_its_autoscaler_added_too():
    from tests.helpers.ray_autoscaling_cluster import AutoscalingRayCluster
    if not ray_importable():
        pytest.skip("Ray is not installed")
    with AutoscalingRayCluster(head_cpus=0, worker_resources={"CPU": 1, "scaled": 1}) as cluster:
        out = run_driver(cluster.address, """
            @ray.remote(num_cpus=1, resources={"scaled": 1})
            def where():
                return ray.get_runtime_context().get_node_id()
            out["node"] = ray.get(where.remote(), timeout=50)
        """)
        assert cluster.worker_node_ids() == [out["node"]], "the autoscaler added the node the task ran on"
        pids = {process.pid for process in cluster.processes()}
        raylets = [pid for pid in pids if "raylet" in " ".join(psutil.Process(pid).cmdline())]
        assert len(raylets) == 2, "the head's raylet and the added node's"
    left = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"cluster processes still running: {left}"
    assert not cluster.temp_dir.exists()

"""The Ray training service against a real two-node Ray cluster on this machine (a head and
a worker node, each its own raylet; ``tests/helpers/ray_cluster.py``): GPUs, placement, stop, a
SIGKILLed experiment, a dead node, a drained node, the shared-folder probe, the relay.

The contract every service keeps is in test_contract.py, run there against Ray too."""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.store.registry import Registry
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.ray_cluster import RayCluster, ray_cluster, ray_cluster_module  # noqa: F401

DEADLINE = 60.0


def ray_config(cluster: RayCluster, code_dir: Path, home: Path, **fields: Any) -> ExperimentConfig:
    resources = fields.pop("trial_resources", {"cpu": 1})
    return ExperimentConfig(
        search_space=fields.pop("search_space", {"x": {"_type": "choice", "_value": [1, 2, 3, 4]}}),
        trial_command="python3 trial.py", trial_code_directory=code_dir, tuner={"name": "GridSearch"},
        experiment_working_directory=home,
        training_service={"platform": "ray", "address": cluster.address, "trialResources": resources},
        **{"trial_concurrency": 4, "trial_grace_period": 5, **fields})


def hosts_of_first_attempts(experiment: Experiment) -> dict[str, str | None]:
    return {trial_id: host for trial_id, attempt, _, host in attempts_of(experiment) if attempt == 1}


def write_ray_config_file(code_dir: Path, cluster: RayCluster, extra: str = "") -> None:
    """code_dir/config.yml: 4 trials (x = 1..4) at once on the cluster, one CPU each."""
    (code_dir / "config.yml").write_text(textwrap.dedent(f"""\
        searchSpace: {{x: {{_type: choice, _value: [1, 2, 3, 4]}}}}
        trialCommand: python3 trial.py
        trialCodeDirectory: .
        trialConcurrency: 4
        maxTrialNumber: 4
        tuner: {{name: GridSearch}}
        trainingService: {{platform: ray, address: "{cluster.address}", trialResources: {{cpu: 1}}}}
        """) + extra)


def expctl_env(home: Path) -> dict[str, str]:
    return {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}


def attempts_of(experiment: Experiment) -> list[tuple[str, int, str, str | None]]:
    """(trial id, attempt, status, host) of every attempt, in order."""
    with sqlite3.connect(experiment.paths.database) as db:
        return db.execute("SELECT trial_id, attempt, status, host FROM attempts ORDER BY start_time, attempt").fetchall()


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


# A trial that writes what it sees (its GPUs, its pid and its child's)
# into ../seen/<trial id>.json, then waits for ../release before it reports and ends.
WAITING_TRIAL = """
    import json, os, subprocess, time
    import expmgr
    params = expmgr.get_next_parameter()
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)   # leaves the trial's group
    expmgr.report_intermediate_result(params["x"])
    seen = {"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "pids": [os.getpid(), child.pid]}
    os.makedirs("seen", exist_ok=True)
    with open(f"seen/{expmgr.get_trial_id()}.{expmgr.get_attempt()}.json", "w") as f:
        json.dump(seen, f)
    while not os.path.exists("release"):
        time.sleep(0.05)
    expmgr.report_final_result(params["x"])
"""


def seen(code_dir: Path) -> dict[str, dict[str, Any]]:
    folder = code_dir / "seen"
    found = {}
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            found[path.stem] = json.loads(path.read_text())
        except ValueError:
            pass  # being written
    return found


def test_trials_asking_one_gpu_each_get_distinct_gpus_and_fill_both_nodes(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=4,
                                       trial_resources={"cpu": 1, "gpu": 1}))
    experiment.start(port=0)
    try:
        # 2 GPUs a node: the four trials only fit if both nodes take two each.
        views = wait_until(lambda: len(seen(code_dir)) == 4 and seen(code_dir), DEADLINE, "four trials running")
        hosts = hosts_of_first_attempts(experiment)
        by_node: dict[str | None, list[str]] = {}
        for name, view in views.items():
            by_node.setdefault(hosts[name.split(".")[0]], []).append(view["gpus"])
        assert set(by_node) == {"head", ray_cluster.worker_name}, f"trials on both nodes, by name: {by_node}"
        for gpus in by_node.values():
            assert sorted(gpus) == ["0", "1"], f"distinct GPUs on one node: {by_node}"
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}


def test_a_trial_asking_no_gpu_sees_none(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", """
        import os, expmgr
        expmgr.get_next_parameter()
        expmgr.report_final_result(0 if os.environ["CUDA_VISIBLE_DEVICES"] == "" else 1)
    """)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=1,
                                       search_space={"x": {"_type": "choice", "_value": [1]}}))
    assert experiment.run(port=0)
    [trial] = experiment.list_trial_jobs()
    assert (trial.status, trial.finalMetric) == ("SUCCEEDED", 0), "an empty CUDA_VISIBLE_DEVICES"


def test_stop_ends_every_trial_and_its_children_on_every_node(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=4))
    experiment.start(port=0)
    try:
        views = wait_until(lambda: len(seen(code_dir)) == 4 and seen(code_dir), DEADLINE, "four trials running")
        assert len(set(hosts_of_first_attempts(experiment).values())) == 2, "trials on both nodes"
        pids = [pid for view in views.values() for pid in view["pids"]]
        assert len(alive(pids)) == 8
    finally:
        experiment.stop()
    wait_until(lambda: not alive(pids), 5, "every trial and child on every node to end")
    assert {t.status for t in experiment.list_trial_jobs()} == {"USER_CANCELED"}
    metrics = [m for t in experiment.list_trial_jobs() for m in experiment.get_job_metrics(t.trialJobId)[t.trialJobId]]
    assert len(metrics) == 4, "each trial's intermediate result, relayed and stored before the stop"


def test_a_sigkilled_experiment_leaves_no_trial_on_any_node_and_resume_reruns_them(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    write_ray_config_file(code_dir, ray_cluster)
    home = tmp_path / "home"
    env = expctl_env(home)
    create = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                               "--foreground", "--exit-when-done"], cwd=code_dir, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        views = wait_until(lambda: len(seen(code_dir)) == 4 and seen(code_dir), DEADLINE, "four trials running")
        pids = [pid for view in views.values() for pid in view["pids"]]
        database = next(home.glob("*/db/experiment.sqlite"))
        wait_until(lambda: sqlite3.connect(database).execute(
            "SELECT COUNT(*) FROM metrics").fetchone()[0] == 4, DEADLINE, "the four intermediate results stored")
        create.kill()
        create.wait(timeout=30)
        wait_until(lambda: not alive(pids), 5, "no trial process, nor child, left on any node")
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    exp_id = database.parent.parent.name
    (code_dir / "release").write_text("")
    resumed = subprocess.run([sys.executable, "-m", "expmgr.cli", "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=code_dir, env=env, capture_output=True, text=True,
                             timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT status FROM experiment").fetchone()[0] == "DONE"
        rows = db.execute("SELECT trial_id, status FROM trials").fetchall()
        assert sorted(status for _, status in rows) == ["SUCCEEDED"] * 4
        kinds = db.execute("SELECT type, COUNT(*) FROM metrics GROUP BY type ORDER BY type").fetchall()
    # The intermediate results from before the kill are kept, and each trial's second attempt adds its own.
    assert kinds == [("FINAL", 4), ("PERIODICAL", 8)]


STUBBORN_TRIAL = """
    import json, os, signal, subprocess, time
    import expmgr
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    expmgr.get_next_parameter()
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    os.makedirs("seen", exist_ok=True)
    with open(f"seen/{expmgr.get_trial_id()}.1.json", "w") as f:
        json.dump({"pids": [os.getpid(), child.pid]}, f)
    time.sleep(300)
"""


def test_expctl_stop_cancel_kills_trials_ignoring_sigterm_and_their_children_on_every_node(
        ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", STUBBORN_TRIAL)
    write_ray_config_file(code_dir, ray_cluster, "trialGracePeriod: 10m\n")
    env = expctl_env(tmp_path / "home")

    def expctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=code_dir, env=env,
                              capture_output=True, text=True, timeout=120)
    created = expctl("create", "--config", "config.yml", "--port", "0")
    assert created.returncode == 0, created.stderr
    try:
        views = wait_until(lambda: len(seen(code_dir)) == 4 and seen(code_dir), DEADLINE, "four trials running")
        pids = [pid for view in views.values() for pid in view["pids"]]
        stopped = expctl("stop", "--cancel", "--timeout", "60")
        assert stopped.returncode == 0, stopped.stderr
        wait_until(lambda: not alive(pids), 5, "every trial and child on every node to end, grace or not")
    finally:
        expctl("stop", "--cancel", "--timeout", "60")
    listed = json.loads(expctl("trial", "ls", created.stdout.split()[1], "--json").stdout)
    assert {trial["status"] for trial in listed} == {"USER_CANCELED"}


SLOW_TO_STOP_TRIAL = """
    import os, signal, sys, time
    import expmgr
    told = []
    signal.signal(signal.SIGTERM, lambda *_: told.append(time.monotonic()))
    expmgr.get_next_parameter()
    os.makedirs("seen", exist_ok=True)
    open(f"seen/{expmgr.get_trial_id()}.1.json", "w").write("{}")
    while not told:
        time.sleep(0.05)
    time.sleep(6)   # longer than Ray's failure-signal handler waits before it aborts the driver
    open(f"seen/{expmgr.get_trial_id()}.stopped", "w").close()
    sys.exit(143)
"""


def test_expctl_stop_gives_trials_their_grace_period_and_the_experiment_ends_stopped(ray_cluster, tmp_path, code_dir):
    """One SIGTERM (expctl stop) with trials that take 6 s to end: the experiment process is
    not aborted by Ray's failure-signal handler; trials end within their grace, USER_CANCELED."""
    write_script(code_dir, "trial.py", SLOW_TO_STOP_TRIAL)
    write_ray_config_file(code_dir, ray_cluster, "trialGracePeriod: 30s\n")
    home = tmp_path / "home"
    env = expctl_env(home)

    def expctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=code_dir, env=env,
                              capture_output=True, text=True, timeout=180)
    created = expctl("create", "--config", "config.yml", "--port", "0")
    assert created.returncode == 0, created.stderr
    exp_id = created.stdout.split()[1]
    try:
        wait_until(lambda: len(seen(code_dir)) == 4, DEADLINE, "four trials running")
        pid = Registry(home).get(exp_id).pid
        stopped = expctl("stop", exp_id, "--timeout", "120")
        assert stopped.returncode == 0, f"{stopped.stdout}{stopped.stderr}"
        wait_until(lambda: not alive([pid]), DEADLINE, "the experiment process to end by itself")
    finally:
        expctl("stop", "--cancel", "--timeout", "60")
    entry = Registry(home).get(exp_id)
    assert (entry.status.value, entry.pid) == ("STOPPED", None), "its end recorded and its server closed"
    assert len(list((code_dir / "seen").glob("*.stopped"))) == 4, "every trial finished its own stop"
    listed = json.loads(expctl("trial", "ls", exp_id, "--json").stdout)
    assert [trial["status"] for trial in listed] == ["USER_CANCELED"] * 4


def two_running_on_the_worker(experiment: Experiment, cluster: RayCluster, code_dir: Path) -> set[str]:
    """Once four trials run (two a node), the ids of those on the worker node."""
    wait_until(lambda: len(seen(code_dir)) == 4, DEADLINE, "four trials running")
    hosts = hosts_of_first_attempts(experiment)
    on_worker = {trial_id for trial_id, host in hosts.items() if host == cluster.worker_name}
    assert len(on_worker) == 2, f"two trials on the worker: {hosts}"
    return on_worker


def assert_run_again_on_the_head(experiment: Experiment, trial_ids: set[str]) -> None:
    attempts = attempts_of(experiment)
    again = [(trial_id, host) for trial_id, attempt, _, host in attempts if attempt == 2]
    assert {t for t, _ in again} == trial_ids and {host for _, host in again} == {"head"}, attempts


def test_a_dead_worker_node_crashes_its_trials_and_they_are_retried_on_the_head(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=4,
                                       max_trial_retries=1))
    experiment.start(port=0)
    try:
        on_worker = two_running_on_the_worker(experiment, ray_cluster, code_dir)
        ray_cluster.kill_worker()
        wait_until(lambda: {(t, s) for t, a, s, _ in attempts_of(experiment) if a == 1 and s == "CRASHED"}
                   == {(t, "CRASHED") for t in on_worker}, DEADLINE, "the worker's trials CRASHED")
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}
    assert_run_again_on_the_head(experiment, on_worker)


PREEMPTIBLE_TRIAL = """
    import json, os, time
    import expmgr
    params = expmgr.get_next_parameter()
    state = os.path.join(expmgr.get_checkpoint_dir(), "state")
    os.makedirs("seen", exist_ok=True)
    with open(f"seen/{expmgr.get_trial_id()}.{expmgr.get_attempt()}.json", "w") as f:
        json.dump({"resumed": os.path.exists(state)}, f)
    if os.path.exists(state):
        with open(state) as f:
            expmgr.report_final_result({"default": params["x"], "from": f.read()})
    else:
        def save():
            with open(state, "w") as f:
                f.write(f"checkpoint of x={params['x']}")
        expmgr.install_preemption_handler(save)
        while not os.path.exists("release"):
            time.sleep(0.05)
        expmgr.report_final_result({"default": params["x"], "from": None})
"""


def test_a_drained_node_preempts_its_trials_which_continue_from_their_checkpoints(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", PREEMPTIBLE_TRIAL)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=4,
                                       max_trial_retries=0))
    experiment.start(port=0)
    try:
        on_worker = two_running_on_the_worker(experiment, ray_cluster, code_dir)
        ray_cluster.drain_worker(reason="preemption", deadline_s=60)
        wait_until(lambda: {t for t, a, s, _ in attempts_of(experiment) if s == "PREEMPTED"} == on_worker,
                   DEADLINE, "the drained node's trials PREEMPTED")
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
        ray_cluster.kill_worker()  # a drained node takes no more work: the next test gets a new one
    trials = {t.trialJobId: t for t in experiment.list_trial_jobs()}
    assert {t.status for t in trials.values()} == {"SUCCEEDED"}
    for trial_id in on_worker:
        assert trials[trial_id].finalMetric["from"].startswith("checkpoint of x="), "continued from its checkpoint"
    assert_run_again_on_the_head(experiment, on_worker)


def test_a_node_that_does_not_share_the_folder_stops_the_experiment_before_any_trial(tmp_path, code_dir):
    """A worker node in a mount namespace of its own, where the experiment's folder is a
    different (empty) tmpfs: it is up, but does not see the manager's files."""
    if os.geteuid() != 0:
        pytest.skip("mounting a private tmpfs for the worker node needs root")
    write_script(code_dir, "trial.py", "open('started', 'w').close()\n")
    home = tmp_path / "home"
    home.mkdir()
    with RayCluster(private_worker_dir=home) as cluster:
        experiment = Experiment(ray_config(cluster, code_dir, home, max_trial_number=1,
                                           search_space={"x": {"_type": "choice", "_value": [1]}}))
        experiment.start(port=0)
        try:
            assert experiment.wait(timeout=DEADLINE)
        finally:
            experiment.stop()
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert "not shared by every node" in error and str(home) in error, error
    assert not (code_dir / "started").exists() and experiment.list_trial_jobs() == []


def test_a_late_node_without_the_folder_has_its_slot_ended_and_named_with_the_cause_and_trials_run_elsewhere(
        tmp_path, code_dir):
    """A worker node that joins after the start in a mount namespace of its own (an empty tmpfs
    where the experiment's folder is): the slot Ray places there cannot start its trial."""
    if os.geteuid() != 0:
        pytest.skip("mounting a private tmpfs for the worker node needs root")
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    home = tmp_path / "home"
    home.mkdir()
    with RayCluster(private_worker_dir=home) as cluster:
        cluster.kill_worker()   # the experiment starts with the head alone; the worker joins later
        experiment = Experiment(ray_config(cluster, code_dir, home, max_trial_number=4, max_trial_retries=1))
        experiment.start(port=0)
        try:
            wait_until(lambda: len(seen(code_dir)) == 2, DEADLINE, "two trials running on the head")
            cluster.add_worker()
            log = experiment.paths.root / "logs" / "experiment.log"
            wait_until(lambda: "could not start it" in log.read_text(), DEADLINE, "a slot on the late node to fail")
            (code_dir / "release").write_text("")
            assert experiment.wait(timeout=DEADLINE * 2)
        finally:
            experiment.stop()
        text = log.read_text()
        worker = cluster.worker_name
    assert f"on node {worker} is ended" in text and "does not see the trial's folder" in text, text
    assert "\x1b[" not in text and "TrialSlot.start_trial" not in text, "the cause, not Ray's coloured header"
    attempts = attempts_of(experiment)
    lost = [(trial_id, host) for trial_id, _, status, host in attempts if status == "CRASHED"]
    assert lost and {host for _, host in lost} == {worker}, attempts
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}, "the trials ran elsewhere"
    assert {host for _, _, status, host in attempts if status == "SUCCEEDED"} == {"head"}, attempts


def test_a_node_that_dies_before_its_shared_folder_probe_is_skipped_and_named(ray_cluster, tmp_path):
    """A node Ray listed alive dies before the probe reaches it (Ray then says
    "NodeAffinitySchedulingStrategy ... doesn't exist any more"): as at an experiment's start
    right after a node died. The probe is given the node list from before the death."""
    script = write_script(tmp_path, "probe.py", f"""
        import asyncio, logging, sys
        from pathlib import Path
        import ray
        from expmgr.layout import ExperimentPaths
        from expmgr.training.ray import probe_shared_folder
        logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
        ray.init(address={ray_cluster.address!r}, log_to_driver=False, logging_level=logging.ERROR)
        nodes = [node for node in ray.nodes() if node["Alive"]]
        assert len(nodes) == 2, nodes
        print("listed", flush=True)
        sys.stdin.readline()   # the worker is killed meanwhile
        asyncio.run(probe_shared_folder(ExperimentPaths(Path({str(tmp_path / "exp")!r})), nodes=nodes))
        print("probe passed", flush=True)
    """)
    probe = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert probe.stdout.readline().strip() == "listed"
        worker = ray_cluster.worker_name
        ray_cluster.kill_worker()
        probe.stdin.write("\n")
        probe.stdin.flush()
        output, _ = probe.communicate(timeout=120)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
        ray_cluster.ensure_worker()
    assert probe.returncode == 0 and "probe passed" in output, output
    assert f"node {worker} left the Ray cluster during the shared-folder probe; skipped" in output, output


RELAY_PROBING_TRIAL = """
    import json, os, socket
    import expmgr
    expmgr.get_next_parameter()
    port = int(os.environ["EXPMGR_MANAGER_PORT"])
    prefix = os.environ.get("EXPMGR_MANAGER_URL_PREFIX", "")
    route = prefix + f"/api/v1/expmgr/trials/{expmgr.get_trial_id()}/metrics"

    def send(raw):
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        conn.sendall(raw)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        conn.close()
        return int(answer.split(b" ", 2)[1])

    body = b'{}'
    statuses = {
        "garbage": send(b"\\x00\\xff not http at all\\r\\n\\r\\n"),
        "wrong route": send(b"POST /api/v1/nni/experiment HTTP/1.1\\r\\nContent-Length: 2\\r\\n\\r\\n{}"),
        "delete": send(b"DELETE " + route.encode() + b" HTTP/1.1\\r\\n\\r\\n"),
        "huge body": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nContent-Length: 100000000\\r\\n\\r\\n"),
        "huge head": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nX: " + b"a" * 100000 + b"\\r\\n\\r\\n"),
        "no token": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nContent-Length: 2\\r\\n\\r\\n{}"),
    }
    with open("statuses.json", "w") as f:
        json.dump(statuses, f)
    expmgr.report_final_result(7)
"""


def test_the_relay_refuses_what_is_not_a_report_and_the_trial_still_reports(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RELAY_PROBING_TRIAL)
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=1,
                                       search_space={"x": {"_type": "choice", "_value": [1]}}))
    assert experiment.run(port=0)
    statuses = json.loads((code_dir / "statuses.json").read_text())
    assert statuses == {"garbage": 404, "wrong route": 404, "delete": 404, "huge body": 413, "huge head": 400,
                        "no token": 403}, "the manager's own answer (403) for a report without its token"
    [trial] = experiment.list_trial_jobs()
    assert (trial.status, trial.finalMetric) == ("SUCCEEDED", 7)
    stderr = (experiment.paths.trial_dir(trial.trialJobId) / "stderr").read_text()
    assert "warning" not in stderr, "the real report went through the relay, not the end-of-trial pick-up"


def test_an_unreachable_cluster_is_a_clear_error(tmp_path, code_dir):
    write_script(code_dir, "trial.py", "")
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
                              trial_code_directory=code_dir, tuner={"name": "GridSearch"}, trial_concurrency=1,
                              experiment_working_directory=tmp_path / "home",
                              training_service={"platform": "ray", "address": "127.0.0.1:1"})
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert "cannot connect to the Ray cluster at trainingService.address '127.0.0.1:1'" in experiment.get_error()


class NotRayListener:
    """A real TCP server on loopback that is not Ray: it accepts and says nothing ("silent"),
    or answers like an HTTP/1 server ("http"). Stopped on exit; its connections closed."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed
            self.connections.append(connection)
            if self.kind == "http":
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    def __enter__(self) -> NotRayListener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        self.thread.join(5)
        for connection in self.connections:
            connection.close()


def not_ray_config(address: str, code_dir: Path, home: Path) -> ExperimentConfig:
    write_script(code_dir, "trial.py", "")
    return ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
                            trial_code_directory=code_dir, tuner={"name": "GridSearch"}, trial_concurrency=1,
                            experiment_working_directory=home, training_service={"platform": "ray", "address": address})


@pytest.mark.parametrize("kind", ["silent", "http"])
def test_an_address_where_something_else_listens_is_a_clear_error_within_seconds(tmp_path, code_dir, kind):
    with NotRayListener(kind) as listener:
        experiment = Experiment(not_ray_config(listener.address, code_dir, tmp_path / "home"))
        experiment.start(port=0)
        try:
            ended = experiment.wait(timeout=30)
        finally:
            experiment.stop()
    assert ended, "connecting is bounded: ERROR within 30 s, not Ray's minutes of retries"
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert f"cannot connect to the Ray cluster at trainingService.address {listener.address!r}" in error, error
    assert "Ray's GCS" in error and "\n" not in error.strip(), error


def test_a_stop_while_connecting_to_a_silent_address_ends_the_experiment(tmp_path, code_dir):
    with NotRayListener("silent") as listener:
        experiment = Experiment(not_ray_config(listener.address, code_dir, tmp_path / "home"))
        experiment.start(port=0)
        try:
            wait_until(lambda: listener.connections, DEADLINE, "the experiment to connect")
            stopping = threading.Thread(target=experiment.stop, daemon=True)   # returns once it ended
            stopping.start()
            stopping.join(30)
            assert not stopping.is_alive(), "a stop while connecting is honoured, not held up by the connect"
        finally:
            experiment.stop()
    # Honoured, not waited out: the check, left to itself, ends in ERROR after its 10 s timeouts.
    assert experiment.get_status() == "STOPPED", (experiment.get_status(), experiment.get_error())


def test_resources_no_node_has_are_a_clear_error(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", "")
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=1,
                                       trial_resources={"cpu": 1, "gpu": 8, "tpu": 1}))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert "no node of the Ray cluster has the trialResources a trial asks for (cpu: 1, gpu: 8, tpu: 1)" \
        in experiment.get_error()


@pytest.mark.parametrize("runtime_env, message", [
    ({"working_dir": "/nonexistent-expmgr-dir"}, "(see trainingService.runtimeEnv): directory /nonexistent-expmgr-dir"),
    ({"pip": ["expmgr-no-such-package==9.9.9"]}, "trainingService.runtimeEnv could not be set up on node "),
])
def test_a_runtime_env_ray_cannot_set_up_is_a_clear_error_before_any_trial(ray_cluster, tmp_path, code_dir,
                                                                           runtime_env, message):
    write_script(code_dir, "trial.py", "open('started', 'w').close()\n")
    config = ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=1,
                        search_space={"x": {"_type": "choice", "_value": [1]}})
    config.training_service["runtimeEnv"] = runtime_env
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert message in experiment.get_error() and "Traceback" not in experiment.get_error(), experiment.get_error()
    assert not (code_dir / "started").exists()


def test_many_short_trials_all_succeed_while_slots_come_and_go(ray_cluster, tmp_path, code_dir):
    """Freed slots go to waiting trials while the slots those trials waited for stay asked for
    (one never fits): no slot's watchdog may take another slot's trial for its own."""
    write_script(code_dir, "trial.py", """
        import os, expmgr
        expmgr.report_final_result({"default": expmgr.get_next_parameter()["x"], "slot": os.getppid()})
    """)
    # Three at a time where two fit (the head's 2 CPUs): one always waits for a slot.
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=24,
                                       trial_concurrency=3, trial_resources={"cpu": 1, "node_head": 0.01},
                                       search_space={"x": {"_type": "choice", "_value": list(range(24))}}))
    assert experiment.run(port=0)
    trials = experiment.list_trial_jobs()
    assert sorted(t.finalMetric["default"] for t in trials) == list(range(24))
    assert {t.status for t in trials} == {"SUCCEEDED"}, [(t.trialJobId, t.status) for t in trials]
    assert all(t.attempts == 1 for t in trials)
    slots = {t.finalMetric["slot"] for t in trials}
    assert len(slots) <= 3, f"a freed slot goes to the waiting trial, not a new one each time: {len(slots)} slots"


# Holds on until four trials run at once (each keeps a file in ../running/ while it runs), for
# at most a second: so "four at once" is a condition the run reaches, not a speed; and the trials
# stay short (a second is less than a new slot takes to start on a busy machine).
RENDEZVOUS_TRIAL = """
    import os, time
    import expmgr
    params = expmgr.get_next_parameter()
    os.makedirs("running", exist_ok=True)
    mine = os.path.join("running", expmgr.get_trial_id())
    open(mine, "w").close()
    deadline = time.monotonic() + 0.2
    while len(os.listdir("running")) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    saw_four = len(os.listdir("running")) >= 4
    os.unlink(mine)
    expmgr.report_final_result({"default": params["x"], "saw_four": saw_four})
"""


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) that overlap at one moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, step in edges:  # at equal times an end (-1) sorts first: touching is not overlapping
        running += step
        most = max(most, running)
    return most


def test_short_trials_keep_every_slot_busy_on_both_nodes_with_about_concurrency_actors(
        ray_cluster, tmp_path, code_dir):
    """Trials shorter than a slot's start-up: a slot asked for is kept when a freed one takes its
    trial (it is free once placed), so the run reaches its concurrency on both nodes and makes
    about trialConcurrency slots, not one per trial (issue 26)."""
    write_script(code_dir, "trial.py", RENDEZVOUS_TRIAL)
    trials = 40
    slots_before = {actor["ActorID"] for actor in ray_cluster.actors("TrialSlot")}
    experiment = Experiment(ray_config(ray_cluster, code_dir, tmp_path / "home", max_trial_number=trials,
                                       trial_concurrency=4,
                                       search_space={"x": {"_type": "choice", "_value": list(range(trials))}}))
    assert experiment.run(port=0)
    made = [actor for actor in ray_cluster.actors("TrialSlot") if actor["ActorID"] not in slots_before]
    listed = experiment.list_trial_jobs()
    assert {t.status for t in listed} == {"SUCCEEDED"} and len(listed) == trials
    with sqlite3.connect(experiment.paths.database) as db:
        attempts = db.execute("SELECT start_time, end_time, host FROM attempts").fetchall()
    assert most_at_once([(start, end) for start, end, _ in attempts]) == 4, attempts
    assert {host for _, _, host in attempts} == {"head", ray_cluster.worker_name}, "slots on both nodes"
    assert len(made) <= 4 + 2, f"{len(made)} slot actors made for {trials} trials at concurrency 4"
    saw_four = sum(1 for t in listed if t.finalMetric["saw_four"])
    print(f"{len(made)} slot actors; {saw_four} of {trials} trials saw four running")

"""Multi-node trials on Ray (``trainingService.trialPlacement``, ``expmgr/training/ray_group.py``)
against the real two-node cluster of ``tests/helpers/ray_cluster.py``: two ranks, one per node
(STRICT_SPREAD), that meet at MASTER_ADDR:MASTER_PORT, and are one trial to every contract:
success, a failing rank, a stop, a lost node, each rank's output."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.ray_cluster import RayCluster, ray_cluster, ray_cluster_module  # noqa: F401
from tests.helpers.server import get_text

DEADLINE = 90.0

# Each rank writes what it sees into ../seen/<trial>.<attempt>.rank<RANK>.json once rank 1 has
# reached rank 0 at MASTER_ADDR:MASTER_PORT (rank 0 listens, rank 1 connects and says hello);
# then, with mode "fail", rank 1 exits 3 (and rank 0 ignores SIGTERM); else each waits for
# ../release, reports its rank and ends. A SIGTERM is noted in ../seen/<...>.term, a SIGUSR1
# in ../seen/<...>.usr1 (then it exits marked preempting).
RANK_TRIAL = """
    import json, os, signal, socket, subprocess, sys, time
    import expmgr
    params = expmgr.get_next_parameter()
    rank = int(os.environ["RANK"])
    name = f"{expmgr.get_trial_id()}.{expmgr.get_attempt()}.rank{rank}"
    os.makedirs("seen", exist_ok=True)
    def on_term(*_):
        open(f"seen/{name}.term", "w").close()
        if params["mode"] != "fail":   # with "fail", rank 0 ignores it: only SIGKILL ends it
            sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
    def on_usr1(*_):   # a preemption notice: noted, then the rank ends preempting
        open(f"seen/{name}.usr1", "w").close()
        expmgr.mark_preempting()
        sys.exit(128 + signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, on_usr1)
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)   # leaves the rank's group
    address = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if rank == 0:
        with socket.create_server(("", address[1])) as server:
            connection, _ = server.accept()
            with connection:
                heard = connection.recv(100).decode()
    else:
        deadline = time.monotonic() + 120
        while True:
            try:
                connection = socket.create_connection(address, timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with connection:
            connection.sendall(f"hello from rank {rank}".encode())
        heard = None
    print(f"rank {rank} says hello")
    print(f"rank {rank} on stderr", file=sys.stderr)
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "CUDA_VISIBLE_DEVICES")
    with open(f"seen/{name}.json", "w") as f:
        json.dump({"env": {n: os.environ.get(n) for n in names}, "heard": heard, "ppid": os.getppid(),
                   "pids": [os.getpid(), child.pid]}, f)
    if params["mode"] == "fail" and rank == 1:
        sys.exit(3)
    while not os.path.exists("release"):
        time.sleep(0.05)
    expmgr.report_final_result(rank)
"""


def placement_config(cluster: RayCluster, code_dir: Path, home: Path, mode: str = "ok",
                     **fields: Any) -> ExperimentConfig:
    return ExperimentConfig(
        search_space={"mode": {"_type": "choice", "_value": [mode]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, tuner={"name": "GridSearch"},
        experiment_working_directory=home,
        training_service={"platform": "ray", "address": cluster.address,
                          "trialPlacement": {"workers": fields.pop("workers", 2),
                                             "resourcesPerWorker": fields.pop("resources", {"cpu": 1}),
                                             "strategy": "STRICT_SPREAD"}},
        **{"trial_concurrency": 1, "max_trial_number": 1, "trial_grace_period": 5, **fields})


def ranks_seen(code_dir: Path, attempt: int = 1) -> dict[int, dict[str, Any]]:
    """What each rank of the (one) trial's attempt wrote, by rank."""
    found = {}
    for path in (code_dir / "seen").glob(f"*.{attempt}.rank*.json") if (code_dir / "seen").is_dir() else []:
        try:
            found[int(path.stem.rsplit("rank", 1)[1])] = json.loads(path.read_text())
        except ValueError:
            pass  # being written
    return found


def both_ranks(code_dir: Path, attempt: int = 1) -> dict[int, dict[str, Any]]:
    return wait_until(lambda: len(ranks_seen(code_dir, attempt)) == 2 and ranks_seen(code_dir, attempt),
                      DEADLINE, f"both ranks of attempt {attempt} running")  # type: ignore[return-value]


def node_of(cluster: RayCluster, pid: int) -> str:
    """The role of the node whose Ray processes include ``pid`` (a rank's parent: its slot)."""
    for node in cluster.nodes():
        if pid in {process.pid for process in node.processes()}:
            return node.role
    raise AssertionError(f"process {pid} is no node's")


def alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def attempts_of(experiment: Experiment) -> list[tuple[int, str, str | None]]:
    with sqlite3.connect(experiment.paths.database) as db:
        return db.execute("SELECT attempt, status, host FROM attempts ORDER BY attempt").fetchall()


def test_two_ranks_run_one_per_node_meet_at_the_master_and_the_trial_succeeds_with_both_outputs(
        ray_cluster, home, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, home, resources={"cpu": 1, "gpu": 1}))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        assert {node_of(ray_cluster, ranks[r]["ppid"]) for r in (0, 1)} == {"head", "worker"}, "one rank per node"
        for rank in (0, 1):
            assert ranks[rank]["env"]["CUDA_VISIBLE_DEVICES"] in ("0", "1"), "its bundle's one GPU"
            assert ranks[rank]["env"] == {
                "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                "MASTER_ADDR": ranks[0]["env"]["MASTER_ADDR"], "MASTER_PORT": ranks[0]["env"]["MASTER_PORT"],
                "CUDA_VISIBLE_DEVICES": ranks[rank]["env"]["CUDA_VISIBLE_DEVICES"]}
        assert ranks[0]["heard"] == "hello from rank 1", "rank 1 reached rank 0 at MASTER_ADDR:MASTER_PORT"
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
        [trial] = experiment.list_trial_jobs()
        assert experiment.port is not None
        served = get_text(experiment.port, f"/api/v1/nni/trial-file/{trial.trialJobId}/rank1.stdout")
        assert served[0::2] == (200, "rank 1 says hello\n"), "the REST trial-file route serves rank 1's output"
    finally:
        experiment.stop()
    logged = subprocess.run([sys.executable, "-m", "expmgr.cli", "log", "stderr", experiment.id, trial.trialJobId,
                             "--rank", "1"], capture_output=True, text=True, timeout=60)
    assert logged.returncode == 0 and "rank 1 on stderr" in logged.stdout, logged.stderr
    [trial] = experiment.list_trial_jobs()
    assert (trial.status, trial.finalMetric) == ("SUCCEEDED", 0), "rank 0's result is the trial's"
    assert [(attempt, status) for attempt, status, _ in attempts_of(experiment)] == [(1, "SUCCEEDED")]
    assert set(attempts_of(experiment)[0][2].split(",")) == {"head", ray_cluster.worker_name}
    folder = experiment.paths.trial_dir(trial.trialJobId)
    assert (folder / "stdout").read_text() == "rank 0 says hello\n"
    assert (folder / "stderr").read_text() == "rank 0 on stderr\n"
    assert (folder / "rank1.stdout").read_text() == "rank 1 says hello\n"
    rank1_stderr = (folder / "rank1.stderr").read_text()
    assert "rank 1 on stderr" in rank1_stderr and "rank 1's metric reports are not stored" in rank1_stderr
    assert len((folder / "metrics.jsonl").read_text().splitlines()) == 1, "rank 0's report alone"


def test_a_failing_rank_ends_the_other_after_its_grace_and_the_trial_fails_with_its_exit_code(
        ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home", mode="fail",
                                             trial_grace_period=3))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        # Rank 0 waits for a release that never comes and ignores SIGTERM: only the SIGKILL that
        # follows its failing peer's SIGTERM after the grace period ends it.
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    [trial] = experiment.list_trial_jobs()
    assert trial.status == "FAILED"
    with sqlite3.connect(experiment.paths.database) as db:
        assert db.execute("SELECT exit_code, signal FROM attempts").fetchall() == [(3, None)], "rank 1's exit"
    assert [path.name.split(".")[-2] for path in (code_dir / "seen").glob("*.term")] == ["rank0"], \
        "rank 0 was told first (SIGTERM)"
    wait_until(lambda: not alive(pids), 10, "both ranks and their children on both nodes to end")


def test_killing_the_trial_signals_every_rank(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home"))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        [trial] = experiment.list_trial_jobs()
        experiment.kill_trial_job(trial.trialJobId)
        wait_until(lambda: len(list((code_dir / "seen").glob("*.term"))) == 2, DEADLINE, "SIGTERM on both ranks")
        wait_until(lambda: not alive(pids), 15, "both ranks and their children on both nodes to end")
        wait_until(lambda: experiment.list_trial_jobs()[0].status == "USER_CANCELED", DEADLINE, "the trial ended")
    finally:
        experiment.stop()


def test_stop_gives_every_rank_its_grace_and_leaves_no_process_on_either_node(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home", trial_grace_period=60))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        assert len(alive(pids)) == 4
    finally:
        experiment.stop()
    assert sorted(path.name.split(".")[-2] for path in (code_dir / "seen").glob("*.term")) == ["rank0", "rank1"], \
        "each rank handled its SIGTERM"
    wait_until(lambda: not alive(pids), 10, "both ranks and their children on both nodes to end")
    assert [t.status for t in experiment.list_trial_jobs()] == ["USER_CANCELED"]


def test_a_killed_worker_node_crashes_the_trial_ends_its_other_rank_and_the_trial_is_retried(
        ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home", max_trial_retries=1))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        ray_cluster.kill_worker()
        wait_until(lambda: [(a, s) for a, s, _ in attempts_of(experiment)][:1] == [(1, "CRASHED")], DEADLINE,
                   "the first attempt CRASHED")
        wait_until(lambda: not alive(pids), 15, "the head's rank, and every child, to end")
        ray_cluster.add_worker()  # STRICT_SPREAD: the retry needs two nodes again
        both_ranks(code_dir, attempt=2)
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert [(a, s) for a, s, _ in attempts_of(experiment)] == [(1, "CRASHED"), (2, "SUCCEEDED")]
    assert [t.status for t in experiment.list_trial_jobs()] == ["SUCCEEDED"]


def test_a_drained_node_preempts_the_trial_on_every_rank_and_it_runs_again_on_a_new_placement(
        ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home", max_trial_retries=0))
    experiment.start(port=0)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        ray_cluster.drain_worker(reason="preemption", deadline_s=60)
        wait_until(lambda: [(a, s) for a, s, _ in attempts_of(experiment)][:1] == [(1, "PREEMPTED")], DEADLINE,
                   "the first attempt PREEMPTED")
        assert sorted(p.name.split(".")[-2] for p in (code_dir / "seen").glob("*.1.rank*.usr1")) == ["rank0", "rank1"]
        wait_until(lambda: not alive(pids), 15, "both ranks and their children to end")
        ray_cluster.kill_worker()  # a drained node takes no new work: STRICT_SPREAD needs a second node
        ray_cluster.add_worker()
        both_ranks(code_dir, attempt=2)
        (code_dir / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert [(a, s) for a, s, _ in attempts_of(experiment)] == [(1, "PREEMPTED"), (2, "SUCCEEDED")]


def test_a_placement_no_cluster_can_hold_is_a_clear_error_at_start(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", "")
    experiment = Experiment(placement_config(ray_cluster, code_dir, tmp_path / "home", workers=3))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert "cannot place trialPlacement's 3 workers of (cpu: 1) with strategy STRICT_SPREAD" in experiment.get_error()


def start_daemon_in_foreground(cluster: RayCluster, code_dir: Path, home: Path) -> subprocess.Popen:
    """``expctl create --foreground`` of one two-rank trial: the experiment process itself."""
    (code_dir / "config.yml").write_text(textwrap.dedent(f"""\
        searchSpace: {{mode: {{_type: choice, _value: [ok]}}}}
        trialCommand: python3 trial.py
        trialCodeDirectory: .
        trialConcurrency: 1
        maxTrialNumber: 1
        trialGracePeriod: 60
        tuner: {{name: GridSearch}}
        trainingService:
          platform: ray
          address: "{cluster.address}"
          trialPlacement: {{workers: 2, resourcesPerWorker: {{cpu: 1}}, strategy: STRICT_SPREAD}}
        """))
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                             "--foreground", "--exit-when-done"], cwd=code_dir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_sigkilled_experiment_leaves_no_rank_nor_child_on_either_node(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    create = start_daemon_in_foreground(ray_cluster, code_dir, tmp_path / "home")
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        assert len(alive(pids)) == 4
        create.kill()
        create.wait(timeout=30)
        wait_until(lambda: not alive(pids), 15, "no rank, nor child of one, left on either node")
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()


def test_a_preempted_experiment_gives_every_rank_sigusr1_and_the_trial_ends_preempted(ray_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", RANK_TRIAL)
    home = tmp_path / "home"
    create = start_daemon_in_foreground(ray_cluster, code_dir, home)
    try:
        ranks = both_ranks(code_dir)
        pids = [pid for rank in ranks.values() for pid in rank["pids"]]
        create.send_signal(signal.SIGUSR1)
        create.wait(timeout=DEADLINE)
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    assert sorted(path.name.split(".")[-2] for path in (code_dir / "seen").glob("*.usr1")) == ["rank0", "rank1"]
    wait_until(lambda: not alive(pids), 15, "no rank, nor child of one, left on either node")
    database = next(home.glob("*/db/experiment.sqlite"))
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT attempt, status FROM attempts").fetchall() == [(1, "PREEMPTED")]

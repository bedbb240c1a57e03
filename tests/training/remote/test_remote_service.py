"""The remote training service end to end: real experiments whose trials run on two real sshd
hosts (``tests/helpers/ssh_hosts.py``), which do not see the manager's folders. The trials wait
on files of a folder every host sees (``shared``: the tests' rendezvous, not the service's),
and the hosts' processes are looked at in their own namespaces. Every wait is on a condition
with a deadline."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.config import ResolvedConfig
from expmgr.layout import ExperimentPaths
from expmgr.training import TrialLaunch, create_training_service
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.ssh_hosts import SshHost, SshHosts, ssh_client_home, ssh_host_pair, ssh_hosts  # noqa: F401

DEADLINE = 60.0
NNI_EXAMPLES = REPO / "tests" / "nni_examples" / "configs" / "trials"

# A trial, as NNI users write them: it prints, starts a child that leaves its process group,
# reports, marks itself started in ``shared`` and waits there until four trials started (so
# that four run at once; not with ``alone`` as its second argument) and, with ``release`` or
# ``alone``, until the test releases it.
TRIAL = """
    import os, subprocess, sys, time
    import nni
    shared, wait_for = sys.argv[1], sys.argv[2]
    params = nni.get_next_parameter()
    trial, attempt = os.environ["EXPMGR_TRIAL_ID"], os.environ["EXPMGR_TRIAL_ATTEMPT"]
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    print(f"hello from {trial} x={params['x']}")
    nni.report_intermediate_result(params["x"])
    open(os.path.join(shared, f"started-{trial}-{attempt}"), "w").close()
    while wait_for != "alone" and len([name for name in os.listdir(shared) if name.startswith("started-")]) < 4:
        time.sleep(0.05)
    while wait_for in ("release", "alone") and not os.path.exists(os.path.join(shared, "release")):
        time.sleep(0.05)
    child.kill()
    nni.report_final_result(params["x"])
"""


@pytest.fixture
def hosts(ssh_host_pair: SshHosts, ssh_client_home: Path) -> SshHosts:
    """Both hosts up, their keys in the client's ~/.ssh/known_hosts."""
    shutil.copy(ssh_host_pair.known_hosts, ssh_client_home / ".ssh" / "known_hosts")
    return ssh_host_pair


@pytest.fixture
def shared(ssh_host_pair: SshHosts) -> Iterator[Path]:
    """A folder the test and every host's user see (the hosts do not see pytest's folders)."""
    folder = ssh_host_pair.root / f"shared-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    write_script(folder, "trial.py", TRIAL)
    return folder


def label(host: SshHost) -> str:
    return f"127.0.0.1:{host.port}"


def remote_config(hosts: SshHosts, code_dir: Path, home: Path, shared: Path, wait_for: str,
                  machines: list[dict[str, object]] | None = None, **fields: Any) -> ExperimentConfig:
    return ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}},
        trial_command=f"python3 trial.py {shared} {wait_for}", trial_code_directory=code_dir,
        tuner={"name": "GridSearch"}, experiment_working_directory=home,
        training_service={"platform": "remote",
                          "machineList": machines or [hosts.machine(host) for host in hosts.hosts]},
        **{"trial_concurrency": 4, "max_trial_number": 4, "trial_grace_period": 5, **fields})


def run_until_done(config: ExperimentConfig) -> Experiment:
    """Start an experiment of ``config``, wait until it ended, stop it: it ended DONE."""
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE * 2)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    return experiment


def attempts_of(database: Path) -> list[tuple[str, int, str, str | None]]:
    """(trial id, attempt, status, host) of every attempt, in order."""
    with sqlite3.connect(database) as db:
        return db.execute("SELECT trial_id, attempt, status, host FROM attempts ORDER BY start_time, attempt").fetchall()


def started(shared: Path) -> int:
    return len(list(shared.glob("started-*")))


def trial_processes(host: SshHost) -> list[str]:
    """What runs on the host besides its namespace's init and sshd (trials, children, agents)."""
    found = []
    for process in host.processes():
        try:
            if process.name() not in ("unshare", "sshd"):
                found.append(" ".join(process.cmdline()) or process.name())
        except Exception:  # ended meanwhile
            pass
    return found


def test_an_experiment_runs_its_trials_on_both_hosts_with_their_output_and_reports_here(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    experiment = run_until_done(remote_config(hosts, code_dir, tmp_path / "home", shared, "four"))
    trials = experiment.list_trial_jobs()
    assert sorted(t.status for t in trials) == ["SUCCEEDED"] * 4
    assert sorted(float(t.finalMetric) for t in trials) == [1, 2, 3, 4], "each trial's nni report, stored"
    hosts_used = [host for _, _, _, host in attempts_of(experiment.paths.database)]
    assert sorted(hosts_used) == sorted([label(h) for h in hosts.hosts] * 2), "two trials on each host, each stored"
    for trial in trials:
        stdout = (experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text()
        assert stdout.startswith(f"hello from {trial.trialJobId} x="), stdout
        stderr_file = experiment.paths.trial_dir(trial.trialJobId) / "stderr"
        stderr = stderr_file.read_text() if stderr_file.exists() else ""
        assert "refused" not in stderr and "failed" not in stderr, f"each report reached the manager live: {stderr}"
    assert not list(code_dir.glob("started-*")), "the trials ran on the hosts, not here"
    listed = subprocess.run([sys.executable, "-m", "expmgr.cli", "trial", "ls", experiment.id, "--json"],
                            env={**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert sorted(trial["host"] for trial in json.loads(listed.stdout)) == sorted(hosts_used), "shown by trial ls"


def write_config_file(hosts: SshHosts, code_dir: Path, shared: Path) -> None:
    machines = ", ".join("{" + ", ".join(f"{key}: {value!s}" for key, value in hosts.machine(host).items()) + "}"
                         for host in hosts.hosts)
    (code_dir / "config.yml").write_text(textwrap.dedent(f"""\
        searchSpace: {{x: {{_type: choice, _value: [1, 2, 3, 4]}}}}
        trialCommand: python3 trial.py {shared} release
        trialCodeDirectory: .
        trialConcurrency: 4
        maxTrialNumber: 4
        tuner: {{name: GridSearch}}
        trainingService: {{platform: remote, machineList: [{machines}]}}
        """))


def test_a_sigkilled_manager_leaves_nothing_on_either_host_and_resume_reruns_its_trials(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    write_config_file(hosts, code_dir, shared)
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    create = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                               "--foreground", "--exit-when-done"], cwd=code_dir, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: started(shared) == 4, DEADLINE, "four trials running")
        database = next(home.glob("*/db/experiment.sqlite"))
        wait_until(lambda: sqlite3.connect(database).execute(
            "SELECT COUNT(*) FROM metrics").fetchone()[0] == 4, DEADLINE, "the four intermediate results stored")
        for host in hosts.hosts:
            running = trial_processes(host)
            assert sum("trial.py" in p for p in running) == 2 and sum(p == "sleep 300" for p in running) == 2, \
                f"two trials and their children on each host: {running}"
        create.kill()
        create.wait(timeout=30)
        wait_until(lambda: not any(trial_processes(host) for host in hosts.hosts), 5,
                   "no trial, child or agent left on either host")
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    exp_id = database.parent.parent.name
    (shared / "release").write_text("")
    resumed = subprocess.run([sys.executable, "-m", "expmgr.cli", "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=code_dir, env=env, capture_output=True, text=True,
                             timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT status FROM experiment").fetchone()[0] == "DONE"
        assert sorted(s for (s,) in db.execute("SELECT status FROM trials")) == ["SUCCEEDED"] * 4
        kinds = db.execute("SELECT type, COUNT(*) FROM metrics GROUP BY type ORDER BY type").fetchall()
    # The intermediate results from before the kill are kept, and each trial's second attempt adds its own.
    assert kinds == [("FINAL", 4), ("PERIODICAL", 8)]
    assert len(list(shared.glob("started-*-2"))) == 4, "every trial ran again"


def test_a_host_killed_mid_run_crashes_its_trials_which_are_retried_on_the_other_host(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    experiment = Experiment(remote_config(hosts, code_dir, tmp_path / "home", shared, "release",
                                          max_trial_retries=1))
    experiment.start(port=0)
    dying, living = hosts.hosts[1], hosts.hosts[0]
    try:
        wait_until(lambda: started(shared) == 4, DEADLINE, "four trials running")
        on_dying = {t for t, _, _, host in attempts_of(experiment.paths.database) if host == label(dying)}
        assert len(on_dying) == 2
        dying.kill()
        wait_until(lambda: {t for t, a, s, _ in attempts_of(experiment.paths.database) if a == 1 and s == "CRASHED"}
                   == on_dying, DEADLINE, "the dead host's trials CRASHED")
        (shared / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE * 2)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}
    retries = {t: host for t, a, _, host in attempts_of(experiment.paths.database) if a == 2}
    assert retries == {t: label(living) for t in on_dying}, "retried on the host still up"


def agents_on(host: SshHost) -> list[int]:
    """The pids (in this machine's view) of the host agents running on ``host``."""
    found = []
    for process in host.processes():
        try:
            if any(part.endswith("host_agent.py") for part in process.cmdline()):
                found.append(process.pid)
        except Exception:  # ended meanwhile
            pass
    return found


def test_a_host_whose_agent_dies_loses_its_trial_and_takes_new_trials_once_reconnected(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    """The connection's end as the service sees it (the agent's stream ends), with the host's
    sshd still there: the host is connected again at once and trials go to it again."""
    experiment = Experiment(remote_config(hosts, code_dir, tmp_path / "home", shared, "alone",
                                          trial_concurrency=2, max_trial_retries=1))
    experiment.start(port=0)
    dropping = hosts.hosts[1]
    try:
        wait_until(lambda: started(shared) == 2, DEADLINE, "two trials running, one on each host")
        database = experiment.paths.database
        [(lost_trial, _, _, _)] = [row for row in attempts_of(database) if row[3] == label(dropping)]
        [agent] = agents_on(dropping)
        os.kill(agent, 9)
        wait_until(lambda: (lost_trial, 1, "CRASHED") in [row[:3] for row in attempts_of(database)], DEADLINE,
                   "the dropped host's trial CRASHED")
        wait_until(lambda: agents_on(dropping) and agents_on(dropping) != [agent], DEADLINE,
                   "the host connected again (a new agent)")
        (shared / "release").write_text("")
        assert experiment.wait(timeout=DEADLINE * 2)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}
    rows = attempts_of(database)
    assert (lost_trial, 2, "SUCCEEDED") in [row[:3] for row in rows], "retried"
    crashed_at = [row[:3] for row in rows].index((lost_trial, 1, "CRASHED"))
    assert label(dropping) in [host for _, _, _, host in rows[crashed_at + 1:]], "new trials on the host once back"


def a_closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("trouble", ["unreachable", "unknown host key"])
def test_a_host_that_cannot_be_used_at_start_ends_the_experiment_in_error_naming_it_before_any_trial(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path, ssh_client_home: Path, trouble: str):
    good, bad = hosts.hosts
    if trouble == "unreachable":
        port = a_closed_port()
        machines = [hosts.machine(good), hosts.machine(bad, port=port)]
        expected = f"host 127.0.0.1:{port}: connection refused"
    else:
        port = bad.port
        hosts.write_known_hosts(ssh_client_home / ".ssh" / "known_hosts", [good])
        machines = [hosts.machine(good), hosts.machine(bad)]
        expected = f"host 127.0.0.1:{port}: host key not in"
    experiment = Experiment(remote_config(hosts, code_dir, tmp_path / "home", shared, "four", machines=machines))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    line = next(line for line in error.splitlines() if "cannot start the remote training service" in line)
    assert expected in line, error
    assert experiment.list_trial_jobs() == [] and started(shared) == 0


def test_nnis_published_remote_config_runs_with_its_hosts_pointed_at_the_test_hosts(
        hosts: SshHosts, tmp_path: Path, ssh_client_home: Path):
    """examples/trials/mnist-pytorch/config_remote.yml as published but for its host fields
    (and ``password: 12345``, a YAML number NNI refuses too, given quoted), 4 trials of its 20,
    and a stand-in mnist.py (no torch here) reporting through ``nni``."""
    published = (NNI_EXAMPLES / "mnist-pytorch" / "config_remote.yml").read_text()
    first, second = hosts.hosts
    text = (published
            .replace("host: ${your server's IP or domain name}", f"host: 127.0.0.1\n      port: {first.port}")
            .replace("user: ${your user name}", f"user: {first.user}")
            .replace("host: 123.123.123.123", "host: 127.0.0.1")
            .replace("port: 10022", f"port: {second.port}")
            .replace("user: nniuser", f"user: {second.user}")
            .replace("password: 12345", f"password: '{second.password}'")
            .replace("maxTrialNumber: 20", "maxTrialNumber: 4"))
    assert text.count("127.0.0.1") == 2 and "maxTrialNumber: 4" in text
    shutil.copy(hosts.client_key, ssh_client_home / ".ssh" / "id_rsa")
    folder = tmp_path / "mnist-pytorch"
    folder.mkdir()
    (folder / "config_remote.yml").write_text(text)
    shutil.copy(NNI_EXAMPLES / "mnist-pytorch" / "search_space.json", folder)
    write_script(folder, "mnist.py", """
        import nni
        params = nni.get_next_parameter()
        print("lr", params["lr"])
        nni.report_final_result(params["lr"])
    """)
    config = ExperimentConfig.load(folder / "config_remote.yml")
    config.experiment_working_directory = tmp_path / "home"
    experiment = run_until_done(config)
    assert [t.status for t in experiment.list_trial_jobs()] == ["SUCCEEDED"] * 4
    assert {host for _, _, _, host in attempts_of(experiment.paths.database)} <= {label(first), label(second)}


RELAY_PROBING_TRIAL = """
    import json, os, socket
    import nni
    nni.get_next_parameter()
    port = int(os.environ["EXPMGR_MANAGER_PORT"])
    route = os.environ.get("EXPMGR_MANAGER_URL_PREFIX", "") + f"/api/v1/expmgr/trials/{nni.get_trial_id()}/metrics"

    def send(raw):
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        answer = b""
        try:
            conn.sendall(raw)
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionError:  # refused before all of it was sent: the answer may be lost
            pass
        conn.close()
        return int(answer.split(b" ", 2)[1]) if answer else "closed"

    statuses = {
        "garbage": send(b"\\x00\\xff not http at all\\r\\n\\r\\n"),
        "another route": send(b"POST /api/v1/nni/experiment HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\n\\r\\n{}"),
        "from a web page": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nOrigin: http://evil.example\\r\\n"
                                b"Content-Length: 2\\r\\n\\r\\n{}"),
        "huge head": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nX: " + b"a" * 100000 + b"\\r\\n\\r\\n"),
        "no token": send(b"POST " + route.encode() + b" HTTP/1.1\\r\\nContent-Type: application/json\\r\\n"
                         b"Content-Length: 2\\r\\n\\r\\n{}"),
    }
    print(json.dumps(statuses))
    nni.report_final_result(7)
"""


def test_the_report_port_relays_only_reports_and_the_server_still_checks_their_token(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    write_script(code_dir, "trial.py", RELAY_PROBING_TRIAL)
    experiment = Experiment(remote_config(hosts, code_dir, tmp_path / "home", shared, "", max_trial_number=1,
                                          trial_concurrency=1))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    [trial] = experiment.list_trial_jobs()
    assert trial.status == "SUCCEEDED" and float(trial.finalMetric) == 7
    statuses = json.loads((experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text())
    assert statuses.pop("huge head") in (400, "closed")
    assert statuses == {"garbage": 403, "another route": 403, "from a web page": 403, "no token": 403}, \
        "refused by the relay, but the last (a report) by the server"


GPU_TRIAL = """
    import os, sys, time
    import nni
    shared = sys.argv[1]
    nni.get_next_parameter()
    with open(os.path.join(shared, f"started-{nni.get_trial_id()}"), "w") as f:
        f.write(os.environ["CUDA_VISIBLE_DEVICES"])
    while not os.path.exists(os.path.join(shared, "release")):
        time.sleep(0.05)
    nni.report_final_result(1)
"""


def show_gpus(host: SshHost, state: Path, gpus: list[int], processes: dict[int, list[int]]) -> None:
    """What the host's fake nvidia-smi answers from now on (tests/helpers/fake_nvidia_smi.py's)."""
    partial = state.with_suffix(".partial")
    partial.write_text(json.dumps({"gpus": gpus, "processes": {str(i): p for i, p in processes.items()},
                                   "pid_folder": None, "refuse_processes": False}))
    os.replace(partial, state)


def test_trials_get_free_gpus_of_each_host_by_its_nvidia_smi_and_wait_for_one(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    """Two GPUs a host; on the second host GPU 1 runs another's process (useActiveGpu: false):
    three trials start, the fourth waits until that process ends there."""
    from tests.helpers.fake_nvidia_smi import _PROGRAM
    from tests.helpers.ssh_hosts import HOST_PYTHON
    write_script(code_dir, "trial.py", GPU_TRIAL)
    states = {}
    for host in hosts.hosts:
        states[host.name] = shared / f"gpus-{host.name}.json"
        show_gpus(host, states[host.name], [0, 1], {1: [1]} if host is hosts.hosts[1] else {})
        program = host.bin_dir / "nvidia-smi"
        program.write_text(_PROGRAM.format(python=HOST_PYTHON, state=str(states[host.name])))
        program.chmod(0o755)
    try:
        experiment = Experiment(remote_config(hosts, code_dir, tmp_path / "home", shared, "", trial_gpu_number=1))
        experiment.start(port=0)
        try:
            wait_until(lambda: started(shared) == 3, DEADLINE, "three trials given a GPU")
            wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("WAITING") == 1, DEADLINE,
                       "the fourth trial waiting for a GPU")
            given = {(host, (shared / f"started-{trial}").read_text())
                     for trial, _, _, host in attempts_of(experiment.paths.database)
                     if (shared / f"started-{trial}").exists()}
            first, second = (label(host) for host in hosts.hosts)
            assert given == {(first, "0"), (first, "1"), (second, "0")}
            show_gpus(hosts.hosts[1], states[hosts.hosts[1].name], [0, 1], {})
            wait_until(lambda: started(shared) == 4, DEADLINE, "the fourth trial given the GPU freed on the host")
            (shared / "release").write_text("")
            assert experiment.wait(timeout=DEADLINE)
        finally:
            experiment.stop()
        assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}
        given = {(host, (shared / f"started-{trial}").read_text()) for trial, _, _, host in
                 attempts_of(experiment.paths.database)}
        assert given == {(first, "0"), (first, "1"), (second, "0"), (second, "1")}
    finally:
        for host in hosts.hosts:
            (host.bin_dir / "nvidia-smi").unlink(missing_ok=True)


class Told:
    """A TrialEvents listener keeping what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *, pid_started: float | None = None,
                      host: str | None = None) -> None:
        self.events.append(("started", trial_id, attempt, host))

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None,
                     preempted: bool = False, *, failed: bool = False) -> None:
        self.events.append(("exited", trial_id, attempt, exit_code))

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        self.events.append(("launch_failed", trial_id, attempt, reason))

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        self.events.append(("lost", trial_id, attempt, reason))

    def capacity_changed(self) -> None:
        pass

    def service_failed(self, error: str) -> None:
        self.events.append(("service_failed", error))


CHECKPOINTING_TRIAL = """
    import os
    import expmgr
    state = os.path.join(expmgr.get_checkpoint_dir(), "state")
    if os.path.exists(state):
        print(open(state).read())
    else:
        os.makedirs(os.path.dirname(state), exist_ok=True)
        open(state, "w").write(f"saved by attempt {expmgr.get_attempt()}")
"""


def test_a_trial_run_again_on_another_host_gets_its_checkpoint_copied_there(hosts: SshHosts, tmp_path: Path):
    """One GPU a host: the trial's second attempt finds its host's GPU taken, runs on the other
    host, and finds there the checkpoint its first attempt saved."""
    code = tmp_path / "code"
    code.mkdir()
    write_script(code, "trial.py", CHECKPOINTING_TRIAL)
    config = ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="true", trial_code_directory=code,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home", trial_concurrency=2,
        trial_gpu_number=1,
        training_service={"platform": "remote",
                          "machineList": [hosts.machine(host, gpuIndices=[0]) for host in hosts.hosts]}))
    paths = ExperimentPaths(tmp_path / "home" / f"ckpt-{uuid.uuid4().hex[:6]}")
    paths.create()
    told = Told()

    def launch(trial_id: str, attempt: int, command: str) -> TrialLaunch:
        return TrialLaunch(trial_id=trial_id, attempt=attempt, command=command, code_directory=code,
                           parameter_record={"parameter_id": 0, "parameter_source": "algorithm", "parameters": {},
                                             "parameter_index": 0},
                           env={"EXPMGR_TRIAL_ID": trial_id, "EXPMGR_TRIAL_ATTEMPT": str(attempt)})

    async def until(condition: Any, what: str) -> None:
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}: {told.events}"
            await asyncio.sleep(0.02)

    async def main() -> None:
        service = create_training_service(config, told, paths)
        await service.start()
        try:
            await service.launch(launch("saver", 1, "python3 trial.py"))
            await until(lambda: ("exited", "saver", 1, 0) in told.events, "the first attempt")
            await service.launch(launch("blocker", 1, "sleep 60"))   # takes the first host's one GPU
            await until(lambda: any(e[:2] == ("started", "blocker") for e in told.events), "the blocker")
            await service.launch(launch("saver", 2, "python3 trial.py"))
            await until(lambda: ("exited", "saver", 2, 0) in told.events, "the second attempt")
        finally:
            await service.stop(grace_period=1.0)

    try:
        asyncio.run(main())
    finally:
        for host in hosts.hosts:
            shutil.rmtree(host.home / ".expmgr" / paths.root.name, ignore_errors=True)
    first, second = (label(host) for host in hosts.hosts)
    assert [e for e in told.events if e[0] == "started" and e[1] == "saver"] == [
        ("started", "saver", 1, first), ("started", "saver", 2, second)]
    assert (paths.trial_dir("saver") / "stdout").read_text() == "saved by attempt 1\n"


def test_a_hybrid_of_local_and_a_host_fills_slots_from_both_and_stores_each_trials_host(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    # NNI's hybrid form: the four trials run at once (each waits until four started), two here
    # and two on the host, the services taking new trials in turn.
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}},
        trial_command=f"python3 trial.py {shared} four", trial_code_directory=code_dir,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home",
        trial_concurrency=4, max_trial_number=4, trial_grace_period=5,
        training_service=[{"platform": "local"},
                          {"platform": "remote", "machineList": [hosts.machine(hosts.hosts[0])]}]))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE * 2)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    trials = experiment.list_trial_jobs()
    assert sorted(float(t.finalMetric) for t in trials) == [1, 2, 3, 4], "each trial's report, stored"
    hosts_used = sorted(host for _, _, _, host in attempts_of(experiment.paths.database))
    assert hosts_used == sorted(["127.0.0.1"] * 2 + [label(hosts.hosts[0])] * 2), "two here, two on the host"
    for trial in trials:
        stdout = (experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text()
        assert stdout.startswith(f"hello from {trial.trialJobId} x="), stdout
    with sqlite3.connect(experiment.paths.database) as db:
        assert db.execute("SELECT platform FROM experiment").fetchone() == ("local+remote",)


def test_nnis_published_hybrid_config_runs_with_its_host_pointed_at_a_test_host(hosts: SshHosts, tmp_path: Path):
    """examples/trials/mnist-tfv1/config_hybrid_v2.yml (local and one remote machine by password)
    as published but for its host fields, 6 trials of its 10, and a stand-in mnist.py (no
    TensorFlow here): both services run trials."""
    published = (NNI_EXAMPLES / "mnist-tfv1" / "config_hybrid_v2.yml").read_text()
    host = hosts.hosts[0]
    text = (published
            .replace("host: 10.1.1.1", "host: 127.0.0.1")
            .replace("user: xxx", f"user: {host.user}")
            .replace("password: xxx", f"password: '{host.password}'")
            .replace("port: 22", f"port: {host.port}")
            .replace("maxTrialNumber: 10", "maxTrialNumber: 6"))
    assert f"port: {host.port}" in text and "maxTrialNumber: 6" in text
    folder = tmp_path / "mnist-tfv1"
    folder.mkdir()
    (folder / "config_hybrid_v2.yml").write_text(text)
    shutil.copy(NNI_EXAMPLES / "mnist-tfv1" / "search_space.json", folder)
    write_script(folder, "mnist.py", """
        import nni
        params = nni.get_next_parameter()
        print("learning_rate", params["learning_rate"])
        nni.report_final_result(params["learning_rate"])
    """)
    config = ExperimentConfig.load(folder / "config_hybrid_v2.yml")
    config.experiment_working_directory = tmp_path / "home"
    experiment = run_until_done(config)
    assert [t.status for t in experiment.list_trial_jobs()] == ["SUCCEEDED"] * 6
    assert {h for _, _, _, h in attempts_of(experiment.paths.database)} == {"127.0.0.1", label(host)}, (
        "trials ran here and on the host")


# A trial that reports, waits for ``down`` (its manager is dead), reports twice (no manager: into
# metrics.jsonl), then ends with exit code 3 if x == 3 or waits for ``finish`` and reports its result.
KEPT_TRIAL = """
    import os, sys, time
    import nni
    shared = sys.argv[1]
    trial, attempt = os.environ["EXPMGR_TRIAL_ID"], os.environ["EXPMGR_TRIAL_ATTEMPT"]
    x = nni.get_next_parameter()["x"]

    def note(name):
        open(os.path.join(shared, f"{name}-{trial}-{attempt}"), "w").close()

    def wait_for(name):
        while not os.path.exists(os.path.join(shared, name)):
            time.sleep(0.05)

    with open(os.path.join(shared, f"pid-{trial}-{attempt}"), "w") as file:
        file.write(str(os.getpid()))
    nni.report_intermediate_result(0)
    note("up")
    wait_for("down")
    nni.report_intermediate_result(1)
    nni.report_intermediate_result(2)
    note("reported")
    if x == 3:
        sys.exit(3)
    wait_for("finish")
    print("finished")
    nni.report_final_result(x)
"""


def _create_kept(hosts: SshHosts, shared: Path, code_dir: Path, home: Path, trial: str,
                 window: str) -> tuple[subprocess.Popen, dict[str, str]]:
    """``expctl create`` (foreground) of a remote experiment with ``reattachWindow: window``
    running ``trial``, once its four trials are up; the process and the environment it ran with."""
    write_script(code_dir, "trial.py", trial)
    write_config_file(hosts, code_dir, shared)
    config = code_dir / "config.yml"
    config.write_text(config.read_text().replace("release\n", "\n").replace(
        "trainingService: {platform: remote,", f"trainingService: {{platform: remote, reattachWindow: {window},"))
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    create = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                               "--foreground", "--exit-when-done"], cwd=code_dir, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(list(shared.glob("up-*"))) == 4, DEADLINE, "four trials running")
    except BaseException:
        create.kill()
        create.wait()
        raise
    return create, env


@pytest.mark.parametrize("gone", ["sigkill", "stop-keep-trials"])
def test_a_resume_within_the_window_takes_the_hosts_trials_over_with_every_report_once(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path, gone: str):
    """The manager SIGKILLed, or ``expctl stop --keep-trials``: the resume takes the trials over."""
    home = tmp_path / "home"
    create, env = _create_kept(hosts, shared, code_dir, home, KEPT_TRIAL, "10m")
    try:
        database = next(home.glob("*/db/experiment.sqlite"))
        wait_until(lambda: sqlite3.connect(database).execute(
            "SELECT COUNT(*) FROM metrics").fetchone()[0] == 4, DEADLINE, "the four first reports stored")
        if gone == "sigkill":
            create.kill()
        else:
            stopped = subprocess.run([sys.executable, "-m", "expmgr.cli", "stop", database.parent.parent.name,
                                      "--keep-trials"], cwd=code_dir, env=env, capture_output=True, text=True,
                                     timeout=DEADLINE * 2)
            assert stopped.returncode == 0 and "expctl resume" in stopped.stdout, stopped.stderr
        create.wait(timeout=30)
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    pids = {path.name: path.read_text() for path in shared.glob("pid-*")}
    (shared / "down").write_text("")
    # A report with no manager fails at once (the host's forwarded port is gone) and the trial goes on.
    wait_until(lambda: len(list(shared.glob("reported-*"))) == 4, DEADLINE, "each trial's reports with no manager")
    exp_id = database.parent.parent.name
    with sqlite3.connect(database) as db:
        [ended_id] = [trial for trial, parameters in db.execute("SELECT trial_id, parameters_json FROM trials")
                      if json.loads(parameters)["x"] == 3]
    wait_until(lambda: any((host.home / ".expmgr" / exp_id / "trials" / ended_id / ".exit-status-1").exists()
                           for host in hosts.hosts), DEADLINE, "the end of the trial with x = 3, written on its host")
    resumed = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "resume", exp_id, "--port", "0", "--foreground",
                                "--exit-when-done"], cwd=code_dir, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    log = home / exp_id / "logs" / "experiment.log"
    try:
        wait_until(lambda: log.exists() and log.read_text().count("this run takes it over") == 4, DEADLINE * 2,
                   "the resume to take the four trials over")
        wait_until(lambda: sqlite3.connect(database).execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 4 * 3,
                   DEADLINE, "the reports made while no manager ran, stored at the takeover")
        (shared / "finish").write_text("")
        _, err = resumed.communicate(timeout=DEADLINE * 3)
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.wait()
    assert resumed.returncode == 0, err[-3000:]
    assert {path.name: path.read_text() for path in shared.glob("pid-*")} == pids, "no trial was run again"
    with sqlite3.connect(database) as db:
        attempts = db.execute("SELECT trial_id, attempt, status, exit_code FROM attempts").fetchall()
        metrics = db.execute("SELECT trial_id, attempt, sequence, type FROM metrics ORDER BY trial_id, sequence"
                             ).fetchall()
    assert sorted((status, exit_code) for _, attempt, status, exit_code in attempts if attempt == 1) == \
        [("FAILED", 3)] + [("SUCCEEDED", 0)] * 3
    assert len(attempts) == 4, f"one attempt each: {attempts}"
    for trial_id, *_ in attempts:
        expected = [(1, 0, "PERIODICAL"), (1, 1, "PERIODICAL"), (1, 2, "PERIODICAL")]
        if trial_id != ended_id:
            expected.append((1, 3, "FINAL"))
        assert [(a, sequence, kind) for t, a, sequence, kind in metrics if t == trial_id] == expected, trial_id
        if trial_id != ended_id:
            assert (home / exp_id / "trials" / trial_id / "stdout").read_text().endswith("finished\n")
    wait_until(lambda: not any(trial_processes(host) for host in hosts.hosts), DEADLINE,
               "no trial, agent or watchdog left on either host")


def test_after_the_window_nothing_is_left_on_the_hosts_and_the_resume_runs_the_trials_again(
        hosts: SshHosts, shared: Path, code_dir: Path, tmp_path: Path):
    home = tmp_path / "home"
    create, env = _create_kept(hosts, shared, code_dir, home,
                               KEPT_TRIAL.replace('if x == 3:', 'if attempt != "1" or x == 3:'), "2s")
    try:
        create.kill()
        create.wait(timeout=30)
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    wait_until(lambda: not any(trial_processes(host) for host in hosts.hosts), DEADLINE,
               "the window passed: no trial, agent or watchdog left on either host")
    database = next(home.glob("*/db/experiment.sqlite"))
    exp_id = database.parent.parent.name
    (shared / "down").write_text("")
    resumed = subprocess.run([sys.executable, "-m", "expmgr.cli", "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=code_dir, env=env, capture_output=True, text=True,
                             timeout=DEADLINE * 3)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(list(shared.glob("up-*-2"))) == 4, "every trial ran again"
    with sqlite3.connect(database) as db:
        firsts = db.execute("SELECT status FROM attempts WHERE attempt = 1").fetchall()
    assert firsts == [("CRASHED",)] * 4

"""The Ray service without a shared folder (``trainingService.storagePath``), on the real
two-node cluster with the worker node in a mount namespace of its own: the experiment's folder
and the trial code's folder are under ``private``, which the worker sees as an empty tmpfs, so
only the head sees them. The store is a folder outside it that both nodes see. Trials hear from
the test through ``gate`` (outside too): they wait for ``gate/release``."""
from __future__ import annotations

import json
import os
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import TrialFolder
from expmgr.store import open_store
from expmgr.training.checkpoint_storage import CheckpointStorage
from expmgr.training.ray_files import node_local_folder
from tests.helpers.pbt_trial import NNI_PBT_TRIAL
from tests.helpers.common import wait_until, write_script
from tests.helpers.ray_cluster import RayCluster, ray_importable
from tests.helpers.attempts import attempts_of

DEADLINE = 90.0


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RayCluster, Path]]:
    """A cluster whose worker node does not see the folder ``private`` (yielded with it)."""
    if not ray_importable():
        pytest.skip("Ray is not installed (pip install 'ray>=2.60,<2.61')")
    if os.geteuid() != 0:
        pytest.skip("mounting a private tmpfs for the worker node needs root")
    private = tmp_path_factory.mktemp("private")
    with RayCluster(private_worker_dir=private) as cluster:
        yield cluster, private


@dataclass
class Setup:
    cluster: RayCluster
    code: Path
    """The trial code's folder: only the head sees it."""
    home: Path
    """The experiments' folder: only the head sees it."""
    store: Path
    """A folder every node sees: storagePath, unless ``storage_path`` names the S3 server's."""
    gate: Path
    storage_path: str = ""
    node_env: dict[str, str] | None = None
    """What the nodes need to reach ``storage_path`` (the S3 server's credentials)."""

    def config(self, **fields: Any) -> ExperimentConfig:
        service = {"platform": "ray", "address": self.cluster.address, "trialResources": {"cpu": 1},
                   "storagePath": self.storage_path or str(self.store), **fields.pop("service", {})}
        if self.node_env:
            runtime_env = dict(service.get("runtimeEnv") or {})
            runtime_env["env_vars"] = {**self.node_env, **runtime_env.get("env_vars", {})}
            service["runtimeEnv"] = runtime_env
        return ExperimentConfig(
            search_space=fields.pop("search_space", {"x": {"_type": "choice", "_value": [1, 2, 3, 4]}}),
            trial_command=fields.pop("trial_command", "python3 trial.py"), trial_code_directory=self.code,
            tuner=fields.pop("tuner", {"name": "GridSearch"}), experiment_working_directory=self.home,
            training_service=service, **{"trial_concurrency": 4, "trial_grace_period": 5, **fields})

    def stored(self, experiment_id: str, trial_id: str, name: str) -> str:
        """The text of file ``name`` of the trial's checkpoint as kept in the storage."""
        with tempfile.TemporaryDirectory() as folder:
            storage = CheckpointStorage(self.storage_path or str(self.store), experiment_id)
            assert storage.download(trial_id, Path(folder)), f"no checkpoint of {trial_id} is stored"
            return (Path(folder) / name).read_text()

    def trial(self, body: str) -> None:
        write_script(self.code, "trial.py", f"GATE = {str(self.gate)!r}\n" + textwrap.dedent(body))

    def release(self) -> None:
        (self.gate / "release").write_text("")


@pytest.fixture
def setup(request: pytest.FixtureRequest, private_cluster: tuple[RayCluster, Path], tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Setup:
    """storagePath a folder both nodes see, or (``indirect`` param "s3") the local S3 server."""
    cluster, private = private_cluster
    cluster.ensure_worker()
    own = private / tmp_path.name
    (own / "code").mkdir(parents=True)
    # The trials' node folders are named after the driver's temp dir: under ``private``, each
    # node has its own (both nodes of this machine share /tmp), so a checkpoint reaches another
    # node through the storage only.
    (own / "node-tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own / "node-tmp"))
    (tmp_path / "gate").mkdir()
    setup = Setup(cluster, own / "code", own / "home", tmp_path / "store", tmp_path / "gate")
    if getattr(request, "param", "folder") == "s3":
        s3 = request.getfixturevalue("s3_server")
        setup.storage_path, setup.node_env = s3.uri, dict(s3.env)
    return setup


ON_FOLDER_AND_S3 = pytest.mark.parametrize("setup", ["folder", "s3"], indirect=True)


def stdout_of(experiment: Experiment, trial_id: str) -> str:
    try:
        return TrialFolder(experiment.paths.trial_dir(trial_id)).stdout.read_text()
    except FileNotFoundError:
        return ""


def running(experiment: Experiment) -> dict[str, str | None]:
    """Trial id: host of the attempts running now."""
    return {trial_id: host for trial_id, _, status, host in attempts_of(experiment) if status == "RUNNING"}


def all_ready(experiment: Experiment, count: int) -> dict[str, str | None] | None:
    """The running trials' hosts once ``count`` run and each said "ready" (in the manager's copy)."""
    now = running(experiment)
    if len(now) == count and all("ready" in stdout_of(experiment, trial_id) for trial_id in now):
        return now
    return None


LINES = 50_000

PRINTING_TRIAL = f"""
    import os, time
    import expmgr
    params = expmgr.get_next_parameter()
    print("cwd", os.getcwd(), os.environ.get("FROM_RUNTIME_ENV"), os.path.exists("data"), os.path.exists("run.sh"))
    print("ready", flush=True)
    expmgr.report_intermediate_result(params["x"])
    while not os.path.exists(os.path.join(GATE, "release")):
        time.sleep(0.05)
    for i in range({LINES}):
        print(f"line {{i}}")
    # 8 MiB more just before the end (trial.log comes before metrics.jsonl in each answer), and
    # the final report as if the relay could not pass it on: it is only in metrics.jsonl, which
    # the manager reads when the trial's end is told, so its copy must be whole by then.
    with open(os.path.join(os.environ["EXPMGR_TRIAL_DIR"], "trial.log"), "a") as log:
        log.write(("x" * 1023 + "\\n") * 8192)
    import expmgr.trial
    expmgr.trial._send = lambda ctx, body: None
    expmgr.report_final_result(params["x"])
"""


def test_trials_run_on_both_nodes_from_a_copy_of_the_code_and_every_line_and_report_comes_back(setup):
    setup.trial(PRINTING_TRIAL)
    (setup.code / ".nniignore").write_text("data/\n")   # not shipped
    (setup.code / "data").mkdir()
    (setup.code / "data" / "big.bin").write_bytes(b"0" * 1024)
    (setup.code / "run.sh").write_text("")
    experiment = Experiment(setup.config(max_trial_number=4,
                                         service={"runtimeEnv": {"env_vars": {"FROM_RUNTIME_ENV": "yes"}}}))
    experiment.start(port=0)
    try:
        hosts = wait_until(lambda: all_ready(experiment, 4), DEADLINE, "four trials running, each said ready")
        assert set(hosts.values()) == {"head", setup.cluster.worker_name}, f"trials on both nodes: {hosts}"
        setup.release()
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    trials = experiment.list_trial_jobs()
    assert {t.status for t in trials} == {"SUCCEEDED"}
    expected = [f"line {i}" for i in range(LINES)]
    for trial in trials:
        lines = stdout_of(experiment, trial.trialJobId).splitlines()
        cwd, from_runtime_env, has_data, has_script = lines[0].split(" ")[1:]
        assert cwd != str(setup.code) and has_script == "True", "the trial ran in Ray's copy of the code folder"
        assert has_data == "False", "what .nniignore excludes is not shipped"
        assert from_runtime_env == "yes", "the user's runtimeEnv is kept"
        assert lines[1] == "ready" and lines[2:] == expected, f"every line, in order, the last ones too: {lines[-3:]}"
        metrics = experiment.get_job_metrics(trial.trialJobId)[trial.trialJobId]
        assert [m.type for m in metrics] == ["PERIODICAL", "FINAL"], "the relayed report, and the one in " \
            f"metrics.jsonl only, there before the trial's end was told: {metrics}"
    assert not node_local_folder(experiment.id, "x").parent.exists() or \
        not any(node_local_folder(experiment.id, "x").parent.iterdir()), "each node's trial folder was removed"


TICKING_TRIAL = """
    import os, time
    import expmgr
    expmgr.get_next_parameter()
    i = 0
    while not os.path.exists(os.path.join(GATE, "release")):
        print("tick", i, flush=True)
        i += 1
        time.sleep(0.05)
    expmgr.report_final_result(i)
"""


@ON_FOLDER_AND_S3
def test_a_running_trials_stdout_grows_in_the_managers_trial_folder_while_it_runs(setup):
    setup.trial(TICKING_TRIAL)
    experiment = Experiment(setup.config(max_trial_number=1, search_space={"x": {"_type": "choice", "_value": [1]}}))
    experiment.start(port=0)
    try:
        [trial_id] = wait_until(lambda: list(running(experiment)), DEADLINE, "the trial running")
        first = wait_until(lambda: stdout_of(experiment, trial_id).count("tick") >= 3 and
                           len(stdout_of(experiment, trial_id)), DEADLINE, "its first ticks in trials/<id>/stdout")
        wait_until(lambda: len(stdout_of(experiment, trial_id)) > first, DEADLINE, "more ticks while it runs")
        assert list(running(experiment)) == [trial_id], "still running: the output came while it ran"
        setup.release()
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    [trial] = experiment.list_trial_jobs()
    ticks = [int(line.split()[1]) for line in stdout_of(experiment, trial_id).splitlines()]
    assert trial.status == "SUCCEEDED" and ticks == list(range(trial.finalMetric)), "every tick, in order"


PREEMPTIBLE_TRIAL = """
    import os, time
    import expmgr
    params = expmgr.get_next_parameter()
    state = os.path.join(expmgr.get_checkpoint_dir(), "state")
    if os.path.exists(state):
        with open(state) as f:
            expmgr.report_final_result({"default": params["x"], "from": f.read()})
    else:
        def save():
            with open(state, "w") as f:
                f.write(f"checkpoint of x={params['x']}")
        expmgr.install_preemption_handler(save)
        print("ready", flush=True)
        while not os.path.exists(os.path.join(GATE, "release")):
            time.sleep(0.05)
        expmgr.report_final_result({"default": params["x"], "from": None})
"""


@ON_FOLDER_AND_S3
def test_a_drained_worker_preempts_its_trials_and_their_retries_on_the_head_restore_the_checkpoint_from_storage(
        setup):
    setup.trial(PREEMPTIBLE_TRIAL)
    experiment = Experiment(setup.config(max_trial_number=4, max_trial_retries=0))
    experiment.start(port=0)
    worker = setup.cluster.worker_name
    try:
        hosts = wait_until(lambda: all_ready(experiment, 4), DEADLINE, "four trials running, each said ready")
        on_worker = {trial_id for trial_id, host in hosts.items() if host == worker}
        assert len(on_worker) == 2, hosts
        setup.cluster.drain_worker(reason="preemption", deadline_s=60)
        wait_until(lambda: {t for t, _, s, _ in attempts_of(experiment) if s == "PREEMPTED"} == on_worker,
                   DEADLINE, "the drained node's trials PREEMPTED")
        setup.release()
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
        setup.cluster.kill_worker()  # a drained node takes no more work: the next test gets a new one
    trials = {t.trialJobId: t for t in experiment.list_trial_jobs()}
    assert {t.status for t in trials.values()} == {"SUCCEEDED"}
    for trial_id in on_worker:
        x = trials[trial_id].finalMetric["default"]
        assert trials[trial_id].finalMetric["from"] == f"checkpoint of x={x}", "the retry restored the checkpoint"
        assert setup.stored(experiment.id, trial_id, "state") == f"checkpoint of x={x}"
        assert TrialFolder(experiment.paths.trial_dir(trial_id)).preempting_marker.read_text() == "1", \
            "the preempting marker came back"
    again = {(trial_id, host) for trial_id, attempt, _, host in attempts_of(experiment) if attempt == 2}
    assert again == {(trial_id, "head") for trial_id in on_worker}, again


@ON_FOLDER_AND_S3
def test_pbt_exploits_copy_checkpoints_in_the_storage_path_for_trials_on_either_node(setup):
    # The first generation waits until all four run, so that it is on both nodes.
    setup.trial(textwrap.dedent("""
        import os, time
        print("ready", flush=True)
        while not os.path.exists(os.path.join(GATE, "release")):
            time.sleep(0.05)
    """) + textwrap.dedent(NNI_PBT_TRIAL))
    experiment = Experiment(setup.config(
        max_trial_number=8, search_space={"lr": {"_type": "uniform", "_value": [0, 1]}},
        tuner={"name": "PBT", "class_args": {"population_size": 4, "seed": 5}}))
    experiment.start(port=0)
    try:
        wait_until(lambda: all_ready(experiment, 4), DEADLINE, "the first generation running, each said ready")
        setup.release()
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    with open_store(experiment.paths, readonly=True) as store:
        trials = store.trials()
        finals = {trial_id: metric.value for trial_id, metric in store.final_metrics().items()}
        sources = store.checkpoint_sources()
    assert [t.status.value for t in trials] == ["SUCCEEDED"] * 8
    hosts = {trial_id: host for trial_id, _, _, host in attempts_of(experiment)}
    assert set(hosts.values()) == {"head", setup.cluster.worker_name}, f"trials on both nodes: {hosts}"
    for trial in trials:
        node_dir = str(node_local_folder(experiment.id, trial.trial_id) / "checkpoint")
        assert trial.parameters["load_checkpoint_dir"] == trial.parameters["save_checkpoint_dir"] == node_dir
        loaded = json.loads(stdout_of(experiment, trial.trial_id).split("loaded ", 1)[1].splitlines()[0])
        if trial in trials[:4]:
            assert loaded == {"score": 0.0, "writer": None}, "generation 0 starts from nothing"
        else:   # the copy of the member it continues or exploits, written by that trial on its node
            source = sources[trial.trial_id]
            assert loaded == {"score": finals[source], "writer": source}, (trial.trial_id, hosts)
        saved = json.loads(setup.stored(experiment.id, trial.trial_id, "model.json"))
        assert saved == {"score": finals[trial.trial_id], "writer": trial.trial_id}, "stored after it exited"


def test_a_storage_path_that_cannot_be_written_is_a_clear_error_before_any_trial(setup):
    setup.trial("open('started', 'w').close()\n")
    (setup.store.parent / "a-file").write_text("")
    experiment = Experiment(setup.config(max_trial_number=1, service={"storagePath": str(setup.store.parent / "a-file" / "store")},
                                         search_space={"x": {"_type": "choice", "_value": [1]}}))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert "trainingService.storagePath" in error and "a-file" in error and "\n" not in error.strip(), error
    assert experiment.list_trial_jobs() == [] and not (setup.code / "started").exists()


def test_without_a_storage_path_a_worker_that_cannot_see_the_folder_still_stops_the_experiment(setup):
    setup.trial("open('started', 'w').close()\n")
    config = setup.config(max_trial_number=1, search_space={"x": {"_type": "choice", "_value": [1]}},
                          service={"storagePath": None})
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert "not shared by every node" in experiment.get_error(), experiment.get_error()
    assert experiment.list_trial_jobs() == []

"""NNI's PBT trials run unchanged: they read ``save_checkpoint_dir`` and ``load_checkpoint_dir``
from their parameters (as NNI's examples/trials/mnist-pbt-tuner-pytorch/mnist.py does) and
find the previous generation's checkpoint there; and an NNI v1 config runs, its conversion
noted in experiment.log."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import TrialFolder
from expmgr.store import open_store
from tests.helpers.common import REPO, write_script

# The checkpoint handling of NNI's mnist-pbt-tuner-pytorch/mnist.py, with a number for a model.
from tests.helpers.pbt_trial import NNI_PBT_TRIAL  # noqa: E402



def test_nni_pbt_trials_load_the_previous_generations_checkpoint_from_load_checkpoint_dir(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "mnist.py", NNI_PBT_TRIAL)
    config = ExperimentConfig(trial_command="python3 mnist.py", trial_code_directory=code_dir, trial_concurrency=2,
                              max_trial_number=8, experiment_working_directory=tmp_path / "home",
                              search_space={"lr": {"_type": "uniform", "_value": [0, 1]}},
                              tuner={"name": "PBT", "class_args": {"population_size": 4, "seed": 5}})
    experiment = Experiment(config)
    assert experiment.run(port=0)
    with open_store(experiment.paths, readonly=True) as store:
        trials = store.trials()
        finals = {trial_id: metric.value for trial_id, metric in store.final_metrics().items()}
        sources = store.checkpoint_sources()
    assert [t.status.value for t in trials] == ["SUCCEEDED"] * 8
    for trial in trials:
        own = str(TrialFolder(experiment.paths.trial_dir(trial.trial_id)).checkpoint_dir)
        assert trial.parameters["load_checkpoint_dir"] == trial.parameters["save_checkpoint_dir"] == own
        loaded = json.loads(TrialFolder(experiment.paths.trial_dir(trial.trial_id)).stdout.read_text()
                            .split("loaded ", 1)[1].splitlines()[0])
        if trial in trials[:4]:
            assert loaded == {"score": 0.0, "writer": None}, "generation 0 starts from nothing"
        else:   # the copy of the member it continues or exploits, written by that trial
            source = sources[trial.trial_id]
            assert loaded == {"score": finals[source], "writer": source}
        saved = json.loads((Path(own) / "model.json").read_text())
        assert saved["writer"] == trial.trial_id and saved["score"] == finals[trial.trial_id]


V1_CONFIG = """\
authorName: default
experimentName: example_v1
trialConcurrency: 1
maxExecDuration: 1h
maxTrialNum: 2
trainingServicePlatform: local
searchSpacePath: search_space.json
useAnnotation: false
tuner:
  builtinTunerName: Random
  classArgs:
    seed: 1
trial:
  command: python3 trial.py
  codeDir: .
  gpuNum: 0
"""


def test_an_nni_v1_config_runs_and_experiment_log_says_it_was_converted(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import nni
        nni.report_final_result(nni.get_next_parameter()["x"])
    """)
    (code_dir / "search_space.json").write_text('{"x": {"_type": "uniform", "_value": [0, 1]}}')
    write_script(code_dir, "config.yml", V1_CONFIG + f"logDir: {tmp_path / 'home'}\n")
    experiment = Experiment(ExperimentConfig.load(code_dir / "config.yml"))
    assert experiment.run(port=0)
    assert [t.status for t in experiment.list_trial_jobs()] == ["SUCCEEDED"] * 2
    log = experiment.paths.experiment_log.read_text()
    assert "config: the config is in NNI's v1 format; converted to v2 as nnictl does" in log
    assert "config: ignored, as NNI does: authorName" in log
    assert log.index("NNI's v1 format") < log.index(f"experiment {experiment.id} started")


def test_nnis_published_v1_config_runs_unchanged_but_its_trial_number(tmp_path: Path):
    """NNI's examples/trials/mnist-tfv1/config.yml (v1 format), changed only in maxTrialNum;
    its trial, mnist.py, needs TensorFlow: the tutorials' stand-in model (stdlib, the same NNI
    calls) takes its place."""
    examples = REPO / "tests" / "nni_examples"
    project = tmp_path / "mnist-tfv1"
    project.mkdir()
    config = (examples / "configs" / "trials" / "mnist-tfv1" / "config.yml").read_text()
    assert "maxTrialNum: 10\n" in config
    (project / "config.yml").write_text(config.replace("maxTrialNum: 10\n", "maxTrialNum: 2\n"))
    shutil.copy(examples / "configs" / "trials" / "mnist-tfv1" / "search_space.json", project)
    shutil.copy(examples / "tutorials" / "stand_ins" / "quickstart_model.py", project / "mnist.py")
    home = tmp_path / "home"
    created = subprocess.run([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                              "--foreground", "--exit-when-done"], cwd=project, capture_output=True, text=True,
                             env={**os.environ, "EXPMGR_HOME": str(home)}, timeout=300, check=False)
    assert created.returncode == 0, created.stdout + created.stderr
    database = next(home.glob("*/db/experiment.sqlite"))
    with sqlite3.connect(database) as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM trials")]
        finals = db.execute("SELECT COUNT(*) FROM metrics WHERE type = 'FINAL'").fetchone()[0]
        intermediates = db.execute("SELECT COUNT(*) FROM metrics WHERE type = 'PERIODICAL'").fetchone()[0]
    assert statuses == ["SUCCEEDED", "SUCCEEDED"] and finals == 2 and intermediates == 2 * 5
    assert "NNI's v1 format" in next(home.glob("*/logs/experiment.log")).read_text()

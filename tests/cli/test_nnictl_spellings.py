"""nnictl's command lines, typed as ``expctl`` (issue 13): nnictl's flag names, short forms
and argument order against real daemons, and nnictl's commands expmgr has no counterpart
for answering ``not supported: ...`` with exit status 2. docs/nni-migration.md's
"nnictl commands" table names these tests."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import CONFIG, created_id, entry, expctl, project  # noqa: F401
from tests.helpers.common import wait_until


def running_trials(home: Path, cwd: Path, exp_id: str) -> list[dict]:
    return [row for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
            if row["status"] == "RUNNING"]


def test_create_update_import_kill_top_and_stop_in_nnictls_spelling(project):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("trialConcurrency: 2", "trialConcurrency: 1"))
    exp_id = created_id(expctl(home, cwd, "create", "-c", "config.yml", "-p", "0", "-d", "--url_prefix", "/nni"))
    assert json.loads(expctl(home, cwd, "config", "show", exp_id).stdout)["logLevel"] == "debug"
    assert "/nni" in expctl(home, cwd, "webui", "url", exp_id).stdout
    wait_until(lambda: len(running_trials(home, cwd, exp_id)) == 1, what="one running trial")
    running = expctl(home, cwd, "experiment", "save", exp_id)
    assert running.returncode == 2 and "only a stopped one can be saved" in running.stderr

    assert expctl(home, cwd, "update", "concurrency", exp_id, "--value", "2").returncode == 0
    wait_until(lambda: len(running_trials(home, cwd, exp_id)) == 2, what="two running trials")
    assert expctl(home, cwd, "update", "trialnum", "-v", "9").returncode == 0  # the only running one
    assert expctl(home, cwd, "update", "duration", exp_id, "--value", "2h").returncode == 0
    (cwd / "space.json").write_text('{"x": {"_type": "choice", "_value": [7, 8]}}')
    assert expctl(home, cwd, "update", "searchspace", exp_id, "--filename", "space.json").returncode == 0
    params = json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)["params"]
    assert (params["trialConcurrency"], params["maxTrialNumber"], params["maxExperimentDuration"],
            params["searchSpace"]) == (2, 9, 7200, {"x": {"_type": "choice", "_value": [7, 8]}})
    wrong_flag = expctl(home, cwd, "update", "concurrency", exp_id, "--filename", "space.json")
    assert wrong_flag.returncode == 2 and "expected update concurrency [ID] --value VALUE" in wrong_flag.stderr
    assert expctl(home, cwd, "update", "searchspace", "-v", "3").returncode == 2

    (cwd / "results.json").write_text(json.dumps([{"parameter": {"x": 7}, "value": 0.5}]))
    imported = expctl(home, cwd, "experiment", "import", exp_id, "--filename", "results.json")
    assert imported.returncode == 0 and "1 results imported" in imported.stdout
    assert expctl(home, cwd, "experiment", "import", "-f", "results.json").returncode == 0

    first, second = (row["trial"] for row in running_trials(home, cwd, exp_id))
    assert expctl(home, cwd, "trial", "kill", exp_id, "--trial_id", first).returncode == 0
    assert expctl(home, cwd, "trial", "kill", "-T", second).returncode == 0
    wait_until(lambda: {row["status"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
                        if row["trial"] in (first, second)} == {"USER_CANCELED"}, what="both kills")
    both = expctl(home, cwd, "trial", "kill", exp_id, first, "--trial_id", first)
    assert both.returncode == 2 and "expected trial kill ID TRIAL or" in both.stderr

    assert expctl(home, cwd, "top", "--time", "1", "--once").stdout.startswith(exp_id)
    assert expctl(home, cwd, "top", "-t", "1", "--once").returncode == 0
    stopped = expctl(home, cwd, "stop", "-a")
    assert stopped.returncode == 0 and f"experiment {exp_id} STOPPED" in stopped.stdout


def test_resume_from_an_experiment_dir_and_stop_by_port(project, tmp_path: Path):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    elsewhere = tmp_path / "another-home"  # $EXPMGR_HOME does not hold it: --experiment_dir names it
    for folder in (home, home / exp_id):
        missing = expctl(elsewhere, cwd, "resume", exp_id, "--port", "0")
        assert missing.returncode == 2 and "no experiment" in missing.stderr
        resumed = expctl(elsewhere, cwd, "resume", exp_id, "-p", "0", "--experiment_dir", str(folder))
        assert resumed.returncode == 0 and f"experiment {exp_id} resumed" in resumed.stdout, resumed.stderr
        port = entry(home, exp_id).port
        assert expctl(home, cwd, "stop", "-p", str(port)).returncode == 0
        assert entry(home, exp_id).status == ExperimentState.STOPPED
    no_dir = expctl(elsewhere, cwd, "view", exp_id, "-e", str(tmp_path / "nowhere"))
    assert no_dir.returncode == 2 and "--experiment_dir: no such folder" in no_dir.stderr
    debug = expctl(home, cwd, "resume", exp_id, "--debug")
    assert debug.returncode == 2 and "not supported: resume --debug" in debug.stderr


def test_trial_ls_export_log_and_delete_in_nnictls_spelling(project):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text(
        "import nni\nx = nni.get_next_parameter()['x']\nnni.report_intermediate_result(x / 10)\n"
        "print('out', x)\nnni.report_final_result(x)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")

    def finals(*flags: str) -> list:
        return [row["final"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, *flags, "--json").stdout)]
    assert finals("--head", "2") == [4, 3], "highest final results first, as nnictl"
    assert finals("--tail", "1") == [1], "lowest final results first, as nnictl"
    assert finals("--sort", "default", "--tail", "1") == [1], "with --sort: the last of the best-first order"
    assert expctl(home, cwd, "trial", "ls", exp_id, "--head", "1", "--tail", "1").returncode == 2

    assert expctl(home, cwd, "experiment", "export", exp_id, "--filename", "out.json", "--type", "json",
                  "--intermediate").returncode == 0
    records = json.loads((cwd / "out.json").read_text())  # NNI's: value and intermediates as JSON strings
    assert sorted((json.loads(r["value"]), r["intermediate"]) for r in records) == [
        (x, [json.dumps(x / 10)]) for x in (1, 2, 3, 4)]
    assert expctl(home, cwd, "experiment", "export", exp_id, "-f", "out.csv", "-t", "csv").returncode == 0
    rows = list(csv.DictReader((cwd / "out.csv").open()))
    assert sorted((row["x"], row["reward"]) for row in rows) == [(str(x), str(x)) for x in (1, 2, 3, 4)]

    daemon_log = home / exp_id / "logs" / "daemon.log"
    assert expctl(home, cwd, "log", "stdout", exp_id, "--path").stdout == f"{daemon_log}\n"
    last = expctl(home, cwd, "log", "stdout", exp_id, "-T", "1").stdout
    assert last == daemon_log.read_text().splitlines(keepends=True)[-1]
    assert expctl(home, cwd, "log", "stdout", exp_id, "-H", "1").stdout == daemon_log.read_text().splitlines(
        keepends=True)[0]
    trial_ids = [row["trial"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)]
    listed = expctl(home, cwd, "log", "trial", exp_id).stdout.splitlines()
    assert listed == [f"id:{trial} path:{home / exp_id / 'trials' / trial}" for trial in trial_ids]
    assert expctl(home, cwd, "log", "trial", exp_id, "-T", trial_ids[0]).stdout.splitlines() == listed[:1]
    own = expctl(home, cwd, "log", "stdout", exp_id, trial_ids[0]).stdout  # expctl's own spelling stays
    assert own.startswith("out ")

    kept = expctl(home, cwd, "experiment", "delete", "--all", "--yes")  # its server stays after DONE
    assert kept.returncode == 0 and "kept" in kept.stdout and (home / exp_id).exists()
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    wait_until(lambda: entry(home, exp_id).pid is None, timeout=30, what="its server closed")
    unconfirmed = expctl(home, cwd, "experiment", "delete", "--all")
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    deleted = expctl(home, cwd, "experiment", "delete", "--all", "--yes")
    assert deleted.returncode == 0 and f"deleted experiment {exp_id}" in deleted.stdout
    assert not (home / exp_id).exists() and expctl(home, cwd, "experiment", "list", "--all").stdout == "(none)\n"


@pytest.mark.parametrize("command", [
    ["platform", "clean", "--config", "config.yml"], ["platform", "clean", "-c", "config.yml"],
    ["package", "install", "SMAC"], ["trainingservice", "list"], ["trainingservice", "register", "--package", "p"],
    ["ss_gen", "--trial_command", "python3 main.py"], ["ss_gen", "-t", "python3 main.py", "-d", ".", "-f", "s.json"],
    ["jupyter-extension", "install"], ["hello"],
], ids=lambda command: "-".join(word for word in command if not word.startswith("-"))[:40])
def test_nnictl_commands_without_a_counterpart_say_not_supported(project, command):  # noqa: F811
    cwd, home = project
    result = expctl(home, cwd, *command)
    assert result.returncode == 2 and "not supported: " in result.stderr and "usage:" not in result.stderr
    assert result.stdout == ""


def test_algo_register_list_show_and_unregister_in_nnictls_spelling(project):  # noqa: F811
    cwd, home = project
    (cwd / "meta.yml").write_text("algoType: tuner\nbuiltinName: myrandom\n"
                                  "className: expmgr.algorithms.random_tuner.RandomTuner\n")
    for register in (["register", "--meta_path", "meta.yml"], ["reg", "-m", "meta.yml"]):
        result = expctl(home, cwd, "algo", *register)
        assert result.returncode == 0, result.stderr
    assert result.stdout == "myrandom updated\n", "registered again: replaced"
    listed = [line.split() for line in expctl(home, cwd, "algo", "list").stdout.splitlines()]
    assert ["myrandom", "tuner", "user", "expmgr.algorithms.random_tuner.RandomTuner"] in listed
    assert json.loads(expctl(home, cwd, "algo", "show", "myrandom").stdout)["builtinName"] == "myrandom"
    assert json.loads(expctl(home, cwd, "algo", "show", "TPE").stdout)["source"] == "expmgr"
    builtin = expctl(home, cwd, "algo", "unregister", "TPE")
    assert builtin.returncode == 2 and "built into expmgr" in builtin.stderr
    for unregister in ("unregister", "unreg"):
        result = expctl(home, cwd, "algo", unregister, "myrandom")
    assert result.returncode == 2 and "no algorithm registered as 'myrandom'" in result.stderr, "gone at the first"
    assert "myrandom" not in expctl(home, cwd, "algo", "list").stdout


def test_version(project):  # noqa: F811
    from expmgr import __version__
    cwd, home = project
    for flag in ("--version", "-v"):
        result = expctl(home, cwd, flag)
        assert result.returncode == 0 and result.stdout.strip() == __version__


def test_experiment_save_and_load_move_a_stopped_experiment_with_its_code_to_another_home(project, tmp_path):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text("import nni\nnni.report_final_result(nni.get_next_parameter()['x'])\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    saved = expctl(home, cwd, "experiment", "save", exp_id, "--path", "out", "--saveCodeDir")
    assert saved.returncode == 0, saved.stderr
    archive = cwd / "out" / f"nni_experiment_{exp_id}.zip"
    assert archive.is_file()

    other_home, code = tmp_path / "other-home", tmp_path / "code"
    loaded = expctl(other_home, cwd, "experiment", "load", "-p", str(archive), "-c", str(code),
                    "--searchSpacePath", str(tmp_path / "space.json"))
    assert loaded.returncode == 0, loaded.stderr
    assert (code / "trial.py").read_text() == (cwd / "trial.py").read_text()
    assert json.loads((tmp_path / "space.json").read_text()) == {"x": {"_type": "choice", "_value": [1, 2, 3, 4]}}
    config = json.loads(expctl(other_home, cwd, "config", "show", exp_id).stdout)
    assert config["trialCodeDirectory"] == str(code)
    finals = sorted(row["final"] for row in json.loads(expctl(other_home, cwd, "trial", "ls", exp_id, "--json").stdout))
    assert finals == [1, 2, 3, 4]
    assert [row["status"] for row in json.loads(expctl(other_home, cwd, "experiment", "list", "--all",
                                                        "--json").stdout)] == ["DONE"]
    again = expctl(other_home, cwd, "experiment", "load", "-p", str(archive), "-c", str(code))
    assert again.returncode == 2 and "already in" in again.stderr
    not_an_archive = expctl(other_home, cwd, "experiment", "load", "-p", "config.yml", "-c", str(code))
    assert not_an_archive.returncode == 2 and "is not an archive of experiment save" in not_an_archive.stderr

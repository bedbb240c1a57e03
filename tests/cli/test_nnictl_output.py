"""What scripts written for nnictl parse (issue 23, item 5): ``trial ls`` and ``experiment
status`` print nnictl's JSON when stdout is not a terminal and expctl's table on one (or as
``--table``/``--nnictl`` say), exports carry NNI's value encoding (JSON strings) and column
names (``reward``) with every float exact and each intermediate result's attempt marked,
``experiment delete`` reads y/N from stdin, ``log stderr`` is the daemon's stderr, and what
an export (or ``GET export-data``) wrote imports into another experiment. Real daemons."""
from __future__ import annotations

import csv
import json
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import CONFIG, created_id, entry, expctl, project  # noqa: F401
from tests.helpers.common import REPO, rest_call, wait_until

NNI_TRIAL_KEYS = {"trialJobId", "sequenceId", "status", "hyperParameters", "logPath", "stderrPath", "startTime",
                  "endTime", "finalMetricData"}
NNICTL_DATE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d$")


def on_terminal(home: Path, cwd: Path, *args: str) -> str:
    """expctl's stdout when it is a terminal (a pseudo-terminal here)."""
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env,
                                   stdin=subprocess.DEVNULL, stdout=terminal, stderr=subprocess.PIPE)
    finally:
        os.close(terminal)
    output = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the process closed the terminal's last descriptor
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(controller)
        process.communicate(timeout=120)
    assert process.returncode == 0
    return output.decode().replace("\r\n", "\n")


def finished(project_dir: Path, home: Path) -> str:
    exp_id = created_id(expctl(home, project_dir, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    return exp_id


def test_trial_ls_and_status_print_nnictls_json_to_a_pipe_and_tables_on_a_terminal(project):  # noqa: F811
    cwd, home = project
    exp_id = finished(cwd, home)

    piped = expctl(home, cwd, "trial", "ls", exp_id)
    assert piped.returncode == 0, piped.stderr
    trials = json.loads(piped.stdout)  # nnictl prints GET trial-jobs, times as local dates
    assert {key for trial in trials for key in trial} == NNI_TRIAL_KEYS
    assert piped.stdout == json.dumps(trials, indent=4, sort_keys=True, separators=(",", ":")) + "\n"
    assert all(NNICTL_DATE.match(trial["startTime"]) and NNICTL_DATE.match(trial["endTime"]) for trial in trials)
    finals = sorted(json.loads(json.loads(trial["finalMetricData"][0]["data"])) for trial in trials)
    assert finals == [1, 2, 3, 4] and {trial["status"] for trial in trials} == {"SUCCEEDED"}
    best = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--head", "2").stdout)
    assert [json.loads(json.loads(trial["finalMetricData"][0]["data"])) for trial in best] == [4, 3]
    assert expctl(home, cwd, "trial", "ls", exp_id, "--table", "--nnictl").returncode == 2, "one form at a time"

    table = expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout
    assert table.splitlines()[0].split()[:4] == ["TRIAL", "SEQ", "STATUS", "ATTEMPTS"] and len(table.splitlines()) == 5
    assert on_terminal(home, cwd, "trial", "ls", exp_id) == table, "a terminal gets the table"
    assert json.loads(on_terminal(home, cwd, "trial", "ls", exp_id, "--nnictl")) == trials
    assert [row["final"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)] == [
        1, 2, 3, 4], "--json keeps expctl's own keys"

    status = expctl(home, cwd, "experiment", "status", exp_id)
    assert status.stdout == '{\n    "errors":[],\n    "status":"DONE"\n}\n', "nnictl's check-status, byte for byte"
    assert expctl(home, cwd, "experiment", "status", exp_id, "--table").stdout == f"{exp_id} DONE\n"
    assert on_terminal(home, cwd, "experiment", "status", exp_id) == f"{exp_id} DONE\n"


EXACT_TRIAL = """\
import math, pathlib, sys
import nni
x = nni.get_next_parameter()['x']
nni.report_intermediate_result(x / 7)
tried = pathlib.Path(__file__).with_name(f"tried-{x}")
if x != 4 and not tried.exists():  # the first attempt fails after one intermediate result; the retry succeeds
    tried.write_text("")
    sys.exit(3)
nni.report_intermediate_result(x / 11)
nni.report_final_result(math.nan if x == 4 else x / 3)
"""


def test_exports_write_nnis_json_strings_exact_floats_reward_and_each_intermediates_attempt(project):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text(EXACT_TRIAL)
    (cwd / "config.yml").write_text(CONFIG + "maxTrialRetries: 1\n")
    exp_id = finished(cwd, home)

    assert expctl(home, cwd, "experiment", "export", exp_id, "-f", "out.json", "-t", "json", "-i").returncode == 0
    text = (cwd / "out.json").read_text()
    records = {record["parameter"]["x"]: record for record in json.loads(text)}
    assert text == json.dumps(list(json.loads(text))), "nnictl writes json.dumps(records): one line"
    for x in (1, 2, 3):
        record = records[x]
        assert isinstance(record["value"], str) and json.loads(record["value"]) == x / 3, "exact, as NNI's string"
        assert record["intermediate"] == [json.dumps(x / 7), json.dumps(x / 7), json.dumps(x / 11)]
        assert record["intermediateAttempts"] == [1, 2, 2], "where the retry starts"
    assert json.loads(records[4]["value"]) == "NaN" and records[4]["intermediateAttempts"] == [1, 1]
    assert list(records[1]) == ["parameter", "value", "trialJobId", "intermediate", "intermediateAttempts"]

    assert expctl(home, cwd, "experiment", "export", exp_id, "-f", "out.csv", "-t", "csv", "-i").returncode == 0
    rows = {row["x"]: row for row in csv.DictReader((cwd / "out.csv").open())}
    assert set(rows["1"]) == {"trialJobId", "x", "reward", "intermediate", "intermediateAttempts"}
    for x in (1, 2, 3):
        assert float(rows[str(x)]["reward"]) == x / 3, "a float's digits read back exactly"
        assert rows[str(x)]["intermediate"] == f"[{x / 7!r},{x / 7!r},{x / 11!r}]", "nnictl's [a,b] form"
        assert rows[str(x)]["intermediateAttempts"] == "[1,2,2]"
    assert rows["4"]["reward"] == "NaN"
    plain = expctl(home, cwd, "experiment", "export", exp_id, "-t", "csv").stdout
    assert plain.splitlines()[0] == "trialJobId,x,reward", "no intermediate columns without -i"


def test_experiment_delete_reads_y_or_n_from_stdin_as_nnictl(project):  # noqa: F811
    cwd, home = project
    exp_id = finished(cwd, home)
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    wait_until(lambda: entry(home, exp_id).pid is None, what="its server closed")
    nothing = expctl(home, cwd, "experiment", "delete", exp_id)
    assert nothing.returncode == 2 and "--yes" in nothing.stderr and (home / exp_id).exists()
    kept = expctl(home, cwd, "experiment", "delete", exp_id, stdin="n\n")
    assert kept.returncode == 0 and "kept" in kept.stdout and (home / exp_id).exists()
    asked_again = expctl(home, cwd, "experiment", "delete", exp_id, stdin="maybe\n\n")
    assert asked_again.returncode == 0 and "please answer y or n" in asked_again.stdout and (home / exp_id).exists()
    junk = expctl(home, cwd, "experiment", "delete", exp_id, stdin="junk\n" * 100_000)  # `yes junk | ...`
    assert junk.returncode == 2 and "3 answers were neither y nor n" in junk.stderr and (home / exp_id).exists()
    assert junk.stdout.count("please answer y or n") == 3, "asked a bounded number of times"
    overlong = expctl(home, cwd, "experiment", "delete", exp_id, stdin="y" * 5_000_000 + "\nn\n")
    assert overlong.returncode == 0 and "a line that long" in overlong.stdout and (home / exp_id).exists()
    deleted = expctl(home, cwd, "experiment", "delete", exp_id, stdin="y\n")  # echo y | nnictl experiment delete
    assert deleted.returncode == 0 and f"deleted experiment {exp_id}" in deleted.stdout
    assert not (home / exp_id).exists()


BROKEN_TUNER = """\
from expmgr.algorithms.tuner import Tuner

class Broken(Tuner):
    def update_search_space(self, search_space):
        pass

    def generate_parameters(self, parameter_id, **kwargs):
        return {"x": 1}

    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        raise RuntimeError("the tuner broke on purpose")
"""


def test_log_stderr_shows_the_daemons_stderr_and_log_stdout_its_stdout(project):  # noqa: F811
    cwd, home = project
    (cwd / "tuner_code").mkdir()
    (cwd / "tuner_code" / "broken.py").write_text(BROKEN_TUNER)
    (cwd / "config.yml").write_text(CONFIG.replace("  name: GridSearch", "  className: broken.Broken\n"
                                                   "  codeDirectory: tuner_code"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    logs = home / exp_id / "logs"
    # The daemon prints how the search ended on stdout and the error on stderr.
    wait_until(lambda: "the tuner broke on purpose" in _text(logs / "daemon-stderr.log"), timeout=60,
               what="the error on the daemon's stderr")
    stderr = expctl(home, cwd, "log", "stderr", exp_id)
    assert stderr.returncode == 0 and stderr.stdout == (logs / "daemon-stderr.log").read_text()
    assert f"experiment {exp_id} ERROR" not in stderr.stdout
    assert f"experiment {exp_id} ERROR" in expctl(home, cwd, "log", "stdout", exp_id).stdout
    assert expctl(home, cwd, "log", "stderr", exp_id, "--path").stdout == f"{logs / 'daemon-stderr.log'}\n"
    assert expctl(home, cwd, "log", "stdout", exp_id, "--path").stdout == f"{logs / 'daemon.log'}\n"


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


RECORDING_TUNER = """\
import json, pathlib
from expmgr.algorithms.tuner import Tuner

class Recording(Tuner):
    def update_search_space(self, search_space):
        pass

    def generate_parameters(self, parameter_id, **kwargs):
        return {"x": 1}

    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        pass

    def import_data(self, data):
        with open(pathlib.Path(__file__).with_name("imported.jsonl"), "a") as file:
            for record in data:
                file.write(json.dumps([record["parameter"], record["value"]]) + "\\n")
"""


def test_what_export_and_export_data_write_imports_into_another_experiment(project):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text(EXACT_TRIAL)
    (cwd / "config.yml").write_text(CONFIG + "maxTrialRetries: 1\n")
    source = finished(cwd, home)
    assert expctl(home, cwd, "experiment", "export", source, "-f", "nni.json").returncode == 0
    assert expctl(home, cwd, "experiment", "export", source, "-f", "intermediate.json", "-i").returncode == 0
    status, export_data = rest_call(entry(home, source).port, "GET", "export-data")
    assert status == 200
    (cwd / "export-data.json").write_text(json.dumps(export_data))
    expctl_form = [{**record, "value": json.loads(record["value"])} for record in export_data]  # numbers
    (cwd / "numbers.json").write_text(json.dumps(expctl_form))

    target_dir = cwd / "target"
    (target_dir / "tuner_code").mkdir(parents=True)
    (target_dir / "tuner_code" / "recording.py").write_text(RECORDING_TUNER)
    (target_dir / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (target_dir / "config.yml").write_text(CONFIG.replace("  name: GridSearch", "  className: recording.Recording\n"
                                                          "  codeDirectory: tuner_code"))
    target = created_id(expctl(home, target_dir, "create", "--config", "config.yml", "--port", "0"))
    files = ("nni.json", "intermediate.json", "export-data.json", "numbers.json")
    for name in files:
        imported = expctl(home, cwd, "experiment", "import", target, str(cwd / name))
        assert imported.returncode == 0, (name, imported.stderr)
        assert "3 results imported (1 with a non-finite value left out" in imported.stdout, (name, imported.stdout)
    received = target_dir / "tuner_code" / "imported.jsonl"
    wait_until(lambda: received.exists() and len(received.read_text().splitlines()) == 3 * len(files),
               what="the tuner given every import")
    expected = [[{"x": x}, x / 3] for x in (1, 2, 3)]  # each float exactly as the source's trial reported it
    got = [json.loads(line) for line in received.read_text().splitlines()]
    for index in range(len(files)):
        assert sorted(got[3 * index:3 * index + 3], key=lambda pair: pair[0]["x"]) == expected, files[index]
    assert expctl(home, cwd, "stop", target, "--cancel").returncode == 0

"""A manager crash costs no trial its work (``trainingService.reattachWindow``): the trials of a
SIGKILLed experiment process run on under their keepers, their reports going to their
metrics.jsonl, and ``expctl resume`` within the window takes them over as they are (attempt 1,
no rerun, one duration across the downtime, every report stored once, the real exit status
of one that ended meanwhile). After the window, nothing of them is left and the resume reruns
them, as without a window. A real daemon, real trials with children, a real SIGKILL, a real
resume; each step waits on what the trials wrote, never on time."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import psutil

from expmgr.store.registry import Registry
from tests.helpers.common import REPO, wait_until, write_script

# Each trial starts a child, reports once, then waits on the test's files: "down" (the manager
# is dead: two reports then), "finish" (after the resume: its final result). The trial with
# x == 3 ends on its own while no manager runs, with exit code 3.
TRIAL = """
    import os, subprocess, sys, time, expmgr
    control = os.environ["CONTROL_DIR"]
    trial = expmgr.get_trial_id()
    x = expmgr.get_next_parameter()["x"]

    def wait_for(name):
        while not os.path.exists(os.path.join(control, name)):
            time.sleep(0.05)

    def note(name):
        path = os.path.join(control, f"{trial}.{name}")
        open(path + ".tmp", "w").close()
        os.rename(path + ".tmp", path)

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.path.join(control, f"{trial}.starts"), "a") as starts:
        starts.write(f"{os.getpid()} {child.pid} {os.environ['EXPMGR_TRIAL_ATTEMPT']}\\n")
    if os.environ["EXPMGR_TRIAL_ATTEMPT"] != "1":   # a rerun ends at once
        expmgr.report_final_result(-1)
        sys.exit(0)
    expmgr.report_intermediate_result(0)
    note("up")
    wait_for("down")
    expmgr.report_intermediate_result(1)
    expmgr.report_intermediate_result(2)
    if x == 3:
        expmgr.report_final_result(3)
        note("reported")
        sys.exit(3)
    note("reported")
    wait_for("finish")
    expmgr.report_final_result(x)
"""


class _Experiment:
    """One experiment of ``trials`` trials at once run by ``expctl`` (a daemon), and its store."""

    def __init__(self, tmp_path: Path, code_dir: Path, window: str, trial: str = TRIAL, trials: int = 4) -> None:
        write_script(code_dir, "trial.py", trial)
        self.control = tmp_path / "control"
        self.control.mkdir()
        (tmp_path / "config.yml").write_text(
            f"searchSpace: {{x: {{_type: choice, _value: {list(range(trials))}}}}}\n"
            f"trialCommand: python3 trial.py\ntrialCodeDirectory: {code_dir}\ntrialConcurrency: {trials}\n"
            f"maxTrialNumber: {trials}\ntrialGracePeriod: 1s\ntuner: {{name: GridSearch}}\n"
            f"trainingService: {{platform: local, reattachWindow: {window}}}\n")
        self.home = tmp_path / "home"
        self.tmp_path = tmp_path
        self.env = {**os.environ, "EXPMGR_HOME": str(self.home), "PYTHONPATH": str(REPO),
                    "CONTROL_DIR": str(self.control)}
        created = self.expctl("create", "--config", "config.yml", "--port", "0")
        assert created.returncode == 0, created.stderr
        self.exp_id = created.stdout.split()[1]

    def expctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=self.tmp_path, env=self.env,
                              capture_output=True, text=True, timeout=120)

    def resume(self, taken_over: int = 0, *, before_finish: Callable[[], object] = lambda: None) -> str:
        """``expctl resume`` in the foreground until the experiment ends; with ``taken_over``,
        once it took that many trials over, ``before_finish()``, then the file "finish". Its
        output (the test fails if it failed)."""
        resumed = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "resume", self.exp_id, "--port", "0",
                                    "--foreground", "--exit-when-done"], cwd=self.tmp_path, env=self.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            if taken_over:
                wait_until(lambda: self.experiment_log().count("this run takes it over") == taken_over,
                           timeout=120, what=f"the resume to take {taken_over} trials over")
                before_finish()
                (self.control / "finish").touch()
            out, err = resumed.communicate(timeout=180)
        finally:
            if resumed.poll() is None:
                resumed.kill()
                resumed.wait()
        assert resumed.returncode == 0, out + err + self.experiment_log()
        return out + err

    def rows(self, query: str) -> list[Any]:
        connection = sqlite3.connect(self.home / self.exp_id / "db" / "experiment.sqlite")
        try:
            return connection.execute(query).fetchall()
        finally:
            connection.close()

    def notes(self, name: str) -> list[Path]:
        return sorted(self.control.glob(f"*.{name}"))

    def starts(self) -> dict[str, list[tuple[int, int, int]]]:
        """Per trial, each start of its script: (pid, its child's pid, attempt)."""
        return {path.name.split(".")[0]: [tuple(map(int, line.split())) for line in path.read_text().splitlines()]
                for path in self.control.glob("*.starts")}

    def kill_manager(self) -> None:
        """SIGKILL the experiment process, and wait until it is gone."""
        pid = Registry(self.home).get(self.exp_id).pid
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                   what="the experiment process gone")

    def experiment_log(self) -> str:
        path = self.home / self.exp_id / "logs" / "experiment.log"
        return path.read_text() if path.exists() else ""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_resume_within_the_window_takes_the_running_trials_over_with_every_report_once(
        tmp_path: Path, code_dir: Path):
    experiment = _Experiment(tmp_path, code_dir, "10m")
    wait_until(lambda: len(experiment.notes("up")) == 4, timeout=120, what="four trials running")
    wait_until(lambda: experiment.rows("SELECT COUNT(*) FROM metrics")[0][0] == 4, timeout=60,
               what="each trial's first report stored")
    before = experiment.starts()
    assert sorted(len(starts) for starts in before.values()) == [1] * 4
    before_kill = time.time()
    experiment.kill_manager()
    assert all(_alive(pid) and _alive(child) for [(pid, child, _)] in before.values()), \
        "the trials and their children run on without their manager"
    (experiment.control / "down").touch()
    wait_until(lambda: len(experiment.notes("reported")) == 4, timeout=60,
               what="each trial's reports while no manager runs")
    [ended_id] = [trial_id for trial_id, parameters in experiment.rows("SELECT trial_id, parameters_json FROM trials")
                  if json.loads(parameters)["x"] == 3]
    wait_until(lambda: not _alive(before[ended_id][0][0]), what="the trial with x = 3 to end meanwhile")
    wait_until(lambda: (experiment.home / experiment.exp_id / "trials" / ended_id / ".exit-status-1").exists(),
               what="its end written by its keeper")
    resumed_at = time.time()
    # Taken over with them: what they reported while no manager ran, before any trial ends.
    experiment.resume(4, before_finish=lambda: wait_until(
        lambda: experiment.rows("SELECT COUNT(*) FROM metrics")[0][0] == 3 * 3 + 4, timeout=60,
        what="the reports made while no manager ran, stored at the takeover"))

    assert experiment.starts() == before, "no trial was run again"
    attempts = experiment.rows("SELECT trial_id, attempt, status, start_time, end_time, exit_code FROM attempts")
    assert sorted((trial_id, attempt) for trial_id, attempt, *_ in attempts) == sorted((t, 1) for t in before)
    for trial_id, _, status, start, end, exit_code in attempts:
        ended_meanwhile = trial_id == ended_id and before_kill < end < resumed_at
        assert start < before_kill and (resumed_at < end or ended_meanwhile), \
            "one attempt's duration, across the time no manager ran"
        assert (status, exit_code) == (("FAILED", 3) if trial_id == ended_id else ("SUCCEEDED", 0)), trial_id
    metrics = experiment.rows("SELECT trial_id, attempt, sequence, type FROM metrics ORDER BY trial_id, sequence")
    for trial_id in before:
        assert [(attempt, sequence, kind) for t, attempt, sequence, kind in metrics if t == trial_id] == [
            (1, 0, "PERIODICAL"), (1, 1, "PERIODICAL"), (1, 2, "PERIODICAL"), (1, 3, "FINAL")], trial_id
    wait_until(lambda: not any(_alive(pid) or _alive(child) for [(pid, child, _)] in before.values()),
               what="every trial and child ended with its trial")
    (run1_start, run1_end), (run2_start, _) = experiment.rows("SELECT started, ended FROM runs ORDER BY id")
    assert before_kill <= run1_end <= resumed_at <= run2_start, "the time away is between the two runs"


def test_after_the_window_nothing_of_the_trials_is_left_and_the_resume_runs_them_again(
        tmp_path: Path, code_dir: Path):
    experiment = _Experiment(tmp_path, code_dir, "2s")
    wait_until(lambda: len(experiment.notes("up")) == 4, timeout=120, what="four trials running")
    before = experiment.starts()
    experiment.kill_manager()
    wait_until(lambda: not any(_alive(pid) or _alive(child) for [(pid, child, _)] in before.values()), timeout=60,
               what="the window to pass and the watchdog to end every trial and child")
    for trial_id in before:
        stderr = (experiment.home / experiment.exp_id / "trials" / trial_id / "stderr").read_text()
        assert "no resume took this trial over within its reattach window (2 s)" in stderr, stderr
    output = experiment.resume()
    assert sorted(experiment.rows("SELECT attempt, status FROM attempts")) == [(1, "CRASHED")] * 4 + [
        (2, "SUCCEEDED")] * 4, output + experiment.experiment_log()
    [(gone,)] = experiment.rows("SELECT ended FROM runs WHERE id = 1")
    ends = [end for (end,) in experiment.rows("SELECT end_time FROM attempts WHERE attempt = 1")]
    # At least the 2 s window after it (a file's time is the kernel's coarse clock: a margin).
    assert all(end > gone + 1.5 for end in ends), ("a kept attempt ends when the window ended it", gone, ends)
    assert all([attempt for _, _, attempt in starts] == [1, 2] for starts in experiment.starts().values())


HEARTBEAT = """
    import os, sys, time, expmgr
    control = os.environ["CONTROL_DIR"]
    trial = expmgr.get_trial_id()
    expmgr.get_next_parameter()
    with open(os.path.join(control, f"{trial}.starts"), "a") as starts:
        starts.write(f"{os.getpid()} 0 {os.environ['EXPMGR_TRIAL_ATTEMPT']}\\n")
    beat = 0
    with open(os.path.join(control, f"{trial}.heartbeat"), "a", buffering=1) as heartbeat:
        while not os.path.exists(os.path.join(control, "finish")):
            heartbeat.write(f"{os.getpid()} {beat} {time.time()!r}\\n")
            beat += 1
            time.sleep(0.1)
    expmgr.report_final_result(beat)
"""


def _beats(path: Path) -> list[tuple[int, int, float]]:
    return [(int(pid), int(beat), float(at)) for pid, beat, at in
            (line.split() for line in path.read_text().splitlines() if line.count(" ") == 2)]


def test_stop_keep_trials_then_resume_never_interrupts_the_trials(tmp_path: Path, code_dir: Path):
    experiment = _Experiment(tmp_path, code_dir, "10m", trial=HEARTBEAT, trials=2)
    wait_until(lambda: len(experiment.notes("heartbeat")) == 2, timeout=120, what="two trials beating")
    stopped = experiment.expctl("stop", experiment.exp_id, "--keep-trials")
    assert stopped.returncode == 0, stopped.stderr
    assert "STOPPED" in stopped.stdout and "expctl resume" in stopped.stdout, stopped.stdout
    stopped_at = time.time()
    heartbeats = experiment.notes("heartbeat")
    wait_until(lambda: all(_beats(path)[-1][2] > stopped_at for path in heartbeats), timeout=30,
               what="the trials beating on with no manager")
    resumed_at = time.time()
    experiment.resume(2)
    assert sorted(experiment.rows("SELECT attempt, status FROM attempts")) == [(1, "SUCCEEDED")] * 2
    for path in heartbeats:
        beats = _beats(path)
        assert len({pid for pid, _, _ in beats}) == 1, "one process from start to end"
        assert [beat for _, beat, _ in beats] == list(range(len(beats))), "its count never restarted"
        assert any(stopped_at < at < resumed_at for _, _, at in beats), "it beat while no manager ran"
        assert beats[-1][2] > resumed_at


def test_stop_keep_trials_is_refused_without_a_reattach_window_and_the_experiment_runs_on(
        tmp_path: Path, code_dir: Path):
    experiment = _Experiment(tmp_path, code_dir, "0", trial=HEARTBEAT, trials=1)
    wait_until(lambda: len(experiment.notes("heartbeat")) == 1, timeout=120, what="the trial beating")
    refused = experiment.expctl("stop", experiment.exp_id, "--keep-trials")
    assert refused.returncode == 1 and "reattachWindow" in refused.stderr, refused.stderr
    assert experiment.expctl("stop", experiment.exp_id).returncode == 0

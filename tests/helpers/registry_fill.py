"""Registries of real experiments in each state, for the experiments page's tests: detached
daemons started by ``expctl create`` (running, done, stopped, and crashed: SIGKILLed with
its trials), and copies of them under new ids, made as the product makes an experiment
(its folder under the home, its store naming it, its registry row), to list many cheaply::

    fill = RegistryFill(home, cwd)
    running = fill.daemon(SLEEPING_TRIAL)           # RUNNING until fill.kill()
    crashed = fill.crash(fill.daemon(SLEEPING_TRIAL))
    fill.copy(crashed, "crash0001", platform="ray")
"""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState
from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.common import REPO, wait_until

CONFIG = """\
experimentName: {name}
searchSpace:
  x: {{_type: choice, _value: [1, 2, 3, 4]}}
trialCommand: python3 {script}
trialConcurrency: 2
maxTrialNumber: {trials}
trialGracePeriod: 1s
tuner:
  name: GridSearch
"""
QUICK_TRIAL = "import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'] * 1.5)\n"
SLEEPING_TRIAL = "import time, expmgr\nexpmgr.get_next_parameter()\ntime.sleep(300)\n"


def expctl(home: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("EXPMGR_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@dataclass
class RegistryFill:
    home: Path
    cwd: Path

    @property
    def registry(self) -> Registry:
        return Registry(self.home)

    def entry(self, exp_id: str) -> RegistryEntry:
        entry = self.registry.get(exp_id)
        assert entry is not None, f"experiment {exp_id} is not in {self.registry.path}"
        return entry

    def daemon(self, trial: str, name: str = "demo", trials: int = 4) -> str:
        """``expctl create`` of an experiment of ``trial`` scripts; its id once it serves."""
        script = f"trial_{abs(hash(trial)) % 10_000}.py"
        (self.cwd / script).write_text(trial)
        config = self.cwd / f"config-{name}.yml"
        config.write_text(CONFIG.format(name=name, script=script, trials=trials))
        result = expctl(self.home, self.cwd, "create", "--config", str(config), "--port", "0")
        assert result.returncode == 0, result.stderr
        return result.stdout.split()[1]

    def done(self, name: str = "done") -> str:
        """An experiment that ran to DONE, its server closed (``expctl stop``)."""
        exp_id = self.daemon(QUICK_TRIAL, name)
        wait_until(lambda: self.entry(exp_id).status == ExperimentState.DONE, timeout=90, what="DONE")
        self.stop(exp_id)
        return exp_id

    def running_trials(self, exp_id: str, count: int) -> None:
        def running() -> bool:
            with sqlite3.connect(f"file:{ExperimentPaths(Path(self.entry(exp_id).dir)).database}?mode=ro",
                                 uri=True) as conn:
                return conn.execute("SELECT COUNT(*) FROM trials WHERE status = 'RUNNING'").fetchone()[0] >= count
        wait_until(running, timeout=90, what=f"{count} running trials")

    def stop(self, exp_id: str) -> None:
        result = expctl(self.home, self.cwd, "stop", exp_id)
        assert result.returncode == 0, result.stderr

    def crash(self, exp_id: str) -> str:
        """SIGKILL the experiment's process and everything it started (its trials, its
        dispatcher): it dies without recording its end, as in an out-of-memory kill."""
        pid = self.entry(exp_id).pid
        assert pid is not None
        daemon = psutil.Process(pid)
        processes = [daemon, *daemon.children(recursive=True)]
        for process in processes:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=30)
        return exp_id

    def copy(self, source_id: str, new_id: str, *, name: str | None = None, platform: str | None = None,
             status: ExperimentState | None = None) -> str:
        """A copy of experiment ``source_id`` as experiment ``new_id``: its folder, its store
        naming the new id (and, given, another name or training platform), its registry row
        (no pid: a copy is never served)."""
        source = self.entry(source_id)
        folder = self.home / new_id
        shutil.copytree(source.dir, folder, ignore=shutil.ignore_patterns("*.sock", "access.json"))
        database = ExperimentPaths(folder).database
        with sqlite3.connect(database) as conn:
            conn.execute("UPDATE experiment SET id = ?, log_dir = ?", (new_id, str(folder)))
            if name is not None:
                conn.execute("UPDATE experiment SET name = ?, config_json = json_set(config_json, "
                             "'$.experimentName', ?)", (name, name))
            if platform is not None:   # as its config said it, and as stored when it was created
                conn.execute("UPDATE experiment SET platform = ?, config_json = json_set(config_json, "
                             "'$.trainingService', json_object('platform', ?))", (platform, platform))
        conn.close()
        self.registry.add(replace(source, id=new_id, name=name or source.name, dir=str(folder), pid=None,
                                  status=status or source.status, platform=platform or source.platform))
        return new_id

    def kill(self, *exp_ids: str) -> None:
        """SIGKILL the processes of these experiments (default: all of the registry) still
        alive, with their children: nothing a test started outlives it."""
        for entry in self.registry.entries():
            if (not exp_ids or entry.id in exp_ids) and entry.pid and psutil.pid_exists(entry.pid):
                try:
                    self.crash(entry.id)
                except psutil.Error:
                    pass


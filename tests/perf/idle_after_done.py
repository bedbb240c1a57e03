"""Measure: what a daemon experiment costs while it only serves, after DONE.

    python tests/perf/idle_after_done.py [--trials 20] [--idle 10]

Creates a daemon (``expctl create``, a temporary home) of ``--trials`` trivial trials,
waits for DONE, checks that nothing but the daemon's own process is left (no dispatcher,
watchdog or trial under it), then prints its memory (PSS, RSS and USS, from
/proc/<pid>/smaps_rollup; PSS moves with how many other processes share its libraries) and the CPU time it used over ``--idle`` seconds of doing
nothing (there is no polling loop: it should be ~0), and stops it with ``expctl stop``.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from expmgr.store.registry import Registry

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
searchSpace:
  x: {{_type: randint, _value: [0, 1000]}}
trialCommand: python3 trial.py
trialConcurrency: 4
maxTrialNumber: {trials}
tuner:
  name: TPE
"""


def expctl(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(project / "home"), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300, check=True)


def smaps_kib(pid: int) -> dict[str, int]:
    """The process's totals from /proc/<pid>/smaps_rollup, in KiB (Pss, Rss, ...)."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value)
    return fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle to measure the CPU over")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "config.yml").write_text(CONFIG.format(trials=args.trials))
        (project / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
        exp_id = expctl(project, "create", "--config", "config.yml", "--port", "0").stdout.split()[1]
        try:
            deadline = time.monotonic() + 300
            while True:
                [row] = json.loads(expctl(project, "experiment", "list", "--json").stdout)
                if row["status"] == "DONE":
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"experiment {exp_id} is {row['status']} after 300 s")
                time.sleep(0.5)
            pid = Registry(project / "home").get(exp_id).pid  # the daemon's, kept while it serves
            daemon = psutil.Process(pid)
            time.sleep(1)  # the last push to clients, the registry write
            left = [" ".join(child.cmdline()) for child in daemon.children(recursive=True)]
            before = daemon.cpu_times()
            time.sleep(args.idle)
            after = daemon.cpu_times()
            memory = smaps_kib(pid)
            cpu = (after.user - before.user) + (after.system - before.system)
            print(f"experiment {exp_id}: {args.trials} trials, DONE; daemon pid {pid}, "
                  f"{daemon.num_threads()} threads, child processes left: {left or 'none'}")
            own = memory["Private_Clean"] + memory["Private_Dirty"]  # USS: PSS less its share of libraries
            print(f"idle memory: PSS {memory['Pss'] / 1024:.1f} MiB, RSS {memory['Rss'] / 1024:.1f} MiB, "
                  f"its own (USS) {own / 1024:.1f} MiB")
            print(f"CPU over {args.idle:g} s idle: {cpu * 1000:.0f} ms ({cpu / args.idle * 100:.2f} %)")
        finally:
            print(expctl(project, "stop", exp_id).stdout.strip())


if __name__ == "__main__":
    main()

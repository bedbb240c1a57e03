"""Benchmark: a trial that prints gigabytes, through the output pump, with its files bounded.

    .venv/bin/python tests/perf/trial_output.py [--gib 2] [--max-size 100MiB] [--kept 3]

One real experiment (Experiment API, port 0) runs one trial that writes ``--gib`` GiB to its
stdout in lines of 100 bytes, with ``logMaxSize``/``logFilesKept`` as given. Beside it, in the
same run, the baseline: the same trial script with its stdout redirected straight to a file
by the shell (no pump, no rotation; what the trial costs with no manager). Reported: both
wall times and their ratio, the experiment process's CPU seconds spent (mostly the pump), the
trial's files and their sizes against the bound (``logMaxSize`` × ``logFilesKept``), and
whether the last line printed is the last line of the current file. A real ``expctl log
stdout --tail 5`` is run on the result, its wall time and the peak memory of the process.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from expmgr.rotation import dropped_bytes, rotated_files  # noqa: E402

TRIAL = """
import sys
total = int(sys.argv[1])
line = ("x" * 90 + "\\n").encode()
block = line * 1000          # ~91 KB per write, as a trial printing fast does through its buffer
out = sys.stdout.buffer
for _ in range(total // len(block)):
    out.write(block)
out.write(b"the last line\\n")
out.flush()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--max-size", default="100MiB")
    parser.add_argument("--kept", type=int, default=3)
    args = parser.parse_args()
    total = int(args.gib * 2**30)
    with tempfile.TemporaryDirectory(prefix="expmgr-output-") as folder:
        root = Path(folder)
        code = root / "code"
        code.mkdir()
        (code / "trial.py").write_text(TRIAL)

        started = time.perf_counter()
        subprocess.run(f"{sys.executable} trial.py {total} > {root / 'baseline.out'}", shell=True, cwd=code,
                       check=True)
        baseline = time.perf_counter() - started
        (root / "baseline.out").unlink()

        experiment = Experiment(ExperimentConfig(
            search_space={"x": {"_type": "choice", "_value": [1]}},
            trial_command=f"{sys.executable} trial.py {total}", trial_code_directory=code, trial_concurrency=1,
            max_trial_number=1, tuner={"name": "GridSearch"}, experiment_working_directory=root / "home",
            log_max_size=args.max_size, log_files_kept=args.kept))
        cpu_before = psutil.Process().cpu_times()
        started = time.perf_counter()
        experiment.start(port=0)
        try:
            experiment.wait()
            elapsed = time.perf_counter() - started
            cpu_after = psutil.Process().cpu_times()
            trial = experiment.list_trial_jobs()[0]
            stdout = experiment.paths.trial_dir(trial.trialJobId) / "stdout"
            files = [stdout, *rotated_files(stdout)]
            limit = experiment.log_limits.max_bytes
            print(f"trial: {trial.status}; {args.gib:g} GiB printed in {elapsed:.2f} s through the pump, "
                  f"{baseline:.2f} s straight to a file: ratio {elapsed / baseline:.2f}")
            print(f"experiment process CPU: {(cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system):.2f} s")
            sizes = [path.stat().st_size for path in files]
            print(f"files: {', '.join(f'{p.name} {s / 2**20:.1f} MiB' for p, s in zip(files, sizes))}; "
                  f"{sum(sizes) / 2**20:.1f} MiB in all, bound {limit * args.kept / 2**20:.0f} MiB; "
                  f"dropped {dropped_bytes(stdout) / 2**30:.2f} GiB")
            with open(stdout, "rb") as file:
                file.seek(max(0, stdout.stat().st_size - 200))
                ends_well = file.read().endswith(b"the last line\n")
            print(f"the current file ends with the last line: {ends_well}")
            env = {**os.environ, "EXPMGR_HOME": str(root / "home"), "PYTHONPATH": str(REPO)}
            # Measured in a process of its own: the peak memory of the command alone.
            measure = ("import resource, subprocess, sys, time\n"
                       "started = time.perf_counter()\n"
                       "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                       "print(done.returncode, time.perf_counter() - started, "
                       "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
                       "print(done.stdout.splitlines()[-1] if done.stdout else done.stderr.strip())\n")
            tail = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "expmgr.cli", "log", "stdout",
                                   experiment.id, trial.trialJobId, "--tail", "5"],
                                  env=env, capture_output=True, text=True, check=True).stdout.splitlines()
            code, seconds, peak_kib = tail[0].split()
            print(f"expctl log stdout --tail 5: exit {code}, {float(seconds):.2f} s, peak RSS "
                  f"{int(peak_kib) / 1024:.0f} MiB; last line shown: {tail[1]!r}")
        finally:
            experiment.stop()


if __name__ == "__main__":
    main()

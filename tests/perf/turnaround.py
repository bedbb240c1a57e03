"""Benchmark: trial turnaround and start-up costs, as ratios to baselines measured in the same run.

    python tests/perf/turnaround.py [--trials 200] [--concurrency 2]

Prints:
- 200 trivial trials through expmgr vs 200 bare ``python -c pass`` through a plain
  subprocess pool, both at the same concurrency (target: at most 1.3x);
- ``import expmgr`` + ``get_next_parameter()`` in a trial vs a bare interpreter
  start (target: at most 1.5x);
- the time from ``Experiment.start()`` to the first trial running, and the peak
  memory of the manager (this process) and the dispatcher.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from expmgr import Experiment, ExperimentConfig

TRIVIAL_TRIAL = """\
import expmgr
params = expmgr.get_next_parameter()
expmgr.report_final_result(params["x"])
"""


def bare_pool(count: int, concurrency: int) -> float:
    def one(_: int) -> None:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - start


def through_expmgr(count: int, concurrency: int, work: Path) -> tuple[float, float, int]:
    code = work / "code"
    code.mkdir(parents=True)
    (code / "trial.py").write_text(TRIVIAL_TRIAL)
    config = ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
        trial_command=f"{sys.executable} trial.py", trial_code_directory=code,
        trial_concurrency=concurrency, max_trial_number=count,
        tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home")
    experiment = Experiment(config)
    start_wall = time.time()
    start = time.perf_counter()
    experiment.start(port=0)
    dispatcher = None
    dispatcher_peak = 0
    # Sample sparsely: the benchmark must not take the CPU the trials need.
    while not experiment.wait(0.5):
        try:
            dispatcher = dispatcher or next(
                (p for p in psutil.Process().children() if "expmgr.dispatcher" in " ".join(p.cmdline())), None)
            if dispatcher is not None:
                dispatcher_peak = max(dispatcher_peak, dispatcher.memory_info().rss)
        except psutil.Error:
            pass
    elapsed = time.perf_counter() - start
    experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    database = sqlite3.connect(experiment.paths.database)
    first_start = database.execute("SELECT MIN(start_time) FROM attempts").fetchone()[0]
    succeeded = database.execute("SELECT COUNT(*) FROM trials WHERE status = 'SUCCEEDED'").fetchone()[0]
    assert succeeded == count, f"only {succeeded} of {count} trials succeeded"
    return elapsed, first_start - start_wall, dispatcher_peak


def interpreter_costs(work: Path, repeat: int) -> tuple[float, float]:
    trial_dir = work / "trial"
    trial_dir.mkdir()
    (trial_dir / "parameter.json").write_text(json.dumps({"parameter_id": 0, "parameters": {"x": 1}}))
    env = {**os.environ, "EXPMGR_TRIAL_ID": "bench", "EXPMGR_TRIAL_DIR": str(trial_dir)}
    def timed(code: str) -> float:
        best = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            best.append(time.perf_counter() - start)
        best.sort()
        return sum(best[: repeat // 2]) / (repeat // 2)  # the faster half: less noise from the machine
    bare = timed("pass")
    trial = timed("import expmgr; expmgr.get_next_parameter()")
    return bare, trial


def compile_package() -> None:
    """Write expmgr's bytecode, as ``pip install`` does: an editable checkout run with
    PYTHONDONTWRITEBYTECODE would otherwise recompile it in every trial."""
    import compileall
    import expmgr
    compileall.compile_dir(Path(expmgr.__file__).parent, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="bare/expmgr pairs; the median ratio is reported")
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bare, trial_import = interpreter_costs(work, repeat=40)
        print(f"interpreter start: bare {bare * 1000:.1f} ms, import expmgr + get_next_parameter "
              f"{trial_import * 1000:.1f} ms -> ratio {trial_import / bare:.2f}x (target <= 1.5x)")
        ratios, first_trials = [], []
        for round_number in range(args.rounds):
            pool = bare_pool(args.trials, args.concurrency)
            ours, first_trial, dispatcher_rss = through_expmgr(args.trials, args.concurrency,
                                                               work / f"round{round_number}")
            ratios.append(ours / pool)
            first_trials.append(first_trial)
            print(f"round {round_number + 1}: {args.trials} trials at concurrency {args.concurrency}: "
                  f"bare pool {pool:.2f} s, expmgr {ours:.2f} s -> {ours / pool:.2f}x")
        print(f"turnaround ratio, median of {args.rounds}: {statistics.median(ratios):.2f}x (target <= 1.3x)")
        first_trial = statistics.median(first_trials)
        print(f"Experiment.start() to first trial running: {first_trial * 1000:.0f} ms "
              f"({first_trial / bare:.1f}x a bare interpreter start)")
        print(f"memory: manager process {psutil.Process().memory_info().rss / 2**20:.0f} MiB, "
              f"dispatcher peak {dispatcher_rss / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()

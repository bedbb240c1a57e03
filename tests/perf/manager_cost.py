"""Benchmark: the experiment process's CPU time per trial, and where it goes.

    .venv/bin/python tests/perf/manager_cost.py [--trials 300] [--concurrency 2] [--rounds 3]
        [--profile OUT.pstats] [--trial-python PATH]

A real experiment (Experiment API, port 0, the Random tuner) runs ``--trials`` trivial trials
(each a new Python process that gets its parameter and reports one final result). Measured
per round: the CPU time (user + system) of the experiment process from ``start()`` to DONE,
divided by the number of trials, next to the wall time per trial and the median idle gap
(one trial's end to the next one's first line, as ``turnaround.py`` defines it). The CPU
time of the trials, of the dispatcher and of the watchdog is not counted: they are other
processes. The first trials' start-up is in it too; with a few hundred trials it is small.

With ``--profile`` the last round runs under cProfile on the manager's loop thread (where the
runner, the server and the training service run) and the stats are written to OUT.pstats
and summarised (top 25 by cumulative and by own time); profiling slows the loop, so that
round's numbers are not comparable and are printed apart.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from expmgr.experiment import manager as manager_module  # noqa: E402
from tests.perf.ray_turnaround import EXPMGR_TRIAL as TRIAL  # noqa: E402  (the same trivial trial)


def idle_gaps(times_file: Path, concurrency: int) -> list[float]:
    """The k-th trial to start waited for the (k-c)-th trial to end (see turnaround.py)."""
    rows = sorted(tuple(map(float, line.split())) for line in times_file.read_text().splitlines())
    starts = [start for start, _ in rows]
    ends = sorted(end for _, end in rows)
    return [starts[k] - ends[k - concurrency] for k in range(concurrency, len(starts))]


class HelperCpu(threading.Thread):
    """The CPU seconds of the experiment process's dispatcher and watchdog, sampled every
    0.2 s until ``done`` (their last sample before they exit is what counts)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seconds: dict[str, float] = {}
        self.own_seconds = 0.0
        """This thread's own CPU time, which is the experiment process's but not the manager's."""
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self._sample()
        finally:
            self.own_seconds = time.thread_time()

    def _sample(self) -> None:
        me = psutil.Process()
        while not self.done.wait(0.2):
            for child in me.children():
                try:
                    cmdline = " ".join(child.cmdline())
                    times = child.cpu_times()
                except psutil.Error:
                    continue
                part = "dispatcher" if "dispatcher" in cmdline else "watchdog" if "watchdog" in cmdline else None
                if part:
                    self.seconds[f"{part} {child.pid}"] = times.user + times.system

    def per_part(self) -> dict[str, float]:
        parts: dict[str, float] = {}
        for key, seconds in self.seconds.items():
            part = key.split()[0]
            parts[part] = parts.get(part, 0.0) + seconds
        return parts


def one_run(work: Path, python: str, trials: int, concurrency: int,
            profiler: cProfile.Profile | None) -> tuple[float, float, float, dict[str, float]]:
    """(CPU seconds per trial, wall seconds per trial, median idle gap, the dispatcher's and the
    watchdog's CPU seconds per trial) of one experiment."""
    code = work / "code"
    code.mkdir(parents=True)
    times = work / "times"
    (code / "trial.py").write_text(TRIAL.format(times=str(times)))
    config = ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
        trial_command=f"{python} trial.py", trial_code_directory=code,
        trial_concurrency=concurrency, max_trial_number=trials,
        tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home")
    original = manager_module.Manager._run_loop
    if profiler is not None:
        def profiled(self: manager_module.Manager) -> None:
            profiler.enable()
            try:
                original(self)
            finally:
                profiler.disable()
        manager_module.Manager._run_loop = profiled  # type: ignore[method-assign]
    try:
        experiment = Experiment(config)
        helpers = HelperCpu()
        helpers.start()
        cpu_before, wall_before = os.times(), time.perf_counter()
        experiment.start(port=0)
        experiment.wait()
        cpu_after, wall_after = os.times(), time.perf_counter()
        helpers.done.set()
        helpers.join()
        status = experiment.get_status()
        experiment.stop()
    finally:
        manager_module.Manager._run_loop = original  # type: ignore[method-assign]
    if status != "DONE":
        raise SystemExit(f"the experiment ended {status}, not DONE")
    cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system) - helpers.own_seconds
    return (cpu / trials, (wall_after - wall_before) / trials, statistics.median(idle_gaps(times, concurrency)),
            {part: seconds / trials for part, seconds in helpers.per_part().items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", metavar="OUT.pstats")
    parser.add_argument("--trial-python", default=sys.executable)
    args = parser.parse_args()
    rows = []
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="expmgr-cost-") as tmp:
            rows.append(one_run(Path(tmp), args.trial_python, args.trials, args.concurrency, None))
        cpu, wall, gap, helpers = rows[-1]
        print(f"round {round_number + 1}: manager CPU {cpu * 1e3:.2f} ms/trial "
              f"({', '.join(f'{part} {seconds * 1e3:.2f}' for part, seconds in sorted(helpers.items()))}), "
              f"wall {wall * 1e3:.2f} ms/trial, idle gap {gap * 1e3:.1f} ms", flush=True)
    if rows:
        parts = sorted({part for row in rows for part in row[3]})
        helpers_median = ", ".join(f"{part} {statistics.median(row[3].get(part, 0.0) for row in rows) * 1e3:.2f}"
                                   for part in parts)
        print(f"median of {len(rows)}: manager CPU {statistics.median(r[0] for r in rows) * 1e3:.2f} ms/trial "
              f"({helpers_median}), wall {statistics.median(r[1] for r in rows) * 1e3:.2f} ms/trial, "
              f"idle gap {statistics.median(r[2] for r in rows) * 1e3:.1f} ms")
    if args.profile:
        # The loop thread's own CPU time: waiting (for the CPU, a child's exec) is not counted.
        profiler = cProfile.Profile(time.thread_time)
        with tempfile.TemporaryDirectory(prefix="expmgr-cost-") as tmp:
            cpu = one_run(Path(tmp), args.trial_python, args.trials, args.concurrency, profiler)[0]
        print(f"profiled round (slower, not comparable): manager CPU {cpu * 1e3:.2f} ms/trial")
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(args.profile)
        stats.sort_stats("cumulative").print_stats(25)
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()

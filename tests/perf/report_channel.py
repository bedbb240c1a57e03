"""Benchmark: a trial's metric report over HTTP against the report socket, side by side: the
manager's event-loop CPU per report and the trial's wait per report.

    .venv/bin/python tests/perf/report_channel.py [--trials 2] [--reports 1000] [--rounds 3]

Each round runs two real experiments (Experiment API, port 0), one per channel, in turn (HTTP
first in odd rounds, the socket first in even ones, so that drift falls on both alike). Each
runs ``--trials`` trials at once; each trial gets its parameter, waits until every trial is
ready, then reports ``--reports`` intermediate results back to back, timing each
``report_intermediate_result`` call (its metrics.jsonl line and the send: what the trial
waits for), and then its final result. The HTTP experiment's trials drop
EXPMGR_MANAGER_SOCKET before their first report, as a trial of a manager without the socket
(or one of Ray or an SSH host) reports. The manager's cost is its event-loop thread's CPU time
(``/proc/self/task/<tid>/schedstat``, in ns) from the moment every trial is ready to the moment
every trial sent its last intermediate report: nothing else happens on the loop meanwhile.
Prints a row per experiment, the medians per channel and the ratios HTTP / socket.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402

TRIAL = textwrap.dedent("""
    import os, sys, time
    gates, channel, reports = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if channel == "http":
        os.environ.pop("EXPMGR_MANAGER_SOCKET", None)   # before the trial API reads its environment
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    open(os.path.join(gates, f"ready-{x}"), "w").close()
    while not os.path.exists(os.path.join(gates, "go")):
        time.sleep(0.001)
    waits = []
    for step in range(reports):
        start = time.perf_counter_ns()
        expmgr.report_intermediate_result(step)
        waits.append(time.perf_counter_ns() - start)
    with open(os.path.join(gates, f"waits-{x}"), "w") as file:
        file.write(" ".join(map(str, waits)))
    os.rename(os.path.join(gates, f"waits-{x}"), os.path.join(gates, f"done-{x}"))
    expmgr.report_final_result(x)
""")


def loop_cpu_ns(exp_id: str) -> int:
    """The CPU time so far of experiment ``exp_id``'s event-loop thread (this process's)."""
    [thread] = [t for t in threading.enumerate() if t.name == f"expmgr-{exp_id}"]
    return int(Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()[0])


def wait_for(condition, what: str, timeout: float = 300.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def one_run(work: Path, channel: str, trials: int, reports: int) -> tuple[float, list[float]]:
    """(the loop's CPU ns per report, every report's wait in ns) of one experiment."""
    code, gates = work / "code", work / "gates"
    code.mkdir(parents=True)
    gates.mkdir()
    (code / "trial.py").write_text(TRIAL)
    config = ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": list(range(trials))}},
        trial_command=f"{sys.executable} trial.py {gates} {channel} {reports}", trial_code_directory=code,
        trial_concurrency=trials, max_trial_number=trials, tuner={"name": "GridSearch"},
        experiment_working_directory=work / "home")
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        if channel == "socket" and not experiment.paths.report_socket.exists():
            raise SystemExit(f"no report socket at {experiment.paths.report_socket}")
        wait_for(lambda: all((gates / f"ready-{x}").exists() for x in range(trials)), "the trials to be ready")
        before = loop_cpu_ns(experiment.id)
        (gates / "go").touch()
        wait_for(lambda: all((gates / f"done-{x}").exists() for x in range(trials)), "the trials' reports")
        after = loop_cpu_ns(experiment.id)
        experiment.wait()
        status = experiment.get_status()
    finally:
        experiment.stop()
    if status != "DONE":
        raise SystemExit(f"the {channel} experiment ended {status}, not DONE")
    stored = sum(map(len, experiment.get_job_metrics().values()))
    if stored != trials * (reports + 1):
        raise SystemExit(f"the {channel} experiment stored {stored} reports, not {trials * (reports + 1)}")
    waits = [float(ns) for x in range(trials) for ns in (gates / f"done-{x}").read_text().split()]
    return (after - before) / (trials * reports), waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--reports", type=int, default=1000, help="intermediate results per trial")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {"http": [], "socket": []}
    waits: dict[str, list[float]] = {"http": [], "socket": []}
    p99: dict[str, list[float]] = {"http": [], "socket": []}
    for round_number in range(args.rounds):
        order = ["http", "socket"] if round_number % 2 == 0 else ["socket", "http"]
        for channel in order:
            with tempfile.TemporaryDirectory(prefix="expmgr-channel-") as tmp:
                per_report, run_waits = one_run(Path(tmp), channel, args.trials, args.reports)
            cpu[channel].append(per_report)
            waits[channel].append(statistics.median(run_waits))
            p99[channel].append(statistics.quantiles(run_waits, n=100)[98])
            print(f"round {round_number + 1} {channel:>6}: loop CPU {per_report / 1e3:7.1f} us/report, "
                  f"trial's wait median {waits[channel][-1] / 1e3:7.1f} us, p99 {p99[channel][-1] / 1e3:7.1f} us",
                  flush=True)
    print(f"\nmedians of {args.rounds} rounds, {args.trials} trials x {args.reports} reports each:")
    for channel in ("http", "socket"):
        print(f"{channel:>6}: loop CPU {statistics.median(cpu[channel]) / 1e3:7.1f} us/report, trial's wait median "
              f"{statistics.median(waits[channel]) / 1e3:7.1f} us, p99 {statistics.median(p99[channel]) / 1e3:7.1f} us")
    print(f"HTTP / socket: loop CPU {statistics.median(cpu['http']) / statistics.median(cpu['socket']):.2f}x, "
          f"trial's wait {statistics.median(waits['http']) / statistics.median(waits['socket']):.2f}x (median), "
          f"{statistics.median(p99['http']) / statistics.median(p99['socket']):.2f}x (p99)")


if __name__ == "__main__":
    main()

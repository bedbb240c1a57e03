"""Benchmark: requests per second and p99 latency of ``GET trial-jobs`` and of a trial's
metric report, idle and while 100 websocket clients follow trials' growing stdout.

    .venv/bin/python tests/perf/report_latency.py [--trials 2] [--clients 100] [--seconds 8] [--rounds 2]

A real experiment (Experiment API, port 0) runs ``--trials`` trials that each report
intermediate results as fast as they can, printing a line to stdout per report (so
their stdout keeps growing) and timing each ``report_intermediate_result`` call
themselves. Meanwhile one client thread GETs ``/api/v1/nni/trial-jobs`` back to back
over a kept-alive connection. Phases of ``--seconds`` each, alternating so that drift
(the store growing, other load on the machine) falls on both alike: idle, followed,
idle, ..., idle (``--rounds`` followed phases):
- idle: no websocket client;
- followed: ``--clients`` clients of ``/api/v1/expmgr/ws`` (tornado's client: default
  Host, no Origin), each following one trial's stdout (spread over the trials) from
  its last 4 KiB, as the web UI does; they connect before the phase starts.
Prints a row per phase, the totals of each kind, and the ratios followed / idle;
target: p99 of reports within 2x of idle. Not part of the test run: it measures,
it does not assert.

    .venv/bin/python tests/perf/report_latency.py --totals [--imports 20] [--followers 800] [--stdout-gib 1]

measures instead the manager's RSS (start, peak, after) and the event loop's longest stall
while 20 clients import 16 MB each at once and while 800 websocket clients follow a 1 GB
stdout (tests/perf/totals.py says how). Targets (docs/performance.md): peak RSS under
300 MB, stall under 200 ms, RSS after within 50 MB of the start.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import tornado.websocket  # noqa: E402

from expmgr import Experiment, ExperimentConfig  # noqa: E402


FOLLOW_FROM_END = 4096
"""Clients follow from the last bytes, as the web UI does after its REST tail."""

# Reports as fast as it can; the phase is read from $LATENCY_CONTROL every 0.1 s, each
# report's latency kept per phase and written to $LATENCY_OUT/<trial id>.json at "stop".
REPORTING_TRIAL = """\
import json, os, time
import expmgr
expmgr.get_next_parameter()
control, latencies, phase, checked, step = os.environ["LATENCY_CONTROL"], {}, "warm-up", 0.0, 0
while True:
    now = time.perf_counter()
    if now - checked > 0.1:
        checked = now
        with open(control) as file:
            phase = file.read().strip() or "warm-up"
        if phase == "stop":
            break
    started = time.perf_counter()
    expmgr.report_intermediate_result(step * 1e-6)
    latencies.setdefault(phase, []).append(time.perf_counter() - started)
    print(f"step {step}: reported {step * 1e-6:.6f} " + "-" * 60, flush=True)
    step += 1
out = os.path.join(os.environ["LATENCY_OUT"], expmgr.get_trial_id() + ".json")
with open(out + ".tmp", "w") as file:
    json.dump(latencies, file)
os.rename(out + ".tmp", out)
expmgr.report_final_result(0.0)
"""


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


class TrialJobsClient(threading.Thread):
    """GETs trial-jobs back to back; each answer's latency kept under the current phase."""

    def __init__(self, port: int) -> None:
        super().__init__(name="trial-jobs-client", daemon=True)
        self.port = port
        self.phase = "warm-up"
        self.latencies: dict[str, list[float]] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.stopping.is_set():
            started = time.perf_counter()
            conn.request("GET", "/api/v1/nni/trial-jobs")
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise RuntimeError(f"GET trial-jobs: HTTP {response.status}")
            self.latencies.setdefault(self.phase, []).append(elapsed)
        conn.close()


class Followers:
    """``count`` websocket clients in a child process (so that reading what they are sent
    does not take this process's GIL from the server), each following one trial's
    stdout and reading every message it is sent."""

    def __init__(self, port: int, trial_ids: list[str], count: int) -> None:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--follow", str(port), str(count), *trial_ids],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.messages = self.tail_bytes = 0

    def start(self) -> None:
        line = self._process.stdout.readline()
        if line.strip() != "following":
            self._process.kill()
            raise RuntimeError(f"the websocket clients did not start: {line!r}")

    def stop(self) -> None:
        self._process.stdin.close()  # the child closes its connections and prints its counts
        counts = self._process.stdout.read().split()
        self._process.wait(30)
        self.messages, self.tail_bytes = int(counts[0]), int(counts[1])


def follow(port: int, count: int, trial_ids: list[str]) -> None:
    """The child process of ``Followers``: connect, print "following" once every client got
    its first tail, read until stdin closes, print the messages and tail bytes read."""
    url = f"ws://127.0.0.1:{port}/api/v1/expmgr/ws"
    counts = {"messages": 0, "tail_bytes": 0, "following": 0}

    async def read(conn: tornado.websocket.WebSocketClientConnection) -> None:
        counted = False
        while (message := await conn.read_message()) is not None:
            decoded = json.loads(message)
            counts["messages"] += 1
            if decoded.get("type") == "error":  # the parent reads this instead of "following"
                print(f"the server refused a follow: {decoded}", flush=True)
                os._exit(1)
            if decoded.get("type") == "tail":
                counts["tail_bytes"] += len(decoded["text"])
                counts["following"] += not counted
                counted = True

    async def run() -> None:
        loop = asyncio.get_running_loop()
        connections = []
        for index in range(count):
            conn = await tornado.websocket.websocket_connect(url)
            connections.append(conn)
            conn.write_message(json.dumps({"type": "follow", "file": "stdout", "offset": -FOLLOW_FROM_END,
                                           "trial": trial_ids[index % len(trial_ids)]}))
            loop.create_task(read(conn))
        while counts["following"] < count:
            await asyncio.sleep(0.05)
        print("following", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
        for conn in connections:
            conn.close()
        print(counts["messages"], counts["tail_bytes"], flush=True)

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2, help="trials reporting at once (default 2)")
    parser.add_argument("--clients", type=int, default=100, help="websocket clients following (default 100)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="followed phases, each between idle ones (default 2)")
    parser.add_argument("--totals", action="store_true", help="the imports and 1 GB follows scenarios instead")
    parser.add_argument("--imports", type=int, default=20, help="--totals: imports at once (default 20)")
    parser.add_argument("--import-mib", type=int, default=16, help="--totals: MiB per import (default 16)")
    parser.add_argument("--followers", type=int, default=800, help="--totals: websocket clients (default 800)")
    parser.add_argument("--stdout-gib", type=float, default=1.0, help="--totals: the followed stdout (default 1)")
    parser.add_argument("--follow", nargs="+", help=argparse.SUPPRESS)  # PORT COUNT TRIAL...: the clients' process
    args = parser.parse_args()
    if args.follow:
        follow(int(args.follow[0]), int(args.follow[1]), args.follow[2:])
        return
    if args.totals:
        from tests.perf import totals
        with tempfile.TemporaryDirectory() as tmp:
            totals.run(Path(tmp), args.imports, args.import_mib, args.followers, args.stdout_gib, args.seconds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        code, out = work / "code", work / "latencies"
        code.mkdir()
        out.mkdir()
        (code / "trial.py").write_text(REPORTING_TRIAL)
        control = work / "phase"
        control.write_text("warm-up")
        os.environ["LATENCY_CONTROL"], os.environ["LATENCY_OUT"] = str(control), str(out)  # trials inherit them
        config = ExperimentConfig(
            search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
            trial_command=f"{sys.executable} trial.py", trial_code_directory=code,
            trial_concurrency=args.trials, max_trial_number=args.trials,
            tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home")
        experiment = Experiment(config)
        experiment.start(port=0)
        followers = None
        try:
            deadline = time.monotonic() + 60
            while len([job for job in experiment.list_trial_jobs() if job.status == "RUNNING"]) < args.trials:
                if time.monotonic() > deadline:
                    raise RuntimeError("the trials did not start")
                time.sleep(0.1)
            trial_ids = [job.trialJobId for job in experiment.list_trial_jobs()]
            client = TrialJobsClient(experiment.port)
            client.start()
            time.sleep(2)  # warm-up: trials and client running, nothing measured
            phases = [f"{kind} {number + 1}" for number in range(args.rounds) for kind in ("idle", "followed")]
            phases.append(f"idle {args.rounds + 1}")
            messages = tail_bytes = 0
            for phase in phases:
                if phase.startswith("followed"):
                    followers = Followers(experiment.port, trial_ids, args.clients)
                    followers.start()
                elif followers is not None:
                    followers.stop()
                    tail_bytes, messages = tail_bytes + followers.tail_bytes, messages + followers.messages
                    followers = None
                control.write_text(phase)
                client.phase = phase
                time.sleep(args.seconds)
            control.write_text("stop")
            client.phase = "done"
            client.stopping.set()
            client.join(30)
            if not experiment.wait(60):
                raise RuntimeError("the trials did not end")
        finally:
            if followers is not None:
                followers.stop()
            experiment.stop()
        reports: dict[str, list[float]] = {}
        for file in out.glob("*.json"):
            for phase, values in json.loads(file.read_text()).items():
                reports.setdefault(phase, []).extend(values)
    print(f"{args.trials} trials reporting as fast as they can; {args.clients} websocket clients following "
          f"stdout in the followed phases ({messages} messages, {tail_bytes / 2**20:.1f} MiB of tails); "
          f"{args.seconds:.0f} s per phase")
    print(f"{'phase':<12} {'trial-jobs/s':>12} {'p50 ms':>8} {'p99 ms':>8}   {'reports/s':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8}")
    jobs = {kind: [] for kind in ("idle", "followed")}
    sent = {kind: [] for kind in ("idle", "followed")}

    def row(label: str, job_times: list[float], report_times: list[float], seconds: float) -> None:
        print(f"{label:<12} {len(job_times) / seconds:>12.0f} {percentile(job_times, .5) * 1e3:>8.2f} "
              f"{percentile(job_times, .99) * 1e3:>8.2f}   {len(report_times) / seconds:>9.0f} "
              f"{percentile(report_times, .5) * 1e3:>8.2f} {percentile(report_times, .99) * 1e3:>8.2f}")
    for phase in phases:
        kind = phase.split()[0]
        jobs[kind] += client.latencies.get(phase, [])
        sent[kind] += reports.get(phase, [])
        row(phase, client.latencies.get(phase, []), reports.get(phase, []), args.seconds)
    seconds = {"idle": args.seconds * (args.rounds + 1), "followed": args.seconds * args.rounds}
    for kind in ("idle", "followed"):
        row(f"all {kind}", jobs[kind], sent[kind], seconds[kind])
    for what, measured in (("trial-jobs", jobs), ("metric report", sent)):
        ratio = percentile(measured["followed"], .99) / percentile(measured["idle"], .99)
        rate = (len(measured["followed"]) / seconds["followed"]) / (len(measured["idle"]) / seconds["idle"])
        print(f"{what}: p99 followed / idle {ratio:.2f}x{' (target <= 2x)' if what == 'metric report' else ''}, "
              f"requests per second followed / idle {rate:.2f}x")

if __name__ == "__main__":
    main()

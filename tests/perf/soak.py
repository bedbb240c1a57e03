"""Soak: a long experiment of trivial trials, the web UI following it; does the manager stay
flat (memory, per-trial overhead, latency) and is nothing lost?

    python tests/perf/soak.py [--trials 10000] [--concurrency 4] [--keep] [--no-ui]

A real experiment (Experiment API, local training service, port 0) runs in a child process
of its own, the manager (``--manager``, below), so that what this process does (the clients,
the sampling) weighs nothing in the manager's memory. Each of ``--trials`` trials is a new
Python process that gets its parameters, reports 5 intermediate results and a final one,
timing each report call itself (appended to one shared file, one line per trial, O_APPEND).
Meanwhile, unless ``--no-ui``:
- one websocket client of ``/api/v1/expmgr/ws`` (tornado's client, as the web UI connects)
  reads every message it is pushed;
- ``GET /api/v1/nni/trial-jobs`` is polled once a second (a kept-alive connection, on a
  thread), each answer's latency kept.
Each time the count of finished trials (read from the store, read-only) crosses a multiple
of the window (1,000, or half the trials when fewer than 2,000), the manager's RSS, PSS,
threads and open files are sampled (psutil), with the load average.
At the end it prints a table: memory at the first window and at the end (target: grows by
less than 15 MiB), wall time per trial of the last window against the first (target: within
10 %), p50/p99 of a metric report and of trial-jobs (target: < 50 ms), the store's size on
disk, and "nothing lost" (exactly N final and 5N intermediate results in the store, every
trial SUCCEEDED). Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tornado.websocket  # noqa: E402

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from expmgr.layout import ExperimentPaths  # noqa: E402
from report_latency import percentile  # noqa: E402

INTERMEDIATE = 5
"""Intermediate results each trial reports."""
MIB = 2**20
TARGET_GROWTH_MIB = 15
TARGET_OVERHEAD = 0.10
TARGET_LATENCY_MS = 50
MARK = "soak-manager:"
"""Starts the manager's lines meant for this side; the experiment's log lines come too."""

# Times each report call; one line per trial appended to $SOAK_REPORTS: its id, then the
# milliseconds of each intermediate report and of the final one.
TRIAL = f"""\
import os, time
import expmgr
x = expmgr.get_next_parameter()["x"]
times = []
for step in range({INTERMEDIATE}):
    started = time.perf_counter()
    expmgr.report_intermediate_result(x + step)
    times.append(time.perf_counter() - started)
started = time.perf_counter()
expmgr.report_final_result(x)
times.append(time.perf_counter() - started)
line = expmgr.get_trial_id() + " " + " ".join(f"{{t * 1000:.3f}}" for t in times) + "\\n"
fd = os.open(os.environ["SOAK_REPORTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())
os.close(fd)
"""


def compile_package() -> None:
    """Write expmgr's bytecode, as ``pip install`` does: an editable checkout run with
    PYTHONDONTWRITEBYTECODE would otherwise recompile it in every trial."""
    import compileall
    import expmgr
    compileall.compile_dir(Path(expmgr.__file__).parent, quiet=1)


# -- the manager's process ------------------------------------------------------------------

def run_manager(work: Path, trials: int, concurrency: int) -> None:
    """The child process: start the experiment, print one JSON line (pid, port, folder),
    print "ended <status>" when the search ends, stop the experiment when stdin closes."""
    code = work / "code"
    code.mkdir(parents=True)
    (code / "trial.py").write_text(TRIAL)
    config = ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
        trial_command=f"{sys.executable} trial.py", trial_code_directory=code,
        trial_concurrency=concurrency, max_trial_number=trials,
        tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home")
    experiment = Experiment(config)
    experiment.start(port=0)
    print(MARK, json.dumps({"pid": os.getpid(), "port": experiment.port, "root": str(experiment.paths.root)}), flush=True)
    closed = threading.Event()

    def read_stdin() -> None:
        sys.stdin.read()  # until the other side closes it
        closed.set()
    threading.Thread(target=read_stdin, daemon=True).start()
    ended = False
    while not closed.is_set():
        if not ended and experiment.wait(0.5):
            ended = True
            print(MARK, f"ended {experiment.get_status()}", flush=True)
        elif ended:
            closed.wait(0.5)
    experiment.stop()


class Manager:
    """The manager's child process, from this side: ``stop()`` closes its stdin (it stops
    the experiment and exits), killing it if it does not exit in time."""

    def __init__(self, work: Path, trials: int, concurrency: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--manager", str(work), str(trials), str(concurrency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        output = []  # the experiment's log lines come first (it logs to stdout too)
        for line in self.process.stdout:
            if line.startswith(MARK):
                break
            output.append(line)
        else:
            self.stop()
            raise RuntimeError("the manager did not start:\n" + "".join(output))
        started = json.loads(line[len(MARK):])
        self.pid, self.port = started["pid"], started["port"]
        self.paths = ExperimentPaths(Path(started["root"]))
        self.ended: str | None = None
        threading.Thread(target=self._read_end, daemon=True).start()

    def _read_end(self) -> None:
        for line in self.process.stdout:  # read to the end, so that the pipe never fills
            if line.startswith(MARK + " ended"):
                self.ended = line.split()[2]

    def stop(self) -> None:
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- this side: clients and samples ---------------------------------------------------------

@dataclass
class Sample:
    finished: int
    time: float
    rss: int
    pss: int
    threads: int
    fds: int
    dispatcher_rss: int
    load: float


def sample(manager: psutil.Process, finished: int) -> Sample:
    memory = manager.memory_full_info()
    dispatcher = 0
    for child in manager.children():
        try:
            if "expmgr.dispatcher" in " ".join(child.cmdline()):
                dispatcher = child.memory_info().rss
        except psutil.Error:
            pass
    return Sample(finished, time.time(), memory.rss, memory.pss, manager.num_threads(), manager.num_fds(),
                  dispatcher, os.getloadavg()[0])


class TrialJobsPoller(threading.Thread):
    """GETs trial-jobs once a second; each answer's latency kept."""

    def __init__(self, port: int) -> None:
        super().__init__(name="trial-jobs-poller", daemon=True)
        self.port = port
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.largest = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        next_poll = time.monotonic()
        while not self.stopping.wait(max(0.0, next_poll - time.monotonic())):
            next_poll += 1.0
            try:
                started = time.perf_counter()
                conn.request("GET", "/api/v1/nni/trial-jobs")
                response = conn.getresponse()
                body = response.read()
                elapsed = time.perf_counter() - started
            except (OSError, http.client.HTTPException) as error:
                self.errors.append(repr(error))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            if response.status != 200:
                self.errors.append(f"HTTP {response.status}")
                continue
            self.latencies.append(elapsed)
            self.largest = max(self.largest, len(body))
        conn.close()


@dataclass
class UiClient:
    """The web UI's websocket: every message read; the trials it saw SUCCEEDED counted."""

    messages: int = 0
    bytes: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    succeeded: set[str] = field(default_factory=set)
    metrics: int = 0
    errors: list[str] = field(default_factory=list)
    connection: tornado.websocket.WebSocketClientConnection | None = None

    async def connect(self, port: int) -> None:
        self.connection = await tornado.websocket.websocket_connect(
            f"ws://127.0.0.1:{port}/api/v1/expmgr/ws", max_message_size=1 << 30)

    async def read(self) -> None:
        assert self.connection is not None
        while (message := await self.connection.read_message()) is not None:
            self.messages += 1
            self.bytes += len(message)
            decoded = json.loads(message)
            kind = decoded.get("type", "?")
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            if kind == "error":
                self.errors.append(decoded.get("error", message))
            for trial in decoded.get("trials", ()):
                if trial.get("status") == "SUCCEEDED":
                    self.succeeded.add(trial.get("trialJobId") or trial.get("id"))
            metrics = decoded.get("metrics")
            if isinstance(metrics, list):
                self.metrics += len(metrics)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def finished_count(database: sqlite3.Connection) -> int:
    return database.execute(
        "SELECT COUNT(*) FROM trials WHERE status NOT IN ('WAITING', 'RUNNING', 'PAUSED')").fetchone()[0]


def read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def store_size(paths: ExperimentPaths) -> dict[str, int]:
    return {file.name: file.stat().st_size for file in paths.database_files if file.exists()}


async def follow(manager: Manager, trials: int, window: int, ui: bool) -> tuple[list[Sample], UiClient, dict]:
    """Sample the manager at each multiple of ``window`` finished trials until all
    finished (or the search ended); with ``ui``, the websocket read meanwhile."""
    process = psutil.Process(manager.pid)
    client = UiClient()
    reader = None
    if ui:
        await client.connect(manager.port)
        reader = asyncio.get_running_loop().create_task(client.read())
    samples: list[Sample] = []
    database = None
    next_mark = window
    try:
        while True:
            await asyncio.sleep(0.2)
            if database is None:
                if not manager.paths.database.exists():
                    continue
                database = read_only(manager.paths.database)
            finished = finished_count(database)
            if finished >= next_mark or finished >= trials:
                samples.append(sample(process, finished))
                print(f"  {finished:>6} finished, manager RSS {samples[-1].rss / MIB:.1f} MiB, "
                      f"PSS {samples[-1].pss / MIB:.1f} MiB, load {samples[-1].load:.2f}", flush=True)
                while next_mark <= finished:
                    next_mark += window
            if finished >= trials or manager.ended is not None:
                break
        if manager.ended is None:  # the search's end: the last pushes, the registry
            deadline = time.monotonic() + 30
            while manager.ended is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        end_size = store_size(manager.paths)
        if ui:  # the UI's last changes message: every trial SUCCEEDED, or 10 s
            deadline = time.monotonic() + 10
            while len(client.succeeded) < trials and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
    finally:
        if database is not None:
            database.close()
        client.close()
        if reader is not None:
            try:
                await asyncio.wait_for(reader, 10)
            except (asyncio.TimeoutError, tornado.websocket.WebSocketClosedError):
                reader.cancel()
    return samples, client, end_size


# -- the table ---------------------------------------------------------------------------------

def met(condition: bool) -> str:
    return "met" if condition else "NOT MET"


def report(args: argparse.Namespace, window: int, manager: Manager, samples: list[Sample], client: UiClient,
           poller: TrialJobsPoller | None, end_size: dict[str, int], reports_file: Path, elapsed: float,
           loads: list[float]) -> None:
    paths = manager.paths
    with read_only(paths.database) as database:
        statuses = dict(database.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())
        metric_counts = dict(database.execute("SELECT type, COUNT(*) FROM metrics GROUP BY type").fetchall())
        complete = database.execute(
            "SELECT COUNT(*) FROM (SELECT trial_id FROM metrics GROUP BY trial_id "
            f"HAVING SUM(type = 'FINAL') = 1 AND SUM(type = 'PERIODICAL') = {INTERMEDIATE})").fetchone()[0]
        attempts = database.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        times = database.execute(
            "SELECT start_time, end_time FROM trials WHERE end_time IS NOT NULL ORDER BY end_time").fetchall()
        status = database.execute("SELECT status FROM experiment").fetchone()[0]
    stopped_size = store_size(paths)
    total = sum(statuses.values())

    print()
    print(f"soak: {args.trials} trials at concurrency {args.concurrency}, "
          f"{'web UI websocket + trial-jobs polled 1/s' if not args.no_ui else 'no UI (--no-ui)'}; "
          f"{elapsed:.0f} s, {args.trials / elapsed:.2f} trials/s; experiment {status}")
    print(f"load average (1 min) during the run: min {min(loads):.2f}, max {max(loads):.2f}, "
          f"mean {sum(loads) / len(loads):.2f} over {psutil.cpu_count()} CPUs")
    print()
    print(f"{'finished':>9} {'RSS MiB':>8} {'PSS MiB':>8} {'threads':>7} {'fds':>5} {'disp. RSS':>9} {'load':>5}")
    for entry in samples:
        print(f"{entry.finished:>9} {entry.rss / MIB:>8.1f} {entry.pss / MIB:>8.1f} {entry.threads:>7} "
              f"{entry.fds:>5} {entry.dispatcher_rss / MIB:>9.1f} {entry.load:>5.2f}")
    print()
    rows: list[tuple[str, str, str]] = []
    if len(samples) >= 2:
        first, last = samples[0], samples[-1]
        growth = (last.rss - first.rss) / MIB
        rows.append((f"manager RSS at {first.finished} -> {last.finished} finished",
                     f"{first.rss / MIB:.1f} -> {last.rss / MIB:.1f} MiB (+{growth:.1f}); "
                     f"PSS {first.pss / MIB:.1f} -> {last.pss / MIB:.1f} MiB (+{(last.pss - first.pss) / MIB:.1f})",
                     f"< {TARGET_GROWTH_MIB} MiB growth: {met(growth < TARGET_GROWTH_MIB)}"))
    if len(times) >= 2 * window:
        first_span = times[window - 1][1] - min(start for start, _ in times[:window] if start is not None)
        last_span = times[-1][1] - times[-window - 1][1]
        first_per, last_per = first_span / window, last_span / window
        change = last_per / first_per - 1
        durations = [[end - start for start, end in part if start is not None]
                     for part in (times[:window], times[-window:])]
        rows.append((f"wall time per trial, first / last {window}",
                     f"{first_per * 1000:.1f} / {last_per * 1000:.1f} ms ({change:+.1%}); trial process "
                     f"start-to-end mean {sum(durations[0]) / len(durations[0]) * 1000:.0f} / "
                     f"{sum(durations[1]) / len(durations[1]) * 1000:.0f} ms",
                     f"within {TARGET_OVERHEAD:.0%}: {met(abs(change) <= TARGET_OVERHEAD)}"))
    intermediate, final = [], []
    lines = reports_file.read_text().splitlines() if reports_file.exists() else []
    for line in lines:
        values = [float(value) for value in line.split()[1:]]
        intermediate += values[:INTERMEDIATE]
        final += values[INTERMEDIATE:]
    p99 = percentile(intermediate, .99)
    rows.append(("report_intermediate_result p50 / p99",
                 f"{percentile(intermediate, .5):.2f} / {p99:.2f} ms (max {max(intermediate, default=0):.1f}; "
                 f"{len(intermediate)} calls)", f"< {TARGET_LATENCY_MS} ms: {met(p99 < TARGET_LATENCY_MS)}"))
    rows.append(("report_final_result p50 / p99",
                 f"{percentile(final, .5):.2f} / {percentile(final, .99):.2f} ms ({len(final)} calls)", ""))
    if poller is not None:
        jobs = [value * 1000 for value in poller.latencies]
        p99 = percentile(jobs, .99)
        rows.append(("GET trial-jobs p50 / p99",
                     f"{percentile(jobs, .5):.2f} / {p99:.2f} ms (max {max(jobs, default=0):.1f}; {len(jobs)} polls, "
                     f"{len(poller.errors)} errors, largest answer {poller.largest / MIB:.1f} MiB)",
                     f"< {TARGET_LATENCY_MS} ms: {met(p99 < TARGET_LATENCY_MS)}"))
        rows.append(("websocket",
                     f"{client.messages} messages ({', '.join(f'{k} {v}' for k, v in sorted(client.kinds.items()))}), "
                     f"{client.bytes / MIB:.1f} MiB; {len(client.succeeded)} trials seen SUCCEEDED, "
                     f"{client.metrics} metrics; {len(client.errors)} errors", ""))
    rows.append(("store on disk at the end (running)",
                 ", ".join(f"{name} {size / MIB:.1f} MiB" for name, size in end_size.items())
                 + f"; total {sum(end_size.values()) / MIB:.1f} MiB", ""))
    rows.append(("store on disk after stop",
                 ", ".join(f"{name} {size / MIB:.1f} MiB" for name, size in stopped_size.items())
                 + f"; total {sum(stopped_size.values()) / MIB:.1f} MiB", ""))
    lost = (total == args.trials and statuses.get("SUCCEEDED", 0) == args.trials
            and metric_counts.get("FINAL", 0) == args.trials
            and metric_counts.get("PERIODICAL", 0) == INTERMEDIATE * args.trials
            and complete == args.trials and len(lines) == args.trials)
    rows.append(("nothing lost",
                 f"{total} trials ({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}), {attempts} "
                 f"attempts; FINAL {metric_counts.get('FINAL', 0)}, PERIODICAL {metric_counts.get('PERIODICAL', 0)}; "
                 f"{complete} trials with exactly 1 + {INTERMEDIATE}; {len(lines)} trials wrote their timings",
                 f"N / 5N / all SUCCEEDED: {met(lost)}"))
    width = max(len(name) for name, _, _ in rows)
    for name, value, target in rows:
        print(f"{name:<{width}}  {value}{'   [' + target + ']' if target else ''}")
    if args.keep:
        print(f"\nexperiment folder kept: {paths.root}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the experiment folder (printed at the end)")
    parser.add_argument("--no-ui", action="store_true", help="no websocket client and no trial-jobs polling")
    parser.add_argument("--manager", nargs=3, help=argparse.SUPPRESS)  # WORK TRIALS CONCURRENCY: the child
    args = parser.parse_args()
    if args.manager:
        run_manager(Path(args.manager[0]), int(args.manager[1]), int(args.manager[2]))
        return
    window = min(1000, max(1, args.trials // 2))
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="expmgr-soak-"))
    reports_file = work / "reports.txt"
    os.environ["SOAK_REPORTS"] = str(reports_file)  # the manager's trials inherit it
    try:
        measure(args, window, work, reports_file)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, window: int, work: Path, reports_file: Path) -> None:
    """Run the experiment in ``work``, follow it, stop it and print the table."""
    loads = [os.getloadavg()[0]]
    started = time.time()
    manager = Manager(work, args.trials, args.concurrency)
    poller = None
    try:
        print(f"manager pid {manager.pid}, port {manager.port}, folder {manager.paths.root}", flush=True)
        if not args.no_ui:
            poller = TrialJobsPoller(manager.port)
            poller.start()
        samples, client, end_size = asyncio.run(follow(manager, args.trials, window, ui=not args.no_ui))
        elapsed = time.time() - started
        loads += [entry.load for entry in samples]
    finally:
        if poller is not None:
            poller.stopping.set()
            poller.join(30)
        manager.stop()
    loads.append(os.getloadavg()[0])
    report(args, window, manager, samples, client, poller, end_size, reports_file, elapsed, loads)

if __name__ == "__main__":
    main()

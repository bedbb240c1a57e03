"""The totals scenarios of ``report_latency.py --totals``: memory (RSS) and the event loop's
longest stall of an experiment's manager, in a process of its own, while

- imports: ``--imports`` clients POST a 16 MB import at once (retrying after a 503 as its
  Retry-After says), all of them held until the tuner takes them;
- follows: ``--followers`` websocket clients (one process of their own) follow a trial's
  1 GB stdout from its start, read what they are sent for ``--seconds``, and leave.

RSS is sampled every 20 ms (start, peak, and after: once the imports were taken / the
clients left, and the manager settled). The loop's stall is measured in the manager's
process (the longest lateness of a 10 ms sleep on its loop) and, from outside, as the
slowest answer of a cheap route (``check-status``) asked every 10 ms from a thread of this
process over a kept-alive connection (which adds this machine's scheduling).
"""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import tornado.httpclient
import tornado.websocket

MiB = 1024 * 1024
BIG_STDOUT_TRIAL = """\
import os, time
import expmgr
expmgr.get_next_parameter()
block = (("a line of a very talkative trial " * 3 + "\\n") * 10000).encode()
written = 0
while written < {size}:
    written += os.write(1, block)
open(os.environ["TOTALS_READY"], "w").close()
while True:
    os.write(1, b"still here\\n")
    time.sleep(0.05)
"""


def serve(work: Path, stdout_bytes: int) -> None:
    """The manager's process: an experiment whose one trial writes ``stdout_bytes`` to its
    stdout; prints ``port trial_id experiment_log`` once written, runs until stdin closes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from expmgr import Experiment, ExperimentConfig
    code = work / "code"
    code.mkdir()
    (code / "trial.py").write_text(BIG_STDOUT_TRIAL.format(size=stdout_bytes))
    ready = work / "ready"
    os.environ["TOTALS_READY"] = str(ready)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}}, trial_command=f"{sys.executable} trial.py",
        trial_code_directory=code, trial_concurrency=1, max_trial_number=1, log_max_size=0,  # one 1 GB file
        tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home"))
    experiment.start(port=0)
    loop = experiment._manager._loop  # type: ignore[union-attr] # the manager's event loop, for its stall monitor
    asyncio.run_coroutine_threadsafe(monitor_stalls(work / "stall"), loop)
    try:
        deadline = time.monotonic() + 600
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        trial_id = experiment.list_trial_jobs()[0].trialJobId
        (work / "served.json").write_text(json.dumps([experiment.port, trial_id, str(experiment.paths.experiment_log)]))
        sys.stdin.read()
    finally:
        experiment.stop()


async def monitor_stalls(out: Path) -> None:
    """On the manager's loop: the longest lateness of a 10 ms sleep since ``out`` was last
    deleted, written to ``out`` every 0.1 s."""
    loop = asyncio.get_running_loop()
    longest, written = 0.0, loop.time()
    while True:
        asked = loop.time()
        await asyncio.sleep(0.01)
        now = loop.time()
        if not out.exists():
            longest = 0.0
        longest = max(longest, now - asked - 0.01)
        if now - written > 0.1:
            written = now
            out.write_text(str(longest))


class Watch(threading.Thread):
    """RSS of ``pid`` every 20 ms and the slowest ``check-status`` answer, per phase."""

    def __init__(self, pid: int, port: int, loop_stall_file: Path) -> None:
        super().__init__(daemon=True)
        self.loop_stall_file = loop_stall_file
        self.process = psutil.Process(pid)
        self.port = port
        self.peak = 0
        self.stall = 0.0
        self.stopping = threading.Event()

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    def reset(self) -> int:
        self.peak, self.stall = self.rss(), 0.0
        self.loop_stall_file.unlink(missing_ok=True)
        return self.peak

    def loop_stall(self) -> float:
        """The manager's own measure (monitor_stalls) since the last reset."""
        return float(self.loop_stall_file.read_text() or 0) if self.loop_stall_file.exists() else 0.0

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sampled = 0.0
        while not self.stopping.is_set():
            started = time.perf_counter()
            connection.request("GET", "/api/v1/nni/check-status")
            connection.getresponse().read()
            self.stall = max(self.stall, time.perf_counter() - started)
            if time.perf_counter() - sampled > 0.02:
                sampled = time.perf_counter()
                self.peak = max(self.peak, self.rss())
            time.sleep(0.01)
        connection.close()


def import_body(size: int) -> bytes:
    """An import of about ``size`` bytes: records of nine hyperparameters, about 300 bytes each."""
    def record(index: int) -> dict[str, object]:
        return {"parameter": {"learning_rate": index % 997 / 1e4, "batch_size": 16 << index % 5, "optimizer": "adam",
                              "dropout": index % 89 / 100, "hidden_units": 64 + index % 512, "activation": "relu",
                              "weight_decay": index % 71 / 1e5, "momentum": 0.9, "note": f"run {index} " + "." * 90},
                "value": index / 7}
    count = size // (len(json.dumps(record(123456))) + 2)
    return json.dumps([record(index) for index in range(count)]).encode()


def send_imports(port: int, count: int, body: bytes) -> dict[str, int]:
    """``count`` imports at once, each retried after a 503 (Retry-After) for up to 10 minutes."""
    outcome = {"accepted": 0, "refused (503, retried)": 0}
    lock = threading.Lock()

    def one() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            connection.request("POST", "/api/v1/nni/experiment/import-data", body,
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            connection.close()
            with lock:
                if response.status == 200:
                    outcome["accepted"] += 1
                    return
                outcome["refused (503, retried)"] += 1
            if response.status != 503:
                raise RuntimeError(f"import: HTTP {response.status}")
            time.sleep(float(response.getheader("Retry-After", "1")))
    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def followers(port: int, count: int, trial_id: str, seconds: float) -> None:
    """The clients' process: ``count`` websocket clients follow the trial's stdout from 0,
    read for ``seconds``, leave; prints a JSON line of what happened."""
    url = f"ws://127.0.0.1:{port}/api/v1/expmgr/ws"
    counts = {"connected": 0, "refused": 0, "messages": 0, "tail_bytes": 0, "skipped_bytes": 0}

    async def read(conn: tornado.websocket.WebSocketClientConnection) -> None:
        while (message := await conn.read_message()) is not None:
            decoded = json.loads(message)
            counts["messages"] += 1
            if decoded.get("type") == "tail":
                counts["tail_bytes"] += len(decoded["text"])
                counts["skipped_bytes"] += decoded.get("skipped") or 0

    async def run() -> None:
        connections = []
        for _ in range(count):
            try:
                conn = await tornado.websocket.websocket_connect(url)
            except tornado.httpclient.HTTPClientError:
                counts["refused"] += 1
                continue
            counts["connected"] += 1
            connections.append(conn)
            conn.write_message(json.dumps({"type": "follow", "file": "stdout", "trial": trial_id, "offset": 0}))
            asyncio.get_running_loop().create_task(read(conn))
        await asyncio.sleep(seconds)
        for conn in connections:
            conn.close()
        await asyncio.sleep(0.5)
        print(json.dumps(counts), flush=True)

    asyncio.run(run())


def run(work: Path, imports: int, import_mib: int, follower_count: int, stdout_gib: float, seconds: float) -> None:
    server = subprocess.Popen([sys.executable, __file__, "serve", str(work), str(int(stdout_gib * 1024 * MiB))],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        while not (work / "served.json").exists():
            if server.poll() is not None:
                raise RuntimeError("the experiment's process ended")
            time.sleep(0.2)
        port, trial_id, experiment_log = json.loads((work / "served.json").read_text())
        watch = Watch(server.pid, port, work / "stall")
        watch.start()
        time.sleep(2)
        rows = []

        def settled(since: float) -> int:
            """RSS once it stopped falling (at most 20 s)."""
            deadline, last = time.monotonic() + 20, watch.rss()
            time.sleep(max(0.0, since + 2 - time.monotonic()))
            while time.monotonic() < deadline:
                time.sleep(1)
                now = watch.rss()
                if now >= last - MiB:
                    return now
                last = now
            return watch.rss()

        body = import_body(import_mib * MiB)
        start = watch.reset()
        began = time.monotonic()
        outcome = send_imports(port, imports, body)
        while Path(experiment_log).read_text().count("results imported into the tuner") < imports:
            time.sleep(0.2)
        took = time.monotonic() - began
        time.sleep(0.2)
        peak, stall = watch.peak, (watch.stall, watch.loop_stall())
        rows.append((f"{imports} imports of {len(body) / MiB:.0f} MiB", start, peak, settled(time.monotonic()), stall,
                     f"{outcome}, all taken in {took:.1f} s"))
        del body

        start = watch.reset()
        clients = subprocess.run([sys.executable, __file__, "follow", str(port), str(follower_count), trial_id,
                                  str(seconds)], capture_output=True, text=True, timeout=600)
        counts = json.loads(clients.stdout.strip().splitlines()[-1])
        time.sleep(0.2)
        peak, stall = watch.peak, (watch.stall, watch.loop_stall())
        rows.append((f"{follower_count} followers of {stdout_gib:g} GiB", start, peak, settled(time.monotonic()),
                     stall, f"{counts}"))
        watch.stopping.set()
        print(f"{'scenario':<30} {'RSS start':>10} {'peak':>8} {'after':>8} {'loop stall ms':>14} "
              f"{'slowest ping ms':>16}")
        for label, start, peak, after, (ping, stall), note in rows:
            print(f"{label:<30} {start / MiB:>8.0f}MB {peak / MiB:>6.0f}MB {after / MiB:>6.0f}MB {stall * 1e3:>14.0f} "
                  f"{ping * 1e3:>16.0f}")
            print(f"    {note}")
    finally:
        server.stdin.close()
        server.wait(120)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "follow":
        followers(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))

"""Benchmark: 40 trivial trials through expmgr's local service, expmgr on Ray and Ray Tune,
as ratios to the local service measured in the same run.

    python tests/perf/ray_turnaround.py [--trials 40] [--concurrency 2] [--rounds 3]
        [--tune-python /path/to/venv-with-ray-tune/bin/python] [--systems local,ray,tune,tune-reuse]

Systems, each run ``--rounds`` times, interleaved (a round runs each once, in this order):
- ``local``: ``expctl create --foreground --exit-when-done`` with ``platform: local``;
- ``ray``: the same with ``trainingService: {platform: ray, address: <GCS>, trialResources:
  {cpu: 1}}``; prints "ray service not available: <error>" and goes on when expmgr refuses it;
- ``tune``, ``tune-reuse``: a Ray Tune driver (``tune.Tuner`` with a function trainable,
  ``TuneConfig(num_samples, max_concurrent_trials, reuse_actors=False/True)``), run by
  ``--tune-python`` (default: this interpreter) in a process of its own; skipped, saying why,
  when that interpreter cannot import ``ray.tune``.
Every trial gets its parameter, reports it as its final result, and appends its first and
last ``time.time()`` to a file. An expmgr trial is a new process; a Tune trial is a call in a
Ray actor (a new actor per trial without reuse_actors).

Each Ray-based run gets a fresh head node (``ray start --head --block --num-cpus=<concurrency>``,
its own ports and temp dir), started by the ``ray`` of the driver's environment: Ray's
workers run the Python of the ``ray start`` that started the node, and they must import the
driver's side (``ray.tune`` and its dependencies; expmgr's trial slot). Starting it is not
timed into the run (it is printed); it is stopped after the run (SIGTERM to ``ray start``,
SIGKILL to what is left) and the script checks that none of its processes is left.

Measured, for each run, from outside the driver (the driver is always a process of its own):
- run: from starting the driver's process to its exit (interpreter start and imports included);
- first trial: from starting the driver's process to the first trial's first line;
- gap (the per-trial overhead): at concurrency c the k-th trial to start (k >= c, by start
  time) waits for the (k-c)-th trial to end (by end time); its gap is the time between the two.
  The median over the run: the idle time of a slot between one trial's last line and the next
  one's first line (process exit, bookkeeping, scheduling, process start and imports);
- driver memory: peak PSS (sampled every 0.2 s) and peak RSS (the kernel's VmHWM) of the
  driver process; "+helpers"
  adds the PSS of the driver's other descendants that are not trials (expmgr's dispatcher).
  The Ray node's own processes are not counted for any system.
Summary: median [min-max] over the rounds, and the median over rounds of each round's ratio to
that round's local run. Not part of the test run (tests/perf is excluded from pytest): it
measures, it does not assert.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SYSTEMS = ("local", "ray", "tune", "tune-reuse")
SAMPLE_INTERVAL = 0.2
"""Seconds between two samples of the driver's memory (a local run of 40 trials takes ~2 s)."""
RUN_TIMEOUT = 600.0
NODE_START_TIMEOUT = 60.0
STOP_GRACE = 10.0

EXPMGR_TRIAL = """\
import time
start = time.time()
import expmgr
params = expmgr.get_next_parameter()
expmgr.report_final_result(params["x"])
with open({times!r}, "a") as times:
    times.write(f"{{start}} {{time.time()}}\\n")
"""

TUNE_DRIVER = """\
import sys, time
address, times_path, trials, concurrency, reuse, storage = sys.argv[1:]
import ray
from ray import tune

def trainable(config):
    start = time.time()
    tune.report({"score": config["x"]})
    with open(times_path, "a") as times:
        times.write(f"{start} {time.time()}\\n")

ray.init(address=address, logging_level="ERROR", log_to_driver=False)
tuner = tune.Tuner(
    trainable, param_space={"x": tune.uniform(0, 1)},
    tune_config=tune.TuneConfig(num_samples=int(trials), max_concurrent_trials=int(concurrency),
                                reuse_actors=reuse == "1", metric="score", mode="max"),
    run_config=tune.RunConfig(storage_path=storage, name="bench", verbose=0))
results = tuner.fit()
errors = results.num_errors
ray.shutdown()
sys.exit(f"{errors} of {len(results)} trials failed" if errors or len(results) != int(trials) else 0)
"""

NODE_ENV = {
    # SIGTERM to `ray start --block` would first drain the node (up to 30 s in Ray 2.60).
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


class BenchmarkError(Exception):
    """A run or the Ray node did not do what the benchmark needs; the message says what."""


class Unavailable(BenchmarkError):
    """A system cannot run on this machine (not installed, refused by expmgr's config)."""


@dataclass
class Run:
    """One system's run of the trials, as measured from outside."""

    seconds: float
    first_trial: float
    gaps: list[float]
    trial_body: float
    """Median time from a trial's first to its last line."""
    driver_pss: int
    driver_rss: int
    helpers_pss: int
    """Driver plus its non-trial descendants."""
    node_start: float | None = None
    """Seconds the Ray head node took to start (not in ``seconds``)."""
    round: int = 0

    @property
    def gap(self) -> float:
        return statistics.median(self.gaps)


@dataclass
class Results:
    runs: dict[str, list[Run]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    """Runs that did not count (a trial that did not run to its end, a driver's error)."""


# -- the Ray head node -------------------------------------------------------------------

class HeadNode:
    """A one-node Ray cluster on this machine: one ``ray start --head --block`` in a session of
    its own, with its own temp dir and OS-chosen ports. ``start()``, then ``stop()``
    (idempotent), which leaves no process of the node (``ray stop`` is never used: it stops
    every Ray process of the machine). After tests/helpers/ray_cluster.py, without pytest."""

    def __init__(self, python: str, num_cpus: int) -> None:
        self.ray = str(Path(python).with_name("ray"))
        self.num_cpus = num_cpus
        self.temp_dir: Path | None = None
        self.address = ""
        self.process: subprocess.Popen | None = None
        self._seen: dict[int, psutil.Process] = {}

    def start(self) -> float:
        """Start the node; return the seconds until it accepted drivers."""
        if not Path(self.ray).exists():
            raise Unavailable(f"no `ray` command beside {self.ray}")
        # /tmp: the session's unix sockets must fit in 107 bytes.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rt-bench-", dir="/tmp"))
        log = self.temp_dir / "ray-start.log"
        command = [self.ray, "start", "--head", "--block", "--port=0", f"--num-cpus={self.num_cpus}",
                   "--num-gpus=0", "--include-dashboard=false", "--dashboard-port=0",
                   "--dashboard-agent-listen-port=0", f"--temp-dir={self.temp_dir}", "--disable-usage-stats"]
        began = time.perf_counter()
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            env={**os.environ, **NODE_ENV}, start_new_session=True,
                                            preexec_fn=_die_with_parent)
        address_file = self.temp_dir / "ray_current_cluster"
        deadline = time.monotonic() + NODE_START_TIMEOUT
        # `ray start` prints this once the node is set up; the address file is written just before.
        while b"Ray runtime started." not in log.read_bytes() or not address_file.exists():
            if self.process.poll() is not None:
                raise BenchmarkError(f"`ray start` exited with {self.process.returncode}: "
                                     + log.read_text(errors="replace")[-2000:])
            if time.monotonic() > deadline:
                raise BenchmarkError(f"`ray start` did not finish in {NODE_START_TIMEOUT:.0f} s; see {log}")
            self._remember()
            time.sleep(0.05)
        self.address = address_file.read_text().strip()
        self._remember()
        return time.perf_counter() - began

    def stop(self) -> None:
        """SIGTERM to ``ray start`` (it stops its processes), SIGKILL what is left after
        STOP_GRACE; raise BenchmarkError if any process of the node still runs after that."""
        if self.process is None:
            return
        process, self.process = self.process, None
        self._remember()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                pass
        left = self._leftovers()
        for leftover in left:
            _kill(leftover)
        process.wait()
        psutil.wait_procs(left, timeout=STOP_GRACE)
        still = [p.pid for p in self._leftovers()]
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        if still:
            raise BenchmarkError(f"Ray node processes still running after SIGKILL: {still}")
        if left:
            print(f"  note: {len(left)} Ray process(es) outlived `ray start` and were killed: "
                  f"{[p.pid for p in left]}", flush=True)

    def _remember(self) -> None:
        """Note every process of the node seen so far (its tree can change while it runs)."""
        if self.process is None:
            return
        try:
            root = psutil.Process(self.process.pid)
            for p in [root, *root.children(recursive=True)]:
                self._seen.setdefault(p.pid, p)
        except psutil.NoSuchProcess:
            pass

    def _leftovers(self) -> list[psutil.Process]:
        """Processes of this node still running: seen in its tree, in its session, or naming
        its temp dir on their command line."""
        found = _alive(list(self._seen.values()))
        pids = {p.pid for p in found}
        session = next(iter(self._seen), None)
        for p in psutil.process_iter(["pid", "cmdline"]):
            if p.pid in pids or p.pid == os.getpid():
                continue
            try:
                mine = (session is not None and os.getsid(p.pid) == session) or (
                    self.temp_dir is not None and str(self.temp_dir) in " ".join(p.info["cmdline"] or []))
            except (OSError, psutil.Error):
                continue
            if mine and _alive([p]):
                found.append(p)
        return found

    def __enter__(self) -> HeadNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the benchmark dies, so even a killed benchmark
    leaves no node (``ray start`` then stops its processes)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _kill(process: psutil.Process) -> None:
    try:
        process.kill()
    except psutil.NoSuchProcess:
        pass


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


# -- one run ---------------------------------------------------------------------------------

class MemorySampler(threading.Thread):
    """Peak PSS/RSS of a driver process and of it with its non-trial descendants."""

    def __init__(self, pid: int, trial_marker: str) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.trial_marker = trial_marker
        self.driver_pss = self.driver_rss = self.helpers_pss = 0
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            driver = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.finished.wait(SAMPLE_INTERVAL):
            try:
                memory = driver.memory_full_info()
                helpers = 0
                for child in driver.children(recursive=True):
                    try:
                        if self.trial_marker not in " ".join(child.cmdline()):
                            helpers += child.memory_full_info().pss
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            self.driver_pss = max(self.driver_pss, memory.pss)
            self.driver_rss = max(self.driver_rss, memory.rss, _peak_rss(self.pid))
            self.helpers_pss = max(self.helpers_pss, memory.pss + helpers)


def _peak_rss(pid: int) -> int:
    """The kernel's peak RSS of a process (VmHWM), 0 once it has ended."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed_driver(command: list[str], work: Path, times: Path, trials: int, concurrency: int,
                 trial_marker: str, env: dict[str, str] | None = None) -> Run:
    """Run a driver process to its end and measure it (see the module docstring)."""
    log = work / "driver.log"
    with open(log, "wb") as out:
        launched_wall = time.time()
        began = time.perf_counter()
        driver = subprocess.Popen(command, cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env=env, start_new_session=True, preexec_fn=_die_with_parent)
        sampler = MemorySampler(driver.pid, trial_marker)
        sampler.start()
        try:
            driver.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            _end_tree(driver)
            raise BenchmarkError(f"the driver did not end in {RUN_TIMEOUT:.0f} s; see {log}") from None
        except BaseException:
            _end_tree(driver)
            raise
        seconds = time.perf_counter() - began
        sampler.finished.set()
        sampler.join()
    if driver.returncode != 0:
        raise BenchmarkError(f"the driver exited with {driver.returncode}: {_error_line(log)} (log: {log})")
    spans = [tuple(map(float, line.split())) for line in times.read_text().splitlines()] if times.exists() else []
    if len(spans) != trials:
        ended = [line.split(") ", 1)[-1] for line in log.read_text(errors="replace").splitlines()
                 if "CRASHED" in line or "FAILED" in line or "LOST" in line]
        raise BenchmarkError(f"{len(spans)} of {trials} trials ran to their end"
                             + (f" ({'; '.join(ended[:5])})" if ended else "") + f"; see {log}")
    starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans)
    return Run(seconds=seconds, first_trial=starts[0] - launched_wall,
               gaps=[starts[k] - ends[k - concurrency] for k in range(concurrency, trials)],
               trial_body=statistics.median(e - s for s, e in spans),
               driver_pss=sampler.driver_pss, driver_rss=sampler.driver_rss, helpers_pss=sampler.helpers_pss)


def _end_tree(driver: subprocess.Popen) -> None:
    """SIGKILL a driver and its descendants (it ran in a session of its own)."""
    try:
        os.killpg(driver.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    driver.wait()


def _error_line(log: Path) -> str:
    """The line of a driver's log that says what went wrong (expmgr's "experiment failed",
    a Python exception), else its last line."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if "experiment failed:" in line:
            return line.split("experiment failed:", 1)[1].strip()
        if "ConfigError" in line or line.startswith("error:"):
            return line
    return lines[-1] if lines else "(no output)"


def expmgr_config(platform: dict[str, object], work: Path, trials: int, concurrency: int) -> Path:
    """Write the trial and the experiment's config into ``work``; Unavailable when expmgr's
    config refuses ``platform`` (as an expmgr without the service refuses ``platform: ray``)."""
    from expmgr import ExperimentConfig
    from expmgr.config import ConfigError
    code = work / "code"
    code.mkdir(parents=True)
    (code / "bench_trial.py").write_text(EXPMGR_TRIAL.format(times=str(work / "times")))
    config = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCommand": f"{sys.executable} bench_trial.py",
        "trialCodeDirectory": str(code),
        "trialConcurrency": concurrency,
        "maxTrialNumber": trials,
        "tuner": {"name": "Random", "classArgs": {"seed": 0}},
        "trainingService": platform,
        "experimentWorkingDirectory": str(work / "home"),
    }
    path = work / "config.yml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    try:
        ExperimentConfig.load(path)
    except ConfigError as error:
        raise Unavailable(str(error)) from None
    return path


def ray_platform(address: str) -> dict[str, object]:
    return {"platform": "ray", "address": address, "trialResources": {"cpu": 1}}


def expmgr_run(platform: dict[str, object], work: Path, trials: int, concurrency: int) -> Run:
    """``trials`` trivial trials through ``expctl create --foreground --exit-when-done``."""
    path = expmgr_config(platform, work, trials, concurrency)
    command = [sys.executable, "-m", "expmgr.cli", "create", "--config", str(path), "--port", "0",
               "--foreground", "--exit-when-done"]
    return timed_driver(command, work, work / "times", trials, concurrency, "bench_trial.py")


def tune_run(python: str, address: str, reuse: bool, work: Path, trials: int, concurrency: int) -> Run:
    """``trials`` trials of a function trainable through Ray Tune, its driver run by ``python``."""
    work.mkdir(parents=True)
    driver = work / "tune_driver.py"
    driver.write_text(TUNE_DRIVER)
    times = work / "times"
    command = [python, str(driver), address, str(times), str(trials), str(concurrency), "1" if reuse else "0",
               str(work / "storage")]
    # Tune's function trainables run in Ray workers, not in processes the driver starts.
    return timed_driver(command, work, times, trials, concurrency, "ray::", env={**os.environ, **NODE_ENV})


def tune_version(python: str) -> str:
    """Ray's version in ``python`` when it can import ray.tune; Unavailable otherwise."""
    probe = subprocess.run([python, "-c", "import ray, ray.tune; print(ray.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise Unavailable(f"{python} cannot import ray.tune: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    return probe.stdout.strip()


def run_system(system: str, work: Path, args: argparse.Namespace) -> Run:
    if system == "local":
        return expmgr_run({"platform": "local"}, work, args.trials, args.concurrency)
    python = sys.executable if system == "ray" else args.tune_python
    with HeadNode(python, args.concurrency) as node:
        node_start = node.start()
        if system == "ray":
            run = expmgr_run(ray_platform(node.address), work, args.trials, args.concurrency)
        else:
            run = tune_run(python, node.address, system == "tune-reuse", work, args.trials, args.concurrency)
    run.node_start = node_start
    return run


# -- report ----------------------------------------------------------------------------------

def describe(run: Run) -> str:
    node = f", node start {run.node_start:.1f} s (not counted)" if run.node_start is not None else ""
    return (f"run {run.seconds:6.2f} s, first trial {run.first_trial:5.2f} s, gap {run.gap * 1000:5.0f} ms "
            f"(trial body {run.trial_body * 1000:.0f} ms), driver PSS {run.driver_pss / 2**20:4.0f} MiB "
            f"RSS {run.driver_rss / 2**20:4.0f} MiB, +helpers PSS {run.helpers_pss / 2**20:4.0f} MiB{node}")


METRICS = (
    ("run (s)", lambda r: r.seconds, "{:.2f}"),
    ("first trial (s)", lambda r: r.first_trial, "{:.2f}"),
    ("gap (ms)", lambda r: r.gap * 1000, "{:.0f}"),
    ("driver PSS (MiB)", lambda r: r.driver_pss / 2**20, "{:.0f}"),
    ("driver RSS (MiB)", lambda r: r.driver_rss / 2**20, "{:.0f}"),
    ("+helpers PSS (MiB)", lambda r: r.helpers_pss / 2**20, "{:.0f}"),
)


def summary(results: Results, rounds: int) -> None:
    local = results.runs.get("local", [])
    print(f"\nsummary: median [min-max] of {rounds} round(s); ratio: median of each round's value / "
          f"that round's local value")
    for system, runs in results.runs.items():
        if not runs:
            continue
        print(f"{system}:")
        for name, value, form in METRICS:
            values = [value(r) for r in runs]
            text = (f"  {name:<19} {form.format(statistics.median(values)):>7} "
                    f"[{form.format(min(values))}-{form.format(max(values))}]")
            local_of = {r.round: r for r in local}  # a failed run leaves its round out: pair by round
            pairs = [(value(r), value(local_of[r.round])) for r in runs
                     if r.round in local_of and value(local_of[r.round]) > 0]
            if system != "local" and pairs:
                text += f"  ratio {statistics.median(v / l for v, l in pairs):.2f}x"
            print(text)
    for system, errors in results.failed.items():
        print(f"{system}: {len(errors)} run(s) failed and are not counted (see above)")
    for system, reason in results.skipped.items():
        print(f"{system}: not measured: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tune-python", default=sys.executable,
                        help="a Python that can import ray.tune (a venv with 'ray[tune]'); default: this one")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from {', '.join(SYSTEMS)} (default: all)")
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    if args.trials <= args.concurrency:
        parser.error("--trials must be larger than --concurrency (the gap needs trials that waited for a slot)")
    # SIGTERM ends the benchmark as Ctrl+C does: through the `finally`s that stop the nodes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import expmgr
    print(f"expmgr from {Path(expmgr.__file__).parent}; {args.trials} trials at concurrency {args.concurrency}, "
          f"{args.rounds} round(s); {os.cpu_count()} CPUs", flush=True)
    results = Results()
    if any(s.startswith("tune") for s in systems):
        try:
            print(f"Ray Tune: ray {tune_version(args.tune_python)} in {args.tune_python}", flush=True)
        except Unavailable as error:
            for system in ("tune", "tune-reuse"):
                if system in systems:
                    results.skipped[system] = f"Ray Tune not available: {error}"
                    systems.remove(system)
            print(f"Ray Tune not available: {error}", flush=True)
    results.runs = {s: [] for s in systems}
    tmp = tempfile.mkdtemp(prefix="ray-turnaround-")
    finished = False
    try:
        if "ray" in systems:
            try:  # before a node is started for it
                expmgr_config(ray_platform("127.0.0.1:6379"), Path(tmp) / "check", 2, 1)
            except Unavailable as error:
                results.skipped["ray"] = f"ray service not available: {error}"
                systems.remove("ray")
                print(results.skipped["ray"], flush=True)
        for round_number in range(1, args.rounds + 1):
            print(f"round {round_number}:", flush=True)
            for system in list(systems):
                work = Path(tmp) / f"round{round_number}-{system}"
                try:
                    run = run_system(system, work, args)
                except Unavailable as error:
                    reason = (f"ray service not available: {error}" if system == "ray"
                              else f"not available: {error}")
                    print(f"  {system:<10} {reason}", flush=True)
                    results.skipped[system] = reason
                    systems.remove(system)
                    continue
                except BenchmarkError as error:
                    if system == "ray" and round_number == 1 and not (work / "times").exists():
                        reason = f"ray service not available: {error}"
                        results.skipped[system] = reason
                        systems.remove(system)
                        print(f"  {system:<10} {reason}", flush=True)
                        continue
                    print(f"  {system:<10} run failed, not counted: {error}", flush=True)
                    results.failed.setdefault(system, []).append(str(error))
                    continue
                run.round = round_number
                results.runs[system].append(run)
                print(f"  {system:<10} {describe(run)}", flush=True)
        finished = True
    finally:
        if finished and not results.failed:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"the runs' folders (drivers' logs, trials' files) are kept in {tmp}", flush=True)
        left = [p.pid for p in psutil.Process().children(recursive=True)]
        if left:
            print(f"odd: processes of the benchmark still running at its end: {left}", flush=True)
    summary(results, args.rounds)


if __name__ == "__main__":
    main()

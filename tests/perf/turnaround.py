"""Benchmark: trial turnaround, start-up and memory of expmgr installed as a user installs it,
side by side with a floor measured in the same run (and NNI 3.0 when given its Python).

    python tests/perf/turnaround.py [--trials 40] [--concurrency 2] [--rounds 3]
        [--installed-python PATH] [--nni-python /path/to/venv-with-nni/bin/python]

Set-up (timed and printed): unless ``--installed-python`` names a Python where expmgr is
installed already, a wheel of this repository is built (``pip wheel --no-deps``) and installed
with its dependencies into a fresh venv in a temporary folder; every expmgr process of the
benchmark runs that venv's Python, without PYTHONPATH, so an editable checkout is never
measured. This script itself needs only psutil.

Workload: ``--trials`` trivial trials, each a new Python process that gets its parameter and
reports one final result, ``--concurrency`` at a time. A trial appends ``time.time()`` at its
first line, after ``get_next_parameter()`` and just before its exit to a file (O_APPEND).
Each round runs, in this order: the floor (``--trials`` bare ``python -c pass`` through a plain
thread pool at the same concurrency), expmgr, NNI. A system's driver is a process of its own
that builds an ``Experiment`` (expmgr's, or ``nni.experiment.Experiment`` with the local
platform and the Random tuner), notes ``time.time()``, calls ``start()`` and waits for DONE
(expmgr: ``wait()``; NNI: ``get_status()`` polled every 0.1 s); then ``stop()``.

The table (median [min-max] over the rounds, and the median of each round's ratio to that
round's floor):
- whole run, start() to DONE;
- start() to the first trial's first line;
- idle gap (median over the run): at concurrency c the k-th trial to start (k >= c) waited for
  the (k-c)-th trial to end; its gap is from that end to its first line (so it includes the
  ending trial's interpreter exit and the next one's interpreter start). Its floor is measured:
  the same gap of ``--trials`` bare interpreters through a plain pool, each noting the time at
  its first and its last line (the exit and start every fresh process pays, with no manager);
- manager-side memory: the peak of the summed PSS of the driver and its descendants that are
  not trials (expmgr: manager, dispatcher, watchdog; NNI: the Python driving the experiment,
  the node.js manager, the dispatcher), sampled every 0.1 s; each part's peak is printed below.
  A child that still has the driver's command line (forked, not yet exec'd) is not counted: a
  vfork()ed child reports its parent's memory;
- trial import + get_next_parameter: in the trials of the run, from the first line to after
  ``get_next_parameter()``; floor: a bare interpreter start (``python -c pass``, the faster
  half of 20). Also printed: ``import expmgr; get_next_parameter()`` as a whole process.
After each NNI run every process it left (its node.js manager among them) is killed.
Not part of the test run (tests/perf is excluded from pytest): it measures, it does not assert.
"""
from __future__ import annotations

import argparse
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
SAMPLE_INTERVAL = 0.1
RUN_TIMEOUT = 600.0
TRIAL_FILE = "bench_trial.py"
"""Names the trials' processes (their command line) for the memory sampler."""

TRIAL = """\
import time
start = time.time()
import {module}
params = {module}.get_next_parameter()
got = time.time()
{module}.report_final_result(params["x"])
with open({times!r}, "a") as times:
    times.write(f"{{start}} {{got}} {{time.time()}}\\n")
"""

EXPMGR_DRIVER = """\
import json, sys, time
from pathlib import Path
work, python, trials, concurrency = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import expmgr
from expmgr import Experiment, ExperimentConfig
config = ExperimentConfig(
    search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
    trial_command=f"{python} bench_trial.py", trial_code_directory=work / "code",
    trial_concurrency=concurrency, max_trial_number=trials,
    tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home")
experiment = Experiment(config)
began = time.time()
experiment.start(port=0)
experiment.wait()
done = time.time()
status = experiment.get_status()
experiment.stop()
print(json.dumps({"start": began, "done": done, "status": status, "module": expmgr.__file__}))
"""

NNI_DRIVER = """\
import json, socket, sys, time
from pathlib import Path
work, python, trials, concurrency = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import nni
from nni.experiment import AlgorithmConfig, Experiment
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
experiment = Experiment("local")
experiment.config.search_space = {"x": {"_type": "uniform", "_value": [0, 1]}}
experiment.config.trial_command = f"{python} bench_trial.py"
experiment.config.trial_code_directory = str(work / "code")
experiment.config.trial_concurrency = concurrency
experiment.config.max_trial_number = trials
experiment.config.tuner = AlgorithmConfig(name="Random", class_args={"seed": 0})
experiment.config.experiment_working_directory = str(work / "home")
began = time.time()
experiment.start(port)
while (status := experiment.get_status()) not in ("DONE", "ERROR", "STOPPED"):
    time.sleep(0.1)
done = time.time()
experiment.stop()
print(json.dumps({"start": began, "done": done, "status": status, "module": nni.__file__}))
"""


class BenchmarkError(Exception):
    """A run did not do what the benchmark needs; the message says what."""


@dataclass
class Run:
    """One system's run of the trials."""

    seconds: float
    first_trial: float
    gaps: list[float]
    import_and_parameter: float
    """Median, over the trials, of first line to after get_next_parameter()."""
    memory: int
    """Peak of the summed PSS of the driver's non-trial processes."""
    parts: dict[str, int] = field(default_factory=dict)
    """Each part's peak PSS."""
    others: list[str] = field(default_factory=list)
    """Command lines of the processes counted as "other"."""
    round: int = 0

    @property
    def gap(self) -> float:
        return statistics.median(self.gaps)


# -- set-up ------------------------------------------------------------------------------------

def clean_env() -> dict[str, str]:
    """The environment of every measured process: no PYTHONPATH (it would put a checkout first)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}


def install(tmp: Path) -> tuple[str, float]:
    """Build a wheel of the repository and install it into a fresh venv; return its Python
    and the seconds it took."""
    began = time.perf_counter()
    wheels = tmp / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
                   check=True, env=clean_env(), stdout=subprocess.DEVNULL)
    wheel = next(wheels.glob("expmgr-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_env())
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                   check=True, env=clean_env(), stdout=subprocess.DEVNULL)
    return python, time.perf_counter() - began


def module_of(python: str, module: str) -> str:
    probe = subprocess.run([python, "-c", f"import {module}; print({module}.__file__)"], env=clean_env(),
                           capture_output=True, text=True, cwd=tempfile.gettempdir())
    if probe.returncode != 0:
        raise BenchmarkError(f"{python} cannot import {module}: "
                             f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    return probe.stdout.strip()


# -- the floor and the interpreter -------------------------------------------------------------

def bare_pool(python: str, count: int, concurrency: int) -> float:
    env = clean_env()

    def one(_: int) -> None:
        subprocess.run([python, "-c", "pass"], check=True, env=env)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(count)))
    return time.perf_counter() - start


def idle_gaps(spans: list[tuple[float, float]], concurrency: int) -> list[float]:
    """From each process's (first line, last line): the k-th to start (k >= concurrency)
    waited for the (k-concurrency)-th to end; its gap is from that end to its first line."""
    starts = sorted(start for start, _ in spans)
    ends = sorted(end for _, end in spans)
    return [starts[k] - ends[k - concurrency] for k in range(concurrency, len(spans))]


STAMPING = "import time; s = time.time()\nwith open({times!r}, 'a') as f: f.write(f'{{s}} {{time.time()}}\\n')"
"""A bare interpreter that notes its first and last line, as the benchmark's trials do."""


def gap_floor(python: str, work: Path, count: int, concurrency: int) -> float:
    """The median idle gap of ``count`` bare interpreters (``STAMPING``) through a plain pool:
    the interpreter exit and start that every fresh trial process pays, with no manager."""
    times = work / "gap-floor-times"
    times.unlink(missing_ok=True)
    env = clean_env()
    code = STAMPING.format(times=str(times))

    def one(_: int) -> None:
        subprocess.run([python, "-c", code], check=True, env=env)
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(count)))
    spans = [(float(a), float(b)) for a, b in (line.split() for line in times.read_text().splitlines())]
    return statistics.median(idle_gaps(spans, concurrency))


def process_cost(python: str, code: str, work: Path, repeat: int = 20) -> float:
    """Seconds for ``python -c code``: the mean of the faster half of ``repeat`` runs (less noise
    from the machine)."""
    trial_dir = work / "standalone-trial"
    trial_dir.mkdir(exist_ok=True)
    (trial_dir / "parameter.json").write_text(json.dumps({"parameter_id": 0, "parameters": {"x": 1}}))
    env = {**clean_env(), "EXPMGR_TRIAL_ID": "bench", "EXPMGR_TRIAL_DIR": str(trial_dir)}
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([python, "-c", code], env=env, check=True, cwd=work)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.fmean(times[: repeat // 2])


# -- one run -----------------------------------------------------------------------------------

def part_of(system: str, cmdline: str, name: str) -> str | None:
    """The part a driver's descendant counts as; None for a trial's process."""
    if TRIAL_FILE in cmdline or "/trials/" in cmdline:
        return None
    if system == "expmgr":
        if "expmgr.dispatcher" in cmdline:
            return "dispatcher"
        if "expmgr.training.watchdog" in cmdline or "training/watchdog.py" in cmdline:  # by module, or by path
            return "watchdog"
    else:
        if name == "node" or "main.js" in cmdline:
            return "node.js manager"
        if "nni" in cmdline and ("dispatcher" in cmdline or "-m nni" in cmdline):
            return "dispatcher"
    return f"other ({name})"


class MemorySampler(threading.Thread):
    """Every SAMPLE_INTERVAL: the PSS of a driver and its non-trial descendants; keeps the peak
    of their sum and of each part, and every process it saw (to end them afterwards)."""

    def __init__(self, pid: int, system: str) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.system = system
        self.peak = 0
        self.parts: dict[str, int] = {}
        self.seen: dict[int, psutil.Process] = {}
        self.others: set[str] = set()
        """Command lines of the processes counted as "other"."""
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            driver = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        driver_part = "manager" if self.system == "expmgr" else "Python driver"
        try:
            driver_cmdline = driver.cmdline()
        except psutil.Error:
            return
        while not self.finished.wait(SAMPLE_INTERVAL):
            try:
                sizes = {driver_part: driver.memory_full_info().pss}
                children = driver.children(recursive=True)
            except psutil.Error:
                return
            for child in children:
                self.seen.setdefault(child.pid, child)
                try:
                    # Not cached by pid: a fork of the driver becomes a trial when it execs. Before
                    # it does, it is not counted: a vfork()ed child reports its parent's memory.
                    cmdline = child.cmdline()
                    if cmdline == driver_cmdline or not cmdline:  # not cmdline: a zombie
                        continue
                    part = part_of(self.system, " ".join(cmdline), child.name())
                    if part is not None and part.startswith("other"):
                        self.others.add(" ".join(cmdline)[:100])
                    if part is not None:
                        sizes[part] = sizes.get(part, 0) + child.memory_full_info().pss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, sum(sizes.values()))
            for part, size in sizes.items():
                self.parts[part] = max(self.parts.get(part, 0), size)


def prepare(system: str, work: Path) -> Path:
    code = work / "code"
    code.mkdir(parents=True)
    times = work / "times"
    (code / TRIAL_FILE).write_text(TRIAL.format(module="expmgr" if system == "expmgr" else "nni", times=str(times)))
    return times


def driven_run(system: str, python: str, work: Path, trials: int, concurrency: int) -> Run:
    """Run ``system``'s driver to its end, measure it, and end whatever it left running."""
    times = prepare(system, work)
    driver_file = work / "driver.py"
    driver_file.write_text(EXPMGR_DRIVER if system == "expmgr" else NNI_DRIVER)
    log = work / "driver.log"
    with open(log, "wb") as err:
        driver = subprocess.Popen([python, str(driver_file), str(work), python, str(trials), str(concurrency)],
                                  cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                  env=clean_env(), start_new_session=True)
        sampler = MemorySampler(driver.pid, system)
        sampler.start()
        try:
            out, _ = driver.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BenchmarkError(f"the driver did not end in {RUN_TIMEOUT:.0f} s; see {log}") from None
        finally:
            sampler.finished.set()
            sampler.join()
            left = end_leftovers(driver, sampler.seen.values(), work)
    if left:
        print(f"  note: {system} left {len(left)} process(es) running; killed: {left}", flush=True)
    if driver.returncode != 0:
        lines = log.read_text(errors="replace").strip().splitlines()
        raise BenchmarkError(f"the driver exited with {driver.returncode}: {lines[-1] if lines else '?'} (log: {log})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    if result["status"] != "DONE":
        raise BenchmarkError(f"the experiment ended {result['status']}, not DONE; see {work}")
    spans = [tuple(map(float, line.split())) for line in times.read_text().splitlines()] if times.exists() else []
    if len(spans) != trials:
        raise BenchmarkError(f"{len(spans)} of {trials} trials ran to their end; see {work}")
    starts = sorted(s for s, _, _ in spans)
    return Run(seconds=result["done"] - result["start"], first_trial=starts[0] - result["start"],
               gaps=idle_gaps([(s, e) for s, _, e in spans], concurrency),
               import_and_parameter=statistics.median(g - s for s, g, _ in spans),
               memory=sampler.peak, parts=dict(sampler.parts), others=sorted(sampler.others))


def end_leftovers(driver: subprocess.Popen, seen, work: Path) -> list[str]:
    """SIGKILL every process of the run still running: the driver's session, what the sampler
    saw under it, and whatever names the run's folder on its command line (NNI's node.js
    manager); return them as "pid name"."""
    if driver.poll() is None:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        driver.wait()
    candidates = {p.pid: p for p in seen}
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(work) in " ".join(p.info["cmdline"] or []) or os.getsid(p.pid) == driver.pid:
                candidates.setdefault(p.pid, p)
        except (OSError, psutil.Error):
            pass
    alive = []
    for p in candidates.values():
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and p.pid != os.getpid():
                alive.append(p)
        except psutil.Error:
            pass
    for p in list(alive):
        try:
            alive.extend(c for c in p.children(recursive=True) if c.pid not in candidates)
        except psutil.Error:
            pass
    names = []
    for p in alive:
        try:
            names.append(f"{p.pid} {p.name()}")
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=10)
    return names


# -- report ------------------------------------------------------------------------------------

def spread(values: list[float], form: str) -> str:
    return f"{form.format(statistics.median(values))} [{form.format(min(values))}-{form.format(max(values))}]"


def report(floors: list[tuple[int, float]], gap_floors: list[float], bare: float, runs: dict[str, list[Run]], rounds: int,
           trials: int, concurrency: int) -> None:
    floor_of = dict(floors)
    columns = [name for name in ("NNI 3.0", "expmgr") if runs.get(name)]

    def whole(name: str) -> str:
        rs = runs[name]
        ratios = [r.seconds / floor_of[r.round] for r in rs if r.round in floor_of]
        return spread([r.seconds for r in rs], "{:.2f}") + (f" {statistics.median(ratios):.2f}x" if ratios else "")

    def of(name: str, value, form: str) -> str:
        return spread([value(r) for r in runs[name]], form)

    rows = [
        ("whole run, start() to DONE (s)", spread([s for _, s in floors], "{:.2f}"), whole,
         "<= 1.3x the floor"),
        ("start() -> first trial's code runs (s)", "-", lambda n: of(n, lambda r: r.first_trial, "{:.3f}"),
         "<= 0.1 s"),
        ("idle gap, trial end -> next start, median (ms)",
         spread([g * 1000 for g in gap_floors], "{:.1f}") + " (bare interpreters)",
         lambda n: of(n, lambda r: r.gap * 1000, "{:.1f}"), "<= 5 ms"),
        ("manager-side memory, peak PSS (MiB)", "-", lambda n: of(n, lambda r: r.memory / 2**20, "{:.1f}"),
         "<= 45 MiB"),
        ("trial import + get_next_parameter (ms)", f"{bare * 1000:.1f} (interpreter start)",
         lambda n: of(n, lambda r: r.import_and_parameter * 1000, "{:.1f}"), "keep"),
    ]
    table = [["figure", "floor", *columns, "target"]]
    for label, floor, cell, target in rows:
        table.append([label, floor, *[cell(n) for n in columns], target])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    print(f"\n{trials} trials at concurrency {concurrency}; median [min-max] of {rounds} round(s); "
          f"the whole run's ratio: median of each round's run / that round's floor")
    for number, row in enumerate(table):
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |")
        if number == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    for name in columns:
        parts = sorted({part for r in runs[name] for part in r.parts})
        text = ", ".join(f"{part} {spread([r.parts.get(part, 0) / 2**20 for r in runs[name]], '{:.1f}')}"
                         for part in parts)
        print(f"{name} memory, each part's peak PSS (MiB): {text}")


def describe(run: Run) -> str:
    parts = ", ".join(f"{part} {size / 2**20:.1f}" for part, size in sorted(run.parts.items()))
    return (f"start() to DONE {run.seconds:6.2f} s, first trial {run.first_trial:.3f} s, gap {run.gap * 1000:5.1f} ms, "
            f"import+get_next_parameter {run.import_and_parameter * 1000:.1f} ms, "
            f"memory {run.memory / 2**20:.1f} MiB ({parts})"
            + "".join(f"\n    other: {cmdline}" for cmdline in run.others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--installed-python", metavar="PATH",
                        help="a Python where expmgr is installed (not editable); default: build a wheel of "
                             "this repository and install it into a fresh venv")
    parser.add_argument("--nni-python", metavar="PATH", help="a Python with NNI 3.0: adds the NNI column")
    args = parser.parse_args()
    if args.trials <= args.concurrency:
        parser.error("--trials must be larger than --concurrency (the gap needs trials that waited for a slot)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="turnaround-"))
    finished = False
    try:
        if args.installed_python:
            python = args.installed_python
            print(f"expmgr: {python} (given)", flush=True)
        else:
            python, seconds = install(tmp)
            print(f"set-up: wheel of {REPO} built and installed into a fresh venv in {seconds:.1f} s", flush=True)
        where = module_of(python, "expmgr")
        print(f"expmgr imported from {where}", flush=True)
        if Path(where).resolve().is_relative_to(REPO):
            print("  warning: that is this checkout, not an installed copy", flush=True)
        systems = {"expmgr": python}
        if args.nni_python:
            try:
                print(f"NNI: {module_of(args.nni_python, 'nni')} ({args.nni_python})", flush=True)
                systems = {"NNI 3.0": args.nni_python, **systems}
            except BenchmarkError as error:
                print(f"NNI not measured: {error}", flush=True)
        print(f"{args.trials} trials at concurrency {args.concurrency}, {args.rounds} round(s); "
              f"{os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        bare = process_cost(python, "pass", tmp)
        whole = process_cost(python, "import expmgr; expmgr.get_next_parameter()", tmp)
        print(f"interpreter start {bare * 1000:.1f} ms; `import expmgr; get_next_parameter()` as a whole process "
              f"{whole * 1000:.1f} ms ({whole / bare:.2f}x)", flush=True)
        floors: list[tuple[int, float]] = []
        gap_floors: list[float] = []
        runs: dict[str, list[Run]] = {name: [] for name in systems}
        failed = 0
        for number in range(1, args.rounds + 1):
            print(f"round {number}:", flush=True)
            floor = bare_pool(python, args.trials, args.concurrency)
            floors.append((number, floor))
            gap_floors.append(gap_floor(python, tmp, args.trials, args.concurrency))
            print(f"  {'floor':<8} {args.trials} x `python -c pass` through a pool: {floor:6.2f} s; "
                  f"the same pool's idle gap {gap_floors[-1] * 1000:.1f} ms", flush=True)
            for name, system_python in systems.items():
                system = "expmgr" if name == "expmgr" else "nni"
                began = time.perf_counter()
                try:
                    run = driven_run(system, system_python, tmp / f"round{number}-{system}", args.trials,
                                     args.concurrency)
                except BenchmarkError as error:
                    failed += 1
                    print(f"  {name:<8} run failed, not counted: {error}", flush=True)
                    continue
                run.round = number
                runs[name].append(run)
                print(f"  {name:<8} {describe(run)} (driver process {time.perf_counter() - began:.1f} s)",
                      flush=True)
        report(floors, gap_floors, bare, runs, args.rounds, args.trials, args.concurrency)
        print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finished = not failed
    finally:
        if finished:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept for a look: {tmp}", flush=True)


if __name__ == "__main__":
    main()

"""Benchmark: warm trial starts (``trialWarmStart``, issue 27) against cold ones, side by side in
one run, with the fresh-interpreter floor measured in the same run.

    python tests/perf/warm_start.py [--trials 40] [--heavy-trials 20] [--torch-trials 0]
        [--concurrency 2] [--rounds 1] [--installed-python PATH]

Measures expmgr as a user installs it, as ``turnaround.py`` does (its set-up is reused): a wheel
of this repository installed into a fresh venv with numpy and scikit-learn (and PyTorch's CPU
build for ``--torch-trials``), unless ``--installed-python`` names one; the experiments' drivers
and the trials run that venv's Python by its path, without PYTHONPATH. (A development venv's
``site`` imports can double an interpreter's start, which flatters warm starts against the
floor.) Workloads, each run cold (``trialWarmStart: off``) and warm:
- trivial: ``--trials`` trials that get their parameter and report one result (warm: ``auto``,
  which learns the standard-library modules the first trial imported);
- heavy: ``--heavy-trials`` trials of NNI's sklearn classification example (``load_digits``,
  an ``SVC`` fitted on a quarter of it), which import numpy and scikit-learn (warm: those
  modules listed; then ``auto``, which learns them from the first trial);
- torch (``--torch-trials``): a small MLP trained for 20 steps on random data, one thread
  (warm: ``torch`` and ``torch.nn`` listed; then ``auto``).
Each trial appends to a file: its process's start (its first line's time less the time the
process spent on a CPU or waiting for one, ``/proc/self/schedstat``, in ns: a fork's or exec's
start, not counting time blocked on disk, which a page-cached start hardly has), its first
line, the line after its imports, and its last line. Printed per run: whole run (``start()`` to
DONE), start() to the first trial's first line, the idle gap (median; trial k's first line after
trial k-c's last), process start to its first line and to the line after the imports (medians), the
peak manager-side PSS (the driver and its descendants that are not trials: manager, dispatcher,
watchdog, template) and the template's own peak USS (its unshared part). The floors: ``--trials``
bare ``python -c pass`` through a plain pool at the same concurrency, and that pool's idle gap
(``turnaround.gap_floor``). Ratios are warm/cold and
run/floor. It measures, it does not assert (tests/perf is not part of the test run).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.turnaround import bare_pool, clean_env, gap_floor, install, module_of  # noqa: E402
SAMPLE_INTERVAL = 0.1
RUN_TIMEOUT = 1800.0

TRIVIAL = """\
import time
first = time.time()
with open("/proc/self/schedstat") as _schedstat:   # ns on a CPU and waiting for one, since the process began
    _alive = sum(map(int, _schedstat.read().split()[:2])) / 1e9
import expmgr
imported = time.time()
params = expmgr.get_next_parameter()
expmgr.report_final_result(params["x"])
"""

HEAVY = """\
import time
first = time.time()
with open("/proc/self/schedstat") as _schedstat:   # ns on a CPU and waiting for one, since the process began
    _alive = sum(map(int, _schedstat.read().split()[:2])) / 1e9
import numpy
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC
import expmgr
imported = time.time()
params = expmgr.get_next_parameter()
X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=99, test_size=0.75)
model = SVC(C=1.0 + params["x"], kernel="linear").fit(X_train, y_train)
expmgr.report_final_result(model.score(X_test, y_test))
"""
HEAVY_PRELOAD = ["numpy", "sklearn.datasets", "sklearn.model_selection", "sklearn.svm"]

TORCH = """\
import time
first = time.time()
with open("/proc/self/schedstat") as _schedstat:   # ns on a CPU and waiting for one, since the process began
    _alive = sum(map(int, _schedstat.read().split()[:2])) / 1e9
import torch
from torch import nn
import expmgr
imported = time.time()
params = expmgr.get_next_parameter()
torch.set_num_threads(1)
generator = torch.Generator().manual_seed(0)
inputs = torch.randn(512, 32, generator=generator)
targets = (inputs.sum(dim=1) > 0).long()
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01 + params["x"] / 10)
for _ in range(20):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
expmgr.report_final_result((model(inputs).argmax(dim=1) == targets).float().mean())
"""
TORCH_PRELOAD = ["torch", "torch.nn"]
TORCH_VERSION = "2.13.0"
"""The CPU build that lies on this machine's disk (the env notes): pip installs it in seconds."""

TIMES = """\
_started = first - _alive
with open({times!r}, "a") as _times:
    _times.write(f"{{_started}} {{first}} {{imported}} {{time.time()}}\\n")
"""

DRIVER = """\
import json, sys, time
from pathlib import Path
work, python, trials, concurrency, warm = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \\
    json.loads(sys.argv[5])
from expmgr import Experiment, ExperimentConfig
config = ExperimentConfig(
    search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
    trial_command=f"{python} bench_trial.py", trial_code_directory=work / "code",
    trial_concurrency=concurrency, max_trial_number=trials,
    tuner={"name": "Random", "class_args": {"seed": 0}}, experiment_working_directory=work / "home",
    training_service={"platform": "local", "trial_warm_start": warm})
experiment = Experiment(config)
began = time.time()
experiment.start(port=0)
experiment.wait()
done = time.time()
status = experiment.get_status()
experiment.stop()
print(json.dumps({"start": began, "done": done, "status": status}))
"""


class Sampler(threading.Thread):
    """The peak PSS of the driver and its non-trial descendants, and the template's peak USS."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.template_uss = pid, 0, 0
        self.finished = threading.Event()

    def run(self) -> None:
        driver = psutil.Process(self.pid)
        driver_cmdline = driver.cmdline()
        while not self.finished.wait(SAMPLE_INTERVAL):
            try:
                total = driver.memory_full_info().pss
                children = driver.children(recursive=True)
            except psutil.Error:
                return
            templates = set()
            for child in children:
                try:
                    if "__expmgr_warm__" in " ".join(child.cmdline()) and child.ppid() == driver.pid:
                        templates.add(child.pid)
                except psutil.Error:
                    pass
            for child in children:
                try:
                    if child.ppid() in templates or child.cmdline() in (driver_cmdline, []):
                        continue   # a warm trial; a cold one not yet executed (it shows the driver's memory)
                    environ = child.environ()
                    marker = environ.get("EXPMGR_TRIAL_MARKER", "")
                    if marker and child.pid not in templates:
                        continue   # a cold trial
                    info = child.memory_full_info()
                    total += info.pss
                    if child.pid in templates:
                        self.template_uss = max(self.template_uss, info.uss)
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)


def run(python: str, work: Path, trial: str, trials: int, concurrency: int, warm: object) -> dict:
    (work / "code").mkdir(parents=True)
    times = work / "times"
    (work / "code" / "bench_trial.py").write_text(trial + TIMES.format(times=str(times)))
    (work / "driver.py").write_text(DRIVER)
    driver = subprocess.Popen([python, str(work / "driver.py"), str(work), python, str(trials),
                               str(concurrency), json.dumps(warm)], cwd=work, env=clean_env(), stdout=subprocess.PIPE,
                              stderr=open(work / "driver.log", "wb"), start_new_session=True)
    sampler = Sampler(driver.pid)
    sampler.start()
    try:
        out, _ = driver.communicate(timeout=RUN_TIMEOUT)
    finally:
        sampler.finished.set()
        sampler.join()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    result = json.loads(out.decode().strip().splitlines()[-1])
    if result["status"] != "DONE":
        raise SystemExit(f"the experiment ended {result['status']}; see {work}")
    rows = [tuple(map(float, line.split())) for line in times.read_text().splitlines()]
    if len(rows) != trials:
        raise SystemExit(f"{len(rows)} of {trials} trials ended; see {work}")
    rows.sort(key=lambda row: row[1])
    ends = sorted(row[3] for row in rows)
    gaps = [rows[k][1] - ends[k - concurrency] for k in range(concurrency, len(rows))]
    return {"whole": result["done"] - result["start"], "first": rows[0][1] - result["start"],
            "gap": statistics.median(gaps) if gaps else 0.0,
            "to_imported": statistics.median(row[2] - row[0] for row in rows),
            "to_first": statistics.median(row[1] - row[0] for row in rows),
            "pss": sampler.peak, "template_uss": sampler.template_uss}


def show(name: str, cold: dict, warm: dict, bare: float | None, bare_gap: float | None = None) -> None:
    print(f"\n{name}                      cold        warm      warm/cold")
    for key, label, unit in [("whole", "whole run, start() to DONE", "s"), ("first", "start() to first trial", "s"),
                             ("gap", "idle gap (median)", "ms"),
                             ("to_first", "process start to first line", "ms"), ("to_imported", "process start to after imports",
                                                                  "ms"),
                             ("pss", "manager-side PSS (peak)", "MiB"), ("template_uss", "template's own USS (peak)",
                                                                         "MiB")]:
        scale = {"s": 1, "ms": 1000, "MiB": 1 / 2**20}[unit]
        a, b = cold[key] * scale, warm[key] * scale
        ratio = f"{b / a:.2f}x" if a else "-"
        print(f"  {label:34} {a:9.3f} {b:9.3f} {unit:3}  {ratio}")
    if bare:
        print(f"  floor ({bare:.3f} s): cold {cold['whole'] / bare:.2f}x, warm {warm['whole'] / bare:.2f}x")
    if bare_gap:
        print(f"  gap floor, bare interpreters through a pool: {bare_gap * 1000:.3f} ms")


def install_workloads(python: str, torch: bool) -> None:
    """numpy and scikit-learn (the sklearn workload) and, with ``torch``, PyTorch's CPU build."""
    packages = ["numpy", "scikit-learn"] + ([f"torch=={TORCH_VERSION}"] if torch else [])
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
                   check=True, env=clean_env(), stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--heavy-trials", type=int, default=20)
    parser.add_argument("--torch-trials", type=int, default=0,
                        help=f"trials of the torch workload (installs torch=={TORCH_VERSION}, CPU); 0: none")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--installed-python", metavar="PATH",
                        help="a Python where expmgr is installed (not editable), with numpy and scikit-learn "
                             "(and torch for --torch-trials); default: build a wheel of this repository and "
                             "install it and them into a fresh venv")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="warm-bench-") as tmp:
        if args.installed_python:
            python = args.installed_python
        else:
            began = time.perf_counter()
            python, _ = install(Path(tmp))
            if args.heavy_trials or args.torch_trials:
                install_workloads(python, bool(args.torch_trials))
            print(f"set-up: a wheel of {REPO} and the workloads' packages installed into a fresh venv in "
                  f"{time.perf_counter() - began:.1f} s")
        print(f"expmgr imported from {module_of(python, 'expmgr')}")
        print(f"load: {os.getloadavg()}; cpus: {os.cpu_count()}; python: {python}")
        for round_ in range(args.rounds):
            base = Path(tmp) / f"round{round_}"
            base.mkdir()
            bare = bare_pool(python, args.trials, args.concurrency)
            bare_gap = gap_floor(python, base, args.trials, args.concurrency)
            cold = run(python, base / "trivial-cold", TRIVIAL, args.trials, args.concurrency, "off")
            warm = run(python, base / "trivial-warm", TRIVIAL, args.trials, args.concurrency, "auto")
            show(f"round {round_ + 1}: {args.trials} trivial trials @{args.concurrency}", cold, warm, bare, bare_gap)
            for name, trial, count, listed in (("sklearn", HEAVY, args.heavy_trials, HEAVY_PRELOAD),
                                               ("torch", TORCH, args.torch_trials, TORCH_PRELOAD)):
                if not count:
                    continue
                cold = run(python, base / f"{name}-cold", trial, count, args.concurrency, "off")
                warm = run(python, base / f"{name}-warm", trial, count, args.concurrency, listed)
                show(f"round {round_ + 1}: {count} {name} trials @{args.concurrency}, warm: listed", cold, warm, None)
                learned = run(python, base / f"{name}-auto", trial, count, args.concurrency, "auto")
                show(f"round {round_ + 1}: {count} {name} trials @{args.concurrency}, warm: auto (learned)",
                     cold, learned, None)
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()

"""Benchmark: what running trials on an SSH host costs per trial, against the local service,
measured in the same run (issue 25: target at most 2x local's per-trial gap).

    python tests/perf/remote_overhead.py [--trials 40] [--concurrency 2] [--rounds 3]

Needs root and Debian's sshd, as the remote tests do: one real OpenSSH server on a loopback
port in its own mount and PID namespace (tests/helpers/ssh_hosts.py), reached by key, its
host key in the client's known_hosts (a HOME of the script's own).

Workload: ``--trials`` trivial trials (Python: get the parameter, report one final result),
``--concurrency`` at a time, on the local service and then on the remote one with one host,
in turn, ``--rounds`` times. Both run the same interpreter, Debian's ``/usr/bin/python3`` (the
hosts' users cannot read this script's, and a ``python3`` found on PATH may be a slow shim). Each trial prints ``time.time()`` at its first line and just
before its exit; the remote trials' stdout comes back to the manager's trial folder, as the
web UI reads it, and the host shares this machine's clock.

Reported per platform (median [min-max] over the rounds) and the median of each round's
remote/local ratio:
- idle gap (median over the run): at concurrency c, the k-th trial to start (k >= c) waited
  for the (k-c)-th trial to end; its gap is from that end to its first line: what a trial
  costs besides its own work (the manager's turnaround, the interpreter's start and exit;
  on the remote service also the agent and the SSH channel both ways);
- whole run, ``start()`` to DONE, and its start-up: ``start()`` to the first trial's first
  line (the remote service connects, checks Python and uploads the runtime and code then).
Not part of the test run (tests/perf is excluded from pytest): it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from tests.helpers.ssh_hosts import HOST_PYTHON, SshHosts, ssh_hosts_unavailable  # noqa: E402

TRIAL = """\
import time
print("first", time.time(), flush=True)
import nni
params = nni.get_next_parameter()
nni.report_final_result(params["x"])
print("last", time.time(), flush=True)
"""


def run_once(platform: str, hosts: SshHosts, root: Path, trials: int, concurrency: int) -> dict[str, float]:
    code = root / "code"
    code.mkdir(exist_ok=True)
    (code / "trial.py").write_text(TRIAL)
    service: dict[str, object] = {"platform": "local"}
    if platform == "remote":
        service = {"platform": "remote", "machineList": [hosts.machine(hosts.hosts[0])]}
    home = Path(tempfile.mkdtemp(dir=root, prefix=f"{platform}-"))
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "randint", "_value": [0, 1_000_000]}},
        trial_command=f"{HOST_PYTHON} trial.py", trial_code_directory=code, trial_concurrency=concurrency,
        max_trial_number=trials, tuner={"name": "Random"}, experiment_working_directory=home,
        training_service=service))
    started = time.time()
    experiment.start(port=0)
    try:
        experiment.wait()
        done = time.time()
    finally:
        experiment.stop()
    if experiment.get_status() != "DONE":
        raise SystemExit(f"{platform}: the experiment ended {experiment.get_status()}: {experiment.get_error()}")
    firsts, lasts = [], []
    for trial in experiment.list_trial_jobs():
        lines = dict(line.split() for line in (experiment.paths.trial_dir(trial.trialJobId) / "stdout")
                     .read_text().splitlines() if line.startswith(("first ", "last ")))
        firsts.append(float(lines["first"]))
        lasts.append(float(lines["last"]))
    firsts.sort()
    lasts.sort()
    gaps = [firsts[k] - lasts[k - concurrency] for k in range(concurrency, len(firsts))]
    return {"gap": statistics.median(gaps), "whole": done - started, "first": firsts[0] - started}


def summary(values: list[float], unit: float = 1000.0) -> str:
    scaled = [v * unit for v in values]
    return f"{statistics.median(scaled):8.1f} [{min(scaled):.1f}-{max(scaled):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.trials <= args.concurrency:
        parser.error("--trials must be more than --concurrency")
    unavailable = ssh_hosts_unavailable()
    if unavailable:
        raise SystemExit(f"cannot run SSH hosts here: {unavailable}")
    root = Path(tempfile.mkdtemp(prefix="remote-overhead-"))
    client_home = root / "client-home"
    (client_home / ".ssh").mkdir(parents=True, mode=0o700)
    os.environ["HOME"] = str(client_home)  # the machine's ~/.ssh and agent play no part
    os.environ.pop("SSH_AUTH_SOCK", None)
    hosts = SshHosts(hidden=[root])
    try:
        hosts.add_host("bench")
        shutil.copy(hosts.known_hosts, client_home / ".ssh" / "known_hosts")
        results: dict[str, list[dict[str, float]]] = {"local": [], "remote": []}
        for round_number in range(args.rounds):
            for platform in ("local", "remote"):
                results[platform].append(run_once(platform, hosts, root, args.trials, args.concurrency))
            print(f"round {round_number + 1}: gap local {results['local'][-1]['gap'] * 1000:.1f} ms, "
                  f"remote {results['remote'][-1]['gap'] * 1000:.1f} ms", flush=True)
    finally:
        hosts.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.trials} trials at concurrency {args.concurrency}, {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'':24}{'local (ms)':>24}{'remote (ms)':>24}{'remote/local':>14}")
    for key, name in (("gap", "idle gap (median)"), ("whole", "whole run"), ("first", "start() to first trial")):
        ratios = [r[key] / l[key] for l, r in zip(results["local"], results["remote"])]
        print(f"{name:24}{summary([r[key] for r in results['local']]):>24}"
              f"{summary([r[key] for r in results['remote']]):>24}{statistics.median(ratios):>13.2f}x")


if __name__ == "__main__":
    main()

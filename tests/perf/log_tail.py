"""Benchmark: ``expctl log stdout <exp> <trial> --tail 10`` on a 2 GiB stdout, against
``tail -n 10`` of the same file (targets: under 1 s and under 100 MiB).

    .venv/bin/python tests/perf/log_tail.py [--size-gib 2] [--rounds 5] [--sparse]

Makes a finished experiment of one trial in a temporary folder (tests/helpers/fill.py), grows
its trial's stdout to ``--size-gib`` GiB of numbered lines (written in 16 MiB blocks; with
``--sparse``, a hole with a few lines at each end instead, which takes no disk), and runs, as
real processes, each ``--rounds`` times:
- ``tail -n 10 stdout`` (coreutils: the baseline);
- ``expctl --version`` (what starting the interpreter and the CLI costs, reading nothing);
- ``expctl log stdout ID TRIAL --tail 10`` and ``--head 10``;
- the same ``--tail 10`` after a rotation, when the 2 GiB file is stdout.1 and stdout holds 3
  lines (the tail goes on into stdout.1).
It prints each one's median and worst wall time (including /usr/bin/time's own start) and
its peak RSS (/usr/bin/time's %M). The temporary folder is removed at the end. It measures, it does not assert.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.helpers.fill import fill_experiment  # noqa: E402

BLOCK = 16 * 2**20
TIME = "/usr/bin/time"


def grow(path: Path, size: int, sparse: bool) -> int:
    """``path`` made ``size`` bytes of numbered lines (or a hole between a few); its line count."""
    with path.open("wb") as file:
        if sparse:
            file.write(b"".join(f"first line {index}\n".encode() for index in range(20)))
            file.truncate(size - 4096)
            file.seek(0, os.SEEK_END)
            tail = b"".join(f"last line {index:06d}\n".encode() for index in range(200))
            file.write(tail)
            return 220
        line_length = 64
        per_block = BLOCK // line_length
        written = 0
        while written < size:
            first = written // line_length
            block = b"".join(f"stdout line {index:012d} {'.' * 34}\n".encode()
                             for index in range(first, first + min(per_block, 1 + (size - written) // line_length)))
            file.write(block)
            written += len(block)
        return written // line_length


def run(command: list[str], env: dict[str, str]) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS in bytes and output of ``command``, run once under
    /usr/bin/time (a process forked from this one would count this one's memory as its own)."""
    with tempfile.NamedTemporaryFile("r") as report:
        started = time.perf_counter()
        result = subprocess.run([TIME, "-f", "%M", "-o", report.name, *command], env=env, capture_output=True)
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): "
                             f"{result.stderr.decode(errors='replace')}")
        peak_kib = int(report.read().split()[-1])
    return elapsed, peak_kib * 1024, result.stdout


def measure(label: str, command: list[str], env: dict[str, str], rounds: int) -> bytes:
    results = [run(command, env) for _ in range(rounds)]
    times = [seconds for seconds, _, _ in results]
    peak = max(rss for _, rss, _ in results)
    print(f"{label:<48} median {statistics.median(times):6.3f} s   worst {max(times):6.3f} s   "
          f"peak RSS {peak / 2**20:6.1f} MiB", flush=True)
    return results[-1][2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sparse", action="store_true", help="a hole with lines at its ends, not lines throughout")
    args = parser.parse_args()
    if not os.path.exists(TIME):
        raise SystemExit(f"{TIME} is needed to measure each process's peak RSS (apt-get install time)")

    folder = Path(tempfile.mkdtemp(prefix="expmgr-log-tail-"))
    try:
        home = folder / "home"
        exp_id = fill_experiment(home, trials=1, metrics_per_trial=1)
        trial_dir = home / exp_id / "trials" / "f0000"
        trial_dir.mkdir(parents=True)
        stdout = trial_dir / "stdout"
        began = time.perf_counter()
        lines = grow(stdout, int(args.size_gib * 2**30), args.sparse)
        print(f"stdout: {stdout.stat().st_size / 2**30:.2f} GiB, {lines:,} lines "
              f"({'sparse' if args.sparse else 'written'} in {time.perf_counter() - began:.1f} s); "
              f"{args.rounds} rounds each", flush=True)
        env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
        expctl = [sys.executable, "-m", "expmgr.cli"]

        expected = measure("tail -n 10 stdout (baseline)", ["tail", "-n", "10", str(stdout)], env, args.rounds)
        measure("expctl --version (start-up, reads nothing)", [*expctl, "--version"], env, args.rounds)
        ours = measure("expctl log stdout ID TRIAL --tail 10", [*expctl, "log", "stdout", exp_id, "f0000", "--tail",
                                                                "10"], env, args.rounds)
        assert ours == expected, "expctl and tail printed different lines"
        measure("expctl log stdout ID TRIAL --head 10", [*expctl, "log", "stdout", exp_id, "f0000", "--head", "10"],
                env, args.rounds)
        os.rename(stdout, trial_dir / "stdout.1")
        stdout.write_bytes(b"after the rotation 1\nafter the rotation 2\nafter the rotation 3\n")
        spanning = measure("  --tail 10, the 2 GiB file now stdout.1", [*expctl, "log", "stdout", exp_id, "f0000",
                                                                        "--tail", "10"], env, args.rounds)
        assert spanning == b"".join(expected.splitlines(keepends=True)[-7:]) + stdout.read_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

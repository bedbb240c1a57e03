"""What an ``nni.*`` record costs with every sink of an experiment process active,
against a plain stdlib logger with one FileHandler (target: at most 1.5x).

    python tests/perf/logging_overhead.py [--records 50000] [--rounds 5]

Our side: stdout (this process's fd 1 pointed at /dev/null, so not a terminal and
written for real) and an experiment.log attached with ``attach_experiment``, with
the experiment pushed as the thread's current one, so the record goes to both.
The baseline: one FileHandler with a formatter of the same shape (time, level,
logger and thread name, message). Both run in alternating rounds; the medians count.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def per_call(logger: logging.Logger, records: int) -> float:
    """Seconds per ``logger.info`` call, over ``records`` calls."""
    began = time.perf_counter()
    for index in range(records):
        logger.info("record %d of %s", index, "the benchmark")
    return (time.perf_counter() - began) / records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    report = os.fdopen(os.dup(1), "w")  # the results; fd 1 itself goes to /dev/null
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)

    from expmgr.log import attach_experiment, pop_experiment, push_experiment

    with tempfile.TemporaryDirectory() as folder:
        attachment = attach_experiment("bench000", Path(folder, "logs", "experiment.log"), "info")
        push_experiment("bench000")
        ours = logging.getLogger("nni.bench")

        plain = logging.getLogger("plain.bench")
        handler = logging.FileHandler(Path(folder, "plain.log"), encoding="utf-8")
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s (%(name)s %(threadName)s) %(message)s",
                                               "%Y-%m-%d %H:%M:%S"))
        plain.addHandler(handler)
        plain.setLevel(logging.INFO)
        plain.propagate = False

        per_call(ours, 2000)  # warm up both
        per_call(plain, 2000)
        ours_times, plain_times = [], []
        for _ in range(args.rounds):
            ours_times.append(per_call(ours, args.records))
            plain_times.append(per_call(plain, args.records))

        lines = sum(1 for _ in open(Path(folder, "logs", "experiment.log"), encoding="utf-8"))
        pop_experiment("bench000")
        attachment.close()
        handler.close()

    expected = 2000 + args.rounds * args.records
    ours_median, plain_median = statistics.median(ours_times), statistics.median(plain_times)
    ratio = ours_median / plain_median
    print(f"nni.* record, stdout + experiment.log: {ours_median * 1e6:6.2f} us/call "
          f"(rounds: {', '.join(f'{t * 1e6:.2f}' for t in ours_times)})", file=report)
    print(f"plain logger, one FileHandler:         {plain_median * 1e6:6.2f} us/call "
          f"(rounds: {', '.join(f'{t * 1e6:.2f}' for t in plain_times)})", file=report)
    print(f"ratio: {ratio:.2f}x (target <= 1.5x); experiment.log lines: {lines} of {expected}", file=report)
    report.flush()
    return 0 if lines == expected else 1


if __name__ == "__main__":
    sys.exit(main())

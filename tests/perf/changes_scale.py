"""Benchmark: the web UI's changes answer at scale, and what a metric costs to store.

    .venv/bin/python tests/perf/changes_scale.py [--trials 10000] [--metrics 20]

Fills a finished experiment with ``--trials`` trials of ``--metrics`` intermediate results
and a final one each (tests/helpers/fill.py), then prints:
- the full changes answer (no cursor) built in-process: time (best of 3) and size;
- the same over HTTP from ``Experiment.view`` (GET /api/v1/expmgr/changes);
- the paged load a UI does (limit 50,000): pages and total time;
- a changes answer since a cursor after one new metric;
- ``add_metric`` (one committed transaction each), with and without a commit listener.
Not part of the test run: it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment  # noqa: E402
from expmgr.layout import ExperimentPaths  # noqa: E402
from expmgr.server.live import changes_answer  # noqa: E402
from expmgr.store import ExperimentProfile, ExperimentStore, MetricRecord, TrialRecord  # noqa: E402
from expmgr.states import ExperimentState, TrialState  # noqa: E402
from expmgr.training import trial_files  # noqa: E402
from tests.helpers.fill import fill_experiment  # noqa: E402


def best_of(rounds: int, function) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return min(times), result


def metric_cost(folder: Path, listener: bool, count: int = 2000) -> float:
    """Microseconds per add_metric, median of 5 rounds."""
    store = ExperimentStore.create(folder / f"metrics-{listener}.sqlite", ExperimentProfile(
        id="bench000", name=None, config={}, status=ExperimentState.RUNNING, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(folder), platform="local", minimizes=False))
    if listener:
        heard = []
        store.add_commit_listener(lambda: heard.append(None))
    store.add_trial(TrialRecord("t1", 0, {"x": 1}, TrialState.WAITING, time.time()))
    store.start_attempt("t1", 1, time.time())
    rounds = []
    for round_number in range(5):
        started = time.perf_counter()
        for sequence in range(round_number * count, (round_number + 1) * count):
            store.add_metric(MetricRecord("t1", 1, sequence, "PERIODICAL", {"default": 0.5, "loss": 1.0}))
        rounds.append((time.perf_counter() - started) / count * 1e6)
    store.close()
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        started = time.perf_counter()
        exp_id = fill_experiment(home, args.trials, args.metrics)
        print(f"store of {args.trials} trials x {args.metrics + 1} metrics filled in "
              f"{time.perf_counter() - started:.1f}s")
        paths = ExperimentPaths(home / exp_id)
        reader = ExperimentStore.open(paths.database, readonly=True)

        took, (text, changes) = best_of(3, lambda: changes_answer(reader, trial_files(paths, "local"), None, None, True))
        print(f"full changes, in-process:    {took:.3f}s  {len(text) / 1e6:.1f} MB")

        def paged() -> int:
            cursor, pages = None, 0
            while True:
                _, page = changes_answer(reader, trial_files(paths, "local"), cursor, 50_000, True)
                cursor, pages = page.cursor, pages + 1
                if not page.more:
                    return pages
        took, pages = best_of(3, paged)
        print(f"full changes, limit 50,000:  {took:.3f}s  in {pages} pages")

        view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
        try:
            def over_http() -> int:
                url = f"http://127.0.0.1:{view.port}/api/v1/expmgr/changes"
                with urllib.request.urlopen(url, timeout=60) as response:
                    return len(response.read())
            took, size = best_of(3, over_http)
            print(f"full changes, over HTTP:     {took:.3f}s  {size / 1e6:.1f} MB")
        finally:
            view.stop()

        writer = ExperimentStore.open(paths.database)
        writer.add_trial(TrialRecord("late", args.trials, {"x": 1}, TrialState.WAITING, time.time()))
        writer.close()
        took, _ = best_of(3, lambda: changes_answer(reader, trial_files(paths, "local"), changes.cursor, None, True))
        print(f"changes since a cursor:      {took * 1000:.1f}ms  (one new trial)")
        reader.close()

        print(f"add_metric: {metric_cost(Path(folder), listener=False):.0f} us without a listener, "
              f"{metric_cost(Path(folder), listener=True):.0f} us with one")


if __name__ == "__main__":
    main()

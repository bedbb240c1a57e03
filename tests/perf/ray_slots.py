"""How well the Ray service keeps its slots busy with short trials (issue 26, item 2): N trials
of about a second at trialConcurrency 4 on the tests' two-node cluster (tests/helpers/ray_cluster.py,
2 + 2 CPUs, one CPU a trial).

    PYTHONPATH=. python tests/perf/ray_slots.py [--trials 200] [--seconds 1.0] [--concurrency 4]

Prints, from the stored attempts (start, end, host of each) and Ray's actor table:
- the share of the run (first start to last end) with `concurrency` trials running at once;
- the nodes the trials ran on;
- the TrialSlot actors the run made (and where Ray placed them);
- the load average before and after, since the machine is shared.
Not part of the test run (tests/perf is excluded from pytest): it measures, it does not assert.
"""
from __future__ import annotations

import argparse
import collections
import os
import sqlite3
import tempfile
import textwrap
import time
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.ray_cluster import RayCluster

TRIAL = """
    import time
    import expmgr
    params = expmgr.get_next_parameter()
    time.sleep({seconds})
    expmgr.report_final_result(params["x"])
"""


def time_at_level(intervals: list[tuple[float, float]], level: int) -> float:
    """Seconds during which at least ``level`` of the intervals overlap."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running, since, total = 0, 0.0, 0.0
    for moment, step in edges:
        if running >= level:
            total += moment - since
        running += step
        since = moment
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="expmgr-ray-slots-") as scratch, RayCluster() as cluster:
        code_dir = Path(scratch) / "code"
        code_dir.mkdir()
        (code_dir / "trial.py").write_text(textwrap.dedent(TRIAL.format(seconds=args.seconds)))
        config = ExperimentConfig(
            search_space={"x": {"_type": "choice", "_value": list(range(args.trials))}},
            trial_command="python3 trial.py", trial_code_directory=code_dir, tuner={"name": "GridSearch"},
            experiment_working_directory=Path(scratch) / "home", max_trial_number=args.trials,
            trial_concurrency=args.concurrency,
            training_service={"platform": "ray", "address": cluster.address, "trialResources": {"cpu": 1}})
        experiment = Experiment(config)
        started = time.monotonic()
        succeeded = experiment.run(port=0)
        took = time.monotonic() - started
        with sqlite3.connect(experiment.paths.database) as db:
            attempts = db.execute("SELECT start_time, end_time, host FROM attempts").fetchall()
        slots = cluster.actors("TrialSlot")
        node_names = {cluster.head_node_id: "head", cluster.worker_node_id: cluster.worker_name}
    intervals = [(start, end) for start, end, _ in attempts if end is not None]
    span = max(end for _, end in intervals) - min(start for start, _ in intervals)
    full = time_at_level(intervals, args.concurrency)
    hosts = collections.Counter(host for _, _, host in attempts)
    placed = collections.Counter(node_names.get(slot["Address"]["NodeID"], "not placed") for slot in slots)
    print(f"{args.trials} trials of {args.seconds:g} s at concurrency {args.concurrency}: "
          f"{'done' if succeeded else 'NOT done'} in {took:.1f} s")
    print(f"  {args.concurrency} running: {full / span:.0%} of the run ({full:.1f} of {span:.1f} s)")
    print(f"  nodes used (attempts): {dict(hosts)}")
    print(f"  slot actors made: {len(slots)} (placed on: {dict(placed)})")
    print(f"  load average before: {' '.join(f'{x:.2f}' for x in load_before)}; "
          f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

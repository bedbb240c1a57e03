"""The time the manager was away (issue 28): the server computes, from the runs a real SQLite
store holds, the gaps between one run's end and the next one's start (over a second) and
their total, and sends them in the experiment view (``managerAway``, ``managerAwaySeconds``:
NNI's profile keys unchanged beside them), as ``GET experiment`` and the changes the web UI
reads answer them; served by ``Experiment.view`` on loopback."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment
from expmgr.store import ExperimentStore
from tests.helpers.fill import experiment_with_runs
from tests.helpers.store import downgrade_to_schema_6

NNI_PROFILE_KEYS = {"id", "revision", "execDuration", "logDir", "nextSequenceId", "params", "startTime", "endTime",
                    "status"}


def get(port: int, route: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=30) as answer:
        return json.loads(answer.read())


def served_views(home: Path, exp_id: str) -> list[dict]:
    """The experiment view of NNI's profile route and of the web UI's changes, as served."""
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        return [get(view.port, "/api/v1/nni/experiment"), get(view.port, "/api/v1/expmgr/changes")["experiment"]]
    finally:
        view.stop()


def test_the_gaps_between_runs_and_their_total_are_in_the_experiment_view(tmp_path: Path):
    home = tmp_path / "home"
    # Away 10 -> 15.5 s (a stop, then a resume), not 20 -> 20.5 s (a second or less is no
    # absence), 30 -> 100 s (a death; the resume ended the dead run at 30 s).
    exp_id, start = experiment_with_runs(home, [(0, 10), (15.5, 20), (20.5, 30), (100, 130)])
    for view in served_views(home, exp_id):
        assert [(gap["from"] - start, gap["to"] - start) for gap in view["managerAway"]] == [
            pytest.approx((10, 15.5)), pytest.approx((30, 100))]
        assert all(set(gap) == {"from", "to"} for gap in view["managerAway"])
        assert view["managerAwaySeconds"] == pytest.approx(5.5 + 70)
        assert view["execDuration"] == 10 + 4.5 + 9.5 + 30, "NNI's duration: the time managers ran, unchanged"
        assert NNI_PROFILE_KEYS <= set(view)


def test_the_wait_of_a_done_experiment_its_manager_served_is_not_away(tmp_path: Path):
    """More trials given to a DONE experiment: the same manager begins the next run, having
    served the experiment all along; only the resume after the stop was away."""
    home = tmp_path / "home"
    exp_id, start = experiment_with_runs(home, [(0, 10), (40, 50), (60, 70)], same_manager=frozenset({1}))
    for view in served_views(home, exp_id):
        assert [(gap["from"] - start, gap["to"] - start) for gap in view["managerAway"]] == [pytest.approx((50, 60))]


def test_a_store_of_version_6_takes_each_earlier_run_for_a_resume(tmp_path: Path):
    home = tmp_path / "home"
    exp_id, start = experiment_with_runs(home, [(0, 10), (40, 50)])
    downgrade_to_schema_6(home / exp_id / "db" / "experiment.sqlite")
    with ExperimentStore.open(home / exp_id / "db" / "experiment.sqlite") as store:   # migrated to 7
        assert [same_manager for _, _, same_manager in store.runs()] == [False, False]
    for view in served_views(home, exp_id):
        assert [(gap["from"] - start, gap["to"] - start) for gap in view["managerAway"]] == [pytest.approx((10, 40))]


def test_a_single_run_was_never_away(tmp_path: Path):
    home = tmp_path / "home"
    exp_id, _ = experiment_with_runs(home, [(0, 40)])
    for view in served_views(home, exp_id):
        assert view["managerAway"] == [] and view["managerAwaySeconds"] == 0
        assert view["execDuration"] == 40


def test_a_run_whose_manager_died_unresumed_is_not_away_yet(tmp_path: Path):
    """A dead run with no end: the time since is counted once a resume ends it where its
    manager was last known alive; the earlier gap is shown meanwhile."""
    home = tmp_path / "home"
    exp_id, start = experiment_with_runs(home, [(0, 10), (25, None)])
    for view in served_views(home, exp_id):
        assert [(gap["from"] - start, gap["to"] - start) for gap in view["managerAway"]] == [pytest.approx((10, 25))]
        assert view["managerAwaySeconds"] == pytest.approx(15)

"""A real experiment with a finished and a running trial, and a tour of every page of its UI
(overview, trials, a running trial, a finished trial, charts, logs) for the tests that check
each page the same way (accessibility, narrow windows).

Use: ``run = mixed_experiment()``, then ``for page in tour_pages(run): visit(ui, run, page)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from playwright.sync_api import expect

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script

MIXED_TRIAL = """
    import os, sys, time
    import expmgr
    params = expmgr.get_next_parameter()
    print(f"trial {params['x']} starts", flush=True)
    print(f"trial {params['x']} warns on stderr", file=sys.stderr, flush=True)
    for step in range(5):
        expmgr.report_intermediate_result(params["x"] * 10 + step)
    gate = os.path.join(os.environ["GATE_DIR"], "release")
    deadline = time.monotonic() + 120
    # x=1 finishes at once; the others run until the test opens the gate.
    while params["x"] != 1 and not os.path.exists(gate) and time.monotonic() < deadline:
        print(f"trial {params['x']} still running", flush=True)
        time.sleep(0.2)
    expmgr.report_final_result(params["x"] * 1.5)
"""


@dataclass
class MixedExperiment:
    """A running experiment: ``finished`` SUCCEEDED, ``running`` RUNNING."""

    experiment: Experiment
    finished: str
    running: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.experiment.port}/"


@dataclass(frozen=True)
class TourPage:
    name: str
    route: str
    """The hash route, e.g. ``#/trials``."""
    ready: Callable[[Any], None]
    """Waits until the page shows its data (given the BrowserPage)."""


def _statuses(experiment: Experiment) -> dict[str, str]:
    return {t.trialJobId: t.status for t in experiment.list_trial_jobs()}


@pytest.fixture
def mixed_experiment(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
                     ) -> Iterator[Callable[[], MixedExperiment]]:
    """Starts (port 0) an experiment of three trials, two at a time: the first finishes at
    once, the others run until the test ends."""
    write_script(code_dir, "trial.py", MIXED_TRIAL)
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gate_dir))
    started: list[Experiment] = []

    def start() -> MixedExperiment:
        experiment = Experiment(ExperimentConfig(
            experiment_name="webui-tour", search_space={"x": {"_type": "choice", "_value": [1, 2, 3]}},
            trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
            max_trial_number=3, tuner={"name": "GridSearch"}, trial_grace_period=1,
            experiment_working_directory=tmp_path / "home"))
        started.append(experiment)
        experiment.start(port=0)

        def both() -> tuple[str, str] | None:
            statuses = _statuses(experiment)
            done = [t for t, s in statuses.items() if s == "SUCCEEDED"]
            running = [t for t, s in statuses.items() if s == "RUNNING"]
            return (done[0], running[0]) if done and running else None

        finished, running = wait_until(both, what="a finished and a running trial")  # type: ignore[misc]
        return MixedExperiment(experiment, finished, running)

    yield start
    (gate_dir / "release").touch()
    for experiment in started:
        experiment.stop()


def tour_pages(run: MixedExperiment) -> list[TourPage]:
    def overview(ui: Any) -> None:
        expect(ui.get("bestResult")).to_have_text("1.5")

    def trials(ui: Any) -> None:
        expect(ui.get("trialFinal", run.finished)).to_have_text("1.5")

    def trial(ui: Any) -> None:
        expect(ui.get("trialDetailState")).to_be_visible()
        expect(ui.get("chartTrialIntermediate")).to_have_attribute("data-rendered", "true")
        expect(ui.get("stdout")).not_to_have_attribute("data-lines", "0")

    def charts(ui: Any) -> None:
        for name in ("chartFinal", "chartIntermediate"):
            expect(ui.get(name)).to_have_attribute("data-rendered", "true")

    def logs(ui: Any) -> None:
        expect(ui.get("experimentLog")).not_to_have_attribute("data-lines", "0")

    return [
        TourPage("overview", "#/overview", overview),
        TourPage("trials", "#/trials", trials),
        TourPage("running-trial", f"#/trials/{run.running}", trial),
        TourPage("finished-trial", f"#/trials/{run.finished}", trial),
        TourPage("charts", "#/charts", charts),
        TourPage("logs", "#/logs", logs),
    ]


def visit(ui: Any, run: MixedExperiment, page: TourPage) -> None:
    """Opens ``page`` and waits until it shows its data."""
    ui.page.goto(run.url + page.route)
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    page.ready(ui)

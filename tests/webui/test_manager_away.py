"""The time the manager was away (issue 28) on the overview: how long in all and how many
times, as the server sends it (``managerAway``, ``managerAwaySeconds``), with when each time
began and ended folded under it; no such line for an experiment whose manager was never
away. Served by ``Experiment.view`` (what ``expctl view`` serves) from stores written as the
runner writes them."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from expmgr import Experiment
from tests.helpers.fill import experiment_with_runs


def shown_span(begun: float, ended: float) -> str:
    """From one epoch time to another as the page shows them (formatTimeSpan: local time, the
    end's date only when it is not the start's)."""
    start, end = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) for t in (begun, ended))
    return f"{start} to {end[11:] if end[:10] == start[:10] else end}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_overview_says_how_long_and_when_the_manager_was_away(ui, tmp_path: Path, scheme: str):
    home = tmp_path / "home"
    # Away from 10 s to 75 s and from 100 s to 220 s: 3m 05s, twice.
    exp_id, start = experiment_with_runs(home, [(0, 10), (75, 100), (220, 240)])
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        ui.page.emulate_media(color_scheme=scheme)
        ui.page.goto(f"http://127.0.0.1:{view.port}/#/overview")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("managerAway")).to_have_text("3m 05s (2 times)")
        expect(ui.get("managerAwayGaps")).to_be_hidden()
        ui.get("managerAway").click()
        expect(ui.get("managerAwayGaps").locator("li")).to_have_text([
            shown_span(start + 10, start + 75), shown_span(start + 100, start + 220)])
        ui.screenshot(f"manager-away-{scheme}")
        assert ui.accessibility_problems() == []
        assert not ui.errors, ui.errors
    finally:
        view.stop()


def test_the_overview_of_an_experiment_whose_manager_was_never_away_has_no_such_line(ui, tmp_path: Path):
    home = tmp_path / "home"
    exp_id, _ = experiment_with_runs(home, [(0, 10), (10.5, 20)])  # resumed at once: no absence
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        ui.page.goto(f"http://127.0.0.1:{view.port}/#/overview")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("duration")).to_have_text("19s")  # execDuration: whole seconds run (10 + 9.5)
        expect(ui.get("managerAway")).to_have_count(0)
        expect(ui.page.get_by_text("Manager away")).to_have_count(0)
        assert not ui.errors, ui.errors
    finally:
        view.stop()

"""The experiments page in Chromium: ``expctl ui``'s home lists 200 experiments (real running,
done, stopped and crashed daemons, and copies of them, one on Ray) and opens each kind as it
should (running: its own live server; ended: read-only, served by the home server; crashed:
said so, with the command that resumes it); stop, resume and delete from the page; and the
same list from an experiment's own UI (#/experiments)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import expect

from expmgr.experiment.home_server import HomeServer
from expmgr.experiment.listening import server_sockets
from expmgr.states import ExperimentState
from tests.helpers.registry_fill import SLEEPING_TRIAL, RegistryFill

LISTED = 200


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RegistryFill, dict[str, str]]]:
    """A running, a done, a stopped and a crashed experiment (real daemons), a copy of the
    done one marked as run on Ray (making a Ray run is not cheap here), and copies of the
    ended ones up to LISTED experiments."""
    root = tmp_path_factory.mktemp("home-page")
    fill = RegistryFill(root / "home", root)
    try:
        ids = {"done": fill.done("quick")}
        ids["stopped"] = fill.daemon(SLEEPING_TRIAL, "halted")
        ids["crashed"] = fill.daemon(SLEEPING_TRIAL, "killed")
        ids["running"] = fill.daemon(SLEEPING_TRIAL, "live")
        for kind in ("stopped", "crashed", "running"):
            fill.running_trials(ids[kind], 2)
        fill.stop(ids["stopped"])
        fill.crash(ids["crashed"])
        ids["ray"] = fill.copy(ids["done"], "onray001", name="on-ray", platform="ray")
        sources = [ids["done"], ids["stopped"], ids["crashed"]]
        for n in range(LISTED - 5):
            fill.copy(sources[n % 3], f"copy{n:04d}", name=f"copy {n}")
        yield fill, ids
    finally:
        fill.kill()


@pytest.fixture
def home_url(registry) -> Iterator[str]:
    fill, _ = registry
    sockets, access = server_sockets(0, "127.0.0.1", "", None)
    server = HomeServer(fill.home, sockets, access)
    server.start()
    yield f"http://127.0.0.1:{server.port}/"
    server.stop()


def test_home_lists_every_experiment_and_opens_each_kind(ui, registry, home_url):
    fill, ids = registry
    ui.page.goto(home_url)
    expect(ui.get("experimentsCount")).to_have_text(str(LISTED))
    expect(ui.page.get_by_role("heading", level=1)).to_contain_text("All experiments")
    expect(ui.get("experimentsTable").locator("tbody tr")).to_have_count(LISTED)
    for kind, state in (("running", "RUNNING"), ("done", "DONE"), ("stopped", "STOPPED"), ("crashed", "CRASHED")):
        expect(ui.get("experimentState", ids[kind])).to_have_text(state)
    crashed_note = ui.get("experimentCrashed", ids["crashed"])
    expect(crashed_note).to_contain_text("Crashed")
    expect(crashed_note).to_contain_text(f"expctl resume {ids['crashed']}")
    expect(ui.get("experimentRow", ids["ray"])).to_contain_text("ray")
    expect(ui.get("experimentRow", ids["done"])).to_contain_text("6 (trial ")  # its best: x = 4 reports 6.0
    expect(ui.get("experimentDelete", ids["running"])).to_have_count(0)  # refused while it runs: not offered
    ui.screenshot("home")
    assert ui.accessibility_problems() == []
    ui.page.set_viewport_size({"width": 480, "height": 800})  # the table scrolls in its box, not the page
    assert ui.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert ui.accessibility_problems() == []
    ui.page.set_viewport_size({"width": 1280, "height": 800})

    # An ended experiment opens read-only, served by the home server.
    for kind in ("done", "crashed"):
        ui.page.goto(home_url)
        ui.get("experimentOpen", ids[kind]).click()
        expect(ui.page).to_have_url(f"{home_url}experiments/{ids[kind]}/")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("experimentId")).to_have_text(ids[kind])
        expect(ui.get("readonlyBadge")).to_be_visible()
        expect(ui.get("controls")).to_have_count(0)

    # A running one opens on its own server, live.
    running = fill.entry(ids["running"])
    ui.page.goto(home_url)
    ui.get("experimentOpen", ids["running"]).click()
    expect(ui.page).to_have_url(f"http://127.0.0.1:{running.port}/")
    expect(ui.get("experimentId")).to_have_text(ids["running"])
    expect(ui.get("liveBadge")).to_be_visible()
    expect(ui.get("status")).to_have_text("RUNNING")
    assert ui.errors == []


def test_stop_resume_and_delete_from_the_home_page(ui, registry, home_url):
    fill, ids = registry
    target = fill.copy(ids["crashed"], "actions1", name="to resume")
    ui.page.goto(home_url)
    expect(ui.get("experimentState", target)).to_have_text("CRASHED")
    try:
        ui.get("experimentResume", target).click()
        expect(ui.get("experimentsMessage")).to_have_text(f"experiment {target} resumed", timeout=120_000)
        expect(ui.get("experimentState", target)).to_have_text("RUNNING")
        expect(ui.get("experimentOpen", target)).to_have_attribute("data-kind", "live")

        ui.get("experimentStop", target).click()
        dialog = ui.get("confirmDialog")
        expect(dialog).to_contain_text(f"Stop experiment to resume ({target})")
        ui.get("confirm").click()
        expect(ui.get("controlMessage")).to_have_text(f"experiment {target} is stopping")
        expect(ui.get("experimentState", target)).to_have_text("STOPPED")
    finally:
        fill.kill(target)
    assert fill.entry(target).status == ExperimentState.STOPPED

    ui.get("experimentDelete", target).click()
    expect(ui.get("confirmDialog")).to_contain_text("cannot be undone")
    ui.get("cancel").click()  # nothing happens without a confirmation
    expect(ui.get("experimentRow", target)).to_have_count(1)
    ui.get("experimentDelete", target).click()
    ui.get("confirm").click()
    expect(ui.get("experimentRow", target)).to_have_count(0)
    assert not (fill.home / target).exists() and fill.registry.get(target) is None
    assert ui.errors == []


def test_an_experiments_own_ui_links_to_the_list_of_its_registry(ui, registry):
    fill, ids = registry
    running = fill.entry(ids["running"])
    ui.page.goto(f"http://127.0.0.1:{running.port}/")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    ui.get("navExperiments").click()
    expect(ui.page).to_have_url(f"http://127.0.0.1:{running.port}/#/experiments")
    expect(ui.get("experimentsCount")).to_have_text(str(len(fill.registry.entries())))
    expect(ui.get("experimentState", ids["crashed"])).to_have_text("CRASHED")
    expect(ui.get("experimentStop", ids["running"])).to_be_visible()
    expect(ui.get("experimentOpen", ids["done"])).to_have_count(0)  # only expctl ui serves ended ones
    expect(ui.get("experimentOpenHint", ids["done"])).to_contain_text("expctl ui")
    assert ui.accessibility_problems() == []
    assert Path(running.dir).is_dir()

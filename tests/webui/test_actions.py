"""What the page does besides showing: add a trial with chosen parameters (a clone of one, or a
new one), edit the search space, download results, logs and the config; and the search space
as a table, the config compact."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

from playwright.sync_api import expect

from tests.helpers.browser import AXE_SCRIPT, AXE_TAGS
from tests.helpers.common import REPO, wait_until
from tests.helpers.webui import running_trials


def element_accessibility_problems(ui, testid: str) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA violations inside the element ``testid``
    (as BrowserPage.accessibility_problems, for the whole page, words them): a form's own,
    whatever the page around it has."""
    if not ui.page.evaluate("() => typeof window.axe !== 'undefined'"):
        ui.page.add_script_tag(path=str(AXE_SCRIPT))
    violations = ui.page.evaluate(
        "([selector, tags]) => axe.run(document.querySelector(selector), {runOnly: {type: 'tag', values: tags},"
        " resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))", [f'[data-testid="{testid}"]', AXE_TAGS])
    return [f"{v['id']} ({v['impact']}): {v['help']} at {', '.join(v['nodes'])}"
            for v in violations if v["impact"] in ("serious", "critical")]


def _added_trial_id(ui) -> str:
    link = ui.get("trialAdded")
    expect(link).to_be_visible()
    return link.get_attribute("href").rsplit("/", 1)[-1]


def test_cloned_trial_with_a_changed_parameter_runs_and_appears_in_the_table(ui, gated_experiment):
    run = gated_experiment(trials=3, concurrency=1)
    [source] = running_trials(run, 1)
    ui.page.goto(run.url + f"#/trials/{source}")
    expect(ui.get("trialDetailState")).to_have_text("RUNNING")

    ui.get("cloneTrial").click()
    form = ui.get("trialForm")
    expect(form).to_be_visible()
    field = ui.get("trialFormParam", "x")
    expect(field.locator("option:checked")).to_have_text("1")   # prefilled from the cloned trial
    assert element_accessibility_problems(ui, "trial-form") == []
    ui.screenshot("clone-form")
    field.select_option(label="3")
    ui.get("trialFormSubmit").click()
    expect(form).to_have_count(0)
    clone = _added_trial_id(ui)
    assert clone != source and clone in run.statuses()
    job = next(t for t in run.experiment.list_trial_jobs() if t.trialJobId == clone)
    assert job.hyperParameters[0].parameters == {"x": 3}

    run.release()
    ui.page.goto(run.url + "#/trials")
    expect(ui.get("trialState", clone)).to_have_text("SUCCEEDED")
    expect(ui.get("trialFinal", clone)).to_have_text("4.5")   # x * 1.5: it ran with x = 3


def test_a_refused_trial_shows_the_servers_message_in_the_form(ui, gated_experiment):
    run = gated_experiment(trials=1, concurrency=1)   # the running trial spends the budget
    running_trials(run, 1)
    ui.page.goto(run.url + "#/trials")
    ui.get("addTrial").click()
    expect(ui.get("trialForm")).to_be_visible()
    expect(ui.get("trialFormParam", "x").locator("option:checked")).to_have_text("(choose)")
    ui.get("trialFormParam", "x").select_option(label="1")
    ui.get("trialFormSubmit").click()
    expect(ui.get("trialFormError")).to_have_text(
        "maxTrialNumber (1) trials were submitted already; raise maxTrialNumber to add one")
    expect(ui.get("trialForm")).to_be_visible()   # the user can fix it or cancel
    ui.screenshot("refused")
    ui.page.keyboard.press("Escape")
    expect(ui.get("trialForm")).to_have_count(0)
    assert list(run.statuses()) and len(run.statuses()) == 1


def _put_search_space(run, space) -> tuple[int, dict]:
    body = json.dumps({"params": {"searchSpace": space}}).encode()
    request = urllib.request.Request(run.url + "api/v1/nni/experiment?update_type=SEARCH_SPACE", data=body,
                                     method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_search_space_edited_on_the_overview_is_saved_or_refused_with_the_servers_message(ui, gated_experiment):
    run = gated_experiment(trials=4, concurrency=1)
    running_trials(run, 1)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("spaceRow", "x")).to_contain_text("1, 2, 3, 4")

    invalid = {"x": {"_type": "uniform", "_value": [1, 0]}}
    ui.get("editSearchSpace").click()
    expect(ui.get("searchSpaceInput")).to_have_value(re.compile(r'"_value": \[1, 2, 3, 4\]'))
    assert element_accessibility_problems(ui, "search-space") == []
    ui.get("searchSpaceInput").fill(json.dumps(invalid))
    ui.get("searchSpaceSave").click()
    status, answer = _put_search_space(run, invalid)
    assert status == 400
    expect(ui.get("searchSpaceError")).to_have_text(answer["error"])
    ui.screenshot("search-space-refused")

    ui.get("searchSpaceInput").fill(json.dumps({"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5]}}))
    ui.get("searchSpaceSave").click()
    expect(ui.get("searchSpaceSaved")).to_be_visible()
    expect(ui.get("spaceRow", "x")).to_contain_text("1, 2, 3, 4, 5")
    assert run.experiment.get_experiment_profile()["params"]["searchSpace"]["x"]["_value"] == [1, 2, 3, 4, 5]


def test_search_space_is_a_table_and_the_config_compact(ui, gated_experiment):
    run = gated_experiment(trials=4, concurrency=1,
                           search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]},
                                         "lr": {"_type": "loguniform", "_value": [0.001, 0.1]},
                                         "depth": {"_type": "randint", "_value": [1, 10]}})
    ui.page.goto(run.url + "#/overview")
    table = ui.get("searchSpaceTable")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(ui.get("spaceRow", "x")).to_have_text("xchoice1, 2, 3, 4")
    expect(ui.get("spaceRow", "lr")).to_have_text("lrloguniform0.001 to 0.1")
    expect(ui.get("spaceRow", "depth")).to_have_text("depthrandint1 to 9 (integers)")
    config = ui.get("config")
    expect(config).to_contain_text('"x": {"_type": "choice", "_value": [1, 2, 3, 4]}')
    ui.screenshot("overview")


def test_results_download_is_the_csv_of_expctl_export(ui, gated_experiment, tmp_path):
    run = gated_experiment(trials=2, concurrency=2)
    run.release()
    wait_until(lambda: set(run.statuses().values()) == {"SUCCEEDED"} and len(run.statuses()) == 2,
               what="two succeeded trials")
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("count", "SUCCEEDED")).to_have_text("2")
    expect(ui.get("status")).to_have_text("DONE")
    expect(ui.get("spaceRow", "x")).to_be_visible()
    expect(ui.get("editSearchSpace")).to_have_count(0)   # ended: the search space is read-only
    with ui.page.expect_download() as download_info:
        ui.get("downloadResultsCsv").click()
    download = download_info.value
    assert download.suggested_filename == f"{run.experiment.id}-results.csv"
    downloaded = download.path().read_bytes()

    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    exported = subprocess.run([sys.executable, "-m", "expmgr.cli", "experiment", "export", run.experiment.id,
                               "--format", "csv"], env=env, capture_output=True, timeout=120, check=True).stdout
    assert downloaded == exported
    lines = downloaded.decode().splitlines()
    assert lines[0] == "trialJobId,x,reward" and sorted(line.split(",")[1:] for line in lines[1:]) == [
        ["1", "1.5"], ["2", "3.0"]]


def test_a_trials_stdout_downloads_whole(ui, gated_experiment):
    run = gated_experiment(trials=1, concurrency=1)
    [trial] = running_trials(run, 1)
    run.release()
    wait_until(lambda: run.statuses()[trial] == "SUCCEEDED", what="the trial to succeed")
    ui.page.goto(run.url + f"#/trials/{trial}")
    expect(ui.get("trialDetailState")).to_have_text("SUCCEEDED")
    expect(ui.get("cloneTrial")).to_have_count(0)   # the experiment takes no more trials
    with ui.page.expect_download() as download_info:
        ui.get("downloadLog").click()
    download = download_info.value
    assert download.suggested_filename == f"{run.experiment.id}-{trial}-stdout.log"
    text = download.path().read_text()
    assert text.startswith("trial 1 starts\n") and text.count("\n") >= 1

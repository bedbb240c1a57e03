"""The analysis views against a real finished experiment (GridSearch over x and y, run to its
end with real trial processes, then served read-only): the key chooser of dict results, the
best trial marked, the top-K card, the importance chart and the compare view."""
from __future__ import annotations

import json
import re
import urllib.request
from typing import Any, Iterator

import pytest
from playwright.sync_api import expect

from expmgr import Experiment, ExperimentConfig
from tests.helpers.browser import load_testids
from tests.helpers.common import write_script

# The final result is a dict: `default` depends on x alone (the 3 trials of x = 5 tie for the
# best), `loss` mostly on y (and a little on x, so that no two are equal).
ANALYSED_TRIAL = """
    import expmgr
    params = expmgr.get_next_parameter()
    x, y = params["x"], params["y"]
    for step in range(3):
        expmgr.report_intermediate_result(x * (step + 1) + y * 0.1)
    expmgr.report_final_result({"default": x * 1.5, "loss": 10 - y - x * 0.1})
"""


class Finished:
    """A finished experiment served read-only, and what the server says about it."""

    def __init__(self, view: Experiment) -> None:
        self.view = view
        self.url = f"http://127.0.0.1:{view.port}/"

    def get(self, route: str) -> Any:
        with urllib.request.urlopen(self.url + route, timeout=30) as response:
            return json.loads(response.read())

    def finals(self) -> dict[str, dict[str, float]]:
        return {t["trialJobId"]: json.loads(json.loads(t["finalMetricData"][0]["data"]))
                for t in self.get("api/v1/nni/trial-jobs")}

    def params(self) -> dict[str, dict[str, int]]:
        return {t["trialJobId"]: json.loads(t["hyperParameters"][0])["parameters"]
                for t in self.get("api/v1/nni/trial-jobs")}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    root = tmp_path_factory.mktemp("analysis")
    code = root / "code"
    code.mkdir()
    write_script(code, "trial.py", ANALYSED_TRIAL)
    home = root / "home"
    experiment = Experiment(ExperimentConfig(
        experiment_name="analysis", trial_command="python3 trial.py", trial_code_directory=code,
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5]},
                      "y": {"_type": "choice", "_value": [1, 2, 3]}},
        trial_concurrency=3, max_trial_number=15, tuner={"name": "GridSearch"}, experiment_working_directory=home))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=300), "the experiment did not finish"
    finally:
        experiment.stop()
    view = Experiment.view(experiment.id, port=0, non_blocking=True, home=home)
    try:
        yield Finished(view)
    finally:
        view.stop()


def _open(ui: Any, url: str) -> None:
    ui.page.goto(url)
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")


def test_key_chooser_changes_the_tables_result_column_and_is_kept_in_the_address(ui, finished: Finished):
    finals = finished.finals()
    trial_id = sorted(finals)[0]
    _open(ui, finished.url + "#/trials")
    cell = ui.get("trialFinal", trial_id)
    expect(cell).to_have_text(_shown(finals[trial_id]["default"]))

    ui.get("keyChooser").select_option("loss")

    expect(cell).to_have_text(_shown(finals[trial_id]["loss"]))
    assert "key=loss" in ui.page.url
    ui.screenshot("result-key-loss")
    # the address shows the same to someone it is sent to
    ui.page.goto("about:blank")
    _open(ui, finished.url + "#/trials?key=loss")
    expect(ui.get("keyChooser")).to_have_value("loss")
    expect(ui.get("trialFinal", trial_id)).to_have_text(_shown(finals[trial_id]["loss"]))


def test_best_trial_is_marked_in_the_table_on_its_page_and_in_the_final_results_chart(ui, finished: Finished):
    best = finished.get("api/v1/nni/experiment")["bestTrialId"]
    other = next(trial_id for trial_id in finished.finals() if trial_id != best)
    _open(ui, finished.url + "#/trials")
    expect(ui.get("bestMark")).to_have_count(1)
    expect(ui.get("trialRow", best).get_by_test_id(load_testids()["bestMark"])).to_be_visible()
    ui.screenshot("best-in-table")

    ui.page.goto(finished.url + f"#/trials/{best}")
    expect(ui.get("trialBestBadge")).to_be_visible()
    ui.page.goto(finished.url + f"#/trials/{other}")
    expect(ui.get("trialDetailId")).to_have_text(other)
    expect(ui.get("trialBestBadge")).to_have_count(0)

    ui.page.goto(finished.url + "#/charts")
    expect(ui.get("chartFinal")).to_have_attribute("data-best", best)
    expect(ui.get("chartFinal")).to_have_attribute("data-rendered", "true")


def test_top_k_card_lists_the_k_best_trials_under_the_chosen_key_in_order(ui, finished: Finished):
    finals = finished.finals()
    by_loss = sorted(finals, key=lambda trial_id: -finals[trial_id]["loss"])  # GridSearch maximizes
    _open(ui, finished.url + "#/overview")
    expect(ui.get("topTrials").locator("tbody tr")).to_have_count(10)  # K is 10 at first

    ui.get("topTrials").get_by_test_id("key-chooser").select_option("loss")
    ui.get("topK").fill("3")

    rows = ui.get("topTrials").locator("tbody tr")
    expect(rows).to_have_count(3)
    for rank, trial_id in enumerate(by_loss[:3], start=1):
        expect(ui.get("topTrial", str(rank))).to_have_attribute("data-trial", trial_id)
    ui.get("topK").fill("5")
    expect(rows).to_have_count(5)
    assert [ui.get("topTrial", str(rank)).get_attribute("data-trial") for rank in range(1, 6)] == by_loss[:5]
    ui.screenshot("top-k")


def test_importance_chart_ranks_the_parameter_the_result_depends_on_first(ui, finished: Finished):
    _open(ui, finished.url + "#/charts")
    panel = ui.get("importancePanel")
    panel.scroll_into_view_if_needed()
    expect(ui.get("chartImportance")).to_have_attribute("data-rendered", "true")
    expect(ui.get("chartImportance")).to_have_attribute("data-points", "2")
    expect(panel.locator("tbody tr").first).to_have_attribute("data-testid", "importance-param-x")
    assert float(ui.get("importanceParam", "x").locator("td").inner_text()) > 0.9
    ui.screenshot("importance")
    # under `loss` y matters most
    ui.get("keyChooser").select_option("loss")
    expect(panel.locator("tbody tr").first).to_have_attribute("data-testid", "importance-param-y")


def test_compare_view_opens_from_the_tables_selection_and_refuses_more_than_ten(ui, finished: Finished):
    params = finished.params()
    # three trials of the same y and different x
    chosen = sorted((trial_id for trial_id, p in params.items() if p["y"] == 2), key=lambda t: params[t]["x"])[:3]
    _open(ui, finished.url + "#/trials")
    ui.get("selectTrial", chosen[0]).check()
    ui.get("selectTrial", chosen[1]).focus()
    ui.page.keyboard.press("Space")  # by keyboard too
    expect(ui.get("selectTrial", chosen[1])).to_be_checked()
    ui.get("selectTrial", chosen[2]).check()
    expect(ui.get("selectionCount")).to_have_text("3")

    ui.get("compareSelected").click()

    expect(ui.get("comparePage")).to_be_visible()
    assert re.search(r"#/compare/" + ",".join(map(re.escape, chosen)) + r"$", ui.page.url), ui.page.url
    expect(ui.get("compareParam", "x")).to_have_attribute("data-differs", "true")
    expect(ui.get("compareParam", "y")).to_have_attribute("data-differs", "false")
    finals = finished.finals()
    for trial_id in chosen:
        expect(ui.get("compareFinal", trial_id)).to_have_text(_shown(finals[trial_id]["default"]))
    expect(ui.get("chartCompare")).to_have_attribute("data-rendered", "true")
    expect(ui.get("chartCompare")).to_have_attribute("data-points", "9")  # 3 intermediate results each
    ui.screenshot("compare")
    assert ui.accessibility_problems() == []

    eleven = ",".join(list(params)[:11])
    ui.page.goto(finished.url + f"#/compare/{eleven}")
    expect(ui.get("compareError")).to_have_text(
        "Compare takes 2 to 10 trials; 11 were given. Select at most 10.")
    expect(ui.get("compareTable")).to_have_count(0)


def _shown(number: float) -> str:
    """A number as the table shows it (formatNumber: up to 6 significant digits)."""
    text = f"{number:.6g}"
    return text[:-2] if text.endswith(".0") else text

"""Papercuts of the web UI (issue 22), each as a user meets it, against one finished experiment
of real trials: durations below a second, sort and filters in the address, the first sort by
result under minimize, state counts that open the filtered table, a failed trial's page and
result, choice parameters in parallel coordinates, the any-of filter, hints and empty logs."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

import pytest
from playwright.sync_api import expect

from expmgr import Experiment, ExperimentConfig
from tests.helpers.browser import load_testids
from tests.helpers.common import write_script
from tests.helpers.server import get

# Each trial reports two intermediate results and a final one (lower is better), but batch 64
# with sgd, which writes why to stderr and fails after its intermediate results.
MIXED_TRIAL = """
    import sys, time
    import expmgr
    p = expmgr.get_next_parameter()
    expmgr.report_intermediate_result(p["batch"] * 2)
    expmgr.report_intermediate_result(p["batch"] * 3)
    time.sleep(0.3)
    if p["batch"] == 64 and p["opt"] == "sgd":
        print("out of memory at batch 64", file=sys.stderr, flush=True)
        sys.exit(1)
    expmgr.report_final_result(p["batch"] / 10 + (0.5 if p["opt"] == "sgd" else 0))
"""
BATCHES = [8, 16, 32, 64]


class Mixed:
    """The finished experiment's address and its trials' facts as the server has them."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self.url = f"http://127.0.0.1:{experiment.port}/"
        self.trials = {t.trialJobId: t for t in experiment.list_trial_jobs()}
        self.params = {i: t.hyperParameters[0].parameters for i, t in self.trials.items()}

    def ids(self, status: str) -> list[str]:
        return sorted(i for i, t in self.trials.items() if t.status == status)

    def finals(self) -> dict[str, float]:
        return {r.trialJobId: r.value for r in self.experiment.export_data()}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mixed]:
    """A DONE experiment (GridSearch, minimize) of 8 trials over batch (a numeric choice) and opt,
    one FAILED; its server stays (read-only) until the module's tests are done."""
    root = tmp_path_factory.mktemp("mixed")
    code = root / "code"
    code.mkdir()
    write_script(code, "trial.py", MIXED_TRIAL)
    experiment = Experiment(ExperimentConfig(
        experiment_name="papercuts",
        search_space={"batch": {"_type": "choice", "_value": BATCHES}, "opt": {"_type": "choice", "_value": ["adam", "sgd"]}},
        trial_command="python3 trial.py", trial_code_directory=code, trial_concurrency=4, max_trial_number=8,
        tuner={"name": "GridSearch", "class_args": {"optimize_mode": "minimize"}}, trial_grace_period=1,
        experiment_working_directory=root / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
        yield Mixed(experiment)
    finally:
        experiment.stop()


def rows(ui):
    return ui.page.locator(f'[data-testid^="{load_testids()["trialRowPrefix"]}"]')


def shown_ids(ui) -> list[str]:
    prefix = load_testids()["trialRowPrefix"]
    return [t[len(prefix):] for t in rows(ui).evaluate_all("rows => rows.map(r => r.dataset.testid)")]


def open_table(ui, url: str) -> None:
    ui.page.goto(url)
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("trialsCount")).to_have_text("8")


def test_durations_below_ten_seconds_read_with_two_significant_digits_not_whole_seconds(ui, mixed: Mixed):
    open_table(ui, mixed.url + "#/trials")
    trial_id = mixed.ids("SUCCEEDED")[0]
    # about 0.3 s of sleep and Python's start: "0.65s", "1.4s" (whole seconds would read "0s" or "1s")
    expect(ui.get("trialDuration", trial_id)).to_have_text(re.compile(r"^(\d\.\d+s|\d+ms)$"))
    in_table = ui.get("trialDuration", trial_id).inner_text()
    ui.get("trialRow", trial_id).click()
    expect(ui.get("trialDuration")).to_have_text(in_table)
    # the server's duration (its attempts' seconds, not the rounded milliseconds of startTime/endTime:
    # 0.555 from those read "0.56s" where the server's 0.5549 reads "0.55s")
    seconds = get(mixed.experiment.port, f"/api/v1/expmgr/trials/{trial_id}")["duration"]
    # two significant digits, a trailing zero kept ("0.60s")
    assert in_table == (f"{seconds:#.2g}s" if seconds >= 0.01 else f"{round(seconds * 1000)}ms"), (in_table, seconds)


def test_sort_and_filters_are_in_the_address_so_back_and_a_shared_link_restore_them(ui, mixed: Mixed):
    open_table(ui, mixed.url + "#/trials")
    ui.get("sort", "final").click()
    ui.get("filterState", "SUCCEEDED").check()
    ui.get("filterParam", "opt").fill("adam")
    expect(ui.get("trialsShown")).to_have_text("4")
    expect(ui.page).to_have_url(re.compile(r"#/trials\?.*sort=final"))
    before = shown_ids(ui)
    address = ui.page.url
    assert "state=SUCCEEDED" in address and "p.opt=adam" in unquote(address), address

    rows(ui).first.click()
    expect(ui.get("trialDetail")).to_be_visible()
    ui.page.go_back()
    expect(ui.get("trialsShown")).to_have_text("4")
    expect(ui.get("filterParam", "opt")).to_have_value("adam")
    expect(ui.get("filterState", "SUCCEEDED")).to_be_checked()
    assert shown_ids(ui) == before

    # the same address in a new page (as a shared link) shows the same rows in the same order
    ui.page.goto(mixed.url + "#/overview")
    expect(ui.get("overview")).to_be_visible()
    ui.page.goto(address)
    expect(ui.get("trialsShown")).to_have_text("4")
    assert shown_ids(ui) == before


def test_the_first_click_on_result_sorts_the_best_first_under_minimize(ui, mixed: Mixed):
    finals = mixed.finals()
    open_table(ui, mixed.url + "#/trials")
    ui.get("sort", "final").click()
    expect(ui.page).to_have_url(re.compile(r"sort=final&dir=asc"))
    ordered = shown_ids(ui)
    with_final = [i for i in ordered if i in finals]
    assert with_final[0] == min(finals, key=finals.get), "the lowest (best) result first"
    assert [finals[i] for i in with_final] == sorted(finals.values())


def test_a_state_count_on_the_overview_opens_the_table_of_that_state(ui, mixed: Mixed):
    [failed] = mixed.ids("FAILED")
    ui.page.goto(mixed.url + "#/overview")
    expect(ui.get("count", "FAILED")).to_have_text("1")
    ui.get("count", "FAILED").click()
    expect(ui.page).to_have_url(re.compile(r"#/trials\?state=FAILED$"))
    expect(ui.get("trialsShown")).to_have_text("1")
    expect(ui.get("filterState", "FAILED")).to_be_checked()
    assert shown_ids(ui) == [failed]


def test_a_failed_trial_opens_on_its_stderr_and_its_last_intermediate_result_is_not_shown_as_running(ui, mixed: Mixed):
    [failed] = mixed.ids("FAILED")
    open_table(ui, mixed.url + "#/trials")
    cell = ui.get("trialFinal", failed)
    expect(cell).to_have_text(re.compile(r"^192"))   # 64 * 3, its last intermediate result
    marked = cell.locator("span")
    expect(marked).to_have_attribute("title", re.compile("ended without a final result"))
    assert marked.evaluate("e => getComputedStyle(e).fontStyle") == "normal", "italics are for running trials"

    ui.get("trialRow", failed).click()
    expect(ui.get("trialDetailState")).to_have_text("FAILED")
    expect(ui.get("tabStderr")).to_have_class(re.compile(r"\bactive\b"))
    expect(ui.get("stderr")).to_contain_text("out of memory at batch 64")
    expect(ui.get("trialLatest")).to_contain_text("no final result")


def test_a_numeric_choice_is_a_category_axis_of_exactly_its_values_in_parallel_coordinates(ui, mixed: Mixed):
    ui.page.goto(mixed.url + "#/charts")
    chart = ui.get("chartParallel")
    # batch's axis lists its four values, not a range from 0 to 70
    expect(chart).to_have_attribute("data-summary", re.compile(r"^batch: category 8\|16\|32\|64; opt: category adam\|sgd; "))
    chart.scroll_into_view_if_needed()
    expect(chart).to_have_attribute("data-rendered", "true")


def test_an_any_of_filter_keeps_equal_values_and_a_text_column_gets_a_text_hint(ui, mixed: Mixed):
    open_table(ui, mixed.url + "#/trials")
    ui.get("filterParam", "batch").fill("6|8")   # "contains" would keep 16 and 64 too
    expect(ui.get("trialsShown")).to_have_text("2")
    assert {mixed.params[i]["batch"] for i in shown_ids(ui)} == {8}
    expect(ui.get("filterParam", "batch")).to_have_attribute("placeholder", re.compile(r">0\.1"))
    placeholder = ui.get("filterParam", "opt").get_attribute("placeholder")
    assert placeholder and ".." not in placeholder and ">" not in placeholder, placeholder
    ui.get("filterParam", "opt").fill("adam|sgd")
    expect(ui.get("trialsShown")).to_have_text("2")


def test_an_empty_log_says_so_once_inside_its_box(ui, mixed: Mixed):
    succeeded = mixed.ids("SUCCEEDED")[0]
    ui.page.goto(mixed.url + f"#/trials/{succeeded}")
    expect(ui.get("trialDetailState")).to_have_text("SUCCEEDED")
    ui.get("tabStderr").click()
    expect(ui.get("logEmpty")).to_have_text("Nothing written to stderr yet.")
    expect(ui.page.get_by_text("(empty)")).to_have_count(0)
    box = ui.get("stderr").bounding_box()
    note = ui.get("logEmpty").bounding_box()
    assert box and note and box["y"] <= note["y"] and note["y"] + note["height"] <= box["y"] + box["height"], \
        "the note is inside the empty box, not under it"

"""The web UI at scale: a finished experiment of 10,000 trials with 20 intermediate
results each, served read-only (``Experiment.view``) and opened in headless Debian
Chromium through Playwright.

Reports, from the start of each page's navigation: the time to the trials table's first
rows and to all 10,000 trials in it (sortable, filterable: usable), the time to the
first chart with data and to all four charts with every trial; the bytes transferred
(HTTP and websocket, as on the wire); and the frame times (requestAnimationFrame deltas
collected in the page) while the table is scrolled to its end with the mouse wheel.
Targets: all trials in the table <= 1.5 s, no frame over 50 ms::

    .venv/bin/python tests/perf/webui_scale.py [--trials 10000] [--metrics 20] [--keep DIR]

Not part of the test run (tests/perf is excluded from pytest).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from expmgr.layout import ExperimentPaths  # noqa: E402
from expmgr.store.registry import Registry, RegistryEntry  # noqa: E402
from expmgr.store import ExperimentProfile, ExperimentStore, MetricRecord, TrialRecord  # noqa: E402
from expmgr.states import ExperimentState, TrialState  # noqa: E402
from tests.helpers.browser import CHROMIUM_FLAGS, load_testids  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
EXP_ID = "scale0001"
CHARTS = ["chartFinal", "chartIntermediate", "chartParallel", "chartDurations"]
WHEEL_PX = 1200
"""One turn of the mouse wheel while scrolling: about 40 rows."""
TABLE_TARGET_S = 1.5
FRAME_TARGET_MS = 50.0
SEARCH_SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-5, 1e-1]},
    "batch_size": {"_type": "choice", "_value": [16, 32, 64, 128, 256]},
    "dropout": {"_type": "uniform", "_value": [0.0, 0.6]},
    "optimizer": {"_type": "choice", "_value": ["sgd", "adam", "adamw"]},
    "layers": {"_type": "randint", "_value": [1, 9]},
}
ENDINGS = [TrialState.SUCCEEDED] * 90 + [TrialState.FAILED] * 5 + [TrialState.EARLY_STOPPED] * 4 + \
    [TrialState.USER_CANCELED]


def fill_store(home: Path, trials: int, metrics: int, seed: int = 0) -> str:
    """Create a finished experiment under ``home`` through the store API; its id."""
    rng = random.Random(seed)
    exp_id = EXP_ID
    paths = ExperimentPaths(home / exp_id)
    paths.create()
    config = ExperimentConfig(
        experiment_name=f"webui scale: {trials} trials x {metrics} results", search_space=SEARCH_SPACE,
        trial_command="python3 train.py", trial_code_directory=home, trial_concurrency=8,
        max_trial_number=trials, tuner={"name": "Random"}, experiment_working_directory=home,
    ).canonical()
    paths.config_file.write_text(config.to_yaml(), encoding="utf-8")
    start = time.time() - trials * 6.0
    store = ExperimentStore.create(paths.database, ExperimentProfile(
        id=exp_id, name=config.experiment_name, config=config.to_dict(), status=ExperimentState.RUNNING,
        error=None, start_time=start, end_time=None, port=None, log_dir=str(paths.root),
        platform="local", minimizes=config.minimizes))
    now = start
    for sequence in range(trials):
        trial_id = f"t{sequence:05d}"
        params = {"lr": math.exp(rng.uniform(math.log(1e-5), math.log(1e-1))),
                  "batch_size": rng.choice([16, 32, 64, 128, 256]), "dropout": rng.uniform(0, 0.6),
                  "optimizer": rng.choice(["sgd", "adam", "adamw"]), "layers": rng.randint(1, 8)}
        quality = 1 - abs(math.log10(params["lr"]) + 3) / 3 - params["dropout"] / 3
        store.add_trial(TrialRecord(trial_id, sequence, params, TrialState.WAITING, submit_time=now))
        store.start_attempt(trial_id, 1, now, pid=None)
        ending = rng.choice(ENDINGS)
        reported = metrics if ending == TrialState.SUCCEEDED else rng.randint(1, metrics)
        for step in range(reported):
            value = quality * (1 - math.exp(-(step + 1) / 5)) + rng.gauss(0, 0.01)
            store.add_metric(MetricRecord(trial_id, 1, step, "PERIODICAL", value, time=now + step * 0.25))
        duration = reported * 0.25 + rng.uniform(0.5, 3.0)
        if ending == TrialState.SUCCEEDED:
            store.add_metric(MetricRecord(trial_id, 1, reported, "FINAL", value, time=now + duration))
        store.end_attempt(trial_id, 1, ending, now + duration, exit_code=0 if ending == TrialState.SUCCEEDED
                          else 1 if ending == TrialState.FAILED else None,
                          signal=None if ending in (TrialState.SUCCEEDED, TrialState.FAILED) else 15)
        now += duration / 8
    store.set_experiment_status(ExperimentState.DONE, end_time=now)
    store.close()
    Registry(home).add(RegistryEntry(id=exp_id, name=config.experiment_name, dir=str(paths.root), port=None,
                                     pid=None, status=ExperimentState.DONE, start_time=start, end_time=now))
    return exp_id


@dataclass
class Figures:
    first_rows_s: float
    table_s: float
    first_chart_s: float
    charts_s: float
    bytes_table: int
    bytes_chart: int
    frames: list[tuple[float, float]]
    """(frame time in ms, ms since the scroll started), one per frame."""
    baseline: list[tuple[float, float]]
    """The same of a static page scrolled as far (see baseline_frames)."""
    scroll_s: float
    table_breakdown: str
    chart_breakdown: str


MILESTONES = """(cfg) => {
    // Runs in every page from its start: notes, on each animation frame, when each of
    // these first held, in ms since the navigation started (performance.now()).
    window.__milestones = {};
    const mark = (name) => { window.__milestones[name] ??= performance.now(); };
    const drawn = (id) => document.querySelector(`[data-testid="${id}"][data-rendered="true"]`);
    const tick = () => {
        const table = document.querySelector(`[data-testid="${cfg.table}"]`);
        if (table && table.querySelector(`[data-testid^="${cfg.rowPrefix}"]`)) {
            mark('firstRows');
            if (Number(table.dataset.total) === cfg.total) mark('allRows');
        }
        const charts = cfg.charts.map(drawn);
        if (charts.some((el) => el && Number(el.dataset.points) > 0)) mark('firstChart');
        if (charts.every(Boolean) && Number(drawn(cfg.durations)?.dataset.points) === cfg.total) mark('allCharts');
        requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
}"""

LAST_ROW_SHOWN = """([table, rowPrefix, total]) =>
    !!document.querySelector(`[data-testid="${table}"] [data-testid^="${rowPrefix}"][data-index="${total - 1}"]`)"""

FRAME_RECORDER = """() => {
    window.__frames = [];
    window.__stopFrames = false;
    const start = performance.now();
    let last = start;
    const tick = (now) => {
        window.__frames.push([now - last, now - start]);
        last = now;
        if (!window.__stopFrames) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
}"""


class ByteCounter:
    """Bytes received by the page, as on the wire: HTTP responses (headers and bodies,
    from the DevTools protocol's Network.loadingFinished) and websocket frames."""

    def __init__(self, context: Any, page: Any) -> None:
        self.http = 0
        self.websocket = 0
        self.by_url: dict[str, int] = {}
        self._urls: dict[str, str] = {}
        session = context.new_cdp_session(page)
        session.send("Network.enable")
        session.on("Network.responseReceived", self._response)
        session.on("Network.loadingFinished", self._http)
        session.on("Network.webSocketFrameReceived", self._frame)

    @property
    def total(self) -> int:
        return self.http + self.websocket

    def _response(self, event: dict[str, Any]) -> None:
        self._urls[event["requestId"]] = event["response"]["url"].split("//", 1)[-1].split("/", 1)[-1]

    def _http(self, event: dict[str, Any]) -> None:
        size = int(event.get("encodedDataLength", 0))
        self.http += size
        url = "/" + self._urls.get(event["requestId"], "?").split("?")[0]
        self.by_url[url] = self.by_url.get(url, 0) + size

    def _frame(self, event: dict[str, Any]) -> None:
        self.websocket += len(event["response"].get("payloadData", "").encode())

    def breakdown(self) -> str:
        largest = sorted(self.by_url.items(), key=lambda item: -item[1])[:4]
        parts = [f"{url} {size / 1e6:.2f}" for url, size in largest]
        return f"websocket {self.websocket / 1e6:.2f}, " + ", ".join(parts)


def measure(url: str, trials: int, testids: dict[str, str], shots: Path | None) -> Figures:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="webui-scale-profile-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1440, "height": 900})
        context.set_default_timeout(120_000)
        try:
            watched = {"table": testids["trialsTable"], "rowPrefix": testids["trialRowPrefix"], "total": trials,
                       "charts": [testids[name] for name in CHARTS], "durations": testids["chartDurations"]}
            context.add_init_script(f"({MILESTONES})({json.dumps(watched)})")
            page = context.pages[0] if context.pages else context.new_page()
            counter = ByteCounter(context, page)
            page.goto(url + "#/trials")
            page.wait_for_function("() => window.__milestones?.allRows !== undefined", polling="raf")
            first_rows_s, table_s = page.evaluate("[window.__milestones.firstRows, window.__milestones.allRows]")
            page.wait_for_load_state("networkidle")
            bytes_table = counter.total
            table_breakdown = counter.breakdown()
            if shots:
                page.screenshot(path=str(shots / "scale-trials.png"))

            frames, scroll_s, wheels = scroll_to_end(page, testids, trials)
            baseline = baseline_frames(context, wheels)
            if shots:
                page.screenshot(path=str(shots / "scale-trials-end.png"))

            chart_page = context.new_page()
            chart_counter = ByteCounter(context, chart_page)
            chart_page.goto(url + "#/charts")
            chart_page.wait_for_function("() => window.__milestones?.allCharts !== undefined", polling="raf")
            first_chart_s, charts_s = chart_page.evaluate(
                "[window.__milestones.firstChart, window.__milestones.allCharts]")
            chart_page.wait_for_load_state("networkidle")
            bytes_chart = chart_counter.total
            chart_breakdown = chart_counter.breakdown()
            if shots:
                chart_page.wait_for_timeout(1000)  # let the charts' entry animation finish for the picture
                chart_page.screenshot(path=str(shots / "scale-charts.png"))
        finally:
            context.close()
    return Figures(first_rows_s / 1000, table_s / 1000, first_chart_s / 1000, charts_s / 1000, bytes_table,
                   bytes_chart, frames, baseline, scroll_s, table_breakdown, chart_breakdown)


def scroll_to_end(page: Any, testids: dict[str, str], trials: int) -> tuple[list[tuple[float, float]], float, int]:
    """Scroll the trials table to its last row with the mouse wheel, recording frame times;
    (frames, seconds, wheel turns)."""
    scroller = page.get_by_test_id(testids["trialsScroll"])
    box = scroller.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.evaluate(FRAME_RECORDER)
    started = time.monotonic()
    at_end = "(el) => el.scrollTop + el.clientHeight >= el.scrollHeight - 2"
    wheels = 0
    while not scroller.evaluate(at_end):
        page.mouse.wheel(0, WHEEL_PX)
        wheels += 1
        if time.monotonic() - started > 300:
            raise SystemExit("the trials table did not reach its end within 300 s of scrolling")
    # The last row must be shown, not an empty stretch of a virtual list.
    page.wait_for_function(LAST_ROW_SHOWN, arg=[testids["trialsTable"], testids["trialRowPrefix"], trials],
                           polling="raf")
    scroll_s = time.monotonic() - started
    frames = page.evaluate("() => { window.__stopFrames = true; return window.__frames; }")
    return frames[1:], scroll_s, wheels


def baseline_frames(context: Any, wheels: int) -> list[tuple[float, float]]:
    """Frame times of a static page scrolled the same way: what this machine and headless
    Chromium give without the UI (frames dropped here are not the UI's)."""
    page = context.new_page()
    page.set_content("<body style='margin:0'>" + "".join(f"<p>line {i}</p>" for i in range(20_000)) + "</body>")
    page.mouse.move(400, 400)
    page.evaluate(FRAME_RECORDER)
    for _ in range(wheels):
        page.mouse.wheel(0, WHEEL_PX)
        page.evaluate("document.scrollingElement.scrollTop")
    frames = page.evaluate("() => { window.__stopFrames = true; return window.__frames; }")
    page.close()
    return frames[1:]


def frame_figures(frames: list[tuple[float, float]]) -> tuple[str, str]:
    """'mean / p95 / max ms' and the frames over the target, with when they came."""
    times = sorted(frame for frame, _ in frames)
    over = [f"{frame:.0f} ms at {at / 1000:.1f} s" for frame, at in frames if frame > FRAME_TARGET_MS]
    summary = f"{statistics.mean(times):.1f} / {times[int(len(times) * 0.95)]:.1f} / {times[-1]:.1f} ms"
    return summary, ("ok" if not over else f"{len(over)} over {FRAME_TARGET_MS:.0f} ms: " + ", ".join(over[:6]))


def report(figures: Figures, trials: int, metrics: int) -> None:
    frames, frames_verdict = frame_figures(figures.frames)
    baseline, baseline_verdict = frame_figures(figures.baseline)
    rows = [
        ("trials x intermediate results", f"{trials} x {metrics}", ""),
        ("trials page: first rows shown", f"{figures.first_rows_s:.2f} s", ""),
        (f"trials page: all {trials} trials in the table", f"{figures.table_s:.2f} s",
         "ok" if figures.table_s <= TABLE_TARGET_S else f"over the {TABLE_TARGET_S} s target"),
        ("charts page: first chart with data", f"{figures.first_chart_s:.2f} s", ""),
        ("charts page: all four charts, all trials", f"{figures.charts_s:.2f} s", ""),
        ("bytes transferred, trials page (until idle)", f"{figures.bytes_table / 1e6:.2f} MB",
         figures.table_breakdown),
        ("bytes transferred, charts page (until idle)", f"{figures.bytes_chart / 1e6:.2f} MB",
         figures.chart_breakdown),
        ("scrolling the table to its end", f"{figures.scroll_s:.1f} s, {len(figures.frames)} frames", ""),
        ("frame time mean / p95 / max", frames, frames_verdict),
        ("the same on a static page (baseline)", baseline, baseline_verdict),
    ]
    width = max(len(name) for name, _, _ in rows)
    vwidth = max(len(value) for _, value, _ in rows)
    for name, value, verdict in rows:
        print(f"{name:<{width}}  {value:<{vwidth}}  {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--metrics", type=int, default=20, help="intermediate results per trial")
    parser.add_argument("--keep", type=Path,
                        help="build the experiment here and keep it; a later run with the same folder reuses it")
    parser.add_argument("--screenshots", type=Path, help="save screenshots of the pages here")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    testids = load_testids()
    with tempfile.TemporaryDirectory(prefix="webui-scale-") as tmp:
        home = args.keep or Path(tmp)
        home.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        if args.keep and Registry(home).get(EXP_ID) is not None:
            exp_id = EXP_ID  # filled by an earlier run with --keep
        else:
            exp_id = fill_store(home, args.trials, args.metrics)
            print(f"filled the store: {args.trials} trials x {args.metrics} results in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        viewer = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
        try:
            figures = measure(f"http://127.0.0.1:{viewer.port}/", args.trials, testids, args.screenshots)
        finally:
            viewer.stop()
    report(figures, args.trials, args.metrics)
    if args.json:
        print(json.dumps({**figures.__dict__, "frames": None,
                          "baseline": None, "frame_max_ms": max(frame for frame, _ in figures.frames)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

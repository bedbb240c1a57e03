"""The screenshots of docs/webui.md: a small real experiment, each page of the UI while
it runs, the page of all experiments (``expctl ui``'s) beside it, the overview, the compare
view and the importance chart of the finished experiment under view (read-only), and a
rotated log a burst outran::

    .venv/bin/python tests/webui/docs_screenshots.py [--out docs/images] [--only log-skipped]

A script, not a test (pytest collects only test_*.py). Uses Debian's /usr/bin/chromium,
and Debian's pngquant, when installed, to make the pictures small.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import Experiment, ExperimentConfig  # noqa: E402
from expmgr.rotation import RotatingWriter, RotationLimits  # noqa: E402
from tests.helpers.browser import CHROMIUM, CHROMIUM_FLAGS, load_testids  # noqa: E402
from tests.helpers.common import wait_until  # noqa: E402
from tests.helpers.fill import fill_experiment  # noqa: E402

TRIAL = """
    import math, time
    import expmgr
    p = expmgr.get_next_parameter()
    quality = 1 - abs(math.log10(p["lr"]) + 2.5) / 3 - p["dropout"] / 2
    print(f"training with {p}", flush=True)
    for epoch in range(15):
        accuracy = quality * (1 - math.exp(-(epoch + 1) / 4))
        print(f"epoch {epoch}: accuracy {accuracy:.4f}", flush=True)
        expmgr.report_intermediate_result(accuracy)
        time.sleep(0.12 if p["optimizer"] != "sgd" else 0.4)
    expmgr.report_final_result(accuracy)
"""
SEARCH_SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-5, 1e-1]},
    "dropout": {"_type": "uniform", "_value": [0.0, 0.5]},
    "batch_size": {"_type": "choice", "_value": [32, 64, 128]},
    "optimizer": {"_type": "choice", "_value": ["sgd", "adam"]},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--only", choices=["log-skipped"], help="take this picture alone")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ids = load_testids()
    with tempfile.TemporaryDirectory(prefix="webui-docs-") as tmp:
        shoot_rotated_log(Path(tmp) / "rotated", ids, args.out)
    if args.only:
        return _squeeze([args.out / f"webui-{args.only}.png"])
    with tempfile.TemporaryDirectory(prefix="webui-docs-") as tmp:
        code = Path(tmp) / "code"
        code.mkdir()
        (code / "trial.py").write_text(textwrap.dedent(TRIAL))
        experiment = Experiment(ExperimentConfig(
            experiment_name="mnist-lr-search", search_space=SEARCH_SPACE, trial_command="python3 trial.py",
            trial_code_directory=code, trial_concurrency=4, max_trial_number=48,
            tuner={"name": "TPE", "class_args": {"optimize_mode": "maximize", "seed": 7}},
            experiment_working_directory=Path(tmp) / "home"))
        experiment.start(port=0)
        try:
            wait_until(lambda: sum(t.status == "SUCCEEDED" for t in experiment.list_trial_jobs()) >= 30,
                       timeout=180, what="30 finished trials")
            shoot_running(f"http://127.0.0.1:{experiment.port}/", experiment, ids, args.out)
            shoot_home(Path(tmp) / "home", ids, args.out)
            experiment.wait(timeout=180)
        finally:
            experiment.stop()
        viewer = Experiment.view(experiment.id, port=0, non_blocking=True, home=Path(tmp) / "home")
        try:
            shoot_view(f"http://127.0.0.1:{viewer.port}/", ids, args.out)
        finally:
            viewer.stop()
    return _squeeze(sorted(args.out.glob("webui-*.png")))


def _squeeze(paths: list[Path]) -> int:
    for path in paths:
        if shutil.which("pngquant"):  # Debian's pngquant: a third of the size, no visible change
            subprocess.run(["pngquant", "--quality", "70-95", "--speed", "1", "--strip", "--force",
                            "--output", str(path), str(path)], check=True)
        print(f"{path}  {path.stat().st_size // 1024} KiB")
    return 0


def _browser(playwright, profile: str):
    context = playwright.chromium.launch_persistent_context(
        profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    return context, (context.pages[0] if context.pages else context.new_page())


def running_trial(experiment: Experiment) -> str:
    """A running trial with most of its run ahead: a slow one (sgd) that started last."""
    running = wait_until(lambda: [t for t in experiment.list_trial_jobs() if t.status == "RUNNING"],
                         what="a running trial")
    return max(running, key=lambda t: (t.parameters["optimizer"] == "sgd", t.startTime)).trialJobId


def shoot_running(url: str, experiment: Experiment, ids: dict[str, str], out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context, page = _browser(playwright, profile)
        try:
            page.goto(url + "#/overview")
            page.get_by_test_id(ids["app"]).and_(page.locator('[data-loaded="true"]')).wait_for()
            page.get_by_test_id(ids["liveBadge"]).wait_for()
            page.screenshot(path=str(out / "webui-overview.png"))

            page.goto(url + "#/trials")
            page.get_by_test_id(ids["sortPrefix"] + "final").click()  # best first
            page.screenshot(path=str(out / "webui-trials.png"))

            page.goto(url + f"#/trials/{running_trial(experiment)}")
            page.locator(f'[data-testid="{ids["chartTrialIntermediate"]}"][data-rendered="true"]').wait_for()
            page.get_by_test_id(ids["stdout"]).get_by_text("epoch 6:").wait_for()
            page.screenshot(path=str(out / "webui-trial.png"))

            page.goto(url + "#/charts")
            for chart in ("chartFinal", "chartIntermediate"):
                page.locator(f'[data-testid="{ids[chart]}"][data-rendered="true"]').wait_for()
            page.wait_for_timeout(1200)  # the charts' entry animation
            page.screenshot(path=str(out / "webui-charts.png"))
            page.get_by_test_id(ids["chartParallel"]).scroll_into_view_if_needed()
            page.locator(f'[data-testid="{ids["chartParallel"]}"][data-rendered="true"]').wait_for()
            page.locator(f'[data-testid="{ids["chartDurations"]}"][data-rendered="true"]').wait_for()
            page.wait_for_timeout(1200)
            page.screenshot(path=str(out / "webui-charts-parallel.png"))

            page.goto(url + "#/logs")
            page.get_by_test_id(ids["experimentLog"]).get_by_text("trial").first.wait_for()
            page.screenshot(path=str(out / "webui-logs.png"))

            page.goto(url + "#/overview")
            page.get_by_test_id(ids["concurrencyInput"]).fill("6")
            page.get_by_test_id(ids["concurrencyApply"]).click()
            page.get_by_test_id(ids["confirmDialog"]).wait_for()
            page.screenshot(path=str(out / "webui-confirm.png"))
            page.get_by_test_id(ids["cancel"]).click()
        finally:
            context.close()


def shoot_view(url: str, ids: dict[str, str], out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context, page = _browser(playwright, profile)
        try:
            page.goto(url + "#/overview")
            page.get_by_test_id(ids["readonlyBadge"]).wait_for()
            page.get_by_test_id(ids["bestResult"]).wait_for()
            page.screenshot(path=str(out / "webui-view.png"))

            best = [page.get_by_test_id(ids["topTrialPrefix"] + str(rank)).get_attribute("data-trial")
                    for rank in (1, 2, 3)]
            page.goto(url + "#/compare/" + ",".join(best))
            page.locator(f'[data-testid="{ids["chartCompare"]}"][data-rendered="true"]').wait_for()
            page.wait_for_timeout(1200)  # the chart's entry animation
            page.screenshot(path=str(out / "webui-compare.png"))

            page.goto(url + "#/charts")
            panel = page.get_by_test_id(ids["importancePanel"])
            panel.scroll_into_view_if_needed()
            page.locator(f'[data-testid="{ids["chartImportance"]}"][data-rendered="true"]').wait_for()
            page.wait_for_timeout(1200)
            panel.screenshot(path=str(out / "webui-importance.png"))
        finally:
            context.close()


def shoot_home(home: Path, ids: dict[str, str], out: Path) -> None:
    """``expctl ui``'s page over ``home``: the running experiment and two finished ones beside it."""
    from playwright.sync_api import sync_playwright

    from expmgr.experiment.home_server import HomeServer
    from expmgr.experiment.listening import server_sockets

    fill_experiment(home, trials=40, metrics_per_trial=5, exp_id="fill0001", seed=1)
    fill_experiment(home, trials=12, metrics_per_trial=5, exp_id="fill0002", seed=2)
    sockets, access = server_sockets(0, "127.0.0.1", None, None)
    server = HomeServer(home, sockets, access)
    server.start()
    try:
        with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
            context, page = _browser(playwright, profile)
            try:
                page.goto(f"http://127.0.0.1:{server.port}/")
                page.get_by_test_id(ids["experimentsTable"]).wait_for()
                page.get_by_test_id(ids["experimentRowPrefix"] + "fill0002").wait_for()
                page.screenshot(path=str(out / "webui-home.png"))
            finally:
                context.close()
    finally:
        server.stop()


def shoot_rotated_log(home: Path, ids: dict[str, str], out: Path) -> None:
    """experiment.log of a finished experiment, rotated (two files kept, some deleted), then a
    6 MiB burst appended while the page shows it: the page says what was kept, deleted, skipped."""
    from playwright.sync_api import sync_playwright

    exp_id = fill_experiment(home, trials=4, metrics_per_trial=3)
    writer = RotatingWriter(home / exp_id / "logs" / "experiment.log", RotationLimits(4000, keep=3))
    record = "[2026-12-02 15:12:{:02d}] INFO (nni.{} expmgr-{}) trial {:05d} SUCCEEDED (exit code 0)\n"
    for index in range(400):
        writer.write(record.format(index % 60, exp_id, exp_id, index).encode())
    viewer = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
            context, page = _browser(playwright, profile)
            try:
                page.goto(f"http://127.0.0.1:{viewer.port}/#/logs")
                page.get_by_test_id(ids["logRotated"]).wait_for()
                last = 400 + 6 * 2**20 // 80
                writer.write(b"".join(record.format(index % 60, exp_id, exp_id, index).encode()
                                      for index in range(400, last)))
                page.get_by_test_id(ids["logSkipped"]).wait_for()
                page.get_by_test_id(ids["experimentLog"]).get_by_text(f"trial {last - 1:05d} ").wait_for()
                page.screenshot(path=str(out / "webui-log-skipped.png"))
            finally:
                context.close()
    finally:
        writer.close()
        viewer.stop()


if __name__ == "__main__":
    sys.exit(main())

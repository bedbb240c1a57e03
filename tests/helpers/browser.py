"""The browser tests' Chromium (Debian's, driven by Playwright): a page that waits on its
elements by test id, the fixtures ``ui`` and ``screenshot_dir`` (tests/webui/conftest.py imports
them), and experiments whose trials wait at a gate until a test opens it."""
from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from expmgr import Experiment
from tests.helpers.common import REPO


CHROMIUM = Path("/usr/bin/chromium")


CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


TESTIDS_FILE = REPO / "ts" / "webui" / "src" / "testids.ts"


AXE_SCRIPT = REPO / "ts" / "webui" / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core, a dev dependency of the web UI (``npm ci`` in ts/webui, as .ci/run does)."""


AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


WAIT_MS = 30_000
"""How long a browser-side wait may take before the test fails (trials start real processes)."""


@functools.cache
def load_testids() -> dict[str, str]:
    """The UI's ``data-testid`` values by name, read from ts/webui/src/testids.ts
    (``name: 'value'`` entries), so a renamed hook fails here with its name."""
    text = TESTIDS_FILE.read_text(encoding="utf-8")
    return dict(re.findall(r"""^\s*(\w+)\s*:\s*['"]([^'"]+)['"],""", text, flags=re.M))


@dataclass
class BrowserPage:
    """A page in a fresh headless Chromium, with what went wrong in it recorded."""

    page: Any
    name: str
    folders: tuple[Path, ...]
    """Where its screenshots go: the test's tmp_path and the shared screenshot folder."""
    errors: list[str] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)
    """URLs of the websockets the page opened."""

    def get(self, name: str, suffix: str | None = None) -> Any:
        """The element(s) of the UI's test hook ``name`` (see testids.ts): ``get("status")``;
        with ``suffix``, the hook ``<name>Prefix`` followed by it: ``get("trialState", trial_id)``."""
        key = name if suffix is None else name + "Prefix"
        hooks = load_testids()
        if key not in hooks:
            raise AssertionError(f"no test hook {key!r} in {TESTIDS_FILE}")
        return self.page.get_by_test_id(hooks[key] + (suffix or ""))

    def accessibility_problems(self, impacts: tuple[str, ...] = ("serious", "critical")) -> list[str]:
        """axe-core's WCAG 2 A/AA violations of the page as it is now, of the given impacts,
        one line each (rule, impact, the first elements): an empty list when it passes."""
        if not AXE_SCRIPT.exists():
            raise AssertionError(f"{AXE_SCRIPT} is missing: run `npm ci` in ts/webui (.ci/run does)")
        if not self.page.evaluate("() => typeof window.axe !== 'undefined'"):
            self.page.add_script_tag(path=str(AXE_SCRIPT))
        violations = self.page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})"
            ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
            " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))", AXE_TAGS)
        return [f"{v['id']} ({v['impact']}): {v['help']} at {', '.join(v['nodes'])}"
                for v in violations if v["impact"] in impacts]

    def screenshot(self, label: str) -> Path:
        """Save the page as ``<test>-<label>.png`` in each of ``folders``; the first path."""
        first, *others = [folder / f"{self.name}-{label}.png" for folder in self.folders]
        self.page.screenshot(path=str(first), full_page=True)
        for path in others:
            shutil.copy(first, path)
        return first


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every browser test's screenshots, together: $EXPMGR_SCREENSHOT_DIR or <basetemp>/webui-screenshots."""
    wanted = os.environ.get("EXPMGR_SCREENSHOT_DIR")
    basetemp = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one folder for all workers, not one each
        basetemp = basetemp.parent
    folder = Path(wanted) if wanted else basetemp / "webui-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def ui(tmp_path: Path, screenshot_dir: Path, request: pytest.FixtureRequest) -> Iterator[BrowserPage]:
    """A page in headless Debian Chromium with a new profile in tmp_path; closed after
    the test, with a final screenshot taken first."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install chromium`; "
                    ".ci/run does) — the browser tests never download a browser")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    playwright = sync_playwright().start()
    context = None
    try:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 800})
        context.set_default_timeout(WAIT_MS)
        page = context.pages[0] if context.pages else context.new_page()
        name = re.sub(r"[^\w.-]+", "_", request.node.name)[:120]
        wrapped = BrowserPage(page, name, (tmp_path, screenshot_dir))
        page.on("pageerror", lambda error: wrapped.errors.append(f"page error: {error}"))
        page.on("console", lambda message: wrapped.errors.append(f"console: {message.text}")
                if message.type == "error" else None)
        page.on("websocket", lambda socket: wrapped.sockets.append(socket.url))
        yield wrapped
        try:
            wrapped.screenshot("final")
        except Exception as error:  # noqa: BLE001 - a failed last screenshot must not hide the test's result
            print(f"no final screenshot: {error}")
    finally:
        if context is not None:
            context.close()
        playwright.stop()


GATED_TRIAL = """
    import os, sys, time
    import expmgr
    params = expmgr.get_next_parameter()
    gate = os.path.join(os.environ["GATE_DIR"], "release")
    print(f"trial {params['x']} starts", flush=True)
    line = 0
    deadline = time.monotonic() + 120
    # Report and print until the test opens the gate, so the page sees a trial run.
    while not os.path.exists(gate) and time.monotonic() < deadline:
        print(f"trial {params['x']} line {line}", flush=True)
        if line < 20:
            expmgr.report_intermediate_result(params["x"] * 10 + line)
        line += 1
        time.sleep(0.1)
    expmgr.report_final_result(params["x"] * 1.5)
"""


@dataclass
class GatedExperiment:
    """A running experiment whose trials print and report until ``release()``."""

    experiment: Experiment
    gate: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.experiment.port}/"

    def release(self) -> None:
        self.gate.touch()

    def statuses(self) -> dict[str, str]:
        return {t.trialJobId: t.status for t in self.experiment.list_trial_jobs()}

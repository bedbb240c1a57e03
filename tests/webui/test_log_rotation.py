"""A log shown in the page while it is rotated and while a fast writer outruns it: the page
says what rotation did before the part shown (the server's facts), keeps its lines through
a rotation (none cleared, none twice), and says how much the server skipped to keep up."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from expmgr import Experiment
from expmgr.rotation import RotatingWriter, RotationLimits, dropped_bytes
from tests.helpers.fill import fill_experiment


def numbered(first: int, count: int) -> list[bytes]:
    return [f"[2026-12-02 15:12:22] INFO (nni.test) record {index:05d}\n".encode()
            for index in range(first, first + count)]


@pytest.fixture
def viewed(tmp_path):
    """A finished experiment whose experiment.log was rotated (3 kept, some deleted), served
    by Experiment.view: (the view, the log's writer, the lines written)."""
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=2, metrics_per_trial=2)
    writer = RotatingWriter(home / exp_id / "logs" / "experiment.log", RotationLimits(2000, keep=3))
    written = numbered(0, 150)
    for line in written:
        writer.write(line)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    yield view, writer, written
    writer.close()
    view.stop()


def test_a_rotated_log_says_so_keeps_its_lines_through_a_rotation_and_says_what_was_skipped(ui, viewed):
    view, writer, written = viewed
    path = writer.path
    ui.page.goto(f"http://127.0.0.1:{view.port}/#/logs")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    log = ui.get("experimentLog")
    shown = path.read_bytes().count(b"\n")
    expect(log).to_have_attribute("data-lines", str(shown))
    notice = ui.get("logRotated")
    expect(notice).to_contain_text("2 older files are kept (experiment.log.1 … experiment.log.2")
    expect(notice).to_contain_text(re.compile(r"KiB of the earliest output was deleted .*logMaxSize and logFilesKept"))
    expect(notice).to_have_attribute("data-dropped", str(dropped_bytes(path)))
    expect(ui.get("logSkipped")).to_have_count(0)
    ui.screenshot("rotated")

    more = numbered(len(written), 60)  # about one more file: the file shown becomes experiment.log.1
    for line in more:
        writer.write(line)
    expect(log).to_have_attribute("data-lines", str(shown + len(more)))  # none cleared, none twice
    expect(log).to_contain_text(more[-1].decode().strip())
    expect(notice).to_have_attribute("data-dropped", str(dropped_bytes(path)))

    writer.write(b"".join(numbered(len(written) + len(more), 6 * 2**20 // 50)))  # a burst faster than it is read
    skipped = ui.get("logSkipped")
    expect(skipped).to_contain_text(re.compile(r"… \d+(\.\d)? (bytes|KiB|MiB) skipped to keep up"))
    last = numbered(len(written) + len(more) + 6 * 2**20 // 50 - 1, 1)[0].decode().strip()
    expect(log).to_contain_text(last)
    rows = log.locator(".logline").all_inner_texts()
    pattern = re.compile(r"\[2026-12-02 15:12:22\] INFO \(nni\.test\) record \d{5,}|… \d+(\.\d)? (bytes|KiB|MiB) skipped to keep up …")
    # Every row is whole: a burst's rotated files are cut at newlines, so a skip lands on a line's start.
    bad = [row for row in rows if not pattern.fullmatch(row)]
    assert rows and not bad, bad
    ui.screenshot("skipped")
    assert not [e for e in ui.errors if e.startswith("page error")], ui.errors

"""The websocket ``/api/v1/expmgr/ws`` against real servers: hello, changes pushed when
trials report, followed files (across their rotations, and jumping to the end behind a
fast writer), reconnecting, and the read-only view."""
from __future__ import annotations

import sqlite3

import pytest

from expmgr import Experiment
from expmgr.rotation import RotatingWriter, RotationLimits, dropped_bytes, rotated_files
from expmgr.server import live
from expmgr.store import ExperimentStore
from tests.helpers.common import wait_until
from tests.helpers.fill import fill_experiment
from tests.helpers.server import get, get_text


def metrics_of(messages: list[dict]) -> list[tuple]:
    return [tuple(m) for message in messages for m in message["metrics"]]


def test_a_client_is_greeted_then_sent_what_changed_when_a_trial_reports(stepped, sockets):
    client = sockets(stepped.port)
    hello = wait_until(lambda: client.of_type("hello"), what="hello")[0]
    assert hello["readOnly"] is False and hello["cursor"] == get(stepped.port, "/api/v1/expmgr/changes")["cursor"]
    trial_id = stepped.running()[1]

    stepped.step(1, 0)
    pushed = wait_until(lambda: [m for m in client.of_type("changes") if m["metrics"]], what="a changes push")
    first = pushed[0]
    assert not first["full"] and first["experiment"]["status"] == "RUNNING"
    assert first["metrics"][0][:5] == [trial_id, 0, "PERIODICAL", 0, 10]
    assert {"trialJobStatus": "RUNNING", "trialJobNumber": 2} in first["statistics"]

    for step in range(1, 6):  # a burst: coalesced, nothing lost or repeated
        stepped.step(1, step)
    wait_until(lambda: len(metrics_of(client.of_type("changes"))) == 6, what="six metrics pushed")
    pushed = client.of_type("changes")
    assert [m[4] for m in metrics_of(pushed)] == [10, 11, 12, 13, 14, 15]
    cursors = [hello["cursor"]] + [m["cursor"] for m in pushed]
    assert len(set(cursors)) == len(cursors), "each message goes on from the previous one's cursor"

    stepped.release()
    assert stepped.experiment.wait(timeout=60)
    done = wait_until(lambda: [m for m in client.of_type("changes") if m["experiment"]["readOnly"]],
                      what="the end pushed: DONE, and read-only from then on")[-1]
    assert done["experiment"]["status"] == "DONE" and not client.closed.is_set(), "the server stays after DONE"
    stepped.experiment.stop()
    wait_until(client.closed.is_set, what="the socket closed with the experiment's server")
    last = client.of_type("changes")[-1]
    assert last["experiment"]["status"] == "DONE", "the end is pushed before the socket closes"
    stored = sqlite3.connect(stepped.experiment.paths.database).execute(
        "SELECT trial_id, type, sequence, attempt FROM metrics").fetchall()
    pushed_metrics = metrics_of(client.of_type("changes"))
    assert len(pushed_metrics) == len(set(pushed_metrics)) == len(stored)
    assert {(m[0], m[2], m[3], m[6]) for m in pushed_metrics} == set(stored)


def test_followed_files_are_pushed_as_they_grow_until_unfollowed(stepped, sockets):
    client = sockets(stepped.port)
    trial_id = stepped.running()[1]
    wait_until(lambda: get(stepped.port, f"/api/v1/expmgr/tail?file=stdout&trial={trial_id}")["size"],
               what="the trial's first line")
    client.send({"type": "follow", "file": "stdout", "trial": trial_id, "offset": 0})
    client.send({"type": "follow", "file": "stderr", "trial": trial_id, "offset": -1000})

    def tails(file: str) -> list[dict]:
        return [m for m in client.of_type("tail") if m["file"] == file]

    first = wait_until(lambda: tails("stdout"), what="the followed file")[0]
    facts = {"inode": stepped.experiment.paths.trial_dir(trial_id).joinpath("stdout").stat().st_ino, "base": 0,
             "rotated": 0, "dropped": 0, "skipped": 0}
    assert first == {"type": "tail", "file": "stdout", "trial": trial_id, "offset": 0, "next": 16, "size": 16,
                     "text": "trial 1 started\n", **facts}
    assert wait_until(lambda: tails("stderr"), what="stderr")[0]["text"] == ""

    stepped.step(1, 0)
    wait_until(lambda: len(tails("stdout")) == 2 and len(tails("stderr")) == 2, what="step 0 in both files")
    assert tails("stdout")[1] == {"type": "tail", "file": "stdout", "trial": trial_id, "offset": 16, "next": 23,
                                  "size": 23, "text": "step 0\n", **facts}
    assert tails("stderr")[1]["text"] == "step 0\n"

    # stdout is written before stderr, and checked first: once stderr's step 1 came,
    # stdout's would have come before it if it were still followed.
    client.send({"type": "unfollow", "file": "stdout", "trial": trial_id})
    stepped.step(1, 1)
    wait_until(lambda: len(tails("stderr")) == 3, what="stderr's step 1")
    assert len(tails("stdout")) == 2

    client.send({"type": "follow", "file": "trial.log", "trial": "nosuch", "offset": 0})
    client.send({"type": "follow", "file": "passwd", "trial": None})
    client.send({"type": "watch"})
    errors = wait_until(lambda: len(client.of_type("error")) == 3 and client.of_type("error"), what="3 errors")
    assert [e["error"] for e in errors] == ["no trial 'nosuch'",
                                            "file: expected one of stdout, stderr, trial.log, experiment.log, "
                                            "dispatcher.log, got 'passwd'",
                                            "type: expected 'follow' or 'unfollow', got 'watch'"]


def test_a_client_that_reconnects_catches_up_from_its_last_cursor(stepped, sockets):
    first = sockets(stepped.port)
    cursor = wait_until(lambda: first.of_type("hello"), what="hello")[0]["cursor"]
    first.close()
    stepped.step(2, 0)
    trial_id = stepped.running()[2]
    wait_until(lambda: get(stepped.port, f"/api/v1/nni/metric-data/{trial_id}"), what="the metric stored")

    missed = get(stepped.port, f"/api/v1/expmgr/changes?since={cursor}")
    assert not missed["full"] and [m[:5] for m in missed["metrics"]] == [[trial_id, 1, "PERIODICAL", 0, 20]]

    again = sockets(stepped.port, f"?since={cursor}")  # or let the socket send what was missed
    assert wait_until(lambda: again.of_type("hello"), what="hello")[0]["cursor"] == cursor
    caught_up = wait_until(lambda: again.of_type("changes"), what="the catch-up push")[0]
    assert caught_up["metrics"] == missed["metrics"] and caught_up["cursor"] == missed["cursor"]


def test_a_view_socket_works_read_only_and_reads_nothing_while_nothing_changes(tmp_path, sockets, monkeypatch):
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=3, metrics_per_trial=2)
    log = home / exp_id / "logs" / "experiment.log"
    log.write_text("first\n")
    reads = []
    original = ExperimentStore.changes
    # Each read records whether it read metrics: an answer's changes do, the facts' refresh not.
    monkeypatch.setattr(ExperimentStore, "changes",
                        lambda *args, **kwargs: reads.append(kwargs.get("metrics", True)) or original(*args, **kwargs))
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        client = sockets(view.port)
        assert wait_until(lambda: client.of_type("hello"), what="hello")[0]["readOnly"] is True
        client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0})
        assert wait_until(lambda: client.of_type("tail"), what="the log")[0]["text"] == "first\n"
        for line in ["second\n", "third\n"]:  # each append waits for a check of the file: time passes
            with log.open("a") as file:
                file.write(line)
            wait_until(lambda line=line: client.of_type("tail")[-1]["text"] == line, what=line)
        assert [m["offset"] for m in client.of_type("tail")] == [0, 6, 13]
        assert client.of_type("changes") == [] and reads == [], "no changes read while nothing was written"
        assert get(view.port, "/api/v1/expmgr/changes")["full"] and reads == [True, False]
    finally:
        view.stop()
    wait_until(client.closed.is_set, what="the view's stop closing its sockets")


def test_a_client_far_behind_gets_its_changes_in_several_messages(tmp_path, sockets, monkeypatch):
    monkeypatch.setattr(live, "PUSH_LIMIT", 25)
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=10, metrics_per_trial=4)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        client = sockets(view.port, "?since=")  # an empty cursor: everything
        pushed = wait_until(lambda: (m := client.of_type("changes")) and not m[-1]["more"] and m,
                            what="every message")
    finally:
        view.stop()
    assert len(pushed) == 3 and pushed[0]["full"] and [m["more"] for m in pushed] == [True, True, False]
    assert len(metrics_of(pushed)) == len(set(metrics_of(pushed))) == 50
    assert {t["trialJobId"] for m in pushed for t in m["trials"]} == {f"f{n:04d}" for n in range(10)}


def test_a_line_a_trial_prints_while_it_waits_reaches_a_follower_of_its_stdout(
        tmp_path, code_dir, sockets, monkeypatch):
    """Python buffers a trial's prints unless told not to; the test's machines export
    PYTHONUNBUFFERED, users' shells do not. The trial waits after printing, for a file the
    test makes only once the line came over the websocket."""
    from expmgr import ExperimentConfig
    from tests.helpers.common import write_script
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    gate = tmp_path / "go"
    write_script(code_dir, "trial.py", f"""
        import os, time
        import expmgr
        expmgr.get_next_parameter()
        print("epoch 1: loss 0.5")
        while not os.path.exists({str(gate)!r}):
            time.sleep(0.02)
        expmgr.report_final_result(1.0)
    """)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, tuner={"name": "GridSearch"},
        experiment_working_directory=tmp_path / "home"))
    try:
        experiment.start(port=0)
        trial_id = wait_until(lambda: next((t["trialJobId"] for t in get(experiment.port, "/api/v1/nni/trial-jobs")
                                            if t["status"] == "RUNNING"), None), what="the running trial")
        client = sockets(experiment.port)
        client.send({"type": "follow", "file": "stdout", "trial": trial_id, "offset": 0})
        wait_until(lambda: "".join(m["text"] for m in client.of_type("tail")) == "epoch 1: loss 0.5\n",
                   what="the printed line over the websocket while the trial waits")
    finally:
        gate.touch()
        experiment.stop()


def lines_of(first: int, count: int, width: int = 12) -> list[bytes]:
    return [f"line {index:06d} {'x' * (index % width)}\n".encode() for index in range(first, first + count)]


def tails_of(client) -> list[dict]:
    return [m for m in client.of_type("tail") if m["file"] == "experiment.log"]


@pytest.fixture
def viewed_log(tmp_path):
    """A finished experiment served by Experiment.view, and its experiment.log's path."""
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=1, metrics_per_trial=1)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    yield view, home / exp_id / "logs" / "experiment.log"
    view.stop()


@pytest.mark.parametrize("per_batch", [25, 120], ids=["one-rotation-a-check", "several-rotations-a-check"])
def test_a_followed_log_is_sent_across_its_rotations_every_line_once(viewed_log, sockets, per_batch):
    view, path = viewed_log
    writer = RotatingWriter(path, RotationLimits(500, keep=100))  # none deleted: every line can be sent
    written = lines_of(0, 10)
    for line in written:
        writer.write(line)
    client = sockets(view.port)
    wait_until(lambda: client.of_type("hello"), what="hello")
    client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0})
    wait_until(lambda: tails_of(client), what="the first tail")
    for batch in range(5):  # each batch is written between two checks of the file, or across one
        more = lines_of(len(written), per_batch)
        for line in more:
            writer.write(line)
        written += more
        wait_until(lambda: more[-1].decode() in "".join(m["text"] for m in tails_of(client)), what=f"batch {batch}")
    writer.close()
    tails = tails_of(client)
    assert "".join(m["text"] for m in tails) == b"".join(written).decode(), "every line once, in order"
    assert len({m["inode"] for m in tails}) > 5 and all(m["skipped"] == 0 for m in tails)
    assert tails[-1]["rotated"] == len(rotated_files(path)) and tails[-1]["dropped"] == 0
    for before, after in zip(tails, tails[1:]):  # each file read to its end before the next from 0
        if after["inode"] != before["inode"]:
            assert after["offset"] == 0 and after["base"] == before["base"] + before["size"]


def test_a_follow_outrun_by_rotation_is_sent_what_is_kept_and_told_what_was_skipped(viewed_log, sockets):
    view, path = viewed_log
    writer = RotatingWriter(path, RotationLimits(500, keep=3))
    before = lines_of(0, 10)
    for line in before:
        writer.write(line)
    client = sockets(view.port)
    wait_until(lambda: client.of_type("hello"), what="hello")
    client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0})
    wait_until(lambda: tails_of(client), what="the first tail")
    shown = tails_of(client)[0]["next"]
    written = lines_of(10, 400)  # about 40 files at once: most are rotated away before the next check
    for line in written:
        writer.write(line)
    writer.close()
    end = path.stat().st_size
    wait_until(lambda: (last := tails_of(client)[-1])["next"] == end and last["inode"] == path.stat().st_ino,
               what="the follow at the end")
    tails = tails_of(client)[1:]
    assert any(m["skipped"] for m in tails)
    assert shown + sum(len(m["text"].encode()) + m["skipped"] for m in tails) == len(b"".join(before + written)), \
        "what was sent and what was skipped make the whole log"
    assert "".join(m["text"] for m in tails).endswith(written[-1].decode())
    assert tails[-1]["dropped"] == dropped_bytes(path) > 0 and tails[-1]["rotated"] == 2


def test_a_follow_behind_a_fast_writer_jumps_to_the_end_and_is_told_how_much_it_skipped(viewed_log, sockets):
    view, path = viewed_log
    path.write_bytes(b"start\n")
    client = sockets(view.port)
    wait_until(lambda: client.of_type("hello"), what="hello")
    client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0})
    wait_until(lambda: tails_of(client), what="the first tail")
    burst = b"".join(lines_of(0, 6 * 2**20 // 24))  # 6 MiB at once: more than a check may send
    with path.open("ab") as file:
        file.write(burst)
    end = path.stat().st_size
    wait_until(lambda: tails_of(client)[-1]["next"] == end, what="the follow at the end")
    tails = tails_of(client)[1:]
    jumps = [m for m in tails if m["skipped"]]
    assert jumps and jumps[-1]["text"].startswith("line "), "a jump lands on a line's start"
    assert jumps[-1]["offset"] >= end - live.MAX_BYTES
    assert sum(len(m["text"].encode()) + m["skipped"] for m in tails) == len(burst), "shown and skipped: all of it"
    assert sum(len(m["text"].encode()) for m in tails) < 3 * live.JUMP_BEHIND, "not the whole burst sent"


def test_the_tail_and_trial_file_routes_read_across_a_rotation(viewed_log):
    view, _ = viewed_log
    stdout = view.paths.trial_dir("f0000") / "stdout"
    stdout.parent.mkdir(parents=True, exist_ok=True)
    writer = RotatingWriter(stdout, RotationLimits(30, keep=10))  # "three" joins "one two", then a file a line
    writer.write(b"one\ntwo\n")
    first = get(view.port, "/api/v1/expmgr/tail?file=stdout&trial=f0000&offset=0")
    assert (first["text"], first["rotated"], first["dropped"], first["skipped"]) == ("one\ntwo\n", 0, 0, 0)
    for word in ["three", "four", "five", "six", "seven", "eight", "nine"]:
        writer.write(f"{word} {'.' * 10}\n".encode())
    writer.close()
    texts, tail = [first["text"]], first
    while tail["next"] < tail["size"] or tail["inode"] != stdout.stat().st_ino:
        tail = get(view.port, f"/api/v1/expmgr/tail?file=stdout&trial=f0000&offset={tail['next']}"
                              f"&inode={tail['inode']}&base={tail['base']}")
        texts.append(tail["text"])
    everything = "one\ntwo\n" + "".join(f"{word} {'.' * 10}\n" for word in
                                        ["three", "four", "five", "six", "seven", "eight", "nine"])
    assert "".join(texts) == everything and len(rotated_files(stdout)) == 6
    assert get_text(view.port, "/api/v1/nni/trial-file/f0000/stdout")[2] == everything, "the kept files, then stdout"


def test_a_follow_with_an_integer_out_of_range_is_an_error_message_naming_it(filled_view, sockets):
    client = sockets(filled_view.port)
    wait_until(lambda: client.of_type("hello"), what="hello")
    for name, value in [("offset", 2 ** 63), ("offset", -2 ** 63 - 1), ("inode", 2 ** 64), ("base", -1)]:
        count = len(client.of_type("error"))
        client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0, name: value})
        error = wait_until(lambda count=count: client.of_type("error")[count:],
                           what=f"the error of {name}={value}")[0]["error"]
        assert error.startswith(f"{name}: expected"), error
    client.send({"type": "follow", "file": "experiment.log", "trial": None, "offset": 0})
    wait_until(lambda: client.of_type("tail"), what="a follow in range still answered")

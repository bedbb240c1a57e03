"""Log files are served from inside the experiment's folder only: a trial that replaces its
``stdout`` (or its folder) with a symlink, or a request with ``../`` in a trial id or a file
name, reads nothing outside it (trial-file, tail and websocket follow)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from expmgr.rotation import RotatingWriter, RotationLimits
from tests.helpers.common import wait_until
from tests.helpers.security import send, unchanged_state

API = "/api/v1/nni"
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not for the web UI"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "id_rsa"
    path.write_text(SECRET + "\n")
    return path


def test_a_trial_file_replaced_by_a_symlink_is_refused_everywhere(served, secret, sockets):
    trial_id = served.running()[1]
    stdout = served.experiment.paths.trial_dir(trial_id) / "stdout"
    os.replace(stdout, stdout.with_name("stdout.real"))  # the trial keeps writing to it
    stdout.symlink_to(secret)
    try:
        answer = send(served.port, "GET", f"{API}/trial-file/{trial_id}/stdout")
        assert answer.status == 403 and "symlink" in answer.error and SECRET not in str(answer.body)
        answer = send(served.port, "GET", f"/api/v1/expmgr/tail?file=stdout&trial={trial_id}")
        assert answer.status == 403 and SECRET not in str(answer.body)
        client = sockets(served.port)
        client.send({"type": "follow", "file": "stdout", "trial": trial_id, "offset": 0})
        error = wait_until(lambda: client.of_type("error"), what="the follow refused")[0]
        assert "symlink" in error["error"] and error["trial"] == trial_id
        assert SECRET not in str(client.messages)
        assert send(served.port, "GET", f"{API}/trial-file/{trial_id}/stderr").status == 200, "its other files are served"
    finally:
        stdout.unlink()
        os.replace(stdout.with_name("stdout.real"), stdout)


def test_a_trial_file_replaced_by_a_hard_link_is_refused_everywhere(served, secret, sockets):
    """A hard link is no symlink to O_NOFOLLOW: a trial could link a file it cannot read but
    the server can (the server runs as root) into its folder. expmgr's logs have one name."""
    trial_id = served.running()[2]
    stderr = served.experiment.paths.trial_dir(trial_id) / "stderr"
    os.replace(stderr, stderr.with_name("stderr.real"))  # the trial keeps writing to it
    os.link(secret, stderr)
    try:
        answer = send(served.port, "GET", f"{API}/trial-file/{trial_id}/stderr")
        assert answer.status == 403 and "hard link" in answer.error and SECRET not in str(answer.body), answer
        answer = send(served.port, "GET", f"/api/v1/expmgr/tail?file=stderr&trial={trial_id}")
        assert answer.status == 403 and "hard link" in answer.error and SECRET not in str(answer.body), answer
        client = sockets(served.port)
        client.send({"type": "follow", "file": "stderr", "trial": trial_id, "offset": 0})
        error = wait_until(lambda: client.of_type("error"), what="the follow refused")[0]
        assert "hard link" in error["error"] and error["trial"] == trial_id
        assert SECRET not in str(client.messages)
        assert send(served.port, "GET", f"{API}/trial-file/{trial_id}/stdout").status == 200, "its other files are served"
    finally:
        stderr.unlink()
        os.replace(stderr.with_name("stderr.real"), stderr)


def test_the_rotating_writer_will_not_write_into_a_hard_linked_file(tmp_path: Path, secret):
    log = tmp_path / "stdout"
    os.link(secret, log)
    writer = RotatingWriter(log, RotationLimits(1024, 2))
    with pytest.raises(OSError, match="hard link"):
        writer.write(b"appended\n")
        writer.close()
    assert secret.read_text() == SECRET + "\n"


def test_a_trial_folder_replaced_by_a_symlink_is_refused(served, secret):
    trial_id = served.running()[2]
    folder = served.experiment.paths.trial_dir(trial_id)
    (secret.parent / "trial.log").symlink_to(secret)  # what the link would lead to
    os.replace(folder, folder.with_name(trial_id + ".real"))
    folder.symlink_to(secret.parent)
    try:
        for route in [f"{API}/trial-file/{trial_id}/trial.log", f"/api/v1/expmgr/tail?file=trial.log&trial={trial_id}"]:
            answer = send(served.port, "GET", route)
            assert answer.status == 403 and SECRET not in str(answer.body), (route, answer)
    finally:
        folder.unlink()
        os.replace(folder.with_name(trial_id + ".real"), folder)


@pytest.mark.parametrize("route, status", [
    (f"{API}/trial-file/..%2F..%2Fconfig.yml/stdout", 404),
    (f"{API}/trial-file/..%2F..%2Fdb/stdout", 404),
    (f"{API}/trial-file/%s/..%2F..%2F..%2Fconfig.yml", 400),
    (f"{API}/trial-file/%s/..", 400),
    ("/api/v1/expmgr/tail?file=..%2F..%2Fconfig.yml", 400),
    ("/api/v1/expmgr/tail?file=stdout&trial=..%2F..", 404),
    ("/api/v1/expmgr/tail?file=stdout&trial=%s%2F..%2F..%2Fconfig.yml", 404),
    ("/assets/..%2F..%2F..%2Fconfig.yml", (403, 404)),
])
def test_traversal_in_a_trial_id_or_a_file_name_is_refused(served, route, status):
    before = unchanged_state(served)
    answer = send(served.port, "GET", route.replace("%s", served.running()[1]))
    assert answer.status in (status if isinstance(status, tuple) else (status,)), answer
    assert "experimentName" not in str(answer.body) and "trialCommand" not in str(answer.body)
    assert unchanged_state(served) == before


def test_traversal_in_a_follow_is_refused(served, sockets):
    client = sockets(served.port)
    for file, trial in [("../../config.yml", None), ("stdout", "../.."), ("stdout", served.running()[1] + "/../..")]:
        client.send({"type": "follow", "file": file, "trial": trial, "offset": 0})
    wait_until(lambda: len(client.of_type("error")) == 3, what="three follows refused")
    assert not client.of_type("tail")

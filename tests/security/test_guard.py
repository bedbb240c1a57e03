"""The guard's rules on their own (allowed hosts, origins, limits from the environment),
and a limit set in the environment honoured by a real server."""
from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.experiment import ExperimentError
from expmgr.server.guard import Guard, LimitsError, ServerLimits, allowed_hosts
from tests.helpers.fill import fill_experiment
from tests.helpers.security import send


def test_a_loopback_server_answers_to_its_loopback_names_only():
    hosts = allowed_hosts([("127.0.0.1", 8080)])
    assert hosts == {"localhost:8080", "127.0.0.1:8080", "[::1]:8080"}
    assert allowed_hosts([("::1", 8080)]) == hosts


def test_a_wildcard_server_also_answers_to_the_machines_names_and_addresses():
    hosts = allowed_hosts([("0.0.0.0", 8080), ("::", 8080)])
    assert {"localhost:8080", "127.0.0.1:8080", "[::1]:8080"} <= hosts
    assert f"{socket.gethostname().lower()}:8080" in hosts and f"{socket.getfqdn().lower()}:8080" in hosts
    for items in psutil.net_if_addrs().values():
        for item in items:
            if item.family == socket.AF_INET:
                assert f"{item.address}:8080" in hosts
    assert not any(host.startswith(("0.0.0.0", "[::]")) for host in hosts)


def test_an_origin_is_allowed_only_when_it_names_an_allowed_host():
    guard = Guard(allowed_hosts([("127.0.0.1", 8080)]))
    assert guard.origin_allowed("http://127.0.0.1:8080") and guard.origin_allowed("http://LOCALHOST:8080/")
    assert guard.origin_allowed("http://[::1]:8080")
    for origin in ["http://127.0.0.1", "http://127.0.0.1:8081", "https://127.0.0.1:8080.evil.example",
                   "http://evil.example", "null", "file://", "http://user@127.0.0.1:8080", "ws://127.0.0.1:8080",
                   "http://127.0.0.1:8080/x", "http://127.0.0.1:notaport"]:
        assert not guard.origin_allowed(origin), origin
    assert guard.host_allowed("127.0.0.1:8080") and not guard.host_allowed("127.0.0.1")
    assert Guard(allowed_hosts([("127.0.0.1", 80)])).host_allowed("localhost")


@pytest.mark.parametrize("value", ["many", "-1", "0", "1e6", "1.5"])
def test_a_limit_in_the_environment_that_is_not_a_number_of_bytes_is_an_error_naming_it(value):
    with pytest.raises(LimitsError, match=f"EXPMGR_MAX_IMPORT_BODY: expected a positive number of bytes, got '{value}'"):
        ServerLimits.from_environment({"EXPMGR_MAX_IMPORT_BODY": value})


def test_limits_set_in_the_environment_are_those_the_server_enforces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert ServerLimits.from_environment({}) == ServerLimits()
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=1, metrics_per_trial=1)
    monkeypatch.setenv("EXPMGR_MAX_BODY", "100")
    monkeypatch.setenv("EXPMGR_MAX_IMPORT_BODY", "200")
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        answer = send(view.port, "PUT", "/api/v1/nni/experiment?update_type=TRIAL_CONCURRENCY",
                      b'{"params": {"trialConcurrency": 2}, "pad": "' + b"x" * 100 + b'"}')
        assert answer.status == 413 and "100 bytes" in answer.error and "EXPMGR_MAX_BODY" in answer.error
        answer = send(view.port, "POST", "/api/v1/nni/experiment/import-data", b"[" + b" " * 150 + b"]")
        assert answer.status == 409, "within its limit: read, and refused by the read-only view"
        answer = send(view.port, "POST", "/api/v1/nni/experiment/import-data", b"[" + b" " * 250 + b"]")
        assert answer.status == 413 and "EXPMGR_MAX_IMPORT_BODY" in answer.error
    finally:
        view.stop()
    monkeypatch.setenv("EXPMGR_MAX_BODY", "lots")
    with pytest.raises(ExperimentError, match="EXPMGR_MAX_BODY: expected a positive number of bytes, got 'lots'"):
        Experiment.view(exp_id, port=0, non_blocking=True, home=home)


def test_a_bad_limit_in_the_environment_stops_a_start_before_anything_is_created(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EXPMGR_MAX_IMPORT_BODY", "16MiB")
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
                              trial_code_directory=code_dir, trial_concurrency=1, tuner={"name": "GridSearch"},
                              experiment_working_directory=tmp_path / "home")
    with pytest.raises(ExperimentError, match="EXPMGR_MAX_IMPORT_BODY: expected a positive number of bytes"):
        Experiment(config).start(port=0)
    assert not (tmp_path / "home").exists()

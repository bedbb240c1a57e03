"""NNI's customized trial (``POST /api/v1/nni/trial-jobs``, the body its parameters): run with
the parameters a user chose, counted against maxTrialNumber, checked against the search
space; refused with a message naming why."""
from __future__ import annotations

import json
import urllib.request

from tests.helpers.common import wait_until
from tests.helpers.server import call, get

API = "/api/v1/nni"


def _parameters_of(port: int, trial_id: str) -> dict:
    job = get(port, f"{API}/trial-jobs/{trial_id}")
    return json.loads(job["hyperParameters"][0])["parameters"]


def test_a_customized_trial_runs_with_its_parameters_and_counts_against_the_budget(stepped):
    port = stepped.port
    before = get(port, f"{API}/experiment")["nextSequenceId"]
    status, answer = call(port, "POST", f"{API}/trial-jobs", {"x": 3})
    assert status == 200, answer
    assert answer["sequenceId"] == before and isinstance(answer["trialJobId"], str)
    trial_id = answer["trialJobId"]
    assert _parameters_of(port, trial_id) == {"x": 3}
    assert get(port, f"{API}/experiment")["nextSequenceId"] == before + 1
    stepped.release()   # the running trials end; the customized one runs in a freed slot
    wait_until(lambda: get(port, f"{API}/trial-jobs/{trial_id}")["status"] == "SUCCEEDED",
               what="the customized trial to succeed")
    final = get(port, f"{API}/trial-jobs/{trial_id}")["finalMetricData"][0]["data"]
    assert json.loads(json.loads(final)) == 3   # NNI's data: the JSON of the reported JSON


def test_a_customized_trial_over_the_budget_is_a_409_saying_so(stepped):
    port = stepped.port
    for x in (1, 2):   # two running, two customized: maxTrialNumber (4) reached
        assert call(port, "POST", f"{API}/trial-jobs", {"x": x})[0] == 200
    status, answer = call(port, "POST", f"{API}/trial-jobs", {"x": 4})
    assert status == 409
    assert answer["error"] == ("maxTrialNumber (4) trials were submitted already; raise maxTrialNumber to add one")


def test_parameters_the_search_space_refuses_are_a_400_naming_the_parameter(stepped):
    port = stepped.port
    refusals = {
        json.dumps({"x": 7}): "parameters.x: choice takes one of 1, 2, 3, 4; got 7",
        json.dumps({"x": "3"}): "parameters.x: choice takes one of 1, 2, 3, 4; got '3'",
        json.dumps({"x": True}): "parameters.x: choice takes one of 1, 2, 3, 4; got True",
        json.dumps({}): "parameters.x: missing: the search space has it (choice)",
        json.dumps({"x": 1, "y": 2}): "parameters.y: not in the search space, whose parameters are x",
        json.dumps([1]): "parameters: expected a JSON object of parameter names to values, got list",
        "{not json": "body: not JSON",
    }
    for body, message in refusals.items():
        request = urllib.request.Request(f"http://127.0.0.1:{port}{API}/trial-jobs", data=body.encode(),
                                         method="POST", headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=30)
            raise AssertionError(f"{body} was accepted")
        except urllib.error.HTTPError as error:
            assert error.code == 400, body
            assert json.loads(error.read())["error"].startswith(message), body
    assert get(port, f"{API}/experiment")["nextSequenceId"] == 2   # nothing refused took a trial number


def test_an_oversized_customized_trial_is_a_413(stepped):
    status, answer = call(stepped.port, "POST", f"{API}/trial-jobs", {"x": 1, "pad": "p" * (2 * 1024 * 1024)})
    assert status == 413 and "body" in answer["error"]


def test_a_read_only_experiment_takes_no_customized_trial(filled_view):
    status, answer = call(filled_view.port, "POST", f"{API}/trial-jobs", {"x": 1})
    assert status == 409 and "read-only" in answer["error"]


def test_ranges_take_numbers_inside_them():
    from expmgr.config import ConfigError, check_parameters
    space = {"lr": {"_type": "loguniform", "_value": [0.001, 0.1]}, "n": {"_type": "randint", "_value": [1, 5]},
             "m": {"_type": "normal", "_value": [0, 1]},
             "net": {"_type": "choice", "_value": [{"_name": "mlp", "width": {"_type": "choice", "_value": [8, 16]}},
                                                   "linear"]}}
    check_parameters({"lr": 0.01, "n": 4, "m": -3.5, "net": {"_name": "mlp", "width": 16}}, space)
    check_parameters({"lr": 0.1, "n": 1, "m": 0, "net": "linear"}, space)
    bad = [({"lr": 0.5, "n": 1, "m": 0, "net": "linear"}, "parameters.lr: loguniform takes a number from 0.001 to 0.1"),
           ({"lr": 0.01, "n": 5, "m": 0, "net": "linear"}, "parameters.n: randint takes an integer from 1 to 4, got 5"),
           ({"lr": 0.01, "n": 2.5, "m": 0, "net": "linear"}, "parameters.n: randint takes an integer"),
           ({"lr": 0.01, "n": 2, "m": "a", "net": "linear"}, "parameters.m: normal takes a finite number, got 'a'"),
           ({"lr": 0.01, "n": 2, "m": 0, "net": {"_name": "mlp", "width": 9}},
            "parameters.net.width: choice takes one of 8, 16; got 9")]
    for parameters, message in bad:
        try:
            check_parameters(parameters, space)
            raise AssertionError(f"{parameters} passed")
        except ConfigError as error:
            assert str(error).startswith(message), str(error)

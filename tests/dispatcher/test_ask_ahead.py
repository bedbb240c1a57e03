"""Asking ahead: the dispatcher computes a harmless tuner's next parameters right after it
answered, and the answers are the ones the tuner gives when asked only when needed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.tuner import NoMoreTrialError
from expmgr.dispatcher.host import DispatcherHost
from expmgr.dispatcher.protocol import read_frame, write_frame
from tests.helpers.common import wait_until

GRID = {"x": {"_type": "choice", "_value": [1, 2, 3]}, "y": {"_type": "quniform", "_value": [0, 1, 0.5]}}
BATCH = {"combine_params": {"_type": "choice", "_value": [{"x": 1}, {"x": 2}, {"x": 1}, {"x": 3}, {"x": 4}]}}


class Session:
    """A dispatcher host driven as ``serve`` drives it: each command, then the work ahead."""

    def __init__(self, tuner: str, space: dict, class_args: dict | None = None) -> None:
        self.host = DispatcherHost()
        self.next_id = 0
        self.send("initialize", search_space=space, tuner={"name": tuner, "classArgs": class_args or {}},
                  assessor=None)

    def send(self, cmd: str, **fields: Any) -> dict:
        reply = self.host.handle({"cmd": cmd, **fields})
        self.host.work_ahead()
        return reply

    def generate(self) -> dict | None:
        """One trial's parameters, told back as a result and an end as the runner does; None: no more."""
        reply = self.send("generate", parameter_ids=[self.next_id])
        if not reply["parameters"]:
            assert reply["no_more"] is True
            return None
        parameters = reply["parameters"][0]["parameters"]
        self.send("report", parameter_id=self.next_id, parameters=parameters, value=0.5)
        self.send("trial_end", parameter_id=self.next_id, trial_id=f"t{self.next_id}", success=True)
        self.next_id += 1
        return parameters


def asked_when_needed(tuner: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    """What the bare tuner gives for the same steps, each generate asked only then."""
    given: list[Any] = []
    for step, argument in steps:
        if step == "generate":
            try:
                given.append(tuner.generate_parameters(len(given)))
            except NoMoreTrialError:
                given.append(None)
        elif step == "space":
            tuner.update_search_space(argument)
        else:
            tuner.import_data(argument)
    return given


def asked_ahead(session: Session, steps: list[tuple[str, Any]]) -> list[Any]:
    given = []
    for step, argument in steps:
        if step == "generate":
            given.append(session.generate())
        elif step == "space":
            session.send("update_search_space", search_space=argument)
        else:
            session.send("import_data", data=argument)
    return given


@pytest.mark.parametrize("name, space", [("GridSearch", GRID), ("Batch", BATCH)])
def test_the_fixed_order_tuners_give_the_same_sequence_with_imports_and_space_updates(name, space):
    smaller = {"x": {"_type": "choice", "_value": [3, 2]}} if name == "GridSearch" else {
        "combine_params": {"_type": "choice", "_value": [{"x": 4}, {"x": 2}, {"x": 5}]}}
    imported = [{"parameter": {"x": 2, "y": 0.5} if name == "GridSearch" else {"x": 1}, "value": 1.0}]
    steps = ([("generate", None)] * 2 + [("import", imported)] + [("generate", None)] * 2
             + [("space", smaller)] + [("generate", None)] * 4)
    tuner = create_tuner(name)
    tuner.update_search_space(space)
    expected = asked_when_needed(tuner, steps)
    assert expected[-1] is None and expected.count(None) < 4, "the steps reach the end of the space"
    session = Session(name, space)
    assert session.host.tuner.ask_ahead_safe
    assert asked_ahead(session, steps) == expected


def test_grid_gives_every_point_once_in_its_order_then_no_more_computed_ahead():
    session = Session("GridSearch", GRID)
    given = []
    while (parameters := session.generate()) is not None:
        given.append(parameters)
    tuner = create_tuner("GridSearch")
    tuner.update_search_space(GRID)
    assert given == tuner.generate_multiple_parameters(list(range(100)))
    assert len(given) == 9
    assert session.generate() is None, "no more stays no more"


def test_random_asked_ahead_repeats_nothing_avoids_imports_fits_a_new_space_and_is_reproducible():
    space = {"x": {"_type": "randint", "_value": [0, 12]}}
    imported = [8, 9, 10, 11]
    narrower = {"x": {"_type": "randint", "_value": [0, 8]}}

    def run() -> tuple[list, list, list]:
        session = Session("Random", space, {"seed": 5})
        before = [session.generate()["x"]]
        session.send("import_data", data=[{"parameter": {"x": x}} for x in imported])
        between = [session.generate()["x"] for _ in range(2)]
        session.send("update_search_space", search_space=narrower)
        after = []
        while (parameters := session.generate()) is not None:
            after.append(parameters["x"])
        return before, between, after

    before, between, after = run()
    assert (before, between, after) == run(), "the same seed gives the same sequence"
    points = before + between + after
    assert len(points) == len(set(points)), "nothing is suggested twice"
    assert not set(between) & set(imported), "what the kept point did not see is seen"
    assert set(points) - set(before) == set(range(8)) - set(before), "the new space, all of it"


def test_only_a_tuner_whose_own_class_declares_it_asks_ahead(tmp_path: Path):
    (tmp_path / "mine.py").write_text(
        "from expmgr.algorithms.random_tuner import RandomTuner\n"
        "class LearningRandom(RandomTuner):   # might learn: it did not declare asking ahead harmless\n"
        "    pass\n")
    space = {"x": {"_type": "uniform", "_value": [0, 1]}}
    for tuner, asks in [({"name": "Random"}, True), ({"name": "TPE"}, False),
                        ({"className": "mine.LearningRandom", "codeDirectory": str(tmp_path)}, False)]:
        host = DispatcherHost()
        host.handle({"cmd": "initialize", "search_space": space, "tuner": tuner, "assessor": None})
        host.handle({"cmd": "generate", "parameter_ids": [0]})
        host.work_ahead()
        assert (host._ahead is not None) is asks, tuner


def test_the_dispatcher_process_computes_the_next_parameters_right_after_it_answered(tmp_path: Path):
    (tmp_path / "counting.py").write_text(
        "from expmgr.algorithms.tuner import Tuner\n"
        "class Counting(Tuner):\n"
        "    ask_ahead_safe = True\n"
        "    def __init__(self):\n"
        "        self.count = 0\n"
        "    def update_search_space(self, space):\n"
        "        pass\n"
        "    def generate_parameters(self, parameter_id, **kwargs):\n"
        "        self.count += 1\n"
        "        print('generated', self.count, flush=True)\n"
        "        return {'n': self.count}\n"
        "    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):\n"
        "        print('told', parameters, flush=True)\n"
        "    def take_back(self, parameters):\n"
        "        self.count -= 1\n")
    log = tmp_path / "dispatcher.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "expmgr.dispatcher", "--log-file", str(log), "--log-level", "debug"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"))
    try:
        write_frame(process.stdin, {"id": 1, "cmd": "initialize", "search_space": {}, "assessor": None,
                                    "tuner": {"className": "counting.Counting", "codeDirectory": str(tmp_path)}})
        assert read_frame(process.stdout) == {"id": 1}
        write_frame(process.stdin, {"id": 2, "cmd": "generate", "parameter_ids": [0]})
        assert read_frame(process.stdout)["parameters"][0]["parameters"] == {"n": 1}
        wait_until(lambda: "generated 2" in log.read_text(), what="the next parameters computed ahead")
        write_frame(process.stdin, {"id": 3, "cmd": "report", "parameter_id": 0, "parameters": {"n": 1},
                                    "value": 1.0})
        assert read_frame(process.stdout) == {"id": 3}
        assert "told {'n': 1}" in log.read_text(), "results are told as ever"
        write_frame(process.stdin, {"id": 4, "cmd": "generate", "parameter_ids": [1]})
        assert read_frame(process.stdout)["parameters"][0]["parameters"] == {"n": 2}
        write_frame(process.stdin, {"id": 5, "cmd": "update_search_space", "search_space": {}})
        write_frame(process.stdin, {"id": 6, "cmd": "generate", "parameter_ids": [2]})
        assert read_frame(process.stdout) == {"id": 5}
        assert read_frame(process.stdout)["parameters"][0]["parameters"] == {"n": 3}, \
            "the kept {'n': 3} was taken back before the update and generated again after it"
    finally:
        process.stdin.close()
        process.wait(timeout=30)

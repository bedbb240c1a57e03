"""A search space update the tuner cannot use is refused by the dispatcher, which goes on
with the tuner as it was (the old space in force)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from expmgr.dispatcher.host import DispatcherHost, SpaceRefused

LOCKED_TUNER = """
    import threading
    from expmgr.algorithms import Tuner

    class LockedTuner(Tuner):
        '''Holds a lock (so it cannot be copied) and refuses a parameter named "bad".'''

        def __init__(self):
            self.lock = threading.Lock()

        def update_search_space(self, search_space):
            if "bad" in search_space:
                raise ValueError("LockedTuner takes no parameter named bad")
            self.space = search_space

        def generate_parameters(self, parameter_id, **kwargs):
            return {name: parameter_id for name in self.space}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""


def test_a_space_a_fresh_tuner_refuses_never_reaches_the_running_one(tmp_path: Path):
    (tmp_path / "locked_tuner_21c.py").write_text(textwrap.dedent(LOCKED_TUNER))
    host = DispatcherHost()
    host.handle({"cmd": "initialize", "search_space": {"x": {"_type": "choice", "_value": [1]}},
                 "tuner": {"className": "locked_tuner_21c.LockedTuner", "codeDirectory": str(tmp_path)}})
    with pytest.raises(SpaceRefused, match=r"^cannot use this search space \(ValueError: LockedTuner takes no "
                                           r"parameter named bad\)$"):
        host.handle({"cmd": "update_search_space", "search_space": {"bad": {"_type": "choice", "_value": [1]}}})
    answer = host.handle({"cmd": "generate", "parameter_ids": [0]})
    assert answer["parameters"] == [{"parameter_id": 0, "parameters": {"x": 0}}]


def test_a_built_in_tuner_refuses_a_space_it_cannot_draw_from_and_keeps_its_own(monkeypatch: pytest.MonkeyPatch):
    from expmgr.algorithms.search_space import ParameterSpec

    real_sample = ParameterSpec.sample
    def sample(spec: ParameterSpec, rng):
        if spec.name == "y":
            raise OverflowError("math range error")
        return real_sample(spec, rng)

    monkeypatch.setattr(ParameterSpec, "sample", sample)
    host = DispatcherHost()
    host.handle({"cmd": "initialize", "search_space": {"x": {"_type": "choice", "_value": [7]}},
                 "tuner": {"name": "Random", "classArgs": {"seed": 1}}})
    with pytest.raises(SpaceRefused, match=r"cannot use this search space \(OverflowError"):
        host.handle({"cmd": "update_search_space", "search_space": {"y": {"_type": "uniform", "_value": [0, 1]}}})
    answer = host.handle({"cmd": "generate", "parameter_ids": [0]})
    assert answer["parameters"] == [{"parameter_id": 0, "parameters": {"x": 7}}]

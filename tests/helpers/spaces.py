"""Search spaces shared by the algorithm tests, checkers that parameters fit them, and a
sequential driver of a tuner on an objective."""
from __future__ import annotations

import math
from collections.abc import Callable

from expmgr.algorithms.tuner import Tuner

EVERY_TYPE = {
    "optimizer": {"_type": "choice", "_value": ["sgd", 2, 3.5]},
    "layers": {"_type": "randint", "_value": [2, 5]},
    "dropout": {"_type": "uniform", "_value": [-1, 1]},
    "width": {"_type": "quniform", "_value": [1, 11, 4]},
    "lr": {"_type": "loguniform", "_value": [1e-3, 1]},
    "batch": {"_type": "qloguniform", "_value": [1, 100, 5]},
    "shift": {"_type": "normal", "_value": [0, 1]},
    "offset": {"_type": "qnormal", "_value": [0, 2, 0.5]},
    "scale": {"_type": "lognormal", "_value": [0, 1]},
    "steps": {"_type": "qlognormal", "_value": [0, 1, 2]},
}

NESTED = {
    "model": {
        "_type": "choice",
        "_value": [
            {"_name": "cnn", "kernel": {"_type": "choice", "_value": [3, 5]},
             "lr": {"_type": "uniform", "_value": [0, 1]}},
            {"_name": "mlp", "layers": {"_type": "randint", "_value": [1, 3]}},
            "linear",
        ],
    },
}


def on_grid(value: float, q: float) -> bool:
    return math.isclose(value / q, round(value / q), abs_tol=1e-9)


def assert_fits_every_type(params: dict) -> None:
    """Fail unless ``params`` is a valid draw from EVERY_TYPE, with NNI's Python types."""
    assert set(params) == set(EVERY_TYPE)
    assert params["optimizer"] in ("sgd", 2, 3.5)
    assert type(params["optimizer"]) in (str, int, float)
    assert type(params["layers"]) is int and 2 <= params["layers"] < 5
    assert type(params["dropout"]) is float and -1 <= params["dropout"] <= 1
    width = params["width"]
    assert type(width) is float and 1 <= width <= 11 and (on_grid(width, 4) or width in (1, 11))
    assert type(params["lr"]) is float and 1e-3 <= params["lr"] <= 1
    batch = params["batch"]
    assert type(batch) is float and 1 <= batch <= 100 and (on_grid(batch, 5) or batch == 1)
    assert type(params["shift"]) is float
    assert type(params["offset"]) is float and on_grid(params["offset"], 0.5)
    assert type(params["scale"]) is float and params["scale"] > 0
    assert type(params["steps"]) is float and params["steps"] >= 0 and on_grid(params["steps"], 2)


def assert_fits_nested(params: dict) -> None:
    """Fail unless ``params`` has NESTED's shape: the chosen option with its own children only."""
    model = params["model"]
    assert set(params) == {"model"}
    if model == "linear":
        return
    if model["_name"] == "cnn":
        assert set(model) == {"_name", "kernel", "lr"}
        assert model["kernel"] in (3, 5) and 0 <= model["lr"] <= 1
    else:
        assert model["_name"] == "mlp" and set(model) == {"_name", "layers"}
        assert model["layers"] in (1, 2)


PLANE = {
    "x": {"_type": "uniform", "_value": [-10, 10]},
    "y": {"_type": "uniform", "_value": [-10, 10]},
}


def bowl(params: dict) -> float:
    """Minimum 0 at (3, -1)."""
    return (params["x"] - 3) ** 2 + (params["y"] + 1) ** 2


def run(tuner: Tuner, space: dict, objective: Callable[[dict], float], trials: int) -> list[tuple[dict, float]]:
    """Sequential trials: generate, evaluate, report, end; returns (parameters, metric) pairs."""
    tuner.update_search_space(space)
    history = []
    for parameter_id in range(trials):
        params = tuner.generate_parameters(parameter_id)
        value = objective(params)
        tuner.receive_trial_result(parameter_id, params, value)
        tuner.trial_end(parameter_id, success=True)
        history.append((params, value))
    return history


def suggested(tuner: Tuner, space: dict, objective: Callable[[dict], float], trials: int) -> list[dict]:
    """The parameters ``run`` hands out, in order."""
    return [params for params, _ in run(tuner, space, objective, trials)]

"""A small real objective: a one-hidden-layer network, trained with numpy on a
synthetic two-circles data set, reporting validation accuracy each epoch."""
import numpy as np

import expmgr


def make_circles(n_points: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two noisy concentric rings: a boundary no linear model can draw."""
    label = rng.integers(0, 2, n_points)
    angle = rng.uniform(0, 2 * np.pi, n_points)
    radius = np.where(label, 1.0, 0.5) + rng.normal(0, 0.12, n_points)
    return np.stack([np.cos(angle) * radius, np.sin(angle) * radius], axis=1), label


def train(params: dict) -> float:
    rng = np.random.default_rng(0)
    x, y = make_circles(1200, rng)
    x_train, y_train, x_val, y_val = x[:900], y[:900], x[900:], y[900:]
    hidden = params["hidden_units"]
    w1 = rng.normal(0, 1.0, (2, hidden))
    b1 = np.zeros(hidden)
    w2 = rng.normal(0, 1.0 / np.sqrt(hidden), hidden)
    b2 = 0.0
    accuracy = 0.0
    for epoch in range(params["epochs"]):
        for start in range(0, len(x_train), params["batch_size"]):
            xb = x_train[start:start + params["batch_size"]]
            yb = y_train[start:start + params["batch_size"]]
            h = np.tanh(xb @ w1 + b1)
            p = 1 / (1 + np.exp(-(h @ w2 + b2)))
            grad_out = (p - yb) / len(xb)
            grad_h = np.outer(grad_out, w2) * (1 - h ** 2)
            w2 -= params["lr"] * (h.T @ grad_out + params["weight_decay"] * w2)
            b2 -= params["lr"] * grad_out.sum()
            w1 -= params["lr"] * (xb.T @ grad_h + params["weight_decay"] * w1)
            b1 -= params["lr"] * grad_h.sum(axis=0)
        val_p = 1 / (1 + np.exp(-(np.tanh(x_val @ w1 + b1) @ w2 + b2)))
        accuracy = float(((val_p > 0.5) == y_val).mean())
        expmgr.report_intermediate_result(accuracy)
    return accuracy


if __name__ == "__main__":
    defaults = {"lr": 0.1, "hidden_units": 32, "batch_size": 32, "epochs": 10, "weight_decay": 1e-4}
    defaults.update(expmgr.get_next_parameter())
    expmgr.report_final_result(train(defaults))

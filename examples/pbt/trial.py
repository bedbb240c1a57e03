"""One PBT generation: continue the circles network from the checkpoint folder (when
the member has one), train EPOCHS_PER_GENERATION more epochs with this generation's
hyperparameters, save the checkpoint back and report validation accuracy."""
import os
import sys

import numpy as np

import expmgr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quickstart"))
from trial import make_circles  # noqa: E402  (the quickstart's data set)

EPOCHS_PER_GENERATION = 3
HIDDEN_UNITS = 16
BATCH_SIZE = 32


def load_or_init(path: str, rng: np.random.Generator) -> dict:
    if os.path.exists(path):
        with np.load(path) as saved:
            return {name: saved[name] for name in saved.files}
    return {"w1": rng.normal(0, 1.0, (2, HIDDEN_UNITS)), "b1": np.zeros(HIDDEN_UNITS),
            "w2": rng.normal(0, 1.0 / np.sqrt(HIDDEN_UNITS), HIDDEN_UNITS), "b2": np.zeros(()),
            "epochs": np.zeros((), dtype=int)}


def main() -> None:
    params = expmgr.get_next_parameter() or {"lr": 0.1, "weight_decay": 1e-4}
    rng = np.random.default_rng(0)
    x, y = make_circles(1200, rng)
    x_train, y_train, x_val, y_val = x[:900], y[:900], x[900:], y[900:]
    checkpoint = os.path.join(expmgr.get_checkpoint_dir(), "model.npz")
    state = load_or_init(checkpoint, rng)
    print(f"starting at epoch {int(state['epochs'])} with {params}")
    w1, b1, w2, b2 = state["w1"], state["b1"], state["w2"], float(state["b2"])
    lr, decay = params["lr"], params["weight_decay"]
    accuracy = 0.0
    for _ in range(EPOCHS_PER_GENERATION):
        for start in range(0, len(x_train), BATCH_SIZE):
            xb, yb = x_train[start:start + BATCH_SIZE], y_train[start:start + BATCH_SIZE]
            h = np.tanh(xb @ w1 + b1)
            p = 1 / (1 + np.exp(-(h @ w2 + b2)))
            grad_out = (p - yb) / len(xb)
            grad_h = np.outer(grad_out, w2) * (1 - h ** 2)
            w2 -= lr * (h.T @ grad_out + decay * w2)
            b2 -= lr * grad_out.sum()
            w1 -= lr * (xb.T @ grad_h + decay * w1)
            b1 -= lr * grad_h.sum(axis=0)
        val_p = 1 / (1 + np.exp(-(np.tanh(x_val @ w1 + b1) @ w2 + b2)))
        accuracy = float(((val_p > 0.5) == y_val).mean())
        expmgr.report_intermediate_result(accuracy)
    np.savez(checkpoint, w1=w1, b1=b1, w2=w2, b2=np.array(b2), epochs=state["epochs"] + EPOCHS_PER_GENERATION)
    expmgr.report_final_result(accuracy)


if __name__ == "__main__":
    main()

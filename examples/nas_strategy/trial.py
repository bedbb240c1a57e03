"""One candidate architecture: an MLP of the given depth, width and activation,
trained with numpy on the two-circles data set; reports validation accuracy."""
import logging

import numpy as np

import expmgr

ACTIVATIONS = {
    "tanh": (np.tanh, lambda y: 1 - y ** 2),
    "relu": (lambda x: np.maximum(x, 0), lambda y: (y > 0).astype(float)),
}


def make_circles(n_points: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    label = rng.integers(0, 2, n_points)
    angle = rng.uniform(0, 2 * np.pi, n_points)
    radius = np.where(label, 1.0, 0.5) + rng.normal(0, 0.12, n_points)
    return np.stack([np.cos(angle) * radius, np.sin(angle) * radius], axis=1), label


def train(arch: dict, epochs: int = 12, lr: float = 0.3) -> float:
    rng = np.random.default_rng(0)
    x, y = make_circles(1200, rng)
    x_train, y_train, x_val, y_val = x[:900], y[:900], x[900:], y[900:]
    act, act_grad = ACTIVATIONS[arch["activation"]]
    sizes = [2] + [arch["width"]] * arch["depth"] + [1]
    weights = [rng.normal(0, 1 / np.sqrt(a), (a, b)) for a, b in zip(sizes, sizes[1:])]
    biases = [np.zeros(b) for b in sizes[1:]]

    def forward(batch: np.ndarray) -> list[np.ndarray]:
        outputs = [batch]
        for layer, (w, b) in enumerate(zip(weights, biases)):
            z = outputs[-1] @ w + b
            outputs.append(1 / (1 + np.exp(-z)) if layer == len(weights) - 1 else act(z))
        return outputs

    accuracy = 0.0
    for epoch in range(epochs):
        for start in range(0, len(x_train), 32):
            outputs = forward(x_train[start:start + 32])
            grad = (outputs[-1][:, 0] - y_train[start:start + 32])[:, None] / len(outputs[0])
            for layer in range(len(weights) - 1, -1, -1):
                grad_w, grad_b = outputs[layer].T @ grad, grad.sum(axis=0)
                if layer:
                    grad = (grad @ weights[layer].T) * act_grad(outputs[layer])
                weights[layer] -= lr * grad_w
                biases[layer] -= lr * grad_b
        accuracy = float(((forward(x_val)[-1][:, 0] > 0.5) == y_val).mean())
        expmgr.report_intermediate_result(accuracy)
        logging.getLogger("nni.nas.trial").info("epoch %d: accuracy %.3f", epoch, accuracy)  # -> trial.log
    return accuracy


if __name__ == "__main__":
    architecture = {"depth": 1, "width": 8, "activation": "tanh"}
    architecture.update(expmgr.get_next_parameter())
    expmgr.report_final_result(train(architecture))

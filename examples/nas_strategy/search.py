"""A multi-trial architecture search written as an expmgr strategy: evaluate a
first population of architectures, then mutate the best ones for a few rounds.

    python search.py            # from this folder; prints the best architecture
"""
import logging
import random
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig

logger = logging.getLogger("nni.nas.search")  # any nni.* logger: routed to this experiment's log

SPACE = {"depth": [1, 2, 3], "width": [4, 8, 16, 32], "activation": ["tanh", "relu"]}


def mutate(architecture: dict, rng: random.Random) -> dict:
    child = dict(architecture)
    key = rng.choice(sorted(SPACE))
    child[key] = rng.choice([value for value in SPACE[key] if value != architecture[key]])
    return child


def evolution(experiment: Experiment, population: int = 4, rounds: int = 3) -> None:
    rng = random.Random(0)
    scored = []
    candidates = [{key: rng.choice(values) for key, values in SPACE.items()} for _ in range(population)]
    for round_number in range(rounds):
        handles = [experiment.submit_trial(candidate) for candidate in candidates]
        for handle in handles:
            outcome = handle.wait()
            if outcome.value is not None:
                scored.append((outcome.value, handle.parameters))
        scored.sort(key=lambda item: item[0], reverse=True)
        logger.info("round %d: best so far %.3f with %s", round_number + 1, *scored[0])
        candidates = [mutate(parent, rng) for _, parent in scored[:2] for _ in range(population // 2)]


def main() -> int:
    config = ExperimentConfig(
        experiment_name="nas-evolution",
        trial_command=f"{sys.executable} trial.py",
        trial_code_directory=Path(__file__).resolve().parent,
        trial_concurrency=2,
        max_trial_number=12,
    )
    experiment = Experiment(config, strategy=evolution)
    succeeded = experiment.run(port=8081)
    best = experiment.best_trial()
    if best is not None:
        experiment.logger.info("best architecture: %s (accuracy %.3f)", best.parameter, best.value)
    return 0 if succeeded else 1


if __name__ == "__main__":
    sys.exit(main())

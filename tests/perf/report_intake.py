"""Benchmark: what one intermediate report of an assessor-backed trial costs the manager's
event loop, early in the trial and 10,000 reports into it.

    .venv/bin/python tests/perf/report_intake.py [--reports 10000] [--window 20] [--rounds 3]

A real ``TrialRunner`` over a real SQLite store (in a temporary folder) runs one trial
with an assessor configured; the training service and the dispatcher are in-process
stand-ins (the dispatcher answers each ``assess`` at once with "keep"), so what is timed
is the runner's own work for a report: checking it, storing it, and building the
assessor's request (``receive_metric`` and the assessment task it starts, until the
dispatcher is asked). Each round runs a fresh trial and POSTs ``--reports`` reports
through ``receive_metric``, as the REST handler does; the median cost of the
``--window`` reports around the 10th and around the last is kept. Prints each round and
the ratio last / 10th of the medians over the rounds (the 10th is the baseline,
measured in the same run); target: within 1.2 (20 %). Not part of the test run: it
measures, it does not assert. What the dispatcher does with the history (NNI's
assessors are sent the whole history) is the dispatcher process's, not timed here.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from expmgr import trial as trial_api  # noqa: E402
from expmgr.config import ExperimentConfig, ResolvedConfig  # noqa: E402
from expmgr.engine.runner import TrialRunner  # noqa: E402
from expmgr.layout import ExperimentPaths  # noqa: E402
from expmgr.states import ExperimentState  # noqa: E402
from expmgr.store import ExperimentProfile, create_store  # noqa: E402
from expmgr.training import TrialEvents, TrialLaunch  # noqa: E402


class QuietService:
    """Starts each trial at once and runs it until told to stop (duck-typed: the runner
    calls only these)."""

    def __init__(self, events: TrialEvents) -> None:
        self.events = events
        self.launched: list[TrialLaunch] = []
        self.files = NoTrialFiles()

    async def start(self) -> None:
        pass

    def has_capacity(self) -> bool:
        return True

    def waiting_reason(self) -> str | None:
        return None

    async def launch(self, trial: TrialLaunch) -> None:
        self.launched.append(trial)
        self.events.trial_started(trial.trial_id, trial.attempt, None)

    def signal(self, trial_id: str, signum: int) -> bool:
        return True

    async def stop(self, grace_period: float, signum: int = 15) -> None:
        for trial in self.launched:
            self.events.trial_exited(trial.trial_id, trial.attempt, None, signum)
        self.launched.clear()

    def manager_host(self) -> str:
        return "127.0.0.1"


class NoTrialFiles:
    """The trials' files as the runner reads them: none (duck-typed, as the service)."""

    def last_output_time(self, trial_id: str) -> float:
        return 0.0

    def marked_preempting(self, trial_id: str, attempt: int) -> bool:
        return False

    def unsent_reports(self, trial_id: str) -> list[tuple[int, bytes | None]]:
        return []

    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        return reason

    def checkpoint_dir(self, trial_id: str) -> str:
        return f"/nowhere/{trial_id}"


class KeepingDispatcher:
    """One trial's parameters, then no more; every assessment answered "keep" at once.
    Speaks both the frame-level calls of main's runner and the typed ones."""

    def __init__(self) -> None:
        self.exited = asyncio.Event()
        self.failure = None
        self.generated = False
        self.assessments = 0

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.exited.set()

    async def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        if cmd == "generate":
            first, self.generated = not self.generated, True
            return {"parameters": [{"parameters": {"x": 0}}] if first else []}
        if cmd == "assess":
            self.assessments += 1
            return {"decision": "Good"}
        return {}

    def notify(self, cmd: str, **fields: Any) -> None:
        pass

    def notify_import(self, history: list[Any]) -> None:
        pass

    # The typed calls (expmgr.engine.dispatching.Dispatcher), where the runner has them.
    async def initialize(self, search_space: Any, tuner: Any, assessor: Any) -> None:
        pass

    async def generate(self, parameter_id: int) -> Any:
        from expmgr.dispatcher.answers import Generated, NoMoreTrials
        first, self.generated = not self.generated, True
        return Generated({"x": 0}) if first else NoMoreTrials()

    async def assess(self, trial_id: str, history: Any) -> Any:
        from expmgr.dispatcher.answers import Assessment
        self.assessments += 1
        return Assessment.KEEP

    def tell_result(self, parameter_id: int, parameters: Any, value: Any) -> None:
        pass

    def tell_end(self, parameter_id: int, trial_id: str, success: bool, *, assessor_only: bool = False) -> None:
        pass

    def replay_results(self, history: list[Any]) -> None:
        pass


async def one_round(folder: Path, reports: int, window: int) -> tuple[float, float]:
    """Median microseconds of the reports around the 10th and around the last."""
    code = folder / "code"
    code.mkdir()
    config = ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="python3 trial.py",
        trial_code_directory=code, tuner={"name": "GridSearch"}, assessor={"name": "Medianstop"},
        experiment_working_directory=folder / "home", trial_concurrency=1))
    paths = ExperimentPaths(folder / "home" / "bench")
    paths.create()
    store = create_store(paths, ExperimentProfile(
        id="bench", name=None, config=config.to_dict(), status=ExperimentState.INITIALIZED, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(paths.root),
        platform="local", minimizes=config.minimizes))
    services: list[QuietService] = []
    dispatcher = KeepingDispatcher()
    logger = logging.getLogger("report-intake-bench")
    logger.setLevel(logging.WARNING)

    def service(events: TrialEvents) -> QuietService:
        services.append(QuietService(events))
        return services[0]

    runner = TrialRunner("bench", config, store, paths, 8080, logger, training=service,  # type: ignore[arg-type]
                         dispatcher=dispatcher)  # type: ignore[arg-type]
    running = asyncio.get_running_loop().create_task(runner.run())
    while not services or not services[0].launched:
        await asyncio.sleep(0.001)
    trial = services[0].launched[0]
    token = trial.env[trial_api.ENV_TOKEN]
    costs: list[float] = []
    for sequence in range(reports):
        report = {"attempt": trial.attempt, "sequence": sequence, "type": "PERIODICAL", "value": 0.5 + sequence * 1e-6}
        before = set(runner._tasks)
        started = time.perf_counter()
        runner.receive_metric(trial.trial_id, token, report)
        await asyncio.gather(*(runner._tasks - before))  # the assessment it started, up to its answer
        costs.append(time.perf_counter() - started)
    runner.request_stop()
    await running
    store.close()
    if dispatcher.assessments != reports:
        raise RuntimeError(f"{dispatcher.assessments} assessments for {reports} reports: the benchmark is broken")
    early = costs[max(0, 10 - 1 - window // 2):10 - 1 + window // 2 + 1]
    late = costs[-window:]
    return statistics.median(early) * 1e6, statistics.median(late) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    early_all, late_all = [], []
    for number in range(args.rounds):
        with tempfile.TemporaryDirectory() as folder:
            early, late = asyncio.run(one_round(Path(folder), args.reports, args.window))
        early_all.append(early)
        late_all.append(late)
        print(f"round {number + 1}: report ~10: {early:8.0f} us   report ~{args.reports:,}: {late:8.0f} us   "
              f"ratio {late / early:.2f}")
    early, late = statistics.median(early_all), statistics.median(late_all)
    print(f"median over {args.rounds} rounds: report ~10: {early:.0f} us, report ~{args.reports:,}: {late:.0f} us, "
          f"ratio {late / early:.2f} (target: within 1.2)")


if __name__ == "__main__":
    main()

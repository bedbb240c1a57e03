"""The trial runner's decisions, in-process: a fake training service, a fake dispatcher and
an injected clock drive a real ``TrialRunner`` over a real SQLite store in ``tmp_path``.
No process is started, so each test takes well under a second; the real-process
behaviour of a service is tests/training/test_contract.py's."""
from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path, PurePath
from typing import Any, Awaitable, Callable, Iterable, Sequence

import pytest

from expmgr import trial as trial_api
from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.engine.dispatching import (Assessment, Dispatcher, DispatcherError, GenerateAnswer, Generated,
                                       NoMoreTrials)
from expmgr.engine.errors import RefusalKind, UpdateRefused
from expmgr.engine.runner import TrialRunner
from expmgr.layout import ExperimentPaths
from expmgr.logreader import LogFile
from expmgr.states import ExperimentState, TrialState
from expmgr.store import ExperimentProfile, WritableStore, create_store
from expmgr.engine.launching import RETRY_FIRST, RETRY_MAX
from expmgr.training import SystemLaunchError, TrainingService, TrialEvents, TrialFiles, TrialLaunch

DEADLINE = 2.0
"""Real seconds a test waits for the runner to do what it must (it takes milliseconds)."""


class FakeTrainingService(TrainingService):
    """Records launches and signals; the test fires the trials' events."""

    def __init__(self, events: TrialEvents) -> None:
        self.events = events
        self.launched: list[TrialLaunch] = []
        self.running: dict[str, int] = {}
        self.most_running = 0
        self.signals: list[tuple[str, int]] = []
        self.files = FakeTrialFiles()
        self.output_time = self.files.output_time
        self.start_on_launch = True
        """Report trial_started from launch() (as the local service does); False: the test decides."""
        self.system_trouble: str | None = None
        """While set, launch() raises SystemLaunchError with it (a full disk, no descriptor)."""
        self.refused: list[tuple[str, int]] = []
        """(trial id, attempt) of each launch refused so."""
        self.no_capacity: str | None = None
        """While set, has_capacity() is False and this is the waiting reason (no free GPU)."""

    async def start(self) -> None:
        pass

    def has_capacity(self) -> bool:
        return self.no_capacity is None

    def waiting_reason(self) -> str | None:
        return self.no_capacity

    async def launch(self, trial: TrialLaunch) -> None:
        if self.system_trouble is not None:
            self.refused.append((trial.trial_id, trial.attempt))
            raise SystemLaunchError(self.system_trouble)
        self.launched.append(trial)
        self.running[trial.trial_id] = trial.attempt
        self.most_running = max(self.most_running, len(self.running))
        if self.start_on_launch:
            self.events.trial_started(trial.trial_id, trial.attempt, None, host="node-1")

    def signal(self, trial_id: str, signum: int) -> bool:
        self.signals.append((trial_id, signum))
        return trial_id in self.running

    async def stop(self, grace_period: float, signum: int = 15) -> None:
        for trial_id in list(self.running):
            self.exit(trial_id, None, signum)

    def exit(self, trial_id: str, exit_code: int | None, signum: int | None = None) -> None:
        self.events.trial_exited(trial_id, self.running.pop(trial_id), exit_code, signum)

    def manager_host(self) -> str:
        return "manager.example"

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        return False


class FakeTrialFiles(TrialFiles):
    """The trials' files as the runner reads them: none, save each trial's last output time."""

    def __init__(self) -> None:
        self.output_time: dict[str, float] = {}

    def log(self, trial_id: str, name: str) -> LogFile:
        return LogFile(Path("/fake"), PurePath(trial_id) / name)

    def folder(self, trial_id: str) -> str:
        return f"/fake/{trial_id}"

    def url(self, trial_id: str, name: str | None = None) -> str:
        return f"file://localhost:/fake/{trial_id}" + (f"/{name}" if name else "")

    def last_output_time(self, trial_id: str) -> float:
        return self.output_time.get(trial_id, 0.0)

    def marked_preempting(self, trial_id: str, attempt: int) -> bool:
        return False

    def unsent_reports(self, trial_id: str) -> Iterable[tuple[int, bytes | None]]:
        return []

    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        return f"{trial_id}:{line_number}: report skipped: {reason}"

    def checkpoint_dir(self, trial_id: str) -> str:
        return f"/fake/{trial_id}/checkpoint"

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        pass


class FakeDispatcher:
    """Answers ``generate`` with the given parameters, then "no more"; records what it is
    told, by the channel's command names. Checked against the Dispatcher protocol by mypy
    (pyproject.toml's ``files``) through ``_CHECKED`` below."""

    def __init__(self, parameters: list[dict[str, Any]]) -> None:
        self._parameters = list(parameters)
        self.told: list[tuple[str, dict[str, Any]]] = []
        self.exited = asyncio.Event()
        self.failure: DispatcherError | None = None
        self.refuse_spaces = False
        """Answer ``update_search_space`` as a tuner refusing the space does (not fatal)."""

    async def start(self) -> None:
        pass

    async def initialize(self, search_space: dict[str, Any] | None, tuner: dict[str, Any] | None,
                         assessor: dict[str, Any] | None) -> None:
        self.told.append(("initialize", {"search_space": search_space, "tuner": tuner, "assessor": assessor}))

    async def generate(self, parameter_id: int) -> GenerateAnswer:
        return Generated(self._parameters.pop(0)) if self._parameters else NoMoreTrials()

    async def assess(self, trial_id: str, history: Sequence[Any]) -> Assessment:
        self.told.append(("assess", {"trial_id": trial_id, "history": list(history)}))
        return Assessment.KEEP

    def tell_result(self, parameter_id: int, parameters: dict[str, Any], value: Any) -> None:
        self.told.append(("report", {"parameter_id": parameter_id, "parameters": parameters, "value": value}))

    def tell_end(self, parameter_id: int, trial_id: str, success: bool, *, assessor_only: bool = False) -> None:
        self.told.append(("trial_end", {"parameter_id": parameter_id, "trial_id": trial_id, "success": success,
                                        "assessor_only": assessor_only}))

    async def update_search_space(self, search_space: dict[str, Any]) -> None:
        self.told.append(("update_search_space", {"search_space": search_space}))
        if self.refuse_spaces:
            raise DispatcherError("cannot use this search space (ValueError: no)", fatal=False)

    def replay_results(self, history: list[Any]) -> None:
        pass

    async def import_frames(self, frames: Iterable[Sequence[Any]],
                            before_each: Callable[[Sequence[Any]], None] | None = None) -> int:
        return 0

    async def stop(self) -> None:
        self.exited.set()

    def trial_ends(self) -> list[tuple[str, bool]]:
        return [(fields["trial_id"], fields["success"]) for cmd, fields in self.told if cmd == "trial_end"]


_CHECKED: Callable[[list[dict[str, Any]]], Dispatcher] = FakeDispatcher
"""mypy checks here that the fake implements the runner's Dispatcher protocol."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, runner: TrialRunner, service: FakeTrainingService, dispatcher: FakeDispatcher,
                 store: WritableStore, clock: Clock) -> None:
        self.runner, self.service, self.dispatcher, self.store, self.clock = runner, service, dispatcher, store, clock

    async def until(self, condition: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.001)

    def advance(self, seconds: float) -> None:
        """Move the injected clock on and let the loop look at its deadlines."""
        self.clock.now += seconds
        self.runner._wake.set()  # the loop's timer runs on real time; the test's clock moved

    def status(self, trial_id: str) -> TrialState:
        record = self.store.trial(trial_id)
        assert record is not None
        return record.status


def run_with(tmp_path: Path, parameters: list[dict[str, Any]],
             test: Callable[[Harness], Awaitable[None]], **config: Any) -> ExperimentState:
    """Run a TrialRunner with fakes until ``test`` returns and the runner ends; its final state."""
    code = tmp_path / "code"
    code.mkdir()
    checked = ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="python3 trial.py",
        trial_code_directory=code, tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home",
        **{"trial_concurrency": 1, "trial_grace_period": 60, **config}))
    paths = ExperimentPaths(tmp_path / "home" / "exp")
    paths.create()
    store = create_store(paths, ExperimentProfile(
        id="exp", name=None, config=checked.to_dict(), status=ExperimentState.INITIALIZED, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(paths.root),
        platform="local", minimizes=checked.minimizes))
    services: list[FakeTrainingService] = []
    dispatcher, clock = FakeDispatcher(parameters), Clock()

    def make_service(events: TrialEvents) -> FakeTrainingService:
        services.append(FakeTrainingService(events))
        return services[0]

    async def main() -> ExperimentState:
        runner = TrialRunner("exp", checked, store, paths, 8080, logging.getLogger("test-runner"),
                             training=make_service, dispatcher=dispatcher, clock=clock)
        running = asyncio.get_running_loop().create_task(runner.run())
        try:
            await test(Harness(runner, services[0], dispatcher, store, clock))
        finally:
            runner.request_stop()
        return await asyncio.wait_for(running, DEADLINE)

    try:
        return asyncio.run(main())
    finally:
        store.close()


def test_never_more_than_trial_concurrency_trials_run(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 2, "two launches")
        await asyncio.sleep(0.01)  # room for a wrong third launch
        assert len(h.service.running) == 2
        for _ in range(5):
            trial_id = next(iter(h.service.running))
            h.service.exit(trial_id, 0)
            await h.until(lambda: h.status(trial_id) == TrialState.SUCCEEDED, "a trial to succeed")
            await asyncio.sleep(0.005)
        await h.until(lambda: len(h.dispatcher.trial_ends()) == 5, "five trial ends")
        assert h.service.most_running == 2
        assert len(h.service.launched) == 5

    final = run_with(tmp_path, [{"x": i} for i in range(5)], test, trial_concurrency=2, max_trial_number=5)
    assert final in (ExperimentState.DONE, ExperimentState.STOPPED)


def test_trials_wait_for_the_services_capacity_with_its_reason_within_trial_concurrency(tmp_path: Path):
    def reasons(h: Harness) -> list[tuple[TrialState, str | None]]:
        return [(t.status, t.waiting_reason) for t in h.store.trials()]

    async def test(h: Harness) -> None:
        # Set before the runner's task first runs: there is no capacity from the start.
        h.service.no_capacity = "waiting for a GPU: GPU 0 is used by another process"
        await h.until(lambda: len(h.store.trials()) == 2, "two trials created")
        await h.until(lambda: reasons(h) == [(TrialState.WAITING, h.service.no_capacity)] * 2,
                      "both waiting with the reason")
        await asyncio.sleep(0.01)  # room for a wrong third trial or launch
        assert len(h.store.trials()) == 2 and h.service.launched == [], "trialConcurrency 2: two wait"

        h.service.no_capacity = None
        h.service.events.capacity_changed()
        await h.until(lambda: len(h.service.running) == 2, "both started once there is capacity")
        assert reasons(h) == [(TrialState.RUNNING, None)] * 2

        # A failed attempt's retry waits too, and says why.
        h.service.no_capacity = "waiting for a GPU: GPU 0 runs 1 trial(s)"
        failing = h.service.launched[0].trial_id
        h.service.exit(failing, 1)
        await h.until(lambda: reasons(h)[0] == (TrialState.WAITING, h.service.no_capacity),
                      "the retry waiting with the reason")
        h.service.no_capacity = None
        h.service.events.capacity_changed()
        await h.until(lambda: h.status(failing) == TrialState.RUNNING, "the retry started")
        assert [launch.attempt for launch in h.service.launched if launch.trial_id == failing] == [1, 2]

    run_with(tmp_path, [{"x": i} for i in range(4)], test, trial_concurrency=2, max_trial_number=4,
             max_trial_retries=1)


def test_a_failed_attempt_is_retried_as_the_same_trial_while_retries_allow(tmp_path: Path):
    async def test(h: Harness) -> None:
        for attempt in (1, 2, 3):
            await h.until(lambda: len(h.service.launched) == attempt, f"attempt {attempt}")
            launch = h.service.launched[-1]
            assert (launch.trial_id, launch.attempt) == (h.service.launched[0].trial_id, attempt)
            h.service.exit(launch.trial_id, 1)
        trial_id = h.service.launched[0].trial_id
        await h.until(lambda: h.status(trial_id) == TrialState.FAILED, "the trial to fail for good")
        await asyncio.sleep(0.01)
        assert len(h.service.launched) == 3, "maxTrialRetries 2: three attempts, no fourth"
        assert h.dispatcher.trial_ends() == [(trial_id, False)], "the tuner hears of the trial once"

    run_with(tmp_path, [{"x": 0}], test, max_trial_retries=2, max_trial_number=1)


def test_the_service_is_given_the_trials_parameters_and_makes_its_folder_itself(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the first attempt")
        first = h.service.launched[0]
        assert first.parameter_record == {"parameter_id": 0, "parameter_source": "algorithm",
                                          "parameters": {"x": 7}, "parameter_index": 0}
        assert "EXPMGR_TRIAL_DIR" not in first.env, "the folder, and its variable, are the service's"
        assert first.env["EXPMGR_TRIAL_ID"] == first.trial_id and first.env["EXPMGR_TRIAL_ATTEMPT"] == "1"
        assert not h.runner.paths.trial_dir(first.trial_id).exists(), "the runner makes no trial folder"
        await h.until(lambda: h.store.attempts(first.trial_id), "the attempt recorded")
        assert [a.host for a in h.store.attempts(first.trial_id)] == ["node-1"], "the host the service named"
        h.service.exit(first.trial_id, 1)
        await h.until(lambda: len(h.service.launched) == 2, "the retry")
        retry = h.service.launched[1]
        assert (retry.trial_id, retry.attempt, retry.parameter_record) \
            == (first.trial_id, 2, first.parameter_record), "a retry runs with the same parameters"
        assert retry.env["EXPMGR_TRIAL_TOKEN"] != first.env["EXPMGR_TRIAL_TOKEN"], "each attempt its own token"

    run_with(tmp_path, [{"x": 7}], test, max_trial_retries=1, max_trial_number=1)


def test_a_preempted_lost_trial_is_requeued_first_and_a_lost_one_crashes(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the first launch")
        first = h.service.launched[0]
        h.service.running.pop(first.trial_id)
        h.service.events.trial_lost(first.trial_id, 1, "its node was reclaimed", preempted=True)
        await h.until(lambda: len(h.service.launched) == 2, "a launch after the preemption")
        again = h.service.launched[1]
        assert (again.trial_id, again.attempt) == (first.trial_id, 2), "the preempted trial runs again first"
        assert [a.status for a in h.store.attempts() if a.trial_id == first.trial_id][0] == TrialState.PREEMPTED
        h.service.running.pop(first.trial_id)
        h.service.events.trial_lost(first.trial_id, 2, "its node is unreachable")
        await h.until(lambda: h.status(first.trial_id) == TrialState.CRASHED, "the lost trial to crash")
        await h.until(lambda: len(h.service.launched) == 3, "the next trial")
        assert h.service.launched[2].trial_id != first.trial_id

    run_with(tmp_path, [{"x": 0}, {"x": 1}], test, max_trial_number=2)


def test_max_trial_duration_tells_the_service_to_signal_the_trial(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the launch")
        trial_id = h.service.launched[0].trial_id
        h.advance(9)
        await asyncio.sleep(0.01)
        assert h.service.signals == []
        h.advance(2)
        await h.until(lambda: h.service.signals == [(trial_id, signal.SIGTERM)], "SIGTERM at maxTrialDuration")
        h.service.exit(trial_id, None, signal.SIGTERM)
        await h.until(lambda: h.status(trial_id) == TrialState.EARLY_STOPPED, "EARLY_STOPPED")

    run_with(tmp_path, [{"x": 0}], test, max_trial_duration=10, max_trial_number=1)


def test_trial_idle_timeout_counts_from_the_services_last_output_time(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the launch")
        trial_id = h.service.launched[0].trial_id
        h.service.output_time[trial_id] = h.clock.now + 4  # it wrote output 4 s in
        h.advance(6)   # silent for 5 s by the runner's count, 2 s by its output
        await asyncio.sleep(0.01)
        assert h.service.signals == [], "output the service saw counts as activity"
        h.advance(4)   # now silent for 6 s
        await h.until(lambda: h.service.signals == [(trial_id, signal.SIGTERM)], "SIGTERM after trialIdleTimeout")
        h.service.exit(trial_id, None, signal.SIGTERM)
        await h.until(lambda: h.status(trial_id) == TrialState.CRASHED, "CRASHED")

    run_with(tmp_path, [{"x": 0}], test, trial_idle_timeout=5, max_trial_number=1)


def test_trial_clocks_start_when_its_process_starts_not_at_the_launch(tmp_path: Path):
    async def test(h: Harness) -> None:
        h.service.start_on_launch = False  # a remote service placing it: it waits for resources
        await h.until(lambda: len(h.service.launched) == 1, "the launch")
        trial_id = h.service.launched[0].trial_id
        h.advance(60)  # far past both limits while it waits
        await asyncio.sleep(0.01)
        assert h.service.signals == [], "a trial waiting to be placed is neither over time nor idle"
        h.service.events.trial_started(trial_id, 1, 4242, host="node-2")
        h.advance(4)
        await asyncio.sleep(0.01)
        assert h.service.signals == []
        h.advance(2)  # 6 s after its start: idle past trialIdleTimeout (5 s)
        await h.until(lambda: h.service.signals == [(trial_id, signal.SIGTERM)], "SIGTERM after trialIdleTimeout")
        h.service.exit(trial_id, None, signal.SIGTERM)
        await h.until(lambda: h.status(trial_id) == TrialState.CRASHED, "CRASHED")

    run_with(tmp_path, [{"x": 0}], test, trial_idle_timeout=5, max_trial_duration=10, max_trial_number=1)


def test_a_launch_that_fails_after_it_returned_ends_the_trial_failed(tmp_path: Path):
    async def test(h: Harness) -> None:
        h.service.start_on_launch = False
        await h.until(lambda: len(h.service.launched) == 1, "the launch")
        first = h.service.launched[0]
        assert first.env["EXPMGR_MANAGER_HOST"] == "manager.example", "the service names the manager's host"
        h.service.running.pop(first.trial_id)
        h.service.events.trial_launch_failed(first.trial_id, 1, "no node could take it")
        await h.until(lambda: h.status(first.trial_id) == TrialState.FAILED, "FAILED")
        assert h.dispatcher.trial_ends() == [(first.trial_id, False)]
        await h.until(lambda: len(h.service.launched) == 2, "the next trial's launch")

    run_with(tmp_path, [{"x": 0}, {"x": 1}], test, max_trial_number=2)


def test_a_launch_the_system_refuses_leaves_the_trial_waiting_and_pauses_launching_with_backoff(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """No free descriptor, a full disk: the trial never ran, so it is not FAILED, uses no
    retry and no budget; launching pauses (said once), the same attempt is tried again
    after RETRY_FIRST s, doubling to RETRY_MAX, and once a launch succeeds it goes on."""
    caplog.set_level(logging.DEBUG, logger="test-runner")

    async def test(h: Harness) -> None:
        h.service.system_trouble = "cannot start trial: [Errno 24] Too many open files"
        await h.until(lambda: h.service.refused, "the first launch refused")
        trial_id = h.service.refused[0][0]
        assert h.status(trial_id) == TrialState.WAITING and h.store.attempts(trial_id) == []
        notice = h.runner.launching_paused
        assert notice is not None and notice.startswith("launching new trials is paused: ") \
            and "Too many open files" in notice
        wait = RETRY_FIRST
        for tries in range(2, 9):
            h.advance(wait * 0.9)
            await asyncio.sleep(0.01)
            assert len(h.service.refused) == tries - 1, f"no launch is tried before the next try ({wait} s)"
            h.advance(wait * 0.1)
            await h.until(lambda: len(h.service.refused) == tries, f"launch try {tries}")
            wait = min(2 * wait, RETRY_MAX)
        assert wait == RETRY_MAX, "the wait doubled up to its cap"
        assert set(h.service.refused) == {(trial_id, 1)}, "the same trial and attempt each time, no new trial"
        assert h.status(trial_id) == TrialState.WAITING and h.store.attempts(trial_id) == []
        h.service.system_trouble = None
        h.advance(wait)
        await h.until(lambda: h.service.launched, "the launch once the trouble cleared")
        assert (h.service.launched[0].trial_id, h.service.launched[0].attempt) == (trial_id, 1)
        assert h.runner.launching_paused is None
        h.service.exit(trial_id, 0)
        await h.until(lambda: len(h.service.launched) == 2, "the second trial")
        h.service.exit(h.service.launched[1].trial_id, 0)
        await h.until(lambda: h.runner.state == ExperimentState.DONE, "DONE")

    final = run_with(tmp_path, [{"x": 0}, {"x": 1}], test, max_trial_number=2)
    assert final == ExperimentState.DONE
    messages = [record.getMessage() for record in caplog.records]
    assert sum("launching new trials is paused" in m for m in messages) == 1, "said once, not per try"
    assert sum("launching new trials goes on" in m for m in messages) == 1


def test_a_stop_while_launching_is_paused_leaves_the_trial_for_a_resume(tmp_path: Path):
    from expmgr.engine.resume import REQUEUED_ON_RESUME

    async def test(h: Harness) -> None:
        h.service.system_trouble = "cannot start trial: [Errno 28] No space left on device"
        await h.until(lambda: h.service.refused, "the launch refused")
        h.runner.request_stop()
        trial_id = h.service.refused[0][0]
        await h.until(lambda: h.status(trial_id) == TrialState.USER_CANCELED, "the waiting trial cancelled")
        assert TrialState.USER_CANCELED in REQUEUED_ON_RESUME, "a resume runs it"

    assert run_with(tmp_path, [{"x": 0}], test, max_trial_number=1) == ExperimentState.STOPPED


def test_a_late_launch_failure_the_system_caused_leaves_the_trial_waiting_until_it_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """A remote service's slot that could not start the trial for want of descriptors or
    room on its node (``trial_launch_failed(system=True)``): as a SystemLaunchError, and
    launching goes on once a trial's process starts, not when a launch merely returns."""
    caplog.set_level(logging.INFO, logger="test-runner")

    async def test(h: Harness) -> None:
        h.service.start_on_launch = False
        await h.until(lambda: h.service.launched, "the launch")
        trial_id = h.service.launched[0].trial_id
        h.service.running.pop(trial_id)
        h.service.events.trial_launch_failed(trial_id, 1, "[Errno 24] Too many open files", system=True)
        await h.until(lambda: h.runner.launching_paused is not None, "launching paused")
        assert h.status(trial_id) == TrialState.WAITING and h.store.attempts(trial_id) == []
        h.advance(RETRY_FIRST)
        await h.until(lambda: len(h.service.launched) == 2, "the same attempt launched again")
        assert (h.service.launched[1].trial_id, h.service.launched[1].attempt) == (trial_id, 1)
        assert h.runner.launching_paused is not None, "a launch that returned is not yet a trial started"
        h.service.events.trial_started(trial_id, 1, 4242, host="node-2")
        await h.until(lambda: h.runner.launching_paused is None, "launching goes on")
        h.service.exit(trial_id, 0)
        await h.until(lambda: h.status(trial_id) == TrialState.SUCCEEDED, "SUCCEEDED")

    run_with(tmp_path, [{"x": 0}], test, max_trial_number=1)
    messages = [record.getMessage() for record in caplog.records]
    assert sum("launching new trials is paused" in m for m in messages) == 1
    assert sum("launching new trials goes on" in m for m in messages) == 1


def test_an_update_replaces_the_resolved_config_and_stores_only_that_field(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the first launch")
        stored = h.store.profile().config
        with pytest.raises(UpdateRefused, match="trialConcurrency: expected a positive integer, got 0"):
            h.runner.update_config("trialConcurrency", 0)
        assert h.runner.config.trial_concurrency == 1 and h.store.profile().config == stored
        h.runner.update_config("trialConcurrency", 2)
        await h.until(lambda: len(h.service.launched) == 2, "a second trial at once")
        h.runner.update_config("maxExperimentDuration", "1h")
        assert h.runner.config.max_experiment_duration == 3600.0
        space = {"x": {"_type": "choice", "_value": [0, 1, 2]}}
        taken = h.runner.update_config("searchSpace", space)
        assert taken is not None, "a new space is the tuner's to take"
        await taken
        assert ("update_search_space", {"search_space": space}) in h.dispatcher.told
        assert h.store.profile().config == {**stored, "trialConcurrency": 2, "maxExperimentDuration": 3600.0,
                                            "searchSpace": space}

    run_with(tmp_path, [{"x": 0}, {"x": 1}], test)


def test_a_space_the_tuner_refuses_is_an_update_refused_and_the_config_keeps_the_old_one(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: len(h.service.launched) == 1, "the first launch")
        stored = h.store.profile().config
        h.dispatcher.refuse_spaces = True
        with pytest.raises(UpdateRefused, match=r"^searchSpace: cannot use this search space \(ValueError: no\); "
                                                r"the tuner keeps the old search space$") as refused:
            refusal = h.runner.update_config("searchSpace", {"y": {"_type": "choice", "_value": [1]}})
            assert refusal is not None
            await refusal
        assert refused.value.kind is RefusalKind.INVALID
        assert h.runner.config.search_space == {"x": {"_type": "choice", "_value": [0]}}
        assert h.store.profile().config == stored and h.runner.state == ExperimentState.RUNNING

    run_with(tmp_path, [{"x": 0}, {"x": 0}], test)


def test_a_budget_raise_while_the_search_ends_is_told_to_the_manager(tmp_path: Path):
    """A raise of maxTrialNumber that comes while the runner ends its search (here while the
    tuner's process stops) is taken, and the runner says so: the manager runs the search
    again once it ended DONE (manager.py); another field's change does not count."""
    gate = asyncio.Event()

    async def test(h: Harness) -> None:
        original_stop = h.dispatcher.stop

        async def slow_stop() -> None:
            await gate.wait()
            await original_stop()
        h.dispatcher.stop = slow_stop  # type: ignore[method-assign]
        await h.until(lambda: h.service.running, "the trial running")
        h.service.exit(h.service.launched[0].trial_id, 0)
        await h.until(lambda: h.runner._ending, "the search ending")
        assert h.runner.update_config("trialConcurrency", 2) is None
        assert not h.runner.budget_raised_while_ending
        assert h.runner.update_config("maxTrialNumber", 3) is None
        assert h.runner.budget_raised_while_ending
        gate.set()
        await h.until(lambda: h.runner.state == ExperimentState.DONE, "DONE")
        assert h.store.profile().config["maxTrialNumber"] == 3
    assert run_with(tmp_path, [{"x": 0}], test, max_trial_number=1) == ExperimentState.DONE


def test_the_assessor_gets_each_attempts_history_without_the_store_read_again_per_report(tmp_path: Path):
    async def test(h: Harness) -> None:
        await h.until(lambda: h.service.launched, "a launch")
        trial = h.service.launched[0]
        reads: list[str | None] = []
        read_metrics = h.store.metrics

        def counted(trial_id: str | None = None) -> Any:
            reads.append(trial_id)
            return read_metrics(trial_id)
        h.store.metrics = counted  # type: ignore[method-assign]
        token = trial.env[trial_api.ENV_TOKEN]
        for sequence in range(5):
            h.runner.receive_metric(trial.trial_id, token, {"attempt": trial.attempt, "sequence": sequence,
                                                            "type": "PERIODICAL", "value": sequence / 10})
        await h.until(lambda: sum(cmd == "assess" for cmd, _ in h.dispatcher.told) == 5, "five assessments")
        histories = [list(fields["history"]) for cmd, fields in h.dispatcher.told if cmd == "assess"]
        assert histories[-1] == [0.0, 0.1, 0.2, 0.3, 0.4]
        assert reads == [], "a report is taken in memory, not by reading the trial's history from the store"
        h.service.exit(trial.trial_id, 0)

    run_with(tmp_path, [{"x": 0}], test, assessor={"name": "Medianstop"})


def test_a_trial_being_stopped_has_no_deadline_left_even_if_its_process_starts_after(tmp_path: Path):
    async def test(h: Harness) -> None:
        h.service.start_on_launch = False
        await h.until(lambda: len(h.service.launched) == 1, "the launch")
        trial_id = h.service.launched[0].trial_id
        h.runner.kill_trial(trial_id)
        assert h.service.signals == [(trial_id, signal.SIGTERM)]
        h.service.events.trial_started(trial_id, 1, 4242)
        h.advance(30)   # far past maxTrialDuration and trialIdleTimeout
        await asyncio.sleep(0.01)
        assert h.service.signals == [(trial_id, signal.SIGTERM)], "stopped once, by the kill"
        h.service.exit(trial_id, None, signal.SIGTERM)
        await h.until(lambda: h.status(trial_id) == TrialState.USER_CANCELED, "USER_CANCELED")

    run_with(tmp_path, [{"x": 0}], test, max_trial_duration=10, trial_idle_timeout=5, max_trial_number=1)

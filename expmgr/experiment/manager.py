"""The experiment process's engine: an event loop in a background thread that
runs the REST server and the trial runner of one experiment::

    manager = Manager(exp_id, config, paths, sockets, store, registry, logger)
    manager.start()           # returns once the loop runs
    manager.wait_search()     # until DONE, STOPPED or ERROR; the server still answers
    manager.request_stop()    # from any thread: stops the search if it runs, then the server
    manager.wait()            # until the server closed too

As NNI's manager, the server stays after the search ended by itself (DONE, ERROR),
read-only as ``expctl view`` serves (rest.serve_read_only), with nothing else left:
the runner stopped the dispatcher, the watchdog and the trials, and is dropped. It
closes on ``request_stop()``. A search ended by a stop (STOPPED, a preemption) closes
the server at once.

After DONE, raising maxTrialNumber or maxExperimentDuration (``send(UpdateConfig(...))``, or the
REST update) runs the search again, as NNI's manager goes back to RUNNING: a new runner
and dispatcher, started as a resume starts them (the tuner is given every stored
result; engine/more_trials.py decides whether the raise allows a trial), on the same
server and store; ``wait_search()`` then waits for that search's end.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar, cast

from expmgr.dispatcher.client import DispatcherClient
from expmgr.experiment.interrupts import WakingEvent, wait_interruptibly
from expmgr.layout import ExperimentPaths
from expmgr.log import pop_experiment, push_experiment
from expmgr.server.auth import Access
from expmgr.server.guard import ServerLimits
from expmgr.server.host import ExperimentHost
from expmgr.server.live import LiveHub
from expmgr.store.registry import Registry, RegistryError
from expmgr.server.rest import serve_read_only, serve_runner
from expmgr.engine.commands import Command, UpdateConfig, apply_command
from expmgr.engine.errors import RefusalKind, UpdateRefused
from expmgr.engine.more_trials import config_for_more_trials, refuse_ended
from expmgr.engine.runner import TrialRunner
from expmgr.store import StoreUnavailable, WritableStore
from expmgr.states import ExperimentState
from expmgr.training import create_training_service

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig

R = TypeVar("R")


def create_dispatcher(config: "ResolvedConfig", paths: ExperimentPaths) -> DispatcherClient | None:
    """The dispatcher process that hosts the tuner and assessor; None when the experiment
    has neither (a strategy-only experiment)."""
    if config.tuner is None and config.assessor is None:
        return None
    return DispatcherClient(paths.dispatcher_log, config.log_level, config.log_limits)


class Manager:
    """Owns the loop thread, the server, the runner and the store of one experiment."""

    def __init__(self, exp_id: str, config: "ResolvedConfig", paths: ExperimentPaths,
                 sockets: list[socket.socket], store: WritableStore, registry: Registry,
                 logger: logging.Logger, with_strategy: bool = False, resumed: bool = False,
                 access: Access = Access(), limits: ServerLimits | None = None) -> None:
        self.exp_id = exp_id
        self.access = access
        self.limits = limits or ServerLimits.from_environment()
        """What a client may send to the server (read from the environment when not given)."""
        self.config = config
        self.paths = paths
        self.port = sockets[0].getsockname()[1]
        self._sockets = sockets
        self._store = store
        self._registry = registry
        self._registry_writer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"expmgr-{exp_id}-registry")
        """Writes the registry in order, off the loop: another process may hold its lock."""
        self._logger = logger
        self._with_strategy = with_strategy
        self._resumed = resumed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: TrialRunner | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._search_ended = WakingEvent()
        """The runner returned and the registry has its last state; the server may still answer."""
        self._close: asyncio.Event | None = None
        """Set on the loop to close the server once the search ended."""
        self._end_recorded: asyncio.Event | None = None
        """Set on the loop once a search's end is recorded (registry included), cleared when one runs."""
        self._served_change: asyncio.Event | None = None
        """Set on the loop when the served experiment is to close or to run again."""
        self._next_runner: TrialRunner | None = None
        """The runner of a search started again after DONE (``_more_trials``), until it runs."""
        self._app: Any = None
        self._hub: LiveHub | None = None
        self._report_socket: Path | None = None
        """Where the server takes local trials' reports (ExperimentHost.report_socket)."""
        self._stop_requested = False
        self._finished = WakingEvent()
        self._pending_calls: set[concurrent.futures.Future] = set()
        """Calls handed to the loop and not answered yet; failed when the loop ends first."""
        self._calls_lock = threading.Lock()
        self.final_state: ExperimentState | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_loop, name=f"expmgr-{self.exp_id}", daemon=True)
        self._thread.start()
        self._started.wait()

    def _run_loop(self) -> None:
        push_experiment(self.exp_id)  # this thread works for the experiment: its records are its own
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._registry_writer.shutdown(wait=True)  # the last state is in the registry before wait() returns
            pop_experiment(self.exp_id)
            self._started.set()  # also when _main failed before the server ran
            self._search_ended.set()
            with self._calls_lock:
                self._finished.set()
                unanswered, self._pending_calls = self._pending_calls, set()
            for future in unanswered:  # scheduled too late to run: the loop is gone
                if not future.done():
                    future.set_exception(RuntimeError(f"experiment {self.exp_id} is not running"))

    async def _main(self) -> None:
        dispatcher = create_dispatcher(self.config, self.paths)
        if dispatcher is not None:
            await self._start_early(dispatcher)
        try:
            host = ExperimentHost(self._store, self.paths, self._sockets, self.access, self.limits, read_only=False)
            hub = host.hub
            self._report_socket = host.report_socket  # the runner's service tells its trials; host.start makes it
            runner: TrialRunner | None = self._new_runner(dispatcher, hub, with_strategy=self._with_strategy,
                                                          resumed=self._resumed)
            assert runner is not None
            self._runner = runner
            app = host.start(runner)
        except BaseException:
            if dispatcher is not None:   # started early: nothing else would stop it
                await dispatcher.stop()
            raise
        self._app, self._hub = app, hub
        self._close = asyncio.Event()
        self._served_change = asyncio.Event()
        self._end_recorded = asyncio.Event()
        self._started.set()
        try:
            while runner is not None:
                stopped = await self._search(runner, app, hub)
                if stopped:
                    break
                runner = await self._served_until_closed_or_given_more()
        finally:
            await host.stop()
            self._store.close()
            self._in_registry_writer(self._record_closed)

    def _new_runner(self, dispatcher: DispatcherClient | None, hub: LiveHub, *, with_strategy: bool,
                    resumed: bool, same_manager: bool = False) -> TrialRunner:
        return TrialRunner(self.exp_id, self.config, self._store, self.paths, self.port, self._logger,
                           training=functools.partial(create_training_service, self.config, paths=self.paths,
                                                      manager_host=self.access.local_host,
                                                      report_socket=self._report_socket),
                           dispatcher=dispatcher,
                           on_state_change=self._record_in_registry, with_strategy=with_strategy,
                           resumed=resumed, same_manager=same_manager, url_prefix=self.access.url_prefix,
                           on_store_unwritable=hub.tell_store_unwritable)

    async def _search(self, runner: TrialRunner, app: Any, hub: LiveHub) -> bool:
        """Run one search to its end, then serve read-only; whether it ended by a stop."""
        self.final_state = None
        assert self._end_recorded is not None
        self._end_recorded.clear()
        try:
            self.final_state = await runner.run()
        finally:
            if self.final_state is None:  # the runner itself broke; it recorded nothing
                self._record_in_registry(ExperimentState.ERROR)
            stopped = runner.stop_requested or self._stop_requested
            self.config = runner.config   # with the changes made while it ran
            done = self.final_state == ExperimentState.DONE and not stopped
            serve_read_only(app, close_server=self._stop_on_loop, more_trials=self._more_trials if done else None)
            hub.serve_read_only(more_trials=done)
            self._runner = None  # nothing of the search stays while the server answers
            raised_meanwhile = runner.budget_raised_while_ending
            del runner
            await self._registry_written()  # its last state is in the registry
            self._search_ended.set()
            self._end_recorded.set()
        if done and raised_meanwhile:
            self._run_again_if_budget_left()
        return stopped

    def _run_again_if_budget_left(self) -> None:
        """maxTrialNumber or maxExperimentDuration was raised while the search was ending: the
        search runs again if the raise leaves room for a trial."""
        try:
            self._run_again(self.config)
        except UpdateRefused as refused:
            self._logger.warning("a limit was raised as experiment %s ended, but it stays DONE: %s",
                                 self.exp_id, refused)

    async def _served_until_closed_or_given_more(self) -> TrialRunner | None:
        """Serve the ended experiment until its server is to close (None) or it was given
        more trials: the runner of its new search."""
        assert self._close is not None and self._served_change is not None
        while True:
            if self._next_runner is not None:   # (if a stop came meanwhile, it ends STOPPED at once)
                runner, self._next_runner = self._next_runner, None
                return runner
            if self._close.is_set():
                return None
            self._served_change.clear()
            await self._served_change.wait()

    def _more_trials(self, field: str, value: Any) -> Awaitable[None] | None:
        """On the loop: ``field`` (a budget field) raised to ``value`` while the ended
        experiment is served. Raises UpdateRefused (more_trials.py) when the raise cannot
        give it a trial; else the search runs again, RUNNING from now on."""
        runner = self._runner or self._next_runner
        if runner is not None:   # another update sent it back to RUNNING meanwhile
            return runner.update_config(field, value)
        if self._end_recorded is not None and not self._end_recorded.is_set():
            return self._more_trials_once_ended(field, value)
        if self._stop_requested or (self._close is not None and self._close.is_set()):
            raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {self.exp_id} is closing its server")
        if self.final_state != ExperimentState.DONE:
            raise refuse_ended(self.exp_id, self.final_state)
        self._run_again(config_for_more_trials(self.exp_id, self.config, self._store, field, value))
        self._logger.info("%s changed to %s: experiment %s runs again", field, value, self.exp_id)
        return self._registry_written()

    async def _more_trials_once_ended(self, field: str, value: Any) -> None:
        """A raise that came while the search's end was being recorded: applied once it is
        (so that ``wait()`` does not see that end after the search runs again)."""
        assert self._end_recorded is not None
        await self._end_recorded.wait()
        pending = self._more_trials(field, value)
        if pending is not None:
            await pending

    def _registry_written(self) -> Awaitable[None]:
        """Done once the registry has every state recorded so far (``expctl experiment list``
        says RUNNING once an update that ran the experiment again was answered)."""
        written: concurrent.futures.Future = concurrent.futures.Future()
        self._in_registry_writer(lambda: written.set_result(None))
        return asyncio.wrap_future(written)

    def _run_again(self, config: "ResolvedConfig") -> None:
        """Start a new search with ``config`` (its budget raised), as a resume would; the
        store, registry and server say RUNNING before this returns (so that a client that
        asks at once, as NNI's ``wait_completion`` polls, does not see the old DONE)."""
        if self._hub is None or self._served_change is None:
            raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {self.exp_id} is not served")
        try:   # the status last: until it is written, the experiment is DONE as before
            self._store.set_config(config.to_dict())
            self._store.reopen()
            self._store.set_experiment_status(ExperimentState.RUNNING)
        except StoreUnavailable as error:   # locked by another process, a full or read-only disk
            raise UpdateRefused(RefusalKind.UNAVAILABLE,
                                f"{self._store.path} cannot be written now ({error.reason}); experiment {self.exp_id} "
                                "stays DONE: try again") from None
        self.config = config
        runner = self._new_runner(create_dispatcher(config, self.paths), self._hub, with_strategy=False,
                                  resumed=True, same_manager=True)
        self._next_runner = self._runner = runner
        self.final_state = None
        serve_runner(self._app, runner)
        self._hub.serve_writable()
        self._record_in_registry(ExperimentState.RUNNING)
        self._search_ended.clear()
        self._served_change.set()

    async def _start_early(self, dispatcher: DispatcherClient) -> None:
        """Start the dispatcher first: its interpreter start and imports, the slowest part
        of the start-up, go on while the server and the runner are built. When it cannot
        start, the runner's own start fails the same way and records why (ERROR)."""
        try:
            await dispatcher.start()
        except Exception as error:
            self._logger.debug("the dispatcher did not start early (%s); the runner starts it", error)

    def _record_in_registry(self, state: ExperimentState) -> None:
        """Keep the registry's summary current, off the loop and in order. The experiment's
        own store is its record, so a registry that cannot be written (held by another
        process, disk full) is a warning, not the experiment's end. The pid stays while
        the server answers (``_record_closed`` clears it)."""
        end_time = time.time() if state.is_finished() else None

        def write() -> None:
            try:
                self._registry.update(self.exp_id, status=state, pid=os.getpid(), end_time=end_time)
            except RegistryError as error:
                self._logger.warning("the registry was not told that experiment %s is %s: %s",
                                     self.exp_id, state.value, error)

        self._in_registry_writer(write)

    def _in_registry_writer(self, write: Callable[[], None]) -> None:
        try:
            self._registry_writer.submit(write)
        except RuntimeError:  # the interpreter is exiting (a script returned; atexit stops us): write here
            write()

    def _record_closed(self) -> None:
        """The server closed: the registry no longer names this process (runs in the registry writer)."""
        try:
            self._registry.closed(self.exp_id)
        except RegistryError as error:
            self._logger.warning("the registry was not told that experiment %s stopped serving: %s",
                                 self.exp_id, error)

    def request_stop(self, *, keep_trials: bool = False) -> None:
        """Stop gracefully: the search if it runs, then the server; returns at once
        (``wait()`` for the end). ``keep_trials``: the running trials are left running for a
        resume, where the training service can keep them (reattachWindow)."""
        loop = self._loop
        if loop is None or self._finished.is_set():
            return
        try:
            loop.call_soon_threadsafe(self._stop_on_loop, keep_trials)
        except RuntimeError:
            pass  # the loop closed in between: the server is closed

    def _stop_on_loop(self, keep_trials: bool = False) -> None:
        """On the loop, where the search's end is seen: no stop request slips between them."""
        self._stop_requested = True
        if self._runner is not None:
            self._runner.request_stop(keep_trials=keep_trials)
        if self._close is not None:
            self._close.set()
        if self._served_change is not None:
            self._served_change.set()

    def request_preemption(self) -> None:
        """Stop as preempted (SIGUSR1 to trials); returns at once."""
        self._tell_runner(TrialRunner.request_preemption)

    def _tell_runner(self, method: Callable[[TrialRunner], None]) -> None:
        """Run ``method(runner)`` on the loop without waiting; nothing once it ended."""
        loop, runner = self._loop, self._runner
        if loop is None or runner is None or self._finished.is_set():
            return
        try:
            loop.call_soon_threadsafe(method, runner)
        except RuntimeError:
            pass  # the loop closed in between: the experiment has ended

    def send(self, command: Command[R], timeout: float = 30) -> R:
        """Apply ``command`` to the running search on the event loop (commands.apply_command)
        and return its result, awaited when the loop completes it later (a search space), or
        raise the search's refusal; RuntimeError once the search ended. After it ended DONE, a
        raised budget field (UpdateConfig) runs it again (``_more_trials``); another update is
        refused (UpdateRefused) until the server closed."""
        def apply() -> Any:
            if self._runner is not None:
                return apply_command(self._runner, command)
            if not isinstance(command, UpdateConfig):
                raise RuntimeError(f"experiment {self.exp_id} is not running")
            if self.final_state == ExperimentState.DONE and not self._stop_requested:
                return self._more_trials(command.field, command.value)
            raise refuse_ended(self.exp_id, self.final_state)
        if self._runner is None and not isinstance(command, UpdateConfig):
            raise RuntimeError(f"experiment {self.exp_id} is not running")
        return cast(R, self._on_loop(apply, timeout))

    def _on_loop(self, function: Callable[[], Any], timeout: float) -> Any:
        """Run ``function()`` on the event loop and return its result (awaited, if it is
        awaitable), or raise its exception; RuntimeError once the loop ended."""
        loop = self._loop
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._calls_lock:
            if loop is None or self._finished.is_set():
                raise RuntimeError(f"experiment {self.exp_id} is not running")
            self._pending_calls.add(future)

        def run() -> None:
            try:
                result = function()
            except BaseException as error:  # handed to the calling thread
                future.set_exception(error)
                return
            if inspect.isawaitable(result):   # a change the loop completes (a search space update)
                asyncio.ensure_future(result).add_done_callback(_hand_over)
            else:
                future.set_result(result)

        def _hand_over(task: asyncio.Future) -> None:
            if task.cancelled():
                future.set_exception(RuntimeError(f"experiment {self.exp_id} is not running"))
            elif task.exception() is not None:
                future.set_exception(cast(BaseException, task.exception()))
            else:
                future.set_result(task.result())

        try:
            loop.call_soon_threadsafe(run)
            return future.result(timeout)
        except RuntimeError:
            if future.done():
                raise  # the function's own error, or the loop ended before running it
            raise RuntimeError(f"experiment {self.exp_id} is not running") from None  # the loop is closed
        finally:
            with self._calls_lock:
                self._pending_calls.discard(future)

    @property
    def closed(self) -> bool:
        """Whether its server closed (the loop ended): nothing of the experiment runs here."""
        return self._finished.is_set()

    def wait_search(self, timeout: float | None = None) -> bool:
        """Block until the search ended (DONE, STOPPED, ERROR; the registry has it) while
        the server may still answer; False on timeout. In the main thread, signals' handlers
        run (and may raise) while it waits."""
        return wait_interruptibly(self._search_ended, timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server closed too (the loop ended); False on timeout. In the main
        thread, signals' handlers run (and may raise) while it waits."""
        return wait_interruptibly(self._finished, timeout)

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

"""The ``Experiment`` object: the Python API of one experiment, with NNI 3.0's
``nni.experiment.Experiment`` call forms (docs/nni-migration.md, "Python API").

    exp = Experiment(ExperimentConfig.load("config.yml"))
    succeeded = exp.run(port=8080)        # blocks until the search ends; Ctrl+C or SIGTERM stop it cleanly
    # exp.run(port=8080, host="0.0.0.0"): reachable from elsewhere, with a generated token (exp.url)
    exp.logger.info("best: %s", exp.best_trial())
    exp.stop()                            # its server (REST, web UI) stayed until now

    exp = Experiment('local')             # NNI's form: an empty config to fill in
    exp.config.tuner.name = 'TPE'

``start()`` returns once the experiment runs; the query methods (``queries``) read
the store and work while it runs and after it ended. As in NNI, the server stays after the
search ended (read-only) until ``stop()``, or the interpreter's exit (atexit). (Over 450
lines: the class holds the lifecycle, whose parts share its state, and NNI's call forms of each.)
"""
from __future__ import annotations

import atexit
import copy
import logging
import os
import signal
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, Callable, Union

from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.experiment.connected import Connection, running_on_port
from expmgr.experiment.dual import class_or_instance
from expmgr.experiment.interrupts import (KeepTrialsSignal, PreemptSignal, StopSignal, raise_keep_trials_signal,
                                          raise_preempt_signal, raise_stop_signal,
                                          signals_deferred)
from expmgr.experiment.stored import new_experiment_id, stored_experiment
from expmgr.experiment.errors import ExperimentError
from expmgr.experiment.listening import check_server_limits, server_sockets
from expmgr.experiment.queries import ExperimentQueries
from expmgr.experiment.strategy import TrialHandle
from expmgr.layout import ID_RULE, ExperimentPaths, default_home, is_valid_id, make_private_files
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.log import (ExperimentLogAttachment, attach_experiment, current_experiment_id, ensure_stdout_logging,
                        experiment_logger, pop_experiment, push_experiment)
from expmgr.server.auth import DEFAULT_HOST, Access
from expmgr.experiment.manager import Manager
from expmgr.store.registry import Registry, RegistryEntry, RegistryError, experiment_process_alive
from expmgr.engine.commands import KillTrial, StrategyFinished, SubmitTrial, UpdateConfig
from expmgr.experiment.control import Control, LocalControl, ViewControl
from expmgr.store import ExperimentProfile, create_store, open_store
from expmgr.experiment.viewer import Viewer
from expmgr.states import ExperimentState

_experiments: "weakref.WeakValueDictionary[str, Experiment]" = weakref.WeakValueDictionary()


def current_experiment() -> "Experiment | None":
    """This thread's current experiment: the innermost one started (``run()``,
    ``start()``) or entered (``with experiment:``) here and not left; threads an
    experiment starts for its own work have it too, and so do threads and thread-pool
    tasks started where it is current (docs/logging.md, "The current experiment")."""
    exp_id = current_experiment_id()
    return _experiments.get(exp_id) if exp_id is not None else None


ConfigOrPlatform = Union[ExperimentConfig, str, "list[str]", None]


class Experiment(ExperimentQueries):
    """One experiment; see the module docstring."""

    def __init__(self, config: ConfigOrPlatform, id: str | None = None,  # noqa: A002 - NNI's name
                 strategy: Any = None) -> None:
        """``config``: the experiment's config; or, as NNI's, a platform name (``'local'``)
        for an empty ``ExperimentConfig('local')`` to fill in through ``experiment.config``;
        or None with the ``id`` of a stored experiment to ``resume`` or ``view``.
        ``strategy``: optional Python code that submits trials (see
        :mod:`expmgr.experiment.strategy`); with one, tuner and search space are optional."""
        self.config: ExperimentConfig | None = (ExperimentConfig(config) if isinstance(config, (str, list))
                                                else config)
        self.strategy = strategy
        if strategy is not None and not callable(getattr(strategy, "run", strategy)):
            raise ExperimentError("strategy: expected a callable taking the experiment, or an object with "
                                  f"run(experiment), got {strategy!r}")
        if id is not None and not is_valid_id(id):
            raise ExperimentError(f"invalid experiment id {id!r}: {ID_RULE} (as NNI's)")
        self.id = id or new_experiment_id()
        _experiments[self.id] = self
        self.port: int | None = None
        self.access: Access | None = None
        """Its server's host, url prefix and access token, once started (or connected)."""
        self.paths: ExperimentPaths | None = None
        self._resolved: ResolvedConfig | None = None
        self._manager: Manager | None = None
        """The engine of its run in this process (``start``), which ``_control`` drives."""
        self._control: Control | None = None
        """Its search, wherever it runs: here (``start``), in another process (``connect``), or
        none, read-only (``view``); every command, ``wait`` and ``stop`` go through it."""
        self._log_attachment: ExperimentLogAttachment | None = None
        self._resume_from: Path | None = None
        """The folder of the stopped experiment this one continues (see ``resume``)."""
        self._started_on: int | None = None
        """The thread whose current experiment this became in ``start()``."""
        self._finish_lock = threading.Lock()
        self._strategy_thread: threading.Thread | None = None
        self._url_prefix: str | None = None

    @property
    def url_prefix(self) -> str | None:
        """NNI's attribute: the url prefix the server serves under (without slashes, None
        for none); set before ``start``/``run`` to choose it, as with their ``url_prefix``."""
        if self.access is not None:
            return self.access.url_prefix.strip("/") or None
        return self._url_prefix

    @url_prefix.setter
    def url_prefix(self, value: str | None) -> None:
        self._url_prefix = value

    @property
    def logger(self) -> logging.Logger:
        """The experiment's logger, ``nni.<id>``: its records go to stdout and experiment.log."""
        return experiment_logger(self.id)

    # -- lifecycle ---------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The web UI's address with ``?token=`` when there is a token; None before start."""
        return None if self.access is None or self.port is None else self.access.urls(self.port)[0]

    @property
    def started(self) -> bool:
        """Whether ``start()`` (``run()``, ``resume()``) started it in this process; it stays
        True after it ended."""
        return self._manager is not None

    @property
    def log_limits(self) -> RotationLimits:
        """How its log files are bounded (``logMaxSize``, ``logFilesKept``), once it was started;
        unbounded before."""
        return self._resolved.log_limits if self._resolved is not None else UNBOUNDED

    def start(self, port: int = 8080, debug: bool = False, *, host: str = DEFAULT_HOST,
              url_prefix: str | None = None, token: str | None = None) -> None:
        """Validate the config, create the experiment on disk and start it.

        ``debug``: log at debug level (NNI's; as ``debug: true`` in the config).

        The server listens on ``host`` (default 127.0.0.1, this machine only) and serves
        every route under ``url_prefix`` (NNI's url_prefix, e.g. ``/expmgr``; default: the
        ``url_prefix`` attribute). With a ``token`` every client but the trials must give
        it (see ``url``); listening elsewhere than loopback requires one and generates it
        when ``token`` is None.
        Raises ConfigError for a bad config, AccessError for a bad ``url_prefix`` or
        ``token``, HostError or PortInUseError when it cannot listen; in each case
        nothing is written to disk.
        """
        if self._manager is not None:
            raise ExperimentError(f"experiment {self.id} was started already")
        config = ResolvedConfig.from_config(self._config_to_start(debug), with_strategy=self.strategy is not None)
        self._resolved = config
        check_server_limits()
        sockets, access = server_sockets(port, host, self._url_prefix if url_prefix is None else url_prefix, token)
        home = config.experiment_working_directory
        paths = ExperimentPaths(self._resume_from or home / self.id)
        try:
            if self._resume_from is None and paths.root.exists():
                raise ExperimentError(f"{paths.root} exists already; is experiment {self.id} running?")
            Registry(home).entries()  # a damaged registry fails here, before anything is written
        except (ExperimentError, RegistryError):
            for sock in sockets:
                sock.close()
            raise
        self.port = sockets[0].getsockname()[1]
        self.paths = paths
        self.access = access
        now = time.time()
        # From the first write on disk until the manager runs, a Ctrl+C or SIGTERM waits: whoever
        # handles it finds nothing of the experiment on disk, or the experiment started (stop() ends it).
        with signals_deferred():
            if self._resume_from is None:
                paths.create()
                paths.config_file.write_text(config.to_yaml(), encoding="utf-8")
                store = create_store(paths, ExperimentProfile(
                    id=self.id, name=config.experiment_name, config=config.to_dict(),
                    status=ExperimentState.INITIALIZED, error=None, start_time=now, end_time=None,
                    port=self.port, log_dir=str(paths.root), platform=config.platform,
                    minimizes=config.minimizes))
                make_private_files(*paths.database_files)  # SQLite made them 0644 less the umask
            else:
                store = open_store(paths)
                store.reopen()
            access.save(paths.access_file)  # before the registry lists it: clients read it from then on
            registry = Registry(home)
            registry.add(RegistryEntry(id=self.id, name=config.experiment_name, dir=str(paths.root), port=self.port,
                                       pid=os.getpid(), status=ExperimentState.INITIALIZED, start_time=now,
                                       platform=config.platform))
            self._log_attachment = attach_experiment(self.id, paths.experiment_log, config.log_level,
                                                     limits=config.log_limits)
            for note in config.notes:   # e.g. an NNI v1 config converted: the first lines of experiment.log
                self.logger.info("config: %s", note)
            self._started_on = push_experiment(self.id)
            self._manager = Manager(self.id, config, paths, sockets, store, registry, self.logger,
                                    with_strategy=self.strategy is not None, resumed=self._resume_from is not None,
                                    access=access)
            self._manager.start()
            self._control = LocalControl(self._manager)
            # A script that starts an experiment and returns must not leave trials running.
            atexit.register(self.stop)
            if self.strategy is not None:
                self._strategy_thread = threading.Thread(target=self._run_strategy, name=f"strategy-{self.id}",
                                                         daemon=True)
                self._strategy_thread.start()
        self.logger.info("experiment %s started: %s%s", self.id, access.address(self.port),
                         " (access token: Experiment.url, expctl webui url)" if access.token else "")

    def _config_to_start(self, debug: bool) -> ExperimentConfig:
        """The config to start with: ``self.config``, at debug level with ``debug``."""
        if self.config is None:
            raise ExperimentError(f"experiment {self.id} has no config: give one (Experiment(config)), or "
                                  "resume or view a stored experiment (Experiment(None, id).resume())")
        if not debug:
            return self.config
        config = copy.copy(self.config)
        config.debug = True
        return config

    @staticmethod
    def _resume_by_id(cls: type[Experiment], exp_id: str, port: int = 8080, *, wait_completion: bool = True,
                      debug: bool = False, home: Path | None = None, host: str = DEFAULT_HOST,
                      url_prefix: str | None = None, token: str | None = None) -> "Experiment":
        """``Experiment.resume(exp_id, port)``: resume experiment ``exp_id`` (see ``resume``
        on an instance); returns the Experiment."""
        experiment = cls(None, id=exp_id)
        experiment._resume(port, wait_completion, debug, home=home, host=host, url_prefix=url_prefix, token=token)
        return experiment

    def _resume(self, port: int = 8080, wait_completion: bool = True, debug: bool = False, *,
                home: Path | None = None, host: str = DEFAULT_HOST, url_prefix: str | None = None,
                token: str | None = None) -> bool | None:
        """Continue a stopped, failed or crashed experiment from its store: trials that
        did not finish run again first (same parameters, next attempt), the tuner is
        given every stored result, and maxTrialNumber and maxExperimentDuration count
        what was done before. Runs it to the end unless ``wait_completion`` is False;
        returns as ``run``. ``host``, ``url_prefix`` and ``token`` as for ``start`` (this
        run's, not the last one's), except that with no ``token`` one given to its last run
        is kept (``""`` drops it, on loopback). The stored config is used (``self.config`` is replaced).

        Two forms: NNI 3.0's ``Experiment(None, exp_id).resume(port)``, and
        ``Experiment.resume(exp_id, port)`` (expmgr's, NNI's older one), which returns the
        Experiment. Raises ExperimentError when the experiment is unknown, still running or
        still served.
        """
        entry = self._load_stored(home)
        if experiment_process_alive(entry):  # its search runs, or its server still answers
            state = "served" if entry.status.is_finished() else "running"
            raise ExperimentError(f"experiment {self.id} is {state} (pid {entry.pid}); stop it first")
        self._resume_from = Path(entry.dir)
        token = _kept_token(self._resume_from, token)
        return self.run(port, wait_completion, debug, host=host, url_prefix=url_prefix, token=token)

    resume = class_or_instance(_resume_by_id, _resume)

    def _load_stored(self, home: Path | None) -> RegistryEntry:
        """Take the stored config of experiment ``self.id`` (in ``home``, default: the home
        of ``self.config`` if any); its registry entry."""
        entry, self.config = stored_experiment(self.id, home or self._home())
        return entry

    def has_checkpoint(self, home: Path | None = None) -> bool:
        """NNI's: whether experiment ``self.id`` is stored (so ``resume`` or ``view`` can find it)."""
        registry = Registry(home or self._home())
        return registry.get(self.id) is not None

    def load_checkpoint(self, home: Path | None = None) -> None:
        """NNI's: take the stored config of experiment ``self.id`` as ``self.config``."""
        self._load_stored(home)

    def save_checkpoint(self) -> None:
        """NNI's; nothing to do: the store holds everything as it happens."""

    def run_or_resume(self, port: int = 8080, wait_completion: bool = True, debug: bool = False) -> bool | None:
        """NNI's: ``resume`` when experiment ``self.id`` is stored, ``run`` otherwise."""
        if self.has_checkpoint():
            return self.resume(port, wait_completion, debug)
        return self.run(port, wait_completion, debug)

    def _home(self) -> Path:
        """The experiments' home of this experiment's config (the default without one)."""
        configured = None if self.config is None else self.config.experiment_working_directory
        return Path(configured).expanduser() if configured else default_home()

    @classmethod
    def connect(cls, port: int, *, home: Path | None = None) -> "Experiment":
        """The experiment served (in another process) on ``port``, running or ended: its
        query methods read its store, ``update_*`` and ``kill_trial_job`` go through its
        REST API (with the host, url prefix and token in its access file), ``stop()``
        stops it as ``expctl stop`` does (server included), ``wait()`` waits for its search's end.

        Raises ExperimentError when no experiment of the registry is served on that port.
        """
        registry = Registry(home or default_home())
        entry = running_on_port(registry, port)
        _, config = stored_experiment(entry.id, home)
        experiment = cls(config, id=entry.id)
        experiment.paths = ExperimentPaths(Path(entry.dir))
        experiment.port = port
        connection = Connection(registry, entry)
        experiment._control = connection
        experiment.access = connection.access
        return experiment

    @staticmethod
    def _view_by_id(cls: type[Experiment], exp_id: str, port: int = 8080, *, non_blocking: bool = False,
                    home: Path | None = None, host: str = DEFAULT_HOST, url_prefix: str | None = None,
                    token: str | None = None) -> "Experiment":
        """``Experiment.view(exp_id, port)``: see ``view`` on an instance."""
        return cls(None, id=exp_id)._view(port, non_blocking, home=home, host=host, url_prefix=url_prefix,
                                          token=token)

    def _view(self, port: int = 8080, non_blocking: bool = False, *, home: Path | None = None,
              host: str = DEFAULT_HOST, url_prefix: str | None = None, token: str | None = None) -> "Experiment":
        """Serve a stored experiment read-only: NNI's REST routes, no tuner, no trials
        (the trial channel refuses reports). Blocks until Ctrl+C or SIGTERM unless
        ``non_blocking``; then ``stop()`` ends it. The query methods work as usual.
        ``host``, ``url_prefix`` and ``token`` as for ``start``, the token of its last run
        kept when none is given (as ``resume``); the address with the token is ``url``, and is logged (the access file is not written: it belongs to the runs).
        Two forms, as ``resume``: ``Experiment(None, exp_id).view(port)`` and
        ``Experiment.view(exp_id, port)``; each returns the Experiment.
        """
        exp_id = self.id
        entry = self._load_stored(home)
        self.paths = ExperimentPaths(Path(entry.dir))
        check_server_limits()
        sockets, self.access = server_sockets(port, host, self._url_prefix if url_prefix is None else url_prefix,
                                              _kept_token(self.paths.root, token))
        viewer = Viewer(self.paths, sockets, exp_id, self.access)
        viewer.start()
        self._control = ViewControl(viewer, exp_id)
        self.port = viewer.port
        ensure_stdout_logging()
        # With the token: a view logs to stdout only (no self.log), for the user to open.
        announce = "viewing experiment %s (read-only): %s"
        where = ("  ".join(self.access.urls(self.port)),)
        if non_blocking:
            self.logger.info(announce, exp_id, *where)
        else:
            previous_handler = None
            if threading.current_thread() is threading.main_thread():
                previous_handler = signal.signal(signal.SIGTERM, raise_stop_signal)
            try:
                self.logger.info(announce, exp_id, *where)  # a Ctrl+C may follow at once
                viewer.wait()  # until Ctrl+C or SIGTERM (or its server failed)
            except (KeyboardInterrupt, StopSignal):
                pass
            finally:
                if previous_handler is not None:
                    signal.signal(signal.SIGTERM, previous_handler)
                self.stop()
        return self

    view = class_or_instance(_view_by_id, _view)

    def run(self, port: int = 8080, wait_completion: bool = True, debug: bool = False, *,
            host: str = DEFAULT_HOST, url_prefix: str | None = None, token: str | None = None) -> bool | None:
        """Start (see ``start``), then block until the search ends (``wait_completion``);
        True if it ended DONE, False otherwise (ERROR, or stopped). With ``wait_completion``
        False, return None at once (NNI's). As NNI's, its server (REST, web UI) stays,
        read-only, until ``stop()`` or the interpreter's exit. Raising maxTrialNumber or
        maxExperimentDuration after it ended DONE (``update_max_trial_number``, REST, expctl,
        web UI) runs it again; ``run()`` called again then waits for that search's end and
        returns as above (``wait()`` does too)."""
        if self._manager is not None and not self._manager.closed:
            # Started already and still served: after DONE a raised maxTrialNumber (or duration)
            # runs it again; run() then waits for that search's end (NNI's scripts call it again).
            return self.wait_completion() if wait_completion else None

        def start() -> None:
            self.start(port, debug, host=host, url_prefix=url_prefix, token=token)
        if not wait_completion:
            start()
            return None
        return self.wait_completion(start=start)

    def wait_completion(self, *, start: Callable[[], object] | None = None) -> bool:
        """Block until the started experiment's search ends; True if it ended DONE. Its
        server stays until ``stop()``.

        Ctrl+C (SIGINT) and SIGTERM stop it gracefully, server included (as ``stop()``);
        a second one kills the trials at once. ``start``, a call that starts this experiment
        (``run()`` passes ``self.start``), is made first under the same handling, so a Ctrl+C
        arriving as its first trials start stops them too; one arriving before it started
        anything comes out of this call.
        """
        previous_handlers = {}
        if threading.current_thread() is threading.main_thread():
            previous_handlers = {signal.SIGTERM: signal.signal(signal.SIGTERM, raise_stop_signal),
                                 signal.SIGUSR1: signal.signal(signal.SIGUSR1, raise_preempt_signal),
                                 signal.SIGUSR2: signal.signal(signal.SIGUSR2, raise_keep_trials_signal)}
        # Signals are only counted in the handlers; they are acted on inside the try, so
        # that a second Ctrl+C arriving while the first is being passed on is caught too.
        stops = preemptions = stops_told = preemptions_told = 0
        keep_trials = False   # SIGUSR2 (expctl stop --keep-trials): stop, the trials run on
        try:
            if start is not None:
                try:
                    start()
                except (KeyboardInterrupt, StopSignal, PreemptSignal, KeepTrialsSignal) as signalled:
                    if not self.started:  # nothing to stop
                        raise
                    if isinstance(signalled, PreemptSignal):
                        preemptions += 1
                    elif isinstance(signalled, KeepTrialsSignal):
                        keep_trials = True
                    else:
                        stops += 1
            manager = self._manager
            if manager is None:
                raise ExperimentError(f"experiment {self.id} was not started")
            while True:
                try:
                    while preemptions_told < preemptions:
                        preemptions_told += 1
                        self.logger.info("experiment %s is preempted (SIGUSR1)", self.id)
                        manager.request_preemption()
                    if keep_trials and not stops:
                        keep_trials = False
                        stops = stops_told = 1
                        self.logger.info("stopping experiment %s, its trials left running for a resume", self.id)
                        manager.request_stop(keep_trials=True)
                    while stops_told < stops:
                        stops_told += 1
                        if stops_told == 1:
                            self.logger.info("stopping experiment %s (again to kill its trials at once)", self.id)
                        else:
                            self.logger.info("killing the trials of experiment %s", self.id)
                        manager.request_stop()
                    self.wait()  # signals are raised here
                    break
                except PreemptSignal:
                    preemptions += 1
                except KeepTrialsSignal:
                    keep_trials = True
                except (KeyboardInterrupt, StopSignal):
                    stops += 1
        finally:
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)
        if stops:
            self.stop()  # stopped by the user: the server goes too (NNI's run() on Ctrl+C)
        return manager.final_state == ExperimentState.DONE

    def serve_until_stopped(self) -> None:
        """Block while the server stays after the search: until ``stop()``, ``expctl stop``
        or NNI's ``DELETE experiment`` closes it. Ctrl+C and SIGTERM (with a handler that
        raises) are raised here."""
        if self._manager is None:
            raise ExperimentError(f"experiment {self.id} was not started")
        self._manager.wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the search ends (DONE, STOPPED or ERROR); False if ``timeout``
        seconds passed first. Once it saw the end, the experiment is no longer current in
        the thread that started it; its server and experiment.log stay until ``stop()``."""
        if not self._started_control().wait(timeout):
            return False
        with self._finish_lock:
            self._search_ended_once()
        return True

    def stop(self) -> None:
        """Stop gracefully: running trials get SIGTERM, then SIGKILL after a grace period;
        then the server closes. Idempotent; registered with atexit by ``start()``."""
        if self._control is None:
            return
        self._control.stop()
        self._finish()

    def _run_strategy(self) -> None:
        push_experiment(self.id)  # the strategy's records belong to this experiment
        error = None
        try:
            getattr(self.strategy, "run", self.strategy)(self)
        except Exception:  # noqa: BLE001 - the strategy is user code; its failure ends the experiment
            error = traceback.format_exc()
        finally:
            pop_experiment(self.id)
        try:
            self._started_control().send(StrategyFinished(error))
        except ExperimentError:
            pass  # the experiment ended (stopped) while the strategy ran

    def submit_trial(self, parameters: dict[str, Any]) -> TrialHandle:
        """Run a trial with these parameters (from a strategy, or any thread) while the
        experiment runs; it counts against maxTrialNumber. Returns at once.

        Raises ExperimentError when the experiment takes no more trials.
        """
        trial_id, future = self._started_control().send(SubmitTrial(parameters))
        return TrialHandle(trial_id, parameters, future)

    # -- changes while it runs (NNI's names) -----------------------------------------

    def update_trial_concurrency(self, value: int) -> None:
        self._update("trialConcurrency", value)

    def update_max_trial_number(self, value: int) -> None:
        self._update("maxTrialNumber", value)

    def update_max_experiment_duration(self, value: str | float) -> None:
        """``value``: seconds, or a duration such as ``"2h"``."""
        self._update("maxExperimentDuration", value)

    def update_search_space(self, search_space: dict[str, Any]) -> None:
        self._update("searchSpace", search_space)

    def kill_trial_job(self, trial_id: str) -> None:
        """Stop one running trial as USER_CANCELED."""
        self._started_control().send(KillTrial(trial_id))

    def _update(self, field: str, value: Any) -> None:
        """Run here: after DONE, a raised maxTrialNumber or maxExperimentDuration runs the
        search again (RUNNING; ``wait()`` or ``run()`` waits for its new end)."""
        self._started_control().send(UpdateConfig(field, value))

    def _started_control(self) -> Control:
        """Its control; ExperimentError before it was started (or connected, or viewed)."""
        if self._control is None:
            raise ExperimentError(f"experiment {self.id} was not started")
        return self._control

    def _finish(self) -> None:
        """Once the server closed too: close the experiment's log (idempotent)."""
        with self._finish_lock:
            self._search_ended_once()
            atexit.unregister(self.stop)
            if self._manager is not None:
                self._manager.join()
            if self._log_attachment is not None:
                self._log_attachment.close()
                self._log_attachment = None

    def _search_ended_once(self) -> None:
        """The search ended: the strategy has returned and the experiment leaves the starting
        thread's stack; its log and server stay until ``stop()``."""
        if self._strategy_thread is not None and self._strategy_thread is not threading.current_thread():
            # Its pending waits were answered when the experiment ended; a strategy
            # that still does not return is left behind (a daemon thread), with a warning.
            self._strategy_thread.join(
                timeout=self._resolved.trial_grace_period if self._resolved else 5)
            if self._strategy_thread.is_alive():
                self.logger.warning("the strategy of experiment %s did not return after the experiment ended",
                                    self.id)
            self._strategy_thread = None
        if self._started_on is not None:
            pop_experiment(self.id, self._started_on)
            self._started_on = None

    def __enter__(self) -> "Experiment":
        push_experiment(self.id)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        pop_experiment(self.id)


def _kept_token(experiment_dir: Path, token: str | None) -> str | None:
    """``token``, or with none the access token of the experiment's last run (its access
    file), so that resuming or viewing a protected experiment leaves it protected; AccessError
    when that file cannot be read (another user's experiment)."""
    if token is not None:
        return token
    return Access.load(ExperimentPaths(experiment_dir).access_file).token

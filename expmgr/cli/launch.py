"""``expctl create``, ``resume`` and ``view``: run an experiment (a new one from a
config file, or a stopped one from its store) as a detached daemon (the default)
or in this process (``--foreground``), or serve a stored one read-only (``view``,
in this process until Ctrl+C).

As NNI's, an experiment whose search ended by itself (DONE, ERROR) keeps serving its
REST API and web UI, read-only, until ``expctl stop`` (or Ctrl+C, SIGTERM in the
foreground); ``--exit-when-done`` ends it with its search instead (for scripts).

The daemon is this same command run with ``--foreground`` in a new session. Until
its experiment runs, its output comes back through a pipe (so an early error is
shown here); then it moves its stdout to ``logs/daemon.log`` and its stderr to
``logs/daemon-stderr.log``, and this command
returns once the experiment's REST server answers, printing its address (with
``?token=`` when it has an access token, see expmgr/server/auth.py). The daemon is
given ``--host`` and ``--url-prefix`` as arguments and the token in ``$EXPMGR_TOKEN``,
never on its command line.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypedDict, cast

from expmgr.cli.common import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CliError, access_of,
                               find_experiment, not_supported, port_number, printable,
                               use_experiment_dir)
from expmgr.layout import ExperimentPaths
from expmgr.server.lifecycle import ActionRefused, check_can_resume
from expmgr.log import bound_stdout_file
from expmgr.server import auth
from expmgr.store.registry import Registry, RegistryEntry

if TYPE_CHECKING:
    from expmgr.experiment import Experiment

_STARTUP_TIMEOUT = 60.0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    create = commands.add_parser("create", help="create and run an experiment from a config file")
    create.add_argument("--config", "-c", type=Path, required=True, help="the experiment's YAML config")
    create.add_argument("--debug", "-d", action="store_true", help="log at DEBUG level (the config's debug: true)")
    create.add_argument("--experiment-id", help=argparse.SUPPRESS)  # the daemon is told its id
    create.set_defaults(handler=create_experiment)
    resume = commands.add_parser("resume", help="continue a stopped, failed or crashed experiment")
    resume.add_argument("id", help="experiment id or a unique prefix")
    resume.set_defaults(handler=resume_experiment)
    view = commands.add_parser("view", help="serve a stored experiment read-only until Ctrl+C")
    view.add_argument("id", help="experiment id or a unique prefix")
    view.add_argument("--port", "-p", type=port_number, default=8080, help="REST port (default 8080)")
    view.set_defaults(handler=view_experiment)
    for parser in (create, resume, view):
        parser.add_argument("--host", default=auth.DEFAULT_HOST,
                            help="address to listen on (default 127.0.0.1, this machine only; e.g. 0.0.0.0, "
                                 "::, a LAN address: then an access token is required, and generated if not given)")
        parser.add_argument("--url-prefix", "--url_prefix", "-u", default="", metavar="PREFIX",
                            help="serve the web UI and every REST route under this path, e.g. /expmgr")
        parser.add_argument("--token", default=None,
                            help=f"access token every client must give (default: ${auth.TOKEN_ENV}; resume and "
                                 "view keep the last run's; else none on loopback, where only your own user's "
                                 "processes get in, and generated elsewhere); at least "
                                 f"{auth.MIN_TOKEN_LENGTH} characters of letters, digits and ._~-")
    for parser in (resume, view):  # nnictl's flags
        parser.add_argument("--experiment_dir", "-e", type=Path, metavar="DIR",
                            help="the folder holding the experiment (its experimentWorkingDirectory), "
                                 "or the experiment's own folder")
    resume.add_argument("--debug", "-d", action="store_true", help=argparse.SUPPRESS)  # nnictl's: refused
    for parser in (create, resume):
        parser.add_argument("--port", "-p", type=port_number, default=8080,
                            help="REST and web UI port (default 8080)")
        parser.add_argument("--foreground", "-f", action="store_true",
                            help="run in this process, logging to stdout; after the search ended its server "
                                 "stays until Ctrl+C, SIGTERM or expctl stop (unless --exit-when-done)")
        parser.add_argument("--exit-when-done", action="store_true",
                            help="end the experiment's server (and, with --foreground, this command) when its "
                                 "search ends, with the exit status of how it ended; by default the server stays, "
                                 "read-only, until expctl stop")
        parser.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)


def create_experiment(args: argparse.Namespace) -> int:
    from expmgr.config import ExperimentConfig, ResolvedConfig
    from expmgr.experiment import Experiment
    from expmgr.experiment.stored import new_experiment_id
    config = ExperimentConfig.load(args.config)  # ConfigError: bad input, nothing started
    if args.debug:
        config.debug = True
    if args.foreground:
        experiment = Experiment(config, id=args.experiment_id)
        return _run_here(args, experiment, lambda: experiment.start(port=args.port, **_access_arguments(args)))
    exp_id = new_experiment_id()
    home = ResolvedConfig.from_config(config).experiment_working_directory
    return _start_daemon(args, ["create", "--config", str(Path(args.config).absolute()), "--experiment-id", exp_id,
                                *(["--debug"] if args.debug else [])], exp_id, home)


def resume_experiment(args: argparse.Namespace) -> int:
    from expmgr.experiment import Experiment
    if args.debug:
        raise not_supported("resume --debug", "a resumed experiment keeps its config's log level; "
                                              "create --debug sets it")
    use_experiment_dir(args.experiment_dir, args.id)
    entry = find_experiment(args.id)
    try:
        check_can_resume(entry)
    except ActionRefused as refused:
        raise CliError(str(refused)) from None
    if args.foreground:
        experiment = Experiment(None, id=entry.id)
        return _run_here(args, experiment, lambda: experiment.resume(
            args.port, wait_completion=False, home=Path(entry.dir).parent, **_access_arguments(args)))
    return _start_daemon(args, ["resume", entry.id], entry.id, Path(entry.dir).parent)


def view_experiment(args: argparse.Namespace) -> int:
    from expmgr.experiment import Experiment, ExperimentError, HostError, PortInUseError
    use_experiment_dir(args.experiment_dir, args.id)
    entry = find_experiment(args.id)
    try:
        Experiment.view(entry.id, port=args.port, home=Path(entry.dir).parent, **_access_arguments(args))
    except PortInUseError as error:
        raise CliError(f"--port {args.port}: {error}") from None
    except (HostError, auth.AccessError) as error:
        raise CliError(_flag_error(error)) from None
    except ExperimentError as error:  # e.g. its database is damaged
        raise CliError(str(error), EXIT_FAILED) from None
    return EXIT_OK


class _AccessArguments(TypedDict):
    host: str
    url_prefix: str
    token: str | None


def _access_arguments(args: argparse.Namespace) -> _AccessArguments:
    """``host``, ``url_prefix`` and ``token`` (``--token``, else $EXPMGR_TOKEN) for Experiment.
    $EXPMGR_TOKEN is taken out of this process's environment: nothing it starts (the
    dispatcher with the tuner's code, the watchdog, the trials; a daemon but through
    ``_start_daemon``) inherits it."""
    from_environment = os.environ.pop(auth.TOKEN_ENV, None)
    token = args.token if args.token is not None else (from_environment or None)
    return {"host": args.host, "url_prefix": args.url_prefix, "token": token}


def _flag_error(error: Exception) -> str:
    """An AccessError or HostError naming its flag (``url_prefix: ...`` -> ``--url-prefix: ...``)."""
    field, _, problem = str(error).partition(": ")
    return f"--{field.replace('_', '-')}: {problem}"


def _run_here(args: argparse.Namespace, experiment: Experiment, start: Callable[[], object]) -> int:
    """Start the experiment in this process (``start``), wait for its search's end, print how
    it ended; then serve it until Ctrl+C or SIGTERM, unless ``--exit-when-done``. A Ctrl+C or
    SIGTERM stops it at any point once it started; before that, nothing of it is left."""
    from expmgr.experiment.interrupts import PreemptSignal, StopSignal, raise_stop_signal

    def start_and_announce() -> None:
        _start_or_refuse(args, start)
        access = cast(auth.Access, experiment.access)  # a started experiment has its access and port
        if args.daemon:
            _move_output_to_log(experiment)
        elif access.token:  # the log leaves the token out: show it here, to the user only
            print("its web UI, with the access token: " + "  ".join(access.urls(cast(int, experiment.port))),
                  flush=True)

    previous_handler = signal.signal(signal.SIGTERM, raise_stop_signal)
    try:
        try:
            experiment.wait_completion(start=start_and_announce)
            status = _print_outcome(experiment)
            if status != "STOPPED" and not args.exit_when_done:  # a stopped one's server closed already
                print(f"its server stays up, read-only, until Ctrl+C or expctl stop {experiment.id} "
                      "(--exit-when-done ends it with the search)", flush=True)
                experiment.serve_until_stopped()
        except (KeyboardInterrupt, StopSignal, PreemptSignal):
            if not experiment.started:
                print(f"expctl {args.command}: interrupted before experiment {experiment.id} started; "
                      "it wrote nothing", file=sys.stderr)
                return EXIT_STOPPED
            # Once it started, wait_completion handles them during the search; after it, the server closes.
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        experiment.stop()
    status = experiment.get_status()
    return EXIT_OK if status == "DONE" else EXIT_STOPPED if status == "STOPPED" else EXIT_FAILED


def _start_or_refuse(args: argparse.Namespace, start: Callable[[], object]) -> None:
    """``start()``, its refusals as the CLI's errors naming the flag."""
    from expmgr.experiment import ExperimentError, HostError, PortInUseError
    try:
        start()
    except PortInUseError as error:
        raise CliError(f"--port {args.port}: {error}") from None
    except (HostError, auth.AccessError) as error:
        raise CliError(_flag_error(error)) from None
    except ExperimentError as error:
        raise CliError(str(error), EXIT_FAILED) from None


def _print_outcome(experiment: Experiment) -> str:
    """Print how the search ended and its best trial; its status."""
    status = experiment.get_status()
    print(f"experiment {experiment.id} {status}")
    best = experiment.best_trial()
    if best is not None:
        print(printable(f"best trial {best.trialJobId}: {best.value} with {best.parameter}"))
    if status == "ERROR":
        print(printable(experiment.get_error() or "", lines=True), file=sys.stderr)
    return status


def _move_output_to_log(experiment: Experiment) -> None:
    """The daemon's stdout from now on goes to logs/daemon.log and its stderr to
    logs/daemon-stderr.log (nnictl's ``log stdout`` and ``log stderr``); this closes the pipe
    that ``_start_daemon`` reads its start-up output from."""
    paths = cast(ExperimentPaths, experiment.paths)
    sys.stdout.flush()
    sys.stderr.flush()
    for path, descriptor in ((paths.daemon_log, 1), (paths.daemon_stderr_log, 2)):
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, descriptor)
        os.close(log)
    bound_stdout_file(paths.daemon_log, paths.daemon_stderr_log, experiment.log_limits)


def _start_daemon(args: argparse.Namespace, arguments: list[str], exp_id: str, home: Path) -> int:
    access = _access_arguments(args)
    _check_can_serve(args.port, access)
    command = [sys.executable, "-m", "expmgr.cli", *arguments, "--port", str(args.port),
               "--host", args.host, "--url-prefix", args.url_prefix, "--foreground", "--daemon",
               *(["--exit-when-done"] if args.exit_when_done else []),
               *(["--token", ""] if access["token"] == "" else [])]  # no token: not the last run's (resume)
    env = {key: value for key, value in os.environ.items() if key != auth.TOKEN_ENV}
    if access["token"]:
        env[auth.TOKEN_ENV] = access["token"]
    launched_at = time.time()
    daemon = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True, env=env)
    # The pipe closes when the daemon moved its output to its log, or when it died.
    assert daemon.stdout is not None  # started with stdout=PIPE
    early_output = daemon.stdout.read().decode(errors="replace")
    daemon.stdout.close()
    experiments = Registry(home)  # the experiment's own home, which may not be $EXPMGR_HOME
    entry = _wait_until_started(exp_id, daemon, experiments, launched_at)
    if entry is None:
        if daemon.poll() is None:  # alive but never serving: do not leave it behind
            daemon.terminate()
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        code = daemon.wait()
        sys.stderr.write(early_output)
        logs = home / exp_id / "logs"
        raise CliError(f"the experiment did not start (exit status {code})"
                       + (f"; its logs are in {logs}" if logs.is_dir() else ""),
                       EXIT_BAD_INPUT if code == EXIT_BAD_INPUT else EXIT_FAILED)
    log_dir = home / exp_id / "logs"
    made = "created" if arguments[0] == "create" else "resumed"
    if entry.pid is None:  # a short search with --exit-when-done: it ran, ended and closed already
        print(f"experiment {exp_id} {made}; it has ended already: {entry.status.value}")
        print(f"  its log:         {log_dir / 'experiment.log'}")
        print(f"  its trials:      expctl trial ls {exp_id}")
        return EXIT_OK
    first, *others = access_of(entry).urls(cast(int, entry.port))
    print(f"experiment {exp_id} {made}: {first}")
    for url in others:
        print(f"  from elsewhere:  {url}")
    print(f"  follow its log:  tail -f {log_dir / 'experiment.log'}")
    print(f"  its trials:      expctl trial ls {exp_id}")
    print(f"  stop it:         expctl stop {exp_id}")
    return EXIT_OK


def _check_can_serve(port: int, access: _AccessArguments) -> None:
    """Refuse here what the daemon would refuse: a taken port, a bad --host, --url-prefix
    or --token (the experiment's own checks, on sockets closed again at once)."""
    from expmgr.experiment import HostError, PortInUseError
    from expmgr.experiment.listening import server_sockets
    try:
        sockets, _ = server_sockets(port, access["host"], access["url_prefix"], access["token"])
    except PortInUseError as error:
        raise CliError(f"--port {port}: {error}") from None
    except (HostError, auth.AccessError) as error:
        raise CliError(_flag_error(error)) from None
    for sock in sockets:
        sock.close()


def _wait_until_started(exp_id: str, daemon: subprocess.Popen, experiments: Registry,
                        launched_at: float) -> RegistryEntry | None:
    """The experiment's registry entry once the daemon's REST server answers, or once the
    daemon exited after running the experiment to its end and closing it (``--exit-when-done``
    with a search shorter than this wait; its pid is then None); None if the daemon died
    before, or never answered."""
    import urllib.request  # here: the daemon, which imports this module too, has no use for it
    deadline = time.monotonic() + _STARTUP_TIMEOUT
    while time.monotonic() < deadline and daemon.poll() is None:
        entry = experiments.get(exp_id)
        if entry is not None and entry.port:
            try:  # an access file left by an earlier run may be read first: a refusal means not yet
                access = auth.Access.load(ExperimentPaths(Path(entry.dir)).access_file)
                request = urllib.request.Request(access.base_url(entry.port) + "api/v1/nni/check-status",
                                                 headers=access.headers())
                with urllib.request.urlopen(request, timeout=5) as response:
                    if response.status == 200:
                        return entry
            except (OSError, auth.AccessError):
                pass
        time.sleep(0.05)
    if daemon.poll() is None:
        return None
    entry = experiments.get(exp_id)
    # Started by this daemon (a resumed one's entry held an earlier end before), ended and closed.
    if entry is not None and entry.start_time >= launched_at and entry.status.is_finished() and entry.pid is None:
        return entry
    return None

"""``expctl create``: start an experiment from a config file, as a detached daemon
(the default) or in this process (``--foreground``).

The daemon is this same command run with ``--foreground`` in a new session. Until
its experiment runs, its output comes back through a pipe (so an early error is
shown here); then it moves its output to ``logs/daemon.log`` and this command
returns once the experiment's REST server answers.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from expmgr.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CliError, port_number, registry

_STARTUP_TIMEOUT = 60.0


def add_parser(commands: argparse._SubParsersAction) -> None:
    create = commands.add_parser("create", help="create and run an experiment from a config file")
    create.add_argument("--config", "-c", type=Path, required=True, help="the experiment's YAML config")
    create.add_argument("--port", "-p", type=port_number, default=8080, help="REST and web UI port (default 8080)")
    create.add_argument("--foreground", "-f", action="store_true",
                        help="run in this process, logging to stdout, until the experiment ends")
    create.add_argument("--experiment-id", help=argparse.SUPPRESS)  # the daemon is told its id
    create.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    create.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from expmgr.config import ExperimentConfig
    config = ExperimentConfig.load(args.config)  # ConfigError: bad input, nothing started
    if args.foreground:
        return _run_here(args, config)
    return _start_daemon(args, config)


def _run_here(args: argparse.Namespace, config: object) -> int:
    from expmgr.experiment import Experiment, ExperimentError, PortInUseError
    experiment = Experiment(config, id=args.experiment_id)
    try:
        succeeded = experiment.run(port=args.port, on_started=_move_output_to_log(experiment) if args.daemon
                                   else None)
    except PortInUseError as error:
        raise CliError(f"--port {args.port}: {error}") from None
    except ExperimentError as error:
        raise CliError(str(error), EXIT_FAILED) from None
    status = experiment.get_status()
    print(f"experiment {experiment.id} {status}")
    best = experiment.best_trial()
    if best is not None:
        print(f"best trial {best.trialJobId}: {best.value} with {best.parameter}")
    if status == "ERROR":
        print(experiment.get_error() or "", file=sys.stderr)
    if succeeded:
        return EXIT_OK
    return EXIT_STOPPED if status == "STOPPED" else EXIT_FAILED


def _move_output_to_log(experiment: object):  # noqa: ANN202
    def move() -> None:
        log = os.open(experiment.paths.log_dir / "daemon.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    return move


def _start_daemon(args: argparse.Namespace, config: object) -> int:
    from expmgr.experiment.experiment import new_experiment_id
    canonical = config.canonical()
    _check_port_free(args.port)
    exp_id = new_experiment_id()
    command = [sys.executable, "-m", "expmgr.cli", "create", "--config", str(Path(args.config).absolute()),
               "--port", str(args.port), "--foreground", "--daemon", "--experiment-id", exp_id]
    daemon = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True)
    # The pipe closes when the daemon moved its output to its log, or when it died.
    early_output = daemon.stdout.read().decode(errors="replace")
    daemon.stdout.close()
    if daemon.poll() is not None or not _wait_until_serving(exp_id, daemon):
        code = daemon.wait()
        sys.stderr.write(early_output)
        raise CliError(f"the experiment did not start (exit status {code})",
                       EXIT_BAD_INPUT if code == EXIT_BAD_INPUT else EXIT_FAILED)
    entry = registry().get(exp_id)
    log_dir = Path(canonical.experiment_working_directory) / exp_id / "logs"
    print(f"experiment {exp_id} created: http://127.0.0.1:{entry.port}")
    print(f"  follow its log:  tail -f {log_dir / 'experiment.log'}")
    print(f"  its trials:      expctl trial ls {exp_id}")
    print(f"  stop it:         expctl stop {exp_id}")
    return EXIT_OK


def _check_port_free(port: int) -> None:
    if port == 0:
        return
    from tornado.netutil import bind_sockets
    try:
        for sock in bind_sockets(port, "127.0.0.1"):
            sock.close()
    except OSError as error:
        raise CliError(f"--port {port}: cannot listen on 127.0.0.1:{port}: {error.strerror}; "
                       "choose another port") from None


def _wait_until_serving(exp_id: str, daemon: subprocess.Popen) -> bool:
    """Until the daemon's REST server answers; False if it died or never answered."""
    deadline = time.monotonic() + _STARTUP_TIMEOUT
    while time.monotonic() < deadline and daemon.poll() is None:
        entry = registry().get(exp_id)
        if entry is not None and entry.port:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{entry.port}/api/v1/nni/check-status",
                                            timeout=5) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
        time.sleep(0.05)
    return False

"""``expctl``: create and manage experiments from the shell.

    expctl create --config config.yml --port 8080 --foreground

Exit status: 0 when the experiment is DONE, 1 when it failed (ERROR) or could
not start, 2 for bad input (usage, config, a port in use), 130 when it was stopped
(Ctrl+C, SIGTERM).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 1, 2, 130


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 0 and 65535, got {port}")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="expctl", description="Run and manage expmgr experiments.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser("create", help="create and run an experiment from a config file")
    create.add_argument("--config", "-c", type=Path, required=True, help="the experiment's YAML config")
    create.add_argument("--port", "-p", type=_port, default=8080, help="REST and web UI port (default 8080)")
    create.add_argument("--foreground", "-f", action="store_true",
                        help="run in this process and log to stdout (the only mode so far)")
    create.set_defaults(handler=_create)
    return parser


def _create(args: argparse.Namespace) -> int:
    from expmgr.config import ConfigError, ExperimentConfig
    from expmgr.experiment import Experiment, ExperimentError, PortInUseError
    if not args.foreground:
        print("expctl create: only --foreground is available so far; add --foreground", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        experiment = Experiment(ExperimentConfig.load(args.config))
        succeeded = experiment.run(port=args.port)
    except ConfigError as error:
        print(f"expctl create: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PortInUseError as error:
        print(f"expctl create: --port {args.port}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ExperimentError as error:
        print(f"expctl create: {error}", file=sys.stderr)
        return EXIT_FAILED
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())

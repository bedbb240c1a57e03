"""``expctl``: create and manage experiments from the shell.

    expctl create --config config.yml --port 8080       # a detached daemon
    expctl create --config config.yml --foreground      # in this terminal
    expctl resume ID [--foreground]
    expctl view ID [--port 8080]
    expctl ui [--port 8000]                             # every experiment, in the web UI
    expctl experiment list [--all]
    expctl trial ls [ID] [--table | --nnictl | --json]  # a table on a terminal, nnictl's JSON elsewhere
    expctl update ID concurrency|trialnum|duration|searchspace VALUE_OR_FILE
    expctl trial kill ID TRIAL
    expctl stop [ID | --all] [--cancel | --keep-trials]
    expctl top [ID]
    expctl webui url [ID]
    expctl experiment show|status|export|import|delete ...
    expctl log experiment|dispatcher [ID] [-f] [--tail N]
    expctl log stdout|stderr|trial [ID] TRIAL [-f] [--tail N]
    expctl config show [ID]
    expctl experiment save [ID] [--path DIR] [--saveCodeDir] | load --path ZIP --codeDir DIR
    expctl algo register --meta_path FILE | list | show NAME | unregister NAME
    expctl run SCRIPT.py|NOTEBOOK.ipynb [ARGS...]        # an NNI launcher script, as it is

nnictl's spellings of these work too (``update concurrency ID --value 4``, ``trial kill
ID --trial_id T``, ...); nnictl's commands expmgr has no counterpart for answer
"not supported: ..." with status 2 (docs/nni-migration.md lists them all).

IDs may be abbreviated to a unique prefix, and left out where one experiment runs.
Experiments are looked up in ``$EXPMGR_HOME`` (default ``~/expmgr-experiments``).
Exit status: 0 on success (``create --foreground``: the experiment ended DONE),
1 on a failure (an experiment in ERROR or that could not start), 2 for bad
input (usage, config, a port in use, an unknown or ambiguous id), 130 when a
foreground experiment was stopped (Ctrl+C, SIGTERM), 141 when the reader of its
output went away (``| head``), quietly.
"""
from __future__ import annotations

import argparse
import os
import sys

from expmgr import __version__
from expmgr.cli import algo, archive, control, home, launch, listing, logs, nnictl, run, top, update
from expmgr.cli.common import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_FAILED, CliError, printable
from expmgr.store.registry import RegistryError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="expctl", description="Run and manage expmgr experiments.")
    parser.add_argument("--version", "-v", action="version", version=__version__, help="print expmgr's version")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    launch.add_parsers(commands)
    control.add_parser(commands)
    experiment_commands, trial_commands = listing.add_parsers(commands)
    update.add_parsers(commands, experiment_commands, trial_commands)
    logs.add_parser(commands)
    top.add_parser(commands)
    home.add_parser(commands)
    nnictl.add_parsers(commands, experiment_commands)
    archive.add_parsers(experiment_commands)
    algo.add_parser(commands)
    run.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    refused = nnictl.refusal(sys.argv[1:] if argv is None else argv)
    if refused is not None:
        print(printable(refused, lines=True), file=sys.stderr)
        return EXIT_BAD_INPUT
    args = build_parser().parse_args(argv)
    try:
        status = _run(args)
        sys.stdout.flush()  # here, so that a reader gone away is seen here and not at exit
        return status
    except BrokenPipeError:
        # Python ignores SIGPIPE, so a closed pipe is this exception: no traceback, and
        # stdout pointed at devnull so that the flush at exit does not raise it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _run(args: argparse.Namespace) -> int:
    from expmgr.config import ConfigError
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"expctl {args.command}: {printable(error, lines=True)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except CliError as error:
        print(f"expctl {args.command}: {printable(error, lines=True)}", file=sys.stderr)
        return error.status
    except RegistryError as error:  # a damaged registry.sqlite: every command reads it
        print(f"expctl {args.command}: {printable(error, lines=True)}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

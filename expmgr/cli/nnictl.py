"""nnictl's commands that expctl has no spelling of its own for: ``config show`` (the
experiment's config, as JSON), and those expmgr has no counterpart for, which answer
``not supported: <what> (<why>)`` with exit status 2 rather than a usage error, so that
an NNI user's script says what it lacks (see docs/nni-migration.md)."""
from __future__ import annotations

import argparse
import json

from expmgr.cli.common import EXIT_OK, experiment_store, find_experiment, not_supported

_NOT_SUPPORTED = {
    "platform": ("nnictl platform", "expmgr runs trials on this machine only: there is no remote platform to clean"),
    "package": ("nnictl package", "replaced by nnictl algo in NNI: use expctl algo"),
    "trainingservice": ("nnictl trainingservice", "expmgr has the local training service only"),
    "ss_gen": ("nnictl ss_gen", "deprecated in NNI: write the search space in the config or a JSON file"),
    "jupyter-extension": ("nnictl jupyter-extension", "expmgr's web UI is served by the experiment itself"),
    "hello": ("nnictl hello", "see examples/ in expmgr's repository for a first experiment"),
}
_NOT_SUPPORTED_EXPERIMENT: dict[str, tuple[str, str]] = {}
"""``experiment`` subcommands refused (none now: ``save`` and ``load`` are in archive.py)."""


def refusal(argv: list[str]) -> str | None:
    """The "not supported" message for a command line of an nnictl command expmgr lacks,
    whatever its flags (argparse would stop at flags it does not know), or None."""
    words = [word for word in argv if not word.startswith("-")][:2]
    known = (_NOT_SUPPORTED.get(words[0]) if words else None) or (
        _NOT_SUPPORTED_EXPERIMENT.get(words[1]) if len(words) == 2 and words[0] == "experiment" else None)
    if known is None or "-h" in argv or "--help" in argv:
        return None
    return f"expctl {words[0]}: {not_supported(*known)}"


def add_parsers(commands: argparse._SubParsersAction, experiment_commands: argparse._SubParsersAction) -> None:
    config = commands.add_parser("config", help="the experiment's config (nnictl's config show)")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    show = config_commands.add_parser("show", help="the experiment's config, as JSON")
    show.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    show.set_defaults(handler=show_config)
    for name, (what, why) in _NOT_SUPPORTED.items():
        _refusing(commands, name, what, why)
    for name, (what, why) in _NOT_SUPPORTED_EXPERIMENT.items():
        _refusing(experiment_commands, name, what, why)


def _refusing(commands: argparse._SubParsersAction, name: str, what: str, why: str) -> None:
    """A command taking any arguments that refuses with ``not supported``."""
    parser = commands.add_parser(name, help=f"nnictl's; not supported: {why}", add_help=False)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def refuse(args: argparse.Namespace) -> int:
        raise not_supported(what, why)
    parser.set_defaults(handler=refuse)


def show_config(args: argparse.Namespace) -> int:
    with experiment_store(find_experiment(args.id)) as store:
        print(json.dumps(store.profile().config, indent=4))
    return EXIT_OK

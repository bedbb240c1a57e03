"""``expctl update`` and ``expctl trial kill``: change a running experiment through its
REST API (NNI's ``PUT experiment?update_type=...`` and ``DELETE trial-jobs/<id>``)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from expmgr.cli.common import EXIT_OK, CliError, check_id, find_experiment, is_running, rest_call, shown_status
from expmgr.config import UPDATABLE_FIELDS

_UPDATES = {entry.cli_word: entry for entry in UPDATABLE_FIELDS}
"""expctl's word -> the field it changes."""


def add_parsers(commands: argparse._SubParsersAction, experiment_commands: argparse._SubParsersAction,
                trial_commands: argparse._SubParsersAction) -> None:
    update = commands.add_parser("update", help="change a running experiment")
    update.add_argument("id", help="experiment id or a unique prefix")
    update.add_argument("what", choices=list(_UPDATES))
    update.add_argument("value", help="the new value: a number, a duration such as 2h, or a search-space file")
    update.set_defaults(handler=update_experiment)
    importing = experiment_commands.add_parser("import", help="give a running experiment's tuner earlier results")
    importing.add_argument("id", help="experiment id or a unique prefix")
    importing.add_argument("file", type=Path, help='a JSON list of {"parameter": {...}, "value": ...}')
    importing.set_defaults(handler=import_results)
    kill = trial_commands.add_parser("kill", help="stop one running trial (USER_CANCELED)")
    kill.add_argument("id", help="experiment id or a unique prefix")
    kill.add_argument("trial", help="the trial's id")
    kill.set_defaults(handler=kill_trial)


def _running(id_or_prefix: str):  # noqa: ANN202
    entry = find_experiment(id_or_prefix, running=True)
    if not is_running(entry):
        raise CliError(f"experiment {entry.id} is not running ({shown_status(entry)}); it cannot be changed")
    return entry


def update_experiment(args: argparse.Namespace) -> int:
    entry = _running(args.id)
    field = _UPDATES[args.what]
    value = _parse_value(args.what, args.value)
    rest_call(entry, "PUT", f"experiment?update_type={field.update_type}", {"params": {field.field: value}})
    print(f"experiment {entry.id}: {field.field} is now {args.value}")
    return EXIT_OK


def _parse_value(what: str, text: str) -> object:
    if what in ("concurrency", "trialnum"):
        try:
            return int(text)
        except ValueError:
            raise CliError(f"{what}: expected a whole number, got {text!r}") from None
    if what == "duration":
        try:
            seconds = float(text)
        except ValueError:
            return text  # "2h": the manager checks it as a config duration
        if not math.isfinite(seconds):
            raise CliError(f"duration: expected a number of seconds or a duration such as 2h, got {text!r}")
        return seconds
    from expmgr.config import ConfigError, validate_search_space
    from expmgr.config._loader import read_search_space_file
    path = Path(text)
    if not path.is_file():
        raise CliError(f"searchspace: no such file {text!r}")
    space, _ = read_search_space_file(path.absolute())
    try:
        validate_search_space(space, "searchSpace")
    except ConfigError as error:
        raise CliError(f"{text}: {error}") from None
    return space


def import_results(args: argparse.Namespace) -> int:
    entry = _running(args.id)
    try:
        records = json.loads(args.file.read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"{args.file}: {error.strerror}") from None
    except ValueError as error:
        raise CliError(f"{args.file}: not JSON ({error})") from None
    try:
        rest_call(entry, "POST", "experiment/import-data", records)
    except CliError as error:
        raise CliError(f"{args.file}: {error}", error.status) from None
    print(f"experiment {entry.id}: {len(records)} results imported")
    return EXIT_OK


def kill_trial(args: argparse.Namespace) -> int:
    trial_id = check_id(args.trial, "TRIAL")
    entry = _running(args.id)
    rest_call(entry, "DELETE", f"trial-jobs/{trial_id}")
    print(f"trial {args.trial} of experiment {entry.id} is being stopped")
    return EXIT_OK

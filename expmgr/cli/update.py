"""``expctl update``, ``expctl experiment import`` and ``expctl trial kill``: change a running
experiment through its REST API (NNI's ``PUT experiment?update_type=...``, ``POST
experiment/import-data`` and ``DELETE trial-jobs/<id>``).

Each takes expctl's spelling and nnictl's::

    expctl update ID concurrency 4          expctl update concurrency [ID] --value 4
    expctl update ID searchspace F.json     expctl update searchspace [ID] --filename F.json
    expctl experiment import ID F.json      expctl experiment import [ID] --filename F.json
    expctl trial kill ID TRIAL              expctl trial kill [ID] --trial_id TRIAL
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from expmgr.cli.common import EXIT_OK, CliError, check_id, find_experiment, is_serving, printable, rest_call, shown_status
from expmgr import strict_json
from expmgr.config import UPDATABLE_FIELDS
from expmgr.engine.imports import is_non_finite_result

_UPDATES = {entry.cli_word: entry for entry in UPDATABLE_FIELDS}
"""expctl's word -> the field it changes."""


def add_parsers(commands: argparse._SubParsersAction, experiment_commands: argparse._SubParsersAction,
                trial_commands: argparse._SubParsersAction) -> None:
    update = commands.add_parser("update", help="change a running experiment")
    update.add_argument("words", nargs="+", metavar="ID WHAT VALUE | WHAT [ID]",
                        help=f"WHAT is one of {', '.join(_UPDATES)}; VALUE a number, a duration such as 2h, "
                             "or a search-space file")
    update.add_argument("--value", "-v", help="nnictl's spelling: the new value (concurrency, trialnum, duration)")
    update.add_argument("--filename", "-f", help="nnictl's spelling: the new search-space file (searchspace)")
    update.set_defaults(handler=update_experiment)
    importing = experiment_commands.add_parser("import", help="give a running experiment's tuner earlier results")
    importing.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    importing.add_argument("file", nargs="?", type=Path,
                           help='a JSON list of {"parameter": {...}, "value": ...}, value a number, a dict with '
                                '"default", or either as a JSON string (what experiment export writes, as NNI\'s)')
    importing.add_argument("--filename", "-f", type=Path, help="nnictl's spelling of FILE")
    importing.set_defaults(handler=import_results)
    kill = trial_commands.add_parser("kill", help="stop one running trial (USER_CANCELED)")
    kill.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    kill.add_argument("trial", nargs="?", help="the trial's id")
    kill.add_argument("--trial_id", "-T", help="nnictl's spelling of TRIAL")
    kill.set_defaults(handler=kill_trial)


def _id_and_named(first: str | None, named_value: str | None, second: str | None,
                  usage: str) -> tuple[str | None, str]:
    """The experiment id (None: the only running one) and the value given either as the
    second positional (expctl's spelling) or with its flag (nnictl's, ``named_value``)."""
    if named_value is not None:
        if second is not None:
            raise CliError(f"expected {usage}")
        return first, named_value
    if first is None or second is None:
        raise CliError(f"expected {usage}")
    return first, second


def _running(id_or_prefix: str | None):  # noqa: ANN202
    """The experiment to change: the only running one without an id; an ended one that is
    still served is found too, and its server says what it refuses (after DONE it takes
    a raised maxTrialNumber or maxExperimentDuration, and runs again)."""
    entry = find_experiment(id_or_prefix, running=True, served=True)
    if not is_serving(entry):
        raise CliError(f"experiment {entry.id} is not running ({shown_status(entry)}); it cannot be changed: "
                       f"expctl resume {entry.id} runs it again, then it can")
    return entry


def update_experiment(args: argparse.Namespace) -> int:
    exp_id, what, text = _update_words(args)
    entry = _running(exp_id)
    field = _UPDATES[what]
    value = _parse_value(what, text)
    rest_call(entry, "PUT", f"experiment?update_type={field.update_type}", {"params": {field.field: value}})
    again = "; it runs again" if entry.status.is_finished() else ""   # it ended DONE: given more trials
    print(f"experiment {entry.id}: {field.field} is now {printable(text)}{again}")
    return EXIT_OK


def _update_words(args: argparse.Namespace) -> tuple[str | None, str, str]:
    """(experiment id or None, what, value) from ``ID WHAT VALUE`` or nnictl's
    ``WHAT [ID] --value V`` / ``searchspace [ID] --filename F``."""
    words, choices = args.words, ", ".join(_UPDATES)
    if words[0] in _UPDATES:  # nnictl's order: no experiment id is called "concurrency"
        what = words[0]
        flag, given, wrong = (("--filename", args.filename, args.value) if what == "searchspace"
                              else ("--value", args.value, args.filename))
        if given is None or wrong is not None or len(words) > 2:
            raise CliError(f"expected update {what} [ID] {flag} {'FILE' if what == 'searchspace' else 'VALUE'}")
        return (words[1] if len(words) == 2 else None), what, given
    if len(words) != 3 or words[1] not in _UPDATES or args.value is not None or args.filename is not None:
        raise CliError(f"expected update ID WHAT VALUE or update WHAT [ID] --value VALUE (WHAT: one of {choices})")
    return words[0], words[1], words[2]


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
    exp_id, text = _id_and_named(args.id, None if args.filename is None else str(args.filename),
                                 None if args.file is None else str(args.file),
                                 "experiment import ID FILE or experiment import [ID] --filename FILE")
    file = Path(text)
    entry = _running(exp_id)
    try:
        records = strict_json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"{file}: {error.strerror}") from None
    except ValueError as error:
        raise CliError(f"{file}: not JSON ({error})") from None
    left_out = 0
    if isinstance(records, list):  # what an export wrote: a trial whose result was NaN is no use to the tuner
        kept = [record for record in records
                if not (isinstance(record, dict) and is_non_finite_result(record.get("value")))]
        left_out, records = len(records) - len(kept), kept
    try:
        rest_call(entry, "POST", "experiment/import-data", records)
    except CliError as error:
        raise CliError(f"{file}: {error}", error.status) from None
    print(f"experiment {entry.id}: {len(records)} results imported"
          + (f" ({left_out} with a non-finite value left out: tuners take finite results only)" if left_out else ""))
    return EXIT_OK


def kill_trial(args: argparse.Namespace) -> int:
    exp_id, trial = _id_and_named(args.id, args.trial_id, args.trial,
                                  "trial kill ID TRIAL or trial kill [ID] --trial_id TRIAL")
    trial_id = check_id(trial, "TRIAL")
    entry = _running(exp_id)
    rest_call(entry, "DELETE", f"trial-jobs/{trial_id}")
    print(f"trial {trial_id} of experiment {entry.id} is being stopped")
    return EXIT_OK

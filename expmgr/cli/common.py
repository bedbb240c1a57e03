"""What every expctl command shares: exit statuses, the error type, finding experiments
and reading their stores."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, cast

from expmgr.layout import HOME_ENV, ExperimentPaths, default_home
from expmgr.server.lifecycle import crashed, is_running, is_serving  # noqa: F401 - the commands import them from here
from expmgr.states import TrialState
from expmgr.store import Store, StoreError, open_store
from expmgr.store.registry import Registry, RegistryEntry

if TYPE_CHECKING:
    from expmgr.server.auth import Access

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 1, 2, 130
EXIT_BROKEN_PIPE = 141
"""The reader of stdout went away (``expctl trial ls | head -1``): 128 + SIGPIPE, the
status a shell shows for ``cat``, ``yes`` and the like in the same place."""


class CliError(Exception):
    """A command failed; ``status`` is the exit status (2 for bad input)."""

    def __init__(self, message: str, status: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.status = status


def not_supported(what: str, why: str) -> CliError:
    """The error for an nnictl command or flag expmgr has no counterpart for (exit status 2)."""
    return CliError(f"not supported: {what} ({why})")


def use_experiment_dir(folder: Path | None, exp_id: str) -> None:
    """nnictl's ``--experiment_dir``: look the experiment up in that folder's registry, i.e.
    the folder holding it (its ``experimentWorkingDirectory``) or the experiment's own folder.
    Set in the environment, so that a daemon started from here looks in the same place."""
    if folder is None:
        return
    folder = folder.expanduser().absolute()
    if not folder.is_dir():
        raise CliError(f"--experiment_dir: no such folder {str(folder)!r}")
    home = folder.parent if folder.name.startswith(exp_id) and not (folder / exp_id).is_dir() else folder
    os.environ[HOME_ENV] = str(home)


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port between 0 and 65535, got {port}")
    return port


def registry() -> Registry:
    return Registry(default_home())


def shown_status(entry: RegistryEntry) -> str:
    """The registry's status, or what became of an experiment whose process is gone."""
    if not crashed(entry):
        return entry.status.value
    return "GONE"  # its process died without recording an end (SIGKILL, a reboot)


GONE_TRIAL_STATES = frozenset({TrialState.WAITING, TrialState.RUNNING})
"""States that need a live manager: in a GONE experiment, such a trial is shown as
``RUNNING (gone)`` (its process was killed with its manager; a resume runs it again)."""


def shown_trial_status(status: TrialState, experiment_gone: bool) -> str:
    """A trial's state as listings show it: the stored one, marked ``(gone)`` when its
    experiment died under it (listings never write to the store)."""
    return f"{status.value} (gone)" if experiment_gone and status in GONE_TRIAL_STATES else status.value


def find_experiment(id_or_prefix: str | None, *, running: bool = False, argument: str = "ID",
                    served: bool = False) -> RegistryEntry:
    """The experiment whose id starts with ``id_or_prefix``; without one (None), the only
    running experiment: its search runs (``is_running``). An ended experiment whose server
    still answers (DONE or ERROR, ``is_serving``) is not running: it is picked only by
    commands that need a live server (``served``: stop, update, webui url, import, trial
    kill), when no experiment runs and it is the only one served. With an id, ``running``
    prefers the matches that are served. Raises CliError naming ``argument`` when the id is
    empty, unknown or ambiguous: an empty prefix would match every experiment."""
    if id_or_prefix is not None:
        check_id(id_or_prefix, argument)
    entries = registry().entries()
    if id_or_prefix is None:
        return _the_running_one(entries, served)
    matches = [entry for entry in entries if entry.id.startswith(id_or_prefix)]
    if running:
        matches = [entry for entry in matches if is_serving(entry)] or matches
    if not matches:
        raise CliError(f"{argument}: no experiment {id_or_prefix!r} in {registry().path}")
    if len(matches) > 1:
        raise CliError(f"{argument}: {id_or_prefix!r} is ambiguous: " + ", ".join(entry.id for entry in matches))
    return matches[0]


def _the_running_one(entries: list[RegistryEntry], served: bool) -> RegistryEntry:
    running = [entry for entry in entries if is_running(entry)]
    if len(running) == 1:
        return running[0]
    if running:
        raise CliError("several experiments are running; name one of: " + ", ".join(entry.id for entry in running))
    ended = [entry for entry in entries if is_serving(entry)]
    if served and len(ended) == 1:
        return ended[0]
    if not ended:
        raise CliError("no experiment is running; name one (expctl experiment list --all)")
    listed = ", ".join(f"{entry.id} ({entry.status.value})" for entry in ended)
    if served:
        raise CliError(f"no experiment is running, and several ended ones are served; name one of: {listed}")
    raise CliError(f"no experiment is running (served after their end: {listed}); name one")


def current_entry(entry: RegistryEntry) -> RegistryEntry:
    """``entry`` as the registry has it now; CliError (exit status 1) when the experiment was
    deleted from it meanwhile (a command that waits on an experiment reads it again)."""
    experiments = registry()
    current = experiments.get(entry.id)
    if current is None:
        raise CliError(f"experiment {entry.id} is no longer in the registry ({experiments.path}): "
                       "it was deleted meanwhile", EXIT_FAILED)
    return current


def access_of(entry: RegistryEntry) -> "Access":
    """The host, url prefix and token of the experiment's server (its access file);
    CliError when it cannot be read (another user's experiment)."""
    from expmgr.server.auth import Access, AccessError
    try:
        return Access.load(ExperimentPaths(Path(entry.dir)).access_file)
    except AccessError as error:
        raise CliError(error.problem, EXIT_FAILED) from None


def check_id(text: str, argument: str) -> str:
    """``text`` if it can name something by its id or a prefix of it; CliError naming
    ``argument`` when it is empty or blank (as a prefix it would match everything)."""
    if not text.strip():
        raise CliError(f"{argument}: expected an id or a unique prefix of one, got {text!r}")
    return text


@contextmanager
def experiment_store(entry: RegistryEntry) -> Iterator[Store]:
    """The experiment's store, read-only, closed after the block. A missing or damaged
    database (garbage, truncated, another program's file), at opening or at any query in
    the block, is a CliError naming the file (exit 1), not a traceback."""
    paths = ExperimentPaths(Path(entry.dir))
    try:
        store = open_store(paths, readonly=True)
    except StoreError as error:
        raise CliError(str(error), EXIT_FAILED) from None
    with store:
        try:
            yield store
        except StoreError as error:
            raise CliError(str(error), EXIT_FAILED) from None


def rest_call(entry: RegistryEntry, method: str, route: str, body: Any = None) -> Any:
    """Call a running experiment's REST API (with its token); CliError with its message
    when it refuses."""
    from expmgr.experiment.remote import RestRefused, rest_call as call
    try:
        # Called for a running experiment, whose entry has its server's port.
        return call(cast(int, entry.port), method, route, body, access=access_of(entry))
    except RestRefused as refused:
        raise CliError(str(refused), EXIT_BAD_INPUT if refused.status in (400, 404, 409) else EXIT_FAILED) from None


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` safe to print on a terminal: every control character (C0, DEL, C1: ESC and
    so any escape sequence, a carriage return, a bell) shown as a visible escape such as
    ``\\x1b``, so that a name or a message cannot move the cursor, recolour, retitle or
    clear the user's terminal. With ``lines``, newlines are kept (a multi-line message).
    Every plain (not JSON) output of a string a user or a trial chose goes through it."""
    pattern = _CONTROL_BUT_NEWLINE if lines else _CONTROL
    return pattern.sub(lambda match: f"\\x{ord(match.group()):02x}", str(text))


def add_output_flags(parser: argparse.ArgumentParser, expctl_json: bool = False) -> None:
    """``--table`` and ``--nnictl`` (and, with ``expctl_json``, ``--json``): which output a
    listing prints. Without one, ``nnictl_output`` picks by where stdout goes."""
    forms = parser.add_mutually_exclusive_group()
    forms.add_argument("--table", action="store_const", const="table", dest="output_form",
                       help="expctl's table (the default on a terminal)")
    forms.add_argument("--nnictl", action="store_const", const="nnictl", dest="output_form",
                       help="nnictl's JSON, as scripts written for nnictl parse it (the default when stdout "
                            "is not a terminal)")
    if expctl_json:
        forms.add_argument("--json", action="store_const", const="json", dest="output_form",
                           help="expctl's own JSON: a list with the table's columns as keys")


def output_form(args: argparse.Namespace) -> str:
    """``table``, ``nnictl`` or ``json``: the flag given, else the table on a terminal and
    nnictl's output elsewhere (a pipe, a file: where a script reads it). Scripts written for
    nnictl cannot add a flag; people at a terminal read a table (docs/cli.md, "Output")."""
    if args.output_form is not None:
        return str(args.output_form)
    return "table" if sys.stdout.isatty() else "nnictl"


def print_nnictl_json(content: Any) -> None:
    """``content`` laid out as nnictl prints a REST answer (sorted keys, four spaces, no
    space after ``:``), byte for byte."""
    print(json.dumps(content, indent=4, sort_keys=True, separators=(",", ":")))


def print_table(rows: list[dict[str, Any]], columns: list[str], as_json: bool) -> None:
    """Rows as a human table (columns in order, each cell ``printable``), or as a JSON
    list with ``--json`` (where JSON escapes control characters itself)."""
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        print("(none)")
        return
    cells = [[printable(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    print("  ".join(column.upper().ljust(width) for column, width in zip(columns, widths)).rstrip())
    for line in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())

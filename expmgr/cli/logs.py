"""``expctl log``: print, or follow (``-f``) until it ends, an experiment's or a trial's log.

    expctl log experiment|dispatcher [ID] [-f] [--tail N | --head N]
    expctl log stdout|stderr|trial [ID] TRIAL [-f] [--tail N | --head N]

and nnictl's spellings, told apart by naming no trial:

    expctl log stdout|stderr [ID] [--tail/-T N] [--head/-H N] [--path]   the daemon's stdout, stderr
    expctl log trial [ID] [--trial_id/-T TRIAL]                          trials' folders

A single id is the experiment's (nnictl's meaning) when it is a whole experiment id,
else a trial of the only running experiment (expctl's).

A log bounded by ``logMaxSize`` is read across its rotated files (``NAME.k`` ... ``NAME.1``,
then ``NAME``; expmgr/logreader.py): a whole log is streamed in blocks, ``--tail`` reads
backwards from the end only as far as its lines go, ``--head`` from the start, and
``--follow`` follows the file it printed by inode through its rotations. What rotation
deleted before what is shown is said once on stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator, cast

from expmgr.cli.common import (EXIT_FAILED, EXIT_OK, CliError, check_id, current_entry, experiment_store, find_experiment,
                               is_running, printable, registry)
from expmgr.layout import ExperimentPaths
from expmgr.logreader import (BLOCK_BYTES, Listing, LogFile, RefusedFile, Snapshot, head_blocks, last_lines_start, open_kept,
                              read_blocks)
from expmgr.server.home import stored_trial_files
from expmgr.store.registry import RegistryEntry
from expmgr.training.files import MAX_RANK_LOGS
from expmgr.trial import rank_file_name

if TYPE_CHECKING:
    from expmgr.store import TrialRecord


_FOLLOW_INTERVAL = 0.2
_RELIST_PAUSE = 0.01
"""A follow that no longer finds its file lists the log again after this, a few times,
before it takes the file for rotated away (a listing may fall in the middle of a rotation)."""
_MOVES_PER_CHECK = 100
"""Files a follow moves on to in one check (a log rotated that often since the last one
is read on at the next)."""
_BOUNDS = "the config's logMaxSize and logFilesKept bound each log"
_EXPERIMENT_LOGS = {"experiment": "experiment_log", "dispatcher": "dispatcher_log"}
_TRIAL_LOGS = {"stdout": "stdout", "stderr": "stderr", "trial": "trial.log"}
"""Each trial log's command and its name among the trial's files (training.TRIAL_LOGS)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="print or follow an experiment's or a trial's log")
    which = log.add_subparsers(dest="which", required=True, metavar="LOG")
    texts = {"experiment": "experiment.log", "dispatcher": "dispatcher.log", "stdout": "a trial's stdout "
             "(no TRIAL: the daemon's stdout, as nnictl)", "stderr": "a trial's stderr (no TRIAL: the daemon's "
             "stderr, as nnictl)", "trial": "a trial's trial.log (no TRIAL or --trial_id: trials' folders, as nnictl)"}
    for name, text in texts.items():
        parser = which.add_parser(name, help=text)
        parser.add_argument("ids", nargs="*", metavar="ID",
                            help="[experiment id] and, for trial logs, the trial id (unique prefixes work)")
        parser.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
        tail = ("--tail", "-T") if name in ("stdout", "stderr") else ("--tail",)  # nnictl's -T
        parser.add_argument(*tail, type=int, metavar="N", help="the last N lines only (then follow)")
        parser.add_argument("--head", "-H", type=int, metavar="N", help="the first N lines only")
        if name in _TRIAL_LOGS:
            parser.add_argument("--rank", type=int, default=0, metavar="K",
                                help="rank K's log of a multi-node Ray trial (default 0: the trial's own)")
        if name in ("stdout", "stderr"):
            parser.add_argument("--path", action="store_true", help="print the file's path (nnictl's)")
        if name == "trial":
            parser.add_argument("--trial_id", "-T", help="print this trial's folder (nnictl's)")
        parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for flag, count in (("--tail", args.tail), ("--head", args.head)):
        if count is not None and count < 0:
            raise CliError(f"{flag}: expected a number of lines >= 0, got {count}")
    if args.head is not None and (args.tail is not None or args.follow):
        raise CliError("--head goes with neither --tail nor --follow")
    trial_log = args.which in _TRIAL_LOGS
    if trial_log and _nnictl_meaning(args):
        if args.rank:
            raise CliError(f"--rank goes with a trial: expctl log {args.which} [ID] TRIAL --rank {args.rank}")
        return _run_nnictl(args)
    accepted = (1, 2) if trial_log else (0, 1)
    if len(args.ids) not in accepted:
        raise CliError(f"log {args.which}: expected {'[ID] TRIAL' if trial_log else '[ID]'}, "
                       f"got {' '.join(args.ids) or 'nothing'}")
    experiment_id = args.ids[0] if len(args.ids) == accepted[1] else None
    entry = find_experiment(experiment_id)
    paths = ExperimentPaths(Path(entry.dir))
    if trial_log:
        trial_id = _find_trial(entry, check_id(args.ids[-1], "TRIAL"))
        if not 0 <= args.rank < MAX_RANK_LOGS:
            raise CliError(f"--rank: expected a rank from 0 to {MAX_RANK_LOGS - 1}, got {args.rank}")
        log = stored_trial_files(paths).log(trial_id, rank_file_name(_TRIAL_LOGS[args.which], args.rank))
        ended = lambda: _trial_ended(trial_id, entry)  # noqa: E731
    else:
        path = getattr(paths, _EXPERIMENT_LOGS[args.which])
        log = LogFile(paths.root, path.relative_to(paths.root))
        ended = lambda: not is_running(current_entry(entry))  # noqa: E731
    _show(log, args, ended)
    return EXIT_OK


def _show(log: LogFile, args: argparse.Namespace, ended: Callable[[], bool]) -> None:
    try:
        place = _print_start(log, args.tail, args.head)
        if args.follow:
            _follow(log, place, ended)
        elif place is not None:
            place.file.close()
    except RefusedFile as error:
        raise CliError(f"{error}: expctl reads a log only as a regular file inside the experiment's folder",
                       EXIT_FAILED) from None


def _nnictl_meaning(args: argparse.Namespace) -> bool:
    """Whether a trial log command is nnictl's: no trial named (no id, or one that is a
    whole experiment id), or nnictl's own flags."""
    if getattr(args, "path", False) or getattr(args, "trial_id", None) is not None:
        return True
    return not args.ids or (len(args.ids) == 1 and registry().get(args.ids[0]) is not None)


def _run_nnictl(args: argparse.Namespace) -> int:
    """nnictl's ``log stdout|stderr``: the daemon's stdout (logs/daemon.log) or its stderr
    (logs/daemon-stderr.log); ``log trial``: each trial's folder (its logs are in it), or one trial's."""
    if len(args.ids) > 1:
        raise CliError(f"log {args.which}: expected [ID] with --{'trial_id' if args.which == 'trial' else 'path'}, "
                       f"got {' '.join(args.ids)}")
    entry = find_experiment(args.ids[0] if args.ids else None)
    paths = ExperimentPaths(Path(entry.dir))
    if args.which == "trial":
        trial_ids = [_find_trial(entry, check_id(args.trial_id, "--trial_id"))] if args.trial_id is not None else None
        with experiment_store(entry) as store:
            trial_ids = trial_ids or [trial.trial_id for trial in store.trials()]
        files = stored_trial_files(paths)
        for trial_id in trial_ids:
            print(printable(f"id:{trial_id} path:{files.folder(trial_id)}"))
        if not trial_ids:
            print("(none)")
        return EXIT_OK
    path = paths.daemon_log if args.which == "stdout" else paths.daemon_stderr_log
    if args.path:
        print(printable(path))
        return EXIT_OK
    _show(LogFile(paths.root, path.relative_to(paths.root)), args, lambda: not is_running(current_entry(entry)))
    return EXIT_OK


def _find_trial(entry: RegistryEntry, prefix: str) -> str:
    with experiment_store(entry) as store:
        matches = [trial.trial_id for trial in store.trials() if trial.trial_id.startswith(prefix)]
    if not matches:
        raise CliError(f"TRIAL: no trial {prefix!r} in experiment {entry.id}")
    if len(matches) > 1 and prefix not in matches:
        raise CliError(f"TRIAL: {prefix!r} is ambiguous: " + ", ".join(matches))
    return prefix if prefix in matches else matches[0]


def _trial_ended(trial_id: str, entry: RegistryEntry) -> bool:
    # The trial was found before; a running experiment's trials stay.
    if not is_running(current_entry(entry)):
        return True
    with experiment_store(entry) as store:
        return cast("TrialRecord", store.trial(trial_id)).status.is_finished()


@dataclass
class _Place:
    """Where a follow is: the file of the log it printed last, open, and how far."""

    file: BinaryIO
    inode: int
    offset: int
    base: int
    """How many bytes of the log came before this file when it was found (Listing.base)."""


def _print_start(log: LogFile, tail: int | None, head: int | None = None) -> _Place | None:
    """Print the log (its last ``tail`` or first ``head`` lines) across its kept files;
    return where a follow goes on: the last file printed, kept open, or None when the log
    has no file yet."""
    snapshot = open_kept(log)
    try:
        for opened in snapshot.files:
            if opened.refused is not None:
                _say(f"{opened.refused}; passed over")
        files = snapshot.readable()
        dropped = snapshot.listing.dropped
        if head is not None:
            if dropped:
                _say(f"{_size(dropped)} of the start of {log.name} was rotated away ({_BOUNDS}): "
                     "these are the first lines kept")
            _write_all(head_blocks(read_blocks(files), head))
        elif tail is not None:
            index, offset, lines = last_lines_start(files, tail)
            if lines < tail and dropped:
                _say(f"{log.name} keeps {lines} of the {tail} lines asked for: {_size(dropped)} of earlier output "
                     f"was rotated away ({_BOUNDS})")
            _write_all(read_blocks(files, index, offset))
        else:
            if dropped:
                _say(f"{_size(dropped)} of earlier output of {log.name} was rotated away ({_BOUNDS}): "
                     "printing what is kept")
            _write_all(read_blocks(files))
        return _last_place(snapshot)
    finally:
        snapshot.close(keep=snapshot.files[-1].file if snapshot.files else None)


def _last_place(snapshot: Snapshot) -> _Place | None:
    """The newest file of ``snapshot``, read to the size it was opened at."""
    if not snapshot.files:
        return None
    last = snapshot.files[-1]
    if last.file is None:  # refused: a follow goes on after it
        return _Place(open(os.devnull, "rb"), last.kept.inode, 0, snapshot.listing.base(len(snapshot.files) - 1))
    return _Place(last.file, last.kept.inode, last.size, snapshot.listing.base(len(snapshot.files) - 1))


def _follow(log: LogFile, place: _Place | None, ended: Callable[[], bool]) -> None:
    """Print what is written to the log after ``place`` until ``ended()``, then what came
    last: the rest of the file followed, and when it was rotated (another file has its
    name, or none), the files after it, by inode, from their start."""
    try:
        while True:
            done = ended()  # checked before reading, so nothing written before the end is missed
            place = _catch_up(log, place)
            if done:
                return
            time.sleep(_FOLLOW_INTERVAL)
    finally:
        if place is not None:
            place.file.close()


def _catch_up(log: LogFile, place: _Place | None) -> _Place | None:
    """Print what the log holds after ``place``; the place reached."""
    if place is not None:
        _drain(place)
    for _ in range(_MOVES_PER_CHECK):
        listing = log.listing()
        position = _position(listing, place)
        for _ in range(3):
            if position is not None or place is None:
                break
            time.sleep(_RELIST_PAUSE)  # perhaps listed in the middle of a rotation
            listing = log.listing()
            position = _position(listing, place)
        if place is not None and position is not None and position == len(listing.files) - 1:
            if listing.current is not None and os.fstat(place.file.fileno()).st_size < place.offset:
                _say(f"{log.name} was truncated: printing it from its start")
                place.offset = 0
                _drain(place)
            return place  # the newest file is the one followed
        if not listing.files:
            return place
        if place is not None:
            _drain(place)  # the rest of the rotated file: its writer closed it before renaming it
        if position is not None:
            position += 1
        else:  # rotated away (or never seen): on from the first file after it
            at = place.base + place.offset if place is not None else 0
            position = listing.resume(at)
            lost = listing.base(position) - at
            if lost > 0:
                _say(f"{_size(lost)} of {log.name} was rotated away before it could be printed ({_BOUNDS})")
        following = listing.files[position]
        try:
            file = log.open_kept(following)
        except RefusedFile as error:
            if following.index == 0:
                raise
            _say(f"{error}; passed over")
            file = open(os.devnull, "rb")
        if file is None:
            continue  # moved meanwhile: list again
        if place is not None:
            place.file.close()
        place = _Place(file, following.inode, 0, listing.base(position))
        _drain(place)
    return place


def _position(listing: Listing, place: _Place | None) -> int | None:
    """Where the file of ``place`` is in ``listing``; None when it was deleted (its inode may
    have been given to a newer file) or there is no place yet."""
    if place is None or os.fstat(place.file.fileno()).st_nlink == 0:
        return None
    return listing.find(place.inode)


def _drain(place: _Place) -> None:
    """Print ``place``'s file from its offset to its end (as it is now)."""
    end = os.fstat(place.file.fileno()).st_size
    while place.offset < end:
        block = os.pread(place.file.fileno(), min(BLOCK_BYTES, end - place.offset), place.offset)
        if not block:
            return
        _write(block)
        place.offset += len(block)


def _write_all(blocks: Iterator[bytes]) -> None:
    for block in blocks:
        _write(block)


def _say(notice: str) -> None:
    """A notice about the log, on stderr (the log itself goes to stdout)."""
    sys.stdout.flush()
    print(f"expctl: {notice}", file=sys.stderr, flush=True)


def _size(count: int) -> str:
    """``count`` bytes for a person, as the web UI says them: 512 bytes, 3.4 KiB, 812 MiB."""
    if count < 1024:
        return f"{count} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()

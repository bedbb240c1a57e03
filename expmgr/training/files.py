"""The trial-files port: what the manager reads (and the little it writes) of a trial's
files, wherever the trial runs. A training service is two halves, as asyncio's transport
and protocol are: the service controls processes (``base.TrainingService``), its
``TrialFiles`` reads their output. The runner, the server, ``expctl log`` and the views
reach a trial's stdout, stderr, trial.log, reports and checkpoint only through it::

    files = trial_files(paths, platform)               # expmgr.training: no service needed
    log = files.log("Xy3zQ", "stdout")                 # a LogFile: read it, tail it, follow it
    files.url("Xy3zQ", "stderr")                       # NNI's stderrPath

A stored experiment is read without its service (the CLI, a read-only view): the port is
built from the experiment's paths and its platform alone (``expmgr.training.trial_files``).
A service whose trials' folders the manager cannot see (another host) gives a copy it
keeps in step, or reads them there; the readers above do not change.
"""
from __future__ import annotations

import abc
from typing import Iterable

from expmgr.logreader import LogFile
from expmgr.trial import rank_file_name

TRIAL_LOGS = ("stdout", "stderr", "trial.log")
"""The logs a trial has: its two output streams, kept apart, and its ``nni.*`` records."""
MAX_RANK_LOGS = 1024
"""The ranks whose logs are served (``config._placement.MAX_WORKERS``)."""


def is_trial_log(name: str) -> bool:
    """One of TRIAL_LOGS, or rank k's of a multi-node Ray trial (``trial.rank_file_name``:
    ``rank<k>.stdout``, ``rank<k>.stderr``, ``rank<k>.trial.log``, 1 <= k < MAX_RANK_LOGS)."""
    if name in TRIAL_LOGS:
        return True
    prefix, _, log = name.partition(".")
    number = prefix.removeprefix("rank")
    return (number.isdigit() and number.isascii() and 0 < int(number) < MAX_RANK_LOGS and log in TRIAL_LOGS
            and rank_file_name(log, int(number)) == name)


class TrialFilesError(ValueError):
    """A trial's file was asked for by a name it does not have."""


class TrialFiles(abc.ABC):
    """A trial's files as the manager reads them, by trial id (a trial keeps its folder across
    attempts: its logs and reports are every attempt's, one after the other)."""

    @abc.abstractmethod
    def log(self, trial_id: str, name: str) -> LogFile:
        """The trial's log ``name`` (one of TRIAL_LOGS) as a file the manager can read, tail
        and follow across its rotations; it need not exist yet. TrialFilesError for another name."""

    @abc.abstractmethod
    def folder(self, trial_id: str) -> str:
        """Where a person finds the trial's files, as the machine holding them names it
        (nnictl's ``log trial``)."""

    @abc.abstractmethod
    def url(self, trial_id: str, name: str | None = None) -> str:
        """The trial's folder, or its file ``name``, as NNI's ``logPath`` and ``stderrPath``
        give it (``file://localhost:/...`` for a folder of this machine)."""

    @abc.abstractmethod
    def last_output_time(self, trial_id: str) -> float:
        """When the trial last wrote output (seconds since the epoch; 0 for never): for
        ``trialIdleTimeout``, asked only when a trial's idle deadline comes."""

    @abc.abstractmethod
    def marked_preempting(self, trial_id: str, attempt: int) -> bool:
        """Whether this attempt said it is being preempted (``trial.mark_preempting()``)."""

    @abc.abstractmethod
    def unsent_reports(self, trial_id: str) -> Iterable[tuple[int, bytes | None]]:
        """The trial's report lines (metrics.jsonl) as (line number from 1, raw line), every
        attempt's; a line over ``trial.MAX_REPORT_BYTES`` is given as None. The runner
        checks and stores them; lines already stored are skipped there."""

    @abc.abstractmethod
    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        """Tell the trial (its trial.log) that a report line was skipped; returns the
        message, naming where the line is, for the experiment's log."""

    @abc.abstractmethod
    def checkpoint_dir(self, trial_id: str) -> str:
        """The trial's checkpoint folder as the trial sees it (``expmgr.get_checkpoint_dir()``),
        for parameters that name it (``algorithms.tuner.TRIAL_CHECKPOINT_DIR``); it need
        not exist yet."""

    @abc.abstractmethod
    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        """Start ``target_trial`` from a copy of ``source_trial``'s checkpoint folder (none
        is fine); the source's is left as it is."""

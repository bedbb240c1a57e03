"""NNI's ``GET trial-jobs`` answer, kept up to date rather than rebuilt: the web UI (and
NNI's clients) poll it, and rebuilding 10,000 trials' views for each poll took a quarter of
a second of the event loop, so the trials' reports queued behind it.

Each trial's view (``views.nni_trial_job_view``) is kept as its JSON text, in blocks of
BLOCK trials in NNI's order, each block one bytes object (its trials' texts joined as
``json.dumps`` joins list items). An answer first rebuilds the views of the trials changed
since the previous answer (the store's changes since a cursor, trials alone) and splices
them into their blocks; the whole answer is then the blocks as they are, sent one after the
other without being joined (6 MB at 10,000 trials). So an answer costs what changed, and is
byte for byte ``json.dumps(views.nni_trial_jobs_view(...))``. The blocks take the memory of
one full answer, and only once someone asked for one::

    trial_jobs = TrialJobsAnswer(files)          # the experiment's trial files (expmgr.training)
    for chunk in trial_jobs.answer(store, offset=0, limit=None, status=None):   # bytes
        send(chunk)
"""
from __future__ import annotations

import bisect
import json
from array import array

from expmgr.server import views
from expmgr.store import MetricRecord, Store, TrialRecord
from expmgr.training import TrialFiles

BLOCK = 128
"""Trials per block: splicing a changed trial copies its block (about 75 KB)."""
_SEPARATOR = b", "
"""Between items of a JSON list, as ``json.dumps`` writes it."""


class _Block:
    """Consecutive trials' views: ``text`` their JSON texts joined by ``_SEPARATOR``."""

    __slots__ = ("text", "ends", "statuses")

    def __init__(self) -> None:
        self.text = b""
        self.ends = array("q")
        """Where each trial's text ends in ``text``."""
        self.statuses: list[str] = []

    def start(self, index: int) -> int:
        return 0 if index == 0 else self.ends[index - 1] + len(_SEPARATOR)

    def item(self, index: int) -> bytes:
        return self.text[self.start(index):self.ends[index]]

    def append(self, text: bytes, status: str) -> None:
        self.text = self.text + _SEPARATOR + text if self.statuses else text
        self.ends.append(len(self.text))
        self.statuses.append(status)

    def replace(self, index: int, text: bytes, status: str) -> None:
        start, end = self.start(index), self.ends[index]
        self.text = self.text[:start] + text + self.text[end:]
        delta = len(text) - (end - start)
        for later in range(index, len(self.ends)):
            self.ends[later] += delta
        self.statuses[index] = status


class TrialJobsAnswer:
    """NNI's trial-jobs of one experiment's store, kept up to date; see the module
    docstring. Call it from one thread at a time (the server's event loop)."""

    def __init__(self, files: TrialFiles) -> None:
        self._files = files
        self._cursor: str | None = None
        """Where the next refresh's changes start; None: nothing kept yet."""
        self._order: list[int] = []
        """The sequence ids kept, ascending (NNI's order): trial at position p is item
        p % BLOCK of block p // BLOCK."""
        self._blocks: list[_Block] = []
        self.views_built = 0
        """How many trial views were built so far (they are built for changed trials only)."""

    def answer(self, store: Store, offset: int = 0, limit: int | None = None,
               status: str | None = None) -> list[bytes]:
        """The JSON of ``views.nni_trial_jobs_view(store, files, offset, limit)``, keeping
        those of status ``status`` when given (NNI's filter, of the page), in chunks to
        send one after the other."""
        self.refresh(store)
        end = len(self._order) if limit is None else min(len(self._order), offset + limit)
        chunks = [b"["]
        for number, block in enumerate(self._blocks):
            first = number * BLOCK
            if first + len(block.statuses) <= offset or first >= end:
                continue
            whole = offset <= first and first + len(block.statuses) <= end
            if whole and (status is None or all(s == status for s in block.statuses)):
                chunks += (block.text, _SEPARATOR)  # the usual case: a block as it is
                continue
            for index in range(max(0, offset - first), min(len(block.statuses), end - first)):
                if status is None or block.statuses[index] == status:
                    chunks += (block.item(index), _SEPARATOR)
        if len(chunks) > 1:
            chunks[-1] = b"]"  # over the last separator
        else:
            chunks.append(b"]")
        return chunks

    def refresh(self, store: Store) -> None:
        """Rebuild the views of the trials changed since the last refresh (all the first time)."""
        with store.snapshot():
            changes = store.changes(self._cursor, metrics=False)
        if changes.full:  # first time, or a cursor the store no longer knows: start over
            self._order.clear()
            self._blocks.clear()
        if self._order and any(trial.sequence_id < self._order[-1] and self._position(trial.sequence_id) is None
                               for trial in changes.trials):
            # A new trial before one kept: the runner numbers trials in order, so this is
            # not seen in practice; the blocks are built again rather than shifted.
            self._cursor = None
            self.refresh(store)
            return
        for trial in changes.trials:  # by sequence id: new ones after those kept
            self._put(trial, changes.finals)
        self._cursor = changes.cursor

    def _position(self, sequence_id: int) -> int | None:
        position = bisect.bisect_left(self._order, sequence_id)
        return position if position < len(self._order) and self._order[position] == sequence_id else None

    def _put(self, trial: TrialRecord, finals: dict[str, MetricRecord]) -> None:
        text = json.dumps(views.nni_trial_job_view(trial, self._files, finals.get(trial.trial_id))).encode()
        self.views_built += 1
        position = self._position(trial.sequence_id)
        if position is not None:
            self._blocks[position // BLOCK].replace(position % BLOCK, text, trial.status.value)
            return
        if not self._blocks or len(self._blocks[-1].statuses) == BLOCK:
            self._blocks.append(_Block())
        self._blocks[-1].append(text, trial.status.value)
        self._order.append(trial.sequence_id)

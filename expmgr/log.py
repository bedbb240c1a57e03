"""The logging core: which record goes to which sink (see docs/logging.md).

Nothing happens at import. Experiment processes call :func:`attach_experiment`
for each experiment they run; the dispatcher calls :func:`setup_dispatcher_logging`::

    attachment = attach_experiment("ab12cd34", paths.experiment_log, "debug")
    ...
    attachment.close()
"""
from __future__ import annotations

import logging
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

NAMESPACE = "nni"
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

_LEVELS = {
    "trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "fatal": logging.CRITICAL,
}
_FORMAT = "[%(asctime)s] %(levelname)s (%(name)s%(thread_suffix)s) %(message)s"
_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

_lock = threading.Lock()
_stdout_handler: logging.Handler | None = None
_current = threading.local()


def level_number(name: str) -> int:
    return _LEVELS[name.lower()]


def experiment_logger(exp_id: str) -> logging.Logger:
    return logging.getLogger(f"{NAMESPACE}.{exp_id}")


# -- the per-thread stack of current experiments ---------------------------

def _stack() -> list[str]:
    if not hasattr(_current, "stack"):
        _current.stack = []
    return _current.stack


def current_experiment_id() -> str | None:
    """The id of this thread's current experiment, or None."""
    stack = _stack()
    return stack[-1] if stack else None


@contextmanager
def current_experiment(exp_id: str) -> Iterator[None]:
    """Make ``exp_id`` this thread's current experiment inside the block."""
    push_experiment(exp_id)
    try:
        yield
    finally:
        pop_experiment(exp_id)


def push_experiment(exp_id: str) -> None:
    _stack().append(exp_id)


def pop_experiment(exp_id: str) -> None:
    stack = _stack()
    if exp_id in stack:
        del stack[len(stack) - 1 - stack[::-1].index(exp_id)]


# -- formatting -------------------------------------------------------------

class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.thread_suffix = "" if record.threadName == "MainThread" else f" {record.threadName}"
        return super().format(record)


def _stdout_formatter() -> logging.Formatter:
    import os
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        import colorlog
        return colorlog.ColoredFormatter("%(log_color)s" + _FORMAT, _DATE_FORMAT)
    return _Formatter(_FORMAT, _DATE_FORMAT)


class _ThreadSuffixFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.thread_suffix = "" if record.threadName == "MainThread" else f" {record.threadName}"
        return True


# -- sinks --------------------------------------------------------------------

def _ensure_stdout_handler() -> None:
    """``nni.*`` INFO+ to stdout, once per process; ``nni`` stops propagating so
    a user's ``logging.basicConfig()`` does not print the same record twice."""
    global _stdout_handler
    with _lock:
        if _stdout_handler is not None:
            return
        handler = logging.StreamHandler(sys.stdout)
        handler.setLevel(logging.INFO)
        handler.addFilter(_ThreadSuffixFilter())
        handler.setFormatter(_stdout_formatter())
        root = logging.getLogger(NAMESPACE)
        root.addHandler(handler)
        root.propagate = False
        if root.level == logging.NOTSET or root.level > logging.INFO:
            root.setLevel(logging.INFO)
        _stdout_handler = handler


class _ExperimentFilter(logging.Filter):
    """Records of ``nni.X`` / ``nni.X.*``, and other ``nni.*`` records emitted in a
    thread whose current experiment is X."""

    def __init__(self, exp_id: str) -> None:
        super().__init__()
        self._own = f"{NAMESPACE}.{exp_id}"
        self._exp_id = exp_id

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name == self._own or name.startswith(self._own + "."):
            return True
        return current_experiment_id() == self._exp_id and not _names_other_experiment(name)


_attached: dict[str, "ExperimentLogAttachment"] = {}


def _names_other_experiment(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[1] in _attached


class ExperimentLogAttachment:
    """The experiment.log sink of one experiment; ``close()`` removes and closes it."""

    def __init__(self, exp_id: str, path: Path, level: str) -> None:
        self.exp_id = exp_id
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handler = logging.FileHandler(path, encoding="utf-8")
        self._handler.setLevel(level_number(level))
        self._handler.addFilter(_ExperimentFilter(exp_id))
        self._handler.setFormatter(_Formatter(_FORMAT, _DATE_FORMAT))
        root = logging.getLogger(NAMESPACE)
        with _lock:
            _attached[exp_id] = self
            root.addHandler(self._handler)
            if level_number(level) < root.getEffectiveLevel():
                root.setLevel(level_number(level))

    def close(self) -> None:
        with _lock:
            if _attached.get(self.exp_id) is self:
                del _attached[self.exp_id]
            logging.getLogger(NAMESPACE).removeHandler(self._handler)
        self._handler.close()


def attach_experiment(exp_id: str, path: Path, level: str, *, to_stdout: bool = True) -> ExperimentLogAttachment:
    """Route experiment ``exp_id``'s records to ``path`` (and ``nni.*`` INFO+ to stdout)."""
    if to_stdout:
        _ensure_stdout_handler()
    return ExperimentLogAttachment(exp_id, path, level)


def setup_dispatcher_logging(path: Path, level: str) -> None:
    """In the dispatcher process: every record of every logger to ``path``."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.addFilter(_ThreadSuffixFilter())
    handler.setFormatter(_Formatter(_FORMAT, _DATE_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level_number(level))
    logging.getLogger(NAMESPACE).setLevel(level_number(level))

"""The logging core: which record goes to which sink (docs/logging.md has the table).

Nothing happens at import. An experiment process calls :func:`attach_experiment`
for each experiment it runs, the dispatcher :func:`setup_dispatcher_logging`,
a trial process :func:`setup_trial_logging` (through ``expmgr.trial``)::

    attachment = attach_experiment("ab12cd34", paths.experiment_log, "debug")
    ...
    attachment.close()

It imports only what ``logging`` itself imports, so a trial that logs pays
nothing more for it.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time

NAMESPACE = "nni"
"""The root of every logger expmgr routes: NNI's name, so NNI code keeps working."""
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

_LEVELS = {
    "trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO,
    "warning": logging.WARNING, "error": logging.ERROR, "fatal": logging.CRITICAL,
}
FORMAT = "[%(asctime)s] %(levelname)s (%(name)s%(thread_suffix)s) %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

_lock = threading.RLock()
_stdout_handler: logging.Handler | None = None


def level_number(name: str) -> int:
    return _LEVELS[name.lower()]


def experiment_logger(exp_id: str) -> logging.Logger:
    return logging.getLogger(f"{NAMESPACE}.{exp_id}")


# -- the per-thread stack of current experiments ---------------------------

# Stacks keyed by thread ident rather than a threading.local, so that an experiment
# stopped from another thread can still leave the stack of the thread it was pushed on.
_stacks: dict[int, list[str]] = {}


def current_experiment_id() -> str | None:
    """The id of this thread's current experiment, or None."""
    stack = _stacks.get(threading.get_ident())
    return stack[-1] if stack else None


def push_experiment(exp_id: str) -> int:
    """Make ``exp_id`` this thread's current experiment; returns the thread's ident for
    :func:`pop_experiment`."""
    ident = threading.get_ident()
    with _lock:
        _stacks.setdefault(ident, []).append(exp_id)
    return ident


def pop_experiment(exp_id: str, thread_ident: int | None = None) -> None:
    """Remove the topmost ``exp_id`` from the stack of ``thread_ident`` (default: this thread)."""
    ident = threading.get_ident() if thread_ident is None else thread_ident
    with _lock:
        stack = _stacks.get(ident, [])
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == exp_id:
                del stack[index]
                break
        if not stack:
            _stacks.pop(ident, None)


# -- formatting -------------------------------------------------------------

def _thread_suffix(record: logging.LogRecord) -> str:
    """`` <thread name>`` for records emitted off the main thread, else nothing."""
    return "" if record.threadName == "MainThread" else f" {record.threadName}"


class _PlainFormatter(logging.Formatter):
    """:data:`FORMAT`, uncoloured. A record is formatted once and the text reused
    by every sink sharing this formatter (stdout and each experiment.log), and
    the time is formatted once per second: a record costs little more with two
    sinks than a plain logger with one."""

    def __init__(self) -> None:
        super().__init__(FORMAT, DATE_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        second = int(record.created)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime(DATE_FORMAT, self.converter(second)))
        return cached[1]

    def format(self, record: logging.LogRecord) -> str:
        text = record.__dict__.get("_expmgr_text")
        if text is None:
            record.thread_suffix = _thread_suffix(record)
            text = record._expmgr_text = super().format(record)  # type: ignore[attr-defined]
        return text


_PLAIN = _PlainFormatter()


def _plain_formatter() -> logging.Formatter:
    return _PLAIN


def use_colour() -> bool:
    """Whether stdout takes colour: a terminal, and ``NO_COLOR`` not set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _stdout_formatter() -> logging.Formatter:
    if use_colour():
        import colorlog

        class ColouredFormatter(colorlog.ColoredFormatter):
            def format(self, record: logging.LogRecord) -> str:
                record.thread_suffix = _thread_suffix(record)
                return super().format(record)

        return ColouredFormatter("%(log_color)s" + FORMAT, DATE_FORMAT)
    return _plain_formatter()


def _new_handler(handler: logging.Handler, level: int, formatter: logging.Formatter) -> logging.Handler:
    handler._expmgr_sink = True  # type: ignore[attr-defined]
    handler.setLevel(level)
    handler.setFormatter(formatter)
    return handler


# -- sinks --------------------------------------------------------------------

def _refresh_namespace_level() -> None:
    """The ``nni`` logger lets through the lowest level any of our sinks wants (each
    sink filters by its own level); handlers others put there do not count."""
    root = logging.getLogger(NAMESPACE)
    levels = [handler.level for handler in root.handlers if getattr(handler, "_expmgr_sink", False)]
    root.setLevel(max(1, min(levels)) if levels else logging.NOTSET)


class _StdoutHandler(logging.StreamHandler):
    """stdout's sink: once its reader went away (``expctl create --foreground | head``),
    records are dropped quietly instead of a "Logging error" traceback each; the
    experiment's own log files still get them."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        if isinstance(sys.exc_info()[1], BrokenPipeError):
            return
        super().handleError(record)


def ensure_stdout_logging() -> None:
    """``nni.*`` INFO+ to stdout, once per process. ``nni`` stops propagating, so a
    user's ``logging.basicConfig()`` never prints the same record twice."""
    global _stdout_handler
    with _lock:
        if _stdout_handler is not None:
            return
        _stdout_handler = _new_handler(_StdoutHandler(sys.stdout), logging.INFO, _stdout_formatter())
        root = logging.getLogger(NAMESPACE)
        root.addHandler(_stdout_handler)
        root.propagate = False
        _refresh_namespace_level()


_attached: dict[str, "ExperimentLogAttachment"] = {}


class _ExperimentFilter(logging.Filter):
    """Records of ``nni.X`` / ``nni.X.*``, and records of other ``nni.*`` loggers
    (not named after another running experiment) emitted in a thread whose
    current experiment is X."""

    def __init__(self, exp_id: str) -> None:
        super().__init__()
        self._own = f"{NAMESPACE}.{exp_id}"
        self._own_prefix = self._own + "."
        self._exp_id = exp_id

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name == self._own or name.startswith(self._own_prefix):
            return True
        if current_experiment_id() != self._exp_id:
            return False
        parts = name.split(".", 2)
        return len(parts) < 2 or parts[1] not in _attached


class _LogFileHandler(logging.FileHandler):
    """A FileHandler that stays closed: a record still on its way to it when it is
    closed (another thread was emitting) is dropped instead of reopening the file."""

    _closed: bool  # logging.Handler's own flag (set by close()), missing from typeshed

    def emit(self, record: logging.LogRecord) -> None:
        if not self._closed:  # set by close(), under the lock emit() is called with
            super().emit(record)


class ExperimentLogAttachment:
    """The experiment.log sink of one experiment; ``close()`` removes and closes it."""

    def __init__(self, exp_id: str, path: str | os.PathLike[str], level: str) -> None:
        self.exp_id = exp_id
        os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
        self._handler = _new_handler(_LogFileHandler(path, encoding="utf-8"), level_number(level),
                                     _plain_formatter())
        self._handler.addFilter(_ExperimentFilter(exp_id))
        root = logging.getLogger(NAMESPACE)
        with _lock:
            _attached[exp_id] = self
            root.addHandler(self._handler)
            root.propagate = False
            _refresh_namespace_level()

    def close(self) -> None:
        with _lock:
            if _attached.get(self.exp_id) is self:
                del _attached[self.exp_id]
            # A new list rather than removeHandler(): a thread in the middle of
            # Logger.callHandlers iterates the old list, and removing an item from
            # it in place would make that thread skip the handler after it.
            root = logging.getLogger(NAMESPACE)
            root.handlers = [handler for handler in root.handlers if handler is not self._handler]
            _refresh_namespace_level()
        self._handler.close()


def attach_experiment(exp_id: str, path: str | os.PathLike[str], level: str, *,
                      to_stdout: bool = True) -> ExperimentLogAttachment:
    """Route experiment ``exp_id``'s records to ``path`` (and ``nni.*`` INFO+ to stdout)."""
    if to_stdout:
        ensure_stdout_logging()
    return ExperimentLogAttachment(exp_id, path, level)


def setup_dispatcher_logging(path: str | os.PathLike[str], level: str) -> None:
    """In the dispatcher process: every record of every logger to ``path``."""
    root = logging.getLogger()
    root.addHandler(_new_handler(logging.FileHandler(path, encoding="utf-8"), logging.NOTSET, _plain_formatter()))
    root.setLevel(level_number(level))
    logging.getLogger(NAMESPACE).setLevel(level_number(level))


def setup_trial_logging(path: str | os.PathLike[str], level: str) -> None:
    """In a trial process: ``nni.*`` records to trial.log only (not to its stdout)."""
    root = logging.getLogger(NAMESPACE)
    with _lock:
        if any(getattr(handler, "_expmgr_trial_log", False) for handler in root.handlers):  # set up already
            return
        handler = _new_handler(logging.FileHandler(path, encoding="utf-8", delay=True), level_number(level),
                               _plain_formatter())
        handler._expmgr_trial_log = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
        _refresh_namespace_level()


def setup_standalone_trial_logging() -> logging.Logger:
    """A trial script run by hand: ``nni.*`` INFO+ to stdout; returns ``nni.trial``."""
    ensure_stdout_logging()
    return logging.getLogger(f"{NAMESPACE}.trial")

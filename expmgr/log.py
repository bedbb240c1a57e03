"""The logging core: which record goes to which sink (docs/logging.md has the table).

Nothing happens at import but naming the TRACE level (``logging.addLevelName``): no
handler is added, no file opened, no thread started. An experiment process calls
:func:`attach_experiment` for each experiment it runs, the dispatcher
:func:`setup_dispatcher_logging`, a trial process :func:`setup_trial_logging` (through
``expmgr.trial``)::

    attachment = attach_experiment("ab12cd34", paths.experiment_log, "debug")
    ...
    attachment.close()

It imports only what ``logging`` itself imports, so a trial that logs pays
nothing more for it. The first :func:`push_experiment` in a process wraps
``Thread.start`` and ``ThreadPoolExecutor.submit``, so that threads and tasks
inherit the experiment current where they are started (below).
"""
from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time

from expmgr.rotation import UNBOUNDED, RotatingWriter, RotationLimits, rotate_if_full

TYPE_CHECKING = False  # typing itself is not imported: logging does not import it
if TYPE_CHECKING:
    from concurrent.futures import Future
    from typing import Any, Callable

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
_stdout_silenced = False


def level_number(name: str) -> int:
    return _LEVELS[name.lower()]


def experiment_logger(exp_id: str) -> logging.Logger:
    return logging.getLogger(f"{NAMESPACE}.{exp_id}")


# -- the per-thread stack of current experiments ---------------------------

# Stacks keyed by thread ident rather than a threading.local, so that an experiment
# stopped from another thread can still leave the stack of the thread it was pushed on.
# Each stack is a tuple, replaced (never changed in place) under _lock: the thread that
# reads its own stack for every record does so without the lock and sees the old tuple
# or the new one. The bottom _inherited[ident] entries of a stack were inherited (below).
_stacks: dict[int, tuple[str, ...]] = {}
_inherited: dict[int, int] = {}


def current_experiment_id() -> str | None:
    """The id of this thread's current experiment, or None."""
    stack = _stacks.get(threading.get_ident())
    return stack[-1] if stack else None


def push_experiment(exp_id: str) -> int:
    """Make ``exp_id`` this thread's current experiment; returns the thread's ident for
    :func:`pop_experiment`. The first push in a process installs the hooks by which
    threads inherit their starter's experiments (:func:`_inherit_in_threads`)."""
    if not _hooks_installed:
        _inherit_in_threads()
    ident = threading.get_ident()
    with _lock:
        _stacks[ident] = _stacks.get(ident, ()) + (exp_id,)
    return ident


def pop_experiment(exp_id: str, thread_ident: int | None = None) -> None:
    """Remove the topmost ``exp_id`` from the stack of ``thread_ident`` (default: this thread)."""
    ident = threading.get_ident() if thread_ident is None else thread_ident
    with _lock:
        stack = _stacks.get(ident, ())
        for index in range(len(stack) - 1, -1, -1):
            if stack[index] == exp_id:
                if index < _inherited.get(ident, 0):
                    _inherited[ident] -= 1
                _set_stack(ident, stack[:index] + stack[index + 1:], _inherited.get(ident, 0))
                break


def _set_stack(ident: int, stack: tuple[str, ...], inherited: int) -> None:
    """Under _lock: the stack of thread ``ident``, its bottom ``inherited`` entries inherited."""
    if stack:
        _stacks[ident] = stack
    else:
        _stacks.pop(ident, None)
    if stack and inherited:
        _inherited[ident] = inherited
    else:
        _inherited.pop(ident, None)


def _forget_inherited(exp_id: str) -> None:
    """``exp_id`` ended (its log closed): no thread has it by inheritance any more, so a
    thread that outlives it (a daemon) does not log to it, nor to a later run of that id."""
    with _lock:
        for ident, count in list(_inherited.items()):
            stack = _stacks[ident]
            if exp_id in stack[:count]:
                kept = tuple(entry for entry in stack[:count] if entry != exp_id)
                _set_stack(ident, kept + stack[count:], len(kept))


# -- threads inherit the current experiment ------------------------------------

# A thread started while experiments are current in the starting thread (a strategy's
# worker threads, a thread started inside ``with experiment:``) begins with that stack
# as the base of its own: its bare ``nni.*`` records belong to the experiment. A task
# given to a ThreadPoolExecutor (``asyncio.to_thread`` and ``loop.run_in_executor``
# included: they submit to one) runs with the stack of the thread that submitted it,
# taken at ``submit()``: pool workers are reused by whoever submits next. Context
# variables would not do: Thread and ThreadPoolExecutor.submit do not copy them (3.10
# to 3.13). So two methods are wrapped, once, at the first push_experiment (never at
# import): Thread.start and ThreadPoolExecutor.submit. Subclasses calling the base's.
_hooks_installed = False


def _inherit_in_threads() -> None:
    """Install the two wrappers (idempotent)."""
    global _hooks_installed
    from concurrent.futures import ThreadPoolExecutor  # only here: a trial never pushes

    with _lock:
        if _hooks_installed:
            return
        if not getattr(threading.Thread.start, "_expmgr_inherits", False):  # e.g. after a reload of this module
            setattr(threading.Thread, "start", _inheriting_start(threading.Thread.start))
        if not getattr(ThreadPoolExecutor.submit, "_expmgr_inherits", False):
            setattr(ThreadPoolExecutor, "submit", _inheriting_submit(ThreadPoolExecutor.submit))
        _hooks_installed = True


_NO_RUN = object()


def _inheriting_start(start: Callable[[threading.Thread], None]) -> Callable[[threading.Thread], None]:
    """``Thread.start`` that hands the starting thread's stack to the new thread. It goes in
    through the thread's own ``run`` (an instance attribute for the time of the start), so
    Thread subclasses overriding ``run`` are covered; the thread's stack goes when ``run`` ends."""
    @functools.wraps(start)
    def inheriting_start(thread: threading.Thread) -> None:
        stack = _stacks.get(threading.get_ident(), ())
        own_run = thread.__dict__.get("run", _NO_RUN)  # a run given to this instance, if any
        run = thread.run

        def run_inheriting() -> None:
            _restore_run(thread, own_run)
            ident = threading.get_ident()
            with _lock:
                _set_stack(ident, stack, len(stack))  # anything there was left by an ended thread
            try:
                run()
            finally:
                with _lock:
                    _set_stack(ident, (), 0)

        thread.__dict__["run"] = run_inheriting
        try:
            start(thread)
        except BaseException:
            _restore_run(thread, own_run)  # not started (or started before)
            raise

    inheriting_start._expmgr_inherits = True  # type: ignore[attr-defined]
    return inheriting_start


def _restore_run(thread: threading.Thread, own_run: object) -> None:
    if own_run is _NO_RUN:
        thread.__dict__.pop("run", None)
    else:
        thread.__dict__["run"] = own_run


def _inheriting_submit(submit: Callable[..., Future[Any]]) -> Callable[..., Future[Any]]:
    """``ThreadPoolExecutor.submit`` whose task runs with the submitting thread's stack."""
    @functools.wraps(submit)
    def inheriting_submit(executor: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return submit(executor, _run_with_stack, _stacks.get(threading.get_ident(), ()), fn, *args, **kwargs)

    inheriting_submit._expmgr_inherits = True  # type: ignore[attr-defined]
    return inheriting_submit


def _run_with_stack(stack: tuple[str, ...], fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with ``stack`` (inherited) as this thread's stack; the
    thread's own stack (a pool worker's: none) again after."""
    ident = threading.get_ident()
    with _lock:
        saved = _stacks.get(ident, ()), _inherited.get(ident, 0)
        _set_stack(ident, stack, len(stack))
    try:
        return fn(*args, **kwargs)
    finally:
        with _lock:
            _set_stack(ident, *saved)


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
    """Whether stdout takes colour, for the logs and ``expctl top`` alike: stdout is a
    terminal and ``NO_COLOR`` is unset or empty. As no-color.org says: NO_COLOR "when
    present and not an empty string (regardless of its value)" turns colour off, so
    ``NO_COLOR=0`` does and ``NO_COLOR=`` (empty) does not."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _stdout_formatter() -> logging.Formatter:
    if use_colour():
        import colorlog

        class ColouredFormatter(colorlog.ColoredFormatter):
            def format(self, record: logging.LogRecord) -> str:
                record.thread_suffix = _thread_suffix(record)
                return super().format(record)

        # force_color: use_colour() decided; colorlog's own rule (NO_COLOR present, even
        # empty) would otherwise differ from no-color.org's and from expctl top's.
        return ColouredFormatter("%(log_color)s" + FORMAT, DATE_FORMAT, force_color=True)
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

    bounded_files: tuple[str, str, RotationLimits] | None = None
    """Set by :func:`bound_stdout_file`: the files stdout and stderr are, rotated at the limit."""

    def emit(self, record: logging.LogRecord) -> None:
        bounded = self.bounded_files
        if bounded is not None:
            stdout_path, stderr_path, limits = bounded
            try:  # rotated before a record that would not fit (the formatted text is cached)
                rotate_if_full(stdout_path, limits, (1,), len(self.format(record)) + 1)
                rotate_if_full(stderr_path, limits, (2,))  # written to by others (tracebacks): checked here
            except Exception:  # noqa: BLE001 - a full disk, a record that cannot be formatted: emit says
                pass
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        error = sys.exc_info()[1]
        if isinstance(error, BrokenPipeError):
            return
        if isinstance(error, OSError):  # a full disk under a daemon's log: no traceback per record
            if not self.failed:
                self.failed = True
                _say_once_on_stderr(f"cannot write to stdout: {error.strerror or error}; records go on to "
                                    "experiment.log")
            return
        super().handleError(record)

    failed = False


def bound_stdout_file(stdout_path: str | os.PathLike[str], stderr_path: str | os.PathLike[str],
                      limits: RotationLimits) -> None:
    """stdout is the file ``stdout_path`` and stderr ``stderr_path`` (a daemon's logs): rotate
    each at ``limits`` as ``nni.*`` records are printed, pointing its descriptor at each new file."""
    ensure_stdout_logging()
    if _stdout_handler is None:   # silenced (silence_stdout): nothing is printed to rotate for
        return
    assert isinstance(_stdout_handler, _StdoutHandler)  # made by ensure_stdout_logging
    _stdout_handler.bounded_files = (os.fspath(stdout_path), os.fspath(stderr_path), limits)


def ensure_stdout_logging() -> None:
    """``nni.*`` INFO+ to stdout, once per process (never after :func:`silence_stdout`).
    ``nni`` stops propagating, so a user's ``logging.basicConfig()`` never prints the
    same record twice."""
    global _stdout_handler
    with _lock:
        if _stdout_handler is not None or _stdout_silenced:
            return
        _stdout_handler = _new_handler(_StdoutHandler(sys.stdout), logging.INFO, _stdout_formatter())
        root = logging.getLogger(NAMESPACE)
        root.addHandler(_stdout_handler)
        root.propagate = False
        _refresh_namespace_level()


def silence_stdout() -> None:
    """NNI's ``nni.silence_stdout()``: no more ``nni.*`` records on stdout in this process
    (experiment.log, trial.log and dispatcher.log are kept). ``nni`` still does not
    propagate, so the user's own handlers do not print them instead."""
    global _stdout_handler, _stdout_silenced
    with _lock:
        _stdout_silenced = True
        root = logging.getLogger(NAMESPACE)
        if _stdout_handler is not None:
            root.removeHandler(_stdout_handler)
            _stdout_handler = None
        root.propagate = False


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


class _LogFileHandler(logging.Handler):
    """A log file bounded by ``limits`` (``expmgr.rotation``). It stays closed: a record still
    on its way to it when it is closed (another thread was emitting) is dropped instead of
    reopening the file. When a write fails (a full disk) it says so once on stderr, not as a
    traceback per record, and holds the records (up to MAX_HELD_BYTES; past that it counts
    them) until it can write them, with the count of those it could not keep."""

    MAX_HELD_BYTES = 1024 * 1024

    def __init__(self, path: str | os.PathLike[str], limits: RotationLimits = UNBOUNDED, delay: bool = False,
                 descriptors: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.baseFilename = os.path.abspath(os.fspath(path))  # logging.FileHandler's name, which tools read
        self._writer = RotatingWriter(self.baseFilename, limits, descriptors=descriptors)
        self._closed_for_good = False
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._lost = 0
        self._failure: str | None = None
        if not delay:
            self._writer.fileno()  # the file exists from now on, as logging.FileHandler's does

    def emit(self, record: logging.LogRecord) -> None:
        if self._closed_for_good:  # set by close(), under the lock emit() is called with
            return
        try:
            data = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:  # noqa: BLE001 - a record that cannot be formatted: logging's own report
            self.handleError(record)
            return
        if self._held_bytes + len(data) <= self.MAX_HELD_BYTES:
            self._held.append(data)
            self._held_bytes += len(data)
        else:
            self._lost += 1
        self._write_held()

    def _write_held(self) -> None:
        try:
            while self._held:
                written = self._writer.write_some(self._held[0])
                self._held_bytes -= written
                self._held[0] = self._held[0][written:]
                if not self._held[0]:
                    del self._held[0]
            if self._lost:
                self._writer.write(f"[{time.strftime(DATE_FORMAT)}] WARNING (nni) {self._lost} records could not be "
                                   f"written here ({self._failure}) nor kept; they are lost\n".encode())
                self._lost = 0
        except OSError as error:
            if self._failure is None:
                self._failure = error.strerror or str(error)
                _say_once_on_stderr(f"cannot write {self.baseFilename}: {self._failure}; its records are held "
                                    f"(up to {self.MAX_HELD_BYTES // 1024} KiB) until it can be written again")
            return
        if self._failure is not None:
            self._failure = None
            _say_once_on_stderr(f"{self.baseFilename} can be written again")

    def close(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            if not self._closed_for_good:
                self._write_held()
            self._closed_for_good = True
            self._writer.close()
        super().close()


def _say_once_on_stderr(message: str) -> None:
    try:
        sys.stderr.write(f"expmgr: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr is on the full disk too, or closed


class ExperimentLogAttachment:
    """The experiment.log sink of one experiment; ``close()`` removes and closes it."""

    def __init__(self, exp_id: str, path: str | os.PathLike[str], level: str,
                 limits: RotationLimits = UNBOUNDED) -> None:
        self.exp_id = exp_id
        os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
        self._handler = _new_handler(_LogFileHandler(path, limits), level_number(level), _plain_formatter())
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
            _forget_inherited(self.exp_id)
        self._handler.close()


def attach_experiment(exp_id: str, path: str | os.PathLike[str], level: str, *,
                      to_stdout: bool = True, limits: RotationLimits = UNBOUNDED) -> ExperimentLogAttachment:
    """Route experiment ``exp_id``'s records to ``path``, bounded by ``limits`` (and ``nni.*``
    INFO+ to stdout)."""
    if to_stdout:
        ensure_stdout_logging()
    return ExperimentLogAttachment(exp_id, path, level, limits)


def setup_dispatcher_logging(path: str | os.PathLike[str], level: str, limits: RotationLimits = UNBOUNDED,
                             descriptors: tuple[int, ...] = ()) -> None:
    """In the dispatcher process: every record of every logger to ``path``, bounded by ``limits``;
    ``descriptors`` (its stdout and stderr) follow the file across rotations."""
    root = logging.getLogger()
    root.addHandler(_new_handler(_LogFileHandler(path, limits, descriptors=descriptors), logging.NOTSET,
                                 _plain_formatter()))
    root.setLevel(level_number(level))
    logging.getLogger(NAMESPACE).setLevel(level_number(level))


def setup_trial_logging(path: str | os.PathLike[str], level: str, limits: RotationLimits = UNBOUNDED) -> None:
    """In a trial process: ``nni.*`` records to trial.log only (not to its stdout), bounded by
    ``limits``; the file is made at the first record."""
    root = logging.getLogger(NAMESPACE)
    with _lock:
        if any(getattr(handler, "_expmgr_trial_log", False) for handler in root.handlers):  # set up already
            return
        handler = _new_handler(_LogFileHandler(path, limits, delay=True), level_number(level), _plain_formatter())
        handler._expmgr_trial_log = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
        _refresh_namespace_level()


def setup_standalone_trial_logging() -> logging.Logger:
    """A trial script run by hand: ``nni.*`` INFO+ to stdout; returns ``nni.trial``."""
    ensure_stdout_logging()
    return logging.getLogger(f"{NAMESPACE}.trial")

"""The warm-start template: a Python process that imported a trial's preload list once and
forks a fresh child for each trial, which then runs the trial's script or module exactly
as a fresh interpreter would (see ``_starter.py`` for the manager's side).

Run by the trial's own interpreter, by path, with the standard library alone (it cannot
import ``expmgr``: the interpreter may be another environment's)::

    python3 -c "$BOOTSTRAP" /path/to/template.py <control fd> <module>...   # ?<module>: learned, may fail

Its control socket (``SOCK_SEQPACKET``, one JSON message each way per event) carries:
    → {"op": "fork", "id": n, "argv", "main": ["script", path] | ["module", name], "cwd",
       "env", "marker", "learn": path | null} with the trial's stdout and stderr descriptors
       attached (``learn``: where the child writes, at its exit, the modules it imported)
    ← {"op": "ready", "failed": [[module, error]...], "unsafe": reason | null, "environ": {...}}
    ← {"op": "forked", "id": n, "pid": p} | {"op": "refused", "id": n, "reason": text}
    ← {"op": "exit", "pid": p, "returncode": rc}          (Popen's: -signum when signalled)
It exits when the socket closes, once its children have exited.
"""
from __future__ import annotations

import gc
import io
import json
import os
import select
import signal
import socket
import sys
import traceback

_TRIAL_API = "expmgr.trial"
MARKER_ENV = "EXPMGR_TRIAL_MARKER"   # watchdog.MARKER_ENV: the same name, not importable here
_MAX_MESSAGE = 1 << 22


class _Snapshot:
    """What a fresh interpreter has at the start of ``__main__``: taken before any preload,
    restored in each child."""

    def __init__(self) -> None:
        self.handlers = {}
        for signum in signal.valid_signals():
            try:
                handler = signal.getsignal(signum)
            except (ValueError, OSError):
                continue
            if handler is not None:
                self.handlers[signum] = handler
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        # (The registry a warning of the bootstrap may have left is not a fresh __main__'s.)
        self.main_dict = {name: value for name, value in vars(sys.modules["__main__"]).items()
                          if name != "__warningregistry__"}
        self.marker_at, self.marker_room = _marker_location()
        self.environ = dict(os.environ)
        self.program = getattr(sys, "orig_argv", sys.argv)[0]
        """The interpreter's ``argv[0]`` as it was executed (by a wrapper such as pyenv's shim, its path)."""

    def restore_signals(self) -> None:
        for signum, handler in self.handlers.items():
            if signum in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                if signal.getsignal(signum) is not handler:
                    signal.signal(signum, handler)
            except (ValueError, OSError):
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


def _marker_location() -> tuple[int, int]:
    """Where the value of ``EXPMGR_TRIAL_MARKER`` lies in this process's original environment
    block (what ``/proc/<pid>/environ`` shows, where the watchdog finds a trial's processes),
    and how many bytes it has: a child writes its trial's marker there. (0, 0) if unknown."""
    try:
        with open("/proc/self/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        # Fields 50 and 51 of stat(5) (env_start, env_end); here counted from field 3.
        start, end = int(fields[47]), int(fields[48])
        with open("/proc/self/environ", "rb") as file:
            block = file.read()
    except (OSError, IndexError, ValueError):
        return 0, 0
    key = f"{MARKER_ENV}=".encode()
    at = 0 if block.startswith(key) else block.find(b"\0" + key) + 1
    if at <= 0 and not block.startswith(key) or len(block) != end - start:
        return 0, 0
    value_at = at + len(key)
    value_end = block.index(b"\0", value_at) if b"\0" in block[value_at:] else len(block)
    return start + value_at, value_end - value_at


def _write_marker(snapshot: _Snapshot, marker: str) -> bool:
    encoded = marker.encode()
    if not snapshot.marker_at or len(encoded) >= snapshot.marker_room:
        return False
    value = encoded.ljust(snapshot.marker_room, b"\0")
    try:   # the process's own memory, through /proc: without importing ctypes (2 ms a trial)
        with io.open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(snapshot.marker_at)
            return memory.write(value) == len(value)
    except OSError:   # a kernel that refuses writes there (proc_mem.force_override=never)
        import ctypes
        ctypes.memmove(snapshot.marker_at, value, snapshot.marker_room)
        return True


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the manager is gone: the watchdog ends what is left


class _Safety:
    """Why forking now would not give a trial what a fresh interpreter gives, or None. Asked
    before every fork; each module is looked at once (a realpath per module per fork would cost
    milliseconds of every trial's start)."""

    def __init__(self, code_directory: str) -> None:
        self._own = os.path.join(os.path.realpath(code_directory), "")
        self._seen: set = set()

    def unsafe_reason(self) -> str | None:
        import threading
        if threading.active_count() > 1:
            names = ", ".join(thread.name for thread in threading.enumerate()
                              if thread is not threading.main_thread())
            return f"the template has running threads ({names})"
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
            return "CUDA is initialized in the template"
        if len(sys.modules) != len(self._seen):
            for name, module in list(sys.modules.items()):
                if name in self._seen:
                    continue
                path = getattr(module, "__file__", None)
                # (A relative __file__ names no place: torch.ops says "_ops.py".)
                if isinstance(path, str) and os.path.isabs(path) and os.path.realpath(path).startswith(self._own):
                    return f"module {name} of the trial's code directory was imported in the template"
                self._seen.add(name)
        return None


def _set_environment(env: dict) -> None:
    """``os.environ`` (and the C environment) as ``env``, in its order, as a fresh interpreter
    has it; only the variables that differ are set or unset (clearing all costs ~1 ms)."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    data = getattr(os.environ, "_data", None)   # CPython's mapping behind os.environ: its order
    if isinstance(data, dict):
        ordered = {os.environ.encodekey(name): data[os.environ.encodekey(name)] for name in env}  # type: ignore[attr-defined]
        data.clear()
        data.update(ordered)


def _script_dir(path: str) -> str:
    """``sys.path[0]`` of ``python path``: the script's folder, its final symlinks followed."""
    for _ in range(40):
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        path = os.path.join(os.path.dirname(path), target)
    return os.path.dirname(os.path.abspath(path))


def _standard_streams(env: dict) -> None:
    """stdin, stdout and stderr as a fresh interpreter opens them on descriptors 0-2, with the
    trial's own ``PYTHONUNBUFFERED`` (CPython's ``create_stdio``: unbuffered, every stream
    writes through; else stderr, and a terminal, are line-buffered)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    old_out, old_err = sys.__stdout__, sys.__stderr__
    encoding = getattr(old_out, "encoding", None) or "utf-8"
    stdin = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding=getattr(sys.__stdin__, "encoding", None)
                             or encoding, errors=getattr(sys.__stdin__, "errors", None) or "strict",
                             line_buffering=not unbuffered and os.isatty(0), write_through=unbuffered)

    def writer(fd: int, errors: str) -> io.TextIOWrapper:
        raw = io.open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)
        return io.TextIOWrapper(raw, encoding=encoding, errors=errors,  # type: ignore[arg-type]
                                line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)),
                                write_through=unbuffered)

    stdout = writer(1, getattr(old_out, "errors", None) or "strict")
    stderr = writer(2, getattr(old_err, "errors", None) or "backslashreplace")
    for name, stream in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)   # the originals, as a fresh interpreter's are these


def _flush_streams() -> int:
    status = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            status = 120   # as Python's own exit when stdout cannot be flushed
    return status


def _exit_code(error: SystemExit) -> int:
    """The process's exit status for ``raise SystemExit(code)``, as Python's handling."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFFFFFFFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def _users_exception() -> tuple:
    """The exception being handled, its traceback without this file's frames: as a cold
    start's, from the trial's own ``<module>`` (or runpy's, for ``-m``)."""
    kind, error, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    if error is not None:
        error.__traceback__ = tb   # what Python's hook prints, whatever it is given
    return kind, error, tb


def _write_learned(path: str, before: set, code_directory: str) -> None:
    """Write to ``path`` (JSON) the modules the trial imported that a template may preload: of
    the standard library or site-packages, never of its code directory, nor expmgr or nni."""
    imported = [(name, getattr(module, "__file__", None)) for name, module in list(sys.modules.items())
                if name not in before]   # before sysconfig's own imports
    import sysconfig
    roots = {os.path.join(os.path.realpath(folder), "") for name, folder in sysconfig.get_paths().items()
             if name in ("stdlib", "platstdlib", "purelib", "platlib")}
    own = os.path.join(os.path.realpath(code_directory), "")
    names = []
    for name, file in imported:
        if not isinstance(file, str) or name.split(".")[0] in ("expmgr", "nni", "__main__"):
            continue
        real = os.path.realpath(file)
        if not real.startswith(own) and any(real.startswith(root) for root in roots):
            names.append(name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with io.open(fd, "w") as file:
            json.dump(names, file)
    except OSError:
        pass


def _finish(code: int, learn: tuple | None = None) -> None:
    """Python's exit path: non-daemon threads joined, atexit handlers, stdio flushed; then,
    when asked (``learn``: path, modules before, code directory), the modules it imported."""
    import threading
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:
        pass
    import atexit
    atexit._run_exitfuncs()
    flushed = _flush_streams()
    if learn is not None and learn[0]:
        _write_learned(*learn)
    os._exit(code if code or not flushed else flushed)


def _run_main(main: list, program: str) -> None:
    kind, target = main
    if kind == "module":
        import runpy
        runpy._run_module_as_main(target, alter_argv=True)  # type: ignore[attr-defined]
        return
    path = os.path.abspath(target)
    try:
        with io.open(path, "rb") as file:
            source = file.read()
    except OSError as error:
        sys.stderr.write(f"{program}: can't open file {path!r}: [Errno {error.errno}] {error.strerror}\n")
        _finish(2)
    module = sys.modules["__main__"]
    from importlib.machinery import SourceFileLoader
    vars(module).update(__file__=path, __cached__=None, __loader__=SourceFileLoader("__main__", path))
    exec(compile(source, path, "exec", dont_inherit=True), vars(module))


def _spare(snapshot: _Snapshot, inbox: socket.socket) -> None:
    """In a spare, forked before its trial is known: everything a trial's start needs that
    is not the trial's own, then wait for the trial and become it; never returns. (Forking,
    a new session and the signals cost 1-2 ms that no trial then waits for.)"""
    try:
        os.setsid()
        snapshot.restore_signals()
        for name in os.listdir("/proc/self/fd"):   # a fresh interpreter has 0-2 alone
            if int(name) > 2 and int(name) != inbox.fileno():
                try:
                    os.close(int(name))
                except OSError:
                    pass
        try:
            data, fds, _, _ = socket.recv_fds(inbox, _MAX_MESSAGE, 2)
        except OSError:
            data, fds = b"", []
        if not data or len(fds) != 2:
            os._exit(0)   # the template is gone, or retires this spare
        request = json.loads(data)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for each in (devnull, *fds):
            os.close(each)
        inbox.close()
        env = request["env"]
        os.chdir(request["cwd"])
        _set_environment(env)
        _write_marker(snapshot, request["marker"])
        _standard_streams(env)
        argv = request["argv"]
        kind, target = request["main"]
        sys.argv = ["-m"] + argv[3:] if kind == "module" else argv[1:]
        if hasattr(sys, "orig_argv"):
            sys.orig_argv = [snapshot.program, *argv[1:]]
        sys.path.insert(0, _script_dir(os.path.join(request["cwd"], target)) if kind == "script" else os.getcwd())
        main = sys.modules["__main__"]
        vars(main).clear()
        vars(main).update(snapshot.main_dict)
        trial_api = sys.modules.get(_TRIAL_API)
        if trial_api is not None:
            trial_api._route_trial_logging()   # what its import does in a trial
        numpy = sys.modules.get("numpy")
        if numpy is not None and "numpy.random" in sys.modules:
            numpy.random.seed()   # random reseeds itself at fork; numpy's global generator does not
        torch = sys.modules.get("torch")
        if torch is not None and callable(getattr(torch, "seed", None)):
            torch.seed()   # nor torch's default one: a fresh interpreter seeds it from the OS
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    _run_trial(snapshot, request)


def _run_trial(snapshot: _Snapshot, request: dict) -> None:
    """Run the trial's script or module, and end the process as Python's own exit would."""
    code = 0
    # Only when asked: copying sys.modules' names writes to (so copies) hundreds of shared pages.
    learn = (request["learn"], set(sys.modules), request["cwd"]) if request.get("learn") else None
    try:
        _run_main(request["main"], snapshot.program)
    except SystemExit as error:
        code = _exit_code(error)
    except KeyboardInterrupt:
        sys.excepthook(*_users_exception())
        _flush_streams()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 1
    except BaseException:
        try:
            sys.excepthook(*_users_exception())
        except BaseException:
            traceback.print_exc()
        code = 1
    _finish(code, learn)


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _preload_trial_api(code_directory: str) -> None:
    """``import expmgr`` (its trial API, which every reporting trial imports: 1-2 ms each) as
    the trial's PYTHONPATH finds it, unless that is in the trial's code directory. Its only
    work that depends on the trial, routing ``nni.*`` logging to trial.log, is done in each
    trial (see _TRIAL_API)."""
    try:
        import expmgr  # noqa: F401  (the interpreter's own, through trial_path)
    except BaseException:
        pass
    loaded = [name for name in sys.modules if name == "expmgr" or name.startswith("expmgr.")]
    if _Safety(code_directory).unsafe_reason() is not None or _TRIAL_API not in sys.modules:
        for name in loaded:
            del sys.modules[name]


def serve(control_fd: int, preload: list) -> int:
    snapshot = _Snapshot()
    sock = socket.socket(fileno=control_fd)
    code_directory = os.getcwd()
    # No folder of the trial's code on the path while preloading ('' of `python -c`): a
    # module of the trial is never imported here.
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path.pop(0)
    failed = []
    for name in preload:
        learned = name.startswith("?")   # learned from a trial, not listed: its failure is ignored
        try:
            __import__(name.lstrip("?"))
        except BaseException as error:  # a preload's SystemExit is a failure too
            if not learned:
                failed.append([name, f"{type(error).__name__}: {error}"])
    _preload_trial_api(code_directory)
    safety = _Safety(code_directory)
    unsafe = safety.unsafe_reason()
    if unsafe is None and not snapshot.marker_at:
        unsafe = "the watchdog could not find forked trials: no /proc/self/environ"
    _send(sock, {"op": "ready", "failed": failed, "unsafe": unsafe, "environ": snapshot.environ})
    if failed or unsafe:
        return 1
    _Server(snapshot, sock, safety).run()
    return 0


class _Server:
    """The template's loop: a fork request is handed to the spare forked in advance (a new
    spare is forked once the trial is told), and each trial's exit is told."""

    def __init__(self, snapshot: _Snapshot, sock: socket.socket, safety: _Safety) -> None:
        self._snapshot = snapshot
        self._sock = sock
        self._safety = safety
        self._children: dict = {}   # pidfd -> pid, of the trials
        self._spare: tuple | None = None   # (pid, pidfd, its inbox)
        self._poller = select.poll()
        self._poller.register(sock.fileno(), select.POLLIN)

    def run(self) -> None:
        self._fork_spare()
        open_ = True
        while open_ or self._children:
            for fd, _ in self._poller.poll():
                if fd in self._children:
                    pid = self._children.pop(fd)
                    self._reap(fd, pid)
                    _send(self._sock, {"op": "exit", "pid": pid, "returncode": _returncode(os.waitpid(pid, 0)[1])})
                elif self._spare is not None and fd == self._spare[1]:
                    self._drop_spare()   # it died waiting (killed from outside): another is forked when needed
                elif open_:
                    open_ = self._on_request()
        self._drop_spare()

    def _on_request(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self._sock, _MAX_MESSAGE, 2)
        except OSError:
            data, fds = b"", []
        if not data:
            self._poller.unregister(self._sock.fileno())
            return False
        request = json.loads(data)
        reason = self._safety.unsafe_reason() if len(fds) == 2 else "no output descriptors were sent"
        pid = None
        if reason is None:
            for _ in range(2):   # a spare that died since it was forked: once more with a new one
                if self._spare is None:
                    self._fork_spare()
                pid = self._hand_to_spare(data, fds)
                if pid is not None:
                    break
        for each in fds:
            os.close(each)
        if pid is None:
            _send(self._sock, {"op": "refused", "id": request["id"],
                               "reason": reason or "the template could not fork a trial"})
            return True
        _send(self._sock, {"op": "forked", "id": request["id"], "pid": pid})
        self._fork_spare()
        return True

    def _hand_to_spare(self, data: bytes, fds: list) -> int | None:
        """The spare's pid, now the trial's; None if it cannot take the trial."""
        assert self._spare is not None
        pid, pidfd, inbox = self._spare
        try:
            socket.send_fds(inbox, [data], fds)
        except OSError:
            self._drop_spare()
            return None
        self._spare = None
        inbox.close()
        self._children[pidfd] = pid
        return pid

    def _fork_spare(self) -> None:
        if self._spare is not None or self._safety.unsafe_reason() is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        # Every object so far out of the collector's reach: a collection in a trial would
        # otherwise walk (and so copy) the template's whole heap, milliseconds per trial.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            _spare(self._snapshot, theirs)
        theirs.close()
        pidfd = os.pidfd_open(pid)
        self._poller.register(pidfd, select.POLLIN)
        self._spare = (pid, pidfd, ours)

    def _drop_spare(self) -> None:
        """End the spare (it exits when its inbox closes) and reap it."""
        if self._spare is None:
            return
        pid, pidfd, inbox = self._spare
        self._spare = None
        inbox.close()
        self._reap(pidfd, pid)
        os.waitpid(pid, 0)

    def _reap(self, pidfd: int, pid: int) -> None:
        self._poller.unregister(pidfd)
        os.close(pidfd)


BOOTSTRAP = ("(lambda s,g:(exec(compile(open(s.argv[1]).read(),s.argv[1],'exec'),g),"
             "s.exit(g['serve'](int(s.argv[2]),s.argv[3:]))))"
             "(__import__('sys'),{'__name__':'__expmgr_warm__','__file__':__import__('sys').argv[1]})")
"""The ``-c`` program that runs this file in its own namespace and binds no name in
``__main__``: the trial's script gets a ``__main__`` as fresh as a cold start's."""

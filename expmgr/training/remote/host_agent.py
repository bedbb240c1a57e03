"""The host agent: runs a remote service's trials on one host, reached through one process's
stdin and stdout (an SSH channel, or pipes in tests), with no expmgr installed there::

    python3 host_agent.py --runtime DIR [--watchdog PATH] [--session ID] [--window SECONDS --state DIR]

It reads commands on stdin and writes events on stdout, one JSON object a line (at most
``MAX_COMMAND_BYTES``/``MAX_EVENT_BYTES``; a longer or malformed line gets an ``error``
event and is skipped, never a crash). This docstring is the protocol's one statement;
``agent_client.py`` speaks it for the manager. Commands:

- ``{"op": "launch", "trial_id", "attempt", "command", "argv", "cwd", "trial_dir", "env",
  "unset", "parameters", "process_limit"}``: start the attempt in its own session, its
  stdout and stderr appended to ``trial_dir``'s files, parameter.json written at its first
  attempt; ``started {pid}`` or ``launch_failed {reason, errno, in_trial_folder}``.
- ``{"op": "signal", "trial_id", "attempt", "signal": "TERM"|"KILL"|"USR1"|"INT"}``: to its
  whole process group.
- ``{"op": "stop"}``: SIGKILL every trial, tell their ends, end the watchdog, ``stopped``, exit 0.
- ``{"op": "adopt", "trial_id", "attempt", "pid", "pid_started", "trial_dir", "offsets"}`` (with a
  window): take over an attempt the agent of the run before left running (``kept``): its process
  checked by pid, start time and the old session's marker, its files streamed from ``offsets``
  (bytes per file the manager has), its end (read from the status file its old agent writes)
  told as ``exited``; one that ended meanwhile is told ``exited`` at once.
- ``{"op": "release", "adopted": [pid, ...]}``: the old run's watchdog is told which trials were
  taken over (``adopted`` in the state folder, then SIGUSR1): it ends the others and exits.

Events: ``kept`` (first, with a window: ``session`` of the run before, ``gone_at``, ``window_ended``,
``processes`` [{pid, started, trial_id, attempt, gpus}] of that session still running, ``statuses``
[[trial_id, attempt, returncode]] written since), ``started {pid, pid_started}``, ``exited {exit_code | signum, failed, preempting}``, ``launch_failed``,
``output {trial_id, attempt, file, offset, data}`` (base64, at most ``MAX_CHUNK`` bytes; the
offset counts from the attempt's first byte in that file), ``error {message}``, ``stopped``.
Every byte an attempt wrote to stdout, stderr, trial.log and metrics.jsonl up to its end is
sent, in order per file, before its ``exited``.

The watchdog (``watchdog.py``, uploaded beside this file) is its child, in its own session:
when this agent goes without ``stop`` (its stdin closed because the connection dropped, or
it was SIGKILLed), the watchdog's pipe closes and it kills every trial's group and what
escaped it.

With a reattach window (``--window SECONDS --state DIR``, ``trainingService.reattachWindow``) the
agent (DIR beside the experiment's ``trials/`` folder on the host) writes each trial's end to
``<trial_dir>/.exit-status-<attempt>`` (``{"returncode": N}``,
atomically), and when its stdin closes without ``stop`` it does not end its trials: it closes
its watchdog's pipe (which keeps them for the window, as the local service's does, its state
files in DIR), stops writing events, and stays their parent until the last one ended, writing
each end, then exits. Its watchdog's record (``current`` in DIR, as ``_kept.WatchdogRecord``)
tells the next run's agent which session's trials it may adopt.

Standard library only, Python 3.8+, run by path (as the watchdog).
"""
from __future__ import annotations

import base64
import errno as errnos
import json
import os
import select
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Dict, List, Optional

MAX_COMMAND_BYTES = 1024 * 1024
"""A command line's bound (a launch carries the trial's environment and parameters)."""
MAX_CHUNK = 48 * 1024
"""Bytes of a file in one output event (64 KiB once in base64)."""
MAX_EVENT_BYTES = 128 * 1024
"""What the client accepts as one event line: any event this agent writes fits."""
READ_PER_TURN = 8 * MAX_CHUNK
"""Bytes read from one file per turn of the loop, so that one chatty trial leaves room for the others."""
POLL_INTERVAL = 0.1
"""Seconds between two looks at the running trials' files (no inotify: portable, and nothing is missed)."""
MARKER_ENV = "EXPMGR_TRIAL_MARKER"  # watchdog.MARKER_ENV: this file imports no module of expmgr
STREAMED_FILES = ("stdout", "stderr", "trial.log", "metrics.jsonl")
PREEMPTING_FILE = "preempting"  # trial.PREEMPTING_FILE
TRIAL_DIR_ENV = "EXPMGR_TRIAL_DIR"  # trial.ENV_TRIAL_DIR
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "USR1": signal.SIGUSR1, "INT": signal.SIGINT}
_OVER_LIMIT = "over-limit"  # watchdog.OVER_LIMIT
KEEPING_FORMAT = "1"  # _kept.KEEPING_FORMAT: a record of another format is not adopted from
WATCHDOG_RECORD = "current"  # _kept._WATCHDOG_FILE
MANAGER_GONE_FILE, WINDOW_ENDED_FILE, ADOPTED_FILE = "manager-gone", "window-ended", "adopted"  # watchdog's
RELEASE_SIGNAL = signal.SIGUSR1  # watchdog.RELEASE_SIGNAL
STATUS_WAIT = 10.0
"""Seconds an adopted trial's end waits, once its process is gone, for its old agent's status file."""
_SAME_PROCESS = 0.01  # _kept._SAME_PROCESS


class FileTail:
    """One file of a trial followed by offset: what it has that was not sent yet. The file is
    kept open, so a rotation (the trial's logging renaming trial.log) loses nothing: the old
    file is read to its end before the new one is followed."""

    def __init__(self, path: str, start: int) -> None:
        self.path = path
        self.start = start
        """Where the attempt's output begins in the file first found (what earlier attempts left)."""
        self.file: Optional[BinaryIO] = None
        self.sent = 0
        """Bytes of this attempt sent so far: the next chunk's offset."""
        self.open()  # now, if it exists: a rotation before the first read loses nothing either

    def open(self) -> bool:
        try:
            self.file = open(self.path, "rb")
        except OSError:
            return False
        self.file.seek(min(self.start, os.fstat(self.file.fileno()).st_size))
        return True

    def read(self, limit: int) -> bytes:
        """Up to ``limit`` new bytes (b"" when none)."""
        if self.file is None and not self.open():
            return b""
        assert self.file is not None
        data = self.file.read(limit)
        if data:
            return data
        try:  # at the end of the open file: has the path a new file (rotated away)?
            renamed = os.stat(self.path).st_ino != os.fstat(self.file.fileno()).st_ino
        except OSError:
            renamed = False
        if renamed:
            self.file.close()
            self.file, self.start = None, 0
            return self.read(limit)
        return b""

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class _Attempt:
    """One running attempt: its process (the leader of its own group) and its files' tails. The
    process is this agent's child, or (``process`` None) one adopted from the run before, whose
    end is read from the status file its old agent writes."""

    def __init__(self, trial_id: str, attempt: int, trial_dir: str, process: Optional[subprocess.Popen],
                 tails: Dict[str, FileTail], pid: int = 0, pid_started: float = 0.0) -> None:
        self.trial_id = trial_id
        self.attempt = attempt
        self.trial_dir = trial_dir
        self.process = process
        self.tails = tails
        self.pid = process.pid if process is not None else pid
        self.pid_started = pid_started
        self.gone_since: Optional[float] = None

    def poll(self) -> Optional[int]:
        """Its return code once it ended (negative: the signal), else None."""
        if self.process is not None:
            return self.process.poll()
        if _same_process(self.pid, self.pid_started):
            return None
        code = read_status(status_path(self.trial_dir, self.attempt))
        if code is not None:
            return code
        now = time.monotonic()
        if self.gone_since is None:
            self.gone_since = now
        # Its old agent died without writing its end: taken for killed.
        return -signal.SIGKILL if now - self.gone_since > STATUS_WAIT else None


def status_path(trial_dir: str, attempt: int) -> str:
    """Where an attempt's end is written (``_kept.status_file``)."""
    return os.path.join(trial_dir, f".exit-status-{attempt}")


def read_status(path: str) -> Optional[int]:
    """``keeper.read_status``: the return code written to ``path``, or None."""
    try:
        with open(path, "rb") as file:
            status = json.loads(file.read(4096))
    except (OSError, ValueError):
        return None
    code = status.get("returncode") if isinstance(status, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _write_atomically(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except OSError:
        pass


def start_time(pid: int) -> Optional[float]:
    """``_process.process_start_time``: when ``pid`` started (seconds since the epoch), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        with open("/proc/stat", "rb") as file:
            boot = file.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        at = boot.index(b"\nbtime ") + 7
        return ticks / os.sysconf("SC_CLK_TCK") + float(boot[at:boot.index(b"\n", at)])
    except (OSError, ValueError, IndexError):
        return None


def _same_process(pid: int, started: float) -> bool:
    now = start_time(pid)
    return now is not None and abs(now - started) <= _SAME_PROCESS


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _variable_of(pid: int, name: str) -> Optional[str]:
    """The value of variable ``name`` in the environment of process ``pid`` (None: unset, or unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:
        return None
    for variable in environ.split(b"\0"):
        if variable.startswith(name.encode() + b"="):
            return variable[len(name) + 1:].decode(errors="replace")
    return None


def _marker_of(pid: int) -> Optional[str]:
    return _variable_of(pid, MARKER_ENV)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class Agent:
    """The loop: commands in, events out; see the module docstring."""

    def __init__(self, runtime: str, watchdog: str, session: str, window: float = 0.0, state_dir: str = "") -> None:
        self.runtime = runtime
        self.session = session
        self.attempts: Dict[int, _Attempt] = {}
        """By pid (each trial's pid is its process group's id)."""
        self.out = sys.stdout.fileno()
        self.connected = True
        self.over_limit: set = set()
        self.window = window if state_dir else 0.0
        self.state_dir = state_dir
        self.previous: Optional[List[str]] = None
        """The run before's watchdog record (pid, start time, session), with a window."""
        self.kept: Dict[str, Any] = {}
        arguments = [session]
        if self.window > 0:
            os.makedirs(state_dir, exist_ok=True)
            self.kept = self.take_kept()
            arguments += [repr(self.window), state_dir]
        self.watchdog = subprocess.Popen([sys.executable, "-I", "-S", watchdog, *arguments], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.watchdog.stdout is not None
        os.set_blocking(self.watchdog.stdout.fileno(), False)
        if self.window > 0:
            _write_atomically(os.path.join(state_dir, WATCHDOG_RECORD),
                              f"{KEEPING_FORMAT} {self.watchdog.pid} {start_time(self.watchdog.pid)!r} {session}\n")

    # ---- kept trials (a reattach window) ---------------------------------------------
    def take_kept(self) -> Dict[str, Any]:
        """What the run before left for this one: its watchdog's record and state files (then
        forgotten), its session's trials still running, and the ends written in the trials' folders."""
        kept: Dict[str, Any] = {"event": "kept", "session": None, "gone_at": None, "window_ended": [],
                                "processes": [], "statuses": []}
        try:
            with open(os.path.join(self.state_dir, WATCHDOG_RECORD), encoding="utf-8") as file:
                words = file.read().split()
            if len(words) == 4 and words[0] == KEEPING_FORMAT:
                self.previous = words[1:]
                kept["session"] = words[3]
        except OSError:
            pass
        try:
            with open(os.path.join(self.state_dir, MANAGER_GONE_FILE), encoding="utf-8") as file:
                kept["gone_at"] = float(file.read())
        except (OSError, ValueError):
            pass
        try:
            with open(os.path.join(self.state_dir, WINDOW_ENDED_FILE), encoding="utf-8") as file:
                kept["window_ended"] = [int(word) for word in file.read().split() if word.isdigit()]
        except OSError:
            pass
        for name in (MANAGER_GONE_FILE, WINDOW_ENDED_FILE, ADOPTED_FILE):
            try:
                os.unlink(os.path.join(self.state_dir, name))
            except OSError:
                pass
        session = kept["session"]
        if session is None:
            return kept
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            marker = _marker_of(int(name))
            words = marker.split("/") if marker else []
            if len(words) == 3 and words[0] == session and words[2].isdigit() and _leads_group(int(name)):
                started = start_time(int(name))
                if started is not None:
                    gpus = _variable_of(int(name), "CUDA_VISIBLE_DEVICES") or ""
                    kept["processes"].append({"pid": int(name), "started": started, "trial_id": words[1],
                                              "attempt": int(words[2]),
                                              "gpus": [int(word) for word in gpus.split(",") if word.strip().isdigit()]})
        trials = os.path.join(os.path.dirname(self.state_dir.rstrip("/")), "trials")   # DIR's sibling
        try:
            folders = os.listdir(trials)
        except OSError:
            folders = []
        for trial_id in folders:
            try:
                names = os.listdir(os.path.join(trials, trial_id))
            except OSError:
                continue
            for name in names:
                if name.startswith(".exit-status-") and name[13:].isdigit():
                    code = read_status(os.path.join(trials, trial_id, name))
                    if code is not None:
                        kept["statuses"].append([trial_id, int(name[13:]), code])
        return kept

    def adopt(self, command: Dict[str, Any]) -> None:
        """Take over an attempt of the run before (see the module docstring)."""
        trial_id, attempt = str(command["trial_id"]), int(command["attempt"])
        pid, pid_started, trial_dir = int(command["pid"]), float(command["pid_started"]), str(command["trial_dir"])
        offsets = dict(command.get("offsets") or {})
        tails = {name: FileTail(os.path.join(trial_dir, name), int(offsets.get(name) or 0)) for name in STREAMED_FILES}
        running = _Attempt(trial_id, attempt, trial_dir, None, tails, pid=pid, pid_started=pid_started)
        marker = f"{self.previous[2]}/{trial_id}/{attempt}" if self.previous else None
        if marker is not None and _same_process(pid, pid_started) and _marker_of(pid) == marker:
            self.tell_watchdog(f"+{pid} {marker} 0 {os.path.join(trial_dir, 'stderr')}")
        elif read_status(status_path(trial_dir, attempt)) is None:
            running.gone_since = time.monotonic() - STATUS_WAIT - 1   # neither running nor ended with a word
        self.attempts[pid] = running

    def release(self, command: Dict[str, Any]) -> None:
        """Tell the run before's watchdog which trials this agent took over (``_kept.release``)."""
        previous, self.previous = self.previous, None
        if previous is None or not _same_process(int(previous[0]), float(previous[1])):
            return
        _write_atomically(os.path.join(self.state_dir, ADOPTED_FILE),
                          "".join(f"{int(pid)}\n" for pid in command.get("adopted") or ()))
        try:
            os.kill(int(previous[0]), RELEASE_SIGNAL)
        except (ProcessLookupError, PermissionError):
            pass

    def keep_trials(self) -> int:
        """The manager went without ``stop``: the watchdog keeps the trials for the window; this
        agent stays their parent, writing each one's end, until the last ended."""
        self.connected = False
        stdin, self.watchdog.stdin = self.watchdog.stdin, None
        if stdin is not None:
            stdin.close()
        for pid, running in list(self.attempts.items()):
            if running.process is None:   # adopted: its own old agent writes its end
                del self.attempts[pid]
        while self.attempts:
            time.sleep(POLL_INTERVAL)
            self.reap()
        return 0

    # ---- events out ------------------------------------------------------------------
    def emit(self, event: Dict[str, Any]) -> None:
        if not self.connected:
            return
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.out, data):]
        except OSError:  # the manager's side is gone: the loop ends
            self.connected = False

    def error(self, message: str) -> None:
        self.emit({"event": "error", "message": message[:4096]})

    # ---- commands in -----------------------------------------------------------------
    def handle(self, line: bytes) -> bool:
        """Act on one command line; False when it was ``stop``."""
        try:
            command = json.loads(line)
            if not isinstance(command, dict):
                raise ValueError("not a JSON object")
        except ValueError as problem:
            self.error(f"malformed command line ({len(line)} bytes): {problem}")
            return True
        op = command.get("op")
        try:
            if op == "launch":
                self.launch(command)
            elif op == "signal":
                self.signal(command)
            elif op == "stop":
                return False
            elif op == "adopt":
                self.adopt(command)
            elif op == "release":
                self.release(command)
            else:
                self.error(f"unknown command {str(op)[:64]!r}")
        except Exception as problem:  # a bad field is that command's problem, never the agent's end
            self.error(f"bad {str(op)[:64]} command: {type(problem).__name__}: {problem}")
        return True

    def launch(self, command: Dict[str, Any]) -> None:
        """Start an attempt; whatever goes wrong once its ids are read is its ``launch_failed``."""
        trial_id, attempt = str(command["trial_id"]), int(command["attempt"])
        ident = {"trial_id": trial_id, "attempt": attempt}
        where = {"in_trial_folder": True}
        try:
            self.start_attempt(trial_id, attempt, command, where)
        except OSError as problem:
            self.emit({"event": "launch_failed", **ident, "reason": f"cannot start trial {trial_id}: {problem}"[:4096],
                       "errno": problem.errno, "in_trial_folder": where["in_trial_folder"]})
        except Exception as problem:  # a bad field (a NUL in the environment, no argv): never a crash
            self.emit({"event": "launch_failed", **ident, "errno": None, "in_trial_folder": False,
                       "reason": f"cannot start trial {trial_id}: {type(problem).__name__}: {problem}"[:4096]})

    def start_attempt(self, trial_id: str, attempt: int, command: Dict[str, Any], where: Dict[str, bool]) -> None:
        trial_dir, cwd = str(command["trial_dir"]), str(command["cwd"])
        argv = [str(word) for word in command["argv"]]
        process_limit = int(command.get("process_limit") or 0)
        env = dict(os.environ)
        for name in command.get("unset") or ():
            env.pop(str(name), None)
        env.update({str(name): str(value) for name, value in dict(command.get("env") or {}).items()})
        trial_path = os.path.join(self.runtime, "expmgr", "trial_path")
        env["PYTHONPATH"] = os.pathsep.join([trial_path] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env[TRIAL_DIR_ENV] = trial_dir
        env[MARKER_ENV] = f"{self.session}/{trial_id}/{attempt}"
        os.makedirs(trial_dir, exist_ok=True)
        try:   # a status file of this attempt from before (a rerun on this host) is not its end
            os.unlink(status_path(trial_dir, attempt))
        except OSError:
            pass
        _write_parameters(os.path.join(trial_dir, "parameter.json"), command.get("parameters"))
        stdout = os.open(os.path.join(trial_dir, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            stderr = os.open(os.path.join(trial_dir, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            os.close(stdout)
            raise
        # Each file made now and its tail opened on it, from where earlier attempts' output
        # ends, before the trial can write: a rename (a rotation) cannot take a file unread.
        for name in ("trial.log", "metrics.jsonl"):
            os.close(os.open(os.path.join(trial_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        tails = {name: FileTail(os.path.join(trial_dir, name), _size(os.path.join(trial_dir, name)))
                 for name in STREAMED_FILES}
        where["in_trial_folder"] = False
        try:
            process = _spawn(argv, str(command.get("command", "")), cwd, env, stdout, stderr)
        finally:
            os.close(stdout)
            os.close(stderr)
        self.attempts[process.pid] = _Attempt(trial_id, attempt, trial_dir, process, tails)
        self.tell_watchdog(f"+{process.pid} {env[MARKER_ENV]} {process_limit} {os.path.join(trial_dir, 'stderr')}")
        self.emit({"event": "started", "trial_id": trial_id, "attempt": attempt, "pid": process.pid,
                   "pid_started": start_time(process.pid)})

    def signal(self, command: Dict[str, Any]) -> None:
        trial_id, attempt = str(command["trial_id"]), int(command["attempt"])
        signum = SIGNALS.get(str(command["signal"]))
        if signum is None:
            raise ValueError(f"signal is one of {', '.join(SIGNALS)}, not {command['signal']!r}")
        for pid, running in self.attempts.items():
            if running.trial_id == trial_id and running.attempt == attempt:
                try:
                    os.killpg(pid, signum)
                except (ProcessLookupError, PermissionError):
                    pass
                return
        self.error(f"signal for attempt {attempt} of trial {trial_id}, which does not run here")

    # ---- trials ----------------------------------------------------------------------
    def send_output(self, running: _Attempt, to_end: bool) -> None:
        """What each file has that was not sent; with ``to_end`` all of it, else a turn's share."""
        for name, tail in running.tails.items():
            budget = READ_PER_TURN
            while to_end or budget > 0:
                data = tail.read(MAX_CHUNK)
                if not data:
                    break
                self.emit({"event": "output", "trial_id": running.trial_id, "attempt": running.attempt,
                           "file": name, "offset": tail.sent, "data": base64.b64encode(data).decode()})
                tail.sent += len(data)
                budget -= len(data)

    def reap(self) -> None:
        """Tell the end of each trial whose process exited, its output sent first."""
        for pid, running in list(self.attempts.items()):
            returncode = running.poll()
            if returncode is None:
                continue
            self.finish(pid, running, returncode)

    def finish(self, pid: int, running: _Attempt, returncode: int) -> None:
        del self.attempts[pid]
        try:  # what it left in its group goes with it; the watchdog ends what left the group
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.window > 0 and running.process is not None:   # for a later agent that adopts it
            _write_atomically(status_path(running.trial_dir, running.attempt), json.dumps({"returncode": returncode}))
        self.tell_watchdog(f"-{pid}")
        self.send_output(running, to_end=True)
        for tail in running.tails.values():
            tail.close()
        ended: Dict[str, Any] = {"event": "exited", "trial_id": running.trial_id, "attempt": running.attempt}
        if returncode < 0:
            self.read_watchdog()
            ended["signum"] = -returncode
            ended["failed"] = pid in self.over_limit
        else:
            ended["exit_code"] = returncode
        self.over_limit.discard(pid)
        try:
            with open(os.path.join(running.trial_dir, PREEMPTING_FILE), "rb") as marker:
                ended["preempting"] = marker.read(64).decode(errors="replace")
        except OSError:
            pass
        self.emit(ended)

    def tell_watchdog(self, line: str) -> None:
        stdin = self.watchdog.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write((line + "\n").encode())
            stdin.flush()
        except OSError:
            self.error("the watchdog is gone: trials' escaped processes may outlive them")

    def read_watchdog(self) -> bool:
        """The pgids the watchdog killed over their process limit (it says so before it kills);
        False when its stdout ended (it died)."""
        assert self.watchdog.stdout is not None
        try:
            data = os.read(self.watchdog.stdout.fileno(), 65536)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            return False
        text = data.decode(errors="replace")
        for words in map(str.split, text.splitlines()):
            if len(words) == 2 and words[0] == _OVER_LIMIT and words[1].isdigit():
                self.over_limit.add(int(words[1]))
        return True

    # ---- the loop --------------------------------------------------------------------
    def run(self) -> int:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)  # a full pipe is a wake-up already
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake the select
        stdin = sys.stdin.fileno()
        assert self.watchdog.stdout is not None
        watchdog_out = self.watchdog.stdout.fileno()
        watched = [stdin, wake_read, watchdog_out]
        pending, skipping = b"", False
        if self.kept:
            self.emit(self.kept)
        while True:
            timeout = POLL_INTERVAL if self.attempts else None
            ready, _, _ = select.select(watched, [], [], timeout)
            if wake_read in ready:
                try:
                    os.read(wake_read, 4096)
                except BlockingIOError:
                    pass
            if watchdog_out in ready and not self.read_watchdog():
                watched.remove(watchdog_out)
                self.error("the watchdog ended: trials' escaped processes may outlive them")
            if stdin in ready:
                chunk = os.read(stdin, 65536)
                if not chunk:  # the manager's connection is gone: the watchdog ends every trial
                    return self.keep_trials() if self.window > 0 else 0
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if skipping:
                        skipping = False
                        continue
                    if len(line) > MAX_COMMAND_BYTES:
                        self.error(f"a command line over {MAX_COMMAND_BYTES} bytes was skipped")
                    elif line.strip() and not self.handle(line):
                        return self.stop()
                if len(pending) > MAX_COMMAND_BYTES:
                    if not skipping:
                        self.error(f"a command line over {MAX_COMMAND_BYTES} bytes was skipped")
                    pending, skipping = b"", True
            for running in list(self.attempts.values()):
                self.send_output(running, to_end=False)
            self.reap()
            if not self.connected:  # nobody hears this agent any more: the watchdog ends its trials
                return self.keep_trials() if self.window > 0 else 0

    def stop(self) -> int:
        """The clean end: every trial killed, its end told; the watchdog ended."""
        for pid in list(self.attempts):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid, running in list(self.attempts.items()):
            if running.process is not None:
                self.finish(pid, running, running.process.wait())
                continue
            while (code := running.poll()) is None:   # adopted: its old agent writes its end
                time.sleep(POLL_INTERVAL)
            self.finish(pid, running, code)
        self.tell_watchdog("stop")
        if self.watchdog.stdin is not None:
            self.watchdog.stdin.close()
        self.watchdog.wait()
        self.emit({"event": "stopped"})
        return 0


def _spawn(argv: List[str], command: str, cwd: str, env: Dict[str, str], stdout: int,
           stderr: int) -> subprocess.Popen:
    """The trial in its own session (``_process.spawn_trial``'s rule): ``argv`` as the
    manager split it; a program not found is the shell's "not found" and exit 127, as locally."""
    if not os.path.isdir(cwd):
        raise FileNotFoundError(errnos.ENOENT, "the trial's code directory is not on this host", cwd)

    def spawn(words: List[str]) -> subprocess.Popen:
        return subprocess.Popen(words, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                start_new_session=True)

    if not argv:
        raise ValueError("no command to run")
    try:
        return spawn(argv)
    except FileNotFoundError:
        return spawn(["/bin/sh", "-c", command or " ".join(argv)])


def _write_parameters(path: str, parameters: Optional[str]) -> None:
    """parameter.json at the attempt's first run on this host; kept after (a trial's
    parameters never change)."""
    if parameters is None:
        return
    try:
        with open(path, "rb") as file:
            json.loads(file.read())
        return
    except (OSError, ValueError):  # none yet, or torn (its writer died): written now
        pass
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as file:
        file.write(str(parameters))
    os.replace(partial, path)


def _arguments(argv: List[str]) -> Dict[str, str]:
    here = os.path.dirname(os.path.abspath(__file__))
    found = {"--runtime": here, "--watchdog": os.path.join(here, "watchdog.py"), "--session": os.urandom(8).hex(),
             "--window": "0", "--state": ""}
    words = list(argv)
    while words:
        name = words.pop(0)
        if name not in found or not words:
            sys.stderr.write(f"host_agent.py: usage: [--runtime DIR] [--watchdog PATH] [--session ID] "
                             f"[--window SECONDS --state DIR], "
                             f"not {name!r}\n")
            sys.exit(2)
        found[name] = words.pop(0)
    if not os.path.isfile(found["--watchdog"]):
        sys.stderr.write(f"host_agent.py: no watchdog at {found['--watchdog']} (--watchdog)\n")
        sys.exit(2)
    return found


def main() -> int:
    # SIGINT keeps its default: an ignored signal stays ignored across exec, in every trial.
    options = _arguments(sys.argv[1:])
    return Agent(options["--runtime"], options["--watchdog"], options["--session"], float(options["--window"]),
                 options["--state"]).run()


if __name__ == "__main__":
    sys.exit(main())

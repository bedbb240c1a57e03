"""The manager's side of a host agent (``host_agent.py``): commands to it, its events to the
runner, its trials' output into the local trial folders, over any pair of asyncio-style
streams (an asyncssh process's, or a local subprocess's pipes)::

    client = AgentClient(process.stdout, process.stdin, host="gpu1", folder_of=files.folder_of, events=runner)
    client.start()
    await client.launch(HostLaunch(trial_id, attempt, command, cwd, trial_dir,
                                   env=host_trial_environment(env, report_port=port, ...)))
    client.signal(trial_id, signal.SIGTERM)
    await client.stop(timeout=10.0)

Each attempt is told, in the contract's order (``base.TrialEvents``): ``trial_started``, then
exactly one of ``trial_exited`` or ``trial_lost``; or ``trial_launch_failed`` alone. Its output
(stdout, stderr, trial.log, metrics.jsonl) is appended to the local ``trials/<id>/`` files as it
arrives, all of it before its end is told, so ``TrialFiles`` read them as a local trial's. When
the agent's stream ends without its ``stopped`` (the connection dropped, the agent died), every
attempt still running is lost, and one not yet started failed for a system reason (it waits).

With a reattach window the agent first tells what the run before left on the host (``kept``,
``KeptOnHost``); ``adopt`` takes one of those attempts over (its end told as if launched here),
``release`` lets the old watchdog go, and ``let_go`` closes the streams without telling any end
(the agent keeps its trials for the window).

The host is outside: each line, chunk and field is bounded and checked; what does not fit is
logged and skipped, and events of attempts this client did not launch are ignored.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from expmgr import trial as trial_api
from expmgr.layout import TrialFolder
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._output_copies import OutputCopies
from expmgr.training._process import command_argv, trial_environment
from expmgr.training.base import is_system_error
from expmgr.training.remote.host_agent import MAX_CHUNK, MAX_EVENT_BYTES, SIGNALS, STREAMED_FILES

_READ_SIZE = 65536
_SIGNAL_NAMES = {int(number): name for name, number in SIGNALS.items()}
_MAX_PID = 2**22  # Linux's highest pid_max
_MAX_SIGNAL = 64
_MAX_TIME = 2.0**40


class AgentReader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class AgentWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> Any: ...


class AttemptEvents(Protocol):
    """What the client tells of each attempt: ``base.TrialEvents``' attempt half."""

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *,
                      pid_started: float | None = None, host: str | None = None) -> None: ...

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None, *,
                     failed: bool = False) -> None: ...

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None: ...

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None: ...


@dataclass(frozen=True)
class HostLaunch:
    """One attempt as the agent runs it; paths are the host's."""

    trial_id: str
    attempt: int
    command: str
    cwd: str
    """The trial code's folder on the host (uploaded once per experiment)."""
    trial_dir: str
    """The trial's folder on the host (kept across its attempts there)."""
    env: dict[str, str] = field(default_factory=dict)
    """Set over the host's own environment (``host_trial_environment``)."""
    unset: tuple[str, ...] = (trial_api.ENV_MANAGER_SOCKET,)
    """Variables of the host's environment the trial must not have (a manager's report
    socket: a host's trials report through its relay alone)."""
    parameters: str | None = None
    """parameter.json's text, written there at the trial's first attempt on that host."""
    process_limit: int = 0


@dataclass(frozen=True)
class KeptProcess:
    """An attempt of the run before still running on the host, as its new agent found it."""

    pid: int
    started: float
    trial_id: str
    attempt: int
    gpus: tuple[int, ...] = ()


@dataclass
class KeptOnHost:
    """What the run before left on a host (the agent's ``kept`` event), for a resume to adopt."""

    session: str | None = None
    gone_at: float | None = None
    window_ended: frozenset[int] = frozenset()
    processes: tuple[KeptProcess, ...] = ()
    statuses: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def of_event(cls, event: dict[str, Any]) -> KeptOnHost:
        """Checked: what does not fit is left out."""
        session = event.get("session")
        gone_at = event.get("gone_at")
        processes = []
        for each in event.get("processes") or ():
            if not isinstance(each, dict):
                continue
            pid, started = _bounded(each.get("pid"), 1, _MAX_PID), each.get("started")
            trial_id, attempt = each.get("trial_id"), _bounded(each.get("attempt"), 0, 2**31)
            if pid is None or not isinstance(started, (int, float)) or not isinstance(trial_id, str) or attempt is None:
                continue
            gpus = tuple(index for index in each.get("gpus") or () if _bounded(index, 0, 1023) is not None)
            processes.append(KeptProcess(pid, float(started), trial_id, attempt, gpus))
        statuses = {}
        for each in event.get("statuses") or ():
            if isinstance(each, list) and len(each) == 3 and isinstance(each[0], str) \
                    and _bounded(each[1], 0, 2**31) is not None and _bounded(each[2], -_MAX_SIGNAL, 255) is not None:
                statuses[(each[0], each[1])] = each[2]
        return cls(session=session if isinstance(session, str) else None,
                   gone_at=float(gone_at) if isinstance(gone_at, (int, float)) and 0 < gone_at < _MAX_TIME else None,
                   window_ended=frozenset(pid for pid in event.get("window_ended") or ()
                                          if _bounded(pid, 1, _MAX_PID) is not None),
                   processes=tuple(processes), statuses=statuses)


def host_trial_environment(env: dict[str, str], *, report_port: int, trial_dir: str,
                           code_directory: str) -> dict[str, str]:
    """A trial's variables on a host: those ``env`` gives it (ids, token, URL prefix), the
    local rules (``trial_environment``: no server token, Python unbuffered unless said), its
    folder there, NNI's names, and its reports sent to ``report_port`` on the host's own
    loopback (forwarded over the connection to the manager's server). The agent adds the
    trial API's folder to PYTHONPATH and the watchdog's marker."""
    own = {**trial_environment(env), trial_api.ENV_TRIAL_DIR: trial_dir}
    own.pop(trial_api.ENV_MANAGER_SOCKET, None)
    return {**own, **trial_api.nni_environment(own, code_directory),
            trial_api.ENV_MANAGER_HOST: "127.0.0.1", trial_api.ENV_MANAGER_PORT: str(report_port)}


class _Attempt:
    """An attempt as the client follows it, and its local files being written."""

    def __init__(self, trial_id: str, attempt: int, copies: OutputCopies) -> None:
        self.trial_id = trial_id
        self.attempt = attempt
        self.started = False
        self.copies = copies

    def close(self) -> None:
        self.copies.close()


class AgentClient:
    """See the module docstring. ``folder_of(trial_id)``: the trial's local folder."""

    def __init__(self, reader: AgentReader, writer: AgentWriter, *, host: str,
                 folder_of: Callable[[str], TrialFolder], events: AttemptEvents,
                 log_limits: RotationLimits = UNBOUNDED, log: logging.Logger | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self._host = host
        self._folder_of = folder_of
        self._log_limits = log_limits
        self._events = events
        self._log = log or logging.getLogger("nni.training.remote")
        self._attempts: dict[tuple[str, int], _Attempt] = {}
        self._reading: asyncio.Task | None = None
        self._stopped = False
        self._closed = False
        self._gone_reason = ""
        self.kept: KeptOnHost | None = None
        """What the run before left on the host (the agent's first event, with a window)."""
        self._kept_told = asyncio.Event()

    def start(self) -> None:
        """Read the agent's events from now on (on the running loop)."""
        if self._reading is None:
            self._reading = asyncio.get_running_loop().create_task(self._read_events())

    @property
    def connected(self) -> bool:
        """False once the agent's stream ended: launch nothing more here."""
        return not self._closed

    def running(self) -> list[tuple[str, int]]:
        """(trial id, attempt) of the attempts launched here and not ended."""
        return list(self._attempts)

    async def launch(self, launch: HostLaunch) -> None:
        """Ask the agent to start the attempt; what becomes of it is told through ``events``.
        An attempt launched after the agent's end is told ``trial_launch_failed`` (system)."""
        key = (launch.trial_id, launch.attempt)
        if key in self._attempts:
            raise ValueError(f"attempt {launch.attempt} of trial {launch.trial_id} is already running on {self._host}")
        self._attempts[key] = _Attempt(launch.trial_id, launch.attempt, OutputCopies(
            self._folder_of(launch.trial_id), self._log_limits,
            warn=lambda message: self._log.warning("host %s: trial %s: %s", self._host, launch.trial_id, message)))
        if self._closed:
            self._end_unreachable(self._attempts.pop(key))
            return
        await self._send({"op": "launch", "trial_id": launch.trial_id, "attempt": launch.attempt,
                          "command": launch.command, "argv": list(command_argv(launch.command)), "cwd": launch.cwd,
                          "trial_dir": launch.trial_dir, "env": launch.env, "unset": list(launch.unset),
                          "parameters": launch.parameters, "process_limit": launch.process_limit})

    def adopt(self, trial_id: str, attempt: int, pid: int, pid_started: float, trial_dir: str) -> None:
        """Take over an attempt the run before left running (or ended meanwhile) on the host: it
        is followed as one launched here and started; its files are sent from where the local
        copies end (their sizes: what the manager had when the connection went)."""
        folder = self._folder_of(trial_id)
        offsets = {}
        for name in STREAMED_FILES:
            try:
                offsets[name] = (folder.root / name).stat().st_size
            except OSError:
                offsets[name] = 0
        running = _Attempt(trial_id, attempt, OutputCopies(
            folder, self._log_limits,
            warn=lambda message: self._log.warning("host %s: trial %s: %s", self._host, trial_id, message)))
        running.started = True
        self._attempts[(trial_id, attempt)] = running
        if self._closed:
            self._end_unreachable(self._attempts.pop((trial_id, attempt)))
            return
        self._write({"op": "adopt", "trial_id": trial_id, "attempt": attempt, "pid": pid, "pid_started": pid_started,
                     "trial_dir": trial_dir, "offsets": offsets})

    def release(self, adopted: list[int]) -> None:
        """The run before's watchdog on the host ends the trials not in ``adopted`` and exits."""
        if not self._closed:
            self._write({"op": "release", "adopted": list(adopted)})

    def let_go(self) -> None:
        """Close the streams without ``stop`` and without telling any attempt's end: with a
        window the agent keeps its trials for a resume (``expctl stop --keep-trials``)."""
        reading, self._reading = self._reading, None
        if reading is not None and not reading.done():
            reading.cancel()
        self._closed, self._gone_reason = True, "let go for a resume"
        for running in list(self._attempts.values()):
            self._end(running)
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def signal(self, trial_id: str, signum: int) -> bool:
        """Send ``signum`` (SIGTERM, SIGKILL, SIGUSR1, SIGINT) to the trial's group on the host;
        False if no attempt of it runs there."""
        name = _SIGNAL_NAMES.get(int(signum))
        if name is None:
            raise ValueError(f"signal {signum} cannot be sent to a trial on a host (only {', '.join(SIGNALS)})")
        for running in self._attempts.values():
            if running.trial_id == trial_id and running.started and not self._closed:
                self._write({"op": "signal", "trial_id": trial_id, "attempt": running.attempt, "signal": name})
                return True
        return False

    async def stop(self, timeout: float) -> None:
        """The clean end: the agent kills what still runs (each end told, its output in), ends
        its watchdog and exits; waits up to ``timeout`` seconds, then closes the streams (the
        watchdog then ends what is left). Idempotent."""
        if not self._closed:
            try:
                await self._send({"op": "stop"})
            except (ConnectionError, OSError):
                pass
        if self._reading is not None:
            await asyncio.wait([self._reading], timeout=timeout)
        self.close()

    def close(self) -> None:
        """Stop reading and close the writer; attempts still running are lost. Idempotent."""
        reading, self._reading = self._reading, None
        if reading is not None and not reading.done():
            reading.cancel()
        self._gone("the connection to the host was closed")
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    async def wait_kept(self, timeout: float) -> KeptOnHost:
        """What the run before left on the host, once the agent told it (nothing, if its stream
        ended first or it did not tell within ``timeout`` seconds)."""
        try:
            await asyncio.wait_for(self._kept_told.wait(), timeout)
        except asyncio.TimeoutError:
            self._log.warning("host %s: its agent did not tell what the last run left there within %g s: "
                              "none of its trials is taken over", self._host, timeout)
        return self.kept or KeptOnHost()

    async def wait_closed(self) -> None:
        """Until the agent's stream ended (its attempts' ends all told)."""
        if self._reading is not None:
            await asyncio.shield(self._reading)

    # ---- commands --------------------------------------------------------------------
    def _write(self, command: dict[str, Any]) -> None:
        try:
            self._writer.write((json.dumps(command, separators=(",", ":")) + "\n").encode())
        except (ConnectionError, OSError, RuntimeError) as error:
            self._log.warning("host %s: cannot send %s: %s", self._host, command.get("op"), error)

    async def _send(self, command: dict[str, Any]) -> None:
        self._write(command)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as error:
            self._log.warning("host %s: cannot send %s: %s", self._host, command.get("op"), error)

    # ---- events ----------------------------------------------------------------------
    async def _read_events(self) -> None:
        reason = "the host's agent ended without being stopped (connection lost, or the agent died)"
        pending, skipping = b"", False
        try:
            while True:
                chunk = await self._reader.read(_READ_SIZE)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if skipping:
                        skipping = False
                    elif len(line) > MAX_EVENT_BYTES:
                        self._log.warning("host %s: an event line of %d bytes skipped (at most %d)",
                                          self._host, len(line), MAX_EVENT_BYTES)
                    elif line.strip():
                        self._handle_line(line)
                if len(pending) > MAX_EVENT_BYTES:
                    if not skipping:
                        self._log.warning("host %s: an event line over %d bytes skipped", self._host, MAX_EVENT_BYTES)
                    pending, skipping = b"", True
        except (ConnectionError, OSError) as error:
            reason = f"the connection to the host broke: {error}"
        finally:
            # After its "stopped" nothing of it runs; an attempt still here was never told to it.
            self._gone("the host's agent was stopped" if self._stopped else reason)

    def _handle_line(self, line: bytes) -> None:
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                raise ValueError("not an event object")
            self._handle(event)
        except (ValueError, TypeError, KeyError) as error:
            self._log.warning("host %s: a malformed event skipped (%s): %.200r", self._host, error, line)
        except Exception:  # a listener's fault must not end the reading: the others' ends would be lost
            self._log.exception("host %s: handling an event failed: %.200r", self._host, line)

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "error":
            self._log.warning("host %s: agent: %s", self._host, str(event.get("message"))[:4096])
            return
        if kind == "stopped":
            self._stopped = True
            return
        if kind == "kept":
            if self.kept is None:
                self.kept = KeptOnHost.of_event(event)
                self._kept_told.set()
            return
        trial_id, attempt = event.get("trial_id"), event.get("attempt")
        running = self._attempts.get((trial_id, attempt)) if isinstance(trial_id, str) and \
            isinstance(attempt, int) else None
        if running is None:
            self._log.warning("host %s: %s event of an attempt not running here (%.64r, %.16r) ignored",
                              self._host, kind[:32], trial_id, attempt)
            return
        if kind == "output":
            self._output(running, event)
        elif kind == "started" and not running.started:
            running.started = True
            started = event.get("pid_started")
            self._events.trial_started(running.trial_id, running.attempt, _bounded(event.get("pid"), 1, _MAX_PID),
                                       pid_started=float(started) if isinstance(started, (int, float))
                                       and not isinstance(started, bool) and 0 < started < _MAX_TIME else None,
                                       host=self._host)
        elif kind == "launch_failed" and not running.started:
            self._end(running)
            error = OSError(_bounded(event.get("errno"), 0, 4095) or 0, "")
            system = is_system_error(error, in_trial_folder=bool(event.get("in_trial_folder")))
            self._events.trial_launch_failed(running.trial_id, running.attempt,
                                             str(event.get("reason"))[:4096], system=system)
        elif kind == "exited" and running.started:
            signum, exit_code = _bounded(event.get("signum"), 1, _MAX_SIGNAL), _bounded(event.get("exit_code"), 0, 255)
            if (signum is None) == (exit_code is None):
                raise ValueError("an exited event needs an exit_code (0-255) or a signum (1-64)")
            self._end(running)
            running.copies.write_preempting(event.get("preempting"))
            self._events.trial_exited(running.trial_id, running.attempt, exit_code, signum,
                                      failed=signum is not None and event.get("failed") is True)
        else:
            self._log.warning("host %s: %s event out of order for attempt %d of trial %s ignored",
                              self._host, kind[:32], running.attempt, running.trial_id)

    def _output(self, running: _Attempt, event: dict[str, Any]) -> None:
        name, offset, data = event.get("file"), event.get("offset"), event.get("data")
        if name not in STREAMED_FILES or not isinstance(offset, int) or not isinstance(data, str) \
                or len(data) > 4 * (MAX_CHUNK // 3 + 1):
            raise ValueError("an output event needs a known file, an offset and at most a chunk of data")
        try:
            chunk = base64.b64decode(data, validate=True)
        except binascii.Error as error:
            raise ValueError(f"output data is not base64: {error}") from None
        running.copies.write(name, offset, chunk)

    def _end(self, running: _Attempt) -> None:
        self._attempts.pop((running.trial_id, running.attempt), None)
        running.close()

    def _gone(self, reason: str) -> None:
        """The agent's stream ended: nothing more comes from it."""
        if self._closed:
            return
        self._closed = True
        self._gone_reason = reason
        self._kept_told.set()
        for running in list(self._attempts.values()):
            try:
                self._end_unreachable(running)
            except Exception:  # one listener's fault must not keep the others' ends untold
                self._log.exception("host %s: telling the end of trial %s failed", self._host, running.trial_id)

    def _end_unreachable(self, running: _Attempt) -> None:
        self._end(running)
        reason = f"host {self._host}: {self._gone_reason}"
        if running.started:
            self._events.trial_lost(running.trial_id, running.attempt, reason)
        else:  # it may have started there; the watchdog ended it: it never ran for us
            self._events.trial_launch_failed(running.trial_id, running.attempt, reason, system=True)


def _bounded(value: object, low: int, high: int) -> int | None:
    """``value`` if it is an int from ``low`` to ``high``, else None (from the host: checked)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high else None


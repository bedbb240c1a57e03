"""The manager's side of warm starts: one template process (``template.py``) per interpreter,
code directory, preload list and Python settings, started for the first Python trial that
needs it; each trial forked from it. Anything that cannot start warm safely starts cold,
with one log line::

    starter = WarmStarter(("numpy",), session, log, log_dir)
    trial = await starter.spawn(command, cwd, env, stdout_fd, stderr_fd, marker)
    if trial is None: ...start it cold...
    returncode = await trial.exited      # Popen's: -signum when signalled
    await starter.stop()
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from expmgr.training._process import kill_group
from expmgr.training.warm import template as _template
from expmgr.training.warm._command import PythonCommand, python_command

READY_TIMEOUT = 300.0
"""Seconds a template may take to import its preload list; slower, trials start cold."""
MARKER_ROOM = 256
"""Bytes of the template's marker value, which each child overwrites with its trial's."""
_TEMPLATE_ENV_PREFIXES = ("PYTHON", "LANG", "LC_")
"""The environment a template is specific to (it shapes the interpreter itself); the rest is each
trial's own, set in the child before its code runs."""
_PER_TRIAL_PREFIXES = ("EXPMGR_", "NNI_")


@dataclass(eq=False)
class WarmTrial:
    """A trial forked by a template: its pid (it leads its own session) and its end."""

    pid: int
    exited: asyncio.Future = field(repr=False)
    """Set to the return code, as ``Popen.returncode`` gives it."""


class _Template:
    """One template process and its control socket."""

    def __init__(self, command: PythonCommand, preload: tuple[str, ...], cwd: str, env: dict[str, str],
                 marker: str, stderr_path: Path) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {name: value for name, value in env.items() if not name.startswith(_PER_TRIAL_PREFIXES)}
        env["EXPMGR_TRIAL_MARKER"] = marker.ljust(MARKER_ROOM, ".")
        env["CUDA_VISIBLE_DEVICES"] = ""   # no preload takes a GPU; each trial is given its own at fork
        self._given_env = env
        self.wrapper_changes: dict[str, str | None] = {}
        """What the interpreter's start changed in the environment it was given (a wrapper such
        as pyenv's shim adds to PATH): a cold trial gets the same changes, so each child does."""
        with open(stderr_path, "ab") as stderr:
            self.process = subprocess.Popen(
                [command.argv[0], "-c", _template.BOOTSTRAP, _template.__file__, str(theirs.fileno()), *preload],
                executable=command.interpreter, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        ours.setblocking(False)
        self._socket = ours
        self.ready: asyncio.Future = loop.create_future()
        self._replies: dict[int, asyncio.Future] = {}
        self._running: dict[int, WarmTrial] = {}
        self._next_id = 0
        self.closed = False
        loop.add_reader(ours.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        while True:
            try:
                data = self._socket.recv(1 << 20)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._on_closed()
                return
            self._on_message(json.loads(data))

    def _on_message(self, message: dict) -> None:
        op = message.get("op")
        if op == "ready":
            started = message.get("environ", {})
            changes: dict[str, str | None] = {name: value for name, value in started.items()
                                              if self._given_env.get(name) != value}
            changes.update((name, None) for name in self._given_env if name not in started)
            changes.pop("EXPMGR_TRIAL_MARKER", None)
            self.wrapper_changes = changes
            if not self.ready.done():
                failed = "; ".join(f"{name}: {error}" for name, error in message["failed"])
                self.ready.set_result(f"a preload failed ({failed})" if failed else message["unsafe"])
        elif op in ("forked", "refused"):
            reply = self._replies.pop(message["id"], None)
            if op == "forked":
                # Known at once: its "exit" may be the very next message read.
                trial = WarmTrial(int(message["pid"]), self._loop.create_future())
                self._running[trial.pid] = trial
            if reply is not None and not reply.done():
                reply.set_result(trial if op == "forked" else str(message["reason"]))
        elif op == "exit":
            ended = self._running.pop(message["pid"], None)
            if ended is not None and not ended.exited.done():
                ended.exited.set_result(int(message["returncode"]))

    def _on_closed(self) -> None:
        """The template is gone: nothing more can be forked, and no exit status will come for
        its running trials, which are ended (as a lost process: signal 9)."""
        if self.closed:
            return
        self.closed = True
        self._loop.remove_reader(self._socket.fileno())
        self._socket.close()
        if not self.ready.done():
            self.ready.set_result(f"the template exited ({self.process.poll()})")
        for reply in self._replies.values():
            if not reply.done():
                reply.set_result("the template exited")
        for trial in self._running.values():
            kill_group(trial.pid, signal.SIGKILL)
            if not trial.exited.done():
                trial.exited.set_result(-signal.SIGKILL)
        self._replies.clear()
        self._running.clear()

    async def fork(self, argv: tuple[str, ...], main: tuple[str, str], cwd: str, env: dict[str, str],
                   marker: str, stdout: int, stderr: int, learn: str | None = None) -> WarmTrial | str:
        """The forked trial, or why the template refused it."""
        if self.closed:
            return "the template exited"
        self._next_id += 1
        request_id = self._next_id
        reply = self._loop.create_future()
        self._replies[request_id] = reply
        env = {**env, **{name: value for name, value in self.wrapper_changes.items() if value is not None}}
        for name in [name for name, value in self.wrapper_changes.items() if value is None]:
            env.pop(name, None)
        message = json.dumps({"op": "fork", "id": request_id, "argv": list(argv), "main": list(main),
                              "cwd": cwd, "env": env, "marker": marker, "learn": learn}).encode()
        try:
            socket.send_fds(self._socket, [message], [stdout, stderr])
        except OSError as error:
            self._replies.pop(request_id, None)
            return f"the template cannot be reached ({error})"
        answer: WarmTrial | str = await reply
        return answer

    def retire(self) -> None:
        """No more trials: it exits once its running ones have (their ends still come)."""
        if not self.closed:
            try:
                self._socket.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    async def close(self) -> None:
        """Let it exit (it does once its children have), or kill it after a while."""
        if not self.closed:
            try:
                self._socket.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        try:
            await asyncio.wait_for(self._loop.run_in_executor(None, self.process.wait), timeout=5)
        except asyncio.TimeoutError:
            self.process.kill()
            await self._loop.run_in_executor(None, self.process.wait)
        self._on_closed()


class WarmStarter:
    """Warm starts for one training service; see the module docstring."""

    def __init__(self, preload: tuple[str, ...], session: str, log: logging.Logger, log_dir: Path,
                 learn: bool = False) -> None:
        self._preload = preload
        self._learned: tuple[str, ...] | None = None if learn else ()
        """With ``learn`` (``trialWarmStart: auto``), the modules the first trial to end well
        imported (standard library and site-packages): preloaded, but a failure is ignored."""
        self._learning = False
        self._log_dir = log_dir
        self._retired: list[_Template] = []
        self._started_pids: list[int] = []
        self._session = session
        self._log = log
        self._stderr_path = log_dir / "warm-template.log"
        self._templates: dict[tuple, _Template] = {}
        self._cold: set[tuple] = set()
        """Keys whose template could not be used: their trials start cold (said once)."""
        self._starting: dict[tuple, asyncio.Future] = {}
        self._closing: set[asyncio.Task] = set()
        self._prestarting: asyncio.Task | None = None

    def template_pids(self) -> list[int]:
        """Every template that became usable so far, in turn (the last is the one in use)."""
        return list(self._started_pids)

    async def spawn(self, command: str, cwd: str, env: dict[str, str], stdout: int, stderr: int,
                    marker: str) -> WarmTrial | None:
        """The trial forked from its template, or None: start it cold."""
        python = python_command(command, env, cwd)
        if python is None:
            return None
        learned = self._learned or ()
        key = self._key(python, cwd, env)
        if key in self._cold:
            return None
        template = await self._template(key, python, cwd, env)
        if template is None:
            if learned and key in self._cold:   # the learned modules made it unusable: without them
                self._cold.discard(key)
                self._learned = ()
                return await self.spawn(command, cwd, env, stdout, stderr, marker)
            return None
        learn = None
        if self._learned is None and not self._learning:
            self._learning = True
            learn = str(self._log_dir / f"warm-learned-{marker.replace('/', '-')}.json")
        forked = await template.fork(python.argv, python.main, cwd, env, marker, stdout, stderr, learn)
        if isinstance(forked, str):
            self._learning = False
            self._give_up(key, forked)
            return None
        if learn is not None:
            forked.exited.add_done_callback(lambda exited: self._learn_from(Path(learn), exited))
        return forked

    def prestart(self, command: str, cwd: str, env: dict[str, str]) -> None:
        """Start the template the first trial of ``command`` will need now, beside the rest of
        the experiment's start, rather than when that trial comes."""
        python = python_command(command, env, cwd)
        if python is None or self._prestarting is not None:
            return
        key = self._key(python, cwd, env)
        self._prestarting = asyncio.get_running_loop().create_task(self._template(key, python, cwd, env))

    def _key(self, python: PythonCommand, cwd: str, env: dict[str, str]) -> tuple:
        """What a template is specific to: the interpreter, the code directory, the preload list
        and the environment that shapes the interpreter."""
        preload = self._preload + tuple(f"?{name}" for name in self._learned or ())
        return (python.interpreter, os.path.realpath(cwd), preload,
                tuple(sorted((name, value) for name, value in env.items() if name.startswith(_TEMPLATE_ENV_PREFIXES))))

    def _learn_from(self, path: Path, exited: asyncio.Future) -> None:
        """The first trial to succeed has ended: what it imported is preloaded from now on (by a
        new template; the current one is retired)."""
        self._learning = False
        try:
            names = json.loads(path.read_text()) if exited.result() == 0 else None
            path.unlink()
        except (OSError, ValueError, asyncio.CancelledError):
            names = None
        if not isinstance(names, list) or self._learned is not None:
            return   # not ended well: the next trial is asked
        self._learned = tuple(name for name in names if isinstance(name, str))
        if not self._learned:
            return
        self._log.info("warm start: %d modules the first trial imported are preloaded for the next ones (%s%s)",
                       len(self._learned), ", ".join(self._learned[:5]), ", ..." if len(self._learned) > 5 else "")
        for template in self._templates.values():
            template.retire()
            self._retired.append(template)
        self._templates.clear()

    async def _template(self, key: tuple, python: PythonCommand, cwd: str, env: dict[str, str]) -> _Template | None:
        template = self._templates.get(key)
        if template is not None and not template.closed:
            return template
        if template is not None:   # it exited by itself (killed?): a new one is started
            self._log.warning("the warm-start template of %s exited (%s): starting another", key[0],
                              template.process.poll())
            self._close_later(self._templates.pop(key))
        starting = self._starting.get(key)
        if starting is not None:
            return await asyncio.shield(starting)
        starting = asyncio.get_running_loop().create_future()
        self._starting[key] = starting
        try:
            template = await self._start(key, python, cwd, env)
        except BaseException:
            starting.set_result(None)   # the trials waiting for it start cold
            raise
        finally:
            self._starting.pop(key, None)
        starting.set_result(template)
        return template

    async def _start(self, key: tuple, python: PythonCommand, cwd: str, env: dict[str, str]) -> _Template | None:
        marker = f"{self._session}/warm-template/{len(self._templates) + len(self._cold) + len(self._retired)}/"
        try:
            template = _Template(python, key[2], cwd, env, marker, self._stderr_path)
        except OSError as error:
            self._give_up(key, f"the template cannot be started ({error})")
            return None
        try:
            reason = await asyncio.wait_for(asyncio.shield(template.ready), READY_TIMEOUT)
        except asyncio.TimeoutError:
            reason = f"its preload took over {READY_TIMEOUT:g} s"
        except BaseException:   # cancelled: the template is not left behind
            self._close_later(template)
            raise
        if reason is not None:
            await template.close()
            self._give_up(key, reason)
            return None
        self._templates[key] = template
        self._started_pids.append(template.process.pid)
        return template

    def _give_up(self, key: tuple, reason: str) -> None:
        self._cold.add(key)
        if any(name.startswith("?") for name in key[2]):
            self._log.warning("warm start: the modules learned from the first trial cannot be preloaded, trials "
                              "are forked without them: %s", reason)
        else:
            self._log.warning("warm start not used, trials of %s start cold: %s", key[0], reason)
        template = self._templates.pop(key, None)
        if template is not None:
            self._close_later(template)

    def _close_later(self, template: _Template) -> None:
        closing = asyncio.get_running_loop().create_task(template.close())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def stop(self) -> None:
        if self._prestarting is not None:   # a template still starting is not left behind
            self._prestarting.cancel()
            await asyncio.gather(self._prestarting, return_exceptions=True)
        templates = list(self._templates.values()) + self._retired
        self._templates.clear()
        self._retired.clear()
        await asyncio.gather(*(template.close() for template in templates), *self._closing)

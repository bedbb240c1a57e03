"""The manager's end of the dispatcher channel: starts ``python -m expmgr.dispatcher``
and sends it requests, each answered in order. It implements the engine's ``Dispatcher``
protocol: typed calls whose answers are ``answers``' values, the frames its own business::

    client = DispatcherClient(paths.dispatcher_log, "info")
    await client.start()
    answer = await client.generate(0)          # Generated | NoMoreTrials | TunerWaits
    await client.stop()
"""
from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePath
from typing import Any, cast

from expmgr.dispatcher.answers import (Assessment, DispatcherError, GenerateAnswer, Generated, NoMoreTrials,
                                       TunerWaits)
from expmgr.dispatcher.protocol import HEADER_SIZE, ProtocolError, chunks, decode_body, decode_length, encode_frame
from expmgr.logreader import LogFile, RefusedFile, last_bytes
from expmgr.rotation import UNBOUNDED, RotationLimits

_TAIL_BYTES = 8000


class DispatcherClient:
    """One dispatcher process and its channel; see the module docstring."""

    def __init__(self, log_file: Path, log_level: str, log_limits: RotationLimits = UNBOUNDED) -> None:
        self._log_file = log_file
        self._log_level = log_level
        self._log_limits = log_limits
        self._process: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._reader_task: asyncio.Task | None = None
        self._failure: DispatcherError | None = None
        self._stopping = False
        self.exited = asyncio.Event()
        self.refusals: list[str] = []
        """Frames the dispatcher refused without ending (``"fatal": false``), in order."""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def failure(self) -> DispatcherError | None:
        """Why the dispatcher ended before it was asked to, if it did."""
        return self._failure

    async def start(self) -> None:
        """Start the process (its imports go on while the caller does other work); a second
        call does nothing, so the manager may start it early and the runner as ever."""
        if self._process is not None:
            return
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_file, "ab") as log:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "expmgr.dispatcher",
                "--log-file", str(self._log_file), "--log-level", self._log_level,
                "--log-limits", self._log_limits.as_env(),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                # Its own session: a Ctrl+C at the terminal is the manager's to handle;
                # the dispatcher ends when the manager closes the channel.
                start_new_session=True,
            )
        self._reader_task = asyncio.get_running_loop().create_task(self._read_replies())

    # -- the typed calls (expmgr.engine.dispatching.Dispatcher) ----------------------

    async def initialize(self, search_space: dict[str, Any] | None, tuner: dict[str, Any] | None,
                         assessor: dict[str, Any] | None) -> None:
        """Build the tuner and the assessor (specs: name, className, codeDirectory, classArgs)."""
        await self.request("initialize", search_space=search_space, tuner=tuner, assessor=assessor)

    async def generate(self, parameter_id: int) -> GenerateAnswer:
        """The tuner's next trial, under ``parameter_id``."""
        reply = await self.request("generate", parameter_ids=[parameter_id])
        if not reply["parameters"]:
            return TunerWaits() if reply.get("waiting") else NoMoreTrials()
        entry = reply["parameters"][0]
        return Generated(entry["parameters"], entry.get("checkpoint_from"))

    async def assess(self, trial_id: str, history: Sequence[Any]) -> Assessment:
        """The assessor's verdict on a running trial, given its intermediate results so far
        (read now, as the request is written: the caller may keep adding to it)."""
        reply = await self.request("assess", trial_id=trial_id, history=history)
        return Assessment.STOP if reply.get("decision") == Assessment.STOP.value else Assessment.KEEP

    def tell_result(self, parameter_id: int, parameters: dict[str, Any], value: Any) -> None:
        """A trial's final result, for the tuner."""
        self.notify("report", parameter_id=parameter_id, parameters=parameters, value=value)

    def tell_end(self, parameter_id: int, trial_id: str, success: bool, *, assessor_only: bool = False) -> None:
        """A trial ended (``assessor_only``: one the tuner did not propose, told to the assessor alone)."""
        fields: dict[str, Any] = {"assessor_only": True} if assessor_only else {}
        self.notify("trial_end", parameter_id=parameter_id, trial_id=trial_id, success=success, **fields)

    async def update_search_space(self, search_space: dict[str, Any]) -> None:
        """The tuner takes a new search space; DispatcherError (not ``fatal``) if it refuses it."""
        await self.request("update_search_space", search_space=search_space)

    def replay_results(self, history: list[Any]) -> None:
        """Earlier results for a fresh tuner (a resume's replay): ``import_data`` at once."""
        self.notify_import(history)

    # -- frames --------------------------------------------------------------------

    async def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; raises DispatcherError if it failed."""
        if not self._running():
            raise self._failure or DispatcherError("the dispatcher is not running")
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._write({"id": request_id, "cmd": cmd, **fields})
        return await future

    def notify(self, cmd: str, **fields: Any) -> None:
        """Send a command that gets no reply unless it fails; a failure shows in ``failure``.
        Raises ProtocolError, sending nothing, for a message over the channel's limit."""
        if self._running():
            self._write({"id": next(self._ids), "cmd": cmd, "reply": False, **fields})

    def notify_import(self, records: list[Any]) -> None:
        """``import_data`` of ``records`` in frames of IMPORT_CHUNK_RECORDS, all at once
        (for a resume's replay; a running experiment's import uses ``import_chunks``)."""
        for chunk in chunks(records):
            self.notify("import_data", data=chunk)

    async def import_chunks(self, records: list[Any],
                            before_each: Callable[[Sequence[Any]], None] | None = None) -> int:
        """``import_data`` of ``records`` in frames of IMPORT_CHUNK_RECORDS (see ``import_frames``)."""
        return await self.import_frames(chunks(records), before_each)

    async def import_frames(self, frames: Iterable[Sequence[Any]],
                            before_each: Callable[[Sequence[Any]], None] | None = None) -> int:
        """``import_data`` of each of ``frames`` (lists of records), letting the loop run
        between frames and waiting while the channel is full; ``before_each(chunk)`` is
        called before a chunk is sent. Returns how many records were sent (fewer when the
        dispatcher ended meanwhile)."""
        sent = 0
        for chunk in frames:
            if not self._running():
                break
            if before_each is not None:
                before_each(chunk)
            self.notify("import_data", data=chunk)
            sent += len(chunk)
            await self._drain()
        return sent

    async def _drain(self) -> None:
        """Wait until the channel takes more (and give the loop a turn either way)."""
        stdin = self._process.stdin if self._process is not None else None
        try:
            if stdin is not None and not stdin.is_closing():
                await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the reader sees the end of the channel
        await asyncio.sleep(0)

    def _running(self) -> bool:
        return self._failure is None and not self._stopping and not self.exited.is_set()

    def _write(self, message: dict[str, Any]) -> None:
        """Write a frame now: frames go out in the order of calls and the dispatcher
        answers in that order, so a result sent before a trial's end is seen before it."""
        assert self._process is not None and self._process.stdin is not None, "start() first"
        try:
            self._process.stdin.write(encode_frame(message))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the reader sees the end of the channel and fails what is pending

    async def _read_replies(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        error: str | None = None
        try:
            while True:
                header = await stdout.readexactly(HEADER_SIZE)
                reply = decode_body(await stdout.readexactly(decode_length(header)))
                # A refusal of an unreadable frame has id None, which pop() does not find.
                future = self._pending.pop(cast(int, reply.get("id")), None)
                if "error" in reply:
                    if reply.get("fatal", True):   # else the dispatcher refused one frame and goes on
                        error = reply["error"]
                    else:
                        self.refusals.append(str(reply["error"]))
                    if future is not None and not future.done():
                        future.set_exception(DispatcherError(reply["error"], fatal=reply.get("fatal", True)))
                elif future is not None and not future.done():
                    future.set_result(reply)
        except asyncio.IncompleteReadError:
            pass
        except ProtocolError as unreadable:   # cannot happen with our dispatcher: it refuses such replies
            error = f"the dispatcher sent an unreadable reply: {unreadable}"
            self._process.kill()
        returncode = await self._process.wait()
        if not self._stopping and (error is not None or self._pending or returncode != 0):
            self._failure = DispatcherError(error or self._describe_exit(returncode))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._failure or DispatcherError("the dispatcher exited"))
        self._pending.clear()
        self.exited.set()

    def _describe_exit(self, returncode: int) -> str:
        how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
        try:  # the log may just have been rotated: its end may be in dispatcher.log.1
            tail = last_bytes(LogFile(self._log_file.parent, PurePath(self._log_file.name)), _TAIL_BYTES).decode(
                errors="replace")
        except (OSError, RefusedFile):
            tail = ""
        return f"the dispatcher {how}; the end of {self._log_file}:\n{tail}"

    async def stop(self) -> None:
        """Close the channel, which ends the dispatcher; idempotent."""
        process = self._process
        if process is None or self.exited.is_set():
            return
        self._stopping = True
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(self.exited.wait(), timeout=5)
        except asyncio.TimeoutError:
            process.kill()
            await self.exited.wait()


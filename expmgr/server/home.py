"""The experiments page: one record per experiment of a registry (state as a user should
see it, platform, best result, trials, start, duration, where to open it) and the routes
that list them and stop, resume, delete or open one. ``expctl ui`` serves them for the
whole registry (with the ended experiments opened read-only under ``<prefix>/experiments/<id>/``,
shelf.py); every experiment's own server serves them for its registry::

    records = ExperimentRecords()
    records.read(Registry(home), HomeSite(home, url_prefix="", shelf=True))
    # [{"id": "ab12cd34", "state": "CRASHED", "resumeCommand": "expctl resume ab12cd34", ...}]
    routes = home_routes(HomeSite(home, url_prefix=""))       # tornado routes, before the prefix

A record reads the experiment's store read-only (its facts cached until its files change;
in WAL mode a reader does not wait for the writer), the whole list within LIST_BUDGET_SECONDS; a store that cannot be read gives its row a ``problem``, not a failed list.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tornado.web

from expmgr.server import lifecycle
from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.layout import ID_RULE, ExperimentPaths, is_valid_id
from expmgr.metrics import best_result
from expmgr.server import auth
from expmgr.server.refusals import RequestError, send_refusal
from expmgr.states import ExperimentState
from expmgr.store import Store, StoreError, open_store
from expmgr.store.registry import Registry, RegistryEntry, RegistryError
from expmgr.training import TrialFiles, trial_files

EXPERIMENTS_ROUTE = "/api/v1/expmgr/experiments"
SHELF_PATH = "/experiments"
"""Where ``expctl ui`` serves an ended experiment read-only: ``<prefix>/experiments/<id>/``."""
LIST_BUDGET_SECONDS = 20.0
"""Reading the stores of one list stops after this long; the rows not read say so."""
RESUME_TIMEOUT = 90.0
"""How long ``expctl resume`` may take to start the experiment's server (it waits 60 s itself)."""


def check_experiment_id(raw: str) -> str:
    """``raw`` when it can be an experiment id (layout.ID_RULE); a RequestError (400) naming ``id`` otherwise."""
    if not is_valid_id(raw):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise RequestError(RefusalKind.INVALID, f"id: expected an experiment id ({ID_RULE}), got {shown!r}")
    return raw


def stored_platform(folder: Path) -> str:
    """The platform stored with the experiment in ``folder`` (its profile); ``local`` (NNI's
    default) when its store cannot be read."""
    try:
        with open_store(ExperimentPaths(folder), readonly=True) as store:
            return store.profile().platform
    except StoreError:
        return "local"


def stored_trial_files(paths: ExperimentPaths, store: Store | None = None) -> TrialFiles:
    """The trial files of the experiment at ``paths``, for the platform stored with it (read
    from ``store``, else from a store opened for it): how the server and the
    CLI reach a trial's output, running service or not."""
    platform = store.profile().platform if store is not None else stored_platform(paths.root)
    return trial_files(paths, platform)


@dataclass(frozen=True)
class HomeSite:
    """Where the experiments page is served: the registry's folder, the server's url
    prefix (the one the page's links start with), and whether ended experiments are
    opened read-only by this server (``expctl ui``) or need it."""

    home: Path
    url_prefix: str = ""
    shelf: bool = False

    def open_link(self, exp_id: str, live: bool) -> str | None:
        if live:
            return f"{self.url_prefix}{EXPERIMENTS_ROUTE}/{exp_id}/open"
        return f"{self.url_prefix}{SHELF_PATH}/{exp_id}/" if self.shelf else None


@dataclass
class _StoreFacts:
    """What a record takes from the store, cached until its files change."""

    platform: str | None = None
    best: dict[str, Any] | None = None
    trials: dict[str, int] = field(default_factory=dict)
    start_time: float | None = None
    end_time: float | None = None
    seconds_run: float | None = None
    problem: str | None = None


class ExperimentRecords:
    """The records of a registry, each experiment's store facts cached by the state of its
    files (an ended experiment's store is read once)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, _StoreFacts]] = {}
        self._reading = threading.Lock()  # clients polling at once wait for one read, not race on the cache

    def read(self, registry: Registry, site: HomeSite, now: float | None = None) -> list[dict[str, Any]]:
        """Every experiment of ``registry``, newest first; RegistryError when the registry
        cannot be read. Called in a thread (it reads the stores)."""
        with self._reading:
            return self._read(registry, site, time.time() if now is None else now)

    def _read(self, registry: Registry, site: HomeSite, now: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + LIST_BUDGET_SECONDS
        entries = registry.entries()
        records = []
        for entry in reversed(entries):
            records.append(self.record(entry, site, now, in_time=time.monotonic() < deadline))
        known = {entry.id for entry in entries}
        for gone in [exp_id for exp_id in self._cache if exp_id not in known]:
            self._cache.pop(gone, None)
        return records

    def record(self, entry: RegistryEntry, site: HomeSite, now: float, in_time: bool = True) -> dict[str, Any]:
        serving, running, crashed = lifecycle.is_serving(entry), lifecycle.is_running(entry), lifecycle.crashed(entry)
        facts = self._facts(entry, running, now, in_time)
        start = facts.start_time if facts.start_time is not None else entry.start_time
        end = None if running or crashed else (facts.end_time or entry.end_time)
        duration = facts.seconds_run
        if duration is None:
            duration = max(0.0, (now if running else (end or entry.end_time or start)) - start)
        state = lifecycle.CRASHED if crashed else entry.status.value
        resumable = not serving and entry.status != ExperimentState.DONE  # stopped, failed or crashed
        return {
            "id": entry.id,
            "name": entry.name,
            "state": state,
            "platform": facts.platform,
            "best": facts.best,
            "trials": facts.trials,
            "trialCount": sum(facts.trials.values()),
            "startTime": _ms(start),
            "endTime": _ms(end),
            "duration": duration,
            "open": site.open_link(entry.id, live=serving),
            "openKind": "live" if serving else "read-only",
            "actions": {"stop": serving, "resume": resumable, "delete": not serving},
            "resumeCommand": lifecycle.resume_hint(entry) if resumable else None,
            "problem": facts.problem,
        }

    def _facts(self, entry: RegistryEntry, running: bool, now: float, in_time: bool) -> _StoreFacts:
        """The store's facts: cached while its files are unchanged (a running one's are read
        afresh); past the list's time budget, the cached ones or none."""
        paths = ExperimentPaths(Path(entry.dir))
        # The database and its WAL change with every write; the shared-memory file changes when read.
        written = (paths.database, paths.database.with_name(paths.database.name + "-wal"))
        key = (entry.status, entry.pid, entry.start_time, entry.end_time, *map(_file_state, written))
        cached = self._cache.get(entry.id)
        if cached is not None and (not in_time or (cached[0] == key and not running)):
            return cached[1]
        if not in_time:
            return _StoreFacts(problem=f"not read: listing took over {LIST_BUDGET_SECONDS:g} s; reload to read it")
        facts = _read_facts(paths, running, now)
        self._cache[entry.id] = (key, facts)
        return facts


def _file_state(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)


def _read_facts(paths: ExperimentPaths, running: bool, now: float) -> _StoreFacts:
    """The store's facts, read-only; its trouble as ``problem`` (a missing, damaged or busy store)."""
    try:
        store = open_store(paths, readonly=True)
    except StoreError as error:
        return _StoreFacts(problem=str(error))
    try:
        with store:
            with store.snapshot():
                profile = store.profile()
                facts = _StoreFacts(
                    platform=profile.platform,
                    trials={state.value: count for state, count in store.status_counts().items() if count},
                    start_time=profile.start_time, end_time=profile.end_time,
                    seconds_run=store.seconds_run(until=now if running else None))
                best = best_result(store.final_numbers().items(), minimize=profile.minimizes)
                facts.best = None if best is None else {"trialId": best[0], "value": best[1]}
                return facts
    except StoreError as error:
        return _StoreFacts(problem=str(error))


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


# -- the routes ------------------------------------------------------------------

class _HomeHandler(tornado.web.RequestHandler):
    def initialize(self, site: HomeSite, records: ExperimentRecords) -> None:
        self.site = site
        self.records = records
        self.registry = Registry(site.home)

    def prepare(self) -> None:
        auth.check(self)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, Refusal):
            send_refusal(self, error)
        else:
            self.send_json({"error": self._reason}, status_code)

    def log_exception(self, typ: Any, value: BaseException | None, tb: Any) -> None:
        if not isinstance(value, Refusal):
            super().log_exception(typ, value, tb)

    def entry(self, raw_id: str) -> RegistryEntry:
        """The registry's entry of the experiment named in the path (the whole id, not a
        prefix: a click acts on one row); RequestError naming ``id`` when there is none."""
        exp_id = check_experiment_id(raw_id)
        try:
            entry = self.registry.get(exp_id)
        except RegistryError as error:
            raise RequestError(RefusalKind.UNAVAILABLE, str(error)) from None
        if entry is None:
            raise RequestError(RefusalKind.NOT_FOUND, f"id: no experiment {exp_id!r} in {self.registry.path}")
        return entry


class ExperimentsHandler(_HomeHandler):
    """``GET``: every experiment of the registry, one record each (newest first)."""

    async def get(self) -> None:
        try:
            records = await asyncio.to_thread(self.records.read, self.registry, self.site)
        except RegistryError as error:
            raise RequestError(RefusalKind.UNAVAILABLE, str(error)) from None
        self.send_json({"experiments": records, "registry": str(self.registry.path)})


class ExperimentActionHandler(_HomeHandler):
    """``POST .../<id>/stop`` and ``.../<id>/resume``, ``DELETE .../<id>``: as ``expctl stop``
    (without waiting: the list shows it stopping), ``expctl resume`` and ``expctl experiment delete``."""

    async def post(self, raw_id: str, action: str) -> None:
        entry = self.entry(raw_id)
        if action == "stop":
            lifecycle.send_stop(entry)
            self.send_json({"message": f"experiment {entry.id} is stopping"})
        elif action == "resume":
            self.send_json({"message": await self._resume(entry)})
        else:
            raise RequestError(RefusalKind.NOT_FOUND, f"action: expected stop or resume, got {action!r}")

    async def delete(self, raw_id: str, action: str | None = None) -> None:
        if action is not None:
            raise RequestError(RefusalKind.NOT_FOUND, f"action: DELETE takes no action, got {action!r}")
        entry = self.entry(raw_id)
        await asyncio.to_thread(lifecycle.delete, self.registry, entry)
        self.send_json({"message": f"deleted experiment {entry.id}"})

    async def _resume(self, entry: RegistryEntry) -> str:
        """Run ``expctl resume`` (a daemon, on the experiment's last port when it is free),
        with the host and url prefix of its last run; its error, when it fails, is the refusal."""
        lifecycle.check_can_resume(entry)
        access = _access_or_default(entry)
        command = lifecycle.resume_command(entry, port=_free_port_or_any(access.host, entry.port),
                                           home=self.site.home, host=access.host, url_prefix=access.url_prefix)
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=lifecycle.resume_environment(self.site.home))
        try:
            _, stderr = await asyncio.wait_for(process.communicate(), RESUME_TIMEOUT)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise RequestError(RefusalKind.FAILED, f"expctl resume {entry.id} did not finish in "
                                                   f"{RESUME_TIMEOUT:g} s") from None
        if process.returncode != 0:
            message = stderr.decode(errors="replace").strip()[-2000:] or f"exit status {process.returncode}"
            raise RequestError(RefusalKind.CONFLICT if process.returncode == 2 else RefusalKind.FAILED, message)
        return f"experiment {entry.id} resumed"


class OpenHandler(_HomeHandler):
    """``GET .../<id>/open``: the browser is sent to the experiment's own server (with its
    token, which this server's user may read: its owner's) while it runs, else to its
    read-only page here (``expctl ui``)."""

    def get(self, raw_id: str) -> None:
        entry = self.entry(raw_id)
        if lifecycle.is_serving(entry) and entry.port is not None:
            try:
                access = auth.Access.load(ExperimentPaths(Path(entry.dir)).access_file)
            except auth.AccessError as error:
                raise RequestError(RefusalKind.FORBIDDEN, error.problem) from None
            host = None if access.host == access.local_host else self.request.host_name
            if access.host not in ("0.0.0.0", "::") and access.host != access.local_host:
                host = access.host
            url = access.base_url(entry.port, host)
            self.redirect(url + (f"?{auth.TOKEN_QUERY}={access.token}" if access.token else ""))
            return
        link = self.site.open_link(entry.id, live=False)
        if link is None:
            raise RequestError(RefusalKind.CONFLICT, f"experiment {entry.id} is not running; `expctl ui` opens it "
                                                     f"read-only, `expctl view {entry.id}` serves it alone")
        self.redirect(link)


def _access_or_default(entry: RegistryEntry) -> auth.Access:
    try:
        return auth.Access.load(ExperimentPaths(Path(entry.dir)).access_file)
    except auth.AccessError:
        return auth.Access()


def _free_port_or_any(host: str, port: int | None) -> int:
    """``port`` when it can be listened on now (the experiment's last one), else 0 (any)."""
    if not port:
        return 0
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
        return port
    except OSError:
        return 0


def home_routes(site: HomeSite, records: ExperimentRecords) -> list[tuple[str, type, dict[str, Any]]]:
    """The list, the actions and the open route (paths before the server's url prefix)."""
    context = {"site": site, "records": records}
    return [(EXPERIMENTS_ROUTE, ExperimentsHandler, context),
            (rf"{EXPERIMENTS_ROUTE}/([^/]*)/open", OpenHandler, context),
            (rf"{EXPERIMENTS_ROUTE}/([^/]*)/?([^/]+)?", ExperimentActionHandler, context)]

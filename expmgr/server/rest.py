"""The REST server: NNI's v1 routes under ``/api/v1/nni/``, the trial channel, and what
the web UI needs under ``/api/v1/expmgr/`` (changes since a cursor, a trial with its
attempts, log tails, the websocket of live.py), besides the UI itself (static.py).
NNI's trial-jobs answer NNI's keys alone (NNI's client takes them); what expmgr's UI reads
besides is in expmgr's routes.

Reads come from the store, so the same routes serve a running experiment and
a finished one (``runner`` None: read-only, every write answers 409; a running
experiment's server becomes so when its search ends, ``serve_read_only``). A handler refuses
by raising: the engine's Refusal (expmgr.engine.errors) or a RequestError, answered
``{"error": message}`` with the status of its kind (refusals.py). Trials POST
their reports to ``/api/v1/expmgr/trials/<id>/metrics`` with their token in the
``X-Expmgr-Trial-Token`` header. Every request passes the guard (guard.py: Host,
Origin, JSON, body size) before a handler runs. host.py builds the guard, the hub and
the HTTP server around the app and starts and stops them together::

    app = make_app(store, paths, runner, hub, guard)   # runner: engine.serving.ServedSearch | None
"""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Awaitable, Callable, overload

import tornado.web

from expmgr import trial as trial_api
from expmgr.config import BUDGET_FIELDS, UPDATABLE_FIELDS
from expmgr.layout import ExperimentPaths
from expmgr.server import auth, compression, downloads, memory, request_values, tails, views
from expmgr.server.budget import Reservation
from expmgr.server.guard import HELD_BODY, Guard, GuardedApplication
from expmgr.server.experiments_info import experiments_info
from expmgr.server.home import ExperimentRecords, HomeSite, home_routes
from expmgr.server.live import LiveHub, LiveSocket
from expmgr.server.refusals import READ_ONLY, RequestError, send_refusal
from expmgr.server.trial_reports import take_report
from expmgr.training.files import is_trial_log
from expmgr.engine.commands import (AddCustomizedTrial, Command, ImportData, KillTrial, StopSearch, UpdateConfig,
                                    apply_command)
from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.engine.imports import read_import
from expmgr.engine.more_trials import refuse_ended
from expmgr.engine.serving import ServedSearch
from expmgr.server.results import MAX_TOP, top_trials_view
from expmgr.server.static import ui_routes
from expmgr.server.trial_jobs import TrialJobsAnswer
from expmgr.store import Store, TrialRecord
from expmgr.store.registry import Registry, RegistryError
from expmgr.training import TrialFiles

API = "/api/v1/nni"
EXPMGR_API = "/api/v1/expmgr"
MoreTrials = Callable[[str, Any], "Awaitable[None] | None"]
"""Given a budget field and its raised value, runs an ended (DONE) experiment's search again."""
PARSE_INLINE = 64 * 1024
"""Bodies up to this size are parsed on the event loop; larger ones in a thread."""


class _Handler(tornado.web.RequestHandler):
    body_limit = "max_body"
    """The field of guard.ServerLimits that bounds this route's request bodies."""

    def initialize(self, store: Store, paths: ExperimentPaths, files: TrialFiles, runner: ServedSearch | None,
                   hub: LiveHub, trial_jobs: TrialJobsAnswer) -> None:
        self.store = store
        self.paths = paths
        self.files = files
        self.runner = runner
        self.hub = hub
        self.trial_jobs = trial_jobs

    def prepare(self) -> None:
        auth.check(self)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """A Refusal is answered ``{"error": message}`` with its kind's status; anything
        else with tornado's status and reason."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, Refusal):
            send_refusal(self, error)
        else:
            self.send_json({"error": self._reason}, status_code)

    def log_exception(self, typ: Any, value: BaseException | None, tb: Any) -> None:
        if not isinstance(value, Refusal):  # a refusal is an answer, not a server error
            super().log_exception(typ, value, tb)

    @overload
    def int_argument(self, name: str, default: int, minimum: int | None = 0) -> int: ...

    @overload
    def int_argument(self, name: str, default: None, minimum: int | None = 0) -> int | None: ...

    def int_argument(self, name: str, default: int | None, minimum: int | None = 0) -> int | None:
        """Query argument ``name`` as an integer (``default`` when absent); a RequestError
        (400) naming it when it is not one, is below ``minimum`` or out of range (request_values)."""
        raw = self.get_query_argument(name, None)
        return default if raw is None else request_values.integer(name, raw, minimum)

    def path_int(self, name: str, raw: str) -> int:
        return request_values.integer(name, raw, minimum=None)

    def send_command(self, command: Command[None]) -> None:
        """Apply ``command`` to the runner (commands.apply_command) and answer {}; the
        runner's refusal is raised on."""
        apply_command(self.writable_runner(), command)
        self.send_json({})

    def store_trial(self, trial_id: str) -> TrialRecord:
        """The stored trial; a RequestError (NOT_FOUND) when there is none."""
        trial = self.store.trial(trial_id)
        if trial is None:
            raise RequestError(RefusalKind.NOT_FOUND, f"no trial {trial_id!r}")
        return trial

    def more_trials(self) -> MoreTrials | None:
        """What runs the experiment again when a budget field is raised: set while the server
        stays after the search ended DONE (not under ``expctl view``, nor after ERROR)."""
        return self.settings.get("expmgr_more_trials")

    def writable_runner(self) -> ServedSearch:
        """The runner now (the search may have ended, or run again after DONE, while the
        request's body was read); a RequestError (CONFLICT) when it is served read-only."""
        self.runner = served_search(self.application)
        if self.runner is None:
            raise RequestError(RefusalKind.CONFLICT, READ_ONLY)
        return self.runner

    def send_download(self, text: str, filename: str, content_type: str) -> None:
        """``text`` as a file the browser saves as ``filename`` (downloads.download_name made it safe)."""
        self.set_header("Content-Type", f"{content_type}; charset=UTF-8")
        self.set_header("Content-Disposition", f"attachment; filename={filename}")
        self.finish(text.encode())

    async def send_log(self, log: tails.LogFile, filename: str | None = None) -> None:
        """The log whole (tails.whole_log), a block at a time; with ``filename``, as a download."""
        blocks = tails.whole_log(log)
        first = next(blocks, b"")  # a refused file raises here, before anything is sent
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        if filename is not None:
            self.set_header("Content-Disposition", f"attachment; filename={filename}")
        try:
            block = first
            while block:  # local files, read in blocks between flushes
                self.write(block)
                await self.flush()
                block = next(blocks, b"")
        finally:
            blocks.close()
        self.finish()

    async def json_body(self) -> Any:
        """The request's JSON body (a RequestError when it is not JSON, or an object in it
        names a key twice); a large body is parsed off the event loop."""
        body = self.request.body
        return (request_values.json_body(body) if len(body) <= PARSE_INLINE
                else await asyncio.to_thread(request_values.json_body, body))


class ImportDataHandler(_Handler):
    """NNI's ``POST experiment/import-data``: earlier results for the tuner. Its body was
    reserved in the guard's ``imports_held`` before it was read, and stays so until the
    tuner took its records (or the request failed)."""

    body_limit = "max_import_body"
    body_held = True

    async def post(self) -> None:
        runner = self.writable_runner()
        # On the loop, in slices (a thread would hold the GIL from it); the body is read
        # into a compact batch and dropped as soon as it was decoded (nothing here keeps it).
        batch = await read_import(self._take_body())
        reservation: Reservation | None = getattr(self.request, HELD_BODY, None)
        apply_command(runner, ImportData(batch, on_taken=None if reservation is None else self._taken(reservation)))
        self.send_json({})

    @staticmethod
    def _taken(reservation: Reservation) -> Callable[[], None]:
        """What the runner calls once the tuner took the batch: its bytes are given back
        to the total and, the last import taken, to the system."""
        release = reservation.hand_over()

        def taken() -> None:
            release()
            if reservation.budget.held == 0:
                memory.give_back()
        return taken

    def _take_body(self) -> bytes:
        body, self.request.body = self.request.body, b""
        return body

    def on_finish(self) -> None:
        reservation: Reservation | None = getattr(self.request, HELD_BODY, None)
        if reservation is not None:
            reservation.release()  # refused: not handed to the runner


class CheckStatusHandler(_Handler):
    def get(self) -> None:
        view = views.check_status_view(self.store)
        if self.runner is not None and self.runner.launching_paused is not None:
            view["storeUnwritable"] = self.runner.launching_paused
        self.send_json(view)


# NNI's update types (PUT experiment?update_type=...) and the config field each changes.
UPDATE_TYPES = {entry.update_type: entry.field for entry in UPDATABLE_FIELDS}
BUDGET_FIELD_NAMES = frozenset(entry.field for entry in BUDGET_FIELDS)


class ExperimentHandler(_Handler):
    async def get(self) -> None:
        """NNI's profile; its facts kept up to date by the hub (a pass over every trial otherwise)."""
        experiment, _ = await self.hub.experiment_and_statistics(read_only=self.runner is None,
                                                                 more_trials=self.more_trials() is not None)
        self.send_json(experiment)

    def delete(self) -> None:
        """Stop the experiment gracefully (as ``expctl stop``); asking again changes nothing.
        After its search, this closes its server (NNI's client stops a finished experiment so)."""
        close_server = self.settings.get("expmgr_close_server")
        if self.runner is None and close_server is not None:
            close_server()
            self.send_json({})
            return
        self.send_command(StopSearch())

    def _refuse_more_trials_after_error(self, field: str) -> None:
        """A raise of the budget of an experiment whose manager still serves it after ERROR
        is refused saying why and what to do (under ``expctl view``: the read-only refusal)."""
        served_by_its_manager = self.settings.get("expmgr_close_server") is not None
        if (self.settings["expmgr_context"]["runner"] is None and served_by_its_manager
                and field in BUDGET_FIELD_NAMES):
            profile = self.store.profile()
            raise refuse_ended(profile.id, profile.status)

    async def put(self) -> None:
        """NNI's update: the body is the profile (or its ``params``) holding the new value."""
        update_type = self.get_query_argument("update_type", "")
        field = UPDATE_TYPES.get(update_type)
        if field is None:
            raise RequestError(RefusalKind.INVALID, f"update_type: expected one of {', '.join(UPDATE_TYPES)}, "
                                                    f"got {update_type!r}")
        body = await self.json_body()
        params = body.get("params", body) if isinstance(body, dict) else None
        if not isinstance(params, dict) or field not in params:
            raise RequestError(RefusalKind.INVALID, f"body: expected a JSON object with params.{field}")
        more_trials = self.more_trials()
        if more_trials is not None:   # ended DONE: a raised budget runs it again
            pending = more_trials(field, params[field])
        else:
            self._refuse_more_trials_after_error(field)
            pending = apply_command(self.writable_runner(), UpdateConfig(field, params[field]))
        if pending is not None:   # a search space: answered once the tuner took it (or refused it)
            await pending
        self.send_json({})



class TrialJobsHandler(_Handler):
    """NNI's trial-jobs, in NNI's shape alone (views.nni_trial_jobs_view, kept up to date
    by trial_jobs.py); the web UI reads expmgr's view of a trial from the changes and TrialHandler."""

    def get(self, trial_id: str | None = None) -> None:
        if trial_id is None:
            offset = self.int_argument("offset", 0)
            limit = self.int_argument("limit", None, minimum=1)
            status = self.get_query_argument("status", None)  # NNI's filter (of the page, here)
            chunks = self.trial_jobs.answer(self.store, offset, limit, status)
            self.set_header("Content-Type", "application/json; charset=UTF-8")
            self.set_header("Content-Length", sum(map(len, chunks)))
            for chunk in chunks:  # each flushed alone: queued as it is, not joined into one copy
                self.write(chunk)
                self.flush()
            self.finish()
            return
        trial = self.store_trial(trial_id)
        self.send_json(views.nni_trial_job_view(trial, self.files,
                                                self.store.final_metrics([trial_id]).get(trial_id)))

    async def post(self, trial_id: str | None = None) -> None:
        """NNI's customized trial: the body is its parameters; answered NNI's ``sequenceId``
        and the new trial's ``trialJobId`` (ServedSearch.add_customized_trial refuses)."""
        if trial_id is not None:
            raise RequestError(RefusalKind.INVALID, "POST trial-jobs takes no trial id: the body is the new "
                                                    "trial's parameters")
        runner = self.writable_runner()
        record = apply_command(runner, AddCustomizedTrial(await self.json_body()))
        self.send_json({"sequenceId": record.sequence_id, "trialJobId": record.trial_id})

    def compute_etag(self) -> None:
        """None: no ETag. Tornado's is a SHA-1 of the whole answer (6 MB at 10,000 trials)
        at every poll, for clients that never ask If-None-Match (NNI's do not)."""
        return None

    def delete(self, trial_id: str) -> None:
        """NNI's cancel: stop this trial as USER_CANCELED."""
        self.send_command(KillTrial(trial_id))


class TrialHandler(_Handler):
    """expmgr's view of one trial (views.trial_jobs_view) with its attempts listed in
    ``attemptDetails``, exit codes and signals among them: the web UI's trial page."""

    def get(self, trial_id: str) -> None:
        trial = self.store_trial(trial_id)
        view = views.trial_job_view(trial, self.files, self.store.final_metrics([trial_id]).get(trial_id))
        view["attemptDetails"] = views.attempt_views(sorted(self.store.attempts(trial_id), key=lambda a: a.attempt))
        self.send_json(view)


class ExperimentsInfoHandler(_Handler):
    """NNI's experiments-info: the experiments of this one's home (experiments_info.py)."""

    async def get(self) -> None:
        self.send_json(await asyncio.to_thread(self.experiments_info))

    def experiments_info(self) -> list[dict[str, Any]]:
        """The registry's records; a RequestError (UNAVAILABLE) when it cannot be read."""
        try:
            return experiments_info(Registry(self.paths.root.parent))  # root: <home>/<id>
        except RegistryError as error:
            raise RequestError(RefusalKind.UNAVAILABLE, str(error)) from None


class ExperimentMetadataHandler(ExperimentsInfoHandler):
    """NNI's experiment-metadata: this experiment's record of experiments-info."""

    async def get(self) -> None:
        exp_id = self.store.profile().id
        records = await asyncio.to_thread(self.experiments_info)
        record = next((record for record in records if record["id"] == exp_id), None)
        if record is None:
            raise RequestError(RefusalKind.NOT_FOUND, f"experiment {exp_id} is not in the registry of "
                                                      f"{self.paths.root.parent}")
        self.send_json(record)


class MetricDataHandler(_Handler):
    def get(self, trial_id: str | None = None) -> None:
        if trial_id is not None and self.store.trial(trial_id) is None:
            raise RequestError(RefusalKind.NOT_FOUND, f"no trial {trial_id!r}")
        kind = self.get_query_argument("type", None)  # NNI's filter: PERIODICAL or FINAL
        self.send_json([view for view in views.metrics_view(self.store, trial_id) if kind is None or view["type"] == kind])


class LatestMetricDataHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.latest_metrics_view(self.store))


class MetricDataRangeHandler(_Handler):
    def get(self, first: str, last: str) -> None:
        self.send_json(views.metrics_range_view(self.store, self.path_int("minSeqId", first),
                                                self.path_int("maxSeqId", last)))


class TrialFileHandler(_Handler):
    """NNI's trial-file: a trial's stdout, stderr or trial.log, whole, as text: its kept
    rotated files, oldest first, then the current one."""

    async def get(self, trial_id: str, name: str) -> None:
        if not is_trial_log(name):
            raise RequestError(RefusalKind.INVALID,
                               f"name: expected one of {', '.join(tails.TRIAL_FILES)}, got {name!r}")
        await self.send_log(tails.log_file(self.paths, self.files, self.store, name, trial_id))


class LogDownloadHandler(_Handler):
    """A log file as a download (``<id>[-<trial>]-<file>.log``): a trial's stdout, stderr or
    trial.log (``?trial=<id>``), or the experiment's experiment.log or dispatcher.log."""

    async def get(self, name: str) -> None:
        trial_id = self.get_query_argument("trial", None)
        log = tails.log_file(self.paths, self.files, self.store, name, trial_id)   # INVALID / NOT_FOUND named there
        owner = [self.store.profile().id, trial_id] if is_trial_log(name) and trial_id else [self.store.profile().id]
        await self.send_log(log, downloads.download_name(*owner, name.removesuffix(".log"), "log"))


class ResultsDownloadHandler(_Handler):
    """The results as ``expctl experiment export`` writes them (downloads.py), as a download."""

    def get(self, fmt: str) -> None:
        if fmt not in downloads.RESULT_FORMATS:
            raise RequestError(RefusalKind.NOT_FOUND, f"format: expected one of {', '.join(downloads.RESULT_FORMATS)}, "
                                                      f"got {fmt!r}")
        text = downloads.results_text(downloads.export_records(self.store), fmt)
        self.send_download(text, downloads.download_name(self.store.profile().id, "results", fmt),
                           "text/csv" if fmt == "csv" else "application/json")


class ConfigDownloadHandler(_Handler):
    """The config as stored (updates made while running included), as YAML or JSON."""

    def get(self, fmt: str) -> None:
        if fmt not in downloads.CONFIG_FORMATS:
            raise RequestError(RefusalKind.NOT_FOUND, f"format: expected one of {', '.join(downloads.CONFIG_FORMATS)}, "
                                                      f"got {fmt!r}")
        profile = self.store.profile()
        self.send_download(downloads.config_text(profile.config, fmt),
                           downloads.download_name(profile.id, "config", fmt),
                           "application/yaml" if fmt == "yml" else "application/json")


class TailHandler(_Handler):
    """Bytes of a log file from an offset: ``tails.tail_json``'s fields."""

    def prepare(self) -> None:
        super().prepare()
        # A view catching up on a followed file: at most 256 KiB, read on this machine, where
        # waiting for gzip costs more than the bytes (and changes how it races the websocket).
        compression.leave_uncompressed(self)

    def get(self) -> None:
        which = self.get_query_argument("file", None)
        if which is None:
            raise RequestError(RefusalKind.INVALID, "file: missing")
        offset = self.int_argument("offset", 0, minimum=None)
        inode = self.int_argument("inode", None)
        base = self.int_argument("base", None)
        log = tails.log_file(self.paths, self.files, self.store, which, self.get_query_argument("trial", None))
        tail = tails.read_tail(log, offset, inode=inode, base=base)
        self.send_json(tails.tail_json(tail))


class ChangesHandler(_Handler):
    """What changed since a cursor (see Store.changes), built off the event loop."""

    async def get(self) -> None:
        since = self.get_query_argument("since", None)
        limit = self.int_argument("limit", None, minimum=1)
        text = await self.hub.changes(since, limit)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(await compression.compress_off_loop(self, text))


class JobStatisticsHandler(_Handler):
    async def get(self) -> None:
        _, statistics = await self.hub.experiment_and_statistics(read_only=self.runner is None,
                                                                 more_trials=self.more_trials() is not None)
        self.send_json(statistics)


class ExportDataHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.export_data_view(self.store))


class _AnalysisHandler(_Handler):
    async def answer(self, view: Callable[[Store, list[str]], Any]) -> None:
        """Answer ``view(store, result keys)``, on the reader's thread in one snapshot, the
        result keys from the hub's facts (kept up to date) rather than read afresh."""
        def read(store: Store) -> Any:
            with store.snapshot():
                self.hub.facts.refresh(store)
                return view(store, list(self.hub.facts.result_keys))
        self.send_json(await self.hub.reader.run(read))


class ImportanceHandler(_AnalysisHandler):
    """Hyperparameter importance under a result key (importance.py)."""

    async def get(self) -> None:
        # numpy on first use: an experiment that is never asked pays neither its import time nor memory
        from expmgr.server.importance import importance_view
        key = self.get_query_argument("key", None)
        await self.answer(lambda store, keys: importance_view(store, key, keys))


class TopTrialsHandler(_AnalysisHandler):
    """The best trials under a result key (results.py)."""

    async def get(self) -> None:
        key = self.get_query_argument("key", None)
        count = self.int_argument("k", 10, minimum=1)
        if count > MAX_TOP:
            raise RequestError(RefusalKind.INVALID, f"k: at most {MAX_TOP}, got {count}")
        await self.answer(lambda store, keys: top_trials_view(store, key, count, keys))


class TrialMetricsHandler(_Handler):
    """The trial channel: one report per POST, stored before it is acknowledged."""

    requires_access_token = False  # the runner checks the trial's own token instead
    body_limit = "max_report_body"

    def post(self, trial_id: str) -> None:
        # The runner now, as writable_runner() reads it: the search may have ended meanwhile.
        status, answer = take_report(served_search(self.application), trial_id,
                                     self.request.headers.get(trial_api.TOKEN_HEADER), self.request.body)
        self.send_json(answer, status)


def make_app(store: Store, paths: ExperimentPaths, runner: ServedSearch | None, hub: LiveHub,
             guard: Guard, webui_dir: Path | None = None, *, token: str | None = None,
             url_prefix: str = "", home_site: HomeSite | None = None) -> tornado.web.Application:
    """The server's routes, each behind ``guard``, under ``url_prefix`` (as
    auth.normalize_url_prefix gives it); ``webui_dir`` holds the built UI (default: the
    installed one); with a ``token``, every request but a trial's report must carry it
    (auth.check). The experiments page (home.py) lists the experiments of this one's
    registry, linked from ``home_site`` (default: this server)."""
    files = hub.files
    context = {"store": store, "paths": paths, "files": files, "runner": runner, "hub": hub,
               "trial_jobs": TrialJobsAnswer(files)}
    routes = [
        (f"{API}/check-status", CheckStatusHandler),
        (f"{API}/experiment", ExperimentHandler),
        (f"{API}/experiment/import-data", ImportDataHandler),
        (f"{API}/trial-jobs", TrialJobsHandler),
        (f"{API}/trial-jobs/([^/]+)", TrialJobsHandler),
        (f"{API}/metric-data", MetricDataHandler),
        (f"{API}/metric-data/([^/]+)", MetricDataHandler),
        (f"{API}/metric-data-latest", LatestMetricDataHandler),
        (f"{API}/metric-data-range/([^/]+)/([^/]+)", MetricDataRangeHandler),
        (f"{API}/trial-file/([^/]+)/([^/]+)", TrialFileHandler),
        (f"{API}/job-statistics", JobStatisticsHandler),
        (f"{API}/export-data", ExportDataHandler),
        (f"{API}/experiments-info", ExperimentsInfoHandler),
        (f"{API}/experiment-metadata", ExperimentMetadataHandler),
        (f"{EXPMGR_API}/trials/([^/]+)", TrialHandler),
        (f"{EXPMGR_API}/changes", ChangesHandler),
        (f"{EXPMGR_API}/tail", TailHandler),
        (f"{EXPMGR_API}/download/results\\.([^/]+)", ResultsDownloadHandler),
        (f"{EXPMGR_API}/download/config\\.([^/]+)", ConfigDownloadHandler),
        (f"{EXPMGR_API}/download/logs/([^/]+)", LogDownloadHandler),
        (f"{EXPMGR_API}/importance", ImportanceHandler),
        (f"{EXPMGR_API}/top", TopTrialsHandler),
        (trial_api.METRICS_ROUTE.replace("{trial_id}", "([^/]+)"), TrialMetricsHandler),
    ]
    site = home_site or HomeSite(paths.root.parent, url_prefix)  # root: <home>/<id>
    served = ([(path, handler, context) for path, handler in routes] + home_routes(site, ExperimentRecords())
              + [(f"{EXPMGR_API}/ws", LiveSocket, {"hub": hub, "guard": guard})] + ui_routes(webui_dir))
    # The page at <prefix>/ loads everything relative to itself; <prefix> alone goes there.
    redirect = [(re.escape(url_prefix), tornado.web.RedirectHandler, {"url": f"{url_prefix}/"})] if url_prefix else []
    return GuardedApplication(
        [(re.escape(url_prefix) + path, *rest) for path, *rest in served] + redirect,
        guard, websocket_ping_interval=20, expmgr_context=context, transforms=compression.TRANSFORMS,
        **auth.settings(token, url_prefix))


def served_search(app: tornado.web.Application) -> ServedSearch | None:
    """The search ``app`` serves now: None once it is served read-only (``serve_read_only``),
    another one after ``serve_runner``. Read per request, by its routes and its report socket."""
    runner: ServedSearch | None = app.settings["expmgr_context"]["runner"]
    return runner


def serve_read_only(app: tornado.web.Application, close_server: Callable[[], None] | None = None,
                    more_trials: MoreTrials | None = None) -> None:
    """From now on ``app`` answers as over a finished experiment (``runner`` None): its
    search ended and its server stays, as NNI's does, until ``close_server`` is called (by
    ``DELETE experiment``, as by ``expctl stop``). Requests already running finish as they began.
    With ``more_trials`` (the experiment ended DONE), a raise of a budget field is given to
    it (``PUT experiment``): it refuses (UpdateRefused) or runs the search again
    (``serve_runner``)."""
    app.settings["expmgr_context"]["runner"] = None  # the handlers' shared arguments, read per request
    app.settings["expmgr_close_server"] = close_server
    app.settings["expmgr_more_trials"] = more_trials


def serve_runner(app: tornado.web.Application, runner: ServedSearch) -> None:
    """From now on ``app`` serves ``runner``'s search (an ended experiment given more trials)."""
    app.settings["expmgr_context"]["runner"] = runner
    app.settings["expmgr_close_server"] = None
    app.settings["expmgr_more_trials"] = None

"""The REST server: NNI's v1 routes under ``/api/v1/nni/`` and the trial channel.

Reads come from the store, so the same routes serve a running experiment and
a finished one. Trials POST their reports to ``/api/v1/expmgr/trials/<id>/metrics``
with their token in the ``X-Expmgr-Trial-Token`` header::

    app = make_app(store, paths, runner)
    server = tornado.httpserver.HTTPServer(app); server.add_sockets(sockets)
"""
from __future__ import annotations

import json
from typing import Any, Callable

import tornado.web

from expmgr import trial as trial_api
from expmgr.layout import ExperimentPaths
from expmgr.manager import views
from expmgr.manager.runner import MetricRejected, TrialRunner, UpdateRefused
from expmgr.manager.store import ExperimentStore

API = "/api/v1/nni"
NOT_JSON = object()
READ_ONLY = "this experiment is served read-only (view); it cannot be changed and takes no reports"


class _Handler(tornado.web.RequestHandler):
    def initialize(self, store: ExperimentStore, paths: ExperimentPaths, runner: TrialRunner | None) -> None:
        self.store = store
        self.paths = paths
        self.runner = runner

    def send_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.send_json({"error": self._reason}, status_code)

    def apply_change(self, change: Callable[[TrialRunner], None]) -> None:
        """Make a change through the runner and answer {} or the refusal."""
        if self.runner is None:
            self.send_json({"error": READ_ONLY}, 409)
            return
        try:
            change(self.runner)
        except UpdateRefused as refused:
            self.send_json({"error": str(refused)}, refused.status)
            return
        self.send_json({})

    def json_body(self) -> Any:
        """The request's JSON body, or NOT_JSON after answering 400."""
        try:
            return json.loads(self.request.body)
        except ValueError as error:
            self.send_json({"error": f"body: not JSON ({error})"}, 400)
            return NOT_JSON


class ImportDataHandler(_Handler):
    """NNI's ``POST experiment/import-data``: earlier results for the tuner."""

    def post(self) -> None:
        records = self.json_body()
        if records is not NOT_JSON:
            self.apply_change(lambda runner: runner.import_data(records))


class CheckStatusHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.check_status_view(self.store))


# NNI's update types (PUT experiment?update_type=...) and the config field each changes.
UPDATE_TYPES = {"TRIAL_CONCURRENCY": "trialConcurrency", "MAX_TRIAL_NUM": "maxTrialNumber",
                "MAX_EXEC_DURATION": "maxExperimentDuration", "SEARCH_SPACE": "searchSpace"}


class ExperimentHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.experiment_view(self.store))

    def put(self) -> None:
        """NNI's update: the body is the profile (or its ``params``) holding the new value."""
        update_type = self.get_query_argument("update_type", "")
        field = UPDATE_TYPES.get(update_type)
        if field is None:
            self.send_json({"error": f"update_type: expected one of {', '.join(UPDATE_TYPES)}, "
                                     f"got {update_type!r}"}, 400)
            return
        body = self.json_body()
        if body is NOT_JSON:
            return
        params = body.get("params", body) if isinstance(body, dict) else None
        if not isinstance(params, dict) or field not in params:
            self.send_json({"error": f"body: expected a JSON object with params.{field}"}, 400)
            return
        self.apply_change(lambda runner: runner.update_config(field, params[field]))



class TrialJobsHandler(_Handler):
    def get(self, trial_id: str | None = None) -> None:
        if trial_id is None:
            self.send_json(views.trial_jobs_view(self.store, self.paths))
            return
        trial = self.store.trial(trial_id)
        if trial is None:
            self.send_json({"error": f"no trial {trial_id!r}"}, 404)
            return
        self.send_json(views.trial_job_view(trial, self.paths, self.store.final_metrics().get(trial_id)))

    def delete(self, trial_id: str) -> None:
        """NNI's cancel: stop this trial as USER_CANCELED."""
        self.apply_change(lambda runner: runner.kill_trial(trial_id))


class MetricDataHandler(_Handler):
    def get(self, trial_id: str | None = None) -> None:
        if trial_id is not None and self.store.trial(trial_id) is None:
            self.send_json({"error": f"no trial {trial_id!r}"}, 404)
            return
        self.send_json(views.metrics_view(self.store, trial_id))


class JobStatisticsHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.job_statistics_view(self.store))


class ExportDataHandler(_Handler):
    def get(self) -> None:
        self.send_json(views.export_data_view(self.store))


class TrialMetricsHandler(_Handler):
    """The trial channel: one report per POST, stored before it is acknowledged."""

    def post(self, trial_id: str) -> None:
        if self.runner is None:
            self.send_json({"error": READ_ONLY}, 409)
            return
        report = self.json_body()
        if report is NOT_JSON:
            return
        try:
            self.runner.receive_metric(trial_id, self.request.headers.get(trial_api.TOKEN_HEADER), report)
        except MetricRejected as rejected:
            self.send_json({"error": str(rejected)}, rejected.status)
            return
        self.send_json({"ok": True})


def make_app(store: ExperimentStore, paths: ExperimentPaths, runner: TrialRunner | None) -> tornado.web.Application:
    context = {"store": store, "paths": paths, "runner": runner}
    routes = [
        (f"{API}/check-status", CheckStatusHandler),
        (f"{API}/experiment", ExperimentHandler),
        (f"{API}/experiment/import-data", ImportDataHandler),
        (f"{API}/trial-jobs", TrialJobsHandler),
        (f"{API}/trial-jobs/([^/]+)", TrialJobsHandler),
        (f"{API}/metric-data", MetricDataHandler),
        (f"{API}/metric-data/([^/]+)", MetricDataHandler),
        (f"{API}/job-statistics", JobStatisticsHandler),
        (f"{API}/export-data", ExportDataHandler),
        (trial_api.METRICS_ROUTE.replace("{trial_id}", "([^/]+)"), TrialMetricsHandler),
    ]
    return tornado.web.Application([(path, handler, context) for path, handler in routes])

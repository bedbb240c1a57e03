"""The Experiment API's queries, NNI's ``nni.experiment.Experiment`` methods that read:
they read the experiment's store (and its home's registry) directly, so they answer while
it runs, after it ended and from another process (``Experiment.connect``), in the shapes
NNI's REST answers give (``records``)::

    experiment.get_status()                    # "RUNNING", "DONE", ...
    experiment.get_job_metrics()["Ab3xY"]      # [TrialMetricData(type="PERIODICAL", data=0.5, ...), ...]

``ExperimentQueries`` is a part of ``Experiment``, kept apart because it is the half of it
that never changes anything.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from expmgr.experiment.errors import ExperimentError
from expmgr.experiment.records import TrialJob, TrialMetricData, TrialResult
from expmgr.layout import ExperimentPaths
from expmgr.server import views
from expmgr.server.experiments_info import experiments_info
from expmgr.server.home import stored_trial_files
from expmgr.store import Store, open_store
from expmgr.store.registry import Registry

if TYPE_CHECKING:
    from expmgr.config import ExperimentConfig, ResolvedConfig


class ExperimentQueries:
    """The read-only methods of ``Experiment`` (see the module docstring)."""

    id: str
    paths: ExperimentPaths | None
    config: ExperimentConfig | None
    _resolved: ResolvedConfig | None

    def _open_store(self) -> Store:
        if self.paths is None:
            raise ExperimentError(f"experiment {self.id} was not started")
        return open_store(self.paths, readonly=True)

    def get_status(self) -> str:
        """The experiment's state name: RUNNING, DONE, ERROR, ..."""
        with self._open_store() as store:
            return store.profile().status.value

    def get_error(self) -> str | None:
        """The stored error (e.g. the tuner's traceback) when the status is ERROR."""
        with self._open_store() as store:
            return store.profile().error

    def list_trial_jobs(self) -> list[TrialJob]:
        with self._open_store() as store:
            files = stored_trial_files(cast(ExperimentPaths, self.paths), store)  # _open_store() checked paths
            return [TrialJob.from_view(view) for view in views.trial_jobs_view(store, files)]

    def get_trial_job(self, trial_job_id: str) -> TrialJob:
        """One trial; ExperimentError when the experiment has no such trial (NNI's answers 404)."""
        with self._open_store() as store:
            trial = store.trial(trial_job_id)
            if trial is None:
                raise ExperimentError(f"experiment {self.id} has no trial {trial_job_id!r}")
            final = store.final_metrics([trial_job_id]).get(trial_job_id)
            view = views.trial_job_view(trial, stored_trial_files(cast(ExperimentPaths, self.paths), store), final)
            return TrialJob.from_view(view)

    def get_job_metrics(self, trial_job_id: str | None = None) -> dict[str, list[TrialMetricData]]:
        """Every reported result (of one trial with ``trial_job_id``) by trial id, in the
        order reported: NNI's shape."""
        with self._open_store() as store:
            metrics = views.metrics_view(store, trial_job_id)
        by_trial: dict[str, list[TrialMetricData]] = {}
        for view in metrics:
            by_trial.setdefault(view["trialJobId"], []).append(TrialMetricData.from_view(view))
        return by_trial

    def export_data(self) -> list[TrialResult]:
        """Every trial with a final result: its parameters and value (NNI's export shape)."""
        with self._open_store() as store:
            return [TrialResult.from_view(view) for view in views.export_data_view(store)]

    def get_job_statistics(self) -> list[dict[str, Any]]:
        with self._open_store() as store:
            return views.job_statistics_view(store)

    def get_experiment_profile(self) -> dict[str, Any]:
        with self._open_store() as store:
            return views.experiment_view(store)

    def get_all_experiments_metadata(self) -> list[dict[str, Any]]:
        """The experiments of this one's home, as NNI's experiments-info answers (the same
        records: ``expmgr.server.experiments_info``)."""
        if self.paths is None:
            raise ExperimentError(f"experiment {self.id} was not started")
        return experiments_info(Registry(self.paths.root.parent))  # root: <home>/<id>

    def get_experiment_metadata(self, exp_id: str) -> dict[str, Any]:
        """The record of experiment ``exp_id`` among ``get_all_experiments_metadata()``;
        an empty dict when there is none (as NNI's)."""
        return next((record for record in self.get_all_experiments_metadata() if record["id"] == exp_id), {})

    def best_trial(self) -> TrialResult | None:
        """The trial with the best final result: the highest ``default`` value, or the
        lowest when the tuner's ``optimize_mode`` is ``minimize``. A non-finite result
        (NaN, an infinity) is never the best; None when no trial has a finite one."""
        from expmgr.metrics import best_result
        config = self._resolved or self.config
        best = best_result(((result, result.value) for result in self.export_data()),
                           minimize=config is not None and config.minimizes)
        return None if best is None else best[0]

"""Deadlines (engine/deadlines.py): the run's clock and each running attempt's, and which
trials passed a deadline now. Pure: times are given, not read."""
from __future__ import annotations

from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.engine.deadlines import Deadlines
from expmgr.states import TrialState


def limits(tmp_path, **fields: object) -> ResolvedConfig:
    return ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="true", trial_code_directory=tmp_path,
        tuner={"name": "GridSearch"}, trial_concurrency=1, **fields))


def never_wrote(trial_id: str) -> float:
    return 0.0


def test_the_experiment_time_left_counts_the_earlier_runs_and_stops_at_zero():
    deadlines = Deadlines(started=1000.0)   # earlier runs took some of it already
    assert deadlines.experiment_time_left(1030.0, 60.0) == 30.0
    assert deadlines.experiment_time_left(1070.0, 60.0) == 0.0
    assert deadlines.experiment_time_left(5000.0, None) is None


def test_a_trial_past_max_trial_duration_is_to_stop_early_counted_from_its_start():
    deadlines = Deadlines(started=0.0)
    deadlines.trial_started("a", 1, 100.0, max_trial_duration=10.0)
    assert deadlines.overdue(109.9, None, never_wrote) == []
    assert deadlines.overdue(110.0, None, never_wrote) == [("a", TrialState.EARLY_STOPPED)]


def test_a_silent_trial_is_to_crash_unless_a_report_or_its_output_came_since():
    deadlines = Deadlines()
    deadlines.trial_started("a", 1, 100.0, max_trial_duration=None)
    deadlines.trial_started("b", 1, 100.0, max_trial_duration=None)
    deadlines.active("a", 1, 104.0)                  # a reported 4 s in
    output = {"b": 103.0}                             # b wrote output 3 s in
    assert deadlines.overdue(107.0, 5.0, lambda trial_id: output.get(trial_id, 0.0)) == []
    assert deadlines.overdue(108.0, 5.0, lambda trial_id: output.get(trial_id, 0.0)) == [("b", TrialState.CRASHED)]
    assert deadlines.overdue(109.0, 5.0, never_wrote) == [("a", TrialState.CRASHED), ("b", TrialState.CRASHED)]


def test_a_report_of_an_earlier_attempt_does_not_keep_the_running_one_alive():
    deadlines = Deadlines()
    deadlines.trial_started("a", 2, 100.0, max_trial_duration=None)
    deadlines.active("a", 1, 104.0)
    assert deadlines.overdue(105.0, 5.0, never_wrote) == [("a", TrialState.CRASHED)]


def test_a_trial_being_stopped_or_ended_has_no_deadline_left(tmp_path):
    deadlines = Deadlines()
    deadlines.trial_started("a", 1, 100.0, max_trial_duration=1.0)
    deadlines.trial_started("b", 1, 100.0, max_trial_duration=1.0)
    deadlines.forget("a")
    assert deadlines.overdue(200.0, None, never_wrote) == [("b", TrialState.EARLY_STOPPED)]
    deadlines.clear()
    assert deadlines.overdue(200.0, None, never_wrote) == []
    assert deadlines.seconds_to_next(200.0, limits(tmp_path, max_trial_duration=1)) is None


def test_the_loop_sleeps_until_the_nearest_deadline_of_any_kind(tmp_path):
    deadlines = Deadlines(started=0.0)
    config = limits(tmp_path, max_trial_duration=30, trial_idle_timeout=20, max_experiment_duration=100)
    assert deadlines.seconds_to_next(10.0, config) == 90.0                         # the experiment's
    deadlines.trial_started("a", 1, 10.0, max_trial_duration=config.max_trial_duration)
    assert deadlines.seconds_to_next(10.0, config) == 20.0                         # a's idle timeout
    deadlines.active("a", 1, 25.0)
    assert deadlines.seconds_to_next(25.0, config) == 15.0                         # a's maxTrialDuration (40)
    assert deadlines.seconds_to_next(25.0, config, also=[26.5]) == 1.5             # the runner's own
    assert deadlines.seconds_to_next(500.0, config) == 0.0                         # past: at once


def test_the_line_said_names_the_limit_a_trial_passed():
    import logging
    from expmgr.engine.deadlines import overdue_line
    assert overdue_line("a", TrialState.EARLY_STOPPED, None) == (
        logging.INFO, "trial a ran past maxTrialDuration; stopping it")
    assert overdue_line("b", TrialState.CRASHED, 5.0) == (
        logging.WARNING, "trial b was silent for 5s (trialIdleTimeout); stopping it as crashed")

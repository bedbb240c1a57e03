"""NNI's spellings of built-in algorithms in configs (aliases, NNI's classNames) and the
GP / Metis tuners' config errors: a missing extra, a search-space type they do not take."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from expmgr.config import ConfigError, ExperimentConfig

from tests.helpers.config import good_with, load_error, write

needs_sklearn = pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                                   reason="the GP and Metis tuners need scikit-learn (the gp extra)")


def make(tuner: dict, space: dict | None = None) -> ExperimentConfig:
    return ExperimentConfig(trial_command="python3 trial.py", trial_concurrency=1, tuner=tuner,
                            search_space=space or {"x": {"_type": "uniform", "_value": [0, 1]}})


BATCH_SPACE = {"combine_params": {"_type": "choice", "_value": [{"x": 1}, {"x": 2}]}}


@pytest.mark.parametrize("alias, space", [("BatchTuner", BATCH_SPACE), ("pbttuner", None), ("PBTTuner", None)])
def test_nnis_aliases_are_accepted_as_tuner_names(alias, space):
    assert make({"name": alias}, space).canonical().tuner.name.lower() == alias.lower()


@needs_sklearn
@pytest.mark.parametrize("alias", ["GPTuner", "MetisTuner"])
def test_gp_and_metis_aliases_are_accepted_with_nnis_class_args(alias):
    config = make({"name": alias, "class_args": {"optimize_mode": "minimize", "cold_start_num": 5}}).canonical()
    assert config.minimizes and config.tuner.class_args["cold_start_num"] == 5


def test_nnis_class_name_of_a_builtin_needs_no_code_directory(tmp_path: Path):
    path = write(tmp_path / "config.yml", good_with("  name: TPE", "  className: nni.algorithms.hpo.tpe_tuner.TpeTuner"))
    assert ExperimentConfig.load(path).canonical().tuner.name == "TPE"


def test_gp_without_scikit_learn_is_a_config_error_saying_what_to_install(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)   # what Python does for a missing package
    err = load_error(tmp_path / "config.yml", good_with("  name: TPE", "  name: GP"))
    assert err.field == "tuner.classArgs" and "pip install 'expmgr[gp]'" in err.message, str(err)


@needs_sklearn
def test_a_search_space_type_metis_does_not_take_is_an_error_naming_the_parameter(tmp_path: Path):
    err = load_error(tmp_path / "config.yml", good_with("  name: TPE", "  name: Metis"))
    assert err.field == "searchSpace.lr" and "parameter 'lr' has type 'loguniform'" in err.message, str(err)
    make({"name": "GP"}, {"lr": {"_type": "loguniform", "_value": [1e-4, 0.1]}}).canonical()   # GP takes it


@needs_sklearn
def test_a_bad_gp_class_arg_is_an_error_at_its_place():
    with pytest.raises(ConfigError, match="utility must be one of ei, ucb, poi") as info:
        make({"name": "GP", "class_args": {"utility": "pi"}}).canonical()
    assert "class_args" in info.value.display_field


def test_nnis_class_name_of_a_builtin_is_that_builtin_with_its_checks_and_default_direction():
    tpe = make({"className": "nni.algorithms.hpo.tpe_tuner.TpeTuner"}).canonical()
    assert tpe.tuner.name == "TPE" and tpe.tuner.class_name is None
    assert tpe.minimizes, "TPE minimizes by default, as in NNI, also when named by NNI's className"
    with pytest.raises(ConfigError, match="no_such_argument"):
        make({"className": "nni.algorithms.hpo.tpe_tuner.TpeTuner",
              "classArgs": {"no_such_argument": 1}}).canonical()

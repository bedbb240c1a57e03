from __future__ import annotations

import importlib.util
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from expmgr.algorithms import (
    BUILTIN_ASSESSORS,
    BUILTIN_TUNERS,
    Assessor,
    AlgorithmError,
    create_assessor,
    create_tuner,
    load_custom_class,
)
from expmgr.algorithms.gridsearch_tuner import GridSearchTuner
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tpe_tuner import TpeTuner
from expmgr.algorithms.tuner import OptimizeMode, Tuner


@pytest.mark.parametrize("name, cls", [
    ("TPE", TpeTuner), ("tpe", TpeTuner), ("Random", RandomTuner),
    ("RANDOM", RandomTuner), ("gridsearch", GridSearchTuner),
])
def test_builtin_tuners_are_found_by_name_in_any_case(name, cls):
    assert type(create_tuner(name, {})) is cls


def test_every_builtin_tuner_can_be_created_without_arguments():
    for name in BUILTIN_TUNERS:
        if name == "Optuna" and importlib.util.find_spec("optuna") is None:
            continue  # an optional extra; its own tests check the message without it
        if name in ("GP", "GPTuner", "Metis", "MetisTuner") and importlib.util.find_spec("sklearn") is None:
            continue  # the gp extra, likewise
        assert isinstance(create_tuner(name, None), Tuner)


def test_every_builtin_assessor_can_be_created_without_arguments():
    for name in BUILTIN_ASSESSORS:
        assert isinstance(create_assessor(name.upper(), None), Assessor)


def test_class_args_are_passed_to_the_tuner():
    tuner = create_tuner("TPE", {"optimize_mode": "maximize", "seed": 1, "tpe_args": {"gamma": 0.5}})
    assert tuner.optimize_mode is OptimizeMode.Maximize
    assert tuner.args.gamma == 0.5


def test_unknown_tuner_name_lists_the_builtin_ones():
    with pytest.raises(AlgorithmError, match="unknown tuner 'SMAC'.*Anneal, BOHB, Batch, Evolution, "
                                             "GP, GridSearch, Hyperband, Metis, Optuna, PBT, Random, TPE \\(for"):
        create_tuner("SMAC", {})


def test_unknown_assessor_name_is_an_algorithm_error():
    with pytest.raises(AlgorithmError, match="unknown assessor 'NoSuchAssessor'.*ASHA, Curvefitting, Medianstop"):
        create_assessor("NoSuchAssessor", {})


def test_bad_class_arg_value_names_the_tuner_and_the_argument():
    with pytest.raises(AlgorithmError, match="tuner 'TPE'.*optimize_mode.*'up'"):
        create_tuner("tpe", {"optimize_mode": "up"})


def test_unexpected_class_arg_names_the_tuner_and_the_argument():
    with pytest.raises(AlgorithmError, match="tuner 'Random' has no argument 'learning_rate'.*optimize_mode, seed"):
        create_tuner("random", {"learning_rate": 0.1})


def write_module(directory: Path, source: str) -> str:
    """A uniquely named module in ``directory``, so tests do not share sys.modules entries."""
    name = f"custom_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source))
    return name


@pytest.fixture
def clean_sys_path():
    saved = list(sys.path)
    yield
    sys.path[:] = saved


def test_custom_class_is_loaded_from_the_code_directory(tmp_path, clean_sys_path):
    module = write_module(tmp_path, """
        from expmgr.algorithms.tuner import Tuner

        class MyTuner(Tuner):
            def __init__(self, step=1):
                self.step = step
    """)
    cls = load_custom_class(f"{module}.MyTuner", tmp_path)
    assert cls.__name__ == "MyTuner" and cls(step=2).step == 2


def test_custom_class_in_a_package_of_the_code_directory(tmp_path, clean_sys_path):
    package = f"pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "tuners.py").write_text("class Fancy:\n    pass\n")
    assert load_custom_class(f"{package}.tuners.Fancy", tmp_path).__name__ == "Fancy"


def test_missing_custom_module_names_the_module_and_the_directory(tmp_path, clean_sys_path):
    with pytest.raises(AlgorithmError, match=r"no module 'nowhere_x1' in codeDirectory"):
        load_custom_class("nowhere_x1.MyTuner", tmp_path)


def test_missing_custom_class_names_the_class(tmp_path, clean_sys_path):
    module = write_module(tmp_path, "class Other:\n    pass\n")
    with pytest.raises(AlgorithmError, match=f"module '{module}' .* has no 'MyTuner'"):
        load_custom_class(f"{module}.MyTuner", tmp_path)


def test_custom_module_failing_to_import_reports_its_error(tmp_path, clean_sys_path):
    module = write_module(tmp_path, "import not_installed_dependency_x1\n")
    with pytest.raises(AlgorithmError, match="importing .* failed: No module named 'not_installed_dependency_x1'"):
        load_custom_class(f"{module}.MyTuner", tmp_path)


def test_class_name_without_a_module_is_an_error(tmp_path):
    with pytest.raises(AlgorithmError, match="'module.ClassName'"):
        load_custom_class("MyTuner", tmp_path)


@pytest.mark.parametrize("seed", ["abc", 1.5, -1])
def test_bad_seed_names_the_seed_argument(seed):
    with pytest.raises(AlgorithmError, match="tuner 'TPE': bad classArgs: seed must be"):
        create_tuner("TPE", {"seed": seed})


@pytest.mark.parametrize("alias, name", [
    ("BatchTuner", "Batch"), ("batchtuner", "Batch"), ("PBTTuner", "PBT"), ("pbttuner", "PBT"),
    ("GPTuner", "GP"), ("METISTUNER", "Metis"),
])
def test_nnis_aliases_are_the_builtin_they_stand_for(alias, name):
    if name in ("GP", "Metis") and importlib.util.find_spec("sklearn") is None:
        pytest.skip("the GP and Metis tuners need scikit-learn (the gp extra)")
    assert alias.lower() in {n.lower() for n in BUILTIN_TUNERS}   # so the config takes them as names
    assert type(create_tuner(alias, None)) is type(create_tuner(name, None))


def test_only_nnis_own_aliases_are_taken():
    # NNI 3.0's registry has no alias for GridSearch or TPE; neither has ours
    for name in ("GridSearchTuner", "TpeTuner"):
        with pytest.raises(AlgorithmError, match=f"unknown tuner {name!r}"):
            create_tuner(name, None)


@pytest.mark.parametrize("class_name, cls_path", [
    ("nni.algorithms.hpo.tpe_tuner.TpeTuner", "expmgr.algorithms.tpe_tuner.TpeTuner"),
    ("nni.algorithms.hpo.gridsearch_tuner.GridSearchTuner", "expmgr.algorithms.gridsearch_tuner.GridSearchTuner"),
    ("nni.algorithms.hpo.pbt_tuner.PBTTuner", "expmgr.algorithms.pbt_tuner.PbtTuner"),
    ("nni.algorithms.hpo.hyperband_advisor.Hyperband", "expmgr.algorithms.hyperband_tuner.HyperbandTuner"),
    ("nni.algorithms.hpo.bohb_advisor.bohb_advisor.BOHB", "expmgr.algorithms.bohb_tuner.BohbTuner"),
    ("nni.algorithms.hpo.medianstop_assessor.MedianstopAssessor",
     "expmgr.algorithms.medianstop_assessor.MedianstopAssessor"),
    ("nni.algorithms.hpo.gp_tuner.GPTuner", "expmgr.algorithms.gp_tuner.GpTuner"),
    ("nni.algorithms.hpo.metis_tuner.metis_tuner.MetisTuner", "expmgr.algorithms.metis_tuner.MetisTuner"),
])
def test_nnis_class_names_of_builtins_load_ours_without_nni(tmp_path, class_name, cls_path):
    module, _, name = cls_path.rpartition(".")
    if module.endswith(("gp_tuner", "metis_tuner")) and importlib.util.find_spec("sklearn") is None:
        pytest.skip("the GP and Metis tuners need scikit-learn (the gp extra)")
    cls = load_custom_class(class_name, tmp_path)
    assert f"{cls.__module__}.{cls.__name__}" == cls_path

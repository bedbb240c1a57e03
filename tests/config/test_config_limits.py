"""Limits on config values and files (docs/config.md, "Limits"): each is refused with the
file, line and field, in a file, in Python and through ``expctl create`` (exit 2, nothing
on disk), instead of hanging, running out of memory or failing once the experiment runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from expmgr.config import ConfigError, ExperimentConfig, validate_search_space
from tests.helpers.cli_create import BASE, expctl

from tests.helpers.config import GOOD, good_with, load_error, write

HUGE = 10**40


def alias_bomb(levels: int) -> str:
    """A "billion laughs": each level lists the previous one nine times."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("old,new,field,fragment", [
    ("trialConcurrency: 2", "trialConcurrency: 10001", "trialConcurrency", "at most 10,000"),
    ("trialConcurrency: 2", f"trialConcurrency: {HUGE}", "trialConcurrency", "an integer of about 41 digits"),
    ("trialConcurrency: 2", "trialConcurrency: 1.0e+35", "trialConcurrency", "positive integer"),
    ("trialConcurrency: 2", "trialConcurrency: 3.0", "trialConcurrency", "positive integer"),
    ("trialConcurrency: 2", "trialConcurrency: true", "trialConcurrency", "positive integer"),
    ("maxTrialNumber: 10", "maxTrialNumber: 1000000001", "maxTrialNumber", "at most 1,000,000,000"),
    ("maxTrialNumber: 10", "maxTrialNumber: 10\nmaxExperimentDuration: 3651d", "maxExperimentDuration",
     "at most 3650d"),
    ("maxTrialNumber: 10", f"maxTrialNumber: 10\nmaxTrialDuration: {HUGE}", "maxTrialDuration", "at most 3650d"),
    ("maxTrialNumber: 10", "maxTrialNumber: 10\nmaxTrialRetries: 1001", "maxTrialRetries", "at most 1,000"),
])
def test_values_above_their_limit_are_refused_at_their_line(tmp_path: Path, old, new, field, fragment):
    path = tmp_path / "config.yml"
    err = load_error(path, good_with(old, new))
    assert err.field == field and fragment in err.message, str(err)
    assert err.line == GOOD.splitlines().index(old) + 1 + new.count("\n"), str(err)
    assert str(err).startswith(f"{path}:{err.line}:{err.column}: {field}: ")


@pytest.mark.parametrize("space,field,fragment", [
    ({"x": {"_type": "randint", "_value": [0, 2**63]}}, "searchSpace.x._value[1]", "64-bit integer"),
    ({"x": {"_type": "randint", "_value": [-2**63 - 1, 0]}}, "searchSpace.x._value[0]", "64-bit integer"),
    ({"x": {"_type": "uniform", "_value": [0, 10**400]}}, "searchSpace.x._value[1]", "finite numbers"),
    ({"x": {"_type": "uniform", "_value": [-1e308, 1e308]}}, "searchSpace.x._value", "too wide"),
])
def test_search_space_values_beyond_what_tuners_take_are_refused(tmp_path: Path, space, field, fragment):
    write(tmp_path / "space.json", json.dumps(space))
    path = tmp_path / "config.yml"
    err = load_error(path, "searchSpaceFile: space.json\ntrialCommand: x\ntrialConcurrency: 1\ntuner: {name: TPE}\n")
    assert err.field == field and fragment in err.message, str(err)
    assert err.file == Path("space.json") or err.file == tmp_path / "space.json", str(err)


@pytest.mark.parametrize("space,field,fragment", [
    ({"x": {"_type": "choice", "_value": list(range(100_001))}}, "searchSpace.x._value", "at most 100,000 options"),
    ({f"p{i}": {"_type": "uniform", "_value": [0, 1]} for i in range(10_001)}, "searchSpace.p10000",
     "at most 10,000 parameters"),
])
def test_search_spaces_too_large_to_be_meant_are_refused(space, field, fragment):
    with pytest.raises(ConfigError) as info:
        validate_search_space(space)
    assert info.value.field == field and fragment in info.value.message, str(info.value)


def test_gridsearch_grid_larger_than_a_million_is_refused_and_a_million_is_not(tmp_path: Path):
    config = ExperimentConfig(trial_command="x", trial_concurrency=1, tuner={"name": "GridSearch"},
                              search_space={"a": {"_type": "randint", "_value": [0, 1000]},
                                            "b": {"_type": "quniform", "_value": [1, 1000, 1]}})
    assert config.canonical().search_space == config.search_space   # 1000 x 1000: the limit itself
    config.search_space["b"]["_value"] = [0, 1000, 1]                  # 1000 x 1001
    with pytest.raises(ConfigError, match="more than 1,000,000 combinations") as info:
        config.canonical()
    assert info.value.display_field == "ExperimentConfig.search_space"
    config.search_space = {"a": {"_type": "randint", "_value": [0, 2**62]}}   # would fill the memory
    with pytest.raises(ConfigError, match="more than 1,000,000 combinations"):
        config.canonical()


def test_python_built_config_has_the_same_limits():
    config = ExperimentConfig(trial_command="x", trial_concurrency=10**35, tuner={"name": "TPE"},
                              search_space={"x": {"_type": "uniform", "_value": [0, 1]}})
    with pytest.raises(ConfigError, match=r"^ExperimentConfig.trial_concurrency: at most 10,000"):
        config.canonical()


def test_yaml_alias_bomb_is_refused_quickly_at_its_line(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, GOOD + alias_bomb(7))   # 9**7 = 4.8 million values once expanded
    assert "YAML aliases expand this document to more than 1,000,000 values" in str(err)
    assert err.file == path and err.line == GOOD.count("\n") + 7, str(err)   # l6, the first to cross it


def test_many_aliases_that_stay_small_are_fine(tmp_path: Path):
    write(tmp_path / "config.yml", GOOD.replace("trialConcurrency: 2", "trialConcurrency: &two 2")
          + "maxTrialRetries: *two\n")
    assert ExperimentConfig.load(tmp_path / "config.yml").max_trial_retries == 2


def test_config_file_over_one_mebibyte_is_refused(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, GOOD + "# padding\n" * (1024 * 1024 // 10 + 1))
    assert err.file == path and "larger than the limit of 1 MiB" in err.message, str(err)


def test_search_space_file_over_sixteen_mebibytes_is_refused(tmp_path: Path):
    (tmp_path / "space.json").write_text('{"x": {"_type": "choice", "_value": [1]}}' + " " * (16 * 1024 * 1024))
    err = load_error(tmp_path / "config.yml", "searchSpaceFile: space.json\ntrialCommand: x\n"
                                              "trialConcurrency: 1\ntuner: {name: TPE}\n")
    assert "search space file is larger than the limit of 16 MiB" in str(err)


def test_yaml_nested_too_deeply_is_an_error_not_a_traceback(tmp_path: Path):
    err = load_error(tmp_path / "config.yml", GOOD + "extra: " + "[" * 1200 + "]" * 1200 + "\n")
    assert "nested too deeply" in str(err)


def test_experiment_working_directory_that_is_a_file_is_refused_at_its_line(tmp_path: Path):
    (tmp_path / "afile").write_text("")
    path = tmp_path / "config.yml"
    for value in ("afile", "afile/below"):
        err = load_error(path, GOOD + f"experimentWorkingDirectory: {value}\n")
        assert (err.line, err.field) == (13, "experimentWorkingDirectory"), str(err)
        assert f"not a directory: {tmp_path / value}" in err.message


@pytest.mark.parametrize("name,config,space,where", [
    ("alias bomb", BASE + alias_bomb(7), None, "config.yml:13:1"),
    ("working directory is a file", BASE + "experimentWorkingDirectory: trial.py\n", None, "config.yml:7:29"),
    ("randint beyond int64", BASE, {"x": {"_type": "randint", "_value": [0, 2**64]}}, "space.json:1:42"),
    ("huge grid", BASE.replace("name: Random", "name: GridSearch"),
     {"x": {"_type": "randint", "_value": [0, 10**12]}}, "space.json:1:7"),
])
def test_expctl_create_refuses_each_with_file_line_column_exit_2_and_nothing_on_disk(tmp_path: Path, name, config,
                                                                                       space, where):
    (tmp_path / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(1.0)\n")
    (tmp_path / "space.json").write_text(json.dumps(space or {"x": {"_type": "uniform", "_value": [0, 1]}}))
    (tmp_path / "config.yml").write_text(config)
    home = tmp_path / "home"
    result = expctl("create", "--config", "config.yml", "--port", "0", "--foreground",
                    "--exit-when-done", home=home, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{where}:" in result.stderr.strip().splitlines()[-1], result.stderr
    assert not home.exists(), "a refused config leaves nothing on disk"


def test_integer_too_long_to_read_is_an_error_not_a_traceback(tmp_path: Path):
    err = load_error(tmp_path / "config.yml", good_with("trialConcurrency: 2", "trialConcurrency: " + "9" * 5000))
    assert "invalid YAML: Exceeds the limit (4300 digits)" in str(err)


def test_non_finite_choice_option_is_refused_at_its_position(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, good_with("lr: {_type: loguniform, _value: [0.0001, 0.1]}",
                                     "lr: {_type: choice, _value: [0.1, .nan]}"))
    assert (err.line, err.field) == (3, "searchSpace.lr._value[1]"), str(err)
    assert "NaN and infinities are not" in err.message


def test_trial_process_limit_is_a_count_from_0_off_to_linuxs_largest_pid_max(tmp_path):
    from expmgr.config.resolved import ResolvedConfig

    def local(**service):
        return ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 t.py",
                                trial_code_directory=tmp_path, trial_concurrency=1, tuner={"name": "Random"},
                                training_service={"platform": "local", **service})
    assert ResolvedConfig.from_config(local()).training_service.trial_process_limit == 4096
    assert ResolvedConfig.from_config(local(trial_process_limit=0)).training_service.trial_process_limit == 0
    assert "trialProcessLimit" not in local().canonical().to_dict()["trainingService"], "a default is not written"
    for bad, message in [(-1, "expected an integer >= 0, got -1"), (4_194_305, "at most 4,194,304"),
                         (True, "expected an integer >= 0"), ("10", "expected an integer >= 0")]:
        with pytest.raises(ConfigError, match="trial_process_limit: " + message):
            local(trial_process_limit=bad).canonical()


def test_trial_warm_start_is_auto_off_or_a_list_of_modules_and_errors_name_the_line(tmp_path):
    from expmgr.config.resolved import ResolvedConfig

    def resolved(text: str):
        path = write(tmp_path / "config.yml", GOOD + text)
        return ResolvedConfig.from_config(ExperimentConfig.load(path)).training_service
    assert resolved("").warm_start is None, "off by default"
    assert resolved("  trialWarmStart: off\n").warm_start is None
    assert resolved("  trialWarmStart: auto\n").warm_start == ()
    assert resolved("  trialWarmStart: [numpy, sklearn.ensemble]\n").warm_start == ("numpy", "sklearn.ensemble")
    for bad, field, message in [("yes", "trainingService.trialWarmStart", "expected auto, off, or a list"),
                                ("[numpy, 'not a module']", "trainingService.trialWarmStart[1]",
                                 "'not a module' is not a module name"),
                                ("[nni]", "trainingService.trialWarmStart[0]", "nni cannot be preloaded")]:
        err = load_error(tmp_path / "config.yml", GOOD + f"  trialWarmStart: {bad}\n")
        assert (err.line, err.field) == (13, field) and message in err.message, str(err)


def test_reattach_window_is_a_duration_or_zero_not_with_a_warm_start_and_errors_name_the_line(tmp_path):
    from expmgr.config.resolved import ResolvedConfig

    def resolved(text: str):
        path = write(tmp_path / "config.yml", GOOD + text)
        return ResolvedConfig.from_config(ExperimentConfig.load(path)).training_service
    assert resolved("").reattach_window == 0, "trials end with their manager by default"
    assert resolved("  reattachWindow: 0\n").reattach_window == 0
    assert resolved("  reattachWindow: 10m\n").reattach_window == 600
    assert resolved("  reattachWindow: 90\n").reattach_window == 90
    for bad, message in [("-1", "a duration must be 0 or more seconds"), ("ten", "expected a duration"),
                         ("yes", "expected a duration")]:
        err = load_error(tmp_path / "config.yml", GOOD + f"  reattachWindow: {bad}\n")
        assert (err.line, err.field) == (13, "trainingService.reattachWindow") and message in err.message, str(err)
    err = load_error(tmp_path / "config.yml", GOOD + "  trialWarmStart: auto\n  reattachWindow: 10m\n")
    assert err.field == "trainingService.reattachWindow" and "trainingService.trialWarmStart" in err.message, str(err)

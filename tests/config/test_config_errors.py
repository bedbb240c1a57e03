"""Bad config files: each error names the file, the line and column, the field and what is wrong."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.config import ConfigError, ExperimentConfig

from tests.helpers.config import GOOD, assert_error, good_with, load_error, write


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config.yml"


def test_good_baseline_loads(config_path: Path) -> None:
    write(config_path, GOOD)
    assert ExperimentConfig.load(config_path).trial_concurrency == 2


# -- keys ------------------------------------------------------------------------------------

def test_unknown_top_level_key_names_key_position_and_suggests_close_name(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialConcurrency: 2", "trialConcurency: 2"))
    assert_error(err, config_path, 5, "trialConcurency", "did you mean 'trialConcurrency'?", column=1)


def test_unknown_key_with_no_close_name_lists_known_keys(config_path: Path) -> None:
    err = load_error(config_path, good_with("maxTrialNumber: 10", "banana: 10"))
    assert_error(err, config_path, 6, "banana", "known keys: experimentName,", column=1)


def test_unknown_key_in_tuner_names_nested_path(config_path: Path) -> None:
    err = load_error(config_path, good_with("  classArgs:", "  clasArgs:"))
    assert_error(err, config_path, 9, "tuner.clasArgs", "did you mean 'classArgs'?", column=3)


def test_unknown_key_in_training_service(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "  useActiveGPUs: true\n")
    assert_error(err, config_path, 13, "trainingService.useActiveGPUs", "did you mean 'useActiveGpu'?", column=3)


def test_nni_v1_key_says_what_to_write_instead(config_path: Path) -> None:
    err = load_error(config_path, good_with("maxTrialNumber: 10", "maxTrialNum: 10"))
    assert_error(err, config_path, 6, "maxTrialNum", "in v2 it is maxTrialNumber")


def test_same_key_in_camel_and_snake_case_is_an_error(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "trial_concurrency: 3\n")
    assert_error(err, config_path, 13, "trial_concurrency", "'trialConcurrency' is given twice")


# -- values ----------------------------------------------------------------------------------

def test_wrong_type_for_concurrency_names_value_position(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialConcurrency: 2", 'trialConcurrency: "two"'))
    assert_error(err, config_path, 5, "trialConcurrency", "expected a positive integer, got 'two'", column=19)


def test_negative_concurrency_names_file_line_and_field(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialConcurrency: 2", "trialConcurrency: -1"))
    assert str(err) == f"{config_path}:5:19: trialConcurrency: expected a positive integer, got -1"
    assert (err.file, err.line, err.column, err.field) == (config_path, 5, 19, "trialConcurrency")


def test_zero_max_trial_number_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, good_with("maxTrialNumber: 10", "maxTrialNumber: 0"))
    assert_error(err, config_path, 6, "maxTrialNumber", "expected a positive integer, got 0", column=17)


def test_bad_duration_unit_says_expected_format(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "maxExperimentDuration: 10x\n")
    assert_error(err, config_path, 13, "maxExperimentDuration", "unknown unit 'x'", column=24)
    assert "30s, 10m, 1.5h or 2d" in err.message


@pytest.mark.parametrize("bad", ["-5m", "ten minutes", "0s", "1h30m"])
def test_malformed_trial_duration_is_rejected(config_path: Path, bad: str) -> None:
    err = load_error(config_path, GOOD + f"maxTrialDuration: {bad}\n")
    assert_error(err, config_path, 13, "maxTrialDuration", "30s, 10m, 1.5h or 2d")


def test_bad_log_level_lists_levels_and_suggests(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "logLevel: warn\n")
    assert_error(err, config_path, 13, "logLevel", "did you mean 'warning'?")
    assert "trace, debug, info, warning, error, fatal" in err.message


def test_debug_must_be_a_boolean(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "debug: yes\n")
    assert_error(err, config_path, 13, "debug", "expected true or false, got 'yes'")


def test_use_annotation_true_is_not_supported(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "useAnnotation: true\n")
    assert_error(err, config_path, 13, "useAnnotation", "not supported")


def test_experiment_type_other_than_hpo_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "experimentType: nas\n")
    assert_error(err, config_path, 13, "experimentType", "only 'hpo'")


def test_missing_trial_command_points_at_the_top_mapping(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialCommand: python3 trial.py\n", ""))
    assert_error(err, config_path, 1, "trialCommand", "required", column=1)


def test_empty_trial_command_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialCommand: python3 trial.py", 'trialCommand: "  "'))
    assert_error(err, config_path, 4, "trialCommand", "expected a non-empty command")


def test_missing_trial_concurrency_is_required(config_path: Path) -> None:
    err = load_error(config_path, good_with("trialConcurrency: 2\n", ""))
    assert_error(err, config_path, 1, "trialConcurrency", "required")


def test_missing_trial_code_directory_names_resolved_path(config_path: Path, tmp_path: Path) -> None:
    err = load_error(config_path, GOOD + "trialCodeDirectory: src\n")
    assert_error(err, config_path, 13, "trialCodeDirectory", f"directory not found: {tmp_path / 'src'}", column=21)


def test_trial_code_directory_that_is_a_file_is_rejected(config_path: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text("")
    err = load_error(config_path, GOOD + "trialCodeDirectory: trial.py\n")
    assert_error(err, config_path, 13, "trialCodeDirectory", "not a directory")


# -- tuner -----------------------------------------------------------------------------------

def test_unknown_tuner_name_suggests_and_lists_builtins(config_path: Path) -> None:
    err = load_error(config_path, good_with("  name: TPE", "  name: TPEE"))
    assert_error(err, config_path, 8, "tuner.name", "unknown tuner 'TPEE'; did you mean 'TPE'?", column=9)
    assert "known tuners: Random, GridSearch, TPE" in err.message


def test_wrong_optimize_mode_names_class_args_path(config_path: Path) -> None:
    err = load_error(config_path, good_with("optimize_mode: maximize", "optimize_mode: max"))
    assert_error(err, config_path, 10, "tuner.classArgs.optimize_mode",
                 "expected 'maximize' or 'minimize', got 'max'", column=20)


def test_missing_tuner_is_required(config_path: Path) -> None:
    text = good_with("tuner:\n  name: TPE\n  classArgs:\n    optimize_mode: maximize\n", "")
    err = load_error(config_path, text)
    assert_error(err, config_path, 1, "tuner", "required (e.g. tuner: {name: TPE})")


def test_tuner_with_both_name_and_class_name_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, good_with("  name: TPE", "  name: TPE\n  className: my.Tuner"))
    assert_error(err, config_path, 9, "tuner.className", "not both")


def test_tuner_class_name_must_be_module_dot_class(config_path: Path) -> None:
    err = load_error(config_path, good_with("  name: TPE", "  className: MyTuner"))
    assert_error(err, config_path, 8, "tuner.className", "expected module.ClassName")


def test_tuner_code_directory_must_exist(config_path: Path, tmp_path: Path) -> None:
    err = load_error(config_path, good_with("  name: TPE", "  className: my.Tuner\n  codeDirectory: tuners"))
    assert_error(err, config_path, 9, "tuner.codeDirectory", f"directory not found: {tmp_path / 'tuners'}")


def test_tuner_given_as_a_string_is_rejected(config_path: Path) -> None:
    text = good_with("tuner:\n  name: TPE\n  classArgs:\n    optimize_mode: maximize\n", "tuner: TPE\n")
    err = load_error(config_path, text)
    assert_error(err, config_path, 7, "tuner", "expected a mapping", column=8)


def test_unknown_assessor_name_guesses_and_lists_the_builtin_ones(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "assessor:\n  name: MedianStopper\n")
    assert_error(err, config_path, 14, "assessor.name", "did you mean 'Medianstop'?")
    assert "ASHA" in err.message and "Curvefitting" in err.message


# -- training service ------------------------------------------------------------------------

def test_unsupported_platform_lists_supported_ones(config_path: Path) -> None:
    err = load_error(config_path, good_with("platform: local", "platform: openpai"))
    assert_error(err, config_path, 12, "trainingService.platform",
                 "not supported: openpai (NNI's openpai training service); expmgr's platforms: local", column=13)


def test_misspelt_platform_suggests_local(config_path: Path) -> None:
    err = load_error(config_path, good_with("platform: local", "platform: lcoal"))
    assert_error(err, config_path, 12, "trainingService.platform", "did you mean 'local'?")


def test_training_service_list_of_one_points_inside_the_item(config_path: Path) -> None:
    text = good_with("trainingService:\n  platform: local\n",
                     "trainingService:\n  - platform: local\n    maxTrialNumberPerGpu: 0\n")
    err = load_error(config_path, text)
    assert_error(err, config_path, 13, "trainingService.maxTrialNumberPerGpu", "positive integer", column=27)


def test_bad_gpu_indices_are_rejected(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "  gpuIndices: [0, -1]\n")
    assert_error(err, config_path, 13, "trainingService.gpuIndices[1]", "got -1")


# -- the file itself -------------------------------------------------------------------------

def test_bad_yaml_syntax_gives_position_and_problem(config_path: Path) -> None:
    err = load_error(config_path, "trialCommand: python3 trial.py\nsearchSpace: {lr: [1, 2\ntrialConcurrency: 1\n")
    assert err.file == config_path
    assert (err.line, err.column) == (3, 17)
    assert err.message.startswith("invalid YAML: ")
    assert str(err).startswith(f"{config_path}:3:17: invalid YAML: ")


def test_duplicate_yaml_key_is_a_syntax_error(config_path: Path) -> None:
    err = load_error(config_path, GOOD + "trialConcurrency: 3\n")
    assert (err.file, err.line) == (config_path, 13)
    assert "duplicate key" in err.message


def test_top_level_list_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, "- trialCommand: python3 trial.py\n- trialConcurrency: 1\n")
    assert (err.file, err.line, err.column) == (config_path, 1, 1)
    assert "top level must be a mapping of config keys, got a list" in err.message


def test_empty_file_is_rejected(config_path: Path) -> None:
    err = load_error(config_path, "# nothing yet\n")
    assert err.file == config_path and "empty" in err.message


def test_missing_config_file_names_it(tmp_path: Path) -> None:
    err = load_error(tmp_path / "nope.yml")
    assert err.file == tmp_path / "nope.yml"
    assert str(err) == f"{tmp_path / 'nope.yml'}: config file not found"


def test_config_path_that_is_a_directory_is_rejected(tmp_path: Path) -> None:
    err = load_error(tmp_path)
    assert err.file == tmp_path and "directory" in err.message


def test_file_name_is_shown_as_the_user_gave_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "config.yml", good_with("trialConcurrency: 2", "trialConcurrency: 0"))
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.load("config.yml")
    assert str(info.value) == "config.yml:5:19: trialConcurrency: expected a positive integer, got 0"


def test_first_error_in_document_order_is_reported(config_path: Path) -> None:
    two_errors = good_with("trialConcurrency: 2", "trialConcurrency: 0")
    err = load_error(config_path, two_errors + "logLevel: bogus\n")
    assert (err.line, err.field) == (5, "trialConcurrency")
    err = load_error(config_path, "logLevel: bogus\n" + two_errors)
    assert (err.line, err.field) == (1, "logLevel")


def test_config_error_survives_pickling(config_path: Path) -> None:
    import pickle

    err = load_error(config_path, good_with("trialConcurrency: 2", "trialConcurrency: -1"))
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.file, copy.line, copy.column, copy.field, str(copy)) == (
        err.file, err.line, err.column, err.field, str(err))


def test_bad_class_arg_value_of_a_builtin_tuner_is_reported_at_class_args(tmp_path: Path):
    config_path = tmp_path / "config.yml"
    err = load_error(config_path, good_with("    optimize_mode: maximize", "    optimize_mode: maximize\n    seed: -1"))
    assert_error(err, config_path, 9, "tuner.classArgs", "seed must be a non-negative integer or null, got -1")


def test_unknown_class_arg_of_a_builtin_tuner_is_reported_at_its_key_with_a_guess(tmp_path: Path):
    config_path = tmp_path / "config.yml"
    err = load_error(config_path, good_with("    optimize_mode: maximize", "    optimize_mode: maximize\n    sed: 1"))
    assert_error(err, config_path, 11, "tuner.classArgs.sed", "unknown tuner TPE argument 'sed'; did you mean 'seed'?",
                 column=5)


def test_unknown_class_arg_of_a_builtin_assessor_is_reported_at_its_key(tmp_path: Path):
    config_path = tmp_path / "config.yml"
    err = load_error(config_path, GOOD + "assessor:\n  name: Medianstop\n  classArgs: {start_stpe: 3}\n")
    assert_error(err, config_path, 15, "assessor.classArgs.start_stpe", "did you mean 'start_step'?")


# -- what YAML can write and a config never means ------------------------------------------------

YAML_ODDITIES = {
    # appended as lines 13+ of GOOD (or replacing a line): (text, line, column, message fragment)
    "complex_key": ("? [a, b]\n: 1\n", 13, 3, "keys must be strings, got a list"),
    "complex_mapping_key": ("? {a: 1}\n: 1\n", 13, 3, "keys must be strings, got a mapping"),
    # ruamel places an aliased key at its anchor
    "alias_to_a_list_as_key": ("debug: &flags [1]\n*flags : 2\n", 13, 8, "keys must be strings, got a list"),
    "integer_key": ("1: x\n", 13, 1, "keys must be strings, got 1"),
    "null_key": ("null: x\n", 13, 1, "keys must be strings, got None"),
    "boolean_key": ("true: x\n", 13, 1, "keys must be strings, got True"),
    "nested_integer_key": ("assessor: {name: Medianstop, classArgs: {1: x}}\n", 13, 42, "keys must be strings, got 1"),
    "nested_null_key": ("assessor:\n  name: Medianstop\n  classArgs:\n    null: x\n", 16, 5,
                        "keys must be strings, got None"),
    "python_object_tag": ("assessor: !!python/object:os.system {}\n", 13, 11,
                          "the YAML tag tag:yaml.org,2002:python/object:os.system is not supported"),
    "custom_tag": ("nniManagerIp: !custom x\n", 13, 15, "the YAML tag !custom is not supported"),
    "binary": ("nniManagerIp: !!binary aGVsbG8=\n", 13, 15, "got binary data (!!binary)"),
    "date": ("nniManagerIp: 2020-01-01\n", 13, 15, "got date '2020-01-01'; quote it"),
    "set": ("nniManagerIp: !!set {a, b}\n", 13, 15, "got CommentedSet"),
}


@pytest.mark.parametrize("text, line, column, fragment", YAML_ODDITIES.values(), ids=YAML_ODDITIES.keys())
def test_yaml_oddities_are_config_errors_at_their_line(config_path: Path, text: str, line: int, column: int,
                                                       fragment: str) -> None:
    err = load_error(config_path, GOOD + text)
    assert (err.file, err.line, err.column) == (config_path, line, column), str(err)
    assert fragment in err.message, str(err)


def test_a_complex_key_in_a_search_space_file_is_an_error_at_its_line(tmp_path: Path) -> None:
    space = write(tmp_path / "space.yaml", "lr: {_type: uniform, _value: [0, 1]}\n? [a]\n: {_type: choice, _value: [1]}\n")
    err = load_error(tmp_path / "config.yml", good_with("searchSpace:", "searchSpaceFile: space.yaml\nx:")
                     .replace("x:\n  lr: {_type: loguniform, _value: [0.0001, 0.1]}\n", ""))
    assert (err.file, err.line) == (space, 2) and "keys must be strings, got a list" in err.message, str(err)


def test_a_string_tag_is_a_string(config_path: Path) -> None:
    write(config_path, GOOD.replace("experimentName: demo", "experimentName: !!str 5"))
    assert ExperimentConfig.load(config_path).experiment_name == "5"


# -- NUL characters: no command, path or environment variable can hold one ----------------------

NULS = {
    # replacing a line of GOOD, or appended as line 13+: (old line or None, new text, line, field)
    "trial_command": ("trialCommand: python3 trial.py", 'trialCommand: "python3 trial.py\\0 --x"', 4, "trialCommand"),
    "code_directory": (None, 'trialCodeDirectory: "code\\0dir"', 13, "trialCodeDirectory"),
    "working_directory": (None, 'experimentWorkingDirectory: "home\\0"', 13, "experimentWorkingDirectory"),
    "class_args": ("    optimize_mode: maximize", '    optimize_mode: maximize\n    seed_name: "a\\0b"', 11,
                   "tuner.classArgs.seed_name"),
    "ray_env_var": ("  platform: local", '  platform: ray\n  runtimeEnv: {env_vars: {A: "x\\0y"}}', 13,
                    "trainingService.runtimeEnv.env_vars.A"),
    "search_space_file": ("searchSpace:\n  lr: {_type: loguniform, _value: [0.0001, 0.1]}",
                          'searchSpaceFile: "space\\0.json"', 2, "searchSpaceFile"),
}


@pytest.mark.parametrize("old, new, line, field", NULS.values(), ids=NULS.keys())
def test_a_nul_in_a_command_path_or_env_value_is_refused_at_load_with_its_line(config_path: Path, old: str | None,
                                                                               new: str, line: int, field: str) -> None:
    text = GOOD + new + "\n" if old is None else GOOD.replace(old, new)
    assert text != GOOD
    err = load_error(config_path, text)
    assert (err.file, err.line, err.field) == (config_path, line, field), str(err)
    assert "NUL character" in err.message, str(err)


def test_a_nul_from_python_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trial_command: contains a NUL character"):
        ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3\0 t.py",
                         trial_code_directory=tmp_path, trial_concurrency=1, tuner={"name": "Random"}).canonical()

"""Search spaces in NNI's format, inline or in a searchSpaceFile: every bad entry is named and located."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from expmgr.config import ConfigError, ExperimentConfig, validate_search_space

from tests.helpers.config import load_error, write

HEAD = """\
trialCommand: python3 trial.py
trialConcurrency: 1
tuner: {name: TPE}
searchSpace:
"""


def column_of(text: str, line: int, marker: str) -> int:
    return text.splitlines()[line - 1].index(marker) + 1


# (entry on line 5, field below searchSpace.lr, message fragment, text the column points at)
BAD_ENTRIES = {
    "unknown_type": ("{_type: unifrom, _value: [0, 1]}", "_type", "did you mean 'uniform'?", "unifrom"),
    "type_in_wrong_case": ("{_type: Uniform, _value: [0, 1]}", "_type", "write 'uniform'", "Uniform"),
    "missing_type": ("{_value: [0, 1]}", "_type", "required", "lr"),
    "missing_value": ("{_type: uniform}", "_value", "required", "lr"),
    "extra_key": ("{_type: uniform, _value: [0, 1], _vaule: 2}", "_vaule", "unknown key", "_vaule"),
    "entry_not_mapping": ("0.1", "", "expected {_type: ..., _value: [...]}", "0.1"),
    "value_not_list": ("{_type: uniform, _value: 3}", "_value", "needs a list [low, high]", "3}"),
    "choice_empty": ("{_type: choice, _value: []}", "_value", "non-empty list of options", "[]"),
    "choice_not_list": ("{_type: choice, _value: adam}", "_value", "non-empty list of options", "adam"),
    "randint_reversed": ("{_type: randint, _value: [10, 1]}", "_value", "lower < upper", "[10, 1]"),
    "randint_float": ("{_type: randint, _value: [1, 2.5]}", "_value[1]", "needs integers", "2.5"),
    "uniform_arity": ("{_type: uniform, _value: [0, 1, 2]}", "_value", "needs 2 values [low, high], got 3", "[0, 1, 2]"),
    "uniform_string": ("{_type: uniform, _value: [0, high]}", "_value[1]", "needs numbers", "high"),
    "uniform_equal_bounds": ("{_type: uniform, _value: [1, 1]}", "_value", "low < high", "[1, 1]"),
    "quniform_zero_q": ("{_type: quniform, _value: [0, 10, 0]}", "_value[2]", "q > 0, got q = 0", "0]"),
    "quniform_arity": ("{_type: quniform, _value: [0, 10]}", "_value", "needs 3 values [low, high, q]", "[0, 10]"),
    "loguniform_zero_low": ("{_type: loguniform, _value: [0, 1]}", "_value[0]", "0 < low", "0, 1]"),
    "qloguniform_negative_q": ("{_type: qloguniform, _value: [1, 100, -1]}", "_value[2]", "q > 0", "-1"),
    "normal_zero_sigma": ("{_type: normal, _value: [0, 0]}", "_value[1]", "sigma > 0", "0]"),
    "qnormal_zero_q": ("{_type: qnormal, _value: [0, 1, 0]}", "_value[2]", "q > 0", "0]"),
    "lognormal_negative_sigma": ("{_type: lognormal, _value: [0, -2]}", "_value[1]", "sigma > 0", "-2"),
    "qlognormal_arity": ("{_type: qlognormal, _value: [0, 1]}", "_value", "needs 3 values [mu, sigma, q]", "[0, 1]"),
}


@pytest.mark.parametrize("entry,subfield,fragment,marker", BAD_ENTRIES.values(), ids=BAD_ENTRIES.keys())
def test_bad_inline_entry_names_config_line_field_and_problem(
        tmp_path: Path, entry: str, subfield: str, fragment: str, marker: str) -> None:
    path = tmp_path / "config.yml"
    text = HEAD + f"  lr: {entry}\n"
    err = load_error(path, text)
    field = "searchSpace.lr" + (f".{subfield}" if subfield else "")
    assert err.file == path, str(err)
    assert err.field == field, str(err)
    assert err.line == 5, str(err)
    assert err.column == column_of(text, 5, marker), str(err)
    assert fragment in err.message, str(err)


def test_nested_choice_entry_is_validated_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    text = HEAD + """\
  model:
    _type: choice
    _value:
      - _name: linear
      - _name: mlp
        hidden: {_type: randint, _value: [64, 8]}
"""
    err = load_error(path, text)
    assert (err.file, err.line, err.column) == (path, 10, column_of(text, 10, "[64, 8]"))
    assert err.field == "searchSpace.model._value[1].hidden._value"
    assert "lower < upper" in err.message


def test_nested_choice_options_and_plain_values_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yml", HEAD + """\
  model:
    _type: choice
    _value:
      - _name: linear
      - _name: mlp
        hidden: {_type: randint, _value: [8, 64]}
        act: {_type: choice, _value: [relu, tanh]}
      - 3
      - {plain: dict}
""")
    space = ExperimentConfig.load(path).canonical().search_space
    assert space["model"]["_value"][1]["hidden"] == {"_type": "randint", "_value": [8, 64]}


def test_empty_search_space_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    err = load_error(path, HEAD.replace("searchSpace:\n", "searchSpace: {}\n"))
    assert (err.file, err.line, err.field) == (path, 4, "searchSpace")
    assert "empty" in err.message


def test_every_valid_type_is_accepted(tmp_path: Path) -> None:
    space = {
        "a": {"_type": "choice", "_value": ["x", 1, 2.5, None, True]},
        "b": {"_type": "randint", "_value": [0, 10]},
        "c": {"_type": "uniform", "_value": [-1, 1.5]},
        "d": {"_type": "quniform", "_value": [0, 10, 2]},
        "e": {"_type": "loguniform", "_value": [1e-5, 1e-1]},
        "f": {"_type": "qloguniform", "_value": [1, 1000, 10]},
        "g": {"_type": "normal", "_value": [0, 1]},
        "h": {"_type": "qnormal", "_value": [0, 1, 0.5]},
        "i": {"_type": "lognormal", "_value": [0, 1]},
        "j": {"_type": "qlognormal", "_value": [0, 1, 1]},
    }
    validate_search_space(space)
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(space, indent=2))
    path = write(tmp_path / "config.yml", HEAD.replace("searchSpace:\n", "searchSpaceFile: space.json\n"))
    assert ExperimentConfig.load(path).canonical().search_space == space


# -- searchSpaceFile -------------------------------------------------------------------------

def file_config(tmp_path: Path, space_file: str) -> Path:
    return write(tmp_path / "config.yml", HEAD.replace("searchSpace:\n", f"searchSpaceFile: {space_file}\n"))


def test_bad_entry_in_json_file_names_that_file_and_position(tmp_path: Path) -> None:
    space = tmp_path / "search_space.json"
    space.write_text('{\n  "batch_size": {"_type": "choice", "_value": [16, 32]},\n'
                     '  "lr": {"_type": "uniform", "_value": [0.1, 0.01]}\n}\n')
    err = load_error(file_config(tmp_path, "search_space.json"))
    assert err.file == space
    assert (err.line, err.column) == (3, 40)
    assert err.field == "searchSpace.lr._value"
    assert str(err) == f"{space}:3:40: searchSpace.lr._value: uniform needs low < high, got [0.1, 0.01]"


def test_bad_entry_in_yaml_file_names_that_file_and_position(tmp_path: Path) -> None:
    space = write(tmp_path / "space.yaml", """\
        # learning rate and friends
        lr:
          _type: normal
          _value: [0.1, -1]
        """)
    err = load_error(file_config(tmp_path, "space.yaml"))
    assert (err.file, err.line, err.column, err.field) == (space, 4, 17, "searchSpace.lr._value[1]")
    assert "sigma > 0" in err.message


def test_invalid_json_in_search_space_file_gives_json_position(tmp_path: Path) -> None:
    space = tmp_path / "search_space.json"
    space.write_text('{\n  "lr": {"_type": "uniform" "_value": [0, 1]}\n}\n')
    err = load_error(file_config(tmp_path, "search_space.json"))
    assert (err.file, err.line, err.column) == (space, 2, 29)
    assert err.message.startswith("invalid JSON: Expecting ','")


def test_json_with_tabs_still_validates_with_the_file_named(tmp_path: Path) -> None:
    space = tmp_path / "search_space.json"
    space.write_text('{\n\t"lr":\t{"_type": "uniform", "_value": [1, 0]}\n}\n')
    err = load_error(file_config(tmp_path, "search_space.json"))
    assert err.file == space and err.field == "searchSpace.lr._value"


def test_missing_search_space_file_points_at_the_config_value(tmp_path: Path) -> None:
    config = file_config(tmp_path, "nowhere.json")
    err = load_error(config)
    assert (err.file, err.line, err.column, err.field) == (config, 4, 18, "searchSpaceFile")
    assert f"file not found: {tmp_path / 'nowhere.json'}" in err.message


def test_empty_search_space_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "space.json").write_text("  \n")
    err = load_error(file_config(tmp_path, "space.json"))
    assert err.file == tmp_path / "space.json" and "empty" in err.message


def test_both_search_space_and_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "space.json").write_text('{"lr": {"_type": "uniform", "_value": [0, 1]}}')
    config = write(tmp_path / "config.yml", HEAD + "  lr: {_type: uniform, _value: [0, 2]}\n"
                                                   "searchSpaceFile: space.json\n")
    err = load_error(config)
    assert (err.file, err.line, err.field) == (config, 4, "searchSpace")
    assert "give either searchSpace or searchSpaceFile, not both" in err.message


def test_neither_search_space_nor_file_is_an_error(tmp_path: Path) -> None:
    config = write(tmp_path / "config.yml", HEAD.replace("searchSpace:\n", ""))
    err = load_error(config)
    assert (err.file, err.line, err.field) == (config, 1, "searchSpace")
    assert "searchSpaceFile" in err.message


def test_search_space_file_is_shown_relative_to_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "space.json").write_text('{"lr": {"_type": "uniform", "_value": [1, 0]}}')
    write(tmp_path / "exp" / "config.yml", HEAD.replace("searchSpace:\n", "searchSpaceFile: space.json\n"))
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.load("exp/config.yml")
    assert str(info.value).startswith("exp/space.json:1:39: searchSpace.lr._value: ")


# -- the public function ---------------------------------------------------------------------

def test_validate_search_space_raises_with_field_prefix() -> None:
    with pytest.raises(ConfigError) as info:
        validate_search_space({"lr": {"_type": "uniform", "_value": [1]}}, "space")
    assert info.value.field == "space.lr._value"
    assert info.value.file is None
    assert str(info.value) == "space.lr._value: uniform needs 2 values [low, high], got 1"


def test_validate_search_space_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        validate_search_space([{"_type": "choice"}])


# The issue-21 probes: spaces the type rules took, whose draws then ended the experiment.
# (entry, field below searchSpace.x, message fragment)
OVERFLOWING = {
    "quniform_q_tiny_for_its_range": ("{_type: quniform, _value: [0, 1.0e+300, 1.0e-300]}", "_value[2]",
                                      "q = 1e-300 is too small for the range"),
    "qloguniform_q_tiny_for_its_range": ("{_type: qloguniform, _value: [1.0e-300, 1.0e+300, 1.0e-300]}", "_value[2]",
                                         "q = 1e-300 is too small for the range"),
    "qnormal_q_tiny_for_its_sigma": ("{_type: qnormal, _value: [0, 1, 1.0e-300]}", "_value[2]",
                                     "too small for the range"),
    "qlognormal_exp_overflows": ("{_type: qlognormal, _value: [700, 10, 1]}", "_value",
                                 "exp(mu + 10 sigma) overflows a floating-point number"),
    "lognormal_exp_overflows": ("{_type: lognormal, _value: [700, 10]}", "_value",
                                "exp(mu + 10 sigma) overflows a floating-point number"),
    "normal_sigma_beyond_floats": ("{_type: normal, _value: [0, 1.0e+308]}", "_value",
                                   "mu ± 10 sigma, where values are drawn, overflows"),
    "randint_full_int64": ("{_type: randint, _value: [-9223372036854775808, 9223372036854775807]}", "_value",
                           "upper - lower must be at most 9223372036854775807"),
}


@pytest.mark.parametrize("tuner", ["TPE", "Random", "GridSearch", "Evolution"])
@pytest.mark.parametrize("entry,subfield,fragment", OVERFLOWING.values(), ids=OVERFLOWING.keys())
def test_a_space_whose_draws_overflow_is_refused_at_load_naming_the_parameter(
        tmp_path: Path, tuner: str, entry: str, subfield: str, fragment: str) -> None:
    path = tmp_path / "config.yml"
    text = HEAD.replace("name: TPE", f"name: {tuner}") + f"  x: {entry}\n"
    err = load_error(path, text)
    assert (err.file, err.line, err.field) == (path, 5, f"searchSpace.x.{subfield}"), str(err)
    assert fragment in err.message, str(err)


def test_spaces_near_the_overflow_limits_are_accepted_and_drawn_from(tmp_path: Path) -> None:
    from expmgr.algorithms import create_tuner

    space = {
        "q": {"_type": "quniform", "_value": [0, 1e6, 1e-9]},
        "ln": {"_type": "lognormal", "_value": [600, 10]},
        "n": {"_type": "normal", "_value": [0, 1e306]},
        "r": {"_type": "randint", "_value": [0, 2**63 - 1]},
    }
    validate_search_space(space)
    for name in ("TPE", "Random", "Evolution", "Anneal"):
        tuner = create_tuner(name, {"seed": 1})
        tuner.update_search_space(space)
        for parameter_id in range(5):
            json.dumps(tuner.generate_parameters(parameter_id), allow_nan=False)


def test_a_built_in_tuner_that_cannot_draw_refuses_the_space_at_load_naming_the_parameter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the type rules do not foresee, the tuner's own draw finds (Tuner.check_search_space)."""
    from expmgr.algorithms import random_tuner

    real_sample = random_tuner.sample

    def sample(space: dict, rng):
        if "y" in space:
            raise OverflowError("math range error")
        return real_sample(space, rng)

    monkeypatch.setattr(random_tuner, "sample", sample)
    space = {"x": {"_type": "uniform", "_value": [0, 1]}, "y": {"_type": "uniform", "_value": [0, 1]}}
    (tmp_path / "space.json").write_text(json.dumps(space))
    text = HEAD.replace("name: TPE", "name: Random").replace("searchSpace:\n", "searchSpaceFile: space.json\n")
    err = load_error(tmp_path / "config.yml", text)
    assert (err.file.name, err.line, err.field) == ("space.json", 1, "searchSpace.y"), str(err)
    assert err.message == "tuner Random: cannot use this search space (OverflowError: math range error)"


def test_every_parameter_is_drawn_once_at_load_nested_ones_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A parameter of an option the tuner's own draw may not choose is drawn too, and named
    where it is written."""
    from expmgr.algorithms.search_space import ParameterSpec

    real_sample = ParameterSpec.sample

    def sample(spec: ParameterSpec, rng):
        if spec.name == "k":
            raise OverflowError("math range error")
        return real_sample(spec, rng)

    monkeypatch.setattr(ParameterSpec, "sample", sample)
    path = tmp_path / "config.yml"
    text = HEAD + """\
  model:
    _type: choice
    _value:
      - _name: linear
      - _name: cnn
        k: {_type: uniform, _value: [0, 1]}
"""
    err = load_error(path, text)
    assert (err.line, err.field) == (10, "searchSpace.model._value[1].k"), str(err)
    assert err.message == ("tuner TPE: parameter 'model.1.k': cannot draw from it "
                           "(OverflowError: math range error)")


@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_a_json_file_is_located_as_ruamel_locates_it_without_parsing_it_again(indent) -> None:
    """Positions in a JSON search-space file come from the json scanner (fast on a huge
    file); they are those the ruamel document gave."""
    from expmgr.config._errors import Key
    from expmgr.config._loader import Source, parse_yaml

    space = {"batch_size": {"_type": "choice", "_value": [16, 32, {"nested": [1, {"a": 2}]}]},
             "m\u00e9": {"_type": "choice", "_value": [{"_name": "mlp", "hidden": {"_type": "randint",
                                                                              "_value": [8, 64]}}, "linear"]},
             "lr": {"_type": "uniform", "_value": [0.1, 0.01]}}
    text = json.dumps(space, indent=indent)
    fast, slow = Source(Path("s.json"), json_text=text), Source(Path("s.json"), parse_yaml(text, Path("s.json")))
    paths = [(), ("lr",), ("lr", "_value"), ("lr", "_value", 1), ("lr", "_value", 5), ("nowhere",),
             ("m\u00e9", "_value", 0, "hidden", "_value", 0), ("m\u00e9", "_value", 1),
             ("batch_size", "_value", 2, "nested", 1, "a"), ("batch_size", "_type"), (Key("lr"), "_value")]
    for path in paths:
        for at_key in (False, True):
            assert fast.locate(path, at_key) == slow.locate(path, at_key), (path, at_key)


def test_a_long_yaml_file_is_located_through_libyaml_as_ruamel_locates_it() -> None:
    """A YAML text past FAST_YAML_BYTES is read by libyaml into plain values; positions come
    from its node tree and are those the round-trip document gives."""
    from expmgr.config._errors import Key
    from expmgr.config._loader import FAST_YAML_BYTES, Source, _round_trip_yaml, load_yaml

    text = ("batch_size:\n  _type: choice\n  _value: [16, 32, {nested: [1, {a: 2}]}]\n"
            "m\u00e9:\n  _type: choice\n  _value:\n    - _name: mlp\n      hidden: {_type: randint, _value: [8, 64]}\n"
            "    - linear\n"
            "lr:\n  _type: uniform\n  _value:\n  - 0.1\n  - 0.01\n"
            "padding:\n  _type: choice\n  _value: [" + ", ".join(["0"] * (FAST_YAML_BYTES // 3)) + "]\n")
    assert len(text) >= FAST_YAML_BYTES
    doc, fast = load_yaml(text, Path("s.yaml"))
    assert fast.nodes is not None and type(doc) is dict, "a long text takes the libyaml path"
    slow = Source(Path("s.yaml"), _round_trip_yaml().load(text))
    assert doc == slow.doc
    paths = [(), ("lr",), ("lr", "_value"), ("lr", "_value", 1), ("lr", "_value", 5), ("nowhere",),
             ("m\u00e9", "_value", 0, "hidden", "_value", 0), ("m\u00e9", "_value", 1), ("padding", "_value", 7),
             ("batch_size", "_value", 2, "nested", 1, "a"), ("batch_size", "_type"), (Key("lr"), "_value")]
    for path in paths:
        for at_key in (False, True):
            assert fast.locate(path, at_key) == slow.locate(path, at_key), (path, at_key)


def test_a_choice_of_too_many_options_in_a_long_yaml_file_is_refused_at_its_line(tmp_path: Path) -> None:
    from expmgr.config._limits import MAX_CHOICE_OPTIONS

    (tmp_path / "space.yaml").write_text("lr: {_type: uniform, _value: [0, 1]}\nx:\n  _type: choice\n  _value: ["
                                         + ", ".join(map(str, range(MAX_CHOICE_OPTIONS + 1))) + "]\n")
    err = load_error(tmp_path / "config.yml", HEAD.split("searchSpace:")[0] + "searchSpaceFile: space.yaml\n")
    assert (Path(str(err.file)).name, err.line, err.column) == ("space.yaml", 4, 11), str(err)
    assert f"at most {MAX_CHOICE_OPTIONS:,} options" in err.message


def test_a_key_twice_in_a_json_search_space_file_is_refused_naming_it(tmp_path: Path) -> None:
    """json.loads alone keeps the last silently: the space run would not be the one read."""
    space = tmp_path / "search_space.json"
    space.write_text('{\n  "lr": {"_type": "uniform", "_value": [0, 1]},\n'
                     '  "opt": {"_type": "choice", "_value": ["a"], "_value": ["b"]}\n}\n')
    err = load_error(file_config(tmp_path, "search_space.json"))
    assert err.file == space and err.message == "invalid JSON: duplicate key '_value'"


@pytest.mark.parametrize("where", ["config", "file"])
def test_a_key_twice_in_yaml_is_refused_with_its_line(tmp_path: Path, where: str) -> None:
    """ruamel refuses a duplicate key itself (allow_duplicate_keys is left False): checked here."""
    twice = "  lr: {_type: uniform, _value: [0, 1]}\n  lr: {_type: uniform, _value: [0, 2]}\n"
    if where == "config":
        err = load_error(tmp_path / "config.yml", HEAD + twice)
        assert (err.file, err.line) == (tmp_path / "config.yml", 6)  # the second lr
    else:
        write(tmp_path / "space.yaml", twice.replace("  lr", "lr"))
        err = load_error(file_config(tmp_path, "space.yaml"))
        assert (err.file, err.line) == (tmp_path / "space.yaml", 2)
    assert "lr" in err.message and "duplicate" in err.message, str(err)

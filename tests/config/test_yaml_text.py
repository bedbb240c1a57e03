"""The experiment folder's config.yml is written without a YAML library (config._yaml_text)
and read back by the one the config loader uses: every JSON-like value survives, strings that
YAML would take for something else included."""
from __future__ import annotations

import io
import math

import pytest
from ruamel.yaml import YAML

from expmgr.config._yaml_text import yaml_text

AWKWARD_STRINGS = [
    "", " ", " leading", "trailing ", "yes", "No", "ON", "off", "y", "n", "null", "Null", "~", "true", "False",
    "123", "1e5", "0x1f", "0o17", "1_000", "1:20", "2001-12-14", ".inf", "-.inf", ".nan", "+1", "-1", "-x", "- x",
    "a: b", "a:b", "a #b", "#x", "x#y", "[x]", "{x}", "x,y", "&anchor", "*alias", "!tag", "|", ">", "'q'", '"q"',
    "%x", "@x", "`x`", "?", "? x", "a\nb", "tab\there", "back\\slash", "é", "日本", "emoji 😀", "line\u2028sep",
    "nel\x85", "del\x7f", "bom\ufeff", "bell\x07", "python3 trial.py", "/abs/path", "a=b", "x.y_z-1$",
]


def read_back(text: str) -> object:
    return YAML(typ="safe").load(io.StringIO(text))


def test_strings_that_yaml_would_read_as_something_else_come_back_as_the_same_strings():
    data = {"values": AWKWARD_STRINGS, "as keys": {text: index for index, text in enumerate(AWKWARD_STRINGS)},
            "alone": {str(index): text for index, text in enumerate(AWKWARD_STRINGS)}}
    assert read_back(yaml_text(data)) == data


def test_numbers_bools_nulls_and_nesting_come_back_the_same():
    data = {
        "numbers": [0, -7, 2**70, 0.1, -0.0, 1e-05, 1e20, 1.5e300, 5e-324],
        "flags": [True, False, None],
        "empty": {"dict": {}, "list": []},
        "nested lists": [[1, 2], [], [[3], {"a": [4]}], [{"b": None}]],
        "list of dicts": [{"platform": "local", "gpuIndices": [0, 1]}, {}, {"x": {"y": {"z": [1.0]}}}],
        "searchSpace": {"model": {"_type": "choice", "_value": [{"_name": "cnn", "k": {"_type": "randint",
                                                                                        "_value": [1, 5]}}, "mlp"]}},
    }
    assert read_back(yaml_text(data)) == data


def test_non_finite_floats_come_back_as_themselves():
    loaded = read_back(yaml_text({"x": [math.inf, -math.inf, math.nan]}))
    assert loaded["x"][:2] == [math.inf, -math.inf] and math.isnan(loaded["x"][2])


def test_the_layout_is_the_config_files_block_style_with_plain_lists_inline():
    text = yaml_text({"trialCommand": "python3 trial.py", "searchSpace": {"x": {"_type": "choice", "_value": [1, 2]}},
                      "trainingService": [{"platform": "local", "useActiveGpu": False}]})
    assert text == ("trialCommand: python3 trial.py\n"
                    "searchSpace:\n"
                    "  x:\n"
                    "    _type: choice\n"
                    "    _value: [1, 2]\n"
                    "trainingService:\n"
                    "  - platform: local\n"
                    "    useActiveGpu: false\n")


def test_what_is_not_json_like_is_refused():
    with pytest.raises(TypeError):
        yaml_text({"when": object()})

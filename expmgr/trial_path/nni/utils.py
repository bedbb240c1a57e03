"""``nni.utils`` as NNI 3.0 defines it: ``merge_parameter`` for trials (parameters over
argparse defaults), and what custom tuners and assessors use (``OptimizeMode``,
``MetricType``, ``extract_scalar_reward``, ``extract_scalar_history``, ``split_index``,
``convert_dict2tuple``, ``ClassArgsValidator``). Standard library only, Python 3.8+
(``ClassArgsValidator``'s helpers use the ``schema`` package, as NNI's, when called).
"""
from enum import Enum, unique
from pathlib import Path


@unique
class OptimizeMode(Enum):
    """Whether the tuner minimizes or maximizes the trials' final result."""
    Minimize = 'minimize'
    Maximize = 'maximize'


class NodeType:
    """The keys of a search-space entry."""
    ROOT = 'root'
    TYPE = '_type'
    VALUE = '_value'
    INDEX = '_index'
    NAME = '_name'


class MetricType:
    """The types of metric data."""
    FINAL = 'FINAL'
    PERIODICAL = 'PERIODICAL'
    REQUEST_PARAMETER = 'REQUEST_PARAMETER'


def split_index(params):
    """``params`` without the ``_index`` entries of nested choices."""
    if isinstance(params, dict):
        if NodeType.INDEX in params.keys():
            return split_index(params[NodeType.VALUE])
        return {key: split_index(params[key]) for key in params}
    return params


def extract_scalar_reward(value, scalar_key='default'):
    """The number in a final result: the result itself, or its ``scalar_key`` entry;
    RuntimeError for anything else."""
    if isinstance(value, (float, int)):
        return value
    if isinstance(value, dict) and scalar_key in value and isinstance(value[scalar_key], (float, int)):
        return value[scalar_key]
    raise RuntimeError('Incorrect final result: the final result should be float/int, '
                       'or a dict which has a key named "default" whose value is float/int.')


def extract_scalar_history(trial_history, scalar_key='default'):
    """:func:`extract_scalar_reward` of each intermediate result."""
    return [extract_scalar_reward(element, scalar_key) for element in trial_history]


def convert_dict2tuple(value):
    """Dicts (nested too) as sorted tuples of items, to be hashable; changes ``value``."""
    if isinstance(value, dict):
        for key in value:
            value[key] = convert_dict2tuple(value[key])
        return tuple(sorted(value.items()))
    return value


class ClassArgsValidator:
    """The base of a ``classArgsValidator`` (NNI's algorithm meta files): it checks an
    algorithm's classArgs before the algorithm is built."""

    def validate_class_args(self, **kwargs):
        """Raise an exception when ``kwargs`` cannot be the algorithm's classArgs."""

    def choices(self, key, *args):
        from schema import And
        return And(lambda n: n in args, error='%s should be in [%s]!' % (key, str(args)))

    def range(self, key, keyType, start, end):
        from schema import And
        return And(
            And(keyType, error='%s should be %s type!' % (key, keyType.__name__)),
            And(lambda n: start <= n <= end, error='%s should be in range of (%s, %s)!' % (key, start, end))
        )

    def path(self, key):
        from schema import And
        return And(
            And(str, error='%s should be a string!' % key),
            And(lambda p: Path(p).exists(), error='%s path does not exist!' % (key))
        )


def merge_parameter(base_params, override_params):
    """Update ``base_params`` (a dict or a namespace) in place with ``override_params`` (a
    dict, or None for no change) and return it; a key missing from ``base_params``, or a
    value of another type than the one it replaces (an int may replace a float), is a
    ValueError."""
    if override_params is None:
        return base_params
    is_dict = isinstance(base_params, dict)
    for key, value in override_params.items():
        if is_dict:
            if key not in base_params:
                raise ValueError("Key '%s' not found in base parameters." % key)
            base_params[key] = _ensure_compatible_type(key, base_params[key], value)
        else:
            if not hasattr(base_params, key):
                raise ValueError("Key '%s' not found in base parameters." % key)
            setattr(base_params, key, _ensure_compatible_type(key, getattr(base_params, key), value))
    return base_params


def _ensure_compatible_type(key, base, override):
    if base is None or isinstance(override, type(base)):
        return override
    if isinstance(base, float) and isinstance(override, int):
        return float(override)
    raise ValueError(f'Expected "{key}" in override parameters to have type {type(base).__name__}, '
                     f"but found {type(override).__name__}")

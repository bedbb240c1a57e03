"""From a YAML file or a dict to an ExperimentConfig's records, checking keys only: the
spelling of every key (camelCase in files, snake_case from Python, NNI's v1 keys named),
a training service's platform (its keys depend on it), and relative paths made absolute
against the file's folder. The values are checked by ``_validate.canonicalize``::

    config = load_config(ExperimentConfig, "config.yml")     # ExperimentConfig.load
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError, Key, PathSegment, Problem, format_path
from ._keys import match_keys, norm, unknown_message
from ._loader import Source, parse_yaml, read_text, to_plain, type_name
from ._sections import AlgorithmConfig, LocalConfig, public_fields

if TYPE_CHECKING:  # _model calls this module: the ExperimentConfig class is passed in
    from ._model import ExperimentConfig

SUPPORTED_PLATFORMS = ("local",)
NNI_PLATFORMS = ("remote", "openpai", "pai", "aml", "kubeflow", "frameworkcontroller", "adl", "dlc", "hybrid")

# NNI keys that are not ours: a better message than "unknown key"
_TOP_HINTS = {
    norm(k): v for k, v in {
        "advisor": "NNI's advisor is not supported; use a tuner (and an assessor)",
        "sharedStorage": "sharedStorage is not supported yet",
        "tunerGpuIndices": "tunerGpuIndices is not supported yet",
        "authorName": "this looks like an NNI v1 config; expmgr reads the v2 format (see docs/config.md)",
        "trainingServicePlatform": "NNI v1 key; in v2 write trainingService: {platform: local}",
        "trial": "NNI v1 key; in v2 write trialCommand and trialCodeDirectory at the top level",
        "searchSpacePath": "NNI v1 key; in v2 it is searchSpaceFile",
        "maxExecDuration": "NNI v1 key; in v2 it is maxExperimentDuration",
        "maxTrialNum": "NNI v1 key; in v2 it is maxTrialNumber",
        "localConfig": "NNI v1 key; in v2 write trainingService: {platform: local, ...}",
    }.items()
}
_PATH_FIELDS = ("trial_code_directory", "search_space_file", "experiment_working_directory")


# -- from a mapping (YAML document or dict) to the records, checking keys only ----------------

def config_from_mapping(cls: type[ExperimentConfig], raw: dict[Any, Any], origin: str) -> ExperimentConfig:
    """An ExperimentConfig holding the values of ``raw`` as given; raises Problem for bad keys."""
    style = "snake" if origin == "python" else "camel"
    values = match_keys(raw, public_fields(cls), (), style, _TOP_HINTS)
    for name in ("tuner", "assessor"):
        if isinstance(values.get(name), dict):
            values[name] = algorithm_from_mapping(values[name], (Key(name),), style)
    service = values.get("training_service")
    if isinstance(service, list) and len(service) == 1 and isinstance(service[0], dict):
        service = service[0]
    if isinstance(service, dict):
        values["training_service"] = local_from_mapping(service, (Key("training_service"),), style)
    for name in _PATH_FIELDS:
        if isinstance(values.get(name), str):
            values[name] = Path(values[name])
    config = cls(**values)
    config._origin = origin
    return config


def config_from_dict(cls: type[ExperimentConfig], data: dict[str, Any]) -> ExperimentConfig:
    """``ExperimentConfig.from_dict``."""
    if not isinstance(data, dict):
        raise ConfigError(f"ExperimentConfig.from_dict needs a dict, got {type(data).__name__}")
    try:
        config = config_from_mapping(cls, data, origin="dict")
    except Problem as problem:
        raise ConfigError(problem.message, field=format_path(problem.path) or None) from None
    if config.search_space is not None and isinstance(config.search_space_file, (str, Path)):
        # a saved canonical config: the search space was read from that file already
        config._search_space_read_from = str(absolute_path(config.search_space_file, Path.cwd()))
    return config


def algorithm_from_mapping(raw: dict[Any, Any], path: tuple[PathSegment, ...], style: str) -> AlgorithmConfig:
    values = match_keys(raw, public_fields(AlgorithmConfig), path, style)
    if values.get("class_args", {}) is None:
        values["class_args"] = {}
    return AlgorithmConfig(**values)


def local_from_mapping(raw: dict[Any, Any], path: tuple[PathSegment, ...], style: str) -> LocalConfig:
    platform = [v for k, v in raw.items() if isinstance(k, str) and norm(k) == "platform"]
    if not platform:
        raise Problem(path + (Key("platform"),), "required (e.g. platform: local)")
    check_platform(platform[0], path + (Key("platform"),))   # before the keys, which depend on it
    return LocalConfig(**match_keys(raw, public_fields(LocalConfig), path, style))


def resolve_paths(config: ExperimentConfig, base: Path) -> None:
    """Make the relative paths of a loaded config absolute against ``base`` (its folder)."""
    for name in _PATH_FIELDS:
        value = getattr(config, name)
        if isinstance(value, (str, Path)) and str(value).strip():
            setattr(config, name, absolute_path(value, base))
    for algo in (config.tuner, config.assessor):
        if isinstance(algo, AlgorithmConfig) and isinstance(algo.code_directory, (str, Path)):
            algo.code_directory = absolute_path(algo.code_directory, base)


def absolute_path(value: str | Path, base: Path) -> Path:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = base / path
    return Path(os.path.normpath(path))


# -- from a file ---------------------------------------------------------------------------

def load_config(cls: type[ExperimentConfig], path: str | os.PathLike[str]) -> ExperimentConfig:
    """``ExperimentConfig.load``: parse, check keys, make paths absolute, validate."""
    shown = Path(path)
    real = shown.expanduser()
    try:
        text = read_text(real)
    except ConfigError as exc:
        exc.file = shown
        raise
    doc = parse_yaml(text, shown)
    if doc is None:
        raise ConfigError("config file is empty; expected a mapping of config keys "
                          "(trialCommand, trialConcurrency, ...)", file=shown)
    if not isinstance(doc, dict):
        line = doc.lc.line + 1 if hasattr(doc, "lc") else 1
        column = doc.lc.col + 1 if hasattr(doc, "lc") else 1
        raise ConfigError(f"the top level must be a mapping of config keys, got {type_name(doc)}",
                          file=shown, line=line, column=column)
    source = Source(shown, doc)
    try:
        config = config_from_mapping(cls, to_plain(doc), origin="file")
        resolve_paths(config, real.parent.absolute())
    except Problem as problem:
        raise source.error(problem) from None
    source.snapshot = {name: copy.deepcopy(getattr(config, name)) for name in public_fields(type(config))}
    source.key_order = [name for name in (_field_of(cls, k) for k in doc) if name is not None]
    config._source = source
    config._origin = "file"
    config.canonical()   # validate now, so that errors point into the file
    return config


def _field_of(cls: type[ExperimentConfig], key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    for name in public_fields(cls):
        if norm(name) == norm(key):
            return name
    return None


def check_platform(value: Any, path: tuple[PathSegment, ...]) -> str:
    """The platform's name in lower case; Problem when it is not one expmgr runs."""
    supported = ", ".join(SUPPORTED_PLATFORMS)
    if not isinstance(value, str):
        raise Problem(path, f"expected a platform name (supported: {supported}), got {value!r}")
    if value.lower() in SUPPORTED_PLATFORMS:
        return value.lower()
    if value.lower() in NNI_PLATFORMS:
        raise Problem(path, f"platform {value!r} is not supported yet; supported: {supported}")
    raise Problem(path, unknown_message("platform", value, list(SUPPORTED_PLATFORMS), "platforms"))

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
from ._keys import match_keys, norm, spell, unknown_message
from ._loader import load_yaml, read_text, to_plain, type_name
from ._nni_v1 import SHARED_STORAGE, convert_v1, is_v1
from ._platforms import NNI_ONLY_PLATFORMS, PLATFORMS, TrainingServiceSection
from ._sections import AlgorithmConfig, RemoteConfig, RemoteMachineConfig, public_fields

if TYPE_CHECKING:  # _model calls this module: the ExperimentConfig class is passed in
    from ._model import ExperimentConfig


# NNI keys that are not ours: a better message than "unknown key"
_TOP_HINTS = {
    norm(k): v for k, v in {
        "sharedStorage": SHARED_STORAGE,
        "tunerGpuIndices": "not supported: tunerGpuIndices; expmgr's tuners run on the CPU; remove it",
        "authorName": "an NNI v1 key; a v1 config needs trainingServicePlatform (see NNI configs in docs/config.md)",
        "trial": "an NNI v1 key; in v2 write trialCommand and trialCodeDirectory at the top level",
        "searchSpacePath": "an NNI v1 key; in v2 it is searchSpaceFile",
        "maxExecDuration": "an NNI v1 key; in v2 it is maxExperimentDuration",
        "maxTrialNum": "an NNI v1 key; in v2 it is maxTrialNumber",
        "localConfig": "an NNI v1 key; in v2 write trainingService: {platform: local, ...}",
    }.items()
}
_PATH_FIELDS = ("trial_code_directory", "search_space_file", "experiment_working_directory")


# -- from a mapping (YAML document or dict) to the records, checking keys only ----------------

def config_from_mapping(cls: type[ExperimentConfig], raw: dict[Any, Any], origin: str,
                        notes: list[str] | None = None) -> ExperimentConfig:
    """An ExperimentConfig holding the values of ``raw`` as given; raises Problem for bad keys.
    ``notes``: what loading changed (NNI's v1 conversion, ``advisor``), kept for experiment.log."""
    style = "snake" if origin == "python" else "camel"
    notes = list(notes or [])
    raw = _advisor_as_tuner(raw, notes)
    values = match_keys(raw, public_fields(cls), (), style, _TOP_HINTS)
    for name in ("tuner", "assessor"):
        if isinstance(values.get(name), dict):
            values[name] = algorithm_from_mapping(values[name], (Key(name),), style)
    service = values.get("training_service")
    if isinstance(service, list) and len(service) == 1 and isinstance(service[0], dict):
        service = service[0]
    if isinstance(service, dict):
        values["training_service"] = training_service_from_mapping(service, (Key("training_service"),), style)
    elif isinstance(service, list):   # hybrid: each mapping read as its platform's section
        values["training_service"] = [
            training_service_from_mapping(item, (Key("training_service"), index), style)
            if isinstance(item, dict) else item for index, item in enumerate(service)]
    for name in _PATH_FIELDS:
        if isinstance(values.get(name), str):
            values[name] = Path(values[name])
    config = cls(**values)
    config._origin = origin
    config._notes = notes
    return config


def _advisor_as_tuner(raw: dict[Any, Any], notes: list[str]) -> dict[Any, Any]:
    """``raw`` with NNI's ``advisor`` section renamed ``tuner``, as NNI 3.0 reads it."""
    advisor = [k for k in raw if isinstance(k, str) and norm(k) == "advisor"]
    if not advisor:
        return raw
    tuner = [k for k in raw if isinstance(k, str) and norm(k) == "tuner"]
    if tuner:
        raise Problem((advisor[0],), f"give either {tuner[0]} or {advisor[0]} (NNI's older name for a tuner), "
                                     f"not both", at_key=True)
    notes.append(f"{advisor[0]} is read as the tuner (NNI 3.0 does the same)")
    return {("tuner" if k == advisor[0] else k): v for k, v in raw.items()}


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


def training_service_from_mapping(raw: dict[Any, Any], path: tuple[PathSegment, ...],
                                  style: str) -> TrainingServiceSection:
    """The section of ``raw``'s platform (LocalConfig, RayConfig, RemoteConfig with its
    machines as RemoteMachineConfig), holding its values as given."""
    platform = [v for k, v in raw.items() if isinstance(k, str) and norm(k) == "platform"]
    if not platform:
        raise Problem(path + (Key("platform"),), "required (e.g. platform: local)")
    own = PLATFORMS[check_platform(platform[0], path + (Key("platform"),))]
    section = own.section
    # A multi-node trial is Ray's alone: said so, rather than a did-you-mean.
    hints = {} if own.name == "ray" else {
        norm("trial_placement"): f"{spell('trial_placement', style)} is a field of platform ray, not of {own.name}"}
    values = match_keys(raw, public_fields(section), path, style, hints)   # keys depend on the platform
    machines = values.get("machine_list")
    if section is RemoteConfig and isinstance(machines, list):
        values["machine_list"] = [
            RemoteMachineConfig(**match_keys(machine, public_fields(RemoteMachineConfig),
                                             path + (Key("machine_list"), index), style))
            if isinstance(machine, dict) else machine for index, machine in enumerate(machines)]
    return section(**values)


def resolve_paths(config: ExperimentConfig, base: Path) -> None:
    """Make the relative paths of a loaded config absolute against ``base`` (its folder)."""
    for name in _PATH_FIELDS:
        value = getattr(config, name)
        if isinstance(value, (str, Path)) and str(value).strip():
            setattr(config, name, absolute_path(value, base))
    for algo in (config.tuner, config.assessor):
        if isinstance(algo, AlgorithmConfig) and isinstance(algo.code_directory, (str, Path)):
            algo.code_directory = absolute_path(algo.code_directory, base)
    services = config.training_service if isinstance(config.training_service, list) else [config.training_service]
    for service in services:
        machines = service.machine_list if isinstance(service, RemoteConfig) else None
        for machine in machines if isinstance(machines, list) else []:
            if (isinstance(machine, RemoteMachineConfig) and isinstance(machine.ssh_key_file, (str, Path))
                    and str(machine.ssh_key_file).strip()):
                machine.ssh_key_file = absolute_path(machine.ssh_key_file, base)   # ~ expanded, as NNI


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
    doc, source = load_yaml(text, shown)
    if doc is None:
        raise ConfigError("config file is empty; expected a mapping of config keys "
                          "(trialCommand, trialConcurrency, ...)", file=shown)
    if not isinstance(doc, dict):
        line, column = source.locate(())
        raise ConfigError(f"the top level must be a mapping of config keys, got {type_name(doc)}",
                          file=shown, line=line or 1, column=column or 1)
    try:
        raw = to_plain(doc)
        notes: list[str] = []
        if is_v1(raw):
            converted = convert_v1(raw, _check_v1_platform)
            raw, notes, source.renames = converted.mapping, converted.notes, converted.renames
        elif any(isinstance(k, str) and norm(k) == "advisor" for k in raw):
            source.renames = [(("tuner",), (next(k for k in raw if isinstance(k, str) and norm(k) == "advisor"),))]
        config = config_from_mapping(cls, raw, origin="file", notes=notes)
        resolve_paths(config, real.parent.absolute())
    except Problem as problem:
        raise source.error(problem) from None
    source.snapshot = {name: copy.deepcopy(getattr(config, name)) for name in public_fields(type(config))}
    source.key_order = [name for name in (_field_of(cls, k) for k in raw) if name is not None]
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


def _check_v1_platform(value: Any, path: tuple[PathSegment, ...]) -> str:
    """``check_platform`` for NNI's v1 format, which has only NNI's platforms (of ours, those
    marked ``nni``)."""
    platform = check_platform(value, path)
    if not PLATFORMS[platform].nni:
        raise Problem(path, f"not supported in NNI's v1 format: {value}; write a v2 config with "
                            f"trainingService: {{platform: {platform}, ...}} (see docs/config.md)")
    return platform


def check_platform(value: Any, path: tuple[PathSegment, ...]) -> str:
    """The platform's name in lower case; Problem when it is not one expmgr runs."""
    supported = ", ".join(PLATFORMS)
    if not isinstance(value, str):
        raise Problem(path, f"expected a platform name (supported: {supported}), got {value!r}")
    if value.lower() in PLATFORMS:
        return value.lower()
    if value.lower() in NNI_ONLY_PLATFORMS:
        raise Problem(path, f"not supported: {value} (NNI's {value} training service); expmgr's platforms: "
                            f"{supported}")
    raise Problem(path, unknown_message("platform", value, list(PLATFORMS), "platforms"))

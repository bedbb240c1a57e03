"""The config's sections, AlgorithmConfig (tuner/assessor) and the training services
LocalConfig, RayConfig and RemoteConfig (listed by platform in ``_platforms``), and the field
helpers every config record shares.

Below ``_validate`` and ``_model``: validation builds these sections, and ExperimentConfig
(in ``_model``) holds them and calls validation.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

from ._errors import snake_to_camel

PathLike = Union[str, Path]


@dataclass(slots=True)
class AlgorithmConfig:
    """A tuner or assessor: a built-in ``name`` or your own ``class_name`` ("module.ClassName")."""

    name: str | None = None
    class_name: str | None = None
    code_directory: PathLike | None = None
    class_args: dict[str, Any] = field(default_factory=dict)

    # set on the empty tuner/assessor that ``ExperimentConfig('local')`` gives to fill in
    # (``config.tuner.name = 'TPE'``, as NNI's); left unfilled, it stands for no section
    _placeholder: bool = field(default=False, init=False, repr=False, compare=False)

    @classmethod
    def placeholder(cls) -> AlgorithmConfig:
        """An empty section to fill in, which counts as absent while left empty."""
        section = cls()
        section._placeholder = True
        return section

    def is_unfilled_placeholder(self) -> bool:
        return self._placeholder and self == AlgorithmConfig()

    def to_dict(self) -> dict[str, Any]:
        return section_dict(self)


@dataclass(slots=True)
class LocalConfig:
    """The local training service: trials run as processes on this machine."""

    platform: str = "local"
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = 1
    gpu_indices: list[int] | int | str | None = None
    trial_process_limit: int | None = None
    trial_warm_start: str | list[str] | None = None
    reattach_window: float | str | None = None

    def to_dict(self) -> dict[str, Any]:
        return section_dict(self)


@dataclass(slots=True)
class RayConfig:
    """The Ray training service: trials run on a Ray cluster that this machine is a node of
    (docs/ray.md). ``trial_resources`` maps ``cpu``, ``gpu``, ``memory`` and custom Ray
    resources to what one trial needs, e.g. ``{"cpu": 2, "gpu": 1, "memory": "4GiB"}``."""

    platform: str = "ray"
    address: str = "auto"
    trial_resources: dict[str, Any] | None = field(default_factory=dict)
    max_pending_trials: int | None = None
    runtime_env: dict[str, Any] | None = None
    storage_path: str | None = None
    trial_placement: dict[str, Any] | None = None
    """A trial of several ranks on a placement group (``_placement``), instead of ``trial_resources``."""
    scale_up_timeout: float | str | None = None
    trial_python: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return section_dict(self)


@dataclass(slots=True)
class RemoteMachineConfig:
    """One SSH host of the remote training service (an entry of ``machine_list``, NNI's
    fields). ``user`` None: the SSH config's ``User`` or the current user; neither
    ``password`` nor ``ssh_key_file``: the SSH agent, the SSH config's ``IdentityFile`` or
    the default keys, as ``ssh host`` would (docs/config.md)."""

    host: str | None = None
    port: int = 22
    user: str | None = None
    password: str | None = field(default=None, repr=False)   # kept out of logs and tracebacks
    ssh_key_file: PathLike | None = None
    ssh_passphrase: str | None = field(default=None, repr=False)
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = 1
    gpu_indices: list[int] | int | str | None = None
    python_path: str | None = None
    strict_host_key_checking: str | None = None
    """expmgr's: this host's own ``yes`` or ``accept-new``; None: the service's."""

    def to_dict(self) -> dict[str, Any]:
        return section_dict(self)


@dataclass(slots=True)
class RemoteConfig:
    """The remote training service (NNI's ``platform: remote``): trials run on SSH hosts,
    ``machine_list`` (RemoteMachineConfig or their mappings). ``reuse_mode`` is read and
    changes nothing (each trial is its own process over the host's one connection);
    ``strict_host_key_checking`` (expmgr's) is ``yes`` (the host's key must be in
    known_hosts) or ``accept-new`` (an unknown host's key is recorded on first use)."""

    platform: str = "remote"
    machine_list: list[Any] | None = field(default_factory=list)
    reuse_mode: bool = False
    strict_host_key_checking: str = "yes"
    reattach_window: float | str | None = None
    """``reattachWindow``: as the local service's (a duration, 0 allowed): how long a host's trials
    run on after the experiment process died, for a resume to take them over."""

    def to_dict(self) -> dict[str, Any]:
        return section_dict(self)


def public_fields(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if not f.name.startswith("_")]


def section_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in public_fields(type(obj)):
        value = getattr(obj, name)
        if value is not None and not (isinstance(value, AlgorithmConfig) and value.is_unfilled_placeholder()):
            out[snake_to_camel(name)] = _jsonable(value)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, AlgorithmConfig) or callable(getattr(value, "to_dict", None)):   # a section
        return value.to_dict()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return copy.deepcopy(value)

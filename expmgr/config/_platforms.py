"""Where trials can run: one ``Platform`` entry per training service, the one table that
reading, validation, ``ResolvedConfig`` and the training-service factory iterate over::

    platform = PLATFORMS["ray"]                    # also "local", "remote"
    platform.section()                 # RayConfig(), the section a user fills in
    platform.resolve(checked_section)  # ResolvedRayConfig, what the service is built from

A new training service adds its section class (``_sections``), its resolved settings and
``resolve`` here, its check (a method of ``_validate._Canonicalizer``) and its service module, and one
entry in ``PLATFORMS``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Union

from ._limits import DEFAULT_TRIAL_PROCESS_LIMIT
from ._sections import LocalConfig, RayConfig, RemoteConfig


@dataclass(frozen=True, slots=True)
class ResolvedLocalConfig:
    """The local training service's settings (``trainingService: {platform: local, ...}``)."""

    platform: ClassVar[str] = "local"
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = 1
    gpu_indices: tuple[int, ...] | None = None
    """The GPUs trials may use; None: every GPU ``nvidia-smi`` sees."""
    trial_process_limit: int = DEFAULT_TRIAL_PROCESS_LIMIT
    """The processes one trial may have at once, counted by the watchdog; 0: no limit."""
    warm_start: tuple[str, ...] | None = None
    """``trialWarmStart``: the modules a warm template imports for Python trials (``auto``:
    none, the interpreter start alone); None (``off``): every trial starts cold."""
    reattach_window: float = 0.0
    """``reattachWindow``: seconds a trial runs on after the experiment process died, for a resume
    to take it over (training/keeper.py); 0: it is ended at once."""


@dataclass(frozen=True, slots=True)
class ResolvedTrialResources:
    """What one trial asks Ray for (``trialResources``)."""

    cpu: float = 1.0
    gpu: float = 0.0
    """``trialResources.gpu``, else ``trialGpuNumber``, else 0."""
    memory: int | None = None
    """Bytes; None: Ray's default (no memory reserved)."""
    custom: tuple[tuple[str, float], ...] = ()
    """Custom Ray resources as (name, amount), sorted by name."""


DEFAULT_SCALE_UP_TIMEOUT = 15 * 60.0
"""``scaleUpTimeout``'s default: a cloud GPU node's boot and image pull take minutes; a cluster
that cannot add such a node is said within this."""


@dataclass(frozen=True, slots=True)
class ResolvedTrialPlacement:
    """A multi-node trial's placement group (``trialPlacement``): ``workers`` bundles of
    ``resources`` each, one rank per bundle, placed by Ray's ``strategy`` (``_placement.STRATEGIES``)."""

    workers: int
    resources: ResolvedTrialResources
    strategy: str = "PACK"


@dataclass(frozen=True, slots=True)
class ResolvedRayConfig:
    """The Ray training service's settings (``trainingService: {platform: ray, ...}``)."""

    platform: ClassVar[str] = "ray"
    address: str = "auto"
    """``auto`` (the cluster this machine is a node of) or ``<host>:<port>`` of its head node."""
    trial_resources: ResolvedTrialResources = ResolvedTrialResources()
    max_pending_trials: int | None = None
    """Trials submitted to Ray and not yet running, at most; None: as many as ``trialConcurrency``."""
    runtime_env: dict[str, Any] | None = None
    """Ray's runtime_env for each trial, as written."""
    storage_path: str | None = None
    """Where checkpoints are kept (a local absolute path or an s3:// URI); None: the experiment's
    folder is shared by every node. Set: no folder is shared (``ray_files``)."""
    trial_placement: ResolvedTrialPlacement | None = None
    """Each trial is this placement group's ranks (``ray_group``); None: one process (``trial_resources``)."""
    scale_up_timeout: float = DEFAULT_SCALE_UP_TIMEOUT
    """Seconds trials wait for the autoscaler to add a node with their resources (docs/ray.md)."""
    trial_python: str = "ray"
    """``python``/``python3`` in the trial's command: ``ray``, the slot's own interpreter (the
    driver's, or the runtime env's); ``path``, the node's PATH (TRIAL_PYTHON_CHOICES)."""


TRIAL_PYTHON_CHOICES = ("ray", "path")


STRICT_HOST_KEY_CHECKING = ("yes", "accept-new")
"""``strictHostKeyChecking``'s values, OpenSSH's meaning: ``yes`` (the default), a host's key
must already be in known_hosts; ``accept-new``, an unknown host's key is recorded on first
use, a changed one is refused. OpenSSH's ``no`` (accept any key) is refused."""


@dataclass(frozen=True, slots=True)
class ResolvedRemoteMachine:
    """One SSH host of the remote training service, as its service connects to it."""

    host: str
    """A name or address, or a ``Host`` alias of the user's ``~/.ssh/config``."""
    port: int = 22
    user: str | None = None
    """None: the SSH config's ``User`` for the host, else the current user (OpenSSH's rule)."""
    ssh_key_file: Path | None = None
    """An existing private key file (``~`` expanded); None with no password: the SSH agent,
    the SSH config's ``IdentityFile``, the default keys."""
    password: str | None = field(default=None, repr=False)   # kept out of logs and tracebacks
    """Given: password authentication (NNI's rule: then ``sshKeyFile`` is not used)."""
    ssh_passphrase: str | None = field(default=None, repr=False)
    python_path: str | None = None
    """NNI's meaning: a folder put first on the trial's PATH on that host (e.g. ``/usr/bin``)."""
    use_active_gpu: bool = False
    max_trial_number_per_gpu: int = 1
    gpu_indices: tuple[int, ...] | None = None
    """The host's GPUs trials may use; None: every GPU its ``nvidia-smi`` sees."""
    strict_host_key_checking: str = "yes"
    """One of ``STRICT_HOST_KEY_CHECKING``: this machine's, else the service's."""


@dataclass(frozen=True, slots=True)
class ResolvedRemoteConfig:
    """The remote training service's settings (``trainingService: {platform: remote, ...}``)."""

    platform: ClassVar[str] = "remote"
    machines: tuple[ResolvedRemoteMachine, ...]
    strict_host_key_checking: str = "yes"
    """The service's default for its machines (each machine's own is resolved in it)."""
    reuse_mode: bool = False
    """NNI's ``reuseMode``, as written; it changes nothing here (see docs/config.md)."""
    reattach_window: float = 0.0
    """``reattachWindow``: seconds a host's trials run on after the experiment process died, for a
    resume to take them over (0: they end with it)."""


TrainingServiceSection = Union[LocalConfig, RayConfig, RemoteConfig]
"""A training service's config section, as a user writes it (one class per platform)."""
ResolvedTrainingService = Union[ResolvedLocalConfig, ResolvedRayConfig, ResolvedRemoteConfig]
"""A training service's resolved settings, told apart by ``isinstance`` (or ``platform``)."""


def _not_canonical(name: str, value: Any) -> TypeError:
    return TypeError(f"{name}: {value!r} is not a canonical value (ResolvedConfig needs canonical())")


def _resolve_local(section: Any) -> ResolvedLocalConfig:
    indices = section.gpu_indices
    if indices is not None and not isinstance(indices, list):
        raise _not_canonical("training_service.gpu_indices", indices)
    return ResolvedLocalConfig(use_active_gpu=section.use_active_gpu,
                               max_trial_number_per_gpu=section.max_trial_number_per_gpu,
                               gpu_indices=None if indices is None else tuple(indices),
                               trial_process_limit=DEFAULT_TRIAL_PROCESS_LIMIT
                               if section.trial_process_limit is None else section.trial_process_limit,
                               warm_start=warm_start_modules(section.trial_warm_start),
                               reattach_window=section.reattach_window or 0.0)


def warm_start_modules(value: Any) -> tuple[str, ...] | None:
    """``trialWarmStart`` as checked (``off``, ``auto`` or a list of modules) resolved."""
    if value is None or value == "off":
        return None
    return () if value == "auto" else tuple(value)


def _resolve_ray(section: Any) -> ResolvedRayConfig:
    return ResolvedRayConfig(address=section.address,
                             trial_resources=_trial_resources(section.trial_resources),
                             max_pending_trials=section.max_pending_trials,
                             runtime_env=copy.deepcopy(section.runtime_env),
                             storage_path=section.storage_path,
                             trial_placement=_trial_placement(section.trial_placement),
                             scale_up_timeout=DEFAULT_SCALE_UP_TIMEOUT if section.scale_up_timeout is None else section.scale_up_timeout,
                             trial_python=section.trial_python or "ray")


def _resolve_remote(section: Any) -> ResolvedRemoteConfig:
    if not isinstance(section.machine_list, list) or not section.machine_list:
        raise _not_canonical("training_service.machine_list", section.machine_list)
    machines = []
    for machine in section.machine_list:
        indices, key_file = machine.gpu_indices, machine.ssh_key_file
        if indices is not None and not isinstance(indices, list):
            raise _not_canonical("training_service.machine_list.gpu_indices", indices)
        checking = machine.strict_host_key_checking or section.strict_host_key_checking
        if not isinstance(machine.host, str) or checking not in STRICT_HOST_KEY_CHECKING:
            raise _not_canonical("training_service.machine_list", machine)
        machines.append(ResolvedRemoteMachine(
            host=machine.host, port=machine.port, user=machine.user,
            ssh_key_file=None if key_file is None else Path(key_file), password=machine.password,
            ssh_passphrase=machine.ssh_passphrase, python_path=machine.python_path,
            use_active_gpu=machine.use_active_gpu, max_trial_number_per_gpu=machine.max_trial_number_per_gpu,
            gpu_indices=None if indices is None else tuple(indices),
            strict_host_key_checking=checking))
    return ResolvedRemoteConfig(machines=tuple(machines), strict_host_key_checking=section.strict_host_key_checking,
                                reuse_mode=section.reuse_mode, reattach_window=section.reattach_window or 0.0)


def _trial_placement(placement: dict[str, Any] | None) -> ResolvedTrialPlacement | None:
    if placement is None:
        return None
    return ResolvedTrialPlacement(workers=placement["workers"], strategy=placement["strategy"],
                                  resources=_trial_resources(placement["resources_per_worker"]))


def _trial_resources(resources: dict[str, Any] | None) -> ResolvedTrialResources:
    if resources is None or not isinstance(resources.get("cpu"), float) or not isinstance(resources.get("gpu"), float):
        raise _not_canonical("training_service.trial_resources", resources)
    memory = resources.get("memory")
    if memory is not None and not isinstance(memory, int):
        raise _not_canonical("training_service.trial_resources.memory", memory)
    custom = sorted((name, float(amount)) for name, amount in resources.items() if name not in ("cpu", "gpu", "memory"))
    return ResolvedTrialResources(cpu=resources["cpu"], gpu=resources["gpu"], memory=memory, custom=tuple(custom))


@dataclass(frozen=True, slots=True)
class Platform:
    """One place trials can run (a ``trainingService``'s ``platform``)."""

    name: str
    """What ``platform:`` says, in lower case; also what the store records and lists show."""
    section: type[TrainingServiceSection]
    """The config section a user fills in (``platform`` defaults to ``name``)."""
    resolved: type[ResolvedTrainingService]
    """Its settings once validated, as the training service reads them."""
    resolve: Callable[[Any], ResolvedTrainingService]
    """From a canonical (validated) section to ``resolved``."""
    check: str
    """The method of ``_validate._Canonicalizer`` that checks and canonicalises its section (the
    validator sits above this table, so it is named, not imported)."""
    service: str
    """``module:function`` building its training service from a ResolvedConfig (the
    ``training`` package sits above ``config``, so it is named, not imported)."""
    nni: bool
    """NNI has it too, so NNI's v1 format (``trainingServicePlatform``) may name it."""
    files: str = "expmgr.training._folder:SharedTrialFolders"
    """``module:callable`` building its trials' files (``training.TrialFiles``) from the
    experiment's paths, with no service running (readers of a stored experiment); the default
    is the manager's own ``trials/<id>/`` folders (Ray's through a folder every node shares)."""


PLATFORMS: dict[str, Platform] = {platform.name: platform for platform in (
    Platform("local", LocalConfig, ResolvedLocalConfig, _resolve_local, check="_local_service",
             service="expmgr.training.local:create_local_service", nni=True),
    Platform("ray", RayConfig, ResolvedRayConfig, _resolve_ray, check="_ray_service",
             service="expmgr.training.ray:create_ray_service", nni=False),
    # Its trials' files are the manager's copies in trials/<id>/ (the hosts' agents send them as
    # written), read as local ones; the running service's files also know the hosts' checkpoints.
    Platform("remote", RemoteConfig, ResolvedRemoteConfig, _resolve_remote, check="_remote_service",
             service="expmgr.training.remote.service:create_remote_service", nni=True),
)}
"""Every platform expmgr runs trials on, by name, in the order error messages list them."""

NNI_ONLY_PLATFORMS = ("openpai", "pai", "aml", "kubeflow", "frameworkcontroller", "adl", "dlc", "dlts",
                      "hybrid")
"""NNI's platforms that expmgr does not run (refused as "not supported", not "unknown");
``hybrid`` is NNI v1's name for a list of training services (``hybridConfig``)."""

HYBRID_SEPARATOR = "+"
"""Joins the platforms of a list of training services into one name (``local+remote``)."""


def platforms_label(platforms: list[str]) -> str:
    """The one name of the training services ``platforms`` (``local``; ``local+remote`` for a
    list), as the store records it and lists show it."""
    return HYBRID_SEPARATOR.join(platforms)


def platform_of_section(section: object) -> Platform:
    """The platform whose section ``section`` is; TypeError for anything else."""
    for platform in PLATFORMS.values():
        if isinstance(section, platform.section):
            return platform
    raise TypeError(f"{section!r} is not a training service section (one of "
                    f"{', '.join(p.section.__name__ for p in PLATFORMS.values())})")


def stored_config_platform(config: dict[str, Any]) -> str:
    """The platform of a config as a store holds it (``local``, ``ray``; several, joined with
    ``+``; ``local`` when it names none, NNI's default): for a store written before the
    platform was stored with the experiment (``ExperimentProfile.platform``)."""
    service = config.get("trainingService")
    services = service if isinstance(service, list) else [service]
    platforms = [str(s["platform"]) for s in services if isinstance(s, dict) and s.get("platform")]
    return platforms_label(platforms) or "local"

"""NNI's v1 config format (``authorName``, ``trainingServicePlatform``, ``trial: {command, ...}``,
``tuner: {builtinTunerName, ...}``), converted to v2 on load as ``nnictl create`` does
(NNI's ``nni/experiment/config/convert.py``)::

    if is_v1(raw):
        converted = convert_v1(raw)   # Problem (at a v1 key) for what cannot be converted
        converted.mapping, converted.notes, converted.renames

Fields NNI ignores are dropped with a note; keys NNI does not know, and settings expmgr cannot
honour (another platform, multiPhase), are errors at their v1 key. ``renames`` lets a later
error in the v2 fields point at the v1 key in the file (``trialCommand`` -> ``trial.command``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._errors import Key, PathSegment, Problem
from ._keys import did_you_mean, norm

_MOVED = {   # v1 top-level key -> v2 key
    "experimentName": "experimentName",
    "trialConcurrency": "trialConcurrency",
    "maxExecDuration": "maxExperimentDuration",
    "maxTrialDuration": "maxTrialDuration",   # in NNI's v1 schema; its converter forgets it
    "maxTrialNum": "maxTrialNumber",
    "searchSpacePath": "searchSpaceFile",
    "nniManagerIp": "nniManagerIp",
    "logDir": "experimentWorkingDirectory",
    "debug": "debug",
    "logLevel": "logLevel",
    "useAnnotation": "useAnnotation",
}
_IGNORED = ("authorName", "description", "multiThread", "versionCheck", "logCollection")   # NNI drops them too
SHARED_STORAGE = ("not supported: sharedStorage (NNI's storage shared with remote training services); "
                  "trials run on this machine and read their files in place")
_TRIAL_MOVED = {"command": "trialCommand", "codeDir": "trialCodeDirectory", "gpuNum": "trialGpuNumber"}
_LOCAL_MOVED = {"gpuIndices": "gpuIndices", "maxTrialNumPerGpu": "maxTrialNumberPerGpu",
                "useActiveGpu": "useActiveGpu"}
_REMOTE_TOP = ("machineList", "remoteConfig", "hybridConfig")
_MACHINE_MOVED = {"ip": "host", "port": "port", "username": "user", "sshKeyPath": "sshKeyFile",
                  "passphrase": "sshPassphrase", "passwd": "password", "gpuIndices": "gpuIndices",
                  "maxTrialNumPerGpu": "maxTrialNumberPerGpu", "useActiveGpu": "useActiveGpu",
                  "pythonPath": "pythonPath"}
_REMOTE_CONFIG_MOVED = {"reuse": "reuseMode"}
_HYBRID_PLATFORMS = "trainingServicePlatforms"
_ALGORITHM_KEYS = ("builtinTunerName", "builtinAssessorName", "builtinAdvisorName", "className", "codeDir",
                   "classFileName", "classArgs", "includeIntermediateResults", "gpuIndices")
# keys of other platforms' v1 sections; with trainingServicePlatform: local NNI ignores them
_OTHER_PLATFORM_TRIAL_KEYS = ("image", "cpuNum", "memoryMB", "virtualCluster", "nasMode", "shmMB",
                              "nniManagerNFSMountPath", "containerNFSMountPath", "paiStorageConfigName",
                              "paiConfigPath", "worker", "ps", "master", "taskRoles", "authFile")


def is_v1(raw: dict[Any, Any]) -> bool:
    """Whether a config file is in NNI's v1 format: nnictl's test, ``trainingServicePlatform`` given."""
    return any(isinstance(k, str) and norm(k) == norm("trainingServicePlatform") for k in raw)


@dataclass
class Converted:
    mapping: dict[str, Any]
    """The v2 config (camelCase keys)."""
    notes: list[str] = field(default_factory=list)
    """What the conversion did, for experiment.log."""
    renames: list[tuple[tuple[str | int, ...], tuple[PathSegment, ...]]] = field(default_factory=list)
    """(v2 path prefix, normalised; v1 path in the file): where a v2 field came from."""


def convert_v1(raw: dict[Any, Any], check_platform: Any) -> Converted:
    """The v2 form of a v1 config (see the module docstring); ``check_platform(value, path)``
    raises Problem for a platform expmgr does not run."""
    out = Converted({})
    top = _by_key(raw, ())
    platform_key = top.pop("trainingServicePlatform")
    platform_value = raw[platform_key]
    if isinstance(platform_value, str) and platform_value.lower() == "hybrid":
        platforms = _hybrid_platforms(raw, top, platform_key, check_platform)
    else:
        platforms = [(check_platform(platform_value, (Key(platform_key),)), (Key(platform_key),))]
    ignored: list[str] = []
    v2 = out.mapping
    for v1_name, v2_name in _MOVED.items():
        key = top.pop(v1_name, None)
        if key is not None and raw[key] is not None:
            v2[v2_name] = raw[key]
            out.renames.append(((norm(v2_name),), (Key(key),)))
    for name in _IGNORED:
        key = top.pop(name, None)
        if key is not None:
            ignored.append(key)
    key = top.pop("multiPhase", None)
    if key is not None:
        if raw[key]:
            raise Problem((Key(key),), "not supported: multiPhase (NNI 3.0 refuses it too); remove it")
        ignored.append(key)
    key = top.pop("trial", None)
    if key is not None:
        _convert_trial(raw[key], (Key(key),), out, ignored)
    services = []
    for index, (platform, where) in enumerate(platforms):
        prefix = (norm("trainingService"),) + ((index,) if len(platforms) > 1 else ())
        if platform == "remote":
            services.append(_convert_remote(raw, top, where, prefix, out))
        else:
            key = top.pop("localConfig", None)
            services.append(_convert_local(None if key is None else raw[key], (Key(key or "localConfig"),),
                                           prefix, out))
    v2["trainingService"] = services[0] if len(services) == 1 else services
    tuner_key, advisor_key = top.get("tuner"), top.get("advisor")
    if tuner_key is not None and advisor_key is not None:
        raise Problem((Key(advisor_key),), f"give either {tuner_key} or {advisor_key} (NNI's older name for a "
                                           f"tuner), not both")
    for kind in ("tuner", "assessor", "advisor"):
        key = top.pop(kind, None)
        if key is not None and raw[key] is not None:
            _convert_algorithm(raw[key], kind, (Key(key),), out, ignored)
    for key in top.values():
        if norm(key) in (norm("remoteConfig"), norm("machineList")) or norm(key).endswith("config"):
            raise Problem((Key(key),), f"{key} belongs to another training service; "
                                       f"with trainingServicePlatform: {platform_value} remove it")
        if norm(key) == norm("sharedStorage"):
            raise Problem((Key(key),), SHARED_STORAGE)
        guess = did_you_mean(key, [*_MOVED, *_IGNORED, "trainingServicePlatform", "trial", "tuner",
                                   "assessor", "advisor", "localConfig", "multiPhase", *_REMOTE_TOP])
        hint = f"; did you mean {guess!r}?" if guess else ""
        raise Problem((Key(key),), f"unknown key in an NNI v1 config{hint}", at_key=True)
    out.notes.insert(0, "the config is in NNI's v1 format; converted to v2 as nnictl does "
                        "(the v2 form is the experiment folder's config.yml)")
    if ignored:
        out.notes.append(f"ignored, as NNI does: {', '.join(ignored)}")
    return out



def _by_key(mapping: Any, path: tuple[PathSegment, ...]) -> dict[str, str]:
    """``{canonical v1 name or the key as written: key as written}`` of a v1 section."""
    if not isinstance(mapping, dict):
        raise Problem(path, f"expected a mapping, got {mapping!r}")
    known = [*_MOVED, *_IGNORED, "trainingServicePlatform", "multiPhase", "trial", "localConfig", "tuner",
             "assessor", "advisor", *_TRIAL_MOVED, *_LOCAL_MOVED, *_ALGORITHM_KEYS, *_REMOTE_TOP, *_MACHINE_MOVED,
             *_REMOTE_CONFIG_MOVED, _HYBRID_PLATFORMS]
    by_norm = {norm(name): name for name in known}
    out: dict[str, str] = {}
    for key in mapping:
        if not isinstance(key, str):
            raise Problem(path + (str(key),), f"keys must be strings, got {key!r}", at_key=True)
        out[by_norm.get(norm(key), key)] = key
    return out


def _convert_trial(section: Any, path: tuple[PathSegment, ...], out: Converted, ignored: list[str]) -> None:
    keys = _by_key(section, path)
    for v1_name, v2_name in _TRIAL_MOVED.items():
        key = keys.pop(v1_name, None)
        if key is not None and section[key] is not None:
            out.mapping[v2_name] = section[key]
            out.renames.append(((norm(v2_name),), path + (Key(key),)))
    for name, key in keys.items():
        if name in _OTHER_PLATFORM_TRIAL_KEYS:
            ignored.append(f"{path[0]}.{key}")
            continue
        guess = did_you_mean(key, list(_TRIAL_MOVED))
        hint = f"; did you mean {guess!r}?" if guess else f"; known keys: {', '.join(_TRIAL_MOVED)}"
        raise Problem(path + (Key(key),), f"unknown key in an NNI v1 trial section{hint}", at_key=True)


def _convert_local(section: Any, path: tuple[PathSegment, ...], prefix: tuple[str | int, ...],
                   out: Converted) -> dict[str, Any]:
    """The v2 local service of ``localConfig`` (None: not given); ``prefix``: its v2 path."""
    service: dict[str, Any] = {"platform": "local"}
    if section is None:
        return service
    _move(section, path, _LOCAL_MOVED, service, prefix, out, "localConfig")
    return service


def _hybrid_platforms(raw: dict[Any, Any], top: dict[str, str], platform_key: str,
                      check_platform: Any) -> list[tuple[str, tuple[PathSegment, ...]]]:
    """NNI 2's ``trainingServicePlatform: hybrid``: the platforms of
    ``hybridConfig.trainingServicePlatforms``, each with its place in the file."""
    key = top.pop("hybridConfig", None)
    if key is None:
        raise Problem((Key(platform_key),), "needs hybridConfig: {trainingServicePlatforms: [local, remote]} "
                                            "(the training services to use together)")
    keys = _by_key(raw[key], (Key(key),))
    list_key = keys.pop(_HYBRID_PLATFORMS, None)
    for other in keys.values():
        raise Problem((Key(key), Key(other)), f"unknown key in an NNI v1 hybridConfig; known keys: "
                                              f"{_HYBRID_PLATFORMS}", at_key=True)
    platforms = raw[key][list_key] if list_key is not None else None
    list_path: tuple[PathSegment, ...] = (Key(key),) + ((Key(list_key),) if list_key is not None else ())
    if not isinstance(platforms, list) or not platforms:
        raise Problem(list_path, f"expected a list of platforms such as [local, remote], got {platforms!r}")
    checked = [(check_platform(name, list_path + (index,)), list_path + (index,))
               for index, name in enumerate(platforms)]
    names = [name for name, _ in checked]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise Problem(list_path + (index,), f"platform {name} is given twice")
    return checked


def _convert_remote(raw: dict[Any, Any], top: dict[str, str], where: tuple[PathSegment, ...],
                    prefix: tuple[str | int, ...], out: Converted) -> dict[str, Any]:
    """The v2 remote service of ``machineList`` and ``remoteConfig`` (NNI's converter, with
    ``passphrase`` read as ``sshPassphrase``, the v2 field NNI's converter misses)."""
    service: dict[str, Any] = {"platform": "remote"}
    key = top.pop("remoteConfig", None)
    if key is not None and raw[key] is not None:
        _move(raw[key], (Key(key),), _REMOTE_CONFIG_MOVED, service, prefix, out, "remoteConfig")
    key = top.pop("machineList", None)
    if key is None:
        raise Problem(where, "needs machineList (the SSH hosts: [{ip: ..., username: ..., sshKeyPath: ...}]) "
                             "with the remote platform")
    machines = raw[key]
    out.renames.append((prefix + (norm("machineList"),), (Key(key),)))
    if not isinstance(machines, list):   # the v2 check says what a machineList is
        service["machineList"] = machines
        return service
    service["machineList"] = []
    for index, machine in enumerate(machines):
        if not isinstance(machine, dict):
            service["machineList"].append(machine)
            continue
        v2_machine: dict[str, Any] = {}
        _move(machine, (Key(key), index), _MACHINE_MOVED, v2_machine, prefix + (norm("machineList"), index), out,
              "machineList entry")
        service["machineList"].append(v2_machine)
    return service


def _move(section: Any, path: tuple[PathSegment, ...], moved: dict[str, str], into: dict[str, Any],
          prefix: tuple[str | int, ...], out: Converted, what: str) -> None:
    """Each v1 key of ``section`` to its v2 name in ``into`` (at v2 path ``prefix``);
    Problem for a key it does not know."""
    keys = _by_key(section, path)
    for v1_name, v2_name in moved.items():
        key = keys.pop(v1_name, None)
        if key is not None and section[key] is not None:
            into[v2_name] = section[key]
            out.renames.append((prefix + (norm(v2_name),), path + (Key(key),)))
    for key in keys.values():
        raise Problem(path + (Key(key),), f"unknown key in an NNI v1 {what}; known keys: {', '.join(moved)}",
                      at_key=True)


def _convert_algorithm(section: Any, kind: str, path: tuple[PathSegment, ...], out: Converted,
                       ignored: list[str]) -> None:
    keys = _by_key(section, path)
    v2_kind = "tuner" if kind == "advisor" else kind
    v2_path = (norm(v2_kind),)
    algorithm: dict[str, Any] = {}
    out.renames.append((v2_path, path))
    builtin = keys.pop(f"builtin{kind.title()}Name", None)
    for other in ("builtinTunerName", "builtinAssessorName", "builtinAdvisorName"):
        if other in keys:
            raise Problem(path + (Key(keys[other]),), f"a {kind} section names its built-in with "
                                                      f"builtin{kind.title()}Name", at_key=True)
    if builtin is not None:
        algorithm["name"] = section[builtin]
        out.renames.append((v2_path + ("name",), path + (Key(builtin),)))
    else:
        class_file = keys.pop("classFileName", None)
        class_name = keys.pop("className", None)
        if class_file is None or class_name is None:
            raise Problem(path, f"needs builtin{kind.title()}Name, or codeDir, classFileName and className "
                                f"(your own {kind})")
        file_name = section[class_file]
        if not isinstance(file_name, str) or not file_name.endswith(".py"):
            raise Problem(path + (Key(class_file),), f"expected a Python file name such as my_{kind}.py, "
                                                     f"got {file_name!r}")
        algorithm["className"] = f"{file_name[:-3]}.{section[class_name]}"
        out.renames.append((v2_path + ("classname",), path + (Key(class_name),)))
        code = keys.pop("codeDir", None)
        algorithm["codeDirectory"] = section[code] if code is not None else "."
        if code is not None:
            out.renames.append((v2_path + ("codedirectory",), path + (Key(code),)))
    args = keys.pop("classArgs", None)
    if args is not None:
        algorithm["classArgs"] = section[args]
        out.renames.append((v2_path + ("classargs",), path + (Key(args),)))
    key = keys.pop("includeIntermediateResults", None)
    if key is not None:
        ignored.append(f"{path[0]}.{key}")
    key = keys.pop("gpuIndices", None)
    if key is not None:
        raise Problem(path + (Key(key),), f"not supported: {kind} gpuIndices (NNI's tunerGpuIndices); "
                                          "expmgr's tuners run on the CPU; remove it", at_key=True)
    for key in keys.values():
        raise Problem(path + (Key(key),), f"unknown key in an NNI v1 {kind} section; known keys: "
                                          f"builtin{kind.title()}Name, className, codeDir, classFileName, "
                                          f"classArgs", at_key=True)
    if kind == "advisor":
        out.notes.append(f"{path[0]} is read as the tuner (NNI 3.0 does the same)")
    out.mapping[v2_kind] = algorithm

"""Validation and canonicalisation of an ExperimentConfig, field by field, in document order.

``canonicalize(config)`` returns a new config with defaults filled, durations in seconds and
absolute paths, or raises ConfigError for the first problem. Reading a file or a dict into
the records (keys only) is ``_reading.py``; the remote section is checked in ``_remote.py``, with
the value checks of ``_values.py``. (Over 600 lines: one validator checks every
field in the order a config file holds them; split by field, that order would be lost.)
"""
from __future__ import annotations

import copy
import importlib.util
import math
import re
from dataclasses import is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from expmgr.layout import default_home

from ._durations import parse_duration
from ._errors import ConfigError, Key, PathSegment, Problem, format_path
from ._keys import spell, unknown_message
from ._limits import (MAX_PENDING_TRIALS, MAX_TRIAL_CONCURRENCY, MAX_TRIAL_GPU_NUMBER, MAX_TRIAL_NUMBER,
                      MAX_TRIAL_PROCESS_LIMIT, MAX_TRIAL_RETRIES, MAX_TRIALS_PER_GPU, MAX_LOG_FILES_KEPT)
from ._loader import read_search_space_file
from ._reading import absolute_path, algorithm_from_mapping, check_platform, training_service_from_mapping
from ._search_space import check_search_space
from ._platforms import PLATFORMS, Platform, TrainingServiceSection, platform_of_section
from ._sections import AlgorithmConfig, LocalConfig, RayConfig, RemoteConfig, public_fields
from ._sizes import parse_size
from ._values import check_bool, check_gpu_indices, check_warm_start, non_negative_int, positive_int, shown_value

if TYPE_CHECKING:  # _model calls this module: the ExperimentConfig class is passed in
    from expmgr.algorithms.registered import RegisteredAlgorithm

    from ._model import ExperimentConfig

LOG_LEVELS = ("trace", "debug", "info", "warning", "error", "fatal")
DEFAULT_TRIAL_GRACE_PERIOD = 30.0
DEFAULT_LOG_MAX_SIZE = 64 * 2**20
"""Each log file's bound (experiment.log, dispatcher.log, daemon.log, daemon-stderr.log, a
trial's stdout, stderr and trial.log): with DEFAULT_LOG_FILES_KEPT, 256 MiB per log at most."""
DEFAULT_LOG_FILES_KEPT = 4
# NNI 3.0's built-in tuners and aliases (its builtin_algorithms.yml); those expmgr lacks get
# "not supported" rather than "unknown"
_NNI_ONLY_TUNERS = {name.lower() for name in (
    "PPO", "PPOTuner", "SMAC", "TPE_legacy", "NetworkMorphism", "RegularizedEvolutionTuner", "DNGO", "DNGOTuner",
    "GP", "GPTuner", "Metis", "MetisTuner", "BatchTuner", "PBTTuner")}
_CLASS_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_RAY_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?):([0-9]{1,5})$", re.ASCII)
"""``<host>:<port>`` of a Ray cluster's head (its GCS); an IPv6 host in brackets."""
_RAY_RESOURCES = ("cpu", "gpu", "memory")
"""The resources of ``trialResources`` that are not custom Ray resources (keys: any case)."""
RAY_RESOURCE_PRECISION = 0.0001
"""Ray's smallest non-zero resource amount (``ray._raylet.RESOURCE_UNIT_SCALING`` is 10,000)."""
RAY_NOT_INSTALLED = "not supported without Ray installed: pip install 'expmgr[ray]'"


# -- canonicalisation -----------------------------------------------------------------------

def canonicalize(config: ExperimentConfig, *, with_strategy: bool = False) -> ExperimentConfig:
    """``ExperimentConfig.canonical``."""
    try:
        return _Canonicalizer(config, with_strategy).run()
    except Problem as problem:
        raise _to_error(problem, config) from None


_PARAMETERS_TRIED_ALONE = 100
"""When a tuner refuses a search space, this many top-level parameters at most are tried
alone to name the one at fault (each try builds the tuner again)."""


def _space_path(key: tuple) -> tuple[PathSegment, ...]:
    """The config path of a parameter's flat key: ``("model", 0, "k")`` is
    ``searchSpace.model._value[0].k``."""
    path: list[PathSegment] = [Key("search_space"), key[0]]
    for index, name in zip(key[1::2], key[2::2]):
        path += ["_value", index, name]
    return tuple(path)


def _to_error(problem: Problem, config: ExperimentConfig) -> ConfigError:
    if problem.source is not None:
        return problem.source.error(problem)
    source = config._source
    if source is not None and _unchanged_since_load(config, problem.path):
        return source.error(problem)
    field = format_path(problem.path) or None
    if config._origin == "dict":
        return ConfigError(problem.message, field=field)
    shown = "ExperimentConfig" + ("." + format_path(problem.path, "snake") if problem.path else "")
    return ConfigError(problem.message, field=field, display_field=shown)


def _unchanged_since_load(config: ExperimentConfig, path: tuple[PathSegment, ...]) -> bool:
    if not path or not isinstance(path[0], Key):
        return True
    snapshot = config._source.snapshot
    return path[0] in snapshot and getattr(config, path[0]) == snapshot[path[0]]


class _Canonicalizer:
    def __init__(self, config: ExperimentConfig, with_strategy: bool = False) -> None:
        self.config = config
        self.with_strategy = with_strategy
        self.base = Path.cwd()
        self.style = "snake" if config._origin == "python" else "camel"
        self.read_from: str | None = None
        self.space_source: Any = None
        """The Source of a search space read from its own file (errors in it name that file)."""
        self.notes: list[str] = list(config._notes)
        """What loading changed or ignored, with what checking adds (``ExperimentConfig.notes``)."""

    def run(self) -> ExperimentConfig:
        config = self.config
        names = public_fields(type(config))
        order = list(config._source.key_order) if config._source is not None else []
        order += [n for n in names if n not in order]
        out: dict[str, Any] = {}
        for name in order:
            if name in out:
                continue
            if name in ("search_space", "search_space_file"):
                # The file's path is checked; a parameter's values are data for the trial, not run.
                _refuse_nul(config.search_space_file, (Key("search_space_file"),))
                out.update(self._search_space_pair())
                continue
            _refuse_nul(getattr(config, name), (Key(name),))
            check: Callable[[Any, tuple[PathSegment, ...]], Any] = getattr(self, "_" + name)
            out[name] = check(getattr(config, name), (Key(name),))
        if out["debug"] and (out["log_level"] is None
                             or LOG_LEVELS.index(out["log_level"]) > LOG_LEVELS.index("debug")):
            out["log_level"] = "debug"
        elif out["log_level"] is None:
            out["log_level"] = "info"
        self._check_builtin_algorithms(out)
        result = type(config)(**out)
        result._origin = config._origin
        result._source = config._source
        result._search_space_read_from = self.read_from
        result._notes = self.notes
        return result

    def _name(self, name: str) -> str:
        return spell(name, self.style)

    def _check_builtin_algorithms(self, out: dict[str, Any]) -> None:
        """Build each built-in tuner and assessor once, so that bad classArgs, or a search
        space the tuner cannot take, are reported here with their place in the config
        rather than by the dispatcher once the experiment runs."""
        from expmgr.algorithms import AlgorithmError, create_assessor, create_tuner

        for kind, create in (("tuner", create_tuner), ("assessor", create_assessor)):
            spec = out.get(kind)
            if spec is None or spec.name is None:
                continue
            apath = (Key(kind), Key("class_args"))
            self._check_argument_names(kind, spec, apath)
            try:
                algorithm = create(spec.name, spec.class_args)
            except AlgorithmError as error:
                raise Problem(apath, str(error)) from None
            if kind == "tuner" and out.get("search_space") is not None:
                self._check_tuner_space(spec, algorithm, out["search_space"])

    def _check_tuner_space(self, spec: AlgorithmConfig, tuner: Any, space: dict[str, Any]) -> None:
        """The tuner takes the space and draws from it once (``Tuner.check_search_space``); if
        that fails, the refusal names the first top-level parameter it fails on alone."""
        from expmgr.algorithms import create_tuner, search_space_refusal
        from expmgr.algorithms.search_space import NumpyDraws, SpaceDrawError, check_each_draw

        assert spec.name is not None
        try:
            check_each_draw(space)
        except SpaceDrawError as error:
            problem = Problem(_space_path(error.key), f"tuner {spec.name}: {error}")
            if self.space_source is not None:
                problem.source, problem.skip = self.space_source, 1
            raise problem from None
        if isinstance(tuner, NumpyDraws):
            # Its own draw would import numpy into the experiment's process (tests/experiment/
            # test_footprint.py); the rules and the draw above found what breaks it at load,
            # and its dispatcher checks the space itself at start and at each update.
            return
        said = search_space_refusal(tuner, space)
        if said is None:
            return
        path: tuple[PathSegment, ...] = (Key("search_space"),)
        if len(space) == 1:
            path += tuple(space)
        for name in list(space)[:_PARAMETERS_TRIED_ALONE] if len(space) > 1 else ():
            alone = search_space_refusal(create_tuner(spec.name, spec.class_args), {name: space[name]})
            if alone is not None:
                path, said = path + (name,), alone
                break
        problem = Problem(path, said if said.startswith(spec.name) else f"tuner {spec.name}: {said}")
        if self.space_source is not None:
            problem.source, problem.skip = self.space_source, 1
        raise problem

    def _check_argument_names(self, kind: str, spec: AlgorithmConfig, apath: tuple[PathSegment, ...]) -> None:
        from expmgr.algorithms import accepted_arguments, builtin_class

        assert spec.name is not None  # the caller checks only algorithms named
        accepted = accepted_arguments(builtin_class(kind, spec.name)[1])
        for key in spec.class_args or {}:
            if accepted is not None and key not in accepted:
                raise Problem(apath + (key,), unknown_message(f"{kind} {spec.name} argument", key, accepted,
                                                               "arguments"), at_key=True)

    # search space --------------------------------------------------------------------------
    def _search_space_pair(self) -> dict[str, Any]:
        self._refuse_nni_only_tuner()   # before its space: what it lacks is beside the point
        inline, file = self.config.search_space, self.config.search_space_file
        ss_path, file_path = (Key("search_space"),), (Key("search_space_file"),)
        both = (f"give either {self._name('search_space')} or {self._name('search_space_file')}, "
                f"not both")
        if file is None:
            if inline is None and self.with_strategy:
                return {"search_space": None, "search_space_file": None}
            if inline is None:
                raise Problem(ss_path, f"required: give {self._name('search_space')} (inline) or "
                                       f"{self._name('search_space_file')} (a JSON or YAML file)")
            self._check_space(inline, ss_path)
            return {"search_space": copy.deepcopy(inline), "search_space_file": None}
        real = self._path(file, file_path)
        if inline is not None and self.config._search_space_read_from == str(real):
            self._check_space(inline, ss_path)   # read earlier; the file is only a reference now
            self.read_from = str(real)
            return {"search_space": copy.deepcopy(inline), "search_space_file": real}
        if not real.exists():
            if inline is not None:
                raise Problem(ss_path, both)
            raise Problem(file_path, f"file not found: {real}")
        if not real.is_file():
            raise Problem(file_path, f"not a file: {real}")
        space, source = read_search_space_file(real)
        if inline is not None and inline != space:
            raise Problem(ss_path, both)
        try:
            self._check_space(space, ss_path)
        except Problem as problem:
            problem.source, problem.skip = source, 1
            raise
        self.read_from, self.space_source = str(real), source
        return {"search_space": space, "search_space_file": real}

    def _refuse_nni_only_tuner(self) -> None:
        from expmgr.algorithms import BUILTIN_TUNERS

        tuner = self.config.tuner
        name = tuner.name if isinstance(tuner, AlgorithmConfig) else None
        if isinstance(tuner, dict):
            name = next((v for k, v in tuner.items() if isinstance(k, str) and k.lower() == "name"), None)
        known = {n.lower() for n in BUILTIN_TUNERS}
        if (isinstance(name, str) and name.lower() in _NNI_ONLY_TUNERS and name.lower() not in known
                and _registered(name) is None):   # a user's own registered under NNI's name is theirs
            self._algorithm(tuner, (Key("tuner"),), "tuner")   # raises its "not supported"

    def _check_space(self, space: Any, path: tuple[PathSegment, ...]) -> None:
        """The search space's rules; a custom tuner (className) gets any mapping, as in NNI,
        where such tuners may define their own format or need no space at all."""
        if self._custom_tuner():
            if not isinstance(space, dict):
                raise Problem(path, f"expected a mapping, got {space!r}")
            return
        check_search_space(space, path)

    def _custom_tuner(self) -> bool:
        tuner = self.config.tuner
        if isinstance(tuner, dict):
            name = next((v for k, v in tuner.items() if isinstance(k, str) and k.lower() == "name"), None)
            return _registered(name) is not None or any(
                isinstance(k, str) and k.lower().replace("_", "") == "classname" for k in tuner)
        return isinstance(tuner, AlgorithmConfig) and (tuner.class_name is not None
                                                       or _registered(tuner.name) is not None)

    # scalar fields -------------------------------------------------------------------------
    def _experiment_name(self, value: Any, path: tuple[PathSegment, ...]) -> str | None:
        return _optional(value, path, _string)

    def _trial_command(self, value: Any, path: tuple[PathSegment, ...]) -> str:
        if value is None:
            raise Problem(path, "required: the command that runs one trial, e.g. python3 trial.py")
        if not isinstance(value, str) or not value.strip():
            raise Problem(path, f"expected a non-empty command, got {value!r}")
        return value

    def _trial_code_directory(self, value: Any, path: tuple[PathSegment, ...]) -> Path:
        real = self._path("." if value is None else value, path)
        if not real.exists():
            raise Problem(path, f"directory not found: {real}")
        if not real.is_dir():
            raise Problem(path, f"not a directory: {real}")
        return real

    def _trial_concurrency(self, value: Any, path: tuple[PathSegment, ...]) -> int:
        if value is None:
            raise Problem(path, "required: how many trials run at once, e.g. 1")
        return positive_int(value, path, MAX_TRIAL_CONCURRENCY)

    def _trial_gpu_number(self, value: Any, path: tuple[PathSegment, ...]) -> int | None:
        return None if value is None else non_negative_int(value, path, MAX_TRIAL_GPU_NUMBER)

    def _max_experiment_duration(self, value: Any, path: tuple[PathSegment, ...]) -> float | None:
        return _optional(value, path, _duration)

    def _max_trial_number(self, value: Any, path: tuple[PathSegment, ...]) -> int | None:
        return None if value is None else positive_int(value, path, MAX_TRIAL_NUMBER)

    def _max_trial_duration(self, value: Any, path: tuple[PathSegment, ...]) -> float | None:
        return _optional(value, path, _duration)

    def _max_trial_retries(self, value: Any, path: tuple[PathSegment, ...]) -> int:
        return 0 if value is None else non_negative_int(value, path, MAX_TRIAL_RETRIES)

    def _trial_idle_timeout(self, value: Any, path: tuple[PathSegment, ...]) -> float | None:
        return _optional(value, path, _duration)

    def _trial_grace_period(self, value: Any, path: tuple[PathSegment, ...]) -> float:
        return DEFAULT_TRIAL_GRACE_PERIOD if value is None else _duration(value, path)

    def _nni_manager_ip(self, value: Any, path: tuple[PathSegment, ...]) -> str | None:
        return _optional(value, path, _string)

    def _use_annotation(self, value: Any, path: tuple[PathSegment, ...]) -> bool:
        if value is None:
            return False
        if check_bool(value, path):
            raise Problem(path, "annotations are not supported; remove the key or set it to false")
        return False

    def _debug(self, value: Any, path: tuple[PathSegment, ...]) -> bool:
        return False if value is None else check_bool(value, path)

    def _log_level(self, value: Any, path: tuple[PathSegment, ...]) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or value.lower() not in LOG_LEVELS:
            raise Problem(path, unknown_message("log level", str(value), list(LOG_LEVELS), "levels"))
        return value.lower()

    def _log_max_size(self, value: Any, path: tuple[PathSegment, ...]) -> int:
        if value is None:
            return DEFAULT_LOG_MAX_SIZE
        if value == 0 and not isinstance(value, bool):
            return 0  # no bound
        try:
            return parse_size(value)
        except ConfigError as exc:
            raise Problem(path, f"{exc.message}; 0 means no limit") from None

    def _log_files_kept(self, value: Any, path: tuple[PathSegment, ...]) -> int:
        return DEFAULT_LOG_FILES_KEPT if value is None else positive_int(value, path, MAX_LOG_FILES_KEPT)

    def _experiment_type(self, value: Any, path: tuple[PathSegment, ...]) -> str:
        if value is None:
            return "hpo"
        if not isinstance(value, str) or value.lower() != "hpo":
            raise Problem(path, f"only 'hpo' experiments are supported, got {value!r}")
        return "hpo"

    def _experiment_working_directory(self, value: Any, path: tuple[PathSegment, ...]) -> Path:
        if value is None:
            return default_home()
        real = self._path(value, path)
        # the experiment's folder is made inside: what exists on the way must be a folder
        existing = next((p for p in (real, *real.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            what = "" if existing == real else f" ({existing} is a file)"
            raise Problem(path, f"not a directory: {real}{what}")
        return real

    def _path(self, value: Any, path: tuple[PathSegment, ...]) -> Path:
        if not isinstance(value, (str, Path)) or not str(value).strip():
            raise Problem(path, f"expected a path, got {value!r}")
        return absolute_path(value, self.base)

    # sections ------------------------------------------------------------------------------
    def _tuner(self, value: Any, path: tuple[PathSegment, ...]) -> AlgorithmConfig | None:
        value = _unless_unfilled(value)
        if value is None and self.with_strategy:
            return None
        if value is None:
            raise Problem(path, "required (e.g. tuner: {name: TPE})" if self.style == "camel"
                          else "required (e.g. tuner={'name': 'TPE'})")
        return self._algorithm(value, path, "tuner")

    def _assessor(self, value: Any, path: tuple[PathSegment, ...]) -> AlgorithmConfig | None:
        value = _unless_unfilled(value)
        return None if value is None else self._algorithm(value, path, "assessor")

    def _algorithm(self, value: Any, path: tuple[PathSegment, ...], kind: str) -> AlgorithmConfig:
        from expmgr.algorithms import BUILTIN_ASSESSORS, BUILTIN_TUNERS, nni_builtin

        if isinstance(value, dict):
            value = algorithm_from_mapping(value, path, self.style)
        if not isinstance(value, AlgorithmConfig):
            raise Problem(path, f"expected a mapping such as {{name: ..., classArgs: {{...}}}}, got {value!r}")
        builtin = nni_builtin(value.class_name) if isinstance(value.class_name, str) and value.name is None else None
        if builtin is not None and builtin[0] == kind:
            # NNI's own class of one of our built-ins: checked and run as that built-in (its
            # classArgs and default optimize_mode included), wherever NNI's codeDir pointed.
            value = AlgorithmConfig(name=builtin[1], class_args=value.class_args)
        name_key, class_key = self._name("name"), self._name("class_name")
        if value.name is not None and value.class_name is not None:
            raise Problem(path + (Key("class_name"),),
                          f"give either {name_key} (a built-in {kind}) or {class_key} (your own class), not both")
        result = AlgorithmConfig()
        registered = _registered(value.name, path)
        if registered is not None and registered.kind != kind:
            raise Problem(path + (Key("name"),), f"{value.name!r} is registered as an {registered.algo_type}, "
                                                 f"not a {kind} (expctl algo show {registered.builtin_name})")
        if registered is not None:
            # A user's algorithm registered by name (expctl algo register): its class, importable
            # where expmgr runs, as NNI's registry resolves it.
            result.class_name = registered.class_name
            if value.code_directory is not None:
                raise Problem(path + (Key("code_directory"),),
                              f"{self._name('code_directory')} is only used with {class_key}")
        elif value.name is not None:
            builtins = BUILTIN_TUNERS if kind == "tuner" else BUILTIN_ASSESSORS
            by_lower = {n.lower(): n for n in builtins}
            if not isinstance(value.name, str) or value.name.lower() not in by_lower:
                if isinstance(value.name, str) and value.name.lower() in _NNI_ONLY_TUNERS and kind == "tuner":
                    raise Problem(path + (Key("name"),),
                                  f"not supported: {value.name} (one of NNI's built-in tuners, not in expmgr); "
                                  f"expmgr's tuners: {', '.join(builtins)}")
                raise Problem(path + (Key("name"),),
                              unknown_message(kind, str(value.name), list(builtins), f"{kind}s"))
            result.name = by_lower[value.name.lower()]
            if value.code_directory is not None:
                raise Problem(path + (Key("code_directory"),),
                              f"{self._name('code_directory')} is only used with {class_key}")
        elif value.class_name is not None:
            if not isinstance(value.class_name, str) or not _CLASS_NAME.match(value.class_name):
                raise Problem(path + (Key("class_name"),),
                              f"expected module.ClassName (e.g. my_tuner.MyTuner), got {value.class_name!r}")
            result.class_name = value.class_name
            if value.code_directory is not None:
                cpath = path + (Key("code_directory"),)
                real = self._path(value.code_directory, cpath)
                if not real.is_dir():
                    raise Problem(cpath, f"directory not found: {real}")
                result.code_directory = real
        else:
            raise Problem(path, f"needs {name_key} (a built-in {kind} such as "
                                f"{'TPE' if kind == 'tuner' else 'Medianstop'}) or {class_key} (module.ClassName)")
        args = {} if value.class_args is None else value.class_args
        apath = path + (Key("class_args"),)
        if not isinstance(args, dict):
            raise Problem(apath, f"expected a mapping of argument names to values, got {args!r}")
        for key in args:
            if not isinstance(key, str):
                raise Problem(apath + (str(key),), f"argument names must be strings, got {key!r}", at_key=True)
        args = copy.deepcopy(args)
        if "optimize_mode" in args:
            mode = args["optimize_mode"]
            if not isinstance(mode, str) or mode.lower() not in ("maximize", "minimize"):
                raise Problem(apath + ("optimize_mode",), f"expected 'maximize' or 'minimize', got {mode!r}")
            args["optimize_mode"] = mode.lower()
        if registered is not None:
            from expmgr.algorithms.registered import class_args_refusal
            refusal = class_args_refusal(registered, args)
            if refusal is not None:
                raise Problem(apath, refusal)
        result.class_args = args
        return result

    def _training_service(self, value: Any, path: tuple[PathSegment, ...]
                          ) -> TrainingServiceSection | list[TrainingServiceSection]:
        if value is None:
            return LocalConfig()
        if isinstance(value, list) and not value:
            raise Problem(path, "expected a training service such as {platform: local}, or a list of them; "
                                "got an empty list")
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, list):
            section, platform = self._service_section(value, path)
            return self._checked_service(section, platform, path)
        # hybrid (NNI's): trials fill the slots of every service of the list
        given: dict[str, int] = {}
        services = []
        for index, item in enumerate(value):
            section, platform = self._service_section(item, path + (index,))
            platform_path = path + (index, Key("platform"))
            if platform.name == "ray":
                raise Problem(platform_path, "not supported: ray in a list of training services (hybrid); Ray "
                                             "places trials on its cluster's nodes itself: give platform: ray alone")
            if platform.name in given:
                raise Problem(platform_path, f"platform {platform.name} is given twice in the list (at "
                                             f"{given[platform.name]} and {index}); give each once (a remote "
                                             f"service's machineList holds all its hosts)")
            given[platform.name] = index
            services.append(self._checked_service(section, platform, path + (index,)))
        return services

    def _service_section(self, value: Any, path: tuple[PathSegment, ...]) -> tuple[TrainingServiceSection, Platform]:
        """One training service's section as written, and its platform."""
        if isinstance(value, dict):
            value = training_service_from_mapping(value, path, self.style)
        try:
            own = platform_of_section(value)
        except TypeError:
            raise Problem(path, f"expected a mapping such as {{platform: local}}, got {value!r}") from None
        platform_path = path + (Key("platform"),)
        platform = PLATFORMS[check_platform(value.platform, platform_path)]
        if own is not platform:
            raise Problem(platform_path, f"{type(value).__name__} is the section of platform {own.name!r}; "
                                         f"for platform {platform.name!r} use {platform.section.__name__}")
        return value, platform

    def _checked_service(self, value: TrainingServiceSection, platform: Platform,
                         path: tuple[PathSegment, ...]) -> TrainingServiceSection:
        check: Callable[[Any, tuple[PathSegment, ...]], TrainingServiceSection] = getattr(self, platform.check)
        return check(value, path)

    def _remote_service(self, value: RemoteConfig, path: tuple[PathSegment, ...]) -> RemoteConfig:
        from ._remote import check_remote_service   # it uses this module's value checks
        return check_remote_service(value, path, self.style, self.base, self.notes)

    def _local_service(self, value: LocalConfig, path: tuple[PathSegment, ...]) -> LocalConfig:
        result = LocalConfig()
        result.use_active_gpu = check_bool(value.use_active_gpu, path + (Key("use_active_gpu"),))
        result.max_trial_number_per_gpu = positive_int(value.max_trial_number_per_gpu,
                                                        path + (Key("max_trial_number_per_gpu"),),
                                                        MAX_TRIALS_PER_GPU)
        result.gpu_indices = check_gpu_indices(value.gpu_indices, path + (Key("gpu_indices"),))
        if value.trial_process_limit is not None:   # None: the default (ResolvedLocalConfig's)
            result.trial_process_limit = non_negative_int(value.trial_process_limit,
                                                           path + (Key("trial_process_limit"),), MAX_TRIAL_PROCESS_LIMIT)
        if value.trial_warm_start is not None:
            result.trial_warm_start = check_warm_start(value.trial_warm_start, path + (Key("trial_warm_start"),))
        if value.reattach_window is not None:
            try:
                result.reattach_window = parse_duration(value.reattach_window, allow_zero=True)
            except ConfigError as exc:
                raise Problem(path + (Key("reattach_window"),), exc.message) from None
        if result.reattach_window and result.trial_warm_start not in (None, "off"):
            # A kept trial's parent is its keeper (training/keeper.py), not a template's fork.
            raise Problem(path + (Key("reattach_window"),),
                          f"a reattach window keeps each trial under a process of its own, which a warm start "
                          f"cannot fork: set {format_path(path + (Key('trial_warm_start'),), self.style)} to off "
                          f"or the window to 0")
        return result

    def _ray_service(self, value: RayConfig, path: tuple[PathSegment, ...]) -> RayConfig:
        if importlib.util.find_spec("ray") is None:
            raise Problem(path + (Key("platform"),), RAY_NOT_INSTALLED)
        result = RayConfig()
        result.address = _ray_address(value.address, path + (Key("address"),))
        result.trial_resources = self._trial_resources(value.trial_resources, path + (Key("trial_resources"),))
        if value.max_pending_trials is not None:
            result.max_pending_trials = positive_int(value.max_pending_trials, path + (Key("max_pending_trials"),),
                                                      MAX_PENDING_TRIALS)
        if value.runtime_env is not None:
            result.runtime_env = _runtime_env(value.runtime_env, path + (Key("runtime_env"),))
        if value.storage_path is not None:
            result.storage_path = _storage_path(value.storage_path, path + (Key("storage_path"),))
        if value.trial_placement is not None:
            from ._placement import check_trial_placement
            placement_path = path + (Key("trial_placement"),)
            result.trial_placement = check_trial_placement(value.trial_placement, placement_path, self.style,
                                                           self._trial_resources)
            # trialResources, canonical, is each rank's (so a canonical config reads back as is).
            if value.trial_resources and result.trial_resources != result.trial_placement["resources_per_worker"]:
                raise Problem(placement_path, f"give {format_path(path + (Key('trial_resources'),), self.style)} "
                                              f"or {format_path(placement_path, self.style)}, not both: with "
                                              f"{format_path(placement_path, self.style)}, each worker asks for "
                                              "its resourcesPerWorker")
            result.trial_resources = result.trial_placement["resources_per_worker"]
            if result.storage_path is not None:
                # Each rank would stream its own files from its own node folder: not built yet.
                raise Problem(placement_path, f"multi-node trials need the shared folder for now: give "
                                              f"{format_path(placement_path, self.style)} or "
                                              f"{format_path(path + (Key('storage_path'),), self.style)}, not both "
                                              "(docs/ray.md, Limits)")
        if value.scale_up_timeout is not None:
            result.scale_up_timeout = _duration(value.scale_up_timeout, path + (Key("scale_up_timeout"),))
        if value.trial_python is not None:
            result.trial_python = _trial_python(value.trial_python, path + (Key("trial_python"),))
        return result

    def _trial_resources(self, value: Any, path: tuple[PathSegment, ...]) -> dict[str, Any]:
        """``{cpu, gpu[, memory], custom...}``: amounts as floats (memory in bytes), custom
        resources after the others, sorted; gpu from ``trialGpuNumber`` when not given."""
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise Problem(path, f"expected a mapping of resources to amounts such as {{cpu: 2, gpu: 1, memory: 4GiB}}, "
                                f"got {shown_value(value)}")
        builtin: dict[str, Any] = {}   # cpu, gpu, memory: checked, in the order written
        written: dict[str, str] = {}   # each of them: its key as written
        custom: dict[str, float] = {}
        for key, amount in value.items():
            if not isinstance(key, str) or not key.strip():
                raise Problem(path + (str(key),), f"resource names must be non-empty strings, got {key!r}",
                              at_key=True)
            name = key.lower().replace("_", "")
            if name not in _RAY_RESOURCES:
                custom[key] = _resource_amount(amount, path + (key,))
                continue
            if name in written:
                raise Problem(path + (key,), f"{name!r} is given twice ({written[name]}, {key})", at_key=True)
            written[name] = key
            if amount is None:
                continue   # as if not given
            if name == "memory":
                try:
                    builtin[name] = parse_size(amount)
                except ConfigError as exc:
                    raise Problem(path + (Key(name),), exc.message) from None
            else:
                builtin[name] = _resource_amount(amount, path + (Key(name),))
        gpu_number = self._trial_gpu_number(self.config.trial_gpu_number, (Key("trial_gpu_number"),))
        if "gpu" in builtin and gpu_number is not None and gpu_number != builtin["gpu"]:
            gpu_path = path + (Key("gpu"),)
            raise Problem(gpu_path, f"{self._name('trial_gpu_number')} is {gpu_number} but "
                                    f"{format_path(gpu_path, self.style)} is {value[written['gpu']]!r}: give the "
                                    f"GPUs of a trial in one of them, or the same number in both")
        out: dict[str, Any] = {"cpu": builtin.get("cpu", 1.0),
                               "gpu": builtin.get("gpu", 0.0 if gpu_number is None else float(gpu_number))}
        if "memory" in builtin:
            out["memory"] = builtin["memory"]
        out.update(sorted(custom.items()))
        return out


# -- value checks ---------------------------------------------------------------------------

def _registered(name: Any, path: tuple[PathSegment, ...] = (Key("tuner"),)) -> RegisteredAlgorithm | None:
    """The algorithm registered as ``name`` in the default home (``expctl algo register``),
    unless ``name`` is a built-in's; a damaged registry is a Problem at ``path``'s name."""
    from expmgr.algorithms import BUILTIN_ASSESSORS, BUILTIN_TUNERS, AlgorithmError
    from expmgr.algorithms.registered import find_registered
    if not isinstance(name, str) or name.lower() in {n.lower() for n in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS)}:
        return None
    try:
        return find_registered(default_home(), name)
    except AlgorithmError as error:
        raise Problem(path + (Key("name"),), str(error)) from None


def _unless_unfilled(value: Any) -> Any:
    """None for a tuner/assessor placeholder of ``ExperimentConfig('local')`` left empty."""
    return None if isinstance(value, AlgorithmConfig) and value.is_unfilled_placeholder() else value


def _optional(value: Any, path: tuple[PathSegment, ...], check: Callable[[Any, tuple[PathSegment, ...]], Any]) -> Any:
    return None if value is None else check(value, path)


def _refuse_nul(value: Any, path: tuple[PathSegment, ...]) -> None:
    """Problem at the first string (or key) holding a NUL character, in a value or a section:
    a command, a path, an environment variable or an argument cannot hold one, so a trial
    would fail at its launch rather than the config at its load."""
    if isinstance(value, (str, Path)):
        if "\0" in str(value):
            raise Problem(path, "contains a NUL character (\\0), which no command, path or environment "
                                "variable can hold")
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\0" in key:
                raise Problem(path + (key,), "this key contains a NUL character (\\0)", at_key=True)
            _refuse_nul(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _refuse_nul(item, path + (index,))
    elif is_dataclass(value) and not isinstance(value, type):   # a section: tuner, trainingService
        for name in public_fields(type(value)):
            _refuse_nul(getattr(value, name), path + (Key(name),))


def _string(value: Any, path: tuple[PathSegment, ...]) -> str:
    if not isinstance(value, str):
        raise Problem(path, f"expected a string, got {value!r}")
    return value














def _duration(value: Any, path: tuple[PathSegment, ...]) -> float:
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise Problem(path, exc.message) from None




def _trial_python(value: Any, path: tuple[PathSegment, ...]) -> str:
    from ._platforms import TRIAL_PYTHON_CHOICES
    if isinstance(value, str) and value.lower() in TRIAL_PYTHON_CHOICES:
        return value.lower()
    raise Problem(path, f"expected one of {', '.join(TRIAL_PYTHON_CHOICES)} (ray: the Ray worker's own Python; "
                        f"path: the node's PATH), got {shown_value(value)}")


def _resource_amount(value: Any, path: tuple[PathSegment, ...]) -> float:
    """A Ray resource amount: a number >= 0, fractions down to Ray's precision."""
    expected = "expected a number >= 0 (fractions such as 0.5 are allowed)"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Problem(path, f"{expected}, got {shown_value(value)}")
    try:
        amount = float(value)
    except OverflowError:   # an integer beyond any float
        amount = math.inf
    if not math.isfinite(amount) or amount < 0:
        raise Problem(path, f"{expected}, got {shown_value(value)}")
    if 0 < amount < RAY_RESOURCE_PRECISION:
        raise Problem(path, f"Ray's smallest amount is {RAY_RESOURCE_PRECISION}; give 0 or at least that, "
                            f"got {shown_value(value)}")
    return amount


def _ray_address(value: Any, path: tuple[PathSegment, ...]) -> str:
    """``auto`` (the cluster this machine is a node of, as ``ray start`` left it) or ``<host>:<port>``."""
    if value is None:
        return "auto"
    expected = "expected auto or the <host>:<port> of the cluster's head node (e.g. 10.0.0.5:6379)"
    if not isinstance(value, str):
        raise Problem(path, f"{expected}, got {shown_value(value)}")
    text = value.strip()
    if text.lower() == "auto":
        return "auto"
    if text.lower().startswith("ray://"):
        raise Problem(path, "not supported: Ray Client (ray://); run expctl on a node of the cluster")
    match = _RAY_ADDRESS.match(text)
    if match is None:
        raise Problem(path, f"{expected}, got {shown_value(value)}")
    port = int(match.group(2))
    if not 1 <= port <= 65535:
        raise Problem(path, f"the port must be 1 to 65535, got {shown_value(value)}")
    return f"{match.group(1)}:{port}"


def _runtime_env(value: Any, path: tuple[PathSegment, ...]) -> dict[str, Any]:
    """Ray's runtime environment, passed to Ray as it is: a mapping of JSON values (the
    stored config holds it)."""
    if not isinstance(value, dict):
        raise Problem(path, f"expected a mapping, Ray's runtime_env (e.g. {{env_vars: {{A: '1'}}}}), "
                            f"got {shown_value(value)}")
    _check_json(value, path)
    return copy.deepcopy(value)


def _storage_path(value: Any, path: tuple[PathSegment, ...]) -> str:
    """``storagePath``: where checkpoints are kept when no folder is shared (docs/ray.md)."""
    if not isinstance(value, str):
        raise Problem(path, f"expected an absolute path or an s3:// URI, got {shown_value(value)}")
    problem = _storage_path_problem(value)
    if problem is not None:
        raise Problem(path, problem)
    return value


def _check_json(value: Any, path: tuple[PathSegment, ...]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise Problem(path + (str(key),), f"keys must be strings, got {key!r}", at_key=True)
            _check_json(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, path + (i,))
    elif isinstance(value, float) and not math.isfinite(value):
        raise Problem(path, f"expected a finite number, got {value!r}")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise Problem(path, f"expected a JSON value (a string, number, boolean, list or mapping), "
                            f"got {shown_value(value)}")


def _storage_path_problem(value: str) -> str | None:
    """The form of a storage path (the Ray service checks its S3 options when it starts:
    ``training.checkpoint_storage``, a layer above this one)."""
    if not value.strip():
        return "the storage path is empty: give an absolute path or an s3:// URI"
    if "://" not in value:
        if not value.startswith("/"):
            return f"{value!r} is a relative path: give an absolute path (the same on every node) or an s3:// URI"
        return None
    scheme = value.split("://", 1)[0].lower()
    if scheme not in ("file", "s3"):
        return f"scheme {scheme!r} is not supported; give an absolute path, a file:// URI or an s3:// URI"
    return None

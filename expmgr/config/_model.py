"""The config record ExperimentConfig; its sections AlgorithmConfig, LocalConfig, RayConfig and
RemoteConfig are in ``_sections``.

Plain dataclasses with snake_case attributes; ``canonical()`` validates and fills defaults,
``to_dict()``/``to_yaml()`` write NNI v2 camelCase, ``load()``/``from_dict()`` read it back.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, Union

from ._platforms import PLATFORMS, TrainingServiceSection
from ._sections import AlgorithmConfig, LocalConfig, PathLike, section_dict
from ._yaml_text import yaml_text

Duration = Union[int, float, str]


@dataclass(slots=True)
class ExperimentConfig:
    """An experiment's configuration (NNI v2 format: camelCase in YAML, snake_case here).

    Build it in Python or ``ExperimentConfig.load("config.yml")``; attributes can be set
    freely before the experiment starts, and ``canonical()`` validates the result.
    As NNI's, ``ExperimentConfig('local')`` is an empty config to fill in: its tuner and
    assessor are empty sections (``config.tuner.name = 'TPE'``), absent while left empty.
    """

    training_service_platform: InitVar[str | list[str] | None] = None
    """NNI's first argument: the platform whose config to fill in (``local``, ``ray``, ``remote``),
    or a list of them (hybrid)."""
    _: KW_ONLY
    experiment_name: str | None = None
    search_space_file: PathLike | None = None
    search_space: dict[str, Any] | None = None
    trial_command: str | None = None
    trial_code_directory: PathLike = "."
    trial_concurrency: int | None = None
    trial_gpu_number: int | None = None
    max_experiment_duration: Duration | None = None
    max_trial_number: int | None = None
    max_trial_duration: Duration | None = None
    max_trial_retries: int = 0
    trial_idle_timeout: Duration | None = None
    trial_grace_period: Duration | None = None
    nni_manager_ip: str | None = None
    use_annotation: bool = False
    debug: bool = False
    log_level: str | None = None
    log_max_size: int | str | None = None
    log_files_kept: int | None = None
    experiment_type: str = "hpo"
    experiment_working_directory: PathLike | None = None
    tuner: AlgorithmConfig | dict[str, Any] | None = None
    assessor: AlgorithmConfig | dict[str, Any] | None = None
    training_service: TrainingServiceSection | dict[str, Any] | list[Any] | None = field(
        default_factory=LocalConfig)

    # where the config came from, for error positions; not part of the config itself
    _origin: str = field(default="python", init=False, repr=False, compare=False)
    _source: Any = field(default=None, init=False, repr=False, compare=False)
    # set on canonical/resumed configs: search_space was read from this file, which is now
    # kept only for reference
    _search_space_read_from: str | None = field(default=None, init=False, repr=False, compare=False)
    # what loading changed or ignored (NNI's v1 format converted, advisor read as tuner)
    _notes: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self, training_service_platform: str | list[str] | None) -> None:
        if training_service_platform is None:
            return
        from ._errors import ConfigError, Key, Problem
        from ._reading import check_platform
        platforms = ([training_service_platform] if isinstance(training_service_platform, str)
                     else training_service_platform)
        if not platforms:
            raise ConfigError(f"expected a training service platform, got {training_service_platform!r}",
                              field="trainingService")
        sections = []
        for index, name in enumerate(platforms):
            try:
                sections.append(PLATFORMS[check_platform(name, (Key("platform"),))].section())
            except Problem as problem:
                field = "trainingService.platform" if len(platforms) == 1 else f"trainingService[{index}].platform"
                raise ConfigError(problem.message, field=field) from None
        # NNI's ExperimentConfig(['local', 'remote']): a hybrid's sections to fill in
        self.training_service = sections[0] if len(sections) == 1 else sections
        if self.tuner is None:
            self.tuner = AlgorithmConfig.placeholder()
        if self.assessor is None:
            self.assessor = AlgorithmConfig.placeholder()

    @classmethod
    def load(cls, path: PathLike) -> ExperimentConfig:
        """Read and validate a YAML config; relative paths in it are relative to its folder.

        Returns the config as written (paths made absolute); raises ConfigError with the
        file, line and column of the first problem.
        """
        from ._reading import load_config
        return load_config(cls, path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        """The inverse of ``to_dict()``: camelCase or snake_case keys. Validates keys only."""
        from ._reading import config_from_dict
        return config_from_dict(cls, data)

    @property
    def notes(self) -> tuple[str, ...]:
        """What loading changed or ignored, such as NNI's v1 format converted to v2 or
        ``advisor`` read as the tuner; logged in experiment.log when the experiment starts."""
        return tuple(self._notes)

    @property
    def minimizes(self) -> bool:
        """Whether results are better when lower: the tuner's ``optimize_mode`` is
        ``minimize``, given or by the built-in tuner's default (maximize otherwise, and
        without a tuner)."""
        return _tuner_minimizes(self.tuner)

    def canonical(self, *, with_strategy: bool = False) -> ExperimentConfig:
        """A new, validated copy: durations in seconds, absolute paths, defaults filled.

        ``with_strategy``: the experiment is driven by a strategy (Python code that
        submits trials), so a tuner and a search space become optional.
        """
        from ._validate import canonicalize
        return canonicalize(self, with_strategy=with_strategy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable NNI v2 dict: camelCase keys, paths as str, None fields left out."""
        return section_dict(self)

    def to_yaml(self) -> str:
        """``to_dict()`` as camelCase YAML text."""
        return yaml_text(self.to_dict())


def _tuner_minimizes(tuner: object) -> bool:
    """``ExperimentConfig.minimizes`` of a config with this tuner (a section or its dict)."""
    if isinstance(tuner, dict):
        class_args, name = tuner.get("classArgs") or tuner.get("class_args"), tuner.get("name")
    else:
        class_args, name = getattr(tuner, "class_args", None), getattr(tuner, "name", None)
    mode = (class_args if isinstance(class_args, dict) else {}).get("optimize_mode")
    if mode is None and isinstance(name, str):
        from expmgr.algorithms import default_argument
        mode = default_argument("tuner", name, "optimize_mode")
    return isinstance(mode, str) and mode.lower() == "minimize"


def stored_config_minimizes(config: dict[str, Any]) -> bool:
    """``minimizes`` of a config as a store holds it (camelCase), without validating it: for
    a store written before the direction was stored with the experiment (``ExperimentProfile``)."""
    return _tuner_minimizes(config.get("tuner"))

"""ResolvedConfig: the config as the engine, the training services and the dispatcher read it.

``ExperimentConfig`` is what a user writes, so its fields take what a user may write
(``"1.5h"``, a relative path, a dict for the tuner, nothing for a default). ``ResolvedConfig``
is the validated result, frozen and narrowly typed: durations in seconds, absolute paths,
defaults applied. It is made in one place, ``from_config``, and changed while running
through one, ``with_update``::

    resolved = ResolvedConfig.from_config(config)          # ConfigError for a bad config
    resolved.max_experiment_duration                       # 5400.0 for "1.5h"
    resolved = resolved.with_update("trialConcurrency", 4)  # a new one; ConfigError if refused
    store.set_config(resolved.to_dict())                    # the canonical config, camelCase
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ._durations import parse_duration
from ._errors import ConfigError
from ._model import Duration, ExperimentConfig
from ._platforms import ResolvedTrainingService, TrainingServiceSection, platform_of_section, platforms_label
from ._sections import AlgorithmConfig, PathLike
from ._updatable import UPDATABLE_FIELDS
from expmgr.rotation import RotationLimits

_ATTRIBUTES = {entry.field: entry.attribute for entry in UPDATABLE_FIELDS}
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A validated experiment config; see the module docstring. Build it with ``from_config``."""

    experiment_name: str | None
    trial_command: str
    trial_code_directory: Path
    trial_concurrency: int
    trial_gpu_number: int | None
    """None: trials' ``CUDA_VISIBLE_DEVICES`` is left alone; 0: trials are kept off the GPUs."""
    max_trial_number: int | None
    max_experiment_duration: float | None
    """Seconds, as are the other durations."""
    max_trial_duration: float | None
    trial_idle_timeout: float | None
    trial_grace_period: float
    max_trial_retries: int
    search_space: dict[str, Any] | None
    tuner: AlgorithmConfig | None
    assessor: AlgorithmConfig | None
    training_service: ResolvedTrainingService
    """The training service: the first of ``training_services``, the only one unless hybrid."""
    training_services: tuple[ResolvedTrainingService, ...]
    """Every training service in the order written: one, or several for NNI's hybrid form (a
    list of ``trainingService`` sections); its trials fill the slots of them all."""
    log_level: str
    """A level of ``logLevel`` in lower case; ``debug: true`` makes it at least ``debug``."""
    log_limits: RotationLimits
    """``logMaxSize`` and ``logFilesKept``: how every log file of the experiment is bounded."""
    experiment_working_directory: Path
    minimizes: bool
    """Whether results are better when lower (see ``ExperimentConfig.minimizes``)."""
    with_strategy: bool
    """A strategy (Python code) submits the trials: tuner and search space are optional."""
    _canonical: ExperimentConfig = field(repr=False, compare=False)
    """The validated ExperimentConfig this was made from: what ``to_dict`` writes."""

    @classmethod
    def from_config(cls, config: ExperimentConfig, *, with_strategy: bool = False) -> ResolvedConfig:
        """Validate ``config`` (``config.canonical()``) and resolve it; raises ConfigError.
        ``config`` itself is left as it is."""
        return cls._of(config.canonical(with_strategy=with_strategy), with_strategy)

    def with_update(self, field: str, value: Any) -> ResolvedConfig:
        """A new ResolvedConfig with ``field`` (camelCase, one of ``UPDATABLE_FIELDS``) set to
        ``value``, checked by the rules and limits of a config file; raises ConfigError.
        ``value`` None is refused: a limit set or left out at the start cannot be removed.
        A new search space replaces the ``searchSpaceFile`` it came from."""
        attribute = _ATTRIBUTES.get(field)
        if attribute is None:
            raise ConfigError(f"cannot be changed while running; one of {', '.join(_ATTRIBUTES)} can",
                              field=field)
        if value is None:
            # In a file, null is the key left out (no limit); while running it would remove
            # the limit the experiment was started with (its budget): a change gives a value.
            raise ConfigError("expected a value, got null: while the experiment runs this can be "
                              "changed, not removed", field=field)
        candidate = ExperimentConfig.from_dict(self.to_dict())
        setattr(candidate, attribute, value)
        if field == "searchSpace":
            candidate.search_space_file = None
        checked = candidate.canonical(with_strategy=self.with_strategy)
        # Only that field changes: every other value stays exactly as it was accepted.
        updated = copy.copy(self._canonical)
        setattr(updated, attribute, getattr(checked, attribute))
        if field == "searchSpace":
            updated.search_space_file = None
        return self._of(updated, self.with_strategy)

    @property
    def platform(self) -> str:
        """Where trials run, in one name: ``local``, ``remote``, ``local+remote`` for a hybrid
        (the name the store records, ``platforms_label``)."""
        return platforms_label([service.platform for service in self.training_services])

    @property
    def notes(self) -> tuple[str, ...]:
        """What loading the config changed or ignored (``ExperimentConfig.notes``), for experiment.log."""
        return self._canonical.notes

    def to_dict(self) -> dict[str, Any]:
        """The canonical config as NNI v2 camelCase (what the store and the REST API hold)."""
        return self._canonical.to_dict()

    def to_yaml(self) -> str:
        """``to_dict()`` as YAML (the experiment folder's config.yml)."""
        return self._canonical.to_yaml()

    @classmethod
    def _of(cls, canonical: ExperimentConfig, with_strategy: bool) -> ResolvedConfig:
        """The fields of a canonical config, narrowed: the one place that converts."""
        c = canonical
        services = _training_services(c.training_service)
        return cls(
            experiment_name=c.experiment_name,
            trial_command=_present(c.trial_command, "trial_command"),
            trial_code_directory=_path(c.trial_code_directory, "trial_code_directory"),
            trial_concurrency=_present(c.trial_concurrency, "trial_concurrency"),
            trial_gpu_number=c.trial_gpu_number,
            max_trial_number=c.max_trial_number,
            max_experiment_duration=_seconds(c.max_experiment_duration),
            max_trial_duration=_seconds(c.max_trial_duration),
            trial_idle_timeout=_seconds(c.trial_idle_timeout),
            trial_grace_period=parse_duration(_present(c.trial_grace_period, "trial_grace_period")),
            max_trial_retries=c.max_trial_retries,
            search_space=c.search_space,
            tuner=_algorithm(c.tuner, "tuner"),
            assessor=_algorithm(c.assessor, "assessor"),
            training_service=services[0],
            training_services=services,
            log_level=_present(c.log_level, "log_level"),
            log_limits=RotationLimits(_int(c.log_max_size, "log_max_size"),
                                      _present(c.log_files_kept, "log_files_kept")),
            experiment_working_directory=_path(c.experiment_working_directory, "experiment_working_directory"),
            minimizes=c.minimizes,
            with_strategy=with_strategy,
            _canonical=c,
        )


# -- narrowing a canonical config's values (canonical() made them so; these only check) -------

def _not_canonical(name: str, value: Any) -> TypeError:
    return TypeError(f"{name}: {value!r} is not a canonical value (ResolvedConfig needs canonical())")


def _int(value: object, name: str) -> int:
    if not isinstance(value, int):
        raise _not_canonical(name, value)
    return value


def _present(value: _T | None, name: str) -> _T:
    if value is None:
        raise _not_canonical(name, value)
    return value


def _path(value: PathLike | None, name: str) -> Path:
    if value is None:
        raise _not_canonical(name, value)
    return Path(value)


def _seconds(duration: Duration | None) -> float | None:
    return None if duration is None else parse_duration(duration)


def _algorithm(value: AlgorithmConfig | dict[str, Any] | None, name: str) -> AlgorithmConfig | None:
    if value is not None and not isinstance(value, AlgorithmConfig):
        raise _not_canonical(name, value)
    return value


def _training_services(value: TrainingServiceSection | dict[str, Any] | list[Any] | None
                       ) -> tuple[ResolvedTrainingService, ...]:
    sections = value if isinstance(value, list) else [value]
    if not sections:
        raise _not_canonical("training_service", value)
    resolved = []
    for section in sections:
        try:
            platform = platform_of_section(section)
        except TypeError:
            raise _not_canonical("training_service", section) from None
        resolved.append(platform.resolve(section))
    return tuple(resolved)

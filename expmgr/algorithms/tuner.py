"""The tuner base class, with NNI's method names so NNI custom tuners port unchanged.

The dispatcher calls ``update_search_space`` once, then ``generate_parameters``
for each new trial and ``receive_trial_result`` / ``trial_end`` as trials finish.
"""
from __future__ import annotations

import copy
import enum
import math
from typing import Any


class AlgorithmError(Exception):
    """A tuner or assessor cannot be created or cannot work with what it was given."""


class NoMoreTrialError(Exception):
    """Raised by ``generate_parameters`` when the search space is exhausted (NNI's name)."""


class NoTrialYetError(Exception):
    """Raised by ``generate_parameters`` when the tuner has nothing to propose until a
    running trial reports or ends (Hyperband waiting for a rung, PBT for a generation).

    The manager asks again after the next final result or trial end; if no trial is
    running then, the tuner can never go on and the experiment ends its search.
    """


class OptimizeMode(str, enum.Enum):
    """Whether a tuner looks for the largest or the smallest final metric."""

    Minimize = "minimize"
    """Smaller final metrics are better (losses, errors)."""
    Maximize = "maximize"
    """Larger final metrics are better (accuracies, rewards)."""

    @classmethod
    def parse(cls, value: str | OptimizeMode) -> OptimizeMode:
        """Accept ``'maximize'`` / ``'minimize'`` in any case; anything else is an AlgorithmError."""
        if isinstance(value, OptimizeMode):
            return value
        if isinstance(value, str):
            for mode in cls:
                if mode.value == value.lower():
                    return mode
        raise AlgorithmError(
            f"optimize_mode must be 'maximize' or 'minimize', got {value!r}"
        )


def extract_scalar_reward(value: Any) -> float:
    """The number a tuner optimizes from a final metric: the metric itself, or its ``'default'``.

    Trials may report a number or a dict such as ``{"default": 0.93, "loss": 0.2}``
    (NNI's convention); tuners use the ``'default'`` entry of a dict.
    """
    if isinstance(value, dict):
        if "default" not in value:
            raise AlgorithmError(
                f"a final metric reported as a dict needs a 'default' key, got keys {sorted(value)}"
            )
        value = value["default"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AlgorithmError(
            f"a final metric must be a number or a dict with a numeric 'default', got {value!r}"
        )
    return float(value)


def search_space_refusal(tuner: Any, search_space: dict) -> str | None:
    """What ``tuner``, built for this alone, says when it checks (a copy of) ``search_space``
    (``Tuner.check_search_space``), or None if it takes it. Any exception counts, since it
    would end the experiment if the running tuner raised it. A tuner not derived from
    ``Tuner`` (an NNI custom tuner) is only given the space."""
    check = getattr(tuner, "check_search_space", None) or tuner.update_search_space
    try:
        check(copy.deepcopy(search_space))
    except Exception as error:   # the tuner's fault or the space's: refused either way
        if isinstance(error, AlgorithmError):
            return str(error)
        return f"cannot use this search space ({type(error).__name__}: {error})"
    return None


def _first_non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """The first (dotted name, value) in ``value`` that is a NaN or an infinity, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        for key, item in value.items():
            found = _first_non_finite(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_non_finite(item, path)
            if found is not None:
                return found
    return None


TRIAL_CHECKPOINT_DIR = "${trial_checkpoint_dir}"
"""A parameter value the manager replaces, before storing the trial, with the new trial's
checkpoint folder as the trial sees it (where ``expmgr.get_checkpoint_dir()`` points, holding
the copy ``checkpoint_source`` asked for). A tuner uses it to tell trials where to save and
load without knowing where they run: PBT's ``save_checkpoint_dir``/``load_checkpoint_dir``."""


class Tuner:
    """Base class of tuners: proposes parameters and learns from trial results.

    Subclasses implement at least ``update_search_space``, ``generate_parameters``
    and ``receive_trial_result``. Parameters are plain JSON-compatible dicts in
    NNI's shape; ``value`` in ``receive_trial_result`` is the trial's final metric.
    """

    ask_ahead_safe = False
    """Whether the dispatcher may compute this tuner's next parameters as soon as it answered
    a request, while trials run, and keep them for the next request. Only for a tuner whose
    ``generate_parameters`` depends on nothing it is told in between (results, trial ends)
    nor on the parameter id, and that implements ``take_back``: Random, GridSearch, Batch.
    A tuner that learns from results leaves it False (it would propose from stale results).
    Read from the class's own body: a subclass declares it again or does not ask ahead."""

    def update_search_space(self, search_space: dict) -> None:
        """Receive the (validated) search space; called before any ``generate_parameters``."""
        raise NotImplementedError(f"{type(self).__name__} must implement update_search_space")

    def check_search_space(self, search_space: dict) -> None:
        """Raise what using ``search_space`` would raise, before it is used: called on a tuner
        built for the check alone (when the config is loaded, and on each search space
        update), never on the one running. By default it takes the space and draws once
        (``generate_parameters``), which draws every active parameter: a draw that overflows,
        or a value that is not a finite JSON number, is an AlgorithmError. Waiting for trials
        (``NoTrialYetError``) or an exhausted space (``NoMoreTrialError``) is no fault of the
        space. A tuner whose draw is expensive may override it with a cheaper check."""
        self.update_search_space(search_space)
        try:
            parameters = self.generate_parameters(0)
        except (NoMoreTrialError, NoTrialYetError):
            return
        bad = _first_non_finite(parameters)
        if bad is not None:
            raise AlgorithmError(f"{type(self).__name__} drew {bad[1]!r} for parameter {bad[0]!r}, "
                                 f"which is not a finite number")

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        """Parameters for a new trial; raise ``NoMoreTrialError`` when there are no more."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_parameters")

    def generate_multiple_parameters(self, parameter_id_list: list[int], **kwargs: Any) -> list[dict]:
        """Parameters for several trials at once; shorter than asked when the space runs
        out, or when the tuner must wait (NoTrialYetError only if it has none at all)."""
        result = []
        for parameter_id in parameter_id_list:
            try:
                result.append(self.generate_parameters(parameter_id, **kwargs))
            except NoMoreTrialError:
                break
            except NoTrialYetError:
                if not result:
                    raise
                break
        return result

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Learn the final metric of the trial that ran ``parameters``."""
        raise NotImplementedError(f"{type(self).__name__} must implement receive_trial_result")

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """The trial that ran ``parameter_id`` has ended (reported or not)."""

    def checkpoint_source(self, parameter_id: int) -> int | None:
        """The parameter id of the earlier trial whose checkpoint folder the new trial
        ``parameter_id`` starts from (a copy, seen through ``expmgr.get_checkpoint_dir()``),
        or None for an empty folder. Asked right after ``generate_parameters``; PBT uses it."""
        return None

    def take_back(self, parameters: dict) -> None:
        """Undo the last ``generate_parameters``, whose ``parameters`` were computed ahead and
        never used: the tuner may suggest them again. The dispatcher calls it before a search
        space update or an import, which the kept parameters did not see. Needed only with
        ``ask_ahead_safe``."""
        raise NotImplementedError(f"{type(self).__name__} must implement take_back to ask ahead")

    def import_data(self, data: list[dict]) -> None:
        """Learn from earlier results: ``[{"parameter": {...}, "value": ...}, ...]``."""

    def load_checkpoint(self) -> None:
        """Restore the tuner's own state, if it keeps any (NNI hook; nothing by default)."""

    def save_checkpoint(self) -> None:
        """Save the tuner's own state, if it keeps any (NNI hook; nothing by default)."""


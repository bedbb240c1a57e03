"""Tuners and assessors: the built-in ones by name, and their base classes.

Built-in algorithms are looked up by the ``name`` of a config's ``tuner`` or
``assessor`` section (case-insensitive), NNI's aliases included (``GPTuner`` is ``GP``)::

    tuner = create_tuner("TPE", {"optimize_mode": "maximize", "seed": 1})

A ``className`` naming one of NNI's own built-ins (``nni.algorithms.hpo.gp_tuner.GPTuner``)
loads ours, so NNI configs that spell built-ins that way work without NNI installed.

May import: the bottom modules (``expmgr.layout``, ``expmgr.log``, ``expmgr.states``, ``expmgr.metrics``,
``expmgr.trial``) and third-party libraries; they run in the dispatcher process,
which knows nothing of the store, the server or the config.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from expmgr.algorithms.assessor import AssessResult, Assessor
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, NoTrialYetError, Tuner, search_space_refusal

# name -> "module:ClassName"; the modules are imported only when used, so the
# config can check names without importing any algorithm.
BUILTIN_TUNERS: dict[str, str] = {
    "Random": "expmgr.algorithms.random_tuner:RandomTuner",
    "GridSearch": "expmgr.algorithms.gridsearch_tuner:GridSearchTuner",
    "TPE": "expmgr.algorithms.tpe_tuner:TpeTuner",
    "Anneal": "expmgr.algorithms.anneal_tuner:AnnealTuner",
    "Evolution": "expmgr.algorithms.evolution_tuner:EvolutionTuner",
    "Hyperband": "expmgr.algorithms.hyperband_tuner:HyperbandTuner",
    "BOHB": "expmgr.algorithms.bohb_tuner:BohbTuner",
    "PBT": "expmgr.algorithms.pbt_tuner:PbtTuner",
    "Batch": "expmgr.algorithms.batch_tuner:BatchTuner",
    "GP": "expmgr.algorithms.gp_tuner:GpTuner",
    "Metis": "expmgr.algorithms.metis_tuner:MetisTuner",
    "Optuna": "expmgr.algorithms.optuna_tuner:OptunaTuner",
}
# NNI 3.0's aliases (the ``alias`` entries of its builtin_algorithms.yml). They are names
# like the others, so that everything that looks names up (the config too) takes them.
TUNER_ALIASES: dict[str, str] = {
    "BatchTuner": "Batch",
    "GPTuner": "GP",
    "MetisTuner": "Metis",
    "PBTTuner": "PBT",
}
BUILTIN_TUNERS.update({alias: BUILTIN_TUNERS[name] for alias, name in TUNER_ALIASES.items()})
# ASHA decides continue / stop from intermediate results, as assessors do, so it is
# configured in the assessor section (NNI keeps all early stopping there).
BUILTIN_ASSESSORS: dict[str, str] = {
    "Medianstop": "expmgr.algorithms.medianstop_assessor:MedianstopAssessor",
    "Curvefitting": "expmgr.algorithms.curvefitting_assessor:CurvefittingAssessor",
    "ASHA": "expmgr.algorithms.asha_scheduler:AshaScheduler",
}

# NNI's classes of the built-ins we have, by the className an NNI config may give them
# (the registry's path and the module that defines the class) -> our built-in's name.
# NNI's HyperoptTuner (Anneal, TPE_legacy) is not here: what it is depends on its classArgs.
NNI_CLASS_NAMES: dict[str, tuple[str, str]] = {
    "nni.algorithms.hpo.random_tuner.RandomTuner": ("tuner", "Random"),
    "nni.algorithms.hpo.gridsearch_tuner.GridSearchTuner": ("tuner", "GridSearch"),
    "nni.algorithms.hpo.tpe_tuner.TpeTuner": ("tuner", "TPE"),
    "nni.algorithms.hpo.evolution_tuner.EvolutionTuner": ("tuner", "Evolution"),
    "nni.algorithms.hpo.batch_tuner.BatchTuner": ("tuner", "Batch"),
    "nni.algorithms.hpo.pbt_tuner.PBTTuner": ("tuner", "PBT"),
    "nni.algorithms.hpo.gp_tuner.GPTuner": ("tuner", "GP"),
    "nni.algorithms.hpo.gp_tuner.gp_tuner.GPTuner": ("tuner", "GP"),
    "nni.algorithms.hpo.metis_tuner.MetisTuner": ("tuner", "Metis"),
    "nni.algorithms.hpo.metis_tuner.metis_tuner.MetisTuner": ("tuner", "Metis"),
    "nni.algorithms.hpo.hyperband_advisor.Hyperband": ("tuner", "Hyperband"),
    "nni.algorithms.hpo.bohb_advisor.BOHB": ("tuner", "BOHB"),
    "nni.algorithms.hpo.bohb_advisor.bohb_advisor.BOHB": ("tuner", "BOHB"),
    "nni.algorithms.hpo.medianstop_assessor.MedianstopAssessor": ("assessor", "Medianstop"),
    "nni.algorithms.hpo.curvefitting_assessor.CurvefittingAssessor": ("assessor", "Curvefitting"),
    "nni.algorithms.hpo.curvefitting_assessor.curvefitting_assessor.CurvefittingAssessor":
        ("assessor", "Curvefitting"),
}

__all__ = [
    "AlgorithmError",
    "accepted_arguments",
    "builtin_class",
    "default_argument",
    "instantiate",
    "AssessResult",
    "Assessor",
    "BUILTIN_ASSESSORS",
    "BUILTIN_TUNERS",
    "NNI_CLASS_NAMES",
    "NoMoreTrialError",
    "NoTrialYetError",
    "search_space_refusal",
    "TUNER_ALIASES",
    "Tuner",
    "create_assessor",
    "create_tuner",
    "load_custom_class",
    "nni_builtin",
]


def create_tuner(name: str, class_args: dict[str, Any] | None = None) -> Tuner:
    """A built-in tuner by config name (case-insensitive), built with ``class_args``."""
    return _create("tuner", name, class_args)


def create_assessor(name: str, class_args: dict[str, Any] | None = None) -> Any:
    """A built-in assessor by config name (case-insensitive), built with ``class_args``."""
    return _create("assessor", name, class_args)


def load_custom_class(class_name: str, code_directory: Path | None) -> type:
    """Import a user's algorithm class, ``"package.module.ClassName"``, from ``code_directory``.

    The directory is put first on ``sys.path`` (and stays there, so the module's
    own lazy imports of its neighbours work). NNI's own built-ins (``NNI_CLASS_NAMES``)
    are ours, whatever the directory.
    """
    builtin = nni_builtin(class_name)
    if builtin is not None:
        return builtin_class(*builtin)[1]
    module_name, _, attribute = class_name.rpartition(".")
    if not module_name or not attribute:
        raise AlgorithmError(
            f"className {class_name!r} should be 'module.ClassName' (a module in codeDirectory and a class in it)"
        )
    where = f"codeDirectory {str(code_directory)!r}" if code_directory is not None else "the Python path"
    if code_directory is not None:
        directory = str(Path(code_directory).resolve())
        if directory not in sys.path:
            sys.path.insert(0, directory)
        importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AlgorithmError(
                f"cannot load className {class_name!r}: no module {module_name!r} in {where}"
            ) from exc
        raise AlgorithmError(f"cannot load className {class_name!r}: importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise AlgorithmError(
            f"cannot load className {class_name!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    cls = getattr(module, attribute, None)
    if cls is None:
        raise AlgorithmError(
            f"cannot load className {class_name!r}: module {module_name!r} ({module.__file__}) has no {attribute!r}"
        )
    if not inspect.isclass(cls):
        raise AlgorithmError(f"className {class_name!r} is a {type(cls).__name__}, not a class")
    return cls


def nni_builtin(class_name: str) -> tuple[str, str] | None:
    """``(kind, name)`` of our built-in for a className of NNI's own (see ``NNI_CLASS_NAMES``),
    else None."""
    return NNI_CLASS_NAMES.get(class_name)


def builtin_class(kind: str, name: str) -> tuple[str, type]:
    """The canonical name and the class of the built-in ``kind`` ("tuner" or "assessor")
    called ``name`` (any case, or an NNI alias); AlgorithmError when there is none."""
    builtins = BUILTIN_TUNERS if kind == "tuner" else BUILTIN_ASSESSORS
    by_lower = {builtin.lower(): builtin for builtin in builtins}
    canonical = by_lower.get(str(name).lower())
    if canonical is not None and kind == "tuner":
        canonical = TUNER_ALIASES.get(canonical, canonical)
    if canonical is None:
        known = ", ".join(sorted((b for b in builtins if b not in TUNER_ALIASES))) or "none yet"
        raise AlgorithmError(
            f"unknown {kind} {name!r}; built-in {kind}s are: {known}"
            f" (for your own {kind}, give className and codeDirectory instead of name)"
        )
    module_name, _, class_name = builtins[canonical].partition(":")
    return canonical, getattr(importlib.import_module(module_name), class_name)


def accepted_arguments(cls: type) -> list[str] | None:
    """The classArgs ``cls`` accepts, in order; None when it takes any (``**kwargs``)."""
    parameters = list(inspect.signature(cls).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def default_argument(kind: str, name: str, argument: str) -> Any:
    """The default of ``argument`` in the built-in ``kind`` called ``name``; None when
    there is no such algorithm, argument or default."""
    try:
        _, cls = builtin_class(kind, name)
    except AlgorithmError:
        return None
    parameter = inspect.signature(cls).parameters.get(argument)
    if parameter is None or parameter.default is inspect.Parameter.empty:
        return None
    return parameter.default


def _create(kind: str, name: str, class_args: dict[str, Any] | None) -> Any:
    canonical, cls = builtin_class(kind, name)
    return instantiate(cls, class_args, f"{kind} {canonical!r}")


def instantiate(cls: type, class_args: dict[str, Any] | None, label: str) -> Any:
    """``cls(**class_args)``, with an AlgorithmError naming ``label`` and the argument
    when the arguments do not fit; used for built-in and custom classes alike."""
    class_args = dict(class_args or {})
    _check_arguments(cls, class_args, label)
    try:
        return cls(**class_args)
    except (AlgorithmError, TypeError, ValueError) as exc:
        raise AlgorithmError(f"{label}: bad classArgs: {exc}") from exc


def _check_arguments(cls: type, class_args: dict[str, Any], label: str) -> None:
    """Raise AlgorithmError naming the argument when ``class_args`` does not fit ``cls``."""
    accepted = accepted_arguments(cls)
    if accepted is None:
        return
    parameters = inspect.signature(cls).parameters.values()
    for key in class_args:
        if key not in accepted:
            raise AlgorithmError(
                f"{label} has no argument {key!r} in classArgs; it accepts: {', '.join(accepted) or 'none'}"
            )
    for p in parameters:
        if p.default is inspect.Parameter.empty and p.name in accepted and p.name not in class_args:
            raise AlgorithmError(f"{label} needs the argument {p.name!r} in classArgs")

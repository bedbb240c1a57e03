"""Experiment configuration: NNI v2 YAML (camelCase; NNI's v1 format is converted on load) or
Python (snake_case), validated with positions.

    config = ExperimentConfig.load("config.yml")   # ConfigError: "config.yml:7:19: trialConcurrency: ..."
    canonical = config.canonical()                 # validated copy: seconds, absolute paths, defaults
    resolved = ResolvedConfig.from_config(config)  # frozen, narrowly typed: what the engine reads

May import: ``expmgr.algorithms`` (to check a tuner's arguments) and the bottom modules
(layout, log, states, metrics, trial); nothing from store, training, dispatcher, engine, server,
experiment or cli.
"""
from __future__ import annotations

from ._durations import parse_duration
from ._errors import ConfigError
from ._model import ExperimentConfig, stored_config_minimizes
from ._parameters import check_parameters
from ._platforms import (PLATFORMS, STRICT_HOST_KEY_CHECKING, Platform, ResolvedLocalConfig, ResolvedRayConfig,
                         ResolvedRemoteConfig, ResolvedRemoteMachine, ResolvedTrainingService, ResolvedTrialPlacement,
                         ResolvedTrialResources,
                         platforms_label, stored_config_platform)
from ._sections import AlgorithmConfig, LocalConfig, RayConfig, RemoteConfig, RemoteMachineConfig
from ._search_space import SEARCH_SPACE_TYPES, validate_search_space
from ._updatable import BUDGET_FIELDS, UPDATABLE_FIELDS, UpdatableField, updatable_now
from .resolved import ResolvedConfig

__all__ = [
    "AlgorithmConfig",
    "BUDGET_FIELDS",
    "ConfigError",
    "ExperimentConfig",
    "LocalConfig",
    "PLATFORMS",
    "Platform",
    "RayConfig",
    "RemoteConfig",
    "RemoteMachineConfig",
    "ResolvedConfig",
    "ResolvedLocalConfig",
    "ResolvedRayConfig",
    "ResolvedRemoteConfig",
    "ResolvedRemoteMachine",
    "ResolvedTrainingService",
    "ResolvedTrialPlacement",
    "ResolvedTrialResources",
    "SEARCH_SPACE_TYPES",
    "STRICT_HOST_KEY_CHECKING",
    "UPDATABLE_FIELDS",
    "UpdatableField",
    "check_parameters",
    "parse_duration",
    "platforms_label",
    "stored_config_minimizes",
    "stored_config_platform",
    "updatable_now",
    "validate_search_space",
]

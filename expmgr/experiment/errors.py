"""The errors of the Experiment API, each with a message a user can act on."""
from __future__ import annotations


class ExperimentError(Exception):
    """The experiment cannot start or be queried (port in use, not started, ...)."""


class PortInUseError(ExperimentError):
    """The REST port is taken (or not allowed); nothing was created."""


class HostError(ExperimentError):
    """The address to listen on (``host``) is not one of this machine's; nothing was created."""

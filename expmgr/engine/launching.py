"""Launching trials: what a launch gives the training service (``trial_launch``), and
launching paused while trials cannot be started for a reason outside them (no free file
descriptor, a full or read-only disk, the experiment's folder gone: the training service's
``SystemLaunchError``). The trial that met it stays WAITING, first in line; no launch is
tried until the pause's next try, which backs off (``RETRY_FIRST`` s doubling to
``RETRY_MAX`` s); the first launch that succeeds ends the pause::

    pause = LaunchPause()
    if pause.ready(clock()):
        ...                                   # launch the next trial
    if pause.failed(reason, clock()):         # True the first time: say so, once
        ...
    if pause.succeeded():                     # True if it was paused: say it goes on, once
        ...
    await service.launch(trial_launch(record, attempt, token, config, exp_id=exp_id, ...))
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from expmgr import trial as trial_api
from expmgr.store import TrialRecord
from expmgr.training.base import TrialLaunch

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig

RETRY_FIRST, RETRY_MAX = 0.5, 10.0
"""Seconds before the first launch tried again, and the most the wait doubles to."""


class LaunchPause:
    """Whether launching is paused, why, and when to try again; times are the runner's clock."""

    def __init__(self) -> None:
        self.reason: str | None = None
        """Why the last launch failed, while launching is paused; None otherwise."""
        self.next_try = 0.0
        """When a launch may be tried again (while paused)."""
        self._delay = RETRY_FIRST

    def ready(self, now: float) -> bool:
        """Whether a launch may be tried now: not paused, or its next try has come."""
        return self.reason is None or now >= self.next_try

    def failed(self, reason: str, now: float) -> bool:
        """A launch failed for the system's reason: pause (or stay paused, waiting twice as
        long, up to ``RETRY_MAX``); True if launching was not paused before."""
        first = self.reason is None
        self._delay = RETRY_FIRST if first else min(2 * self._delay, RETRY_MAX)
        self.reason = reason
        self.next_try = now + self._delay
        return first

    def succeeded(self) -> bool:
        """A launch succeeded: launching goes on; True if it was paused."""
        paused, self.reason = self.reason is not None, None
        return paused

    def retry_at(self, now: float, anything_waits: bool) -> list[float]:
        """When the loop must wake to try a launch again: the next try while paused, if a
        trial waits and it is still to come (once past, a slot freeing wakes the loop)."""
        return [self.next_try] if self.reason is not None and anything_waits and self.next_try > now else []

    def notice(self, store: str, store_unwritable: str | None) -> str | None:
        """What users are told while launching is paused, or None: the store (``store``, its
        path) cannot be written (``store_unwritable`` says why), or trials cannot be started
        for a reason outside them (a full or read-only disk, no free file descriptor)."""
        if store_unwritable is not None:
            return f"launching new trials is paused: {store} cannot be written ({store_unwritable})"
        if self.reason is not None:
            return (f"launching new trials is paused: {self.reason}; not the trial's fault: it waits, "
                    f"and a launch is tried again (every {RETRY_MAX:g} s at most) until one succeeds")
        return None


def parameter_record(record: TrialRecord) -> dict[str, Any]:
    """The trial's parameter.json; ``parameter_source`` is NNI's, as stored with the trial:
    "customized" for a strategy's trial, "algorithm" for the tuner's."""
    return {"parameter_id": record.sequence_id, "parameter_source": record.parameter_source,
            "parameters": record.parameters, "parameter_index": 0}


def trial_launch(record: TrialRecord, attempt: int, token: str, config: "ResolvedConfig", *, exp_id: str,
                 manager_host: str, url_prefix: str, port: int) -> TrialLaunch:
    """What the training service is given to start ``attempt`` of ``record``: its command,
    parameter.json and the environment by which the trial reaches its manager (at
    ``manager_host``:``port`` under ``url_prefix``) with its attempt's ``token``."""
    env: dict[str, str] = {
        trial_api.ENV_EXPERIMENT_ID: exp_id,
        trial_api.ENV_TRIAL_ID: record.trial_id,
        trial_api.ENV_SEQUENCE_ID: str(record.sequence_id),
        trial_api.ENV_ATTEMPT: str(attempt),
        trial_api.ENV_MANAGER_HOST: manager_host,
        trial_api.ENV_MANAGER_URL_PREFIX: url_prefix,
        trial_api.ENV_MANAGER_PORT: str(port),
        trial_api.ENV_TOKEN: token,
        trial_api.ENV_LOG_LEVEL: config.log_level,
        trial_api.ENV_LOG_LIMITS: config.log_limits.as_env(),
    }
    return TrialLaunch(trial_id=record.trial_id, attempt=attempt, command=config.trial_command,
                       code_directory=config.trial_code_directory, parameter_record=parameter_record(record), env=env)

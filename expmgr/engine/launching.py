"""Launching paused while trials cannot be started for a reason outside them (no free file
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
"""
from __future__ import annotations

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

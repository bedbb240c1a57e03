"""What the browser tests of several pages share: waiting until trials run."""
from __future__ import annotations

from tests.helpers.common import wait_until


def running_trials(run, count: int) -> list[str]:
    """Wait until ``count`` trials run; their ids."""
    return wait_until(lambda: [trial_id for trial_id, status in run.statuses().items() if status == "RUNNING"]
                      if list(run.statuses().values()).count("RUNNING") == count else None,
                      what=f"{count} running trials")

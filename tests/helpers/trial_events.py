"""A ``training.TrialEvents`` listener for tests of training services: it keeps what it is
told, in order, and checks each attempt's events against the order ``TrialEvents`` states::

    events = Recorder()
    service = create_training_service(resolved, events, paths)
    ...
    assert events.exit_of("Xy3zQ") == ("exited", "Xy3zQ", 1, 0, None)
    assert events.order_problems(stopped=True) == []
"""
from __future__ import annotations

from typing import Any

ATTEMPT_EVENTS = ("started", "exited", "lost", "launch_failed")
"""The events that belong to one attempt (the others, capacity and a service's failure, to none)."""


class Recorder:
    """A TrialEvents listener that keeps what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.hosts: dict[tuple[str, int], str | None] = {}
        """The host each started attempt was told to run on, by (trial id, attempt)."""
        self.pids: dict[tuple[str, int], tuple[int | None, float | None]] = {}
        """The pid and its start time each started attempt was told with, by (trial id, attempt)."""

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *,
                      pid_started: float | None = None, host: str | None = None) -> None:
        self.events.append(("started", trial_id, attempt))
        self.hosts[(trial_id, attempt)] = host
        self.pids[(trial_id, attempt)] = (pid, pid_started)

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None,
                     preempted: bool = False, *, failed: bool = False) -> None:
        self.events.append(("exited", trial_id, attempt, exit_code, signal))

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        self.events.append(("launch_failed", trial_id, attempt, reason))

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        self.events.append(("lost", trial_id, attempt, preempted))

    def capacity_changed(self) -> None:
        self.events.append(("capacity_changed",))

    def service_failed(self, error: str) -> None:
        self.events.append(("service_failed", error))

    def exit_of(self, trial_id: str) -> tuple[Any, ...] | None:
        return next((e for e in self.events if e[0] in ("exited", "lost", "launch_failed") and e[1] == trial_id),
                    None)

    def order_problems(self, stopped: bool) -> list[str]:
        """Each attempt whose events break the order ``TrialEvents`` states: ``started`` then
        one of ``exited`` or ``lost``, or ``launch_failed`` alone; nothing after its end.
        ``stopped``: the service was stopped, so every started attempt has ended."""
        told: dict[tuple[str, int], list[str]] = {}
        for event in self.events:
            if event[0] in ATTEMPT_EVENTS:
                told.setdefault((event[1], event[2]), []).append(event[0])
        ends = ([], ["exited"], ["lost"]) if not stopped else (["exited"], ["lost"])
        return [f"trial {trial_id} attempt {attempt}: {' -> '.join(kinds)}"
                for (trial_id, attempt), kinds in told.items()
                if kinds != ["launch_failed"] and not (kinds[0] == "started" and kinds[1:] in ends)]

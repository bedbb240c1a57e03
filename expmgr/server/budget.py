"""A total of bytes the server holds for all clients together (imports in flight), handed
out in reservations: a client's request takes its share before its body is read, and gives
it back once the bytes are let go::

    reservation = budget.reserve(size)    # None: the total would be exceeded; refuse (503)
    release = reservation.hand_over()     # whoever holds the bytes now calls release()
    reservation.release()                 # no-op once handed over; idempotent
"""
from __future__ import annotations

from typing import Callable


class ByteBudget:
    """At most ``total`` bytes reserved at once; one reservation is always granted when
    nothing is held (a request within its route's body limit is never refused for ever)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0

    def reserve(self, size: int) -> Reservation | None:
        if self.held > 0 and self.held + size > self.total:
            return None
        self.held += size
        return Reservation(self, size)


class Reservation:
    def __init__(self, budget: ByteBudget, size: int) -> None:
        self.budget = budget
        self.size = size
        self._released = False
        self._handed = False

    def _give_back(self) -> None:
        if not self._released:
            self._released = True
            self.budget.held -= self.size

    def release(self) -> None:
        """Give the bytes back, unless they were handed over (then their new holder does)."""
        if not self._handed:
            self._give_back()

    def hand_over(self) -> Callable[[], None]:
        """The release of the bytes' new holder; ``release`` does nothing from now on."""
        self._handed = True
        return self._give_back

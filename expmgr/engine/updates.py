"""Changes to the config while the experiment runs (``expctl update``): a field is checked
(``command_checks.updated_config``); a new search space is the tuner's to accept first,
one at a time so that they apply in order; what to apply is handed back to the runner,
which applies it (its config, the store, the experiment's state)::

    updates = ConfigUpdates(dispatcher, updated=checked_config, apply=apply_change,
                            space_taken=proposals.space_changed)
    pending = updates.update("maxTrialNumber", 20)    # applied now: None
    pending = updates.update("searchSpace", space)    # an awaitable: the tuner's answer
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from expmgr.config import BUDGET_FIELDS
from expmgr.engine import command_checks as checks
from expmgr.engine.command_checks import UPDATABLE_FIELDS
from expmgr.engine.dispatching import Dispatcher, DispatcherError

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig


def raises_budget(field: str) -> bool:
    """Whether changing ``field`` may give an ending search more to do (maxTrialNumber,
    maxExperimentDuration): the manager then runs it again (see more_trials.py)."""
    return any(entry.field == field for entry in BUDGET_FIELDS)


def change_line(field: str, config: "ResolvedConfig") -> str:
    """What experiment.log says of ``field`` changed to its value in ``config``."""
    return f"{field} changed to {json.dumps(getattr(config, UPDATABLE_FIELDS[field]))}"


class ConfigUpdates:
    """The flow of one update: checked, taken by the tuner when it is a search space, applied."""

    def __init__(self, dispatcher: Dispatcher | None, *, updated: Callable[[str, Any], "ResolvedConfig"],
                 apply: Callable[[str, "ResolvedConfig"], None], space_taken: Callable[[], None]) -> None:
        """``updated(field, value)``: the runner's config with it (UpdateRefused when it
        cannot be), asked again once the tuner took a space (another field may have changed
        meanwhile); ``apply(field, config)`` makes it the runner's; ``space_taken()``: the
        tuner took a new space (what it declined before may come now)."""
        self._dispatcher = dispatcher
        self._updated, self._apply, self._space_taken = updated, apply, space_taken
        self._space_updates = asyncio.Lock()
        """Held while the dispatcher is asked to take a new search space."""

    def update(self, field: str, value: Any) -> Awaitable[None] | None:
        """Check and apply ``field`` = ``value``; a new search space for a tuner is applied
        once the tuner took it: then an awaitable, done then, that raises UpdateRefused if
        the tuner refused it (the old space stays). Raises UpdateRefused."""
        config = self._updated(field, value)
        if field == "searchSpace" and self._dispatcher is not None and config.tuner is not None:
            assert config.search_space is not None   # an update gives one
            return self._update_search_space(self._dispatcher, config.search_space)
        self._apply(field, config)
        return None

    async def _update_search_space(self, dispatcher: Dispatcher, space: dict[str, Any]) -> None:
        async with self._space_updates:
            try:
                await dispatcher.update_search_space(space)
            except DispatcherError as error:
                raise checks.space_refused(error) from None
            self._space_taken()
            self._apply("searchSpace", self._updated("searchSpace", space))

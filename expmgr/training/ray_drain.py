"""A private Ray API expmgr uses (the other: ``ray_autoscale.has_autoscaler``): which nodes are being drained (a spot node's
preemption notice, ``ray drain-node``, the autoscaler taking a node away), read as Ray
Train's own PreemptionWatcher reads it. ``tests/training/test_ray_drain.py`` fails loudly
when a Ray release changes it; the range of Ray versions expmgr accepts is pinned in
pyproject.toml (the ``ray`` extra)."""
from __future__ import annotations


class DrainApiChanged(RuntimeError):
    """This Ray no longer answers the way expmgr reads drained nodes."""


def draining_nodes() -> dict[str, int]:
    """Node ids (hex) being drained, each with its deadline in milliseconds since the epoch
    (0: none given). Needs a connected driver (``ray.init``)."""
    try:
        from ray._private.state import state
        nodes = state.get_draining_nodes()
    except (ImportError, AttributeError, TypeError) as error:
        raise DrainApiChanged(f"Ray's get_draining_nodes() changed: {error!r}") from error
    if not isinstance(nodes, dict):
        raise DrainApiChanged(f"Ray's get_draining_nodes() gave {type(nodes).__name__}, not a dict")
    return {str(node): int(deadline) for node, deadline in nodes.items()}

"""Trials on a Ray cluster that scales: when no node has the resources a trial asks for, the
cluster's autoscaler is asked for them (Ray's ``request_resources``) and trials wait, with
the reason said, up to ``trainingService.scaleUpTimeout``; a cluster without an autoscaler
still refuses them at start. The Ray service (``ray.py``) uses it so::

    scale_up = await ScaleUp.begin(resources, bundles=4, timeout=900.0, events=events)  # None: a node fits
    service.has_capacity() -> scale_up is None or not scale_up.waiting
    service.waiting_reason() -> scale_up.reason
    scale_up.end()                                   # the experiment ends: the request is withdrawn

Whether a cluster has an autoscaler is read from Ray's private state (``has_autoscaler``),
wrapped here with ``tests/training/test_ray_autoscale.py`` failing when a Ray release changes it.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from expmgr.training.base import TrainingServiceError, TrialEvents

if TYPE_CHECKING:
    from expmgr.config import ResolvedTrialResources

_NODE_CHECK_INTERVAL = 1.0
"""How often the nodes are looked up while trials wait for a node (Ray has no event for it)."""
_REPORT_WAIT = 15.0
"""How long the autoscaler's first report may take (Ray's monitor writes one every 5 s)."""
_NAMES = {"CPU": "cpu", "GPU": "gpu"}


class AutoscalerApiChanged(RuntimeError):
    """This Ray no longer answers the way expmgr reads whether a cluster has an autoscaler."""


def trial_bundle(resources: "ResolvedTrialResources") -> dict[str, float]:
    """The trial's resources as one of Ray's resource bundles (Ray's names; none that is 0)."""
    wanted = {"CPU": resources.cpu, "GPU": resources.gpu, **dict(resources.custom)}
    if resources.memory is not None:
        wanted["memory"] = float(resources.memory)
    return {name: float(amount) for name, amount in wanted.items() if amount}


def shown(bundle: dict[str, float]) -> str:
    """``cpu: 1, gpu: 2, my_resource: 1``: as trialResources writes them."""
    return ", ".join(f"{_NAMES.get(name, name)}: {amount:g}" for name, amount in bundle.items())


def some_node_fits(bundle: dict[str, float], nodes: list[dict[str, Any]]) -> bool:
    """Whether one of ``nodes`` (``ray.nodes()``'s entries) has every resource of ``bundle``."""
    return any(all(node.get("Resources", {}).get(name, 0) >= amount for name, amount in bundle.items())
               for node in nodes)


def has_autoscaler(report_wait: float = _REPORT_WAIT) -> bool:
    """Whether the connected cluster (``ray.init`` done) has an autoscaler that can add nodes.

    Ray's autoscaler v2 says so in its cluster config (read as Ray Data reads it: a node
    group that may grow). Ray's v1 monitor runs on every head; without an autoscaling config
    it runs a read-only one, which names each node's type ``node_<id>``
    (``format_readonly_node_type``): an autoscaler with a config names its node types."""
    try:
        from ray._private import ray_constants
        from ray._private.state import state
        from ray.autoscaler._private.util import format_readonly_node_type
        from ray.autoscaler.v2.utils import is_autoscaler_v2
        from ray.experimental.internal_kv import _internal_kv_get
    except ImportError as error:
        raise AutoscalerApiChanged(f"Ray's autoscaler state moved: {error!r}") from error
    try:
        if is_autoscaler_v2(fetch_from_server=True):
            config = state.get_cluster_config()
            return bool(config) and any(
                group.max_count == -1 or group.max_count > group.min_count
                for group in config.node_group_configs if group.resources and group.max_count != 0)
        deadline = time.monotonic() + report_wait
        while True:
            status = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
            report = json.loads(status).get("autoscaler_report") if status else None
            if report is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
    except (AttributeError, TypeError, ValueError) as error:
        raise AutoscalerApiChanged(f"Ray's autoscaler state changed: {error!r}") from error
    if report is None:
        return False  # no monitor reports: nothing can scale the cluster
    mapping = report.get("node_type_mapping")
    if not isinstance(mapping, dict):
        raise AutoscalerApiChanged(f"Ray's autoscaler report has no node_type_mapping: {sorted(report)}")
    return any(node_type != format_readonly_node_type(node_id) for node_id, node_type in mapping.items())


def request_resources(bundles: list[dict[str, float]]) -> None:
    """Ask the autoscaler for room for ``bundles`` (Ray's standing request; none: withdrawn)."""
    from ray.autoscaler.sdk import request_resources as ray_request
    ray_request(bundles=bundles)


class ScaleUp:
    """Trials wait for a node with their resources that the autoscaler adds; see the module
    docstring. Made by ``begin`` only when no node has them."""

    def __init__(self, bundle: dict[str, float], count: int, timeout: float, events: TrialEvents,
                 log: logging.Logger, list_nodes: Callable[[], list[dict[str, Any]]]) -> None:
        self.bundle = bundle
        self.count = count
        self.timeout = timeout
        self.waiting = True
        """No node has the trial's resources yet: trials wait."""
        self._events = events
        self._log = log
        self._list_nodes = list_nodes
        self._task: asyncio.Task | None = None

    @classmethod
    async def begin(cls, resources: "ResolvedTrialResources", count: int, timeout: float, events: TrialEvents,
                    log: logging.Logger) -> ScaleUp | None:
        """None when a node has the resources; else, on a cluster with an autoscaler, ask it for
        ``count`` trials' worth and watch for the node; else TrainingServiceError (Ray would
        keep the trials waiting for ever)."""
        import ray

        def alive() -> list[dict[str, Any]]:
            return [node for node in ray.nodes() if node.get("Alive")]
        bundle = trial_bundle(resources)
        nodes = await asyncio.to_thread(alive)
        if some_node_fits(bundle, nodes):
            return None
        if not await asyncio.to_thread(has_autoscaler):
            check_some_node_fits(resources, nodes)  # raises, naming what each node has
        scale_up = cls(bundle, count, timeout, events, log, alive)
        await asyncio.to_thread(request_resources, [bundle] * count)
        log.info("no node of the Ray cluster has %s yet: its autoscaler is asked for %d such bundles", shown(bundle),
                 count)
        scale_up._task = asyncio.get_running_loop().create_task(scale_up._watch())
        return scale_up

    @property
    def reason(self) -> str | None:
        """The trials' waiting reason while no node has their resources."""
        if not self.waiting:
            return None
        return (f"waiting for the Ray autoscaler to add a node with {shown(self.bundle)} "
                f"(up to trainingService.scaleUpTimeout, {_duration(self.timeout)})")

    async def _watch(self) -> None:
        """Look the nodes up until one has the resources (trials may start: told to the
        runner) or the limit passes (the experiment ends in ERROR)."""
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                nodes = await asyncio.to_thread(self._list_nodes)
                if some_node_fits(self.bundle, nodes):
                    self.waiting = False
                    self._log.info("a node with %s joined the Ray cluster", shown(self.bundle))
                    self._events.capacity_changed()
                    return
                if time.monotonic() >= deadline:
                    self._events.service_failed(
                        f"the Ray autoscaler added no node with the trialResources a trial asks for "
                        f"({shown(self.bundle)}) within trainingService.scaleUpTimeout "
                        f"({_duration(self.timeout)})")
                    return
                await asyncio.sleep(_NODE_CHECK_INTERVAL)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a lost GCS: said as the service's failure, not lost in a task
            self._events.service_failed(f"looking up the Ray cluster's nodes failed: {error!r}")

    def end(self) -> None:
        """Stop watching and withdraw the request (the experiment ends). Idempotent."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        try:
            request_resources([])
        except Exception as error:  # the cluster is gone: nothing stands any more
            self._log.warning("withdrawing the request to the Ray autoscaler failed: %s", error)



def _duration(seconds: float) -> str:
    """``15m``, ``90s``: as a config would write it."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def check_some_node_fits(resources: "ResolvedTrialResources", nodes: list[dict[str, Any]]) -> None:
    """TrainingServiceError unless some node of the cluster has every resource a trial asks for
    (Ray would keep such a trial waiting forever)."""
    wanted = {"CPU": resources.cpu, "GPU": resources.gpu, **dict(resources.custom)}
    if resources.memory is not None:
        wanted["memory"] = resources.memory
    wanted = {name: amount for name, amount in wanted.items() if amount}
    if any(all(node.get("Resources", {}).get(name, 0) >= amount for name, amount in wanted.items())
           for node in nodes):
        return
    names = {"CPU": "cpu", "GPU": "gpu"}
    asked = ", ".join(f"{names.get(name, name)}: {amount:g}" for name, amount in wanted.items())
    have = "; ".join(
        f"{node.get('NodeManagerAddress', '?')}: " + ", ".join(
            f"{names.get(name, name)} {node.get('Resources', {}).get(name, 0):g}" for name in wanted)
        for node in nodes)
    raise TrainingServiceError(f"no node of the Ray cluster has the trialResources a trial asks for ({asked}); "
                               f"its nodes have {have or 'nothing'}")

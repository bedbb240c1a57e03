"""The private Ray API the Ray service reads drained nodes with (``expmgr/training/ray_drain.py``):
if a Ray release changes it, this fails, naming what changed, instead of preemptions
silently becoming crashes."""
from __future__ import annotations

import pytest

from tests.helpers.common import wait_until
from tests.helpers.ray_cluster import ray_cluster, ray_cluster_module  # noqa: F401


class Holder:
    def ready(self) -> bool:
        return True


def test_a_driver_reads_a_node_drained_for_preemption_with_its_deadline(ray_cluster):
    import ray

    from expmgr.training.ray_drain import DrainApiChanged, draining_nodes
    ray.init(address=ray_cluster.address, log_to_driver=False, configure_logging=False)
    try:
        try:
            assert draining_nodes() == {}, "no node is being drained yet"
        except DrainApiChanged as error:
            pytest.fail(f"Ray changed the API expmgr reads drained nodes with: {error}")
        # Something to do there: Ray stops an idle node drained for preemption at once.
        holder = ray.remote(num_cpus=0, resources={"node_worker": 1})(Holder).remote()
        ray.get(holder.ready.remote(), timeout=60)
        ray_cluster.drain_worker(reason="preemption", deadline_s=120)
        drained = wait_until(draining_nodes, 30, "the drained worker to be listed")
        assert list(drained) == [ray_cluster.worker_node_id]
        assert drained[ray_cluster.worker_node_id] > 0, "its deadline, in ms since the epoch"
    finally:
        ray.shutdown()
        ray_cluster.kill_worker()  # a drained node takes no more work: the next test gets a new one

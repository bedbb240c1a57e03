"""What the local Ray cluster of the tests costs (tests/helpers/ray_cluster.py): start time, memory,
a driver's ray.init, and a new actor against a call to one that exists.

    PYTHONPATH=. python tests/perf/ray_cluster_costs.py
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

from tests.helpers.ray_cluster import RayCluster

DRIVER = """
import json, os, time, psutil
t = time.perf_counter(); import ray; imported = time.perf_counter() - t
t = time.perf_counter(); ray.init(address={address!r}, log_to_driver=False); init = time.perf_counter() - t
rss = psutil.Process().memory_info().rss
@ray.remote(num_cpus=0)
class A:
    def ping(self): return 1
t = time.perf_counter(); a = A.remote(); ray.get(a.ping.remote()); new = time.perf_counter() - t
t = time.perf_counter(); b = A.remote(); ray.get(b.ping.remote()); new2 = time.perf_counter() - t
t = time.perf_counter()
for _ in range(100): ray.get(a.ping.remote())
call = (time.perf_counter() - t) / 100
print("@" + json.dumps(dict(import_s=imported, init_s=init, driver_rss_mb=rss >> 20,
                            first_actor_s=new, second_actor_s=new2, method_call_ms=call * 1000)))
"""


def rss_mb(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total >> 20


def main() -> None:
    started = time.perf_counter()
    with RayCluster() as cluster:
        print(f"cluster start: {time.perf_counter() - started:.1f} s")
        time.sleep(3)
        print(f"cluster RSS, idle: {rss_mb(cluster.pids())} MB in {len(cluster.pids())} processes")
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", DRIVER.format(address=cluster.address)],
                                 capture_output=True, text=True, timeout=120).stdout
            print(json.loads([l for l in out.splitlines() if l.startswith("@")][-1][1:]))
        print(f"cluster RSS after the drivers: {rss_mb(cluster.pids())} MB")
        started = time.perf_counter()
        cluster.kill_worker()
        print(f"kill_worker until the GCS says dead: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        cluster.add_worker()
        print(f"add_worker: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
    print(f"stop: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()

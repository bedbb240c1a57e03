"""NNI's ``GET experiments-info`` and ``GET experiment-metadata``: the experiments of the
served experiment's home (its registry), one record each in the shape of NNI's
experiment manifest (``~/nni-experiments/.experiment``, as ``nnictl`` writes it)::

    records = experiments_info(Registry(paths.root.parent))
    # [{"id": ..., "port": 8080, "startTime": ms, "endTime": "N/A", "status": "RUNNING",
    #   "platform": "local", "experimentName": ..., "tag": [], "pid": 1234,
    #   "webuiUrl": ["http://127.0.0.1:8080"], "logDir": <home>, "prefixUrl": None}]

NNI's client reads ``pid`` there (``Experiment.connect`` keeps it; ``stop()`` asks the
server to stop, then waits for that process to end). As NNI's manager does, an experiment
whose process died without recording its end is shown STOPPED without a port.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access, AccessError
from expmgr.server.home import stored_platform
from expmgr.store.registry import Registry, RegistryEntry, experiment_process_alive

NOT_ENDED = "N/A"
"""NNI's ``endTime`` of an experiment that has not ended."""


def experiment_info(entry: RegistryEntry) -> dict[str, Any]:
    """One registry entry as NNI's manifest records it: times in ms, ``logDir`` the
    experiments' home (the folder holding the experiment's own), ``prefixUrl`` without
    slashes or None, ``webuiUrl`` the addresses of a running one's server (never with its
    access token: this answer lists other experiments too)."""
    alive = experiment_process_alive(entry)
    gone = not entry.status.is_finished() and not alive
    # A finished experiment may still be served (a view, or after DONE): its port and pid
    # stand while its process does.
    port = entry.port if alive else None
    access = _access(entry)
    info: dict[str, Any] = {
        "id": entry.id,
        "port": port,
        "startTime": int(entry.start_time * 1000),
        "endTime": int(entry.end_time * 1000) if entry.end_time is not None else NOT_ENDED,
        "status": "STOPPED" if gone else entry.status.value,
        "platform": entry.platform or stored_platform(Path(entry.dir)),  # as stored when it was created
        "experimentName": entry.name,
        "tag": [],
        "pid": entry.pid if alive else None,
        "webuiUrl": [access.address(port)] if port is not None else [],
        "logDir": str(Path(entry.dir).parent),
        "prefixUrl": access.url_prefix.strip("/") or None,
    }
    if port is None:
        del info["port"]  # NNI drops the port of an experiment that is not running
    return info


def _access(entry: RegistryEntry) -> Access:
    try:
        return Access.load(ExperimentPaths(Path(entry.dir)).access_file)
    except AccessError:  # another user's experiment: its address is not ours to show
        return Access()


def experiments_info(registry: Registry) -> list[dict[str, Any]]:
    """Every experiment of ``registry``, oldest first."""
    return [experiment_info(entry) for entry in registry.entries()]

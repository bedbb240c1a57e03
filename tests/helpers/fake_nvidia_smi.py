"""A stand-in ``nvidia-smi`` for machines without a GPU: put first on PATH, it answers the
two queries expmgr asks (``--query-gpu=index,uuid`` and ``--query-compute-apps=gpu_uuid,pid``)
from a state file the test rewrites, so a test marks a GPU busy or free while an experiment
runs::

    gpus = FakeNvidiaSmi(tmp_path, monkeypatch)
    gpus.show([0, 1], processes={0: [os.getpid()]})     # GPU 0 runs a process of someone else
    ...
    gpus.show([0, 1])                                   # and now it is free

``pid_folder``: every file named by a pid in that folder is also a compute process on GPU 0
(a trial writes its own, to show that an experiment's own trials do not count). ``queries()``
counts the times the processes were asked for.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

_PROGRAM = """#!{python}
import json, os, sys
state = json.load(open({state!r}))
args = " ".join(sys.argv[1:])
if "--query-gpu=index,uuid" in args:
    for index in state["gpus"]:
        print(f"{{index}}, GPU-fake-{{index}}")
elif "--query-gpu=index " in args:  # what expmgr asked before it honoured useActiveGpu
    for index in state["gpus"]:
        print(index)
elif "--query-compute-apps=gpu_uuid,pid" in args and state.get("refuse_processes"):
    print("Failed to query compute apps: Not Supported", file=sys.stderr)
    sys.exit(3)
elif "--query-compute-apps=gpu_uuid,pid" in args:
    for index, pids in state["processes"].items():
        for pid in pids:
            print(f"GPU-fake-{{index}}, {{pid}}")
    folder = state.get("pid_folder")
    for name in (sorted(os.listdir(folder)) if folder else []):
        print(f"GPU-fake-0, {{name}}")
    with open({state!r} + ".queries", "a") as queries:
        queries.write("asked\\n")
else:
    print("fake nvidia-smi: unexpected arguments", args, file=sys.stderr)
    sys.exit(2)
"""


class FakeNvidiaSmi:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        folder = tmp_path / "fake-bin"
        folder.mkdir()
        self._state = tmp_path / "fake-gpus.json"
        program = folder / "nvidia-smi"
        program.write_text(_PROGRAM.format(python=sys.executable, state=str(self._state)))
        program.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        self.show([])

    def queries(self) -> int:
        """How many times the processes were asked for (each counted after its answer was read)."""
        log = Path(f"{self._state}.queries")
        return len(log.read_text().splitlines()) if log.exists() else 0

    def show(self, gpus: list[int], processes: dict[int, list[int]] | None = None,
             pid_folder: Path | None = None, refuse_processes: bool = False) -> None:
        """What nvidia-smi answers from now on (the file is replaced whole: never read half
        written); ``refuse_processes``: the processes query fails, as some drivers make it."""
        state = {"gpus": gpus, "processes": {str(index): pids for index, pids in (processes or {}).items()},
                 "pid_folder": None if pid_folder is None else str(pid_folder), "refuse_processes": refuse_processes}
        partial = self._state.with_suffix(".partial")
        partial.write_text(json.dumps(state))
        os.replace(partial, self._state)

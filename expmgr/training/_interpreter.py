"""``python`` and ``python3`` that run a given interpreter, for a trial's PATH: on Ray, a trial
runs the Python of its slot's worker (the driver's, or the runtime env's) rather than the
node's ``python3`` (``trainingService.trialPython: ray``)::

    env["PATH"] = with_interpreter_first(sys.executable, env.get("PATH", ""))

Each name is a two-line shell script that execs the interpreter by its own path, not a
symlink: a virtual environment's Python finds its environment from the path it is run by.
The scripts live in a folder of the user's cache named after the interpreter, written once
and kept (a few hundred bytes), so nothing is left per trial or per slot.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from pathlib import Path

NAMES = ("python", "python3")


def with_interpreter_first(executable: str, path: str) -> str:
    """``path`` (a PATH value) with a folder first whose ``python`` and ``python3`` run ``executable``."""
    folder = interpreter_folder(executable)
    return f"{folder}{os.pathsep}{path}" if path else str(folder)


def interpreter_folder(executable: str) -> Path:
    """The folder of ``executable``'s ``python``/``python3`` scripts, written if missing."""
    digest = hashlib.sha256(executable.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    try:
        return _written(cache / "expmgr" / "python" / digest, executable)
    except OSError:  # no writable home on this node: a private folder of its own
        return _written(Path(tempfile.mkdtemp(prefix="expmgr-python-")), executable)


def _written(folder: Path, executable: str) -> Path:
    script = f"#!/bin/sh\nexec {shlex.quote(executable)} \"$@\"\n"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in NAMES:
        target = folder / name
        try:
            if target.read_text() == script and os.access(target, os.X_OK):
                continue
        except OSError:
            pass
        # Written beside and renamed: a trial starting on another slot never sees half a script.
        fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
        with os.fdopen(fd, "w") as file:
            file.write(script)
        os.chmod(partial, 0o755)
        os.replace(partial, target)
    return folder

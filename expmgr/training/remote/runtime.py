"""What is uploaded to each host beside the trial code: the host agent, the watchdog, and the
trial API (``import expmgr``, ``import nni``) for hosts without expmgr installed::

    for relative, local in runtime_files():     # the SSH side uploads each under its runtime folder
        upload(local, f"{runtime_dir}/{relative}")
    argv = agent_command(python, runtime_dir)   # run on the host: stdin/stdout are the agent's channel

The trial API is ``expmgr/__init__.py`` (it imports ``expmgr.trial`` alone at once), ``trial.py``,
and what a trial's ``logging`` pulls in (``log.py``, ``rotation.py``): standard library only,
Python 3.8+. ``trial_path/`` goes first on the trial's PYTHONPATH (the agent sets it) and its
``expmgr`` shim loads the uploaded package, as locally. Checked by
``tests/training/remote/test_host_agent.py::test_the_uploaded_runtime_is_the_trial_api_on_a_host_without_expmgr``.
"""
from __future__ import annotations

from pathlib import Path

from expmgr import trial as trial_api

_PACKAGE = Path(__file__).resolve().parents[2]
"""The folder of the ``expmgr`` package here."""
AGENT = "host_agent.py"
WATCHDOG = "watchdog.py"
TRIAL_MODULES = ("__init__.py", "trial.py", "log.py", "rotation.py")
"""The package's modules a trial may import (``trial.py`` imports ``log`` and ``rotation`` when
the trial imports ``logging``); ``trial_path/`` is added whole."""


def runtime_files() -> list[tuple[str, Path]]:
    """(path in the host's runtime folder, local file) of everything to upload, agent first."""
    files = [(AGENT, _PACKAGE / "training" / "remote" / AGENT), (WATCHDOG, _PACKAGE / "training" / WATCHDOG)]
    files += [(f"expmgr/{name}", _PACKAGE / name) for name in TRIAL_MODULES]
    trial_path = Path(trial_api.TRIAL_PATH)
    files += [(f"expmgr/trial_path/{path.relative_to(trial_path).as_posix()}", path)
              for path in sorted(trial_path.rglob("*.py"))]
    return files


def agent_command(python: str, runtime_dir: str, session: str, window: float = 0.0,
                  state_dir: str = "") -> list[str]:
    """How to start the agent on the host (``python``: the machine's ``pythonPath``, or
    ``python3``), with ``runtime_dir`` holding ``runtime_files()``; ``-I -S`` as for the
    watchdog: the standard library only, whatever the host's environment. With a reattach
    ``window`` (seconds), its trials outlive the manager's connection by that much, the
    watchdog's state kept in ``state_dir``."""
    kept = ["--window", repr(float(window)), "--state", state_dir] if window > 0 and state_dir else []
    return [python, "-I", "-S", f"{runtime_dir}/{AGENT}", "--runtime", runtime_dir,
            "--watchdog", f"{runtime_dir}/{WATCHDOG}", "--session", session, *kept]

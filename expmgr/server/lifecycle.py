"""Stopping, resuming and deleting the experiments of a registry, and what state each is
in as a user sees it: what ``expctl stop``, ``resume``, ``experiment delete`` and the web
UI's experiments page (home.py) both do, decided here once; a refusal is a Refusal, which
the REST routes answer with its kind's status and expctl prints::

    entry = Registry(home).get(exp_id)
    if crashed(entry): print(resume_hint(entry))     # "expctl resume <id>"
    send_stop(entry)                                 # SIGTERM, as Ctrl+C; ActionRefused if it is not running
    delete(Registry(home), entry)                    # its folder and its entry; refused while it runs
    subprocess.run(resume_command(entry, port=0, home=home))
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.layout import HOME_ENV
from expmgr.store.registry import Registry, RegistryEntry, experiment_process_alive
from expmgr.trial import ENV_ACCESS_TOKEN

CRASHED = "CRASHED"
"""The state shown for an experiment whose process died without recording its end (a
SIGKILL, a reboot, an out-of-memory kill): its registry entry still says it runs."""


class ActionRefused(Refusal):
    """A stop, resume or delete that cannot be done now (CONFLICT) or by this user (FORBIDDEN)."""


def is_running(entry: RegistryEntry) -> bool:
    """Whether its search runs (trials, tuner): it can be changed."""
    return not entry.status.is_finished() and experiment_process_alive(entry)


def is_serving(entry: RegistryEntry) -> bool:
    """Whether its process runs: its search, or, once that ended by itself (DONE, ERROR),
    its server (REST, web UI), read-only, until ``expctl stop``. Such an experiment is
    listed and stopped as a running one."""
    return experiment_process_alive(entry)


def crashed(entry: RegistryEntry) -> bool:
    """Whether its process died without recording an end: not finished, and not alive."""
    return not entry.status.is_finished() and not experiment_process_alive(entry)


def resume_hint(entry: RegistryEntry) -> str:
    """The command that continues it (a stopped, failed or crashed experiment)."""
    return f"expctl resume {entry.id}"


def _serving_refusal(entry: RegistryEntry) -> ActionRefused:
    doing = "running" if is_running(entry) else "served"
    return ActionRefused(RefusalKind.CONFLICT, f"experiment {entry.id} is {doing}; stop it first "
                                               f"(expctl stop {entry.id})")


KEEP_TRIALS_SIGNAL = signal.SIGUSR2
"""Asks an experiment process to stop and leave its trials running (``expctl stop --keep-trials``)."""


def send_stop(entry: RegistryEntry, *, keep_trials: bool = False) -> None:
    """Stop it as Ctrl+C does: SIGTERM to its process, which records the stop, ends its
    trials gracefully and closes its server (``expctl stop`` then waits for that); with
    ``keep_trials``, SIGUSR2: the same, but its trials run on for a resume (reattachWindow).
    ActionRefused when its process does not run, or is another user's."""
    if not is_serving(entry):
        state = CRASHED if crashed(entry) else entry.status.value
        raise ActionRefused(RefusalKind.CONFLICT, f"experiment {entry.id} is not running ({state})")
    try:
        os.kill(entry.pid or 0, KEEP_TRIALS_SIGNAL if keep_trials else signal.SIGTERM)
    except PermissionError:
        raise ActionRefused(RefusalKind.FORBIDDEN, f"experiment {entry.id} runs as another user (pid {entry.pid}); "
                                                   "only its owner can stop it") from None
    except ProcessLookupError:  # it ended between the check and the signal
        pass


def check_can_delete(entry: RegistryEntry) -> None:
    """ActionRefused when it runs or is served: its process writes in the folder."""
    if is_serving(entry):
        raise _serving_refusal(entry)


def delete(registry: Registry, entry: RegistryEntry) -> None:
    """Its folder (store, logs, trials' files) and its registry entry; refused while it runs."""
    check_can_delete(entry)
    shutil.rmtree(entry.dir, ignore_errors=True)
    registry.remove(entry.id)


def check_can_resume(entry: RegistryEntry) -> None:
    """ActionRefused when it runs or is served: one process per experiment."""
    if is_serving(entry):
        raise _serving_refusal(entry)


def resume_command(entry: RegistryEntry, *, port: int, home: Path, host: str | None = None,
                   url_prefix: str | None = None) -> list[str]:
    """``expctl resume <id>`` as a command line (a detached daemon, as from a shell) for the
    experiment of the registry in ``home``; $EXPMGR_HOME must name ``home`` in its
    environment (``resume_environment``). Its last run's token is kept, as ``expctl resume`` does."""
    command = [sys.executable, "-m", "expmgr.cli", "resume", entry.id, "--port", str(port)]
    if host is not None:
        command += ["--host", host]
    if url_prefix is not None:
        command += ["--url-prefix", url_prefix]
    return command


def resume_environment(home: Path) -> dict[str, str]:
    """The environment of ``resume_command``: this one's, the registry's home as
    $EXPMGR_HOME, and no $EXPMGR_TOKEN (a server's own token is not the experiment's)."""
    env = {key: value for key, value in os.environ.items() if key != ENV_ACCESS_TOKEN}
    env[HOME_ENV] = str(home)
    return env

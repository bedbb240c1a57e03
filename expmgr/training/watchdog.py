"""The trial watchdog: ends every trial's process group when the experiment process dies.

The local training service starts it (``python -m expmgr.training.watchdog``) and
writes ``+<pgid>`` when a trial starts and ``-<pgid>`` when it ends to its stdin.
When that pipe closes without a clean ``stop`` line, because the experiment
process was SIGKILLed or crashed, it SIGKILLs every group still listed, so no
trial, nor any child of one, outlives its experiment. It imports nothing but
``os``, ``signal`` and ``sys``, and runs in its own session so that a Ctrl+C
meant for the experiment does not reach it.
"""
from __future__ import annotations

import os
import signal
import sys


def watch(lines: "object") -> int:
    groups: set[int] = set()
    for line in lines:
        line = line.strip()
        if line == "stop":
            return 0
        if line[:1] in ("+", "-") and line[1:].isdigit():
            (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(watch(sys.stdin))

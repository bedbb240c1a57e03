"""SIGTERM and SIGUSR1 as exceptions in the main thread, as SIGINT is KeyboardInterrupt:
``Experiment.run()`` and a blocking ``Experiment.view()`` catch them to stop (or, on a
preemption notice, to stop resumable)::

    previous = signal.signal(signal.SIGTERM, raise_stop_signal)
    try:
        threading.Event().wait()
    except (KeyboardInterrupt, StopSignal):
        ...
"""
from __future__ import annotations

from typing import Any


class StopSignal(BaseException):
    """Raised in the main thread by SIGTERM during ``run()``, like KeyboardInterrupt by SIGINT."""


class PreemptSignal(BaseException):
    """Raised in the main thread by SIGUSR1 (a preemption notice) while the experiment runs."""


def raise_preempt_signal(signum: int, frame: Any) -> None:
    raise PreemptSignal()


def raise_stop_signal(signum: int, frame: Any) -> None:
    raise StopSignal()

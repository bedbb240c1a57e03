"""Warm trial starts: a template process per experiment that imported the trial's heavy
modules once (``trialWarmStart``) forks each Python trial, which then runs as a fresh
interpreter would; every other trial, or any the template cannot start safely, starts cold.
The local service uses it as a launch strategy (``local.py``)::

    starter = WarmStarter(preload, session, log, log_dir)
    trial = await starter.spawn(command, cwd, env, stdout, stderr, marker)   # None: start cold
"""
from __future__ import annotations

from expmgr.training.warm._command import PythonCommand, python_command
from expmgr.training.warm._starter import WarmStarter, WarmTrial

__all__ = ["PythonCommand", "WarmStarter", "WarmTrial", "python_command"]

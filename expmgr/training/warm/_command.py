"""Which trial commands can start warm: ``<python> script.py args`` and ``<python> -m pkg
args``, the interpreter found as a cold start finds it (the trial's PATH, or a path from
its code directory); anything else (interpreter options, shell syntax) starts cold::

    command = python_command("python3 train.py --lr 0.1", env, code_directory)
    command.interpreter, command.main     # '/usr/bin/python3', ('script', 'train.py')
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from expmgr.training._process import command_argv

_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")


@dataclass(frozen=True, slots=True)
class PythonCommand:
    """A trial command that runs Python code, as the template needs it."""

    argv: tuple[str, ...]
    """The command's words, as a cold start executes them (``sys.orig_argv``)."""
    interpreter: str
    """The executable a cold start would run (absolute, symlinks kept: ``sys.executable``)."""
    main: tuple[str, str]
    """``("script", path as written)`` or ``("module", name)``."""


def python_command(command: str, env: dict[str, str], code_directory: str) -> PythonCommand | None:
    """``command`` as a Python command that can start warm, or None (it starts cold)."""
    argv = command_argv(command)
    if len(argv) < 2 or not _PYTHON_NAME.fullmatch(os.path.basename(argv[0])):
        return None
    if argv[1] == "-m":
        if len(argv) < 3 or not all(part.isidentifier() for part in argv[2].split(".")):
            return None
        main = ("module", argv[2])
    elif argv[1].startswith("-") or not argv[1].endswith(".py"):
        return None   # interpreter options change the interpreter itself: cold
    else:
        main = ("script", argv[1])
    interpreter = _resolve(argv[0], env, code_directory)
    return None if interpreter is None else PythonCommand(argv, interpreter, main)


def _resolve(program: str, env: dict[str, str], code_directory: str) -> str | None:
    """The file a cold start executes for ``program`` (``subprocess`` searches the trial's
    PATH, or takes a path with a slash from its working directory)."""
    if "/" in program:
        path = os.path.join(code_directory, program)
        return os.path.abspath(path) if os.access(path, os.X_OK) and os.path.isfile(path) else None
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    return None if found is None else os.path.abspath(found)

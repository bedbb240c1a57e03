"""``expctl algo register|list|show|unregister`` (nnictl's ``algo``): a user's tuner or
assessor registered by name, so that a config says ``tuner: {name: demotuner}``::

    pip install -e .                             # the algorithm's package, where expmgr runs
    expctl algo register --meta_path meta_file.yml
    expctl algo list; expctl algo show demotuner; expctl algo unregister demotuner

Registrations belong to the experiments' home (``$EXPMGR_HOME``); the meta file is NNI's
(expmgr/algorithms/registered.py).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from expmgr.algorithms import BUILTIN_ASSESSORS, BUILTIN_TUNERS, TUNER_ALIASES, AlgorithmError
from expmgr.algorithms.registered import (RegisteredAlgorithm, find_registered, read_meta_file, register,
                                          registered_algorithms, unregister)
from expmgr.cli.common import EXIT_OK, CliError
from expmgr.layout import default_home


def add_parser(commands: argparse._SubParsersAction) -> None:
    algo = commands.add_parser("algo", help="register your own tuners and assessors by name (nnictl's algo)")
    algo_commands = algo.add_subparsers(dest="algo_command", required=True, metavar="COMMAND")
    reg = algo_commands.add_parser("register", aliases=["reg"], help="register the algorithms of a meta file")
    reg.add_argument("--meta_path", "--meta-path", "-m", dest="meta_path", type=Path, required=True,
                     help="NNI's meta file (algoType, builtinName, className, classArgsValidator)")
    reg.set_defaults(handler=_register)
    unreg = algo_commands.add_parser("unregister", aliases=["unreg"], help="remove a registered algorithm")
    unreg.add_argument("name", help="its builtinName")
    unreg.set_defaults(handler=_unregister)
    show = algo_commands.add_parser("show", help="a registered or built-in algorithm, as JSON")
    show.add_argument("name", help="its builtinName")
    show.set_defaults(handler=_show)
    listing = algo_commands.add_parser("list", help="the built-in and registered algorithms")
    listing.set_defaults(handler=_list)


def _register(args: argparse.Namespace) -> int:
    try:
        algorithms = read_meta_file(args.meta_path)
        for algorithm in algorithms:
            _check_importable(algorithm)
            replaced = register(default_home(), algorithm)
            print(f"{algorithm.builtin_name} {'updated' if replaced else 'registered'}")
    except AlgorithmError as error:
        raise CliError(str(error)) from None
    return EXIT_OK


def _check_importable(algorithm: RegisteredAlgorithm) -> None:
    """Import its classes as the dispatcher will (with NNI's ``nni`` last on the path), so
    that a typo is refused now rather than when an experiment starts."""
    from expmgr.trial import TRIAL_PATH
    if TRIAL_PATH not in sys.path:
        sys.path.append(TRIAL_PATH)
    for key, name in (("className", algorithm.class_name), ("classArgsValidator", algorithm.class_args_validator)):
        if name is None:
            continue
        module_name, _, attribute = name.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except Exception as error:
            raise AlgorithmError(f"{algorithm.builtin_name}: {key} {name!r}: cannot import {module_name!r} "
                                 f"({type(error).__name__}: {error}); install its package where expmgr runs "
                                 f"(pip install -e DIR) or put it on PYTHONPATH") from None
        if not hasattr(module, attribute):
            raise AlgorithmError(f"{algorithm.builtin_name}: {key} {name!r}: module {module_name!r} has no "
                                 f"{attribute!r}")


def _unregister(args: argparse.Namespace) -> int:
    if _builtin(args.name) is not None:
        raise CliError(f"{args.name} is built into expmgr; it cannot be unregistered")
    try:
        removed = unregister(default_home(), args.name)
    except AlgorithmError as error:
        raise CliError(str(error)) from None
    print(f"{removed.builtin_name} unregistered")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    builtin = _builtin(args.name)
    if builtin is not None:
        print(json.dumps(builtin, indent=4))
        return EXIT_OK
    found = find_registered(default_home(), args.name)
    if found is None:
        raise CliError(f"no algorithm {args.name!r}: neither built in nor registered (expctl algo list shows them)")
    print(json.dumps(found.as_meta(), indent=4))
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    rows = [(name, "tuner", "expmgr", BUILTIN_TUNERS[name].replace(":", ".")) for name in BUILTIN_TUNERS
            if name not in TUNER_ALIASES]
    rows += [(name, "assessor", "expmgr", target.replace(":", ".")) for name, target in BUILTIN_ASSESSORS.items()]
    rows += [(a.builtin_name, a.algo_type, "user", a.class_name) for a in registered_algorithms(default_home())]
    header = ("NAME", "TYPE", "SOURCE", "CLASS")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    return EXIT_OK


def _builtin(name: str) -> dict[str, str] | None:
    for algo_type, builtins in (("tuner", BUILTIN_TUNERS), ("assessor", BUILTIN_ASSESSORS)):
        for builtin, target in builtins.items():
            if builtin.lower() == name.lower():
                return {"algoType": algo_type, "builtinName": TUNER_ALIASES.get(builtin, builtin),
                        "className": target.replace(":", "."), "source": "expmgr"}
    return None

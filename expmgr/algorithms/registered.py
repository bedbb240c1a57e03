"""Algorithms registered by name (NNI's ``nnictl algo register``): a user's tuner or
assessor, installed as a package, that configs name like a built-in
(``tuner: {name: demotuner}``).

NNI's meta file says what to register (one algorithm, or several under ``algorithms:``)::

    algoType: tuner                        # tuner, assessor or advisor (read as tuner)
    builtinName: demotuner
    className: demo_tuner.DemoTuner        # importable where expmgr runs (pip install -e .)
    classArgsValidator: demo_tuner.MyClassArgsValidator   # optional

The registrations of a home are kept in ``<home>/registered_algorithms.json``;
``register(home, read_meta_file(path))`` adds them, the config reads them with
``find_registered``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from expmgr.algorithms.tuner import AlgorithmError

REGISTRY_FILE = "registered_algorithms.json"
ALGO_TYPES = ("tuner", "assessor", "advisor")


@dataclass(frozen=True)
class RegisteredAlgorithm:
    """One registration, with NNI's meta file keys in ``as_meta()``."""

    algo_type: str
    builtin_name: str
    class_name: str
    class_args_validator: str | None = None

    @property
    def kind(self) -> str:
        """The config section it goes in: an advisor is a tuner, as NNI 3.0 reads it."""
        return "assessor" if self.algo_type == "assessor" else "tuner"

    def as_meta(self) -> dict[str, Any]:
        meta = {"algoType": self.algo_type, "builtinName": self.builtin_name, "className": self.class_name}
        if self.class_args_validator is not None:
            meta["classArgsValidator"] = self.class_args_validator
        return meta


def read_meta_file(path: Path) -> list[RegisteredAlgorithm]:
    """The algorithms of NNI's meta file ``path`` (YAML or JSON); AlgorithmError naming the
    file and the key that is wrong."""
    from ruamel.yaml import YAML, YAMLError
    try:
        content = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise AlgorithmError(f"cannot read the meta file {str(path)!r}: {error.strerror or error}") from None
    except YAMLError as error:
        raise AlgorithmError(f"the meta file {str(path)!r} is not YAML: {error}") from None
    if isinstance(content, dict) and "algorithms" in content:
        metas, where = content["algorithms"], "algorithms"
    else:
        metas, where = [content], ""
    if not isinstance(metas, list) or not metas:
        raise AlgorithmError(f"{path}: {where or 'the file'}: expected a list of algorithms")
    return [_from_meta(meta, f"{path}: {where}[{index}]" if where else str(path)) for index, meta in enumerate(metas)]


def _from_meta(meta: Any, where: str) -> RegisteredAlgorithm:
    if not isinstance(meta, dict):
        raise AlgorithmError(f"{where}: expected a mapping with algoType, builtinName and className, got {meta!r}")
    unknown = sorted(set(meta) - {"algoType", "builtinName", "className", "classArgsValidator", "nniVersion"})
    if unknown:
        raise AlgorithmError(f"{where}: unknown key {unknown[0]!r}; a meta file has algoType, builtinName, "
                             f"className and classArgsValidator")
    for key in ("algoType", "builtinName", "className"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise AlgorithmError(f"{where}: {key}: required, a string (got {meta.get(key)!r})")
    if meta["algoType"] not in ALGO_TYPES:
        raise AlgorithmError(f"{where}: algoType: expected one of {', '.join(ALGO_TYPES)}, got {meta['algoType']!r}")
    for key in ("className", "classArgsValidator"):
        value = meta.get(key)
        if value is not None and (not isinstance(value, str) or "." not in value.strip(".")):
            raise AlgorithmError(f"{where}: {key}: expected module.ClassName, got {value!r}")
    return RegisteredAlgorithm(meta["algoType"], meta["builtinName"], meta["className"],
                               meta.get("classArgsValidator"))


def registered_algorithms(home: Path) -> list[RegisteredAlgorithm]:
    """The algorithms registered in ``home``, in the order they were registered."""
    path = home / REGISTRY_FILE
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise AlgorithmError(f"cannot read the registered algorithms in {str(path)!r}: {error}; "
                             f"remove the file and register them again") from None
    return [RegisteredAlgorithm(**record) for record in records]


def find_registered(home: Path, name: str) -> RegisteredAlgorithm | None:
    """The algorithm registered as ``name`` (any case) in ``home``, or None."""
    return next((a for a in registered_algorithms(home) if a.builtin_name.lower() == name.lower()), None)


def register(home: Path, algorithm: RegisteredAlgorithm) -> bool:
    """Register ``algorithm`` in ``home``; True when it replaced one of the same name.
    A built-in's name is refused (AlgorithmError)."""
    from expmgr.algorithms import BUILTIN_ASSESSORS, BUILTIN_TUNERS
    builtins = {name.lower() for name in (*BUILTIN_TUNERS, *BUILTIN_ASSESSORS)}
    if algorithm.builtin_name.lower() in builtins:
        raise AlgorithmError(f"cannot overwrite the built-in algorithm {algorithm.builtin_name!r}")
    kept = [a for a in registered_algorithms(home) if a.builtin_name.lower() != algorithm.builtin_name.lower()]
    replaced = len(kept) < len(registered_algorithms(home))
    _write(home, [*kept, algorithm])
    return replaced


def unregister(home: Path, name: str) -> RegisteredAlgorithm:
    """Remove the registration of ``name``; AlgorithmError when there is none."""
    found = find_registered(home, name)
    if found is None:
        raise AlgorithmError(f"no algorithm registered as {name!r} (expctl algo list shows them)")
    _write(home, [a for a in registered_algorithms(home) if a != found])
    return found


# Run in a child process: the validator's module is the user's, written for NNI (it imports
# nni.utils), and importing it must not change the process that loads the config.
_VALIDATE = """
import importlib, json, sys
module_name, _, attribute = sys.argv[1].rpartition(".")
try:
    validator = getattr(importlib.import_module(module_name), attribute)()
    validator.validate_class_args(**json.loads(sys.argv[2]))
except Exception as error:
    print(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
    sys.exit(3)
"""
_VALIDATOR_REFUSED = 3


def class_args_refusal(algorithm: RegisteredAlgorithm, class_args: dict[str, Any]) -> str | None:
    """What ``algorithm``'s ``classArgsValidator`` says of ``class_args`` (NNI runs it when an
    experiment is created), or None when it takes them or there is none. It runs in a child
    process with this environment and NNI's ``nni`` last on its path, as the dispatcher has."""
    if algorithm.class_args_validator is None:
        return None
    from expmgr.trial import TRIAL_PATH
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), TRIAL_PATH])
    checked = subprocess.run([sys.executable, "-c", _VALIDATE, algorithm.class_args_validator, json.dumps(class_args)],
                             env=env, capture_output=True, text=True, timeout=120, check=False)
    if checked.returncode == 0:
        return None
    said = checked.stdout.strip() if checked.returncode == _VALIDATOR_REFUSED else checked.stderr.strip()[-2000:]
    return f"{algorithm.builtin_name}'s classArgsValidator {algorithm.class_args_validator} refused them: {said}"


def _write(home: Path, algorithms: list[RegisteredAlgorithm]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / REGISTRY_FILE
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps([asdict(a) for a in algorithms], indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)  # a reader sees the old list or the new one, never half

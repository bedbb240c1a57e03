"""``expctl experiment save`` and ``load`` (nnictl's): a stopped experiment as one portable
zip file, ``nni_experiment_<id>.zip`` as nnictl names it, holding its folder
(``experiment/``), its registry row (``registry.json``) and, with ``--saveCodeDir``, its
trial code (``code/``); loaded into another home (``--logDir``, default ``$EXPMGR_HOME``)
with its code put in ``--codeDir``, the experiment can be viewed and resumed there."""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from expmgr.cli.common import EXIT_FAILED, EXIT_OK, CliError, experiment_store, find_experiment, is_running
from expmgr.layout import ExperimentPaths, default_home
from expmgr.states import ExperimentState
from expmgr.store import StoreError, open_store
from expmgr.store.registry import Registry, RegistryEntry

if TYPE_CHECKING:
    import zipfile

# zipfile and tempfile are imported by the two commands alone: this module is imported by
# every expctl, a daemon serving an experiment included.

_METADATA = "registry.json"


def add_parsers(experiment_commands: argparse._SubParsersAction) -> None:
    save = experiment_commands.add_parser("save", help="a stopped experiment as a portable zip file")
    save.add_argument("id", nargs="?", help="experiment id or a unique prefix")
    save.add_argument("--path", "-p", type=Path, default=Path("."),
                      help="the folder to write nni_experiment_<id>.zip to (default: this one)")
    save.add_argument("--saveCodeDir", "-s", action="store_true", help="put the trial code in it too")
    save.set_defaults(handler=save_experiment)
    load = experiment_commands.add_parser("load", help="an experiment saved by experiment save")
    load.add_argument("--path", "-p", type=Path, required=True, help="the zip file")
    load.add_argument("--codeDir", "-c", type=Path, required=True,
                      help="the trial code's folder (the saved code is unpacked here)")
    load.add_argument("--logDir", "-l", type=Path, help="the home to put the experiment in (default $EXPMGR_HOME)")
    load.add_argument("--searchSpacePath", "-s", type=Path, help="write the search space to this file too")
    load.set_defaults(handler=load_experiment)


def save_experiment(args: argparse.Namespace) -> int:
    import zipfile
    entry = find_experiment(args.id)
    if is_running(entry) or not entry.status.is_finished():
        raise CliError(f"experiment {entry.id} is {entry.status.value}: only a stopped one can be saved")
    with experiment_store(entry) as store:
        code_dir = Path(store.profile().config.get("trialCodeDirectory", "."))
    args.path.mkdir(parents=True, exist_ok=True)
    target = args.path / f"nni_experiment_{entry.id}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_METADATA, json.dumps({**dataclasses.asdict(entry), "status": entry.status.value}))
        _add_folder(archive, Path(entry.dir), "experiment")
        if args.saveCodeDir:
            if not code_dir.is_dir():
                raise CliError(f"--saveCodeDir: the trial code folder {code_dir} is gone", EXIT_FAILED)
            _add_folder(archive, code_dir, "code")
    print(f"saved experiment {entry.id} to {target}")
    return EXIT_OK


def _add_folder(archive: zipfile.ZipFile, folder: Path, name: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            archive.write(path, f"{name}/{path.relative_to(folder).as_posix()}")


def load_experiment(args: argparse.Namespace) -> int:
    import tempfile
    import zipfile
    if not args.path.is_file():
        raise CliError(f"--path: no such file {str(args.path)!r}")
    home = (args.logDir or default_home()).expanduser().absolute()
    code_dir = args.codeDir.expanduser().absolute()
    with tempfile.TemporaryDirectory() as unpacked:
        try:
            with zipfile.ZipFile(args.path) as archive:
                _extract(archive, Path(unpacked))
            saved = json.loads((Path(unpacked) / _METADATA).read_text(encoding="utf-8"))
            exp_id = str(saved["id"])
        except (zipfile.BadZipFile, OSError, ValueError, KeyError) as error:
            raise CliError(f"--path: {args.path} is not an archive of experiment save ({error})") from None
        registry = Registry(home)
        if registry.get(exp_id) is not None or (home / exp_id).exists():
            raise CliError(f"experiment {exp_id} is already in {home}")
        home.mkdir(parents=True, exist_ok=True)
        shutil.copytree(Path(unpacked) / "experiment", home / exp_id)
        code_dir.mkdir(parents=True, exist_ok=True)
        if (Path(unpacked) / "code").is_dir():
            shutil.copytree(Path(unpacked) / "code", code_dir, dirs_exist_ok=True)
    paths = ExperimentPaths(home / exp_id)
    try:
        store = open_store(paths)
    except StoreError as error:
        raise CliError(str(error), EXIT_FAILED) from None
    try:
        config = {**store.profile().config, "trialCodeDirectory": str(code_dir),
                  "experimentWorkingDirectory": str(home)}
        if args.searchSpacePath is not None and "searchSpace" in config:
            args.searchSpacePath.write_text(json.dumps(config["searchSpace"], indent=2), encoding="utf-8")
            config["searchSpaceFile"] = str(args.searchSpacePath.absolute())
        store.set_config(config)
    finally:
        store.close()
    registry.add(RegistryEntry(id=exp_id, name=saved.get("name"), dir=str(paths.root), port=None, pid=None,
                               status=ExperimentState(saved["status"]), start_time=saved["start_time"],
                               end_time=saved.get("end_time")))
    print(f"loaded experiment {exp_id} into {paths.root}; resume it with: expctl resume {exp_id}")
    return EXIT_OK


def _extract(archive: zipfile.ZipFile, folder: Path) -> None:
    """Every member, refusing names that would land outside ``folder``."""
    for name in archive.namelist():
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise ValueError(f"unsafe member {name!r}")
    archive.extractall(folder)

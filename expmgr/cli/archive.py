"""``expctl experiment save`` and ``load`` (nnictl's): a stopped experiment as one portable
zip file, ``nni_experiment_<id>.zip`` as nnictl names it, holding its folder
(``experiment/``), its registry row (``registry.json``) and, with ``--saveCodeDir``, its
trial code (``code/``); loaded into another home (``--logDir``, default ``$EXPMGR_HOME``)
with its code put in ``--codeDir``, the experiment can be viewed and resumed there.

The folder's secrets (``access.json``, ``trial-secret``) are not saved, and an archive is
not trusted when loaded: its members are checked first (expmgr/cli/unpacking.py), its id is
checked as any experiment id, and it is unpacked in a temporary folder of the home, private
as a created experiment is, then renamed into place: a refused archive leaves no experiment,
no unpacked file and nothing in --codeDir."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expmgr.cli.common import EXIT_FAILED, EXIT_OK, CliError, experiment_store, find_experiment, is_running
from expmgr.cli.unpacking import Member, UnsafeArchive, checked_members, read_member, unpack_member
from expmgr.layout import (ID_RULE, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, ExperimentPaths, default_home,
                           is_valid_id, make_private_dir)
from expmgr.states import ExperimentState
from expmgr.store import StoreError, open_store
from expmgr.store.registry import Registry, RegistryEntry

if TYPE_CHECKING:
    import zipfile

# zipfile and tempfile are imported by the two commands alone: this module is imported by
# every expctl, a daemon serving an experiment included.

_METADATA = "registry.json"
_EXPERIMENT = "experiment"
_CODE = "code"
_MAX_METADATA_BYTES = 1 << 20


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
    if args.saveCodeDir and not code_dir.is_dir():
        raise CliError(f"--saveCodeDir: the trial code folder {code_dir} is gone", EXIT_FAILED)
    paths = ExperimentPaths(Path(entry.dir))
    args.path.mkdir(parents=True, exist_ok=True)
    target = args.path / f"nni_experiment_{entry.id}.zip"
    # Written whole under another name, readable by its owner only (it holds the trials'
    # output and the experiment's config), then renamed: never a half-written archive.
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(descriptor, PRIVATE_FILE_MODE)  # whatever the umask
            with zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(_METADATA, json.dumps({**dataclasses.asdict(entry), "status": entry.status.value}))
                _add_folder(archive, paths.root, _EXPERIMENT, left_out=set(_secret_files(paths)))
                if args.saveCodeDir:
                    _add_folder(archive, code_dir, _CODE, left_out=set())
            file.flush()
            os.fsync(descriptor)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    print(f"saved experiment {entry.id} to {target}")
    return EXIT_OK


def _secret_files(paths: ExperimentPaths) -> tuple[Path, ...]:
    """What an experiment's folder holds that is never saved nor loaded: its server's access
    token (access.json) and its trials' key (trial-secret). A loaded experiment gets a key
    of its own, and an access of its own when resumed."""
    from expmgr.engine.reports import TRIAL_SECRET_FILE
    return paths.access_file, paths.root / TRIAL_SECRET_FILE


def _add_folder(archive: zipfile.ZipFile, folder: Path, name: str, left_out: set[Path]) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path not in left_out:
            archive.write(path, f"{name}/{path.relative_to(folder).as_posix()}")


def load_experiment(args: argparse.Namespace) -> int:
    import zipfile
    import zlib
    if not args.path.is_file():
        raise CliError(f"--path: no such file {str(args.path)!r}")
    home = (args.logDir or default_home()).expanduser().absolute()
    code_dir = args.codeDir.expanduser().absolute()
    try:
        archive = zipfile.ZipFile(args.path)
    except (zipfile.BadZipFile, OSError) as error:
        raise CliError(f"--path: {args.path} is not an archive of experiment save ({error})") from None
    with archive:
        try:
            loaded = _load(archive, home, code_dir, args.searchSpacePath)
        except UnsafeArchive as unsafe:
            raise CliError(f"--path: {args.path}: {unsafe}") from None
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as error:  # damaged members
            raise CliError(f"--path: {args.path} is not an archive of experiment save ({error})") from None
        except OSError as error:
            raise CliError(f"cannot load {args.path}: {error}", EXIT_FAILED) from None
    print(f"loaded experiment {loaded.id} into {loaded.dir}; resume it with: expctl resume {loaded.id}")
    return EXIT_OK


def _load(archive: zipfile.ZipFile, home: Path, code_dir: Path, search_space_path: Path | None) -> RegistryEntry:
    """Put the archive's experiment in ``home`` and its code in ``code_dir``; its registry
    row. UnsafeArchive or CliError, with nothing written, when it is refused."""
    import tempfile

    from expmgr.engine.reports import load_trial_secret
    members = checked_members(archive)
    saved = _saved_entry(archive, members, home)
    experiment_members = [member for member in members if member.parts[0] == _EXPERIMENT and len(member.parts) > 1]
    code_members = [member for member in members if member.parts[0] == _CODE and len(member.parts) > 1]
    unknown = [member.info.filename for member in members if member.parts[0] not in (_EXPERIMENT, _CODE, _METADATA)]
    if unknown:
        raise UnsafeArchive(f"member {unknown[0]!r} is not part of a saved experiment")
    if not experiment_members:
        raise UnsafeArchive(f"no {_EXPERIMENT}/ folder: not an archive of experiment save")
    registry = Registry(home)
    if registry.get(saved.id) is not None or os.path.lexists(saved.dir):
        raise CliError(f"experiment {saved.id} is already in {home}")
    _check_code_targets(code_members, code_dir)
    make_private_dir(home)
    # Unpacked beside its final place (the same file system: one rename puts it there) in a
    # folder of mkdtemp's (0700): until then, nothing of it is in the home.
    unpacked = Path(tempfile.mkdtemp(prefix=".loading-", dir=home))
    try:
        paths = ExperimentPaths(unpacked / _EXPERIMENT)
        paths.create()  # its folders 0700, as a created experiment's
        secret_parts = {path.relative_to(paths.root).parts for path in _secret_files(paths)}
        for member in experiment_members:
            if member.parts[1:] not in secret_parts:  # older archives have them: never taken from one
                _unpack(archive, member, paths.root, private=True)
        unpacked_code = unpacked / _CODE
        unpacked_code.mkdir()
        for member in code_members:  # here first: a damaged member is found before --codeDir is written to
            _unpack(archive, member, unpacked_code, private=False)
        load_trial_secret(paths.root)  # a new key: the saved experiment's tokens are not this one's
        _adopt_store(paths, saved.id, home, code_dir, search_space_path)
        final = Path(saved.dir)
        try:
            final.mkdir(mode=PRIVATE_DIR_MODE)  # fails if another load got there first
        except FileExistsError:
            raise CliError(f"experiment {saved.id} is already in {home}") from None
        try:
            _place_code(code_members, unpacked_code, code_dir)
            os.rename(paths.root, final)  # onto the empty folder just made
            registry.add(saved)
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    return saved


def _saved_entry(archive: zipfile.ZipFile, members: list[Member], home: Path) -> RegistryEntry:
    """The experiment's registry row as saved (registry.json), every field checked; its
    ``dir`` is its folder in ``home``."""
    metadata = next((member for member in members if member.parts == (_METADATA,)), None)
    if metadata is None or metadata.is_dir:
        raise UnsafeArchive(f"no {_METADATA}: not an archive of experiment save")
    text = read_member(archive, metadata, _MAX_METADATA_BYTES)
    try:
        saved = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise UnsafeArchive(f"{_METADATA} is not valid JSON ({error})") from None
    if not isinstance(saved, dict):
        raise UnsafeArchive(f"{_METADATA}: expected a JSON object, got {type(saved).__name__}")
    exp_id = saved.get("id")
    if not isinstance(exp_id, str) or not is_valid_id(exp_id):
        raise UnsafeArchive(f"{_METADATA}: id: invalid experiment id {exp_id!r} ({ID_RULE})")
    states = [state.value for state in ExperimentState if state.is_finished()]
    if saved.get("status") not in states:
        raise UnsafeArchive(f"{_METADATA}: status: expected one of {', '.join(states)}, got {saved.get('status')!r}")
    _check_field(saved, "name", str, optional=True)
    _check_field(saved, "start_time", (int, float), optional=False)
    _check_field(saved, "end_time", (int, float), optional=True)
    return RegistryEntry(id=exp_id, name=saved.get("name"), dir=str(home / exp_id), port=None, pid=None,
                         status=ExperimentState(saved["status"]), start_time=saved["start_time"],
                         end_time=saved.get("end_time"))


def _check_field(saved: dict[str, Any], field: str, kind: type | tuple[type, ...], optional: bool) -> None:
    value = saved.get(field)
    if (value is None and optional) or (isinstance(value, kind) and not isinstance(value, bool)):
        return
    expected = "a string" if kind is str else "a number"
    raise UnsafeArchive(f"{_METADATA}: {field}: expected {expected}{' or null' if optional else ''}, got {value!r}")


def _adopt_store(paths: ExperimentPaths, exp_id: str, home: Path, code_dir: Path,
                 search_space_path: Path | None) -> None:
    """Check the unpacked experiment's database (its experiment, and its trials' ids: they
    name folders) and point its config at its new home and code folder."""
    try:
        store = open_store(paths)
    except StoreError as error:
        raise UnsafeArchive(f"{_EXPERIMENT}/: {error}") from None
    try:
        try:
            profile = store.profile()
            trial_ids = [trial.trial_id for trial in store.trials()]
            trial_ids += [trial_id for pair in store.checkpoint_sources().items() for trial_id in pair]
        except StoreError as error:
            raise UnsafeArchive(f"{_EXPERIMENT}/: {error}") from None
        if profile.id != exp_id:
            raise UnsafeArchive(f"{_METADATA} is experiment {exp_id}'s, its database experiment {profile.id!r}'s")
        bad_trial_id = next((trial_id for trial_id in trial_ids
                             if not isinstance(trial_id, str) or not is_valid_id(trial_id)), None)
        if bad_trial_id is not None:
            raise UnsafeArchive(f"{_EXPERIMENT}/: its database has a trial id {bad_trial_id!r} ({ID_RULE}): "
                                "a trial's id names its folder")
        if not isinstance(profile.config, dict):
            raise UnsafeArchive(f"{_EXPERIMENT}/: its database's config is not a JSON object")
        config = {**profile.config, "trialCodeDirectory": str(code_dir), "experimentWorkingDirectory": str(home)}
        if search_space_path is not None and "searchSpace" in config:
            try:
                search_space_path.write_text(json.dumps(config["searchSpace"], indent=2), encoding="utf-8")
            except OSError as error:
                raise CliError(f"--searchSpacePath: cannot write {search_space_path} ({error.strerror})",
                               EXIT_FAILED) from None
            config["searchSpaceFile"] = str(search_space_path.absolute())
        store.set_config(config)
    finally:
        store.close()


def _unpack(archive: zipfile.ZipFile, member: Member, root: Path, private: bool) -> None:
    """One member (``experiment/...`` or ``code/...``) below ``root``, a fresh folder of its
    own (nothing there is a symbolic link, as nothing unpacked is one): readable by its owner
    only (folders 0700, files 0600, whatever the umask) when ``private``, else with the
    usual modes."""
    target = root.joinpath(*member.parts[1:])
    for folder in (*reversed(target.parents[:len(member.parts) - 2]), *([target] if member.is_dir else [])):
        if folder.is_dir():
            continue
        folder.mkdir(mode=PRIVATE_DIR_MODE if private else 0o777)
        if private:
            os.chmod(folder, PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask
    if not member.is_dir:
        unpack_member(archive, member, target, PRIVATE_FILE_MODE if private else None)


def _check_code_targets(members: list[Member], code_dir: Path) -> None:
    """Refuse, before anything is written, a code member that --codeDir's existing files
    would send elsewhere (a symbolic link on its path) or that would replace a folder."""
    if os.path.lexists(code_dir) and not code_dir.is_dir():
        raise CliError(f"--codeDir: {code_dir} is not a folder")
    for member in members:
        target = code_dir.joinpath(*member.parts[1:])
        for folder in (*reversed(target.parents[:len(member.parts) - 2]), *([target] if member.is_dir else [])):
            if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
                raise CliError(f"--codeDir: {folder} is not a folder (member {member.info.filename!r} would be "
                               "unpacked through it)")
        if not member.is_dir and target.is_dir() and not target.is_symlink():
            raise CliError(f"--codeDir: {target} is a folder (member {member.info.filename!r} is a file)")


def _place_code(members: list[Member], unpacked_code: Path, code_dir: Path) -> None:
    """The unpacked trial code into --codeDir (checked by _check_code_targets): the folders
    it needs are made, a file of the same name is replaced (never written through, if it
    is a symbolic link)."""
    code_dir.mkdir(parents=True, exist_ok=True)
    for member in members:
        source, target = unpacked_code.joinpath(*member.parts[1:]), code_dir.joinpath(*member.parts[1:])
        if member.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.loading")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            with os.fdopen(descriptor, "wb") as file, source.open("rb") as unpacked:
                shutil.copyfileobj(unpacked, file)
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

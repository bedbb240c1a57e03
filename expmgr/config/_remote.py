"""Checking the remote training service's section (NNI's ``platform: remote``): its SSH hosts
(``machineList``), NNI's rules for each field, and expmgr's ``strictHostKeyChecking``::

    checked = check_remote_service(section, path, notes)   # a canonical RemoteConfig, or Problem

Called by ``_validate._Canonicalizer._remote_service`` (the method ``PLATFORMS["remote"]``
names); kept apart because the validator is long enough. Shares its value checks (``_values``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ._durations import parse_duration
from ._errors import ConfigError, Key, PathSegment, Problem, format_path
from ._keys import match_keys
from ._limits import MAX_TRIALS_PER_GPU
from ._platforms import STRICT_HOST_KEY_CHECKING
from ._reading import absolute_path
from ._sections import RemoteConfig, RemoteMachineConfig, public_fields
from ._values import check_bool, check_gpu_indices, is_int, positive_int, shown_value

FieldPath = tuple[PathSegment, ...]

PASSWORD_NOTE = ("the SSH password of {where} is kept as written in the experiment's config (config.yml, "
                 "the REST API, the web UI), as NNI does; an SSH key (sshKeyFile, or the SSH agent) keeps it out")


def check_remote_service(value: RemoteConfig, path: FieldPath, style: str, base: Path,
                         notes: list[str]) -> RemoteConfig:
    """The canonical form of ``value``: every machine checked; ``notes`` gets what loading
    ignored or should be known (a password kept in the config)."""
    result = RemoteConfig()
    result.reuse_mode = False if value.reuse_mode is None else check_bool(value.reuse_mode, path + (Key("reuse_mode"),))
    checking = value.strict_host_key_checking
    result.strict_host_key_checking = ("yes" if checking is None else
                                       _host_key_checking(checking, path + (Key("strict_host_key_checking"),)))
    machines, list_path = value.machine_list, path + (Key("machine_list"),)
    if machines is None or (isinstance(machines, list) and not machines):
        raise Problem(list_path, "required: at least one SSH host, e.g. machineList: [{host: gpu1.example.org, "
                                 "user: me}]")
    if not isinstance(machines, list):
        raise Problem(list_path, f"expected a list of SSH hosts such as [{{host: gpu1.example.org, user: me}}], "
                                 f"got {shown_value(machines)}")
    if value.reattach_window is not None:
        try:
            result.reattach_window = parse_duration(value.reattach_window, allow_zero=True)
        except ConfigError as exc:
            raise Problem(path + (Key("reattach_window"),), exc.message) from None
    result.machine_list = [_machine(machine, list_path + (index,), style, base, notes)
                           for index, machine in enumerate(machines)]
    return result


def _machine(value: Any, path: FieldPath, style: str, base: Path, notes: list[str]) -> RemoteMachineConfig:
    if isinstance(value, dict):   # built in Python: a mapping of its fields
        value = RemoteMachineConfig(**match_keys(value, public_fields(RemoteMachineConfig), path, style))
    if not isinstance(value, RemoteMachineConfig):
        raise Problem(path, f"expected an SSH host such as {{host: gpu1.example.org, user: me}}, got {shown_value(value)}")
    result = RemoteMachineConfig()
    result.host = _host(value.host, path + (Key("host"),))
    result.port = _port(value.port, path + (Key("port"),))
    result.user = None if value.user is None else _name(value.user, path + (Key("user"),), "a user name")
    result.password = None if value.password is None else _secret(value.password, path + (Key("password"),))
    if result.password is not None:
        # NNI's rule: a password is used and sshKeyFile is not (NNI drops it), whatever it names.
        _note(notes, PASSWORD_NOTE.format(where=f"{format_path(path)} ({result.host})"))
        if value.ssh_key_file is not None:
            _note(notes, f"{format_path(path)} ({result.host}): a password is given, so sshKeyFile is not used "
                             f"(NNI's rule)")
    elif value.ssh_key_file is not None:
        result.ssh_key_file = _key_file(value.ssh_key_file, path + (Key("ssh_key_file"),), base)
    if value.ssh_passphrase is not None:
        result.ssh_passphrase = _secret(value.ssh_passphrase, path + (Key("ssh_passphrase"),))
    result.use_active_gpu = check_bool(value.use_active_gpu, path + (Key("use_active_gpu"),))
    result.max_trial_number_per_gpu = positive_int(value.max_trial_number_per_gpu,
                                                    path + (Key("max_trial_number_per_gpu"),), MAX_TRIALS_PER_GPU)
    result.gpu_indices = check_gpu_indices(value.gpu_indices, path + (Key("gpu_indices"),))
    if value.python_path is not None:
        result.python_path = _name(value.python_path, path + (Key("python_path"),), "a folder (e.g. /usr/bin)")
    if value.strict_host_key_checking is not None:
        result.strict_host_key_checking = _host_key_checking(value.strict_host_key_checking,
                                                             path + (Key("strict_host_key_checking"),))
    return result


def _note(notes: list[str], note: str) -> None:
    if note not in notes:   # a canonical config checked again says it once
        notes.append(note)


def _host(value: Any, path: FieldPath) -> str:
    if value is None:
        raise Problem(path, "required: the SSH host's name or address, or a Host alias of ~/.ssh/config")
    return _name(value, path, "a host name or address")


def _name(value: Any, path: FieldPath, what: str) -> str:
    """A non-empty string that cannot be taken for an option of ssh (a leading ``-``)."""
    if not isinstance(value, str) or not value.strip():
        raise Problem(path, f"expected {what}, got {shown_value(value)}")
    if value.startswith("-"):
        raise Problem(path, f"cannot start with '-' (ssh would read it as an option), got {shown_value(value)}")
    return value


def _port(value: Any, path: FieldPath) -> int:
    if value is None:
        return 22
    if not is_int(value) or not 1 <= value <= 65535:
        raise Problem(path, f"expected a port number from 1 to 65535, got {shown_value(value)}")
    return int(value)


def _secret(value: Any, path: FieldPath) -> str:
    if not isinstance(value, str):
        # A YAML number is not the text typed: 012345 reads as 12345, 1.50 as 1.5 (NNI refuses it too).
        raise Problem(path, f"expected a string; quote it (e.g. '12345'), got {type(value).__name__} "
                            f"{shown_value(value)}")
    return value


def _key_file(value: Any, path: FieldPath, base: Path) -> Path:
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise Problem(path, f"expected the path of a private key file (e.g. ~/.ssh/id_ed25519), got {shown_value(value)}")
    real = absolute_path(value, base)   # ~ expanded; relative to the config file's folder
    if not real.exists():
        raise Problem(path, f"key file not found: {real}")
    if not real.is_file():
        raise Problem(path, f"not a key file: {real}")
    return real


def _host_key_checking(value: Any, path: FieldPath) -> str:
    if value is True:   # YAML 1.1's yes
        return "yes"
    said = value.lower() if isinstance(value, str) else value
    if said in STRICT_HOST_KEY_CHECKING:
        return str(said)
    if value is False or said in ("no", "off"):
        raise Problem(path, f"not supported: {value!r} (any host key accepted: another machine could pose as the "
                            f"host); use accept-new to record an unknown host's key on first use")
    raise Problem(path, f"expected one of {', '.join(STRICT_HOST_KEY_CHECKING)}, got {shown_value(value)}")

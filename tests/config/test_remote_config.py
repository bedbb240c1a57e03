"""NNI's remote training service (``platform: remote``) and a list of training services
(hybrid) in a config: read as NNI reads them (v2 and v1 forms), checked with file:line errors,
resolved into typed settings (they run: tests/training/remote/, tests/training/test_hybrid.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.config import (ConfigError, ExperimentConfig, LocalConfig, RemoteConfig, ResolvedConfig,
                           ResolvedLocalConfig, ResolvedRemoteConfig, ResolvedRemoteMachine)
from tests.helpers.config import assert_error, load_error, write

EXAMPLES = Path(__file__).resolve().parents[1] / "nni_examples" / "configs" / "trials"

REMOTE = """\
searchSpace:
  lr: {_type: loguniform, _value: [0.0001, 0.1]}
trialCommand: python3 trial.py
trialConcurrency: 2
tuner:
  name: TPE
trainingService:
  platform: remote
  machineList:
    - host: gpu1.example.org
      user: me
      sshKeyFile: ~/.ssh/id_ed25519
    - host: gpu2.example.org
      port: 2222
      password: 'secret'
      gpuIndices: 0,1
      maxTrialNumberPerGpu: 2
      useActiveGpu: true
      pythonPath: /opt/py/bin
"""
"""A remote config, 19 lines: a host with a key file (line 10), a host with a password (13)."""

HYBRID = """\
searchSpace:
  lr: {_type: loguniform, _value: [0.0001, 0.1]}
trialCommand: python3 trial.py
trialConcurrency: 2
tuner:
  name: TPE
trainingService:
  - platform: local
    useActiveGpu: true
  - platform: remote
    reuseMode: true
    machineList:
      - host: gpu1.example.org
        user: me
"""
"""NNI's hybrid form, 14 lines: local (line 8), remote (line 10) with one host (13)."""

V1_REMOTE = """\
authorName: default
experimentName: example_mnist
trialConcurrency: 2
maxTrialNum: 10
trainingServicePlatform: remote
searchSpacePath: search_space.json
tuner:
  builtinTunerName: TPE
trial:
  command: python3 mnist.py
  codeDir: .
  gpuNum: 0
remoteConfig:
  reuse: true
machineList:
  - ip: 10.1.1.1
    port: 2222
    username: me
    sshKeyPath: ~/.ssh/id_ed25519
    passphrase: words
    gpuIndices: "1"
    maxTrialNumPerGpu: 2
    useActiveGpu: true
    pythonPath: /opt/py/bin
  - ip: 10.1.1.2
    username: you
    passwd: secret
"""
"""NNI's v1 remote form, 27 lines: machineList at line 15, its first host at 16."""

SPACE = '{"lr": {"_type": "uniform", "_value": [0.1, 1]}}'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with an SSH key, ``~/.ssh/id_ed25519`` (``~`` is $HOME)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("a private key\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    return home


def load(path: Path, text: str) -> ResolvedConfig:
    write(path.parent / "search_space.json", SPACE)
    return ResolvedConfig.from_config(ExperimentConfig.load(write(path, text)))


def remote_of(resolved: ResolvedConfig) -> ResolvedRemoteConfig:
    assert isinstance(resolved.training_service, ResolvedRemoteConfig)
    return resolved.training_service


# -- the v2 form ---------------------------------------------------------------------------------

def test_remote_machines_are_read_with_nnis_fields_and_defaults(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", REMOTE)
    remote = remote_of(resolved)
    assert resolved.platform == "remote" and resolved.training_services == (remote,)
    assert remote.machines == (
        ResolvedRemoteMachine(host="gpu1.example.org", port=22, user="me", ssh_key_file=home / ".ssh" / "id_ed25519"),
        ResolvedRemoteMachine(host="gpu2.example.org", port=2222, password="secret", gpu_indices=(0, 1),
                              max_trial_number_per_gpu=2, use_active_gpu=True, python_path="/opt/py/bin"))
    assert (remote.strict_host_key_checking, remote.reuse_mode) == ("yes", False)
    assert "secret" not in repr(remote), "a password stays out of logs and tracebacks"


def test_gpu_indices_are_read_as_an_int_a_list_or_a_string(tmp_path: Path, home: Path) -> None:
    for written, read in (("3", (3,)), ("[2, 0]", (2, 0)), ('"1,2"', (1, 2))):
        resolved = load(tmp_path / "config.yml", REMOTE.replace("gpuIndices: 0,1", f"gpuIndices: {written}"))
        assert remote_of(resolved).machines[1].gpu_indices == read


def test_user_and_credentials_left_out_are_the_ssh_configs(tmp_path: Path, home: Path) -> None:
    """No user: the SSH config's User or the current user; neither key nor password: the agent,
    the SSH config's IdentityFile, the default keys (docs/config.md)."""
    text = REMOTE.replace("      user: me\n", "").replace("      sshKeyFile: ~/.ssh/id_ed25519\n", "")
    machine = remote_of(load(tmp_path / "config.yml", text)).machines[0]
    assert (machine.user, machine.ssh_key_file, machine.password) == (None, None, None)


def test_a_password_is_used_and_a_key_file_beside_it_is_not_as_nni_does(tmp_path: Path, home: Path) -> None:
    text = REMOTE.replace("      password: 'secret'\n", "      password: 'secret'\n      sshKeyFile: ~/.ssh/gone\n")
    resolved = load(tmp_path / "config.yml", text)
    machine = remote_of(resolved).machines[1]
    assert (machine.password, machine.ssh_key_file) == ("secret", None)
    assert any("machineList[1] (gpu2.example.org): a password is given, so sshKeyFile is not used" in note
               for note in resolved.notes), resolved.notes
    assert any("password of trainingService.machineList[1]" in note for note in resolved.notes), resolved.notes


def test_a_relative_key_file_is_relative_to_the_config_file(tmp_path: Path, home: Path) -> None:
    write(tmp_path / "keys" / "lab", "a private key\n")
    resolved = load(tmp_path / "config.yml", REMOTE.replace("~/.ssh/id_ed25519", "keys/lab"))
    assert remote_of(resolved).machines[0].ssh_key_file == tmp_path / "keys" / "lab"


def test_reuse_mode_is_accepted_and_kept(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", REMOTE.replace("  machineList:", "  reuseMode: true\n  machineList:"))
    assert remote_of(resolved).reuse_mode is True


def test_strict_host_key_checking_is_the_services_unless_a_machine_says(tmp_path: Path, home: Path) -> None:
    assert [m.strict_host_key_checking for m in remote_of(load(tmp_path / "c.yml", REMOTE)).machines] == ["yes", "yes"]
    text = REMOTE.replace("  machineList:", "  strictHostKeyChecking: accept-new\n  machineList:").replace(
        "      port: 2222", "      port: 2222\n      strictHostKeyChecking: yes")
    remote = remote_of(load(tmp_path / "config.yml", text))
    assert remote.strict_host_key_checking == "accept-new"
    assert [m.strict_host_key_checking for m in remote.machines] == ["accept-new", "yes"]


def test_the_canonical_config_reads_back_to_the_same_settings(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", REMOTE.replace("  machineList:", "  reuseMode: true\n  machineList:"))
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(resolved.to_dict()))
    assert again.training_services == resolved.training_services
    assert resolved.with_update("trialConcurrency", 3).training_services == resolved.training_services


def test_python_configs_take_remote_sections_as_nni_does(tmp_path: Path, home: Path) -> None:
    config = ExperimentConfig("remote")
    assert isinstance(config.training_service, RemoteConfig)
    assert [type(s) for s in ExperimentConfig(["local", "remote"]).training_service] == [LocalConfig, RemoteConfig]
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="true",
                              trial_code_directory=tmp_path, trial_concurrency=1, tuner={"name": "Random"},
                              training_service=RemoteConfig(machine_list=[{"host": "gpu1", "ssh_key_file": "~/nope"}]))
    with pytest.raises(ConfigError) as refused:
        config.canonical()
    assert str(refused.value) == (f"ExperimentConfig.training_service.machine_list[0].ssh_key_file: key file not "
                                  f"found: {home / 'nope'}")


# -- errors, with file:line -------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, line, field, fragment", [
    ("    - host: gpu1.example.org\n", "    - port: 23\n", 10, "trainingService.machineList[0].host",
     "required: the SSH host's name or address"),
    ("host: gpu1.example.org", "host: ''", 10, "trainingService.machineList[0].host", "expected a host name"),
    ("host: gpu1.example.org", "host: -oProxyCommand=x", 10, "trainingService.machineList[0].host",
     "cannot start with '-' (ssh would read it as an option)"),
    ("port: 2222", "port: 0", 14, "trainingService.machineList[1].port", "expected a port number from 1 to 65535"),
    ("port: 2222", "port: 65536", 14, "trainingService.machineList[1].port", "from 1 to 65535, got 65536"),
    ("port: 2222", "port: '22'", 14, "trainingService.machineList[1].port", "from 1 to 65535, got '22'"),
    ("user: me", "user: 7", 11, "trainingService.machineList[0].user", "expected a user name, got 7"),
    ("password: 'secret'", "password: 12345", 15, "trainingService.machineList[1].password",
     "expected a string; quote it (e.g. '12345'), got int 12345"),
    ("sshKeyFile: ~/.ssh/id_ed25519", "sshKeyFile: ~/.ssh/id_gone", 12, "trainingService.machineList[0].sshKeyFile",
     "key file not found: {home}/.ssh/id_gone"),
    ("sshKeyFile: ~/.ssh/id_ed25519", "sshKeyFile: ~/.ssh", 12, "trainingService.machineList[0].sshKeyFile",
     "not a key file: {home}/.ssh"),
    ("gpuIndices: 0,1", "gpuIndices: 0,a", 16, "trainingService.machineList[1].gpuIndices",
     "expected GPU indices as a list of integers >= 0"),
    ("gpuIndices: 0,1", "gpuIndices: [0, -1]", 16, "trainingService.machineList[1].gpuIndices[1]",
     "expected GPU indices"),
    ("maxTrialNumberPerGpu: 2", "maxTrialNumberPerGpu: 0", 17, "trainingService.machineList[1].maxTrialNumberPerGpu",
     "expected a positive integer"),
    ("useActiveGpu: true", "useActiveGpu: maybe", 18, "trainingService.machineList[1].useActiveGpu",
     "expected true or false"),
    ("      pythonPath: /opt/py/bin", "      hostname: gpu3", 19, "trainingService.machineList[1].hostname",
     "unknown key; did you mean 'host'?"),
    ("  machineList:", "  strictHostKeyChecking: no\n  machineList:", 9, "trainingService.strictHostKeyChecking",
     "not supported: 'no' (any host key accepted"),
    ("  machineList:", "  strictHostKeyChecking: ask\n  machineList:", 9, "trainingService.strictHostKeyChecking",
     "expected one of yes, accept-new, got 'ask'"),
    ("      port: 2222", "      port: 2222\n      strictHostKeyChecking: off", 15,
     "trainingService.machineList[1].strictHostKeyChecking", "not supported: 'off'"),
    ("  machineList:", "  reuseMode: often\n  machineList:", 9, "trainingService.reuseMode", "expected true or false"),
    ("  platform: remote\n", "  platform: remote\n  machineLists: []\n", 9, "trainingService.machineLists",
     "unknown key; did you mean 'machineList'?"),
])
def test_bad_remote_fields_are_errors_at_their_line(tmp_path: Path, home: Path, old: str, new: str, line: int,
                                                    field: str, fragment: str) -> None:
    path = tmp_path / "config.yml"
    assert REMOTE.count(old) == 1, old
    assert_error(load_error(path, REMOTE.replace(old, new)), path, line, field, fragment.format(home=home))


def test_a_remote_service_needs_a_machine_list(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "config.yml"
    without = REMOTE[:REMOTE.index("  machineList:")]
    assert_error(load_error(path, without), path, 7, "trainingService.machineList",
                 "required: at least one SSH host")
    assert_error(load_error(path, without + "  machineList: []\n"), path, 9, "trainingService.machineList",
                 "required: at least one SSH host")
    assert_error(load_error(path, without + "  machineList: gpu1\n"), path, 9, "trainingService.machineList",
                 "expected a list of SSH hosts")
    assert_error(load_error(path, without + "  machineList: [gpu1]\n"), path, 9, "trainingService.machineList[0]",
                 "expected an SSH host such as {host: gpu1.example.org, user: me}, got 'gpu1'")


# -- hybrid: a list of training services -------------------------------------------------------------

def test_a_list_of_training_services_is_resolved_into_each_in_order(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", HYBRID)
    local, remote = resolved.training_services
    assert local == ResolvedLocalConfig(use_active_gpu=True)
    assert isinstance(remote, ResolvedRemoteConfig) and remote.reuse_mode is True
    assert remote.machines == (ResolvedRemoteMachine(host="gpu1.example.org", user="me"),)
    assert resolved.training_service is local, "the first one, for readers of one service"
    assert resolved.platform == "local+remote"
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(resolved.to_dict()))
    assert again.training_services == resolved.training_services


def test_a_list_of_one_training_service_is_that_service(tmp_path: Path, home: Path) -> None:
    text = HYBRID.replace("  - platform: local\n    useActiveGpu: true\n", "")
    resolved = load(tmp_path / "config.yml", text)
    assert resolved.platform == "remote" and len(resolved.training_services) == 1


@pytest.mark.parametrize("old, new, line, field, fragment", [
    ("        user: me", "        port: 0", 14, "trainingService[1].machineList[0].port", "from 1 to 65535"),
    ("    useActiveGpu: true", "    useActiveGpu: 1", 9, "trainingService[0].useActiveGpu", "expected true or false"),
    ("  - platform: local\n    useActiveGpu: true", "  - platform: ray", 8, "trainingService[0].platform",
     "not supported: ray in a list of training services (hybrid)"),
    ("  - platform: local\n    useActiveGpu: true", "  - platform: remote\n    machineList: [{host: a}]", 10,
     "trainingService[1].platform", "platform remote is given twice in the list (at 0 and 1)"),
    ("  - platform: local", "  - platform: aml", 8, "trainingService[0].platform",
     "not supported: aml (NNI's aml training service)"),
    ("  - platform: local\n    useActiveGpu: true", "  - local", 8, "trainingService[0]",
     "expected a mapping such as {platform: local}"),
])
def test_bad_services_of_a_list_are_errors_at_their_line(tmp_path: Path, home: Path, old: str, new: str, line: int,
                                                         field: str, fragment: str) -> None:
    path = tmp_path / "config.yml"
    assert HYBRID.count(old) == 1, old
    assert_error(load_error(path, HYBRID.replace(old, new)), path, line, field, fragment)


def test_an_empty_list_of_training_services_is_an_error(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "config.yml"
    assert_error(load_error(path, HYBRID[:HYBRID.index("  - platform: local")].replace(
        "trainingService:\n", "trainingService: []\n")), path, 7, "trainingService", "got an empty list")


# -- NNI's v1 form -------------------------------------------------------------------------------

def test_v1_remote_is_converted_as_nnis_converter_does(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", V1_REMOTE)
    remote = remote_of(resolved)
    assert remote.reuse_mode is True
    assert remote.machines == (
        ResolvedRemoteMachine(host="10.1.1.1", port=2222, user="me", ssh_key_file=home / ".ssh" / "id_ed25519",
                              ssh_passphrase="words", gpu_indices=(1,), max_trial_number_per_gpu=2,
                              use_active_gpu=True, python_path="/opt/py/bin"),
        ResolvedRemoteMachine(host="10.1.1.2", user="you", password="secret"))
    assert remote.machines[0].ssh_passphrase == "words", "v1's passphrase is v2's sshPassphrase"


@pytest.mark.parametrize("old, new, line, field, fragment", [
    ("    port: 2222", "    port: 99999", 17, "machineList[0].port", "from 1 to 65535"),
    ("  - ip: 10.1.1.2\n", "  - ipaddress: 10.1.1.2\n", 25, "machineList[1].ipaddress",
     "unknown key in an NNI v1 machineList entry; known keys: ip, port, username"),
    ("  - ip: 10.1.1.2\n", "  - port: 22\n", 25, "machineList[1].host", "required: the SSH host's name"),
    ("sshKeyPath: ~/.ssh/id_ed25519", "sshKeyPath: ~/.ssh/none", 19, "machineList[0].sshKeyPath",
     "key file not found: {home}/.ssh/none"),
    ('gpuIndices: "1"', "gpuIndices: one", 21, "machineList[0].gpuIndices", "expected GPU indices"),
    ("  reuse: true", "  reuse: 2", 14, "remoteConfig.reuse", "expected true or false"),
    ("  reuse: true", "  reused: true", 14, "remoteConfig.reused", "unknown key in an NNI v1 remoteConfig"),
])
def test_bad_v1_remote_fields_are_errors_at_their_v1_line(tmp_path: Path, home: Path, old: str, new: str,
                                                          line: int, field: str, fragment: str) -> None:
    path = tmp_path / "config.yml"
    write(tmp_path / "search_space.json", SPACE)
    assert V1_REMOTE.count(old) == 1, old
    assert_error(load_error(path, V1_REMOTE.replace(old, new)), path, line, field, fragment.format(home=home))


def test_v1_remote_needs_its_machine_list(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "config.yml"
    write(tmp_path / "search_space.json", SPACE)
    assert_error(load_error(path, V1_REMOTE[:V1_REMOTE.index("machineList:")]), path, 5, "trainingServicePlatform",
                 "needs machineList")


V1_HYBRID = V1_REMOTE.replace("trainingServicePlatform: remote", "trainingServicePlatform: hybrid") + """\
hybridConfig:
  trainingServicePlatforms:
    - local
    - remote
localConfig:
  useActiveGpu: true
"""
"""NNI 2's v1 hybrid (NNI 3.0's converter refuses it): hybridConfig at line 28, its platforms at
30-31, localConfig at 32."""


def test_v1_hybrid_is_converted_into_a_list_of_services(tmp_path: Path, home: Path) -> None:
    resolved = load(tmp_path / "config.yml", V1_HYBRID)
    local, remote = resolved.training_services
    assert local == ResolvedLocalConfig(use_active_gpu=True)
    assert isinstance(remote, ResolvedRemoteConfig) and [m.host for m in remote.machines] == ["10.1.1.1", "10.1.1.2"]
    assert resolved.platform == "local+remote"


def test_bad_v1_hybrids_are_errors_at_their_line(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "config.yml"
    write(tmp_path / "search_space.json", SPACE)
    assert_error(load_error(path, V1_HYBRID.replace("    - remote", "    - pai")), path, 31,
                 "hybridConfig.trainingServicePlatforms[1]", "not supported: pai")
    assert_error(load_error(path, V1_HYBRID.replace("    - remote", "    - local")), path, 31,
                 "hybridConfig.trainingServicePlatforms[1]", "platform local is given twice")
    assert_error(load_error(path, V1_HYBRID[:V1_HYBRID.index("hybridConfig:")]), path, 5, "trainingServicePlatform",
                 "needs hybridConfig")
    # the second service's machine, at its v1 key
    assert_error(load_error(path, V1_HYBRID.replace("    port: 2222", "    port: -1")), path, 17,
                 "machineList[0].port", "from 1 to 65535")
    assert_error(load_error(path, V1_HYBRID.replace("  useActiveGpu: true\n", "  useActiveGpu: 3\n")), path, 33,
                 "localConfig.useActiveGpu", "expected true or false")


# -- NNI's published examples ----------------------------------------------------------------------

def test_nnis_published_remote_example_loads_with_its_number_password_quoted(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/trials/mnist-pytorch/config_remote.yml as published (tests/nni_examples/README.md),
    its hosts as published; ``password: 12345`` is a YAML number, refused (NNI's type check refuses
    it too, tests/config/test_nni_examples.py); quoted, the file loads."""
    home = tmp_path / "home"
    write(home / ".ssh" / "id_rsa", "a private key\n")
    monkeypatch.setenv("HOME", str(home))
    published = (EXAMPLES / "mnist-pytorch" / "config_remote.yml").read_text(encoding="utf-8")
    assert published.count("password: 12345") == 1
    copy = tmp_path / "mnist-pytorch" / "config_remote.yml"
    write(copy, published.replace("password: 12345", "password: '12345'"))
    write(copy.parent / "search_space.json", (EXAMPLES / "mnist-pytorch" / "search_space.json").read_text("utf-8"))
    remote = remote_of(ResolvedConfig.from_config(ExperimentConfig.load(copy)))
    assert remote.machines == (
        ResolvedRemoteMachine(host="${your server's IP or domain name}", user="${your user name}",
                              ssh_key_file=home / ".ssh" / "id_rsa"),
        ResolvedRemoteMachine(host="123.123.123.123", port=10022, user="nniuser", password="12345",
                              python_path="/usr/bin"))


def test_nnis_published_hybrid_examples_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/trials/mnist-tfv1/config_hybrid_v2.yml (v2) and config_hybrid.yml (NNI 2's v1), as
    published; mnist-pytorch's and mnist-tfv2's config_hybrid.yml add NNI's aml, refused at its
    line (tests/config/test_nni_examples.py)."""
    monkeypatch.chdir(tmp_path)
    for name in ("config_hybrid_v2.yml", "config_hybrid.yml"):
        resolved = ResolvedConfig.from_config(ExperimentConfig.load(EXAMPLES / "mnist-tfv1" / name))
        assert resolved.platform == "local+remote", name
        remote = resolved.training_services[1]
        assert isinstance(remote, ResolvedRemoteConfig) and remote.reuse_mode is True, name
        assert remote.machines == (ResolvedRemoteMachine(host="10.1.1.1", user="xxx", password="xxx"),), name

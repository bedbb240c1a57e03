"""Warm trial starts (issue 27) of the local service: a trial forked from the template sees
what a trial started cold sees, field by field (the same probe run both ways); each warm
trial is fresh (random state, module globals); the trial's own code is never preloaded;
anything unsafe starts cold with one log line. Real services, real processes."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from expmgr.training.local import LocalTrainingService
from tests.helpers.cli_create import BASE, start_create
from tests.helpers.common import wait_until
from tests.helpers.contract_service import Context, run_service

PROBE = """\
import io, json, os, signal, sys
fields = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "executable": sys.executable, "path": sys.path,
    "cwd": os.getcwd(), "name": __name__, "file": globals().get("__file__"),
    "main_globals": sorted(name for name in globals() if name not in ("io", "json", "os", "signal", "sys",
                                                                       "fields")),
    "loader": type(globals().get("__loader__")).__name__, "spec": [getattr(globals().get("__spec__"), name, None) for name in ("name", "origin", "parent")],
    "env": dict(os.environ),
    "signals": {str(int(n)): repr(signal.getsignal(n)) for n in signal.valid_signals()
                if n not in (signal.SIGKILL, signal.SIGSTOP)},
    "blocked": sorted(map(int, signal.pthread_sigmask(signal.SIG_BLOCK, []))),
    "own_session": os.getsid(0) == os.getpid() == os.getpgid(0),
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")) [:3],
    "streams": [[type(s).__name__, type(s.buffer).__name__, s.encoding, s.errors, s.line_buffering,
                 s.write_through, s.fileno()] for s in (sys.stdin, sys.stdout, sys.stderr)],
    "originals": [sys.__stdout__ is sys.stdout, sys.__stderr__ is sys.stderr],
    "trial_module_loaded": "helper" in sys.modules,
    "ppid": os.getppid(),
}
print(json.dumps(fields))
"""


def _probe(c: Context, trial_id: str) -> Any:
    return json.loads((c.paths.trial_dir(trial_id) / "stdout").read_text())


async def _run(c: Context, trial_id: str, command: str) -> tuple[Any, ...]:
    await c.service.launch(c.launch_of(trial_id, command))
    return await c.until(lambda: c.events.exit_of(trial_id), f"trial {trial_id}'s end")


def _template_pids(c: Context) -> list[int]:
    assert isinstance(c.service, LocalTrainingService)
    warm = c.service._warm
    return [] if warm is None else warm.template_pids()


def _normalized(value: Any, root: Path, session_of: str) -> Any:
    """The probe's fields with what differs between any two experiments (their folder, the
    service's random session) written the same way."""
    text = json.dumps(value).replace(str(root), "<root>").replace(session_of, "<session>")
    return json.loads(text)


def _session_of(env: dict[str, str]) -> str:
    return env["EXPMGR_TRIAL_MARKER"].split("/")[0]


def _probe_both_ways(tmp_path: Path, command: str, code: dict[str, str],
                     warm_setting: Any = "auto") -> tuple[dict, dict, list[int]]:
    """The probe's fields of a cold trial and of a warm one (the second trial of a warm
    service: the first one's start made the template), and the template's pid."""
    results: dict[str, Any] = {}
    templates: list[int] = []

    def way(name: str, warm: str) -> None:
        root = tmp_path / name
        root.mkdir()

        async def test(c: Context) -> None:
            for file, text in code.items():
                c.write_code(file, text)
            for trial in ("first", "probe"):
                assert await _run(c, trial, command) == ("exited", trial, 1, 0, None), \
                    (c.paths.trial_dir(trial) / "stderr").read_text()
            fields = _probe(c, "probe")
            templates.extend(_template_pids(c))
            ppid = fields.pop("ppid")
            results[name] = _normalized(fields, root, _session_of(fields["env"]))
            results[name]["parent"] = "manager" if ppid == os.getpid() else "template" if ppid in templates else ppid

        run_service("local", root, test, training_service={"platform": "local", "trialWarmStart": warm})

    way("cold", "off")
    way("warm", warm_setting)
    return results["cold"], results["warm"], templates


@pytest.mark.parametrize("command", ["python3 probe.py --lr 0.1 two", "python3 -m probe x"])
def test_a_warm_trial_sees_exactly_what_a_cold_one_sees(tmp_path: Path, command: str):
    cold, warm, templates = _probe_both_ways(tmp_path, command, {"probe.py": PROBE})
    assert (cold.pop("parent"), warm.pop("parent")) == ("manager", "template"), "started cold, forked warm"
    for field in cold:
        assert warm[field] == cold[field], f"{field} differs: cold {cold[field]!r}, warm {warm[field]!r}"
    assert warm.keys() == cold.keys()


RUDE_LIBRARY = """\
import signal, threading
signal.signal(signal.SIGTERM, lambda *_: None)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
"""


def test_signal_dispositions_and_mask_a_preload_changed_are_a_cold_starts_in_the_trial(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    library = tmp_path / "library"
    library.mkdir()
    (library / "rude_library.py").write_text(RUDE_LIBRARY)
    monkeypatch.setenv("PYTHONPATH", str(library))
    cold, warm, templates = _probe_both_ways(tmp_path, "python3 probe.py", {"probe.py": PROBE}, ["rude_library"])
    assert (cold.pop("parent"), warm.pop("parent")) == ("manager", "template")
    for field in ("signals", "blocked"):
        assert warm[field] == cold[field], f"{field} differs: cold {cold[field]!r}, warm {warm[field]!r}"


EXIT_PATHS = {
    "exit3.py": "import sys\nprint('before')\nsys.exit(3)\n",
    "raises.py": "def deep():\n    raise ValueError('boom')\n\nprint('out', end='')\ndeep()\n",
    "message.py": "raise SystemExit('bad things happened')\n",
    "interrupted.py": "raise KeyboardInterrupt\n",
    "terminated.py": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "finishing.py": ("import atexit, sys, threading\n"
                     "atexit.register(lambda: print('atexit ran'))\n"
                     "go = threading.Event()\n"
                     "threading.Thread(target=lambda: (go.wait(), print('thread joined'))).start()\n"
                     "sys.stdout.write('no newline; ')\ngo.set()\n"),
    "excepthook.py": ("import sys\nsys.excepthook = lambda *info: print('own hook:', info[1], file=sys.stderr)\n"
                      "raise RuntimeError('handled by the hook')\n"),
}
EXIT_COMMANDS = [f"python3 {name}" for name in EXIT_PATHS] + ["python3 missing.py", "python3 -m missing_module"]


def _ends(tmp_path: Path, name: str, warm: str, commands: list[str],
          env: dict[str, str] | None = None) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Each command's (exit code, signal, stdout, stderr) in a service with ``trialWarmStart: warm``."""
    root = tmp_path / name
    root.mkdir()
    ends: list[tuple[Any, ...]] = []
    templates: list[int] = []

    async def test(c: Context) -> None:
        for file, text in EXIT_PATHS.items():
            c.write_code(file, text)
        for index, command in enumerate(commands):
            launch = c.launch_of(f"t{index}", command)
            launch.env.update(env or {})
            await c.service.launch(launch)
            end = await c.until(lambda: c.events.exit_of(f"t{index}"), f"the end of {command}")
            folder = c.paths.trial_dir(f"t{index}")
            ends.append((command, *end[3:], (folder / "stdout").read_text(),
                         (folder / "stderr").read_text().replace(str(root), "<root>")))
        templates.extend(_template_pids(c))

    run_service("local", root, test, training_service={"platform": "local", "trialWarmStart": warm})
    return ends, templates


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_warm_trial_ends_as_a_cold_one_exit_codes_signals_tracebacks_atexit_threads_output(
        tmp_path: Path, unbuffered: str):
    env = {"PYTHONUNBUFFERED": unbuffered}
    cold, _ = _ends(tmp_path, "cold", "off", EXIT_COMMANDS, env)
    warm, templates = _ends(tmp_path, "warm", "auto", EXIT_COMMANDS, env)
    assert len(templates) == 1
    for cold_end, warm_end in zip(cold, warm):
        assert warm_end == cold_end
    assert [end[1:3] for end in cold] == [(3, None), (1, None), (1, None), (None, signal.SIGINT),
                                          (None, signal.SIGTERM), (0, None), (1, None), (2, None), (1, None)]
    assert cold[5][3] == "no newline; thread joined\natexit ran\n"


def _warm_outputs(tmp_path: Path, warm: Any, code: dict[str, str], command: str, count: int,
                  extra: dict[str, Any] | None = None) -> tuple[list[str], list[str], list[int]]:
    """The stdout of ``count`` trials of ``command`` in a service with ``trialWarmStart: warm``,
    the lines the service logged, and its template pids."""
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("nni")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    outputs: list[str] = []
    templates: list[int] = []

    async def test(c: Context) -> None:
        for file, text in code.items():
            c.write_code(file, text)
        for index in range(count):
            assert await _run(c, f"t{index}", command) == ("exited", f"t{index}", 1, 0, None), \
                (c.paths.trial_dir(f"t{index}") / "stderr").read_text()
            outputs.append((c.paths.trial_dir(f"t{index}") / "stdout").read_text())
        templates.extend(_template_pids(c))

    try:
        run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": warm},
                    **(extra or {}))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return outputs, [line for line in records if "warm start" in line], templates


PPID = "import os\nprint(os.getppid())\n"


def test_the_template_is_started_with_the_service_and_the_first_trial_is_forked_from_it(tmp_path: Path):
    async def test(c: Context) -> None:
        templates = await c.until(lambda: _template_pids(c), "the template, before any trial is launched")
        c.write_code("ppid.py", PPID)
        assert await _run(c, "t0", "python3 ppid.py") == ("exited", "t0", 1, 0, None)
        assert int((c.paths.trial_dir("t0") / "stdout").read_text()) == templates[0]
        assert _template_pids(c) == templates

    run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": ["json"]},
                trial_command="python3 ppid.py")


def test_unseeded_random_and_numpy_draws_differ_between_warm_trials(tmp_path: Path):
    pytest.importorskip("numpy")
    draw = PPID + "import random, numpy\nprint(random.random(), numpy.random.random(), numpy.random.randint(1 << 30))\n"
    # numpy.random is imported lazily: listed, its global generator is the template's.
    outputs, logged, templates = _warm_outputs(tmp_path, ["numpy.random"], {"draw.py": draw}, "python3 draw.py", 3)
    assert logged == [] and len(templates) == 1
    assert all(int(output.split()[0]) in templates for output in outputs), "each trial forked by the template"
    draws = [output.split()[1:] for output in outputs]
    for column in range(3):
        assert len({each[column] for each in draws}) == 3, f"draw {column} repeats across trials: {draws}"


def test_unseeded_torch_draws_differ_between_warm_trials_as_between_cold_ones(tmp_path: Path):
    pytest.importorskip("torch")
    draw = PPID + ("import torch\n"
                   "print(torch.initial_seed(), torch.rand(1).item(), torch.randint(1 << 30, (1,)).item())\n")
    outputs, logged, templates = _warm_outputs(tmp_path, ["torch"], {"draw.py": draw}, "python3 draw.py", 3)
    assert logged == [] and len(templates) == 1
    assert all(int(output.split()[0]) in templates for output in outputs), "each trial forked by the template"
    draws = [output.split()[1:] for output in outputs]
    for column in range(3):
        assert len({each[column] for each in draws}) == 3, f"draw {column} repeats across trials: {draws}"


def test_a_preloaded_modules_global_changed_by_one_trial_is_fresh_in_the_next(tmp_path: Path):
    touch = PPID + ("import json\nprint(getattr(json, 'touched_by', None))\njson.touched_by = os.getpid()\n"
                    "COUNT = globals().get('COUNT', 0) + 1\nprint(COUNT)\n")
    outputs, logged, templates = _warm_outputs(tmp_path, ["json"], {"touch.py": touch}, "python3 touch.py", 3)
    assert logged == [] and len(templates) == 1
    assert [output.split()[1:] for output in outputs] == [["None", "1"]] * 3
    assert all(int(output.split()[0]) in templates for output in outputs)


HELPER = ("import os\nopen(os.path.join(os.path.dirname(os.path.abspath(__file__)), f'helper-imported-by-{os.getpid()}'), "
          "'w').close()\nVALUE = 'from the code directory'\n")
USES_HELPER = PPID + "import sys\nprint('helper' in sys.modules)\nimport helper\nprint(helper.VALUE)\n"


def test_the_trials_own_module_is_never_preloaded(tmp_path: Path):
    outputs, logged, templates = _warm_outputs(tmp_path, "auto", {"helper.py": HELPER, "uses.py": USES_HELPER},
                                               "python3 uses.py", 3)
    assert logged == [] and len(templates) == 1
    parents = [int(output.split()[0]) for output in outputs]
    assert parents[1:] == templates * 2, "the trials after the first are forked"
    assert [output.split("\n")[1:3] for output in outputs] == [["False", "from the code directory"]] * 3
    importers = {int(path.name.rsplit("-", 1)[1]) for path in (tmp_path / "code").glob("helper-imported-by-*")}
    assert len(importers) == 3 and not importers & set(templates), "each trial imported its own module itself"


def test_a_listed_module_of_the_trials_code_is_not_preloaded_and_trials_start_cold(tmp_path: Path):
    outputs, logged, templates = _warm_outputs(tmp_path, ["helper"], {"helper.py": HELPER, "uses.py": USES_HELPER},
                                               "python3 uses.py", 2)
    assert templates == [] and len(logged) == 1 and "helper" in logged[0], logged
    assert [int(output.split()[0]) for output in outputs] == [os.getpid()] * 2, "started cold"
    importers = {int(path.name.rsplit("-", 1)[1]) for path in (tmp_path / "code").glob("helper-imported-by-*")}
    assert len(importers) == 2, "only the trials imported it"


def test_a_failing_preload_starts_trials_cold_with_one_log_line(tmp_path: Path):
    outputs, logged, templates = _warm_outputs(tmp_path, ["json", "no_such_module_for_expmgr"],
                                               {"ppid.py": PPID}, "python3 ppid.py", 3)
    assert templates == []
    assert len(logged) == 1 and "no_such_module_for_expmgr" in logged[0] and "cold" in logged[0], logged
    assert [int(output) for output in outputs] == [os.getpid()] * 3


def test_a_template_with_a_running_thread_starts_trials_cold_with_one_log_line(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    library = tmp_path / "library"
    library.mkdir()
    (library / "threaded_library.py").write_text(
        "import threading\nthreading.Thread(target=threading.Event().wait, name='background-pool', daemon=True)"
        ".start()\n")
    monkeypatch.setenv("PYTHONPATH", str(library))
    outputs, logged, templates = _warm_outputs(tmp_path, ["threaded_library"], {"ppid.py": PPID},
                                               "python3 ppid.py", 2)
    assert templates == []
    assert len(logged) == 1 and "background-pool" in logged[0], logged
    assert [int(output) for output in outputs] == [os.getpid()] * 2


@pytest.mark.parametrize("command", ["sh -c 'python3 ppid.py'", "python3 -u ppid.py", "python3 -c 'print(1)'",
                                     "env python3 ppid.py", "python3 ppid.py > out"])
def test_commands_other_than_python_script_or_module_start_cold(tmp_path: Path, command: str):
    outputs, logged, templates = _warm_outputs(tmp_path, "auto", {"ppid.py": PPID}, command, 1)
    assert templates == [] and logged == []


SLEEPER = ("import os, sys, time\n"
           "path = os.path.join(os.environ['PIDS_DIR'], os.environ['EXPMGR_TRIAL_SEQUENCE_ID'])\n"
           "open(path + '.tmp', 'w').write(f'{os.getpid()} {os.getppid()}')\nos.rename(path + '.tmp', path)\n"
           "time.sleep(300)\n")


def test_a_sigkilled_manager_leaves_no_warm_trial_and_no_template(tmp_path: Path):
    (tmp_path / "trial.py").write_text(SLEEPER)
    (tmp_path / "space.json").write_text('{"x": {"_type": "uniform", "_value": [0, 1]}}')
    (tmp_path / "config.yml").write_text(BASE.replace("trialConcurrency: 1", "trialConcurrency: 2")
                                         + "trainingService:\n  platform: local\n  trialWarmStart: auto\n")
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    process = start_create(tmp_path, tmp_path / "home", extra_env={"PIDS_DIR": str(pids_dir)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[int] = []
    try:
        def started() -> list[tuple[int, int]]:
            found = [tuple(map(int, path.read_text().split())) for path in pids_dir.iterdir()
                     if not path.name.endswith(".tmp")]
            return found if len(found) == 2 else []
        trials = wait_until(started, timeout=60, what="two trials running")
        seen = [pid for trial in trials for pid in trial]
        templates = {parent for _, parent in trials}
        assert len(templates) == 1 and process.pid not in templates, "both forked by one template"
        spares = wait_until(lambda: [child.pid for child in psutil.Process(*templates).children()
                                     if child.pid not in seen], timeout=30, what="the template's spare")
        seen += [*templates, *spares]
        assert all(_alive(pid) for pid in seen)
        process.kill()
        process.wait(timeout=30)
        wait_until(lambda: not any(_alive(pid) for pid in seen), timeout=15,
                   what="the warm trials and their template to end")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in seen:
            if _alive(pid):
                psutil.Process(pid).kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


FORKS_A_DAEMON = PPID + """\
import time
read, write = os.pipe()
if os.fork() == 0:  # a daemon that never executes another program: the trial's forked image
    os.setsid()
    if os.fork() == 0:
        os.write(write, str(os.getpid()).encode())
        time.sleep(300)
    os._exit(0)
os.wait()
print(os.read(read, 20).decode())
"""


def test_what_a_warm_trial_forked_without_exec_ends_with_the_trial(tmp_path: Path):
    """The watchdog finds a trial's processes by the marker in their original environment
    (``/proc/<pid>/environ``), which a fork from the template has from the template: each
    warm trial writes its own there, so its daemon ends with it, while the service runs."""
    daemons: list[int] = []

    async def test(c: Context) -> None:
        c.write_code("daemon.py", FORKS_A_DAEMON)
        for trial in ("first", "second"):
            assert await _run(c, trial, "python3 daemon.py") == ("exited", trial, 1, 0, None)
            parent, daemon = map(int, (c.paths.trial_dir(trial) / "stdout").read_text().split())
            daemons.append(daemon)
            assert parent in _template_pids(c), "forked by the template"
            await c.until(lambda: not _alive(daemon), "the daemon of the ended trial to be killed", timeout=15)

    try:
        run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": "auto"})
    finally:
        for pid in daemons:
            if _alive(pid):
                psutil.Process(pid).kill()


def test_a_killed_template_ends_its_running_trials_as_killed_and_the_next_trial_gets_a_new_one(tmp_path: Path):
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("nni").addHandler(handler)
    sleeper = "import os, time\nprint(os.getppid(), os.getpid())\ntime.sleep(300)\n"

    async def test(c: Context) -> None:
        c.write_code("sleeper.py", sleeper)
        c.write_code("ppid.py", PPID)
        await c.service.launch(c.launch_of("sleeping", "python3 sleeper.py"))
        stdout = c.paths.trial_dir("sleeping") / "stdout"
        await c.until(lambda: stdout.exists() and stdout.read_text().strip(), "the sleeper's first line")
        parent, trial_pid = map(int, stdout.read_text().split())
        [first_template] = _template_pids(c)
        assert parent == first_template
        os.kill(first_template, signal.SIGKILL)
        await c.until(lambda: c.events.exit_of("sleeping"), "the sleeper's end")
        assert c.events.exit_of("sleeping") == ("exited", "sleeping", 1, None, signal.SIGKILL)
        await c.until(lambda: not _alive(trial_pid), "the sleeper's process to be gone")
        assert await _run(c, "next", "python3 ppid.py") == ("exited", "next", 1, 0, None)
        first, second_template = _template_pids(c)
        assert first == first_template
        assert int((c.paths.trial_dir("next") / "stdout").read_text()) == second_template

    try:
        run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": "auto"})
    finally:
        logging.getLogger("nni").removeHandler(handler)
    assert len([line for line in records if "template" in line and "exited" in line]) == 1, records


LEARNER = PPID + """\
import sys
print([name in sys.modules for name in ("fractions", "xml.dom.minidom", "helper")])
import fractions, xml.dom.minidom, helper
"""


def test_auto_preloads_what_the_first_trial_imported_from_the_standard_library_never_its_own_module(
        tmp_path: Path):
    outputs, logged, templates = _warm_outputs(tmp_path, "auto", {"helper.py": HELPER, "learner.py": LEARNER},
                                               "python3 learner.py", 3)
    parents = [int(output.split("\n")[0]) for output in outputs]
    loaded = [output.split("\n")[1] for output in outputs]
    assert loaded == ["[False, False, False]", "[True, True, False]", "[True, True, False]"], \
        "the second and third trials start with the first one's standard-library modules, not its own"
    assert parents == [templates[0], templates[1], templates[1]], "then forked by a template that preloaded them"
    assert len(logged) == 1 and "preloaded" in logged[0] and "fractions" in " ".join(logged), logged
    importers = {int(path.name.rsplit("-", 1)[1]) for path in (tmp_path / "code").glob("helper-imported-by-*")}
    assert len(importers) == 3 and not importers & {parents[0], *templates}, "each trial imported its own module"


def test_a_learned_module_that_fails_in_the_template_is_left_out_and_trials_stay_warm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    library = tmp_path / "library"
    library.mkdir()
    # Imports in a trial, fails in a template: learned, then ignored there.
    (library / "fussy_library.py").write_text(
        "import os\nif 'EXPMGR_TRIAL_ID' not in os.environ:\n    raise ImportError('only in a trial')\n")
    monkeypatch.setenv("PYTHONPATH", str(library))
    trial = PPID + "import sys\nprint('fussy_library' in sys.modules)\nimport fussy_library\n"
    outputs, logged, templates = _warm_outputs(tmp_path, "auto", {"trial.py": trial}, "python3 trial.py", 3)
    assert [output.split() for output in outputs][1:] == [[str(templates[0]), "False"]] * 2
    assert not [line for line in logged if "cold" in line or "cannot" in line], logged


def _spares(template: int, trials: set[int]) -> list[int]:
    """The template's children that are no trial: its spare, forked for the next trial."""
    return [child.pid for child in psutil.Process(template).children() if child.pid not in trials]


def test_a_spare_killed_while_it_waits_is_replaced_and_the_next_trial_starts_warm(tmp_path: Path):
    """The template forks each trial's process before the trial is asked for (a spare); one
    that dies waiting is replaced when the next trial comes, and none outlives the service."""
    spares: list[int] = []
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("nni").addHandler(handler)

    async def test(c: Context) -> None:
        c.write_code("ppid.py", PPID)
        assert await _run(c, "first", "python3 ppid.py") == ("exited", "first", 1, 0, None)
        [template] = _template_pids(c)
        spare = await c.until(lambda: _spares(template, set()), "the template's spare")
        spares.extend(spare)
        os.kill(spare[0], signal.SIGKILL)
        await c.until(lambda: not _alive(spare[0]), "the killed spare to be reaped")
        assert await _run(c, "next", "python3 ppid.py") == ("exited", "next", 1, 0, None), \
            (c.paths.trial_dir("next") / "stderr").read_text()
        assert int((c.paths.trial_dir("next") / "stdout").read_text()) == template
        assert _template_pids(c) == [template], "the same template, still warm"
        spares.extend(await c.until(lambda: _spares(template, set()), "a new spare"))

    try:
        run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": "auto"})
    finally:
        logging.getLogger("nni").removeHandler(handler)
    assert len(spares) == 2 and not any(_alive(pid) for pid in spares), "no spare outlives the service"
    assert not [line for line in records if "cold" in line or "exited" in line], records


LOGS = """\
import os, sys
{before}
import expmgr
import logging
logging.getLogger("nni.trial_code").info("logged by %s", os.getpid())
print(os.getpid(), "logging" in sys.modules)
"""


@pytest.mark.parametrize("warm", ["auto", ["logging"]], ids=["auto", "logging-preloaded"])
@pytest.mark.parametrize("before", ["", "import logging"], ids=["expmgr-first", "logging-first"])
def test_a_warm_trials_nni_records_go_to_its_own_trial_log(tmp_path: Path, warm: Any, before: str):
    """expmgr's trial API is preloaded in the template; what its import does for a trial
    (``nni.*`` records to trial.log) is done in each warm trial, with its own folder."""
    logs: list[tuple[str, str]] = []

    async def test(c: Context) -> None:
        c.write_code("logs.py", LOGS.format(before=before))
        for trial in ("t0", "t1", "t2"):
            assert await _run(c, trial, "python3 logs.py") == ("exited", trial, 1, 0, None), \
                (c.paths.trial_dir(trial) / "stderr").read_text()
            folder = c.paths.trial_dir(trial)
            logs.append(((folder / "stdout").read_text().split()[0], (folder / "trial.log").read_text()))
        assert len(_template_pids(c)) >= 1

    run_service("local", tmp_path, test, training_service={"platform": "local", "trialWarmStart": warm})
    for pid, log in logs:
        assert log.count("logged by") == 1 and f"logged by {pid}" in log, logs


def test_a_preloaded_module_with_a_relative_file_name_does_not_make_trials_start_cold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """torch.ops says its ``__file__`` is "_ops.py": no place, so not the trial's code directory
    (the template's working directory), where a relative path would resolve."""
    library = tmp_path / "library"
    library.mkdir()
    (library / "relative_library.py").write_text('__file__ = "_ops.py"\n')
    monkeypatch.setenv("PYTHONPATH", str(library))
    outputs, logged, templates = _warm_outputs(tmp_path, ["relative_library"], {"ppid.py": PPID},
                                               "python3 ppid.py", 2)
    assert logged == [], logged
    assert [int(output) for output in outputs] == [templates[0]] * 2

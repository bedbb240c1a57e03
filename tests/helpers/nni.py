"""A real NNI 3.0 for the tests that compare with it or run beside it: a Python that has it
(installed once in the user's cache), and PYTHONPATHs and PATHs that put it where a user would."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.common import REPO


NNI_VERSION = "3.0"


NNI_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "expmgr-tests" / f"nni-{NNI_VERSION}"


def _imports_nni(python: str) -> bool:
    probe = subprocess.run([python, "-c", f"import nni; assert nni.__version__.startswith('{NNI_VERSION}')"],
                           capture_output=True, timeout=120, check=False)
    return probe.returncode == 0


def _install_nni_once() -> str:
    """A venv with nni==3.0 in the user's cache, made once (built aside, then moved in place)."""
    python = NNI_CACHE / "bin" / "python"
    if python.exists():
        return str(python)
    NNI_CACHE.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="building-", dir=NNI_CACHE.parent))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, timeout=120, capture_output=True)
        installed = subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--retries", "1", "--timeout", "20",
             f"nni=={NNI_VERSION}"], capture_output=True, text=True, timeout=300, check=False)
        if installed.returncode != 0:
            pytest.skip(f"cannot install nni=={NNI_VERSION} with pip: {installed.stderr[-500:]}")
        try:
            building.rename(NNI_CACHE)
        except OSError:  # another run moved its own in place first
            pass
    except subprocess.TimeoutExpired:
        pytest.skip(f"installing nni=={NNI_VERSION} took too long")
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return str(python)


@pytest.fixture(scope="session")
def nni_python() -> str:
    """A Python with a real NNI 3.0 (and scikit-learn, which NNI requires)."""
    python = os.environ.get("EXPMGR_TEST_NNI_PYTHON")
    if not python:
        if os.environ.get("EXPMGR_TEST_NNI") == "0":
            pytest.skip("real NNI tests turned off (EXPMGR_TEST_NNI=0)")
        python = _install_nni_once()
    if not _imports_nni(python):
        pytest.skip(f"{python} cannot import nni {NNI_VERSION}")
    return python


def activate(monkeypatch: pytest.MonkeyPatch, python: str) -> None:
    """As if the user had activated ``python``'s environment: its bin folder first on PATH."""
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(python), os.environ["PATH"]]))


def sklearn_without_nni() -> str | None:
    for python in filter(None, [sys.executable, os.environ.get("EXPMGR_TEST_SKLEARN_PYTHON")]):
        probe = subprocess.run([python, "-c", "import importlib.util as u; import sklearn; "
                                "assert u.find_spec('nni') is None"], capture_output=True, timeout=120, check=False)
        if probe.returncode == 0:
            return python
    return None


def nni_beside_expmgr(tmp_path: Path, nni_python: str) -> str:
    """A PYTHONPATH for this Python on which NNI 3.0 (of ``nni_python``'s environment) is
    installed beside expmgr, as ``pip install nni`` in expmgr's environment would (expmgr's own
    dependencies win where both have one)."""
    site = subprocess.run([nni_python, "-c", "import os, nni; print(os.path.dirname(os.path.dirname(nni.__file__)))"],
                          capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    shim = tmp_path / "nni_installed"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(f"import sys\nsys.path.append({site!r})\n")
    return os.pathsep.join([str(REPO), str(shim)])

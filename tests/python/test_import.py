"""Importing pypto_pro where it cannot work says why and what to do (not a 'circular import')."""

import shutil
import subprocess
import sys
from pathlib import Path

import pypto_pro

PACKAGE = Path(pypto_pro.__file__).resolve().parent


def _import(tmp_path):
    return subprocess.run([sys.executable, "-c", "import pypto_pro"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)


def _copy_without_libraries(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "pypto_pro", ignore=shutil.ignore_patterns("*.so", "__pycache__"))


def test_the_version():
    assert isinstance(pypto_pro.__version__, str) and pypto_pro.__version__.count(".") == 2


def test_an_unbuilt_checkout_says_to_build_it(tmp_path):
    _copy_without_libraries(tmp_path)
    run = _import(tmp_path)
    assert run.returncode != 0
    assert "pypto_pro's compiled core (_C) is not built in" in run.stderr and "run `make`" in run.stderr
    assert "circular import" not in run.stderr.splitlines()[-1]


def test_a_core_built_for_another_python_says_which_to_use(tmp_path):
    _copy_without_libraries(tmp_path)
    other = "3.99" if sys.version_info[:2] != (3, 99) else "3.98"
    built = next(PACKAGE.glob("_C.*.so"))
    shutil.copy(built, tmp_path / "pypto_pro" / f"_C.cpython-{other.replace('.', '')}-x86_64-linux-gnu.so")
    run = _import(tmp_path)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert "was built for another Python than this one" in last and "/usr/bin/python3" in last

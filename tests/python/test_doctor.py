"""python -m pypto_pro doctor: exit 0 with every check OK on a good machine, exit 1 naming the problem
and its fix on a broken one (a missing compiler, an artefact directory that cannot be written)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _doctor(tmp_path, **env):
    full = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **env)
    return subprocess.run([sys.executable, "-m", "pypto_pro", "doctor"], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=300)


def test_a_good_machine(tmp_path):
    run = _doctor(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[FAIL]" not in run.stdout
    for check in ("[ OK ] Python", "[ OK ] host C++ compiler", "[ OK ] device headers", "[ OK ] artefact directory",
                  "[info] arch a5", "[info] PYPTO_PRO_CXX"):
        assert check in run.stdout, check
    assert run.stdout.rstrip().endswith("everything a kernel needs is here")


def test_a_missing_compiler(tmp_path):
    run = _doctor(tmp_path, PYPTO_PRO_CXX="no-such-cxx")
    assert run.returncode == 1
    assert "[FAIL] host C++ compiler: 'no-such-cxx' (PYPTO_PRO_CXX) is not on PATH" in run.stdout
    assert "fix: apt-get install g++" in run.stdout
    assert "1 problem(s)" in run.stdout


def test_an_artefact_directory_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the artefact tree would go")  # root can write anywhere else
    run = _doctor(tmp_path, ASCEND_WORK_PATH=str(blocker))
    assert run.returncode == 1
    assert f"[FAIL] artefact directory: cannot write '{blocker}/PYPTO_PRO/build'" in run.stdout
    assert "set ASCEND_WORK_PATH to one" in run.stdout


def test_a_compiler_that_cannot_build_the_device_headers(tmp_path):
    """The probe includes the device headers every kernel includes: a compiler that cannot parse them
    fails in the doctor, with its first error, rather than at a kernel's first launch."""
    fake = tmp_path / "old-cxx"
    fake.write_text("#!/bin/sh\necho 'In file included from probe.cpp:1:' >&2\n"
                    "echo 'numeric.h:40:5: error: use of undeclared identifier __builtin_x' >&2\nexit 1\n")
    fake.chmod(0o755)
    run = _doctor(tmp_path, PYPTO_PRO_CXX=str(fake))
    assert run.returncode == 1
    assert (f"[FAIL] host C++ compiler: '{fake}' failed on a probe with the kernel flags: numeric.h:40:5: error: "
            "use of undeclared identifier __builtin_x") in run.stdout
    assert "fix: use g++ 12 or clang 14 or newer" in run.stdout


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ not installed")
def test_clang_builds_the_device_headers(tmp_path):
    run = _doctor(tmp_path, PYPTO_PRO_CXX="clang++")
    assert "[ OK ] host C++ compiler: " in run.stdout and "clang" in run.stdout, run.stdout

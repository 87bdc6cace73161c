"""python -m pypto_pro ls / show / clean / run (docs/jit.md#the-command-line)."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''
import torch, pypto_pro, pypto_pro.language as pl

@pl.jit(name="cli_kernel")
def k(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])

x = torch.zeros(8, 64); y = torch.empty_like(x)
k[None, 1](x, y)
pypto_pro.runtime.synchronize()
print("sum", y.sum().item())
'''


def _cli(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), ASCEND_WORK_PATH=str(tmp_path / "work"))
    return subprocess.run([sys.executable, "-m", "pypto_pro", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def _with_broken_compiler(tmp_path, *argv, error="error: this compiler is broken", **env):
    """`python argv...` in tmp_path with PYPTO_PRO_CXX a compiler that prints `error` and fails at once
    (standing in for a build of the precompiled device code) and the cache under tmp_path/xdg."""
    fake = tmp_path / "broken-cxx"
    fake.write_text(f"#!/bin/sh\necho '{error}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYPTO_PRO_CXX=str(fake),
                                   XDG_CACHE_HOME=str(tmp_path / "xdg"), PYPTO_PRO_CACHE_DIR="", **env))


def test_ls_show_clean_and_run(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    run = _cli(tmp_path, "run", str(tmp_path / "script.py"))  # a script run through the torch_npu layer
    assert run.returncode == 0, run.stderr
    assert "sum 512.0" in run.stdout
    build = tmp_path / "work" / "PYPTO_PRO" / "build"
    listing = _cli(tmp_path, "ls")
    assert listing.returncode == 0
    assert "cli_kernel  [a5]  1 instance(s)" in listing.stdout and "tk_none  compiled" in listing.stdout
    assert f"1 kernel directory under {build}" in listing.stdout
    shown = _cli(tmp_path, "show", str(build / "cli_kernel__a5" / "tk_none"))
    assert shown.returncode == 0
    assert "kernel cli_kernel, arch a5, TilingKey none" in shown.stdout and "kernel.cpp" in shown.stdout
    bad = _cli(tmp_path, "show", str(tmp_path))
    assert bad.returncode == 2 and "is not an instance directory" in bad.stderr
    (build / "unrelated.txt").write_text("not pypto_pro's")
    cleaned = _cli(tmp_path, "clean")
    assert cleaned.returncode == 0 and "removed 1 kernel directory" in cleaned.stdout
    assert not (build / "cli_kernel__a5").exists() and (build / "unrelated.txt").exists()  # only its own


MANY = '''
import torch, pypto_pro, pypto_pro.language as pl

class Mode:
    M = pl.TilingKeyField(bits=2, values=[0, 1, 2])

@pl.jit(tiling_key=Mode, name="many")
def k(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, M * 1.0)
        pl.store(y, t, [0, 0])

x = torch.zeros(8, 64); y = torch.empty_like(x)
for m in range(3):
    k[None, 1, {"M": m}](x, y)
pypto_pro.runtime.synchronize()
print("done")
'''


def test_the_compile_progress_line_only_where_asked(tmp_path):
    """Three TilingKey instances: with PYPTO_PRO_PROGRESS=1 a progress line per compile (cleared after
    it), in a pipe by default nothing."""
    (tmp_path / "many.py").write_text(MANY)
    assert _cli(tmp_path, "cache", "warm").returncode == 0  # no line about building the device code below
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    env.pop("PYPTO_PRO_PROGRESS", None)
    quiet = subprocess.run([sys.executable, "many.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert quiet.returncode == 0 and "compiling" not in quiet.stderr  # stderr is a pipe here
    shutil_rm = __import__("shutil").rmtree
    shutil_rm(tmp_path / "build")
    loud = subprocess.run([sys.executable, "many.py"], cwd=tmp_path, env=dict(env, PYPTO_PRO_PROGRESS="1"),
                          capture_output=True, text=True, timeout=300)
    assert loud.returncode == 0, loud.stderr
    for n in (1, 2, 3):
        assert f"pypto_pro: compiling kernel 'many' (many__a5/tk_" in loud.stderr
        assert f"[{n} compile{'s' if n > 1 else ''} this run]" in loud.stderr
    assert loud.stderr.count("\x1b[K") == 6  # each line drawn, then cleared (text mode reads \\r as \\n)


def test_the_progress_line_says_when_the_shared_device_code_is_built(tmp_path):
    """The first compile on a machine (for its compiler, CPU and pypto_pro version) first builds the
    routines library all kernels share and waits for it: the progress line says so. A compiler that
    fails at once stands in for the ~15 s build."""
    (tmp_path / "script.py").write_text(SCRIPT)
    run = _with_broken_compiler(tmp_path, "script.py", PYPTO_PRO_PROGRESS="1")
    assert run.returncode == 1 and "CompileError: the host compiler failed on kernel 'cli_kernel'" in run.stderr
    assert ("pypto_pro: building the device code all kernels share (once per compiler, CPU and pypto_pro version, "
            "~15 s; `python -m pypto_pro cache warm` builds it ahead), then compiling kernel 'cli_kernel' "
            "(cli_kernel__a5/tk_none) [1 compile this run]") in run.stderr


def test_cache_warm_builds_the_precompiled_device_code_once(tmp_path):
    """`cache warm` builds what the first kernel compile on a machine would (the routines library and
    the precompiled headers, in the cache directory every compile uses) and then finds it built."""
    first = _cli(tmp_path, "cache", "warm")
    assert first.returncode == 0, first.stdout + first.stderr
    line = first.stdout.strip()
    assert line.startswith(("built the precompiled device code in ", "already built: the precompiled device code in "))
    where = Path(line.split(" in ", 1)[1].split(" (", 1)[0])
    assert (where / "libpto_routines.so").is_file() and (where / "pypto_pro" / "precompiled.h.gch").is_file()
    again = _cli(tmp_path, "cache", "warm")
    assert again.returncode == 0 and again.stdout.strip() == f"already built: the precompiled device code in {where}"


def test_cache_warm_without_precompiling_or_with_a_failing_compiler(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pypto_pro", "cache", "warm"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYPTO_PRO_PCH="0"))
    assert run.returncode == 0
    assert run.stdout.startswith("no precompiled device code: PYPTO_PRO_PCH=0, or the cache directory cannot be "
                                 "written")
    run = _with_broken_compiler(tmp_path, "-m", "pypto_pro", "cache", "warm",
                                error="routines.cpp:1:1: error: this compiler is broken")
    assert run.returncode == 1
    assert ("python -m pypto_pro cache warm: the host compiler failed on the precompiled routines:\n"
            "routines.cpp:1:1: error: this compiler is broken") in run.stderr
    assert not list((tmp_path / "xdg").rglob("libpto_routines.so"))  # nothing half-built left behind
    assert not list((tmp_path / "xdg").rglob("*.o")) and not list((tmp_path / "xdg").rglob(".routines*"))


def test_building_device_code_removes_the_sets_unused_for_30_days(tmp_path):
    """pch/ holds a set of precompiled device code per compiler, flags and header version; building a
    new one removes those no compile used for 30 days (a set's modification time is its last use).
    A compiler that fails at once stands in for the build."""
    pch = tmp_path / "xdg" / "pypto_pro" / "pch"
    old, recent = pch / "0123456789abcdef", pch / "fedcba9876543210"
    for days, where in ((40, old), (20, recent)):
        (where / "pypto_pro").mkdir(parents=True)
        (where / "libpto_routines.so").write_bytes(b"a library")
        stamp = time.time() - days * 86400
        os.utime(where, (stamp, stamp))
    run = _with_broken_compiler(tmp_path, "-m", "pypto_pro", "cache", "warm")
    assert run.returncode == 1 and "this compiler is broken" in run.stderr
    assert not old.exists()
    assert (recent / "libpto_routines.so").read_bytes() == b"a library"

"""The persistent kernel cache (docs/jit.md#persistent-cache): opt-in with PYPTO_PRO_CACHE_DIR or
pl.jit(cache=True); a library is reused across processes (and, always, within one process), safely
when processes share the cache; `python -m pypto_pro cache` lists and clears it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''
import sys, torch, pypto_pro, pypto_pro.language as pl

def plus_one(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])

cache = {"default": None, "on": True, "off": False}[sys.argv[1]]
kernel = pl.jit(plus_one, cache=cache)
x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
y = torch.empty_like(x)
kernel[None, 1](x, y)
pypto_pro.runtime.synchronize()
assert torch.equal(y, x + 1)
print("reused=" + kernel.compile_stats()[0]["reused"])
'''


def _run(tmp_path, mode, cache_dir=None, work="work", extra_env=None):
    script = tmp_path / "plus_one.py"
    if not script.exists():  # written once: rewriting it could truncate it under a process reading it
        staged = tmp_path / "plus_one.py.tmp"
        staged.write_text(SCRIPT)
        staged.rename(script)
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_PRO_CACHE_DIR"}
    env["PYTHONPATH"] = str(ROOT / "python")
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    if cache_dir is not None:
        env["PYPTO_PRO_CACHE_DIR"] = str(cache_dir)
    env.update(extra_env or {})
    cwd = tmp_path / work  # a fresh build directory: nothing to find but the cache
    cwd.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, str(script), mode], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _reused(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out.strip().rsplit("reused=", 1)[1]


def test_a_second_process_takes_the_library_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    assert _reused(_run(tmp_path, "default", cache, "one")) == ""       # compiled, and kept
    assert len(list(cache.glob("call_kernel_*.so"))) == 1
    assert _reused(_run(tmp_path, "default", cache, "two")) == "cache"  # another process, another build dir
    assert _reused(_run(tmp_path, "off", cache, "three")) == ""         # cache=False opts out
    no_pch = {"PYPTO_PRO_PCH": "0"}  # the XDG cache without a routines library of its own (~25 s to build)
    assert _reused(_run(tmp_path, "default", None, "four", no_pch)) == ""  # off by default: a new process compiles
    assert not list((tmp_path / "xdg").rglob("call_kernel_*.so"))
    assert _reused(_run(tmp_path, "on", None, "five", no_pch)) == ""       # cache=True: ~/.cache (XDG) without the env
    assert _reused(_run(tmp_path, "on", None, "six", no_pch)) == "cache"
    assert len(list((tmp_path / "xdg" / "pypto_pro").glob("call_kernel_*.so"))) == 1


def test_another_compiler_file_is_another_cache_entry(tmp_path):
    """The cache knows a compiler by the file PYPTO_PRO_CXX resolves to (found on PATH like the
    compile itself), its size and modification time: an upgraded compiler compiles again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "my-cxx"
    wrapper.write_text("#!/bin/sh\nexec g++ \"$@\"\n")
    wrapper.chmod(0o755)
    # PYPTO_PRO_PCH=0: no routines library for each compiler identity (~25 s of compiler time each)
    env = {"PYPTO_PRO_CXX": "my-cxx", "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYPTO_PRO_PCH": "0"}
    cache = tmp_path / "cache"
    assert _reused(_run(tmp_path, "default", cache, "one", env)) == ""
    assert _reused(_run(tmp_path, "default", cache, "two", env)) == "cache"
    os.utime(wrapper, ns=(wrapper.stat().st_atime_ns, wrapper.stat().st_mtime_ns + 10**9))  # "upgraded"
    assert _reused(_run(tmp_path, "default", cache, "three", env)) == ""
    assert len(list(cache.glob("call_kernel_*.so"))) == 2
    assert _reused(_run(tmp_path, "default", cache, "four", env)) == "cache"


def test_processes_sharing_the_cache_at_once(tmp_path):
    cache = tmp_path / "cache"
    # PYPTO_PRO_PCH=0: four processes would build the routines library of the new cache together
    procs = [_run(tmp_path, "default", cache, f"w{i}", {"PYPTO_PRO_PCH": "0"}) for i in range(4)]
    assert all(_reused(p) in ("", "cache") for p in procs)
    assert len(list(cache.glob("call_kernel_*.so"))) == 1  # one library, complete: no partial files left
    assert not list(cache.glob(".tmp*"))


def test_the_same_code_in_one_process_is_not_compiled_again():
    def plus_two(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.adds(t, t, 2.0)
            pl.store(y, t, [0, 0])

    x = torch.zeros(64, 64)
    stats = []
    for _ in range(2):
        kernel = pl.jit(plus_two)  # re-decorated: a new kernel object of the same function
        y = torch.empty_like(x)
        kernel[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x + 2)
        stats.append(kernel.compile_stats()[0])
    assert stats[0]["reused"] == "" and stats[1]["reused"] == "process"
    assert Path(stats[1]["dir"], "kernel.cpp").exists()  # the artefacts are there all the same


def test_the_cache_command_lists_and_clears(tmp_path):
    cache = tmp_path / "cache"
    assert _reused(_run(tmp_path, "default", cache)) == ""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PYPTO_PRO_CACHE_DIR=str(cache))
    run = lambda *args: subprocess.run([sys.executable, "-m", "pypto_pro", "cache", *args], env=env,
                                       capture_output=True, text=True, timeout=120)
    assert run("dir").stdout.strip() == str(cache)
    listing = run("ls")
    assert listing.returncode == 0 and "1 kernel library" in listing.stdout and "call_kernel_" in listing.stdout
    assert "1 set of precompiled device code, " in listing.stdout and str(cache / "pch") in listing.stdout
    cleared = run("clear")
    assert cleared.returncode == 0 and "removed 3 file(s)" in cleared.stdout  # the library, .gch, routines
    assert not list(cache.glob("call_kernel_*.so")) and not (cache / "pch").exists()
    bad = run("purge")
    assert bad.returncode == 2 and "unknown command 'purge'" in bad.stderr


def _any_kernel(x: pl.Tensor[[8, 8], pl.DT_FP32]):
    pass


def test_cache_must_be_a_bool():
    with pytest.raises(TypeError, match="cache"):
        pl.jit(_any_kernel, cache="yes")

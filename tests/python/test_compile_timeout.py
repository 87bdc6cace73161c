"""compile_timeout stops a compiler that runs too long, with its whole process group (docs/jit.md#decorator-parameters)."""

import os
import subprocess
import time

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import make_add_kernel


@pytest.fixture
def slow_compiler(tmp_path, monkeypatch):
    """A compiler wrapper that starts a child and sleeps: both must be gone after the timeout."""
    marker = tmp_path / "pids"
    script = tmp_path / "slow-cxx"
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $$ $! >> {marker}\nwait\n")
    script.chmod(0o755)
    monkeypatch.setenv("PYPTO_PRO_CXX", str(script))
    return marker


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


def test_timeout_kills_the_compiler_and_the_next_launch_retries(slow_compiler, monkeypatch):
    kernel = pl.jit(make_add_kernel(name="add_slow").fn, compile_timeout=1, name="add_slow")
    x = torch.ones(128, 128, dtype=torch.float16)
    z = torch.zeros_like(x)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        kernel[None, 1](x, x, z)
    elapsed = time.monotonic() - start
    err = info.value
    assert isinstance(err, pypto_pro.CompileTimeoutError) and isinstance(err, pypto_pro.CompileError)
    assert err.kernel == "add_slow" and err.limit == 1
    assert "longer than its compile_timeout of 1 s" in str(err) and "add_slow__a5" in str(err)
    assert 0.9 < elapsed < 25, elapsed  # well before the compiler's own 30 s would have ended
    pids = [int(p) for p in slow_compiler.read_text().split()]
    time.sleep(0.2)
    assert pids and not any(alive(pid) for pid in pids), pids
    assert kernel.cache_info()["compiles"] == 0

    monkeypatch.delenv("PYPTO_PRO_CXX")
    kernel.compile_timeout = None  # a real compile on a busy machine may well take more than 1 s
    kernel[None, 1](x, x, z)  # the next launch compiles again, now with the real compiler
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + x) and kernel.cache_info()["compiles"] == 1


def test_missing_compiler_is_a_compile_error(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_CXX", "/nonexistent/cxx")
    with pytest.raises(pypto_pro.CompileError, match="cannot run '/nonexistent/cxx'"):
        make_add_kernel(name="add_nocxx")[None, 1](*(torch.ones(128, 128, dtype=torch.float16),) * 3)

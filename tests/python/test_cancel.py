"""Stopping kernels: synchronize(timeout=), PYPTO_PRO_KERNEL_TIMEOUT and Ctrl-C stop a runaway launch
at a loop back-edge, drop the launches queued behind it, name the kernel and the line, and leave the
stream usable. Ctrl-C during a compile kills the compiler."""

import inspect
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro.runtime import Event, Stream
from kernels import add_n

PYTHONPATH = str(Path(pypto_pro.__file__).resolve().parent.parent)
FOREVER = 2 ** 62  # iterations: longer than any test runs


@pl.jit
def add_n_mixed(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32], n: pl.DT_INT64):
    """The AIC waits for the AIVs, which loop: cancelling must unwind all three fibers."""
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        for i in pl.range(n):
            pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=0)


def loop_line(kernel):
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if "for i in pl.range(n):" in line)


def check_usable(stream):
    x = torch.zeros(8, 64)
    add_n[stream, 1](x, x, 3)
    stream.synchronize()
    assert torch.equal(x, torch.full((8, 64), 3.0))


@pytest.mark.parametrize("kernel", [add_n, add_n_mixed])
@pytest.mark.parametrize("worker_runs_it", [False, True])
def test_synchronize_timeout_stops_a_runaway_launch(kernel, worker_runs_it):
    stream = Stream()
    check_usable(stream)  # compiled; the stream works
    x = torch.zeros(8, 64)
    kernel[stream, 2](x, x, FOREVER)
    queued = [torch.zeros(8, 64) for _ in range(2)]
    for q in queued:
        add_n[stream, 1](q, q, 1)
    if worker_runs_it:
        time.sleep(0.1)  # the stream's worker has started it; the timeout ends a plain wait
    start = time.monotonic()
    with pytest.raises(pypto_pro.KernelTimeout) as info:
        stream.synchronize(timeout=0.3)
    elapsed = time.monotonic() - start
    err = info.value
    assert isinstance(err, pypto_pro.KernelFault) and isinstance(err, TimeoutError)
    assert err.kernel == kernel.kernel_name and err.line == loop_line(kernel), str(err)
    assert "was still running when synchronize(timeout=0.3 s) ran out, and was stopped" in str(err)
    assert "2 queued launch(es) were cancelled" in str(err)
    assert f"{Path(kernel.fn.__code__.co_filename).name}:{loop_line(kernel)}" in str(err)
    assert elapsed >= 0.3
    assert all(not q.any() for q in queued)  # dropped, never run
    assert stream.pending == 0
    check_usable(stream)
    stream.synchronize()  # nothing left over: the timeout was raised once


def test_global_synchronize_timeout_and_event_after_it():
    stream = Stream()
    check_usable(stream)
    x = torch.zeros(8, 64)
    start, end = Event(), Event()
    start.record(stream)
    add_n[stream, 1](x, x, FOREVER)
    end.record(stream)
    with pytest.raises(pypto_pro.KernelTimeout, match=r"kernel 'add_n' was still running"):
        pypto_pro.runtime.synchronize(timeout=0.2)
    end.synchronize()  # a dropped event is passed, not waited for forever
    check_usable(stream)


def test_timeout_argument_is_checked():
    with pytest.raises(ValueError, match=r"Stream.synchronize: timeout must be >= 0 seconds, got -1"):
        Stream().synchronize(timeout=-1)
    with pytest.raises(TypeError, match=r"synchronize: timeout must be a number of seconds or None, got '1'"):
        pypto_pro.runtime.synchronize(timeout="1")


def test_a_timeout_that_is_not_needed_changes_nothing():
    stream = Stream()
    x = torch.zeros(8, 64)
    add_n[stream, 1](x, x, 5)
    stream.synchronize(timeout=30)
    assert torch.equal(x, torch.full((8, 64), 5.0))


def run_script(tmp_path, body, env=None, timeout=120):
    # Python leaves SIGINT ignored when it starts with it ignored (a test run started in the background
    # of a non-interactive shell): these scripts want Ctrl-C to raise KeyboardInterrupt, as a user's would.
    script = tmp_path / "script.py"
    script.write_text("import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + textwrap.dedent(body))
    full_env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + str(Path(__file__).parent))
    full_env.update(env or {})
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full_env,
                          cwd=tmp_path, timeout=timeout)


SPIN_KERNEL = """
import os, signal, sys, threading, time
import torch, pypto_pro
from kernels import add_n

def spin(x, n):
    add_n[None, 1](x, x, n)

def usable():
    y = torch.zeros(8, 64)
    spin(y, 2)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, torch.full((8, 64), 2.0))
    print("usable")

usable()
"""


def test_kernel_timeout_environment_variable(tmp_path):
    out = run_script(tmp_path, SPIN_KERNEL + """
x = torch.zeros(8, 64)
spin(x, 2 ** 62)
try:
    pypto_pro.runtime.synchronize()
except pypto_pro.KernelTimeout as e:
    print("timeout", e.kernel, e.line)
    print(e)
usable()
""", env={"PYPTO_PRO_KERNEL_TIMEOUT": "0.3"})
    assert out.returncode == 0, out.stderr
    assert f"timeout add_n {loop_line(add_n)}" in out.stdout
    assert "ran longer than its limit of 0.3 s (PYPTO_PRO_KERNEL_TIMEOUT) and was stopped at" in out.stdout
    assert out.stdout.count("usable") == 2


def test_ctrl_c_in_synchronize_cancels_the_launch(tmp_path):
    out = run_script(tmp_path, SPIN_KERNEL + """
x = torch.zeros(8, 64)
spin(x, 2 ** 62)
spin(torch.zeros(8, 64), 1)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    pypto_pro.runtime.synchronize()
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - start))
assert pypto_pro.runtime.default_stream().pending == 0
usable()
# Ctrl-C while the stream's worker (not this thread) runs the launch
spin(x, 2 ** 62)
time.sleep(0.1)
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    pypto_pro.runtime.default_stream().synchronize()
except KeyboardInterrupt:
    print("interrupted again")
usable()
""")
    assert out.returncode == 0, out.stderr
    assert "interrupted after" in out.stdout and "interrupted again" in out.stdout, out.stdout
    waited = float(out.stdout.split("interrupted after ")[1].split()[0])
    assert waited < 20, waited  # about 0.5 s: Ctrl-C came at 0.5 s and was seen within a tick
    assert out.stdout.count("usable") == 3
    assert "Traceback" not in out.stderr


def test_ctrl_c_during_a_compile_kills_the_compiler(tmp_path):
    marker = tmp_path / "pids"
    slow = tmp_path / "slow-cxx"
    slow.write_text(f"#!/bin/sh\nsleep 30 &\necho $$ $! >> {marker}\nwait\n")
    slow.chmod(0o755)
    out = run_script(tmp_path, f"""
import os, signal, subprocess, threading, time
import torch, pypto_pro
import pypto_pro.language as pl
from kernels import make_add_kernel

kernel = make_add_kernel(name="add_interrupted")
x = torch.ones(128, 128, dtype=torch.float16)
z = torch.zeros_like(x)
os.environ["PYPTO_PRO_CXX"] = {str(slow)!r}
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    kernel[None, 1](x, x, z)
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - start))
time.sleep(0.2)
started = open({str(marker)!r}).read().split() if os.path.exists({str(marker)!r}) else []  # a slow parse: none
for pid in started:
    state = subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout.strip()
    assert not state or state.startswith("Z"), (pid, state)
print("compilers gone")
del os.environ["PYPTO_PRO_CXX"]
kernel[None, 1](x, x, z)
pypto_pro.runtime.synchronize()
assert torch.equal(z, x + x) and kernel.cache_info()["compiles"] == 1
print("compiled")
""")
    assert out.returncode == 0, out.stderr
    assert "interrupted after" in out.stdout and "compilers gone" in out.stdout and "compiled" in out.stdout
    waited = float(out.stdout.split("interrupted after ")[1].split()[0])
    assert waited < 20, waited


def test_a_signal_handler_that_synchronises_the_running_stream_gets_an_error_not_a_hang(tmp_path):
    """The handler runs inside the wait's Ctrl-C check: when this thread runs the launch itself, the
    nested synchronize is refused; when the stream's worker runs it, the nested wait times out. Either
    way the error ends the outer wait and the stream stays usable."""
    out = run_script(tmp_path, SPIN_KERNEL + """
def handler(signum, frame):
    pypto_pro.runtime.synchronize(timeout=0.5)

signal.signal(signal.SIGINT, handler)
spin(torch.zeros(8, 64), 2 ** 62)
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    pypto_pro.runtime.synchronize()
except RuntimeError as e:
    print("error:", e)
usable()
""")
    assert out.returncode == 0, out.stderr
    assert ("error: a stream cannot be synchronised from inside one of its own launches" in out.stdout or
            "error: kernel 'add_n' was still running when synchronize(timeout=0.5 s) ran out" in out.stdout), out.stdout
    assert out.stdout.count("usable") == 2

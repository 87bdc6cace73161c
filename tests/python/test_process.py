"""The process around the runtime: fork(), bad environment values, interpreter exit, an unusable
build directory, a compiler that writes nothing. Each runs in a child process of its own."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pypto_pro

PYTHONPATH = str(Path(pypto_pro.__file__).resolve().parent.parent) + os.pathsep + str(Path(__file__).parent)

PRELUDE = """
import os, sys, time
import numpy as np, torch, pypto_pro
import pypto_pro.language as pl
from kernels import add_n

def check(blocks=1):
    x = torch.randn(8, 64)
    y = torch.zeros(8, 64)
    add_n[None, blocks](x, y, 3)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(y, x + 3, rtol=0, atol=1e-5)
"""


def run(tmp_path, body, env=None, timeout=120):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(body))
    full_env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    full_env.update(env or {})
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full_env,
                          cwd=tmp_path, timeout=timeout)


def test_a_forked_child_gets_a_working_runtime(tmp_path):
    out = run(tmp_path, """
check(); check(4)                      # the runtime's threads exist now
for blocks in (1, 4):
    pid = os.fork()
    if pid == 0:
        try:
            check(blocks); check(blocks)
            os._exit(0)
        except BaseException as e:
            print("child failed:", repr(e), flush=True)
            os._exit(3)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            print("child hung")
            sys.exit(1)
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
check()
print("forks ok")
""")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "forks ok" in out.stdout


def test_multiprocessing_with_the_fork_start_method(tmp_path):
    out = run(tmp_path, """
import multiprocessing as mp

def work(seed):
    torch.manual_seed(seed)
    check(2)
    x = torch.full((8, 64), float(seed))
    y = torch.zeros(8, 64)
    add_n[None, 1](x, y, 2)
    pypto_pro.runtime.synchronize()
    return float(y[0, 0])

if __name__ == "__main__":
    check()
    with mp.get_context("fork").Pool(2) as pool:
        print("results", pool.map(work, range(4), chunksize=1))
""")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "results [2.0, 3.0, 4.0, 5.0]" in out.stdout


def test_a_launch_in_flight_at_fork_is_a_fault_in_the_child(tmp_path):
    out = run(tmp_path, """
check()
x = torch.zeros(8, 64)
add_n[None, 1](x, torch.zeros(8, 64), 2 ** 62)   # still running when the process forks
time.sleep(0.1)
pid = os.fork()
if pid == 0:
    try:
        pypto_pro.runtime.synchronize()
        print("child: no fault")
    except pypto_pro.KernelFault as e:
        print("child fault:", e, flush=True)
    check()
    print("child ok", flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
try:
    pypto_pro.runtime.synchronize(timeout=0.1)
except pypto_pro.KernelTimeout:
    print("parent stopped its launch")
""")
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("child fault: 1 launch(es) were queued or running on this stream when the process forked; a forked "
            "child does not inherit them") in out.stdout
    assert "child ok" in out.stdout and "parent stopped its launch" in out.stdout


@pytest.mark.parametrize("name, value, message", [
    ("PYPTO_PRO_NUM_THREADS", "abc", "environment variable PYPTO_PRO_NUM_THREADS must be a non-negative integer, "
                                     "got 'abc'"),
    ("PYPTO_PRO_NUM_THREADS", "-5", "environment variable PYPTO_PRO_NUM_THREADS must be a non-negative integer, "
                                    "got '-5'"),
    ("PYPTO_PRO_KERNEL_TIMEOUT", "soon", "environment variable PYPTO_PRO_KERNEL_TIMEOUT must be a number of seconds "
                                         ">= 0 (0 = no limit), got 'soon'"),
    ("PYPTO_PRO_COMPILE_TIMEOUT", "abc", "environment variable PYPTO_PRO_COMPILE_TIMEOUT must be a number of seconds "
                                         "> 0, got 'abc'"),
    ("PYPTO_PRO_DUMP_IR", "maybe", "environment variable PYPTO_PRO_DUMP_IR must be 1/true/yes/on or 0/false/no/off, "
                                   "got 'maybe'"),
])
def test_bad_environment_values_are_value_errors_naming_the_variable(tmp_path, name, value, message):
    out = run(tmp_path, f"""
for attempt in range(2):
    try:
        check()
        print("ran")
    except ValueError as e:
        print("ValueError:", e)
os.environ.pop({name!r})
print("process alive")
""", env={name: value})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ValueError: " + message) == 2, out.stdout
    assert "process alive" in out.stdout


def test_a_fault_pending_at_exit_is_printed(tmp_path):
    out = run(tmp_path, """
@pl.jit
def overrun(x: pl.Tensor[[8, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load_tile(t, x, [1, 0])

overrun[None, 1](torch.zeros(8, 64))
print("exiting")
""")
    assert out.returncode == 0, out.stderr
    assert "pypto_pro: a kernel fault was never raised (no synchronize after it) before exit:" in out.stderr
    assert "kernel 'overrun' faulted in block 0 (AIV 0)" in out.stderr and "GM access out of bounds" in out.stderr


def test_launches_queued_at_exit_still_run(tmp_path):
    out = run(tmp_path, """
@pl.jit
def hello(n: pl.DT_INT32):
    with pl.section_vector():
        pl.printf("hello %d\\n", n)

hello[None, 1](1)
pypto_pro.runtime.synchronize()                                  # compiled
add_n[None, 1](torch.zeros(8, 64), torch.zeros(8, 64), 10 ** 7)  # still running at exit
hello[None, 1](7)                                                 # queued behind it
print("exiting", flush=True)
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines().count("[block 0 AIV] hello 7") == 1, out.stdout
    assert "exiting" in out.stdout


def test_an_unusable_build_directory_is_named(tmp_path):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("")
    out = run(tmp_path, """
try:
    check()
except pypto_pro.BuildDirectoryError as e:
    assert isinstance(e, pypto_pro.CompileError) and isinstance(e, OSError)
    print("error:", e)
""", env={"ASCEND_WORK_PATH": str(blocker)})
    assert out.returncode == 0, out.stderr
    assert f"error: cannot create {blocker}/PYPTO_PRO/build/add_n__a5/tk_none: Not a directory" in out.stdout
    assert "set ASCEND_WORK_PATH to build them under $ASCEND_WORK_PATH/PYPTO_PRO/build" in out.stdout


def test_a_compiler_that_writes_nothing_is_a_compile_error(tmp_path):
    out = run(tmp_path, """
try:
    check()
except pypto_pro.CompileError as e:
    print("error:", e)
""", env={"PYPTO_PRO_CXX": "/bin/true"})
    assert out.returncode == 0, out.stderr
    assert "the host compiler '/bin/true' exited with code 0 on kernel 'add_n' but wrote no library" in out.stdout
    assert "cannot rename" not in out.stdout
    inst = tmp_path / "build" / "add_n__a5" / "tk_none"
    assert (inst / "kernel.cpp").exists() and (inst / "compile.log").exists()
    assert not list(inst.glob(".build*")), "the private build directory was left behind"


def test_a_process_that_flushes_subnormals_still_gets_the_devices_ieee_results(tmp_path):
    """torch.set_flush_denormal(True) sets flush-to-zero on the caller's thread, and threads started
    from it inherit it: kernels still keep subnormals (docs/device.md#numerics), on every launch (the
    first may run on the tier-0 executor), and the caller's own setting is left as it was."""
    result = run(tmp_path, """
        # the tensors first: with flushing on, torch.full would store a subnormal as zero
        x = torch.full((16, 64), 2.0 ** -130)
        y = torch.full((16, 64), 2.0 ** -131)
        want = torch.full((16, 64), 3 * 2.0 ** -132)      # subnormal in fp32
        assert want.view(torch.int32)[0, 0].item() == 0x60000
        assert torch.set_flush_denormal(True)

        @pl.jit
        def halve_sum(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32],
                      z: pl.Tensor[[16, 64], pl.DT_FP32]):
            a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
            b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0x1000)
            with pl.section_vector():
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.add(a, a, b)
                pl.muls(a, a, 0.5)
                pl.store(z, a, [0, 0])

        stream = pypto_pro.runtime.Stream()
        for launch in range(3):
            for s in (None, stream):
                z = torch.full((16, 64), -1.0)
                halve_sum[s, 1](x, y, z)
                pypto_pro.runtime.synchronize()
                # as bits: with flushing on, float comparisons (and .item()) read subnormals as zero
                assert torch.equal(z.view(torch.int32), want.view(torch.int32)), (launch, s)

        # constants folded and scalar arguments converted to fp32 on the caller's thread
        TINY = 2.0 ** -70

        @pl.jit
        def scale(x: pl.Tensor[[16, 64], pl.DT_FP32], z: pl.Tensor[[16, 64], pl.DT_FP32], s: pl.DT_FP32):
            a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(a, x, [0, 0])
                pl.muls(a, a, s)
                pl.muls(a, a, TINY * TINY * 2.0 ** 140)
                pl.store(z, a, [0, 0])

        ones = torch.ones(16, 64)
        for launch in range(2):
            z = torch.full((16, 64), -1.0)
            scale[None, 1](ones, z, 2.0 ** -140)   # the argument: 2^-140; the folded constant: 1
            pypto_pro.runtime.synchronize()
            assert z.view(torch.int32).eq(0x200).all(), launch              # 2^-140
        assert (x * 1.0).view(torch.int32).eq(0).all()   # the caller's thread still flushes
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"

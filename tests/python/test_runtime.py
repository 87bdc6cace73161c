"""The simulated device and its streams: asynchronous launches, in-order streams, kernel faults, events."""

import inspect
import sys

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro.runtime import Event, Stream
from kernels import make_add_kernel


@pl.jit
def repeat_add(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32], reps: pl.DT_INT32):
    """z = reps * x, one add per repetition: a kernel whose run time we choose."""
    tt = pl.TileType(shape=[128, 128], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0)
    c = pl.make_tile(tt, addr=0x10000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.muls(c, a, 0.0)
        for _ in pl.range(reps):
            pl.add(c, c, a)
        pl.store(z, c, [0, 0])


@pl.jit
def overrun(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[64, 128], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 64 + 1, pl.get_block_num()):
            pl.load_tile(t, x, [i, 0])  # the last tile starts at the end of x
            pl.store_tile(z, t, [i, 0])


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _long_reps():
    """Repetitions that take a few hundred milliseconds on this machine (measured, not assumed)."""
    x = torch.ones(128, 128)
    z = torch.empty_like(x)
    stream = Stream()
    repeat_add[stream, 1](x, z, 1)  # compile
    stream.synchronize()
    start, end = Event(), Event()
    start.record(stream)
    repeat_add[stream, 1](x, z, 2000)
    end.record(stream)
    end.synchronize()
    per_rep_ms = max(start.elapsed_time(end) / 2000, 1e-4)
    return int(400 / per_rep_ms)


def test_launch_returns_before_the_kernel_ends():
    reps = _long_reps()
    x = torch.full((128, 128), 0.5)
    z = torch.zeros_like(x)
    stream = Stream()
    repeat_add[stream, 1](x, z, reps)
    assert not stream.query(), "the launch waited for the kernel"
    assert stream.pending == 1
    stream.synchronize()
    assert stream.query() and stream.pending == 0
    assert torch.equal(z, torch.full_like(x, 0.5 * reps))


def test_launches_on_one_stream_run_in_order():
    reps = _long_reps()
    add = make_add_kernel(pl.DT_FP32, (64, 128))
    x = torch.full((128, 128), 0.25)
    z = torch.zeros_like(x)
    w = torch.zeros_like(x)
    stream = Stream()
    add[stream, 1](x, x, w)  # compile before timing matters
    stream.synchronize()
    repeat_add[stream, 1](x, z, reps)     # long: z = reps * x
    add[stream, 4](z, x, w)               # must see the finished z
    stream.synchronize()
    assert torch.equal(w, torch.full_like(x, 0.25 * reps + 0.25))


def test_fault_is_raised_at_synchronize_and_the_stream_stays_usable():
    x = torch.arange(128 * 128, dtype=torch.float32).reshape(128, 128)
    z = torch.zeros_like(x)
    stream = Stream()
    overrun[stream, 1](x, z)   # returns: the fault surfaces at synchronisation
    with pytest.raises(pypto_pro.KernelFault) as info:
        stream.synchronize()
    fault = info.value
    assert fault.kernel == "overrun" and fault.op == "load_tile" and fault.block == 0 and fault.core == "AIV 0"
    assert fault.line == _line_of(overrun, "pl.load_tile(t, x, [i, 0])")
    message = str(fault)
    assert "GM access out of bounds: tensor 'x' of shape [128, 128], offsets [128, 0], window [64, 128]" in message
    assert f"test_runtime.py:{fault.line}" in message
    assert torch.equal(z, x)           # the tiles before the fault were stored; nothing else was touched
    stream.synchronize()               # the fault was reported once
    good = make_add_kernel(pl.DT_FP32, (64, 128))
    out = torch.zeros_like(x)
    good[stream, 2](x, x, out)
    stream.synchronize()
    assert torch.equal(out, x + x)


def test_fault_names_the_faulting_block():
    x = np.zeros((256, 128), np.float32)
    z = np.zeros_like(x)
    overrun[None, 5](x, z)  # tiles 0..4: only block 4 reads past the end
    with pytest.raises(pypto_pro.KernelFault, match=r"faulted in block 4 \(AIV 4\)") as info:
        pypto_pro.runtime.synchronize()
    assert info.value.block == 4


def test_faults_of_several_launches_are_counted():
    x = np.zeros((64, 128), np.float32)
    stream = Stream()
    for _ in range(3):
        overrun[stream, 1](x, np.zeros_like(x))
    with pytest.raises(pypto_pro.KernelFault, match=r"2 more fault\(s\) since the last synchronize"):
        stream.synchronize()


def test_events_measure_time_between_them():
    stream = Stream()
    x = torch.ones(128, 128)
    z = torch.zeros_like(x)
    start, end = Event(), Event()
    with pytest.raises(ValueError, match="never recorded"):
        end.synchronize()
    start.record(stream)
    repeat_add[stream, 1](x, z, 50)
    end.record(stream)
    end.synchronize()
    assert end.query()
    elapsed = start.elapsed_time(end)
    assert elapsed >= 0.0
    assert torch.equal(z, torch.full_like(x, 50.0))


def test_current_stream_context():
    s = Stream()
    assert pypto_pro.runtime.current_stream() is pypto_pro.runtime.default_stream()
    with pypto_pro.runtime.stream(s):
        assert pypto_pro.runtime.current_stream() is s
        x = torch.ones(128, 128)
        z = torch.zeros_like(x)
        repeat_add[1](x, z, 3)
        assert s.pending >= 0
        s.synchronize()
        assert torch.equal(z, 3 * x)
    assert pypto_pro.runtime.current_stream() is pypto_pro.runtime.default_stream()


def test_temporaries_stay_alive_until_the_launch_ran():
    add = make_add_kernel(pl.DT_FP32, (64, 128))
    out = torch.zeros(1024, 1024)
    for i in range(20):  # the inputs are dropped right after each launch
        add[None, 8](torch.full((1024, 1024), float(i)), torch.ones(1024, 1024), out)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, torch.full_like(out, 20.0))


def test_device_synchronize_releases_what_every_stream_held():
    add = make_add_kernel(pl.DT_FP32, (64, 128))
    stream = Stream()
    x = torch.ones(128, 128)
    out = torch.zeros_like(x)
    before = sys.getrefcount(x)
    add[stream, 1](x, x, out)
    assert sys.getrefcount(x) > before  # the queued launch holds its arguments
    pypto_pro.runtime.synchronize()  # not stream.synchronize(): every stream's launches are done
    assert sys.getrefcount(x) == before
    assert torch.equal(out, 2 * x)


def test_streams_run_concurrently_and_independently():
    add = make_add_kernel(pl.DT_FP32, (64, 128))
    streams = [Stream() for _ in range(4)]
    xs = [torch.full((512, 256), float(k)) for k in range(4)]
    outs = [torch.zeros(512, 256) for _ in range(4)]
    for s, x, o in zip(streams, xs, outs):
        add[s, 3](x, x, o)
    pypto_pro.runtime.synchronize()
    for k, o in enumerate(outs):
        assert torch.equal(o, torch.full_like(o, 2.0 * k))


@pl.jit
def one_tile_per_block(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load_tile(t, x, [pl.get_block_idx(), 0])
        pl.adds(t, t, pl.get_block_num())
        pl.store_tile(y, t, [pl.get_block_idx(), 0])


@pl.jit
def cube_tile_per_block(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP16], b: pl.Tensor[[16, 16], pl.DT_FP16],
                        c: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32]):
    ta = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0)
    tb = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x1000)
    la = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0)
    rb = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right), addr=0)
    acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
    with pl.section_cube():
        pl.load_tile(ta, a, [pl.get_block_idx(), 0])
        pl.load(tb, b, [0, 0])
        pl.move(la, ta)
        pl.move(rb, tb)
        pl.matmul(acc, la, rb)
        pl.store_tile(c, acc, [pl.get_block_idx(), 0])


@pytest.mark.parametrize("block_dim", [64, 65, 100, 1000])
def test_block_dim_is_never_truncated(block_dim):
    """More blocks than a5's 64 AIVs run in waves; every block runs and get_block_num() is block_dim."""
    x = torch.randn(8 * block_dim, 64)
    y = torch.full_like(x, float("nan"))
    one_tile_per_block[None, block_dim](x, y)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(y, x + block_dim, rtol=0, atol=1e-4)


def test_cube_block_dim_is_never_truncated():
    blocks = 40  # a5 has 32 AICs
    a = torch.randn(16 * blocks, 16).half()
    b = torch.randn(16, 16).half()
    c = torch.full((16 * blocks, 16), float("nan"))
    cube_tile_per_block[None, blocks](a, b, c)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)

"""Tier-0 first launches (docs/jit.md#tier-0-first-launches): a vector kernel the tier-0 executor runs
launches at once on it while its library compiles in the background, with the compiled kernel's
results, faults and lines; PYPTO_PRO_TIER0=always keeps every launch on it (the differential tests
below compare the two bit for bit), 0 turns it off."""

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import EXAMPLE_RUNS, example_outputs, fault_of, line_of, load_example, synchronize_fault

sync = pypto_pro.runtime.synchronize


def _twins(fn, name, monkeypatch):
    """Launchers of `fn` compiled twice: one running every launch on the tier-0 executor, one on its
    library only."""
    tier0, compiled = pl.jit(fn, name=f"{name}_tier0"), pl.jit(fn, name=f"{name}_compiled")

    def launch(kernel, mode, block_dim, *args):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel[None, block_dim](*args)
        sync()
        monkeypatch.delenv("PYPTO_PRO_TIER0")

    def both(block_dim, *args):
        """(tier-0 outputs, compiled outputs): each launch on its own copies of the arguments."""
        outs = []
        for kernel, mode in ((tier0, "always"), (compiled, "0")):
            copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            launch(kernel, mode, block_dim, *copies)
            outs.append(copies)
        assert tier0.compile_stats()[-1]["tier0"] and not compiled.compile_stats()[-1]["tier0"]
        return outs

    return both


# ---- element-wise ops over every element type the executor runs ----

def _zoo(dtype):
    def zoo(x: pl.Tensor[[32, 64], dtype], y: pl.Tensor[[32, 64], dtype], out: pl.Tensor[[14 * 32, 64], dtype],
            s: pl.Scalar[pl.DT_INT32]):
        tt = pl.TileType(shape=[32, 64], dtype=dtype, target_memory=pl.MemorySpace.Vec)
        a = pl.make_tile(tt, addr=0x0)
        b = pl.make_tile(tt, addr=0x4000)
        c = pl.make_tile(tt, addr=0x8000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.add(c, a, b)
            pl.store(out, c, [0, 0])
            pl.sub(c, a, b)
            pl.store(out, c, [32, 0])
            pl.mul(c, a, b)
            pl.store(out, c, [64, 0])
            pl.div(c, a, b)
            pl.store(out, c, [96, 0])
            pl.maximum(c, a, b)
            pl.store(out, c, [128, 0])
            pl.minimum(c, a, b)
            pl.store(out, c, [160, 0])
            pl.adds(c, a, s)
            pl.store(out, c, [192, 0])
            pl.subs(c, a, 3)
            pl.store(out, c, [224, 0])
            pl.muls(c, a, s * 2 - 7)
            pl.store(out, c, [256, 0])
            pl.divs(c, a, 2)
            pl.store(out, c, [288, 0])
            pl.maxs(c, a, -s)
            pl.store(out, c, [320, 0])
            pl.mins(c, a, s)
            pl.store(out, c, [352, 0])
            pl.neg(c, a)
            pl.store(out, c, [384, 0])
            pl.abs(c, a)
            pl.store(out, c, [416, 0])
    return zoo


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                                (pl.DT_INT32, torch.int32), (pl.DT_INT16, torch.int16)])
def test_element_wise_ops_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_zoo(dtype), f"t0_zoo_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(7)
    x = (torch.rand(32, 64, generator=g) * 200 - 100).to(torch_dtype)
    y = (torch.rand(32, 64, generator=g) * 200 - 100).to(torch_dtype)
    y[y == 0] = 1  # integer division by zero faults
    out = torch.zeros(14 * 32, 64, dtype=torch_dtype)
    (_, _, t0_out, _), (_, _, compiled_out, _) = both(1, x, y, out, 5)
    assert torch.equal(t0_out, compiled_out)
    # And the documented results: the first rows against torch.
    torch.testing.assert_close(t0_out[:32], x + y, rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(t0_out[128:160], torch.maximum(x, y))
    torch.testing.assert_close(t0_out[384:416], -x)


def test_unary_math_matches_the_compiled_kernel(monkeypatch):
    def math(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[96, 64], pl.DT_FP32]):
        tt = pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
        a = pl.make_tile(tt, addr=0x0)
        c = pl.make_tile(tt, addr=0x1000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.exp(c, a)
            pl.store(out, c, [0, 0])
            pl.log(c, a)
            pl.store(out, c, [16, 0])
            pl.sqrt(c, a)
            pl.store(out, c, [32, 0])
            pl.rsqrt(c, a)
            pl.store(out, c, [48, 0])
            pl.recip(c, a)
            pl.store(out, c, [64, 0])
            pl.relu(c, a)
            pl.store(out, c, [80, 0])

    both = _twins(math, "t0_math", monkeypatch)
    x = torch.rand(16, 64) * 4 + 0.01
    (_, t0_out), (_, compiled_out) = both(1, x, torch.zeros(96, 64))
    assert torch.equal(t0_out, compiled_out)
    torch.testing.assert_close(t0_out[:16], torch.exp(x))
    torch.testing.assert_close(t0_out[48:64], torch.rsqrt(x))


# ---- scalar code: loops, branches, operators ----

def control(out: pl.Tensor[[64, 16], pl.DT_INT32], n: pl.Scalar[pl.DT_INT32], step: pl.Scalar[pl.DT_INT32],
            f: pl.Scalar[pl.DT_FP32]):
    """Row r of `out` = 0 + the r-th scalar result (adds on a zeroed int32 tile)."""
    tt = pl.TileType(shape=[1, 16], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    zero = pl.make_tile(tt, addr=0x0)
    t = pl.make_tile(tt, addr=0x100)
    with pl.section_vector():
        pl.load(zero, out, [63, 0])  # row 63 is zero
        total = 0
        for i in pl.range(n, -3, step):  # a run-time step (negative here)
            if i % 5 == 0:
                continue
            if i < 2:
                break
            total = total + i * i
        pl.adds(t, zero, total)
        pl.store(out, t, [0, 0])
        k = 0
        m = n
        while m > 1:
            m = m // 2 if m % 2 == 0 else 3 * m + 1
            k += 1
        pl.adds(t, zero, k)
        pl.store(out, t, [1, 0])
        pl.adds(t, zero, (n << 3) ^ (n >> 1) | 5 & n)
        pl.store(out, t, [2, 0])
        pl.adds(t, zero, -n // 4 + (-n) % 4 * 100)
        pl.store(out, t, [3, 0])
        pl.adds(t, zero, pl.min(n, 7) * 10 + pl.max(step, -9))
        pl.store(out, t, [4, 0])
        pl.adds(t, zero, 1 if n > 3 and step < 0 else 2)
        pl.store(out, t, [5, 0])
        pl.adds(t, zero, pl.get_block_idx() * 10 + pl.get_block_num())
        pl.store(out, t, [6 + pl.get_block_idx(), 0])
        pl.adds(t, zero, f * 3.5)  # an fp32 scalar on an int32 tile truncates
        pl.store(out, t, [10, 0])
        for r in pl.range(11, 14):
            pl.adds(t, zero, r * 1000 + out.shape[0])
            pl.store(out, t, [r, 0])


def test_scalar_code_matches_the_compiled_kernel_and_python(monkeypatch):
    both = _twins(control, "t0_control", monkeypatch)
    n, step, f = 23, -3, 2.2
    (t0_out, *_), (compiled_out, *_) = both(3, torch.zeros(64, 16, dtype=torch.int32), n, step, f)
    assert torch.equal(t0_out, compiled_out)
    total = 0
    for i in range(n, -3, step):
        if i % 5 == 0:
            continue
        if i < 2:
            break
        total += i * i
    k, m = 0, n
    while m > 1:
        m = m // 2 if m % 2 == 0 else 3 * m + 1
        k += 1
    trunc_div = -(n // 4)  # integer // truncates toward zero on the device; % takes the dividend's sign
    expected = [total, k, (n << 3) ^ (n >> 1) | 5 & n, trunc_div + -(n % 4) * 100, 7 * 10 + step, 1,
                0 * 10 + 3, 1 * 10 + 3, 2 * 10 + 3, 0, int(np.float32(f) * np.float32(3.5))]
    assert t0_out[:11, 0].tolist() == expected
    assert t0_out[11:14, 0].tolist() == [11064, 12064, 13064]


@dataclass
class Plan:
    rows: int
    scale: float
    shift: bool
    bias: "float[4]"
    pick: "int[3]"
    flags: "bool[2]"


def planned(x: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32], plan: Plan):
    """TilingData fields of every kind: int, float, bool, and arrays read at run-time indices."""
    t = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for i in pl.range(plan.rows):
            pl.load_tile(t, x, [i, 0])
            pl.muls(t, t, plan.scale)
            if plan.shift and plan.flags[i % 2]:
                pl.adds(t, t, 1.0)
            pl.adds(t, t, plan.bias[plan.pick[i % 3]] + plan.pick[2] * 0.5)
            pl.store_tile(y, t, [i, 0])


def test_tiling_data_fields_match_the_compiled_kernel(monkeypatch):
    both = _twins(planned, "t0_planned", monkeypatch)
    x = torch.randn(8, 32)
    for plan in [Plan(8, 1.5, True, [0.25, -1.0, 2.0, 8.0], [3, 0, 1], [True, False]),
                 Plan(5, -2.0, False, [1.0, 2.0, 3.0, 4.0], [2, 2, 0], [False, True])]:
        (_, t0_y, _), (_, compiled_y, _) = both(1, x, torch.zeros(8, 32), plan)
        assert torch.equal(t0_y, compiled_y)
        ref = torch.zeros(8, 32)
        for i in range(plan.rows):
            ref[i] = x[i] * plan.scale + (1.0 if plan.shift and plan.flags[i % 2] else 0.0)
            ref[i] += plan.bias[plan.pick[i % 3]] + plan.pick[2] * 0.5
        assert torch.allclose(t0_y, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("index", [4, 7, -1])
def test_a_tiling_array_index_out_of_range_faults_as_the_compiled_kernel(monkeypatch, index):
    faults = []
    for mode in ("always", "0"):
        kernel = pl.jit(planned, name=f"t0_planned_fault_{mode}_{index + 1}")
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        y = torch.zeros(8, 32)
        kernel[None, 1](torch.ones(8, 32), y, Plan(3, 1.0, False, [0.0] * 4, [0, 1, index], [False, False]))
        faults.append((synchronize_fault(), y))
        assert kernel.compile_stats()[-1]["tier0"] == (mode == "always")
    (t0_fault, t0_y), (compiled_fault, compiled_y) = faults
    assert t0_fault == compiled_fault
    assert t0_fault == ("TilingData array", line_of(planned, "pl.adds(t, t, plan.bias[plan.pick[i % 3]]"),
                        f"TilingData array index out of range: size [4], offsets [{index}], window [1]")
    assert torch.equal(t0_y, compiled_y)  # rows 0 and 1 stored before row 2 faulted
    assert torch.equal(t0_y[:2], torch.full((2, 32), 1.0 + index * 0.5)) and not t0_y[2:].any()


# ---- tile groups, dynamic shapes, several blocks: the add example ----

def add(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
        z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16]):
    tt = pl.TileType(shape=[128, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 128, pl.get_block_num()):
            for j in pl.range(0, x.shape[1] // 128):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [i, j])
                pl.load_tile(tb, y, [i, j])
                pl.add(tc, ta, tb)
                pl.store_tile(z, tc, [i, j])


def test_the_add_examples_first_launch_runs_at_once_and_its_library_follows(monkeypatch):
    monkeypatch.delenv("PYPTO_PRO_TIER0", raising=False)
    kernel = pl.jit(add, name="t0_add_first")
    x, y = torch.randn(384, 256).half(), torch.randn(384, 256).half()
    z = torch.zeros_like(x)
    kernel[None, 2](x, y, z)
    sync()
    assert torch.equal(z, x + y)
    stats = kernel.compile_stats()[0]
    assert stats["tier0"] and stats["tier0_refused"] == ""
    inst_dir = Path(stats["dir"])
    assert (inst_dir / "kernel.cpp").is_file() and (inst_dir / "call_kernel.cpp").is_file()  # at once
    kernel.wait_compiled()
    assert kernel.compile_stats()[0]["compiled"]
    assert Path(kernel.instances()[0].library).is_file()
    z.zero_()
    kernel[None, 3](x, y, z)  # on the library now
    sync()
    assert torch.equal(z, x + y)
    assert kernel.cache_info()["compiles"] == 1


def test_off_waits_for_the_library(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
    kernel = pl.jit(add, name="t0_add_off")
    x = torch.randn(128, 128).half()
    z = torch.zeros_like(x)
    kernel[None, 1](x, x, z)
    sync()
    assert torch.equal(z, x + x)
    stats = kernel.compile_stats()[0]
    assert not stats["tier0"] and stats["compiled"] and stats["tier0_refused"] == "PYPTO_PRO_TIER0=0"


def test_a_bad_mode_is_a_value_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_TIER0", "sometimes")
    kernel = pl.jit(add, name="t0_add_bad_mode")
    x = torch.zeros(128, 128).half()
    with pytest.raises(ValueError, match=r"PYPTO_PRO_TIER0 must be 1, 0 or always, got 'sometimes'"):
        kernel[None, 1](x, x, x)


def test_a_kernel_beyond_the_executor_waits_for_its_library(monkeypatch):
    def bits(x: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[16, 16], pl.DT_INT32]):
        a = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            b = pl.reinterpret(a, dtype=pl.DT_INT32, shape=[16, 16])
            pl.store(out, b, [0, 0])

    monkeypatch.setenv("PYPTO_PRO_TIER0", "always")
    kernel = pl.jit(bits, name="t0_reinterpret")
    x = torch.randn(16, 16)
    out = torch.zeros(16, 16, dtype=torch.int32)
    kernel[None, 1](x, out)
    sync()
    assert torch.equal(out, x.view(torch.int32))
    stats = kernel.compile_stats()[0]
    assert not stats["tier0"] and stats["tier0_refused"] == "pl.reinterpret"  # what the executor does not run


def test_the_stats_say_why_an_instance_waited_for_its_library(monkeypatch):
    monkeypatch.delenv("PYPTO_PRO_TIER0", raising=False)
    x = torch.randn(128, 128).half()
    checked = pl.jit(add, name="t0_add_sanitized", sanitizer=True)
    checked[None, 1](x, x, torch.zeros_like(x))
    sync()
    assert checked.compile_stats()[0]["tier0_refused"] == "a sanitizer instance"


def _transposes(dtype):
    def transposes(x: pl.Tensor[[48, 32], dtype], out: pl.Tensor[[32, 48], dtype], r: pl.Scalar[pl.DT_INT32],
                   c: pl.Scalar[pl.DT_INT32]):
        a = pl.make_tile(pl.TileType(shape=[48, 32], dtype=dtype, valid_shape=[-1, -1]), addr=0x0)
        t = pl.make_tile(pl.TileType(shape=[32, 48], dtype=dtype), addr=0x4000)
        with pl.section_vector():
            pl.load(t, out, [0, 0])       # what the transpose leaves alone keeps the output's values
            pl.load(a, x, [0, 0])
            pl.set_validshape(a, [r, c])  # a partial window: 16 x 16 blocks and edges
            pl.transpose(t, a)
            pl.store(out, t, [0, 0])
    return transposes


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                                (pl.DT_INT16, torch.int16)])
def test_transposes_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_transposes(dtype), f"t0_transposes_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(5)
    x = (torch.rand(48, 32, generator=g) * 100 - 50).to(torch_dtype)
    out = torch.full((32, 48), 3).to(torch_dtype)
    r, c = 45, 29
    (_, t0_out, *_), (_, compiled_out, *_) = both(1, x, out, r, c)
    assert torch.equal(t0_out, compiled_out)
    expected = out.clone()
    expected[:c, :r] = x[:r, :c].t()
    assert torch.equal(t0_out, expected)


def _bitwise(dtype):
    def bitwise(x: pl.Tensor[[16, 64], dtype], y: pl.Tensor[[16, 64], dtype], out: pl.Tensor[[8 * 16, 64], dtype],
                r: pl.Scalar[pl.DT_INT32], c: pl.Scalar[pl.DT_INT32], k: pl.Scalar[pl.DT_INT32]):
        tt = pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1])
        a = pl.make_tile(tt, addr=0x0)
        b = pl.make_tile(tt, addr=0x1000)
        o = pl.make_tile(tt, addr=0x2000)
        tmp = pl.make_tile(tt, addr=0x3000)
        n = pl.make_tile(tt, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.load(o, out, [0, 0])        # what a partial window leaves alone keeps the output's values
            pl.set_validshape(o, [r, c])
            pl.and_(o, a, b)
            pl.store(out, o, [0, 0])
            pl.or_(o, a, b)
            pl.store(out, o, [16, 0])
            pl.not_(o, a)
            pl.store(out, o, [32, 0])
            pl.and_(o, a, k)
            pl.store(out, o, [48, 0])
            pl.or_(o, a, 6)
            pl.store(out, o, [64, 0])
            pl.xor(o, a, b, tmp)
            pl.store(out, o, [80, 0])
            pl.and_(n, b, 7)               # shift amounts in [0, 8)
            pl.shl(o, a, n)
            pl.store(out, o, [96, 0])
            pl.shr(o, a, n)
            pl.store(out, o, [112, 0])
    return bitwise


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_INT8, torch.int8), (pl.DT_INT16, torch.int16),
                                                (pl.DT_INT32, torch.int32), (pl.DT_UINT8, torch.uint8)])
def test_bitwise_ops_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_bitwise(dtype), f"t0_bitwise_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(9)
    x = torch.randint(0, 120, (16, 64), generator=g).to(torch_dtype)
    y = torch.randint(0, 120, (16, 64), generator=g).to(torch_dtype)
    out = torch.full((8 * 16, 64), 1).to(torch_dtype)
    r, c, k = 13, 37, 0x55
    (_, _, t0_out, *_), (_, _, compiled_out, *_) = both(1, x, y, out, r, c, k)
    assert torch.equal(t0_out, compiled_out)
    expected = out.clone()
    n = y & 7
    shifted = (x.long() << n.long()).to(torch_dtype) if torch_dtype != torch.uint8 else ((x.long() << n.long()) & 0xff).to(torch.uint8)
    for i, value in enumerate([x & y, x | y, ~x, x & k, x | 6, x ^ y, shifted, x >> n]):
        expected[16 * i:16 * i + r, :c] = value[:r, :c]
    assert torch.equal(t0_out, expected)


def _shift_fault():
    def shift_fault(x: pl.Tensor[[16, 64], pl.DT_INT16], out: pl.Tensor[[16, 64], pl.DT_INT16]):
        tt = pl.TileType(shape=[16, 64], dtype=pl.DT_INT16)
        a = pl.make_tile(tt, addr=0x0)
        o = pl.make_tile(tt, addr=0x1000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.shl(o, a, a)
            pl.store(out, o, [0, 0])
    return shift_fault


def test_a_shift_amount_fault_is_the_compiled_kernels(monkeypatch):
    x = torch.ones(16, 64, dtype=torch.int16)
    x[3, 5] = 16
    messages = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(_shift_fault(), name=f"t0_shift_fault_{mode}")
        with pytest.raises(pypto_pro.KernelFault, match=r"shift amount 16 in 'rhs' is outside \[0, 16\)") as info:
            kernel[None, 1](x, torch.zeros(16, 64, dtype=torch.int16))
            sync()
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")
        messages.append(str(info.value))
    assert messages[0].replace("t0_shift_fault_always", "K") == messages[1].replace("t0_shift_fault_0", "K")


def test_a_transpose_into_an_overlapping_tile_faults_as_compiled(monkeypatch):
    def in_place(x: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[16, 16], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0x200)  # a's second half
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.transpose(b, a)
            pl.store(out, b, [0, 0])

    line = in_place.__code__.co_firstlineno + 5
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(in_place, name=f"t0_transpose_in_place_{mode}")
        with pytest.warns(pypto_pro.TileOverlapWarning), \
                pytest.raises(pypto_pro.KernelFault, match=rf"{line}.*'out' overlaps 'src'"):
            kernel[None, 1](torch.rand(16, 16), torch.zeros(16, 16))
            sync()
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")


# ---- fills, column reductions and conversions ----

def _columns(dtype):
    def columns(x: pl.Tensor[[32, 48], dtype], out: pl.Tensor[[4, 48], dtype], r: pl.Scalar[pl.DT_INT32],
                c: pl.Scalar[pl.DT_INT32], s: pl.Scalar[pl.DT_FP32]):
        tt = pl.TileType(shape=[32, 48], dtype=dtype, valid_shape=[-1, -1])
        rt = pl.TileType(shape=[1, 48], dtype=dtype, valid_shape=[-1, -1])
        a = pl.make_tile(tt, addr=0x0)
        tmp = pl.make_tile(tt, addr=0x4000)
        w = pl.make_tile(rt, addr=0x8000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.set_validshape(a, [r, c])   # a partial window: only its rows and columns are read
            pl.expands(w, s * 2)
            pl.store(out, w, [0, 0])
            pl.col_sum(w, a, tmp)
            pl.store(out, w, [1, 0])
            pl.col_max(w, a, tmp)
            pl.store(out, w, [2, 0])
            pl.col_min(w, a, tmp)
            pl.store(out, w, [3, 0])
    return columns


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_BF16, torch.bfloat16),
                                                (pl.DT_INT16, torch.int16), (pl.DT_INT32, torch.int32)])
def test_fills_and_column_reductions_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_columns(dtype), f"t0_columns_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(12)
    x = (torch.rand(32, 48, generator=g) * 20 - 10).to(torch_dtype)
    out = torch.full((4, 48), 7).to(torch_dtype)
    r, c = 29, 45
    (_, t0_out, *_), (_, compiled_out, *_) = both(1, x, out, r, c, 1.25)
    assert torch.equal(t0_out, compiled_out)
    xs = x[:r, :c].double()
    assert torch.all(t0_out[0] == torch.tensor(2.5).to(torch_dtype))  # the fill covers the row tile
    tol = dict(rtol=1e-2, atol=1e-1) if torch_dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(t0_out[1, :c].double(), xs.sum(0), **tol)
    torch.testing.assert_close(t0_out[2, :c].double(), xs.amax(0))
    torch.testing.assert_close(t0_out[3, :c].double(), xs.amin(0))


def _casts(src, dst, mode):
    def casts(x: pl.Tensor[[16, 64], src], out: pl.Tensor[[16, 64], dst], r: pl.Scalar[pl.DT_INT32]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=src, valid_shape=[-1, -1]), addr=0x0)
        o = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dst, valid_shape=[-1, -1]), addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.set_validshape(a, [r, 64])
            pl.set_validshape(o, [r, 64])
            pl.cast(o, a, mode=mode)
            pl.store(out, o, [0, 0])
    return casts


CASTS = [(pl.DT_FP32, pl.DT_FP16, torch.float32, torch.float16),
         (pl.DT_FP32, pl.DT_BF16, torch.float32, torch.bfloat16),
         (pl.DT_FP16, pl.DT_FP32, torch.float16, torch.float32),
         (pl.DT_FP32, pl.DT_INT32, torch.float32, torch.int32),
         (pl.DT_INT32, pl.DT_FP16, torch.int32, torch.float16),
         (pl.DT_BF16, pl.DT_FP16, torch.bfloat16, torch.float16),
         (pl.DT_FP32, pl.DT_INT8, torch.float32, torch.int8),
         (pl.DT_INT8, pl.DT_FP16, torch.int8, torch.float16),
         (pl.DT_FP16, pl.DT_UINT8, torch.float16, torch.uint8),
         (pl.DT_UINT8, pl.DT_FP32, torch.uint8, torch.float32),
         (pl.DT_INT16, pl.DT_BF16, torch.int16, torch.bfloat16),
         (pl.DT_FP32, pl.DT_INT16, torch.float32, torch.int16),
         (pl.DT_INT32, pl.DT_INT8, torch.int32, torch.int8),
         (pl.DT_INT8, pl.DT_INT32, torch.int8, torch.int32)]
_INT_RANGE = {torch.int8: 250, torch.uint8: 500, torch.int16: 60000, torch.int32: 70000}  # spans of the sources


@pytest.mark.parametrize("mode", ["CAST_RINT", "CAST_FLOOR", "CAST_TRUNC", "CAST_ODD"])
@pytest.mark.parametrize("src, dst, torch_src, torch_dst", CASTS)
def test_casts_match_the_compiled_kernel_bit_for_bit(src, dst, torch_src, torch_dst, mode, monkeypatch):
    if mode == "CAST_ODD" and (src, dst) != (pl.DT_FP32, pl.DT_FP16):
        pytest.skip("CAST_ODD is fp32 -> fp16 only (the compiler says so)")
    both = _twins(_casts(src, dst, getattr(pl.RoundMode, mode)),
                  f"t0_cast_{torch_src}_{torch_dst}_{mode}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(13)
    span = _INT_RANGE.get(torch_src, 300)
    low = 0 if torch_src == torch.uint8 else -span // 2
    x = (torch.rand(16, 64, generator=g) * span + low).clamp(*_limits(torch_src)).to(torch_src)
    if torch_src == torch.float32:
        x[0, :6] = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e30, -2.5, 65520.0])
    out = torch.zeros(16, 64, dtype=torch_dst)
    (_, t0_out, _), (_, compiled_out, _) = both(1, x, out, 13)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    assert torch.equal(t0_out.view(bits[t0_out.element_size()]), compiled_out.view(bits[compiled_out.element_size()]))
    assert not t0_out[13:].any()  # rows past the window are not converted
    if mode == "CAST_RINT" and torch_dst.is_floating_point:
        expected = x[1:13].to(torch_dst) if not torch_src.is_floating_point else x[1:13].to(torch.float64).to(torch_dst)
        assert torch.equal(t0_out[1:13], expected)
    if mode == "CAST_TRUNC" and not torch_dst.is_floating_point and torch_src.is_floating_point:
        within = x[1:13].double().trunc().clamp(*_limits(torch_dst))  # in range: exactly truncated
        inside = (x[1:13].double().trunc() == within)
        assert torch.equal(t0_out[1:13][inside].long(), within[inside].long())


def _limits(dtype):
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return float(info.min), float(info.max)


# ---- compares and selects ----

def _masks(dtype):
    def masks(x: pl.Tensor[[16, 64], dtype], y: pl.Tensor[[16, 64], dtype], bits: pl.Tensor[[12 * 16, 64], pl.DT_UINT8],
              out: pl.Tensor[[2 * 16, 64], dtype], s: pl.Scalar[pl.DT_FP32], c: pl.Scalar[pl.DT_INT32]):
        tt = pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1])
        mt = pl.TileType(shape=[16, 64], dtype=pl.DT_UINT8, valid_shape=[-1, -1])  # bit-packed: 8 bytes a row
        a = pl.make_tile(tt, addr=0x0)
        b = pl.make_tile(tt, addr=0x1000)
        o = pl.make_tile(tt, addr=0x2000)
        tmp = pl.make_tile(tt, addr=0x3000)
        m = pl.make_tile(mt, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.expands(m, 0)
            pl.set_validshape(m, [16, c])   # the mask's window: c predicates a row
            pl.eq(m, a, b)
            pl.store(bits, m, [0, 0])
            pl.ne(m, a, b)
            pl.store(bits, m, [16, 0])
            pl.lt(m, a, b)
            pl.store(bits, m, [32, 0])
            pl.le(m, a, b)
            pl.store(bits, m, [48, 0])
            pl.gt(m, a, b)
            pl.store(bits, m, [64, 0])
            pl.ge(m, a, b)
            pl.store(bits, m, [80, 0])
            pl.eq(m, a, s)
            pl.store(bits, m, [96, 0])
            pl.ne(m, a, s)
            pl.store(bits, m, [112, 0])
            pl.lt(m, a, s)
            pl.store(bits, m, [128, 0])
            pl.le(m, a, s)
            pl.store(bits, m, [144, 0])
            pl.gt(m, a, s)
            pl.store(bits, m, [160, 0])
            pl.ge(m, a, s)
            pl.store(bits, m, [176, 0])
            pl.set_validshape(o, [16, c])
            pl.select(o, m, a, b, tmp)
            pl.store(out, o, [0, 0])
            pl.select(o, m, a, 3, tmp)
            pl.store(out, o, [16, 0])
    return masks


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                                (pl.DT_INT32, torch.int32)])
def test_compares_and_selects_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_masks(dtype), f"t0_masks_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(14)
    x = (torch.rand(16, 64, generator=g) * 8 - 4).round().to(torch_dtype)  # small integers: ties happen
    y = (torch.rand(16, 64, generator=g) * 8 - 4).round().to(torch_dtype)
    bits = torch.full((12 * 16, 64), 0xA5, dtype=torch.uint8)
    out = torch.full((32, 64), 7).to(torch_dtype)
    c = 61  # a partial last byte: its bits past the window are the compare's, the bytes after untouched
    (_, _, t0_bits, t0_out, _, _), (_, _, compiled_bits, compiled_out, _, _) = both(1, x, y, bits, out, 1.0, c)
    assert torch.equal(t0_bits, compiled_bits) and torch.equal(t0_out, compiled_out)
    unpacked = ((t0_bits[:, :8, None].int() >> torch.arange(8)) & 1).reshape(12 * 16, 64)[:, :c].bool()
    xs, ys = x[:, :c].double(), y[:, :c].double()
    for k, expected in enumerate([xs == ys, xs != ys, xs < ys, xs <= ys, xs > ys, xs >= ys,
                                  xs == 1, xs != 1, xs < 1, xs <= 1, xs > 1, xs >= 1]):
        assert torch.equal(unpacked[16 * k:16 * k + 16], expected), k
    assert torch.equal(t0_out[:16, :c], torch.where(xs >= 1, x[:, :c], y[:, :c]))  # m holds ge(a, 1.0)
    assert torch.equal(t0_out[16:, :c], torch.where(xs >= 1, x[:, :c], torch.tensor(3).to(torch_dtype)))
    assert torch.all(t0_out[:, c:] == 7)


# ---- row reductions, broadcasts, valid windows and the debug ops ----

def _rows(dtype):
    def rows(x: pl.Tensor[[32, 48], dtype], col: pl.Tensor[[32, 1], dtype], row: pl.Tensor[[1, 48], dtype],
             out: pl.Tensor[[12 * 32, 48], dtype], sums: pl.Tensor[[3 * 32, 1], dtype], r: pl.Scalar[pl.DT_INT32],
             c: pl.Scalar[pl.DT_INT32]):
        tt = pl.TileType(shape=[32, 48], dtype=dtype, valid_shape=[-1, -1])
        ct = pl.TileType(shape=[32, 1], dtype=dtype, layout=pl.DN, valid_shape=[-1, -1])
        a = pl.make_tile(tt, addr=0x0)
        o = pl.make_tile(tt, addr=0x4000)
        tmp = pl.make_tile(tt, addr=0x8000)
        k = pl.make_tile(ct, addr=0xC000)
        s = pl.make_tile(ct, addr=0xC100)
        w = pl.make_tile(pl.TileType(shape=[1, 48], dtype=dtype, valid_shape=[-1, -1]), addr=0xC200)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(k, col, [0, 0])
            pl.load(w, row, [0, 0])
            pl.set_validshape(a, [r, c])   # a partial window: only its rows and columns are read
            pl.set_validshape(o, [r, c])
            pl.set_validshape(s, [r, 1])
            pl.row_sum(s, a, tmp)
            pl.store(sums, s, [0, 0])
            pl.row_max(s, a, tmp)
            pl.store(sums, s, [32, 0])
            pl.row_min(s, a, tmp)
            pl.store(sums, s, [64, 0])
            pl.row_expand_add(o, a, k)
            pl.store(out, o, [0, 0])
            pl.row_expand_sub(o, a, k)
            pl.store(out, o, [32, 0])
            pl.row_expand_mul(o, a, k)
            pl.store(out, o, [64, 0])
            pl.row_expand_div(o, a, k)
            pl.store(out, o, [96, 0])
            pl.row_expand_max(o, a, k)
            pl.store(out, o, [128, 0])
            pl.row_expand_min(o, a, k)
            pl.store(out, o, [160, 0])
            pl.col_expand_add(o, a, w)
            pl.store(out, o, [192, 0])
            pl.col_expand_sub(o, a, w)
            pl.store(out, o, [224, 0])
            pl.col_expand_mul(o, a, w)
            pl.store(out, o, [256, 0])
            pl.col_expand_div(o, a, w)
            pl.store(out, o, [288, 0])
            pl.col_expand_max(o, a, w)
            pl.store(out, o, [320, 0])
            pl.col_expand_min(o, a, w)
            pl.store(out, o, [352, 0])
    return rows


@pytest.mark.parametrize("dtype, torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                                (pl.DT_INT16, torch.int16), (pl.DT_INT32, torch.int32)])
def test_row_reductions_and_broadcasts_match_the_compiled_kernel_bit_for_bit(dtype, torch_dtype, monkeypatch):
    both = _twins(_rows(dtype), f"t0_rows_{torch_dtype}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(11)
    x = (torch.rand(32, 48, generator=g) * 20 - 10).to(torch_dtype)
    col = (torch.rand(32, 1, generator=g) * 8 + 1).to(torch_dtype)   # no zero divisors
    row = (torch.rand(1, 48, generator=g) * 8 + 1).to(torch_dtype)
    out = torch.full((12 * 32, 48), 7).to(torch_dtype)
    sums = torch.full((3 * 32, 1), 7).to(torch_dtype)
    r, c = 29, 45  # tails of rows and columns
    (_, _, _, t0_out, t0_sums, _, _), (_, _, _, compiled_out, compiled_sums, _, _) = both(1, x, col, row, out, sums,
                                                                                      r, c)
    assert torch.equal(t0_out, compiled_out) and torch.equal(t0_sums, compiled_sums)
    # The documented results inside the window; the stores write only the window.
    xs = x[:r, :c].double()
    tol = dict(rtol=1e-2, atol=1e-1) if torch_dtype == torch.float16 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(t0_sums[:r, 0].double(), xs.sum(1), **tol)
    torch.testing.assert_close(t0_sums[32:32 + r, 0].double(), xs.amax(1))
    torch.testing.assert_close(t0_sums[64:64 + r, 0].double(), xs.amin(1))
    torch.testing.assert_close(t0_out[32:32 + r, :c].double(), xs - col[:r].double(), **tol)
    torch.testing.assert_close(t0_out[352:352 + r, :c].double(), torch.minimum(xs, row[:, :c].double()))
    assert torch.all(t0_out[:32, c:] == 7) and torch.all(t0_out[r:32] == 7)


def test_the_softmax_and_layernorm_examples_run_at_once_with_the_librarys_bits(monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from softmax import softmax_kernel
    from layernorm import layernorm_kernel
    g = torch.Generator().manual_seed(5)
    for rows, cols in [(100, 512), (37, 300), (16, 1)]:
        x = torch.randn(rows, cols, generator=g) * 3
        gamma, beta = torch.randn(1, cols, generator=g), torch.randn(1, cols, generator=g)
        softmax = _twins(softmax_kernel.fn, f"t0_softmax_{rows}", monkeypatch)
        (_, t0_y), (_, compiled_y) = softmax(8, x, torch.zeros(rows, cols))
        assert torch.equal(t0_y, compiled_y)
        torch.testing.assert_close(t0_y, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
        layernorm = _twins(layernorm_kernel.fn, f"t0_layernorm_{rows}", monkeypatch)
        (*_, t0_y, _), (*_, compiled_y, _) = layernorm(8, x, gamma, beta, torch.zeros(rows, cols), 1e-5)
        assert torch.equal(t0_y, compiled_y)
        ref = torch.nn.functional.layer_norm(x, (cols,), gamma[0], beta[0])
        torch.testing.assert_close(t0_y, ref, rtol=1e-4, atol=1e-4)


def chatty(x: pl.Tensor[[8, 16], pl.DT_FP32], n: pl.Scalar[pl.DT_INT32], f: pl.Scalar[pl.DT_FP32],
           big: pl.Scalar[pl.DT_INT64]):
    with pl.section_vector():
        pl.printf("n=%d f=%f big=%d ok=%d\n", n, f * 2.0, big + 1, n > 2)
        pl.printf("no arguments\n")
        pl.pto_assert(n < 2, "n was %d, f %f", n, f)
        pl.pto_assert(n > 2, "never printed %d", n)
        if n > 10:
            pl.trap()


def test_printf_assert_and_trap_match_the_compiled_kernel(monkeypatch, capfd):
    texts = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(chatty, name=f"t0_chatty_{mode}")
        kernel[None, 1](torch.zeros(8, 16), 5, 1.25, 2 ** 40)
        sync()
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")
        texts.append(capfd.readouterr().out.replace(f"t0_chatty_{mode}", "K"))
        with pytest.raises(pypto_pro.KernelFault, match=r"pl.trap\(\) stopped the kernel") as info:
            kernel[None, 1](torch.zeros(8, 16), 11, 0.5, 3)
            sync()
        capfd.readouterr()
        texts.append((str(info.value).replace(f"t0_chatty_{mode}", "K"), info.value.line))
    assert texts[0] == texts[2] and texts[1] == texts[3]
    assert "n=5 f=2.500000 big=1099511627777 ok=1" in texts[0] and "no arguments" in texts[0]
    assert "n < 2" in texts[0] and "n was 5, f 1.250000" in texts[0] and "never printed" not in texts[0]


def test_a_valid_shape_fault_is_the_compiled_kernels(monkeypatch):
    def too_wide(x: pl.Tensor[[16, 64], pl.DT_FP32], c: pl.Scalar[pl.DT_INT32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0)
        with pl.section_vector():
            pl.set_validshape(t, [16, c])

    messages = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(too_wide, name=f"t0_too_wide_{mode}")
        with pytest.raises(pypto_pro.KernelFault, match=r"valid shape outside the tile's shape") as info:
            kernel[None, 1](torch.zeros(16, 64), 65)
            sync()
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")
        messages.append((str(info.value).replace(f"t0_too_wide_{mode}", "K"), info.value.line))
    assert messages[0] == messages[1]


# ---- faults: the same error, at the same line ----

def faulty(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32], row: pl.Scalar[pl.DT_INT32],
           d: pl.Scalar[pl.DT_INT32]):
    t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        q = 64 // d
        pl.load(t, x, [row + q - q, 0])
        pl.store(y, t, [0, 0])


@pytest.mark.parametrize("row, d, message", [(60, 1, r"GM access out of bounds|out of bounds"),
                                             (0, 0, r"integer division by zero")])
def test_faults_are_the_compiled_kernels(row, d, message, monkeypatch):
    messages = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(faulty, name=f"t0_faulty_{mode}")
        x = torch.rand(64, 64)
        with pytest.raises(pypto_pro.KernelFault, match=message) as info:
            kernel[None, 1](x, torch.zeros(64, 64), row, d)
            sync()
        messages.append((str(info.value).replace(f"t0_faulty_{mode}", "K"), info.value.line))
        y = torch.zeros(64, 64)
        kernel[None, 1](x, y, 0, 1)  # the stream stays usable
        sync()
        assert torch.equal(y[:16], x[:16])
    assert messages[0] == messages[1]


def by_index(x: pl.Tensor[[16, 64], pl.DT_FP32], y: pl.Tensor[[16, 64], pl.DT_FP32], k: pl.Scalar[pl.DT_INT32]):
    g = pl.make_tile_group(type=pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        t = g[k]
        pl.load(t, x, [0, 0])
        pl.store(y, t, [0, 0])


def test_a_group_index_fault_is_the_compiled_kernels(monkeypatch):
    messages = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(by_index, name=f"t0_by_index_{mode}")
        x, y = torch.rand(16, 64), torch.zeros(16, 64)
        kernel[None, 1](x, y, 1)
        sync()
        assert torch.equal(y, x) and kernel.compile_stats()[0]["tier0"] == (mode == "always")
        with pytest.raises(pypto_pro.KernelFault, match=r"tile group index out of range") as info:
            kernel[None, 1](x, y, 2)
            sync()
        messages.append((str(info.value).replace(f"t0_by_index_{mode}", "K"), info.value.line))
    assert messages[0] == messages[1]


# ---- the background compile ----

@pytest.fixture(scope="module")
def broken_cxx(tmp_path_factory):
    """A host compiler that builds the routines (and their executor) but fails on kernels; one file
    for the module, so its precompiled set is built once."""
    cxx = tmp_path_factory.mktemp("broken_cxx") / "cxx"
    cxx.write_text('#!/bin/sh\ncase "$*" in *call_kernel.cpp*) echo "refused on purpose" >&2; exit 1;; esac\n'
                   'exec g++ "$@"\n')
    cxx.chmod(0o755)
    return cxx


def test_a_background_compile_failure_is_raised_by_the_next_launch(broken_cxx, monkeypatch):
    monkeypatch.delenv("PYPTO_PRO_TIER0", raising=False)
    monkeypatch.setenv("PYPTO_PRO_CXX", str(broken_cxx))
    kernel = pl.jit(add, name="t0_add_broken_compiler")
    x = torch.randn(128, 128).half()
    z = torch.zeros_like(x)
    kernel[None, 1](x, x, z)  # runs on tier-0: correct
    sync()
    assert torch.equal(z, x + x) and kernel.compile_stats()[0]["tier0"]
    with pytest.raises(pypto_pro.CompileError, match=r"the host compiler failed on kernel 't0_add_broken_compiler'"):
        kernel.wait_compiled()
    with pytest.raises(pypto_pro.CompileError, match=r"refused on purpose"):
        kernel[None, 1](x, x, z)
    assert not kernel.compile_stats()[0]["compiled"]


def _launch_once_in_a_new_process(tmp_path, name, **env):
    """Runs the add kernel once (on tier-0) in a new process that then exits; (its stdout: the
    instance directory, its stderr)."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        import torch, pypto_pro
        import pypto_pro.language as pl
        from test_tier0 import add
        kernel = pl.jit(add, name={name!r})
        x = torch.ones(128, 128).half()
        z = torch.zeros_like(x)
        kernel[None, 1](x, x, z)
        pypto_pro.runtime.synchronize()
        assert kernel.compile_stats()[0]["tier0"] and (z == 2).all()
        print(kernel.compile_stats()[0]["dir"])
    """))
    env = dict(os.environ, PYTHONPATH=str(Path(pypto_pro.__file__).resolve().parents[1]), **env)
    env.pop("PYPTO_PRO_TIER0", None)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1], proc.stderr


def test_a_failure_nothing_raised_is_printed_at_exit(tmp_path, broken_cxx):
    _, stderr = _launch_once_in_a_new_process(tmp_path, "t0_add_exit_broken", PYPTO_PRO_CXX=str(broken_cxx))
    assert ("pypto_pro: a kernel library compiled in the background failed: kernel 't0_add_exit_broken': the host "
            "compiler failed on kernel 't0_add_exit_broken'") in stderr, stderr
    assert "refused on purpose" in stderr, stderr


def test_the_library_is_complete_when_the_process_exits(tmp_path):
    inst_dir, _ = _launch_once_in_a_new_process(tmp_path, "t0_add_exit")
    files = sorted(p.name for p in (tmp_path / inst_dir).iterdir())
    assert len([f for f in files if f.endswith(".so")]) == 1, files
    assert not [f for f in files if f.startswith(".")], files  # no private build directory left


# ---- cube kernels: GM -> L1 -> L0A/L0B -> matmul -> L0C -> GM ----

def _matmul(dtype, acc_dtype, m_tile, k_tile, n_tile, b_layout):
    def mm(a: pl.Tensor[[pl.DYNAMIC, k_tile], dtype], b: pl.Tensor[[k_tile, pl.DYNAMIC], dtype],
           c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], acc_dtype]):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[m_tile, k_tile], dtype=dtype,
                                                    target_memory=pl.MemorySpace.Mat), addrs=0x0, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[k_tile, n_tile], dtype=dtype, layout=b_layout,
                                                    target_memory=pl.MemorySpace.Mat), addrs=0x40000,
                                   mutex_ids=[2, 3])
        left = pl.make_tile_group(type=pl.TileType(shape=[m_tile, k_tile], dtype=dtype,
                                                   target_memory=pl.MemorySpace.Left), addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=pl.TileType(shape=[k_tile, n_tile], dtype=dtype,
                                                    target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile_group(type=pl.TileType(shape=[m_tile, n_tile], dtype=acc_dtype,
                                                  target_memory=pl.MemorySpace.Acc), addrs=0x0, mutex_ids=[8, 9])
        with pl.section_cube():
            col_tiles = c.shape[1] // n_tile
            for t in pl.range(pl.get_block_idx(), a.shape[0] // m_tile * col_tiles, pl.get_block_num()):
                ta, tb = a_mat.next(), b_mat.next()
                tl, tr, tc = left.next(), right.next(), acc.next()
                pl.load_tile(ta, a, [t // col_tiles, 0])
                pl.load_tile(tb, b, [0, t % col_tiles])
                pl.move(tl, ta)
                pl.move(tr, tb)
                pl.matmul(tc, tl, tr)
                pl.store_tile(c, tc, [t // col_tiles, t % col_tiles])
    return mm


@pytest.mark.parametrize("dtype, acc_dtype, torch_dtype, shape, b_layout", [
    (pl.DT_FP16, pl.DT_FP32, torch.float16, (64, 128, 64), pl.NZ),
    (pl.DT_BF16, pl.DT_FP32, torch.bfloat16, (32, 64, 128), pl.NZ),
    (pl.DT_INT8, pl.DT_INT32, torch.int8, (32, 64, 32), pl.NZ),
    (pl.DT_FP32, pl.DT_FP32, torch.float32, (32, 16, 64), pl.ZN),  # Mat ZN -> Right ZN: a plain copy
])
def test_cube_kernels_match_the_compiled_kernel_bit_for_bit(dtype, acc_dtype, torch_dtype, shape, b_layout,
                                                            monkeypatch):
    m_tile, k_tile, n_tile = shape
    both = _twins(_matmul(dtype, acc_dtype, m_tile, k_tile, n_tile, b_layout),
                  f"t0_mm_{torch_dtype}_{m_tile}".replace("torch.", ""), monkeypatch)
    g = torch.Generator().manual_seed(3)
    if torch_dtype == torch.int8:
        a = torch.randint(-100, 100, (3 * m_tile, k_tile), generator=g, dtype=torch.int8)
        b = torch.randint(-100, 100, (k_tile, 2 * n_tile), generator=g, dtype=torch.int8)
        c = torch.zeros(3 * m_tile, 2 * n_tile, dtype=torch.int32)
    else:
        a = torch.randn(3 * m_tile, k_tile, generator=g).to(torch_dtype)
        b = torch.randn(k_tile, 2 * n_tile, generator=g).to(torch_dtype)
        c = torch.zeros(3 * m_tile, 2 * n_tile)
    (_, _, t0_c), (_, _, compiled_c) = both(4, a, b, c)
    assert torch.equal(t0_c, compiled_c)
    if torch_dtype == torch.int8:
        assert torch.equal(t0_c.long(), a.long() @ b.long())
    else:
        torch.testing.assert_close(t0_c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def k_loop_with_bias(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                     b: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], bias: pl.Tensor[[1, pl.DYNAMIC], pl.DT_FP32],
                     c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP32]):
    """C = A @ B + bias over k slices of 32: matmul_bias for the first, matmul_acc for the others."""
    a_mat = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                         addr=0x1000)
    bias_mat = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat),
                            addr=0x2000)
    left = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right), addr=0x0)
    bias_t = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Bias), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
    with pl.section_cube():
        col_tiles = c.shape[1] // 32
        for t in pl.range(pl.get_block_idx(), c.shape[0] // 32 * col_tiles, pl.get_block_num()):
            i = t // col_tiles
            j = t % col_tiles
            pl.load_tile(bias_mat, bias, [0, j])
            pl.move(bias_t, bias_mat)
            for kk in pl.range(a.shape[1] // 32):
                pl.load_tile(a_mat, a, [i, kk])
                pl.load_tile(b_mat, b, [kk, j])
                pl.move(left, a_mat)
                pl.move(right, b_mat)
                if kk == 0:
                    pl.matmul(acc, left, right, bias=bias_t)
                else:
                    pl.matmul_acc(acc, acc, left, right)
            pl.store_tile(c, acc, [i, j])


def test_matmul_acc_and_matmul_bias_match_the_compiled_kernel_bit_for_bit(monkeypatch):
    both = _twins(k_loop_with_bias, "t0_k_loop_bias", monkeypatch)
    g = torch.Generator().manual_seed(9)
    a = torch.randn(64, 96, generator=g).half()
    b = torch.randn(96, 64, generator=g).half()
    bias = torch.randn(1, 64, generator=g)
    (*_, t0_c), (*_, compiled_c) = both(3, a, b, bias, torch.zeros(64, 64))
    assert torch.equal(t0_c, compiled_c)
    torch.testing.assert_close(t0_c, a.float() @ b.float() + bias, rtol=1e-4, atol=1e-3)


def test_the_matmul_examples_first_launch_runs_at_once(monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from matmul import matmul_kernel
    monkeypatch.delenv("PYPTO_PRO_TIER0", raising=False)
    kernel = pl.jit(matmul_kernel.fn, name="t0_matmul_example")
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    c = torch.zeros(256, 256)
    kernel[None, 4](a, b, c)
    sync()
    assert kernel.compile_stats()[0]["tier0"]
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)
    kernel.wait_compiled()
    c2 = torch.zeros_like(c)
    kernel[None, 4](a, b, c2)
    sync()
    assert torch.equal(c, c2)  # the library's bits


def partial_window(a: pl.Tensor[[64, 64], pl.DT_FP16], c: pl.Tensor[[64, 64], pl.DT_FP32]):
    ta = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                  valid_shape=[16, 64]), addr=0)  # a partial window without compact=1
    with pl.section_cube():
        pl.load_tile(ta, a, [0, 0])


def test_a_cube_fault_is_the_compiled_kernels(monkeypatch):
    messages = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(partial_window, name=f"t0_partial_{mode}")
        with pytest.raises(pypto_pro.KernelFault, match=r"partial valid window") as info:
            kernel[None, 1](torch.zeros(64, 64).half(), torch.zeros(64, 64))
            sync()
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")
        messages.append((str(info.value).replace(f"t0_partial_{mode}", "K"), info.value.line))
    assert messages[0] == messages[1]


# ---- tile subviews: tile[r0:r1, c0:c1] ----

def views(x: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32],
          strips: pl.Tensor[[8, 64], pl.DT_FP32], r: pl.Scalar[pl.DT_INT32], c: pl.Scalar[pl.DT_INT32]):
    t = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x8000)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.set_validshape(acc, [8, 64])            # (a view has its tile's type: acc is one of [32, 64] too)
        pl.expands(acc, 0.0)
        for k in pl.range(4):                       # a view per strip of 8 rows, summed into acc
            strip = t[k * 8:k * 8 + 8, :]
            pl.add(acc, acc, strip)
        part = t[r:r + 4, c:]                       # run-time bounds, an open end
        pl.muls(part, part, 10.0)                   # in place, through the view
        inner = part[1:3, 0:8]                      # a view of a view
        pl.adds(inner, inner, 0.5)
        pl.set_validshape(t, [30, 60])
        clipped = t[28:32, 56:64]                   # clipped to the tile's [30, 60] window: [2, 4]
        pl.muls(clipped, clipped, -1.0)
        pl.set_validshape(t, [32, 64])
        pl.store(out, t, [0, 0])
        pl.store(strips, acc, [0, 0])


def test_subviews_match_the_compiled_kernel_bit_for_bit(monkeypatch):
    both = _twins(views, "views", monkeypatch)
    x = torch.randn(32, 64)
    (t0_out, t0_strips), (c_out, c_strips) = [o[1:3] for o in both(1, x, torch.zeros(32, 64), torch.zeros(8, 64), 5, 40)]
    assert torch.equal(t0_out, c_out) and torch.equal(t0_strips, c_strips)
    ref = x.clone()
    ref[5:9, 40:] *= 10.0
    ref[6:8, 40:48] += 0.5
    ref[28:30, 56:60] *= -1.0
    assert torch.equal(c_out, ref)
    assert torch.equal(c_strips, x[0:8] + x[8:16] + x[16:24] + x[24:32])


def test_a_subview_fault_is_the_compiled_kernels(monkeypatch):
    faults = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(views, name=f"views_fault_{mode}")
        kernel[None, 1](torch.randn(32, 64), torch.zeros(32, 64), torch.zeros(8, 64), 30, 0)  # rows 30:34 of 32
        with pytest.raises(pypto_pro.KernelFault) as e:
            sync()
        faults.append(fault_of(e.value))
        assert kernel.compile_stats()[-1]["tier0"] == (mode == "always")
    assert faults[0] == faults[1] and "the slice leaves the tile's shape" in faults[0][2], faults


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
def test_every_example_runs_at_once_with_the_librarys_bits(monkeypatch, name):
    """Each example's own launch code on the executor (PYPTO_PRO_TIER0=always) and compiled: the
    mixed kernels too, their cores exchanging tiles through the cross-core data paths and flags."""
    runs = example_outputs(monkeypatch, name, "PYPTO_PRO_TIER0", ("always", "0"))
    for (module, _), mode in zip(runs, ("always", "0")):
        for kernel in (v for v in vars(module).values() if isinstance(v, pl.JitFunction)):
            for stats in kernel.compile_stats():
                assert stats["tier0"] == (mode == "always"), (kernel.kernel_name, stats["tier0_refused"])
    for on_tier0, compiled in zip(runs[0][1], runs[1][1]):
        assert torch.equal(on_tier0, compiled)


M_ROWS, K_COLS = 32, 64


def shifted_insert(x: pl.Tensor[[M_ROWS, K_COLS], pl.DT_FP16], eye: pl.Tensor[[K_COLS, K_COLS], pl.DT_FP16],
                   c: pl.Tensor[[M_ROWS, K_COLS], pl.DT_FP32], shift: pl.Scalar[pl.DT_INT32]):
    """data_paths.py's insert kernel, each AIV's rows inserted `shift` rows further down."""
    x_mat = pl.make_tile(pl.TileType(shape=[M_ROWS, K_COLS], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                     layout=pl.NZ), addr=0x4000)
    with pl.section_vector():
        rows = pl.make_tile(pl.TileType(shape=[M_ROWS // 2, K_COLS], dtype=pl.DT_FP16), addr=0x0)
        rows_nz = pl.make_tile(pl.TileType(shape=[M_ROWS // 2, K_COLS], dtype=pl.DT_FP16, layout=pl.NZ), addr=0x1000)
        row0 = pl.get_subblock_idx() * (M_ROWS // 2)
        pl.load(rows, x, [row0, 0])
        pl.move(rows_nz, rows)
        pl.insert(x_mat, rows_nz, [row0 + shift, 0])  # INSERT
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
    with pl.section_cube():
        eye_mat = pl.make_tile(pl.TileType(shape=[K_COLS, K_COLS], dtype=pl.DT_FP16,
                                           target_memory=pl.MemorySpace.Mat), addr=0x8000)
        left = pl.make_tile(pl.TileType(shape=[M_ROWS, K_COLS], dtype=pl.DT_FP16,
                                        target_memory=pl.MemorySpace.Left), addr=0x0)
        right = pl.make_tile(pl.TileType(shape=[K_COLS, K_COLS], dtype=pl.DT_FP16,
                                         target_memory=pl.MemorySpace.Right), addr=0x0)
        acc = pl.make_tile(pl.TileType(shape=[M_ROWS, K_COLS], dtype=pl.DT_FP32,
                                       target_memory=pl.MemorySpace.Acc), addr=0x0)
        pl.load(eye_mat, eye, [0, 0])
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(left, x_mat)
        pl.move(right, eye_mat)
        pl.matmul(acc, left, right)
        pl.store(c, acc, [0, 0], scale=0.5)  # through the fixpipe


def test_a_mixed_kernels_cross_core_paths_and_faults_match_the_library(monkeypatch):
    x, eye = torch.randn(M_ROWS, K_COLS).half(), torch.eye(K_COLS).half()
    both = _twins(shifted_insert, "t0_shifted_insert", monkeypatch)
    (*_, on_tier0, _), (*_, compiled, _) = both(1, x, eye, torch.zeros(M_ROWS, K_COLS), 0)
    assert torch.equal(on_tier0, compiled) and torch.equal(on_tier0, x.float() * 0.5)
    faults = []
    for name, mode in (("t0_shifted_insert_fault_tier0", "always"), ("t0_shifted_insert_fault_compiled", "0")):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(shifted_insert, name=name)
        kernel[None, 1](x, eye, torch.zeros(M_ROWS, K_COLS), 8)  # AIV 1's rows reach past the tile
        faults.append(synchronize_fault())
        assert kernel.compile_stats()[0]["tier0"] == (mode == "always")
    assert faults[0] == faults[1]
    assert faults[0][:2] == ("insert", line_of(shifted_insert, "# INSERT"))
    assert "the window at the offset does not fit" in faults[0][2]
    # the stream is usable after the fault
    (*_, on_tier0, _), (*_, compiled, _) = both(1, x, eye, torch.zeros(M_ROWS, K_COLS), 0)
    assert torch.equal(on_tier0, compiled)


def _product(acc, a, b):
    """acc = a [32, 64] @ b [64, 32] through L1 and L0 tiles of a's dtype (inlined into the cube sections
    of the kernels below)."""
    mem = pl.MemorySpace
    a_mat = pl.make_tile(pl.TileType(shape=[32, 64], dtype=a.dtype, target_memory=mem.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[64, 32], dtype=a.dtype, target_memory=mem.Mat), addr=0x1000)
    left = pl.make_tile(pl.TileType(shape=[32, 64], dtype=a.dtype, target_memory=mem.Left), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[64, 32], dtype=a.dtype, target_memory=mem.Right), addr=0x0)
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    pl.matmul(acc, left, right)


def _acc_to_vec(mode, dtype, relu, scale):
    """C = A @ B moved from the AIC's Acc into the AIVs' UB with acc_to_vec_mode `mode` (each AIV zeroes
    its tile first, then stores all of it: the rows or columns it did not get stay zero)."""
    to_vec = getattr(pl.AccToVecMode, mode)
    mem = pl.MemorySpace

    def acc_to_vec(a: pl.Tensor[[32, 64], pl.DT_FP16], b: pl.Tensor[[64, 32], pl.DT_FP16],
                   c: pl.Tensor[[64, 32], dtype]):
        vec = pl.make_tile(pl.TileType(shape=[32, 32], dtype=dtype), addr=0x0)
        with pl.section_vector():
            pl.expands(vec, 0)
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(c, vec, [pl.get_subblock_idx() * 32, 0])
        with pl.section_cube():
            acc = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP32, target_memory=mem.Acc), addr=0x0)
            _product(acc, a, b)
            pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)
            if relu:  # (relu and scale given together here)
                pl.move(vec, acc, acc_to_vec_mode=to_vec, relu_pre_mode=pl.ReluPreMode.NormalRelu, scale=scale)
            else:
                pl.move(vec, acc, acc_to_vec_mode=to_vec)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)

    return acc_to_vec


@pytest.mark.parametrize("mode", ["SingleModeVec0", "SingleModeVec1", "DualModeSplitM", "DualModeSplitN"])
@pytest.mark.parametrize("dtype,relu,scale", [(pl.DT_FP32, False, None), (pl.DT_FP16, True, 0.25),
                                              (pl.DT_INT8, True, 4.0)])
def test_acc_to_vec_moves_match_the_library(monkeypatch, mode, dtype, relu, scale):
    a, b = torch.randn(32, 64).half(), torch.randn(64, 32).half()
    torch_dtype = {pl.DT_FP32: torch.float32, pl.DT_FP16: torch.float16, pl.DT_INT8: torch.int8}[dtype]
    name = f"t0_acc_to_vec_{mode}_{dtype.name}"
    (*_, on_tier0), (*_, compiled) = _twins(_acc_to_vec(mode, dtype, relu, scale), name, monkeypatch)(
        1, a, b, torch.full((64, 32), 7, dtype=torch_dtype))
    assert torch.equal(on_tier0, compiled)
    c = a.float() @ b.float()
    want = (torch.relu(c) if relu else c) * (scale or 1.0)
    got = torch.zeros(32, 32)
    for aiv, rows, cols in {"SingleModeVec0": [(0, slice(0, 32), slice(0, 32))],
                            "SingleModeVec1": [(1, slice(0, 32), slice(0, 32))],
                            "DualModeSplitM": [(0, slice(0, 16), slice(0, 32)), (1, slice(16, 32), slice(0, 32))],
                            "DualModeSplitN": [(0, slice(0, 32), slice(0, 16)), (1, slice(0, 32), slice(16, 32))]}[mode]:
        share = compiled[32 * aiv:32 * aiv + 32].float()
        got[rows, cols] = share[:rows.stop - rows.start, :cols.stop - cols.start]
    tol = {pl.DT_FP32: 1e-4, pl.DT_FP16: 2e-2, pl.DT_INT8: 0.51}[dtype]
    if dtype is pl.DT_INT8:
        want = want.round().clamp(-128, 127)
    assert (got - want).abs().max() <= tol * max(1.0, want.abs().max().item() if dtype is not pl.DT_INT8 else 1.0)


def int8_product_stores(a: pl.Tensor[[32, 64], pl.DT_INT8], b: pl.Tensor[[64, 32], pl.DT_INT8],
                        q: pl.Tensor[[32, 32], pl.DT_INT8], h: pl.Tensor[[32, 32], pl.DT_FP16],
                        w: pl.Tensor[[32, 32], pl.DT_INT32]):
    """An int8 matmul's int32 sums stored as they are, quantised to int8 and dequantised to fp16."""
    acc = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Acc), addr=0x0)
    with pl.section_cube():
        _product(acc, a, b)
        pl.store(w, acc, [0, 0])
        pl.store(q, acc, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu, scale=0.01)
        pl.store(h, acc, [0, 0], scale=0.5)


def test_an_int32_accumulators_converting_stores_match_the_library(monkeypatch):
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (32, 64), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 32), generator=g, dtype=torch.int8)
    both = _twins(int8_product_stores, "t0_int8_stores", monkeypatch)
    outs = (torch.zeros(32, 32, dtype=torch.int8), torch.zeros(32, 32).half(), torch.zeros(32, 32, dtype=torch.int32))
    (*_, q0, h0, w0), (*_, q1, h1, w1) = both(1, a, b, *outs)
    assert torch.equal(q0, q1) and torch.equal(h0, h1) and torch.equal(w0, w1)
    sums = a.long() @ b.long()
    assert torch.equal(w1.long(), sums)
    assert (q1.float() - (torch.relu(sums.float()) * 0.01).round().clamp(-128, 127)).abs().max() <= 1
    torch.testing.assert_close(h1.float(), (sums.float() * 0.5).half().float(), rtol=1e-3, atol=1e-3)


def _elements(dtype, layout):
    """Element reads and writes (pl.getval / pl.setval, tile[i, j]) of a Vec tile in `layout` (an NZ one
    gets its values by a move from an ND tile, and gives them back so) at run-time offsets: the linear
    offsets land where the layout puts them."""
    def elements(x: pl.Tensor[[16, 32], dtype], y: pl.Tensor[[16, 32], dtype], at: pl.Scalar[pl.DT_INT32],
                 v: pl.Scalar[pl.DT_FP32]):
        rows = pl.make_tile(pl.TileType(shape=[16, 32], dtype=dtype), addr=0x0)
        t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=dtype, layout=layout), addr=0x1000)
        with pl.section_vector():
            pl.load(rows, x, [0, 0])
            pl.move(t, rows)
            first = pl.getval(t, at)
            pl.setval(t, at + 1, first * 2)  # READ-WRITE
            pl.setval(t, 3, v)
            pl.setval(t, at + 5, t[1, 2] + pl.getval(t, 0))
            pl.move(rows, t)
            pl.store(y, rows, [0, 0])

    return elements


@pytest.mark.parametrize("layout", ["ND", "NZ"])
@pytest.mark.parametrize("dtype", [pl.DT_FP32, pl.DT_INT32, pl.DT_FP16, pl.DT_BF16])
def test_element_reads_and_writes_match_the_library(monkeypatch, dtype, layout):
    torch_dtype = {pl.DT_FP32: torch.float32, pl.DT_INT32: torch.int32, pl.DT_FP16: torch.float16,
                   pl.DT_BF16: torch.bfloat16}[dtype]
    x = (torch.randn(16, 32) * 100).to(torch_dtype)
    both = _twins(_elements(dtype, getattr(pl, layout)), f"t0_elements_{dtype.name}_{layout}", monkeypatch)
    for at in (0, 17, 300):
        (*_, y0, _, _), (*_, y1, _, _) = both(1, x, torch.zeros_like(x), at, 2.75)
        assert torch.equal(y0, y1)
        if layout == "ND":  # row-major offsets: the expected values
            want = x.clone().flatten()
            want[at + 1] = want[at] * 2
            want[3] = torch.tensor(2.75).to(torch_dtype)
            want[at + 5] = want[32 + 2] + want[0]
            assert torch.equal(y1.flatten(), want)
    faults = []
    for name, mode in ((f"t0_elements_fault_{dtype.name}_{layout}", "always"),
                       (f"t0_elements_fault_{dtype.name}_{layout}_lib", "0")):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(_elements(dtype, getattr(pl, layout)), name=name)
        kernel[None, 1](x, torch.zeros_like(x), 511, 1.0)  # at + 1 is past the tile's 512 elements
        faults.append(synchronize_fault())
    assert faults[0] == faults[1] and faults[0][:2] == ("setval", line_of(_elements, "# READ-WRITE"))
    assert "element offset out of range" in faults[0][2]


def _gm_elements(dtype):
    """Element reads and writes of GM tensors (pl.getval / pl.setval at linear offsets)."""
    def gm_elements(x: pl.Tensor[[16, 32], dtype], y: pl.Tensor[[16, 32], dtype], at: pl.Scalar[pl.DT_INT32]):
        with pl.section_vector():
            first = pl.getval(x, at)  # GM READ
            pl.setval(y, at + 1, first * 3)
            pl.setval(y, 0, pl.getval(x, 511) + pl.getval(y, at + 1))

    return gm_elements


@pytest.mark.parametrize("dtype", [pl.DT_FP32, pl.DT_INT32, pl.DT_FP16, pl.DT_BF16])
def test_gm_element_reads_and_writes_match_the_library(monkeypatch, dtype):
    torch_dtype = {pl.DT_FP32: torch.float32, pl.DT_INT32: torch.int32, pl.DT_FP16: torch.float16,
                   pl.DT_BF16: torch.bfloat16}[dtype]
    x = (torch.randn(16, 32) * 10).to(torch_dtype)
    both = _twins(_gm_elements(dtype), f"t0_gm_elements_{dtype.name}", monkeypatch)
    for at in (0, 17, 300):
        (_, y0, _), (_, y1, _) = both(1, x, torch.zeros_like(x), at)
        assert torch.equal(y0, y1)
        want = torch.zeros(512, dtype=torch_dtype)
        want[at + 1] = (x.flatten()[at].float() * 3).to(torch_dtype)
        want[0] = (x.flatten()[511].float() + want[at + 1].float()).to(torch_dtype)
        assert torch.equal(y1.flatten(), want)
    faults = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(_gm_elements(dtype), name=f"t0_gm_elements_fault_{dtype.name}_{mode}")
        kernel[None, 1](x, torch.zeros_like(x), 512)
        faults.append(synchronize_fault())
    assert faults[0] == faults[1] and faults[0][:2] == ("getval", line_of(_gm_elements, "# GM READ"))
    assert "element offset out of range" in faults[0][2]


def _arg_extremes(dtype, rows_ok):
    """argmax / argmin along rows (fp16 / fp32) and columns (every dtype with a column form) of a tile with a
    partial valid window, into int32 index tiles."""
    def arg_extremes(x: pl.Tensor[[16, 64], dtype], by_row: pl.Tensor[[16, 8], pl.DT_INT32],
                     by_col: pl.Tensor[[2, 64], pl.DT_INT32]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[13, 50]), addr=0x0)
        tmp = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[13, 50]), addr=0x4000)
        icol = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.DT_INT32, valid_shape=[13, 1]), addr=0x8000)
        irow = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_INT32, valid_shape=[1, 50]), addr=0x9000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            if rows_ok:
                pl.expands(icol, 99)
                pl.argmax(icol, a, tmp)
                pl.store(by_row, icol, [0, 0])
                pl.expands(icol, 99)
                pl.argmin(icol, a, tmp, dim=0)
                pl.store(by_row, icol, [0, 1])
            pl.expands(irow, 99)
            pl.argmax(irow, a, tmp, dim=1)
            pl.store(by_col, irow, [0, 0])
            pl.expands(irow, 99)
            pl.argmin(irow, a, tmp, dim=1)
            pl.store(by_col, irow, [1, 0])

    return arg_extremes


@pytest.mark.parametrize("dtype,torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                               (pl.DT_INT32, torch.int32)])
def test_arg_extremes_match_the_library_and_torch(monkeypatch, dtype, torch_dtype):
    rows_ok = dtype is not pl.DT_INT32  # argmax(dim=0) takes fp16 / fp32
    x = torch.randint(-6, 7, (16, 64)).to(torch_dtype)  # small integers: ties, the first one wins
    both = _twins(_arg_extremes(dtype, rows_ok), f"t0_arg_{dtype.name}", monkeypatch)
    (_, r0, c0), (_, r1, c1) = both(1, x, torch.zeros(16, 8, dtype=torch.int32), torch.zeros(2, 64, dtype=torch.int32))
    assert torch.equal(r0, r1) and torch.equal(c0, c1)
    window = x[:13, :50].double()
    if rows_ok:
        assert torch.equal(r1[:13, 0], window.argmax(1).int()) and torch.equal(r1[:13, 1], window.argmin(1).int())
    assert torch.equal(c1[0, :50], window.argmax(0).int()) and torch.equal(c1[1, :50], window.argmin(0).int())


def _relu_forms(dtype):
    """add_relu / sub_relu: the sum (difference) into lhs, then its relu into out, over partial windows."""
    def relu_forms(x: pl.Tensor[[16, 64], dtype], y: pl.Tensor[[16, 64], dtype], out: pl.Tensor[[64, 64], dtype]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[12, 40]), addr=0x0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype), addr=0x4000)
        r = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[10, 40]), addr=0x8000)
        with pl.section_vector():
            pl.load(b, y, [0, 0])
            pl.load(a, x, [0, 0])
            pl.expands(r, -7.0)
            pl.add_relu(r, a, b)
            pl.store(out, a, [0, 0])
            pl.store(out, r, [16, 0])
            pl.load(a, x, [0, 0])
            pl.expands(r, -7.0)
            pl.sub_relu(r, a, b)
            pl.store(out, a, [32, 0])
            pl.store(out, r, [48, 0])

    return relu_forms


@pytest.mark.parametrize("dtype,torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16)])
def test_relu_forms_match_the_library(monkeypatch, dtype, torch_dtype):
    x, y = torch.randn(16, 64).to(torch_dtype), torch.randn(16, 64).to(torch_dtype)
    both = _twins(_relu_forms(dtype), f"t0_relu_forms_{dtype.name}", monkeypatch)
    (*_, out0), (*_, out1) = both(1, x, y, torch.zeros(64, 64, dtype=torch_dtype))
    assert torch.equal(out0, out1)
    for k, op in ((0, torch.add), (2, torch.sub)):
        inter = op(x.float(), y.float()).to(torch_dtype)[:12, :40]
        assert torch.equal(out1[16 * k:16 * k + 12, :40], inter)  # lhs holds the sum (difference)
        relu = out1[16 * (k + 1):16 * (k + 1) + 10]
        assert torch.equal(relu[:, :40], torch.relu(op(x.float(), y.float()).to(torch_dtype).float()[:10, :40]).to(torch_dtype))


def _ternary_forms(dtype):
    """addc, mul_add_dst, fused_mul_add, fused_mul_add_relu over a destination with a partial window."""
    def ternary_forms(x: pl.Tensor[[16, 64], dtype], y: pl.Tensor[[16, 64], dtype], z: pl.Tensor[[16, 64], dtype],
                      out: pl.Tensor[[64, 64], dtype]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype), addr=0x0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype), addr=0x4000)
        c = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype), addr=0x8000)
        d = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[11, 48]), addr=0xc000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.load(c, z, [0, 0])
            pl.addc(d, a, b, c)
            pl.store(out, d, [0, 0])
            pl.load(d, z, [0, 0])
            pl.mul_add_dst(d, a, b)
            pl.store(out, d, [16, 0])
            pl.load(d, z, [0, 0])
            pl.fused_mul_add(d, a, b)
            pl.store(out, d, [32, 0])
            pl.load(d, z, [0, 0])
            pl.fused_mul_add_relu(d, a, b)
            pl.store(out, d, [48, 0])

    return ternary_forms


@pytest.mark.parametrize("dtype,torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                               (pl.DT_BF16, torch.bfloat16), (pl.DT_INT32, torch.int32)])
def test_ternary_forms_match_the_library(monkeypatch, dtype, torch_dtype):
    gen = torch.Generator().manual_seed(3)
    x, y, z = ((torch.randn(16, 64, generator=gen) * 20).to(torch_dtype) for _ in range(3))
    both = _twins(_ternary_forms(dtype), f"t0_ternary_{dtype.name}", monkeypatch)
    (*_, out0), (*_, out1) = both(1, x, y, z, torch.zeros(64, 64, dtype=torch_dtype))
    assert torch.equal(out0, out1)
    r = lambda v: v.to(torch_dtype).double()  # each intermediate rounded to the element type
    xd, yd, zd = x.double(), y.double(), z.double()
    expected = [r(xd + yd) + zd, r(xd * yd) + zd, r(xd * zd) + yd, torch.relu(r(zd * xd) + yd)]
    for k, want in enumerate(expected):
        got = out1[16 * k:16 * k + 11, :48]
        assert torch.equal(got, want.to(torch_dtype)[:11, :48]), k


def _fill_index(out: pl.Tensor[[2, 48], pl.DT_INT32], out16: pl.Tensor[[1, 32], pl.DT_INT16],
                start: pl.Scalar[pl.DT_INT32]):
    """fill_index along the first row's valid columns (wrapping in the element type)."""
    t = pl.make_tile(pl.TileType(shape=[2, 48], dtype=pl.DT_INT32), addr=0)
    s = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_INT16, valid_shape=[1, 20]), addr=0x1000)
    with pl.section_vector():
        pl.expands(t, -1)
        pl.expands(s, 7)
        pl.set_validshape(t, [2, 40])
        pl.fill_index(t, start)
        pl.fill_index(s, start)
        pl.set_validshape(t, [2, 48])
        pl.store(out, t, [0, 0])
        pl.store(out16, s, [0, 0])


def test_fill_index_matches_the_library(monkeypatch):
    both = _twins(_fill_index, "t0_fill_index", monkeypatch)
    for start in (-5, 65530):
        (o0, p0, _), (o1, p1, _) = both(1, torch.zeros(2, 48, dtype=torch.int32), torch.zeros(1, 32, dtype=torch.int16),
                                        start)
        assert torch.equal(o0, o1) and torch.equal(p0, p1)
        ref = torch.full((2, 48), -1, dtype=torch.int32)
        ref[0, :40] = torch.arange(start, start + 40, dtype=torch.int32)
        assert torch.equal(o1, ref)
        wrapped = (torch.arange(start, start + 20) + 32768) % 65536 - 32768  # int16 arithmetic wraps
        assert torch.equal(p1[0, :20], wrapped.to(torch.int16)) and torch.equal(p1[0, 20:], torch.zeros(12).short())


def _axpy(dtype, src_dtype):
    """axpy into a destination with a partial window (src_dtype fp16 into fp32: the widening form)."""
    def axpy(x: pl.Tensor[[16, 64], src_dtype], y: pl.Tensor[[16, 64], dtype], out: pl.Tensor[[16, 64], dtype],
             alpha: pl.Scalar[pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=src_dtype), addr=0x0)
        d = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1]), addr=0x8000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(d, y, [0, 0])
            pl.set_validshape(d, [13, 40])
            pl.axpy(d, a, alpha)
            pl.set_validshape(d, [16, 64])
            pl.store(out, d, [0, 0])

    return axpy


@pytest.mark.parametrize("dtype,src_dtype,torch_dtype,torch_src",
                         [(pl.DT_FP32, pl.DT_FP32, torch.float32, torch.float32),
                          (pl.DT_FP16, pl.DT_FP16, torch.float16, torch.float16),
                          (pl.DT_FP32, pl.DT_FP16, torch.float32, torch.float16)])
def test_axpy_matches_the_library_and_torch(monkeypatch, dtype, src_dtype, torch_dtype, torch_src):
    gen = torch.Generator().manual_seed(5)
    x, y = torch.randn(16, 64, generator=gen).to(torch_src), torch.randn(16, 64, generator=gen).to(torch_dtype)
    both = _twins(_axpy(dtype, src_dtype), f"t0_axpy_{dtype.name}_{src_dtype.name}", monkeypatch)
    (*_, out0, _), (*_, out1, _) = both(1, x, y, torch.zeros(16, 64, dtype=torch_dtype), 0.3)
    assert torch.equal(out0, out1)
    alpha = torch.tensor(0.3).to(torch_src).float()  # alpha rounded to src's dtype, the product to out's
    want = ((alpha * x.float()).to(torch_dtype).float() + y.float()).to(torch_dtype)
    assert torch.equal(out1[:13, :40], want[:13, :40])
    assert torch.equal(out1[13:], y[13:]) and torch.equal(out1[:, 40:], y[:, 40:])  # outside the window: kept


def _part_ops(dtype):
    """partadd / partmax / partmin / partmul: src1's window inside src0's, then src0's inside src1's."""
    def part_ops(x: pl.Tensor[[16, 64], dtype], y: pl.Tensor[[16, 64], dtype], out: pl.Tensor[[128, 64], dtype]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1]), addr=0x0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1]), addr=0x4000)
        d = pl.make_tile(pl.TileType(shape=[16, 64], dtype=dtype, valid_shape=[-1, -1]), addr=0x8000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.load(d, y, [0, 0])
            pl.set_validshape(a, [12, 48])
            pl.set_validshape(b, [7, 20])
            pl.set_validshape(d, [12, 48])
            pl.partadd(d, a, b)
            pl.store(out, d, [0, 0])
            pl.partmax(d, a, b)
            pl.store(out, d, [16, 0])
            pl.partmin(d, a, b)
            pl.store(out, d, [32, 0])
            pl.partmul(d, a, b)
            pl.store(out, d, [48, 0])
            pl.set_validshape(a, [16, 64])  # whole rows: src0 inside src1
            pl.set_validshape(b, [16, 64])
            pl.set_validshape(d, [16, 64])
            pl.set_validshape(a, [5, 64])
            pl.partadd(d, a, b)
            pl.store(out, d, [64, 0])
            pl.partmax(d, a, b)
            pl.store(out, d, [80, 0])
            pl.partmin(d, a, b)
            pl.store(out, d, [96, 0])
            pl.partmul(d, a, b)
            pl.store(out, d, [112, 0])

    return part_ops


@pytest.mark.parametrize("dtype,torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                               (pl.DT_INT32, torch.int32), (pl.DT_INT16, torch.int16)])
def test_partial_ops_match_the_library_and_torch(monkeypatch, dtype, torch_dtype):
    gen = torch.Generator().manual_seed(9)
    if torch_dtype.is_floating_point:
        x, y = (torch.randn(16, 64, generator=gen).to(torch_dtype) for _ in range(2))
    else:  # products and sums that wrap in 16 bits
        x, y = (torch.randint(-30000, 30000, (16, 64), generator=gen).to(torch_dtype) for _ in range(2))
    both = _twins(_part_ops(dtype), f"t0_part_{dtype.name}", monkeypatch)
    (*_, out0), (*_, out1) = both(1, x, y, torch.zeros(128, 64, dtype=torch_dtype))
    assert torch.equal(out0, out1)
    wide = torch.int64 if not torch_dtype.is_floating_point else torch.float64

    def combine(a, b, op):
        if op == "add":
            v = a.to(wide) + b.to(wide)
        elif op == "max":
            v = torch.maximum(a.to(wide), b.to(wide))
        elif op == "min":
            v = torch.minimum(a.to(wide), b.to(wide))
        else:
            v = a.to(wide) * b.to(wide)
        if torch_dtype.is_floating_point:
            return v.to(torch_dtype)
        bits = torch.iinfo(torch_dtype).bits  # integers wrap
        return ((v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)).to(torch_dtype)

    for k, op in enumerate(("add", "max", "min", "mul")):
        got = out1[16 * k:16 * k + 12, :48]  # src0's window is out's; src1 valid in its top-left 7 x 20
        want = x[:12, :48].clone()
        want[:7, :20] = combine(x[:7, :20], y[:7, :20], op)
        assert torch.equal(got, want), op
        got = out1[64 + 16 * k:64 + 16 * k + 16]  # src1's window is out's; src0 valid in its first 5 rows
        want = y.clone()
        want[:5] = combine(x[:5], y[:5], op)
        assert torch.equal(got, want), op


def part_misfit(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
    a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x0)
    b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1]), addr=0x4000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.load(b, x, [0, 0])
        pl.set_validshape(a, [8, 64])
        pl.set_validshape(b, [16, 32])
        pl.partadd(a, a, b)  # neither source's window is out's 8 x 64 and holds the other's
        pl.store(out, a, [0, 0])


def fillpad_inplace_elsewhere(x: pl.Tensor[[8, 32], pl.DT_FP32], out: pl.Tensor[[8, 32], pl.DT_FP32]):
    src = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_FP32), addr=0x0)
    dst = pl.make_tile(pl.TileType(shape=[8, 32], dtype=pl.DT_FP32, pad=pl.TilePad.zero), addr=0x1000)
    with pl.section_vector():
        pl.load(src, x, [0, 0])
        pl.fillpad(dst, src, mode=pl.FillPadMode.INPLACE)  # INPLACE from another address
        pl.store(out, dst, [0, 0])


@pytest.mark.parametrize("fn,args,text,name", [
    (part_misfit, (torch.zeros(16, 64), torch.zeros(16, 64)),
     "'src0' [8, 64] and 'src1' [16, 32] do not fit 'out' [8, 64]", "part_misfit"),
    (fillpad_inplace_elsewhere, (torch.zeros(8, 32), torch.zeros(8, 32)), "mode=INPLACE fills 'out' in place",
     "fillpad_elsewhere")])
def test_partial_op_and_fillpad_faults_are_the_compiled_kernels(monkeypatch, fn, args, text, name):
    faults = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(fn, name=f"t0_{name}_{mode}")
        kernel[None, 1](*(a.clone() for a in args))
        with pytest.raises(pypto_pro.KernelFault) as e:
            sync()
        faults.append(fault_of(e.value))
        assert kernel.compile_stats()[-1]["tier0"] == (mode == "always")
    assert faults[0] == faults[1] and text in faults[0][2], faults
    assert faults[0][1] == line_of(fn, "pl.partadd(a, a, b)" if name == "part_misfit" else "pl.fillpad(dst")


def _fillpads(dtype):
    """fillpad NORMAL (pad max), EXPAND into a wider tile (pad min), INPLACE (pad zero)."""
    def fillpads(x: pl.Tensor[[8, 32], dtype], out: pl.Tensor[[24, 64], dtype]):
        src = pl.make_tile(pl.TileType(shape=[8, 32], dtype=dtype, valid_shape=[-1, -1]), addr=0x0)
        same = pl.make_tile(pl.TileType(shape=[8, 32], dtype=dtype, pad=pl.TilePad.max), addr=0x1000)
        wide = pl.make_tile(pl.TileType(shape=[8, 64], dtype=dtype, pad=pl.TilePad.min), addr=0x2000)
        inplace = pl.make_tile(pl.TileType(shape=[8, 32], dtype=dtype, pad=pl.TilePad.zero, valid_shape=[-1, -1]),
                               addr=0x4000)
        with pl.section_vector():
            pl.load(src, x, [0, 0])
            pl.set_validshape(src, [5, 19])
            pl.fillpad(same, src)
            pl.fillpad(wide, src, mode=pl.FillPadMode.EXPAND)
            pl.load(inplace, x, [0, 0])
            pl.set_validshape(inplace, [3, 7])
            pl.fillpad(inplace, inplace, mode=pl.FillPadMode.INPLACE)
            pl.set_validshape(inplace, [8, 32])
            pl.store(out, same, [0, 0])
            pl.store(out, wide, [8, 0])
            pl.store(out, inplace, [16, 0])

    return fillpads


@pytest.mark.parametrize("dtype,torch_dtype", [(pl.DT_FP32, torch.float32), (pl.DT_FP16, torch.float16),
                                               (pl.DT_INT32, torch.int32), (pl.DT_UINT8, torch.uint8)])
def test_fillpad_matches_the_library_and_the_pad_values(monkeypatch, dtype, torch_dtype):
    if torch_dtype.is_floating_point:
        x = (torch.randn(8, 32) * 50).to(torch_dtype)
    else:
        x = torch.randint(0 if torch_dtype == torch.uint8 else -100, 100, (8, 32)).to(torch_dtype)
    both = _twins(_fillpads(dtype), f"t0_fillpad_{dtype.name}", monkeypatch)
    (_, out0), (_, out1) = both(1, x, torch.full((24, 64), 1, dtype=torch_dtype))
    assert torch.equal(out0, out1)
    if torch_dtype.is_floating_point:
        big, small = float("inf"), float("-inf")
    else:
        big, small = torch.iinfo(torch_dtype).max, torch.iinfo(torch_dtype).min
    for cols, fill, (rows, valid_cols), at in ((32, big, (5, 19), 0), (64, small, (5, 19), 8), (32, 0, (3, 7), 16)):
        want = torch.full((8, cols), fill, dtype=torch_dtype)
        want[:rows, :valid_cols] = x[:rows, :valid_cols]
        assert torch.equal(out1[at:at + 8, :cols], want), at


# ---- GM views and pointers ----

def views_and_pointers(x: pl.Tensor[[8, 64], pl.DT_FP32], w: pl.Ptr[pl.DT_UINT8], out: pl.Tensor[[32, 32], pl.DT_FP32],
                       skip: pl.Scalar[pl.DT_INT32], rows: pl.Scalar[pl.DT_INT32]):
    """A transposed and a folded view of a tensor, a byte workspace moved and read as fp32, a strided
    view of it with run-time strides, and element access through views."""
    t = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0x0)
    u = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32), addr=0x2000)
    with pl.section_vector():
        xt = pl.make_tensor(x, [64, 8], stride=[1, 64])  # x transposed
        folded = pl.make_tensor(x, [16, 32])              # the same bytes, 16 rows of 32
        pl.load(t, folded, [0, 0])
        pl.store(out, t, [0, 0])
        data = pl.make_ptr(pl.addptr(w, skip), dtype=pl.DT_FP32)  # a byte offset, then fp32 elements
        grid = pl.make_tensor(data, [rows, 32], stride=[64, 1])  # every other row of 32
        pl.load(u, grid, [0, 0])
        pl.store(out, u, [16, 0])
        same = grid
        v = pl.getval(xt, 3 * 8 + 5)  # xt[3, 5] = x[5, 3]
        pl.setval(same, 1, v + pl.getval(grid, 0))
        pl.load(u, same, [0, 0])
        pl.store(out, u, [16, 0])


def test_views_and_pointers_match_the_compiled_kernel(monkeypatch):
    both = _twins(views_and_pointers, "t0_views", monkeypatch)
    x = torch.randn(8, 64)
    w = torch.randn(16 * 64 + 1).view(torch.uint8)  # 16 rows of 64 fp32 after 4 bytes
    (_, w0, out0, *_), (_, w1, out1, *_) = both(1, x, w, torch.zeros(32, 32), 4, 16)
    assert torch.equal(out0, out1) and torch.equal(w0, w1)
    assert torch.equal(out1[:16], x.reshape(16, 32))
    before, after = w[4:].view(torch.float32), w1[4:].view(torch.float32)  # the workspace's fp32 data
    assert after[1] == x[5, 3] + before[0]  # set through the view: the workspace itself changed
    assert torch.equal(after[2:], before[2:]) and after[0] == before[0]
    assert torch.equal(out1[16:], after.reshape(16, 64)[:, :32])


@pytest.mark.parametrize("skip,rows,text", [
    (1, 16, "is not aligned to the 4 bytes of the new dtype"),  # make_ptr at byte 1
    (8 * 1024, 16, "leaves its buffer"),                         # addptr past the end
    (4 + 64 * 4, 16, "buffer"),                                  # the view's 16th row lies past the workspace
    (4, -1, "dim 0 of view 'grid' is -1")])                      # a negative dim
def test_view_and_pointer_faults_are_the_compiled_kernels(monkeypatch, skip, rows, text):
    faults = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(views_and_pointers, name=f"t0_view_fault_{skip}_{rows}_{mode}")
        w = torch.zeros(16 * 64 + 1, dtype=torch.float32).view(torch.uint8)
        kernel[None, 1](torch.zeros(8, 64), w, torch.zeros(32, 32), skip, rows)
        with pytest.raises(pypto_pro.KernelFault) as e:
            sync()
        faults.append(fault_of(e.value))
        assert kernel.compile_stats()[-1]["tier0"] == (mode == "always")
    assert faults[0] == faults[1] and text in faults[0][2], faults


def restrided(x: pl.Tensor[[64, 32], pl.DT_FP16], out: pl.Tensor[[8, 32], pl.DT_FP16], s: pl.Scalar[pl.DT_INT32]):
    """pl.set_stride with a run-time row stride, in a loop, on a parameter and on a view of it."""
    t = pl.make_tile(pl.TileType(shape=[2, 32], dtype=pl.DT_FP16), addr=0x0)
    with pl.section_vector():
        v = pl.make_tensor(x, [32, 64])
        for i in pl.range(2):
            pl.set_stride(x, [s * (i + 1), 1])
            pl.load(t, x, [i, 0])
            pl.store(out, t, [2 * i, 0])
        pl.set_stride(v, [s, 2])  # every other element of rows s apart
        pl.load(t, v, [0, 0])
        pl.store(out, t, [4, 0])
        pl.setval(out, 6 * 32, pl.getval(x, 32 + 1))  # element [1, 1] of x as its last strides place it


def test_set_stride_matches_the_compiled_kernel(monkeypatch):
    both = _twins(restrided, "t0_restrided", monkeypatch)
    x = torch.randn(64, 32).half()
    (_, out0, _), (_, out1, _) = both(1, x, torch.zeros(8, 32, dtype=torch.float16), 96)
    assert torch.equal(out0, out1)
    flat = x.reshape(-1)
    for i in range(2):  # rows i and i + 1 of a view with row stride 96 (i + 1)
        stride = 96 * (i + 1)
        assert torch.equal(out1[2 * i], flat[i * stride:i * stride + 32])
        assert torch.equal(out1[2 * i + 1], flat[(i + 1) * stride:(i + 1) * stride + 32])
    assert torch.equal(out1[4], flat[0:64:2]) and torch.equal(out1[5], flat[96:160:2])
    assert out1[6, 0] == flat[1 * 192 + 1]


def test_a_negative_stride_faults_as_the_compiled_kernel(monkeypatch):
    faults = []
    for mode in ("always", "0"):
        monkeypatch.setenv("PYPTO_PRO_TIER0", mode)
        kernel = pl.jit(restrided, name=f"t0_restrided_fault_{mode}")
        kernel[None, 1](torch.zeros(64, 32).half(), torch.zeros(8, 32, dtype=torch.float16), -3)
        with pytest.raises(pypto_pro.KernelFault) as e:
            sync()
        faults.append(fault_of(e.value))
        assert kernel.compile_stats()[-1]["tier0"] == (mode == "always")
    assert faults[0] == faults[1] and "stride 0 of 'x' is -3; strides must not be negative" in faults[0][2], faults


def _step_casts(lhs_dtype, out_dtype, mode, overlap):
    """add_relu_cast, sub_relu_cast and mul_cast over a window of whole rows and one of part rows (the
    step and the conversion interleave run by run); `overlap`: out shares lhs's first bytes."""
    def step_casts(x: pl.Tensor[[16, 64], lhs_dtype], y: pl.Tensor[[16, 64], lhs_dtype],
                   out: pl.Tensor[[96, 64], out_dtype], lhs_out: pl.Tensor[[96, 64], lhs_dtype]):
        a = pl.make_tile(pl.TileType(shape=[16, 64], dtype=lhs_dtype), addr=0x0)
        b = pl.make_tile(pl.TileType(shape=[16, 64], dtype=lhs_dtype), addr=0x8000)
        d = pl.make_tile(pl.TileType(shape=[16, 64], dtype=out_dtype, valid_shape=[-1, -1]),
                         addr=0x100 if overlap else 0x10000)  # overlap: row 0 over lhs row 1
        with pl.section_vector():
            pl.load(b, y, [0, 0])
            for k in pl.range(6):
                pl.load(a, x, [0, 0])
                pl.expands(d, 3)
                if k % 2 == 0:
                    pl.set_validshape(d, [12, 64])
                else:
                    pl.set_validshape(d, [12, 40])
                if k < 2:
                    pl.add_relu_cast(d, a, b, target_type=out_dtype, mode=mode)
                elif k < 4:
                    pl.sub_relu_cast(d, a, b, target_type=out_dtype, mode=mode)
                else:
                    pl.mul_cast(d, a, b, target_type=out_dtype, mode=mode)
                pl.set_validshape(d, [16, 64])
                pl.store(out, d, [16 * k, 0])
                pl.store(lhs_out, a, [16 * k, 0])

    return step_casts


@pytest.mark.filterwarnings("ignore::pypto_pro.TileOverlapWarning")
@pytest.mark.parametrize("lhs_dtype,out_dtype,torch_lhs,torch_out,mode,overlap", [
    (pl.DT_FP32, pl.DT_FP16, torch.float32, torch.float16, pl.RoundMode.CAST_RINT, False),
    (pl.DT_FP32, pl.DT_FP16, torch.float32, torch.float16, pl.RoundMode.CAST_ODD, False),
    (pl.DT_FP32, pl.DT_INT32, torch.float32, torch.int32, pl.RoundMode.CAST_FLOOR, False),
    (pl.DT_FP16, pl.DT_FP32, torch.float16, torch.float32, pl.RoundMode.CAST_ODD, False),  # exact: any mode
    (pl.DT_FP32, pl.DT_BF16, torch.float32, torch.bfloat16, pl.RoundMode.CAST_TRUNC, True)])
def test_step_casts_match_the_library(monkeypatch, lhs_dtype, out_dtype, torch_lhs, torch_out, mode, overlap):
    gen = torch.Generator().manual_seed(11)
    x, y = ((torch.randn(16, 64, generator=gen) * 40).to(torch_lhs) for _ in range(2))
    name = f"t0_step_casts_{lhs_dtype.name}_{out_dtype.name}_{mode.name}_{overlap}"
    both = _twins(_step_casts(lhs_dtype, out_dtype, mode, overlap), name, monkeypatch)
    (*_, out0, lhs0), (*_, out1, lhs1) = both(1, x, y, torch.zeros(96, 64, dtype=torch_out),
                                              torch.zeros(96, 64, dtype=torch_lhs))
    bits = lambda v: v.view(torch.int16 if v.element_size() == 2 else torch.int32)  # NaNs compare by their bits
    assert torch.equal(bits(out0), bits(out1)) and torch.equal(bits(lhs0), bits(lhs1))
    if overlap:
        return  # out wrote over lhs: what each holds depends on the order of the runs, which both share
    xd, yd = x.double(), y.double()
    steps = [torch.relu((xd + yd).to(torch_lhs).double()), torch.relu((xd - yd).to(torch_lhs).double()),
             (xd * yd).to(torch_lhs).double()]
    for k in range(6):
        cols = 64 if k % 2 == 0 else 40
        want = steps[k // 2].to(torch_lhs)
        assert torch.equal(lhs1[16 * k:16 * k + 12, :cols], want[:12, :cols]), k  # lhs keeps the step's result
        if mode == pl.RoundMode.CAST_RINT or torch_out == torch.float32:
            assert torch.equal(out1[16 * k:16 * k + 12, :cols], want[:12, :cols].to(torch_out)), k
        elif torch_out == torch.int32:  # FLOOR
            assert torch.equal(out1[16 * k:16 * k + 12, :cols], torch.floor(want[:12, :cols].double()).to(torch.int32)), k


def _int_step_cast(out: pl.Tensor[[16, 32], pl.DT_INT16], lhs_out: pl.Tensor[[16, 32], pl.DT_INT32],
                   x: pl.Tensor[[16, 32], pl.DT_INT32]):
    """mul_cast of int32 into int16: the product wraps in int32, the conversion in int16."""
    a = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_INT32), addr=0x0)
    d = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_INT16, valid_shape=[10, 20]), addr=0x1000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.expands(d, 7)
        pl.mul_cast(d, a, a, target_type=pl.DT_INT16)
        pl.store(out, d, [0, 0])
        pl.store(lhs_out, a, [0, 0])


def test_an_integer_mul_cast_matches_the_library_and_wraps(monkeypatch):
    both = _twins(_int_step_cast, "t0_int_mul_cast", monkeypatch)
    x = torch.randint(-100000, 100000, (16, 32), dtype=torch.int32)
    (out0, lhs0, _), (out1, lhs1, _) = both(1, torch.zeros(16, 32, dtype=torch.int16),
                                            torch.zeros(16, 32, dtype=torch.int32), x)
    assert torch.equal(out0, out1) and torch.equal(lhs0, lhs1)
    square = (x.long() * x.long() + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert torch.equal(lhs1[:10, :20], square[:10, :20].int())
    assert torch.equal(out1[:10, :20], ((square[:10, :20] + 2 ** 15) % 2 ** 16 - 2 ** 15).short())


def test_sync_all_runs_on_the_executor_with_the_librarys_results(monkeypatch):
    from test_mixed import rotate_rows  # each block stores its row, waits for all, reads the next block's
    both = _twins(rotate_rows.fn, "t0_rotate_rows", monkeypatch)
    x = torch.randn(8, 64)
    (_, mid0, out0), (_, mid1, out1) = both(8, x, torch.zeros(8, 64), torch.zeros(8, 64))
    assert torch.equal(out0, out1) and torch.equal(mid0, mid1)
    assert torch.equal(out1, 2 * torch.roll(x, -1, dims=0) + 1)


def skipping(x: pl.Tensor[[8, 64], pl.DT_FP32]):
    with pl.section_vector():
        if pl.get_block_idx() != 3:
            pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)


def test_a_sync_all_deadlock_on_the_executor_is_the_compiled_kernels(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_TIER0", "always")
    kernel = pl.jit(skipping, name="t0_skipping")
    kernel[None, 8](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelDeadlock, match=r"7 of 8 blocks wait at pl.system.sync_all\(core_type=AIV_ONLY\) "
                                                       r"\(.*\) for block\(s\) 3, which never reach it"):
        sync()
    assert kernel.compile_stats()[-1]["tier0"]

"""The vector ops of docs/language.md#compute, each run in a kernel and compared with a torch/numpy
reference: exactly where the op is exactly rounded, within stated tolerances otherwise.

Every family compiles one kernel per dtype (cached below) that runs all of its ops, each on the full
tile and on a tile view with a smaller valid window. The view shares the full tile's memory, which
is first filled with a sentinel, so storing the full tile shows that nothing outside the window
changed.
"""

import functools
import inspect

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

R, C = 16, 48      # the shape of every data tile
WR, WC = 13, 40    # the valid window of the tile views

FP16, BF16, FP32 = pl.DT_FP16, pl.DT_BF16, pl.DT_FP32
INT8, INT16, INT32, INT64, UINT8 = pl.DT_INT8, pl.DT_INT16, pl.DT_INT32, pl.DT_INT64, pl.DT_UINT8
FLOATS = (FP16, BF16, FP32)
TORCH = {FP16: torch.float16, BF16: torch.bfloat16, FP32: torch.float32, INT8: torch.int8, INT16: torch.int16,
         INT32: torch.int32, INT64: torch.int64, UINT8: torch.uint8}
# Relative tolerances of the ops that are not exactly rounded: about one ulp of the type.
RTOL = {FP32: 1e-5, FP16: 1e-3, BF16: 8e-3}


def dtype_id(d):
    return d.name


def sync():
    pypto_pro.runtime.synchronize()


def sentinel(dtype):
    return -7.5 if dtype in FLOATS else 77


def data(dtype, shape, kind="any", seed=0):
    """Random inputs: "any" (both signs), "pos" (> 0), "nonzero", "small" (few distinct values: ties)."""
    g = torch.Generator().manual_seed(seed)
    if dtype in FLOATS:
        if kind == "pos":
            v = torch.rand(shape, generator=g) * 8 + 1 / 16
        elif kind == "nonzero":
            sign = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
            v = (torch.rand(shape, generator=g) * 4 + 0.25) * sign
        elif kind == "small":
            v = torch.randint(-4, 5, shape, generator=g).float() / 2
        else:
            v = torch.randn(shape, generator=g) * 3
        return v.to(TORCH[dtype])
    info = torch.iinfo(TORCH[dtype])
    lo, hi = max(info.min, -100), min(info.max, 100)
    if kind == "small":
        lo, hi = max(lo, -5), 5
    v = torch.randint(1 if kind == "pos" else lo, hi + 1, shape, generator=g)
    if kind == "nonzero":
        v = torch.where(v == 0, torch.ones_like(v), v)
    return v.to(TORCH[dtype])


def windowed(ref, dtype, shape=(R, C), rows=WR, cols=WC):
    """What a full-tile store shows after an op on the view: the reference inside the window, the
    sentinel elsewhere."""
    out = torch.full(shape, sentinel(dtype), dtype=ref.dtype)
    out[:rows, :cols] = ref[:rows, :cols]
    return out


def assert_exact(actual, expected, what):
    assert actual.dtype == expected.dtype, what
    nan = torch.isnan(expected) if expected.is_floating_point() else torch.zeros_like(expected, dtype=torch.bool)
    assert torch.equal(torch.isnan(actual) if actual.is_floating_point() else nan, nan), what
    diff = (actual != expected) & ~nan
    assert not diff.any(), f"{what}: {int(diff.sum())} elements differ, first at {diff.nonzero()[0].tolist()}: " \
                           f"{actual[diff][:4].tolist()} vs {expected[diff][:4].tolist()}"


def assert_near(actual, expected, dtype, what, atol=None):
    rtol = RTOL[dtype]
    torch.testing.assert_close(actual.double(), expected.double(), rtol=rtol, atol=atol if atol is not None else rtol,
                               msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------------------------------------
# Unary ops and expands
# ---------------------------------------------------------------------------------------------

UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "relu"]
UNARY_DTYPES = {  # per the public API reference of each op
    "neg": {INT16, INT32, INT64, FP16, BF16, FP32},
    "abs": {INT8, INT16, INT32, FP16, FP32},
    "exp": set(FLOATS), "log": set(FLOATS), "sqrt": set(FLOATS),
    "rsqrt": {FP16, FP32}, "recip": {FP16, FP32},
    "relu": {FP16, FP32, INT32},
}


def relu(t):  # torch.relu has no fp16 CPU kernel in torch 1.13
    return torch.where(t < 0, torch.zeros_like(t), t)


UNARY_REF = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
             "rsqrt": torch.rsqrt, "recip": torch.reciprocal, "relu": relu}
UNARY_INPUT = {"log": "pos", "sqrt": "pos", "rsqrt": "pos", "recip": "nonzero"}
APPROXIMATE = {"exp", "log", "rsqrt"}  # the others are exactly rounded


@functools.lru_cache(maxsize=None)
def unary_kernel(dtype):
    names = [n for n in UNARY if dtype in UNARY_DTYPES[n]]
    ops = [getattr(pl, n) for n in names]
    n = len(ops)
    fill = sentinel(dtype)

    @pl.jit(name=f"unary_{dtype.name}")
    def kernel(x: pl.Tensor[[8 * R, C], dtype], y: pl.Tensor[[17 * R, C], dtype]):
        full = pl.TileType(shape=[R, C], dtype=dtype)
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        a = pl.make_tile(full, addr=0x0)
        o = pl.make_tile(full, addr=0x2000)
        aw = pl.make_tile(view, addr=0x0)
        ow = pl.make_tile(view, addr=0x2000)
        with pl.section_vector():
            # Op k reads input block k and writes output blocks 2k (full tile) and 2k + 1 (view).
            for k in pl.static_range(n):
                pl.load(a, x, [k * R, 0])
                ops[k](o, a)
                pl.store(y, o, [2 * k * R, 0])
                pl.expands(o, fill)
                ops[k](ow, aw)
                pl.store(y, o, [(2 * k + 1) * R, 0])
            pl.expands(o, fill)
            pl.expands(ow, 3)
            pl.store(y, o, [16 * R, 0])

    return kernel, names


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32, INT8, INT16, INT32, INT64], ids=dtype_id)
def test_unary_ops_and_expands(dtype):
    kernel, names = unary_kernel(dtype)
    blocks = [data(dtype, (R, C), UNARY_INPUT.get(name, "any"), seed=k) for k, name in enumerate(names)]
    if dtype is INT8:
        blocks[0][0, :3] = torch.tensor([-128, 127, -1], dtype=torch.int8)  # abs(-128) wraps to -128, like torch
    x = torch.cat(blocks + [torch.zeros(R, C, dtype=TORCH[dtype])] * (8 - len(names)))
    y = torch.zeros(17 * R, C, dtype=TORCH[dtype])
    kernel(x, y)
    sync()
    for k, name in enumerate(names):
        src = blocks[k]
        # fp16/bf16 computed in fp32 and rounded once (torch's CPU kernels lack some half ops)
        ref = UNARY_REF[name](src.float()).to(src.dtype) if dtype in (FP16, BF16) else UNARY_REF[name](src)
        full, view = y[2 * k * R:(2 * k + 1) * R], y[(2 * k + 1) * R:(2 * k + 2) * R]
        if name in APPROXIMATE:
            assert_near(full, ref, dtype, f"{name} {dtype.name}", atol=1e-5)
            assert_near(view, windowed(ref, dtype), dtype, f"{name} {dtype.name} (window)", atol=1e-5)
        else:
            assert_exact(full, ref, f"{name} {dtype.name}")
            assert_exact(view, windowed(ref, dtype), f"{name} {dtype.name} (window)")
    assert_exact(y[16 * R:], windowed(torch.full((R, C), 3, dtype=TORCH[dtype]), dtype), "expands")


# ---------------------------------------------------------------------------------------------
# Fused ops
# ---------------------------------------------------------------------------------------------

B16_32 = {INT16, INT32, FP16, BF16, FP32}  # "b16/b32" of the docs, as far as torch has the types
FUSED_DTYPES = {
    "add_relu": {FP16, FP32, INT32}, "sub_relu": {FP16, FP32}, "addc": B16_32,
    "mul_add_dst": B16_32 | {INT64}, "fused_mul_add": B16_32, "fused_mul_add_relu": B16_32, "axpy": {FP16, FP32},
}
FUSED = list(FUSED_DTYPES)


@functools.lru_cache(maxsize=None)
def fused_kernel(dtype):
    names = {n for n in FUSED if dtype in FUSED_DTYPES[n]}
    widening = dtype is FP16

    @pl.jit(name=f"fused_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], y: pl.Tensor[[R, C], dtype], z: pl.Tensor[[R, C], dtype],
               w: pl.Tensor[[R, C], pl.DT_FP32], out: pl.Tensor[[14 * R, C], dtype],
               wout: pl.Tensor[[R, C], pl.DT_FP32], alpha: pl.DT_FP32):
        full = pl.TileType(shape=[R, C], dtype=dtype)
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        a = pl.make_tile(full, addr=0x0)
        b = pl.make_tile(full, addr=0x2000)
        c = pl.make_tile(full, addr=0x4000)
        o = pl.make_tile(full, addr=0x6000)
        aw = pl.make_tile(view, addr=0x0)
        bw = pl.make_tile(view, addr=0x2000)
        cw = pl.make_tile(view, addr=0x4000)
        ow = pl.make_tile(view, addr=0x6000)
        wt = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0x8000)
        # Every op runs on the views after a fresh load: out starts as z; op k stores out into
        # block 2k and its first input into block 2k + 1.
        with pl.section_vector():
            if "add_relu" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(o, z, [0, 0])
                pl.add_relu(ow, aw, bw)
                pl.store(out, o, [0 * R, 0])
                pl.store(out, a, [1 * R, 0])
            if "sub_relu" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(o, z, [0, 0])
                pl.sub_relu(ow, aw, bw)
                pl.store(out, o, [2 * R, 0])
                pl.store(out, a, [3 * R, 0])
            if "addc" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(c, z, [0, 0])
                pl.load(o, z, [0, 0])
                pl.addc(ow, aw, bw, cw)
                pl.store(out, o, [4 * R, 0])
            if "mul_add_dst" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(o, z, [0, 0])
                pl.mul_add_dst(ow, aw, bw)
                pl.store(out, o, [6 * R, 0])
            if "fused_mul_add" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(o, z, [0, 0])
                pl.fused_mul_add(ow, aw, bw)
                pl.store(out, o, [8 * R, 0])
            if "fused_mul_add_relu" in names:
                pl.load(a, x, [0, 0])
                pl.load(b, y, [0, 0])
                pl.load(o, z, [0, 0])
                pl.fused_mul_add_relu(ow, aw, bw)
                pl.store(out, o, [10 * R, 0])
            if "axpy" in names:
                pl.load(a, x, [0, 0])
                pl.load(o, z, [0, 0])
                pl.axpy(ow, aw, alpha)
                pl.store(out, o, [12 * R, 0])
            if widening:  # fp16 src accumulated into an fp32 out
                pl.load(a, x, [0, 0])
                pl.load(wt, w, [0, 0])
                pl.axpy(wt, a, alpha)
                pl.store(wout, wt, [0, 0])

    return kernel, names


def in_window(inside, outside):
    out = outside.clone()
    out[:WR, :WC] = inside[:WR, :WC]
    return out


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32, INT16, INT32, INT64], ids=dtype_id)
def test_fused_ops(dtype):
    kernel, names = fused_kernel(dtype)
    t = TORCH[dtype]
    x, y, z = data(dtype, (R, C), seed=1), data(dtype, (R, C), seed=2), data(dtype, (R, C), seed=3)
    w = torch.randn(R, C) * 5
    out = torch.zeros(14 * R, C, dtype=t)
    wout = torch.zeros(R, C)
    alpha = 0.7  # not exact in fp16: the kernel rounds it to src's dtype first
    kernel(x, y, z, w, out, wout, alpha)
    sync()
    a = torch.tensor(alpha, dtype=t) if dtype in FLOATS else None
    # torch rounds each op to the dtype, like the device.
    refs = {
        "add_relu": (0, relu(x + y)), "sub_relu": (2, relu(x - y)), "addc": (4, x + y + z),
        "mul_add_dst": (6, x * y + z), "fused_mul_add": (8, x * z + y), "fused_mul_add_relu": (10, relu(z * x + y)),
        "axpy": (12, (a * x + z) if a is not None else None),
    }
    for name in sorted(names):
        block, ref = refs[name]
        assert_exact(out[block * R:(block + 1) * R], in_window(ref, z), f"{name} {dtype.name}")
    for name, diff in (("add_relu", x + y), ("sub_relu", x - y)):
        if name in names:  # the intermediate result overwrites lhs (public docs)
            block = refs[name][0] + 1
            assert_exact(out[block * R:(block + 1) * R], in_window(diff, x), f"{name} {dtype.name}: lhs")
    if dtype is FP16:
        assert_exact(wout, torch.tensor(alpha, dtype=t).float() * x.float() + w, "axpy fp16 -> fp32")


# ---------------------------------------------------------------------------------------------
# Compare and select
# ---------------------------------------------------------------------------------------------

COMPARES = ["eq", "ne", "lt", "le", "gt", "ge"]
TORCH_COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
UNTOUCHED = 0xEE  # the mask tile's fill: bytes a compare does not write keep it


@functools.lru_cache(maxsize=None)
def compare_kernel(dtype):
    cmp = [getattr(pl, n) for n in COMPARES]
    threshold = 0.5 if dtype in FLOATS else 1
    fill = sentinel(dtype)
    scalar_select = dtype is not BF16  # tile-scalar select: no bf16 (docs)

    @pl.jit(name=f"compare_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], y: pl.Tensor[[R, C], dtype], masks: pl.Tensor[[12 * R, C], pl.DT_UINT8],
               sel: pl.Tensor[[3 * R, C], dtype]):
        full = pl.TileType(shape=[R, C], dtype=dtype)
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        mask_full = pl.TileType(shape=[R, C], dtype=pl.DT_UINT8)
        mask_view = pl.TileType(shape=[R, C], dtype=pl.DT_UINT8, valid_shape=[WR, WC])
        a = pl.make_tile(full, addr=0x0)
        b = pl.make_tile(full, addr=0x2000)
        o = pl.make_tile(full, addr=0x4000)
        aw = pl.make_tile(view, addr=0x0)
        bw = pl.make_tile(view, addr=0x2000)
        ow = pl.make_tile(view, addr=0x4000)
        m = pl.make_tile(mask_full, addr=0x6000)
        mw = pl.make_tile(mask_view, addr=0x6000)
        tmp = pl.make_tile(pl.TileType(shape=[8, 8], dtype=pl.DT_INT32), addr=0x7000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            # Compare k: tile-tile on the full tiles into block 2k, tile-scalar on the views into 2k + 1.
            for k in pl.static_range(len(cmp)):
                pl.expands(m, UNTOUCHED)
                cmp[k](m, a, b)
                pl.store(masks, m, [2 * k * R, 0])
                pl.expands(m, UNTOUCHED)
                cmp[k](mw, aw, threshold)
                pl.store(masks, m, [(2 * k + 1) * R, 0])
            # select: by a > b on the full tiles; by a < threshold on the views; against a scalar.
            pl.gt(m, a, b)
            pl.select(o, m, a, b, tmp)
            pl.store(sel, o, [0, 0])
            pl.expands(o, fill)
            pl.lt(mw, aw, threshold)
            pl.select(ow, mw, aw, bw, tmp)
            pl.store(sel, o, [R, 0])
            if scalar_select:
                pl.gt(m, a, b)
                pl.select(o, m, a, threshold, tmp)
                pl.store(sel, o, [2 * R, 0])

    return kernel, threshold


def packed(pred, rows=R, cols=C):
    """The device's mask layout: row r's predicates in bits c % 8 of bytes c // 8, LSB first."""
    out = np.full((R, C), UNTOUCHED, dtype=np.uint8)
    bits = np.packbits(pred[:rows, :cols].numpy().astype(np.uint8), axis=1, bitorder="little")
    out[:rows, :bits.shape[1]] = bits
    return torch.from_numpy(out)


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32, INT8, INT32], ids=dtype_id)
def test_compare_masks_and_select(dtype):
    kernel, threshold = compare_kernel(dtype)
    x, y = data(dtype, (R, C), "small", seed=4), data(dtype, (R, C), "small", seed=5)
    assert (x == y).any() and (x == threshold).any()  # ties are part of the test
    masks = torch.zeros(12 * R, C, dtype=torch.uint8)
    sel = torch.zeros(3 * R, C, dtype=TORCH[dtype])
    kernel(x, y, masks, sel)
    sync()
    for k, name in enumerate(COMPARES):
        op = TORCH_COMPARE[name]
        assert_exact(masks[2 * k * R:(2 * k + 1) * R], packed(op(x, y)), f"{name} {dtype.name}")
        assert_exact(masks[(2 * k + 1) * R:(2 * k + 2) * R], packed(op(x, threshold), WR, WC),
                     f"{name} {dtype.name} scalar (window)")
    assert_exact(sel[:R], torch.where(x > y, x, y), f"select {dtype.name}")
    assert_exact(sel[R:2 * R], windowed(torch.where(x < threshold, x, y), dtype), f"select {dtype.name} (window)")
    if dtype is not BF16:
        scalar = torch.full((R, C), threshold, dtype=TORCH[dtype])
        assert_exact(sel[2 * R:], torch.where(x > y, x, scalar), f"select {dtype.name} scalar")


# ---------------------------------------------------------------------------------------------
# cast
# ---------------------------------------------------------------------------------------------

MODES = ["CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_NONE", "CAST_ODD"]


@functools.lru_cache(maxsize=None)
def cast_kernel(src, d1, d2):
    odd1 = src is FP32 and d1 is FP16
    fill1, fill2 = sentinel(d1), sentinel(d2)
    modes = [pl.RoundMode[name] for name in MODES]

    @pl.jit(name=f"cast_{src.name}_{d1.name}_{d2.name}")
    def kernel(x: pl.Tensor[[R, C], src], y: pl.Tensor[[8 * R, C], d1], z: pl.Tensor[[8 * R, C], d2]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=src), addr=0x0)
        o1 = pl.make_tile(pl.TileType(shape=[R, C], dtype=d1), addr=0x2000)
        o2 = pl.make_tile(pl.TileType(shape=[R, C], dtype=d2), addr=0x4000)
        aw = pl.make_tile(pl.TileType(shape=[R, C], dtype=src, valid_shape=[WR, WC]), addr=0x0)
        o1w = pl.make_tile(pl.TileType(shape=[R, C], dtype=d1, valid_shape=[WR, WC]), addr=0x2000)
        o2w = pl.make_tile(pl.TileType(shape=[R, C], dtype=d2, valid_shape=[WR, WC]), addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            # Blocks 0..5: the modes of MODES on the full tiles; 6: CAST_ODD; 7: the default mode on the views.
            for k in pl.static_range(6):
                pl.cast(o1, a, mode=modes[k])
                pl.store(y, o1, [k * R, 0])
            if odd1:
                pl.cast(o1, a, mode=pl.RoundMode.CAST_ODD)
                pl.store(y, o1, [6 * R, 0])
            pl.expands(o1, fill1)
            pl.cast(o1w, aw)
            pl.store(y, o1, [7 * R, 0])
            for k in pl.static_range(6):
                pl.cast(o2, a, mode=modes[k])
                pl.store(z, o2, [k * R, 0])
            pl.expands(o2, fill2)
            pl.cast(o2w, aw)
            pl.store(z, o2, [7 * R, 0])

    return kernel, odd1


def _table(dtype):
    """The nonnegative finite values of fp16/bf16, ascending (index = bit pattern)."""
    if dtype is FP16:
        return np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)
    return torch.arange(0x7f80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).double().numpy()


TABLES = {FP16: _table(FP16), BF16: _table(BF16)}


def _away(mode, negative, a, lo, hi, lo_bits):
    """Whether the magnitude a, between lo and hi, rounds to hi under `mode`."""
    if mode == "CAST_ROUND":
        return a - lo >= hi - a
    if mode == "CAST_FLOOR":
        return negative
    if mode == "CAST_CEIL":
        return ~negative
    if mode == "CAST_TRUNC":
        return np.zeros_like(negative)
    if mode == "CAST_ODD":
        return (lo_bits & 1) == 0
    return (a - lo > hi - a) | ((a - lo == hi - a) & ((lo_bits & 1) == 1))  # nearest, ties to even


def ref_narrow(v, dtype, mode):
    """Float64 values (exact) to fp16/bf16 by choosing between the neighbours in the table of the
    format: an algorithm independent of the device's bit arithmetic."""
    table = TABLES[dtype]
    inf_bits = len(table)
    negative = np.signbit(v)
    a = np.abs(v)
    idx = np.searchsorted(table, a)
    exact = (idx < inf_bits) & (table[np.minimum(idx, inf_bits - 1)] == a)
    lo_bits = np.maximum(idx - 1, 0)
    lo = table[lo_bits]
    hi = np.where(idx < inf_bits, table[np.minimum(idx, inf_bits - 1)], 2 * table[-1] - table[-2])
    with np.errstate(invalid="ignore"):
        bits = np.where(exact, idx, np.where(_away(mode, negative, a, lo, hi, lo_bits), idx, lo_bits))
    bits = np.where(np.isinf(a), inf_bits, np.minimum(bits, inf_bits)).astype(np.int32)
    bits = bits | (negative.astype(np.int32) << 15)
    out = torch.from_numpy(bits.astype(np.int32)).to(torch.int16).view(TORCH[dtype])
    return torch.where(torch.from_numpy(np.isnan(v)), torch.tensor(float("nan"), dtype=TORCH[dtype]), out)


def ref_int_to_fp32(v, mode):
    """int64 values to fp32 by mode, with exact integer comparisons (values below 2^53)."""
    near = v.astype(np.float32)
    lo = np.where(near.astype(np.int64) <= v, near, np.nextafter(near, np.float32(-np.inf)))
    hi = np.where(lo.astype(np.int64) == v, lo, np.nextafter(lo, np.float32(np.inf)))
    dlo, dhi = v - lo.astype(np.int64), hi.astype(np.int64) - v
    choice = {"CAST_ROUND": np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(v < 0, lo, hi))),
              "CAST_FLOOR": lo, "CAST_CEIL": hi, "CAST_TRUNC": np.where(v < 0, hi, lo)}
    return torch.from_numpy(choice.get(mode, near))


def ref_to_int(v, dtype, mode):
    """Float64 values rounded by mode, saturated to the integer type, NaN -> 0."""
    rounding = {"CAST_ROUND": lambda t: np.sign(t) * np.floor(np.abs(t) + 0.5), "CAST_FLOOR": np.floor,
                "CAST_CEIL": np.ceil, "CAST_TRUNC": np.trunc}
    r = rounding.get(mode, np.rint)(v)
    info = torch.iinfo(TORCH[dtype])
    above, below, nan = r >= float(info.max) + 1, r < float(info.min), np.isnan(r)
    out = np.where(above | below | nan, 0, r).astype(np.int64)
    out[above], out[below] = info.max, info.min
    return torch.from_numpy(out).to(TORCH[dtype])


def ref_cast(x, dtype, mode):
    t = TORCH[dtype]
    if x.is_floating_point() and dtype in FLOATS:
        if x.dtype == t or (dtype is FP32):
            return x.to(t)  # exact
        return ref_narrow(x.double().numpy(), dtype, mode)
    if x.is_floating_point():
        return ref_to_int(x.double().numpy(), dtype, mode)
    if dtype is FP32:
        return ref_int_to_fp32(x.to(torch.int64).numpy(), mode)
    if dtype in FLOATS:
        return ref_narrow(x.double().numpy(), dtype, mode)
    return x.to(t)  # int -> int wraps


def cast_input(src):
    """Values that exercise rounding: ties, values past the targets' ranges, NaN and infinities."""
    g = torch.Generator().manual_seed(6)
    if src in FLOATS:
        v = torch.randn(R, C, generator=g) * 200
        v[0, :16] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, -128.5, 300.0, -300.0, 1e10, -1e10,
                                  float("nan"), float("inf"), float("-inf"), -0.0])
        # exact midpoints between neighbouring fp16 and bf16 values, and one fp32 ulp beside them
        mid16 = 1 + 2.0 ** -11
        mid_bf = 3 + 2.0 ** -7
        v[1, :8] = torch.tensor([mid16, -mid16, float(np.nextafter(np.float32(mid16), np.float32(2))), mid_bf, -mid_bf,
                                 70000.0, -65520.0, 1e-7])
        v[2] = torch.rand(C, generator=g) * 6 - 3
        return v.to(TORCH[src])
    info = torch.iinfo(TORCH[src])
    lo, hi = max(info.min, -(2 ** 30)), min(info.max, 2 ** 30)
    v = torch.randint(lo, hi, (R, C), generator=g, dtype=torch.int64)
    v[1] = torch.randint(max(info.min, -300), min(info.max, 300), (C,), generator=g)
    if src is INT64:
        v[0, :4] = torch.tensor([2 ** 40 + 2 ** 16, -(2 ** 40) - 2 ** 16, 2 ** 52 + 1, 123456789012345])
    return v.to(TORCH[src])


CAST_CASES = [(FP32, FP16, BF16), (FP32, INT32, INT8), (FP32, UINT8, INT64), (FP16, FP32, BF16),
              (FP16, INT32, INT16), (BF16, FP32, FP16), (BF16, INT32, INT8), (INT32, FP32, FP16),
              (INT32, BF16, INT8), (INT32, INT64, UINT8), (INT64, FP32, INT32), (UINT8, FP32, INT32),
              (INT8, FP16, INT64)]


@pytest.mark.parametrize("src, d1, d2", CAST_CASES, ids=lambda d: d.name)
def test_cast_every_mode(src, d1, d2):
    kernel, odd = cast_kernel(src, d1, d2)
    x = cast_input(src)
    y = torch.zeros(8 * R, C, dtype=TORCH[d1])
    z = torch.zeros(8 * R, C, dtype=TORCH[d2])
    kernel(x, y, z)
    sync()
    for dtype, out in ((d1, y), (d2, z)):
        for k, mode in enumerate(MODES[:6]):
            assert_exact(out[k * R:(k + 1) * R], ref_cast(x, dtype, mode), f"{src.name} -> {dtype.name} {mode}")
        assert_exact(out[7 * R:], windowed(ref_cast(x, dtype, "CAST_ROUND"), dtype),
                     f"{src.name} -> {dtype.name} default mode (window)")
    if odd:
        assert_exact(y[6 * R:7 * R], ref_cast(x, FP16, "CAST_ODD"), "fp32 -> fp16 CAST_ODD")


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------

ROW_SUM = {INT16, INT32, INT64, FP16, FP32}        # sum(dim=0), per the docs
ROW_EXTREME = {INT8, INT16, INT32, FP16, FP32}     # maximum/minimum(dim=0)
ROW_ARG = {FP16, FP32}                             # argmax/argmin(dim=0)
COL_ARG = {INT8, INT16, INT32, FP16, FP32, BF16}   # argmax/argmin(dim=1)


@functools.lru_cache(maxsize=None)
def reduce_kernel(dtype):
    row_sum, row_extreme, row_arg, col_arg = (dtype in s for s in (ROW_SUM, ROW_EXTREME, ROW_ARG, COL_ARG))
    fill = sentinel(dtype)

    @pl.jit(name=f"reduce_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], cols: pl.Tensor[[R, 6], dtype], rows: pl.Tensor[[6, C], dtype],
               icols: pl.Tensor[[R, 2], pl.DT_INT32], irows: pl.Tensor[[2, C], pl.DT_UINT32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x0)
        aw = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC]), addr=0x0)
        tmp = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x2000)
        col = pl.make_tile(pl.TileType(shape=[R, 1], dtype=dtype, layout=pl.DN), addr=0x4000)
        row = pl.make_tile(pl.TileType(shape=[1, C], dtype=dtype), addr=0x4400)
        icol = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_INT32, layout=pl.DN), addr=0x4800)
        irow = pl.make_tile(pl.TileType(shape=[1, C], dtype=pl.DT_UINT32), addr=0x4c00)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            # Each row -> column j of `cols`; full tile for even j, the view for odd j.
            if row_sum:
                pl.expands(col, fill)
                pl.sum(col, a, tmp)
                pl.store(cols, col, [0, 0])
                pl.expands(col, fill)
                pl.row_sum(out=col, src=aw, tmp=tmp)
                pl.store(cols, col, [0, 1])
            if row_extreme:
                pl.expands(col, fill)
                pl.maximum(col, a, tmp, dim=0)
                pl.store(cols, col, [0, 2])
                pl.expands(col, fill)
                pl.row_max(col, aw, tmp)
                pl.store(cols, col, [0, 3])
                pl.expands(col, fill)
                pl.row_min(col, a, tmp)
                pl.store(cols, col, [0, 4])
                pl.expands(col, fill)
                pl.minimum(col, aw, tmp, dim=0)
                pl.store(cols, col, [0, 5])
            # Each column -> row j of `rows`.
            pl.expands(row, fill)
            pl.sum(row, a, tmp, dim=1)
            pl.store(rows, row, [0, 0])
            pl.expands(row, fill)
            pl.col_sum(row, aw, tmp)
            pl.store(rows, row, [1, 0])
            pl.expands(row, fill)
            pl.col_max(row, a, tmp)
            pl.store(rows, row, [2, 0])
            pl.expands(row, fill)
            pl.maximum(row, aw, tmp, dim=1)
            pl.store(rows, row, [3, 0])
            pl.expands(row, fill)
            pl.minimum(row, a, tmp, dim=1)
            pl.store(rows, row, [4, 0])
            pl.expands(row, fill)
            pl.col_min(row, aw, tmp)
            pl.store(rows, row, [5, 0])
            if row_arg:
                pl.expands(icol, 99)
                pl.argmax(icol, a, tmp)
                pl.store(icols, icol, [0, 0])
                pl.expands(icol, 99)
                pl.argmin(icol, aw, tmp, dim=0)
                pl.store(icols, icol, [0, 1])
            if col_arg:
                pl.expands(irow, 99)
                pl.argmax(irow, a, tmp, dim=1)
                pl.store(irows, irow, [0, 0])
                pl.expands(irow, 99)
                pl.argmin(irow, aw, tmp, dim=1)
                pl.store(irows, irow, [1, 0])

    return kernel, (row_sum, row_extreme, row_arg, col_arg)


def check_sum(actual, x, dim, dtype, what):
    if dtype in FLOATS:  # an fp32 sum rounded once: an ulp of the type, plus fp32 error on cancellation
        exact = x.double().sum(dim)
        bound = RTOL[dtype] * exact.abs() + 1e-6 * x.double().abs().sum(dim)
        error = (actual.double() - exact).abs()
        assert (error <= bound).all(), f"{what}: error {error.max().item()} beyond {bound[error.argmax()].item()}"
    else:  # wraps modulo 2^bits
        assert_exact(actual, x.to(torch.int64).sum(dim).to(TORCH[dtype]), what)


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32, INT8, INT16, INT32, INT64], ids=dtype_id)
def test_reductions(dtype):
    kernel, (row_sum, row_extreme, row_arg, col_arg) = reduce_kernel(dtype)
    x = data(dtype, (R, C), "small" if dtype not in FLOATS else "any", seed=7)
    if dtype is INT16:
        x = (x.to(torch.int32) * 3000).to(torch.int16)  # row sums wrap around int16
    xw = x[:WR, :WC]
    fill = sentinel(dtype)
    cols = torch.full((R, 6), fill, dtype=TORCH[dtype])
    rows = torch.full((6, C), fill, dtype=TORCH[dtype])
    icols = torch.full((R, 2), -1, dtype=torch.int32)
    irows = np.full((2, C), 12345, dtype=np.uint32)
    kernel(x, cols, rows, icols, irows)
    sync()
    pad_rows = torch.full((R - WR,), fill, dtype=TORCH[dtype])
    pad_cols = torch.full((C - WC,), fill, dtype=TORCH[dtype])
    if row_sum:
        check_sum(cols[:, 0], x, 1, dtype, "sum dim=0")
        check_sum(cols[:WR, 1], xw, 1, dtype, "row_sum (window)")
        assert_exact(cols[WR:, 1], pad_rows, "row_sum leaves the rows past the window")
    if row_extreme:
        assert_exact(cols[:, 2], x.amax(1), "maximum dim=0")
        assert_exact(cols[:, 3], torch.cat([xw.amax(1), pad_rows]), "row_max (window)")
        assert_exact(cols[:, 4], x.amin(1), "row_min")
        assert_exact(cols[:, 5], torch.cat([xw.amin(1), pad_rows]), "minimum dim=0 (window)")
    check_sum(rows[0], x, 0, dtype, "sum dim=1")
    check_sum(rows[1, :WC], xw, 0, dtype, "col_sum (window)")
    assert_exact(rows[1, WC:], pad_cols, "col_sum leaves the columns past the window")
    assert_exact(rows[2], x.amax(0), "col_max")
    assert_exact(rows[3], torch.cat([xw.amax(0), pad_cols]), "maximum dim=1 (window)")
    assert_exact(rows[4], x.amin(0), "minimum dim=1")
    assert_exact(rows[5], torch.cat([xw.amin(0), pad_cols]), "col_min (window)")
    exact = x.double()  # torch.argmax returns the first of equal maxima, like the device
    if row_arg:
        assert_exact(icols[:, 0], exact.argmax(1).int(), "argmax dim=0")
        assert_exact(icols[:, 1], torch.cat([exact[:WR, :WC].argmin(1).int(), torch.full((R - WR,), 99).int()]),
                     "argmin dim=0 (window)")
    if col_arg:
        assert (irows[0] == exact.argmax(0).numpy()).all(), "argmax dim=1"
        assert (irows[1, :WC] == exact[:WR, :WC].argmin(0).numpy()).all(), "argmin dim=1 (window)"
        assert (irows[1, WC:] == 99).all()


# ---------------------------------------------------------------------------------------------
# Broadcasts
# ---------------------------------------------------------------------------------------------

EXPANDS = ["add", "sub", "mul", "div", "max", "min"]


def torch_binary(name, a, b, dtype):
    if name == "div":
        return torch.div(a, b, rounding_mode="trunc") if dtype not in FLOATS else a / b
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum,
            "min": torch.minimum}[name](a, b.expand_as(a))


EXPAND_KINDS = ["add", "sub", "mul", "div", "max", "min"]


@functools.lru_cache(maxsize=None)
def broadcast_kernel(dtype):
    fill = sentinel(dtype)
    row_expand = [getattr(pl, f"row_expand_{kind}") for kind in EXPAND_KINDS]
    col_expand = [getattr(pl, f"col_expand_{kind}") for kind in EXPAND_KINDS]

    @pl.jit(name=f"broadcast_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], vc: pl.Tensor[[R, 1], dtype], vr: pl.Tensor[[1, C], dtype],
               out: pl.Tensor[[22 * R, C], dtype]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x0)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x2000)
        aw = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC]), addr=0x0)
        ow = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC]), addr=0x2000)
        col = pl.make_tile(pl.TileType(shape=[R, 1], dtype=dtype, layout=pl.DN), addr=0x4000)
        row = pl.make_tile(pl.TileType(shape=[1, C], dtype=dtype), addr=0x4400)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(col, vc, [0, 0])
            pl.load(row, vr, [0, 0])
            # Blocks 0..5: row_expand_* on the views; 6..11: col_expand_* on the views.
            for k in pl.static_range(len(EXPAND_KINDS)):
                pl.expands(o, fill)
                row_expand[k](ow, aw, col)
                pl.store(out, o, [k * R, 0])
            for k in pl.static_range(len(EXPAND_KINDS)):
                pl.expands(o, fill)
                col_expand[k](ow, aw, row)
                pl.store(out, o, [(6 + k) * R, 0])
            # Blocks 12..16: expand_sub/mul/div/max/min with dim=0 (the default); 17..21 with dim=1.
            pl.expand_sub(o, a, col)
            pl.store(out, o, [12 * R, 0])
            pl.expand_mul(o, a, col, dim=0)
            pl.store(out, o, [13 * R, 0])
            pl.expand_div(o, a, col)
            pl.store(out, o, [14 * R, 0])
            pl.expand_max(o, a, col)
            pl.store(out, o, [15 * R, 0])
            pl.expand_min(o, a, col)
            pl.store(out, o, [16 * R, 0])
            pl.expand_sub(o, a, row, dim=1)
            pl.store(out, o, [17 * R, 0])
            pl.expand_mul(o, a, row, dim=1)
            pl.store(out, o, [18 * R, 0])
            pl.expand_div(o, a, row, dim=1)
            pl.store(out, o, [19 * R, 0])
            pl.expand_max(o, a, row, dim=1)
            pl.store(out, o, [20 * R, 0])
            pl.expand_min(o, a, row, dim=1)
            pl.store(out, o, [21 * R, 0])

    return kernel


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32, INT8, INT32], ids=dtype_id)
def test_broadcasts(dtype):
    kernel = broadcast_kernel(dtype)
    x = data(dtype, (R, C), seed=8)
    vc, vr = data(dtype, (R, 1), "nonzero", seed=9), data(dtype, (1, C), "nonzero", seed=10)
    out = torch.zeros(22 * R, C, dtype=TORCH[dtype])
    kernel(x, vc, vr, out)
    sync()
    block = lambda k: out[k * R:(k + 1) * R]  # noqa: E731
    for k, name in enumerate(EXPANDS):
        assert_exact(block(k), windowed(torch_binary(name, x, vc, dtype), dtype), f"row_expand_{name}")
        assert_exact(block(6 + k), windowed(torch_binary(name, x, vr, dtype), dtype), f"col_expand_{name}")
    for k, name in enumerate(["sub", "mul", "div", "max", "min"]):
        assert_exact(block(12 + k), torch_binary(name, x, vc, dtype), f"expand_{name} dim=0")
        assert_exact(block(17 + k), torch_binary(name, x, vr, dtype), f"expand_{name} dim=1")


@functools.lru_cache(maxsize=None)
def division_kernel():
    @pl.jit
    def divide(x: pl.Tensor[[R, C], pl.DT_INT32], vc: pl.Tensor[[R, 1], pl.DT_INT32],
               vr: pl.Tensor[[1, C], pl.DT_INT32], xf: pl.Tensor[[R, C], pl.DT_FP32],
               vf: pl.Tensor[[R, 1], pl.DT_FP32], out: pl.Tensor[[R, C], pl.DT_INT32],
               outf: pl.Tensor[[R, C], pl.DT_FP32], which: pl.DT_INT32):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT32), addr=0x0)
        col = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_INT32, layout=pl.DN), addr=0x4000)
        row = pl.make_tile(pl.TileType(shape=[1, C], dtype=pl.DT_INT32), addr=0x4400)
        af = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0x8000)
        colf = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_FP32, layout=pl.DN), addr=0xc000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(col, vc, [0, 0])
            pl.load(row, vr, [0, 0])
            pl.load(af, xf, [0, 0])
            pl.load(colf, vf, [0, 0])
            if which == 0:
                pl.row_expand_div(a, a, col)
            elif which == 1:
                pl.expand_div(a, a, row, dim=1)
            else:
                pl.row_expand_div(af, af, colf)
            pl.store(out, a, [0, 0])
            pl.store(outf, af, [0, 0])

    return divide


def test_integer_division_by_zero_is_a_kernel_fault():
    divide = division_kernel()
    x = torch.full((R, C), 12, dtype=torch.int32)
    vc, vr = torch.ones(R, 1, dtype=torch.int32), torch.ones(1, C, dtype=torch.int32)
    xf, vf = torch.ones(R, C), torch.zeros(R, 1)
    out, outf = torch.zeros_like(x), torch.zeros_like(xf)
    vc[5, 0] = 0
    divide(x, vc, vr, xf, vf, out, outf, 0)
    with pytest.raises(pypto_pro.KernelFault, match="row_expand_div: integer division by zero in a tile"):
        sync()
    vr[0, 7] = 0
    divide(x, torch.ones_like(vc), vr, xf, vf, out, outf, 1)
    with pytest.raises(pypto_pro.KernelFault, match="col_expand_div: integer division by zero in a tile"):
        sync()
    divide(x, vc, vr, xf, vf, out, outf, 2)  # float division by zero is infinity, not a fault
    sync()
    assert torch.isinf(outf).all()
    divide(x, torch.full_like(vc, -3), vr, xf, vf, out, outf, 0)
    sync()
    assert torch.equal(out, torch.full_like(x, -4))


# ---------------------------------------------------------------------------------------------
# Compile-time errors: located at the op's line
# ---------------------------------------------------------------------------------------------

T = pl.TileType(shape=[R, C], dtype=pl.DT_FP32)
X = torch.zeros(R, C)


def compile_error(body, text, exc_type, message):
    lines, first = inspect.getsourcelines(body)
    line = first + next(i for i, src in enumerate(lines) if text in src)
    with pytest.raises(exc_type) as info:
        pl.jit(body)(X)
    err = info.value
    assert isinstance(err, errors.CompilationError)
    assert message in err.message, err.message
    assert err.lineno == line, str(err)
    assert err.filename.endswith("test_vector_ops.py")


def test_reduction_output_shapes_are_checked():
    def wrong_column(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        out = pl.make_tile(pl.TileType(shape=[R, 2], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.row_sum(out, a, a)

    compile_error(wrong_column, "pl.row_sum(out, a, a)", errors.ParserTypeError,
                  "pl.row_sum: operand 'out' must have shape [16, 1] (one value per row of 'src'")

    def column_for_dim1(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        out = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_FP32, layout=pl.DN), addr=0x4000)
        with pl.section_vector():
            pl.sum(out, a, a, dim=1)

    compile_error(column_for_dim1, "pl.sum(out, a, a, dim=1)", errors.ParserTypeError,
                  "pl.col_sum: operand 'out' must have shape [1, 48]")

    def maximum_reduction_into_a_tile(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        with pl.section_vector():
            pl.maximum(a, a, a, dim=0)

    compile_error(maximum_reduction_into_a_tile, "pl.maximum(a, a, a, dim=0)", errors.ParserTypeError,
                  "pl.row_max: operand 'out' must have shape [16, 1]")

    def tmp_unlike_src(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        out = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_INT32), addr=0x4000)
        tmp = pl.make_tile(pl.TileType(shape=[8, C], dtype=pl.DT_FP32), addr=0x5000)
        with pl.section_vector():
            pl.argmax(out, a, tmp)

    compile_error(tmp_unlike_src, "pl.argmax(out, a, tmp)", errors.ParserTypeError,
                  "pl.argmax: operand 'tmp' has shape Tile[[8, 48], fp32, Vec] but 'src' is Tile[[16, 48], fp32, Vec]")

    def dim_out_of_range(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        with pl.section_vector():
            pl.sum(a, a, a, dim=2)

    compile_error(dim_out_of_range, "pl.sum(a, a, a, dim=2)", errors.ParserValueError,
                  "pl.sum(): dim=2 is out of range [0, 1]")


def test_broadcast_operand_shapes_are_checked():
    def row_for_row_expand(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        v = pl.make_tile(pl.TileType(shape=[1, C], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.row_expand_mul(a, a, v)

    compile_error(row_for_row_expand, "pl.row_expand_mul(a, a, v)", errors.ParserTypeError,
                  "pl.row_expand_mul: operand 'col' must have shape [16, 1]")

    def column_for_dim1(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        v = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.expand_div(a, a, v, dim=1)

    compile_error(column_for_dim1, "pl.expand_div(a, a, v, dim=1)", errors.ParserTypeError,
                  "pl.col_expand_div: operand 'row' must have shape [1, 48]")

    def out_unlike_src(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        o = pl.make_tile(pl.TileType(shape=[R, 32], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.exp(o, a)

    compile_error(out_unlike_src, "pl.exp(o, a)", errors.ParserTypeError,
                  "pl.exp: operand 'src' has shape Tile[[16, 48], fp32, Vec] but 'out' is Tile[[16, 32], fp32, Vec]")


def test_dtypes_are_checked():
    def rsqrt_bf16(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BF16), addr=0)
        with pl.section_vector():
            pl.rsqrt(a, a)

    compile_error(rsqrt_bf16, "pl.rsqrt(a, a)", errors.ParserTypeError,
                  "pl.rsqrt operand 'out' has dtype bf16, which pl.rsqrt does not support there (it takes fp16, fp32)")

    def exp_int(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT32), addr=0)
        with pl.section_vector():
            pl.exp(a, a)

    compile_error(exp_int, "pl.exp(a, a)", errors.ParserTypeError, "pl.exp operand 'out' has dtype int32")

    def float_mask(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        with pl.section_vector():
            pl.gt(a, a, 0.0)

    compile_error(float_mask, "pl.gt(a, a, 0.0)", errors.ParserTypeError,
                  "pl.gt operand 'out' has dtype fp32, which pl.gt does not support there (it takes uint8)")

    def mixed_compare(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        h = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        m = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_UINT8), addr=0x8000)
        with pl.section_vector():
            pl.eq(m, a, h)

    compile_error(mixed_compare, "pl.eq(m, a, h)", errors.ParserTypeError,
                  "pl.eq: dtype mismatch: operand 'rhs' is fp16 but 'lhs' is fp32")

    def index_dtype(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        out = pl.make_tile(pl.TileType(shape=[1, C], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.argmin(out, a, a, dim=1)

    compile_error(index_dtype, "pl.argmin(out, a, a, dim=1)", errors.ParserTypeError,
                  "pl.argmin operand 'out' has dtype fp32, which pl.argmin does not support there (it takes int32, "
                  "uint32)")

    def row_sum_bf16(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BF16), addr=0)
        out = pl.make_tile(pl.TileType(shape=[R, 1], dtype=pl.DT_BF16), addr=0x4000)
        with pl.section_vector():
            pl.sum(out, a, a)

    compile_error(row_sum_bf16, "pl.sum(out, a, a)", errors.ParserTypeError, "pl.row_sum operand 'out' has dtype bf16")

    def axpy_narrowing(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        h = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.axpy(h, a, 2.0)

    compile_error(axpy_narrowing, "pl.axpy(h, a, 2.0)", errors.ParserTypeError,
                  "pl.axpy: 'src' is fp32 but 'out' is fp16; they must match, or be fp16 -> fp32")

    def select_scalar_bf16(x: pl.Tensor[[R, C], pl.DT_FP32]):
        b = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BF16), addr=0)
        m = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_UINT8), addr=0x4000)
        with pl.section_vector():
            pl.select(b, m, b, 1.0, b)

    compile_error(select_scalar_bf16, "pl.select(b, m, b, 1.0, b)", errors.ParserTypeError,
                  "pl.select operand 'out' has dtype bf16")


def test_cast_modes_are_checked():
    def odd_to_bf16(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        b = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BF16), addr=0x4000)
        with pl.section_vector():
            pl.cast(b, a, mode=pl.RoundMode.CAST_ODD)

    compile_error(odd_to_bf16, "pl.cast(b, a, mode=pl.RoundMode.CAST_ODD)", errors.ParserValueError,
                  "pl.cast: mode=pl.RoundMode.CAST_ODD is only defined for fp32 -> fp16, not fp32 -> bf16")

    def string_mode(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        b = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.cast(b, a, mode="rint")

    compile_error(string_mode, 'pl.cast(b, a, mode="rint")', errors.ParserValueError,
                  "pl.cast(): mode must be one of CAST_RINT, CAST_ROUND, CAST_FLOOR, CAST_CEIL, CAST_TRUNC, CAST_ODD, "
                  "CAST_NONE")

    def cast_shape(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        b = pl.make_tile(pl.TileType(shape=[R, 16], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.cast(b, a)

    compile_error(cast_shape, "pl.cast(b, a)", errors.ParserTypeError, "pl.cast: operand 'src' has shape")


def test_memories_and_arguments_are_checked():
    def mat_source(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        m = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0)
        pl.relu(a, m)

    compile_error(mat_source, "pl.relu(a, m)", errors.ParserTypeError,
                  "pl.relu operand 'src' must be a tile in Vec memory, got Tile[[16, 48], fp32, Mat")

    def select_without_tmp(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        m = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_UINT8), addr=0x4000)
        with pl.section_vector():
            pl.select(a, m, a, a)

    compile_error(select_without_tmp, "pl.select(a, m, a, a)", errors.ParserTypeError,
                  "pl.select(out, mask, lhs, rhs, tmp) is missing its 'tmp' argument")

    def scalar_tile_for_expands(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T, addr=0)
        with pl.section_vector():
            pl.expands(a, a)

    compile_error(scalar_tile_for_expands, "pl.expands(a, a)", errors.ParserTypeError,
                  "pl.expands operand 'scalar' must be a scalar")


@pl.jit
def exp_rows(x: pl.Tensor[[pl.DYNAMIC, 1024], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 1024], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 1024], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 8, pl.get_block_num()):
            pl.load_tile(t, x, [i, 0])
            pl.exp(t, t)
            pl.store_tile(z, t, [i, 0])


def test_exp_is_within_one_ulp_over_the_whole_fp32_range():
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72, 88.73, 1e-30, -1e-30, -87.3, -103.0, -200.0]
    x = np.concatenate([np.linspace(-110, 95, 8 * 1024 * 16, dtype=np.float32),
                        np.array(specials + [0.0] * (8 * 1024 - len(specials)), np.float32)]).reshape(-1, 1024)
    z = np.empty_like(x)
    exp_rows[None, 4](x, z)
    pypto_pro.runtime.synchronize()
    ref = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    normal = np.isfinite(ref32) & (ref32 >= np.finfo(np.float32).tiny)
    ulps = np.abs(z[normal] - ref[normal]) / np.spacing(ref32[normal])
    assert ulps.max() <= 1.0, f"exp is off by {ulps.max():.2f} ulp at x = {x[normal][ulps.argmax()]}"
    tiny = (ref32 < np.finfo(np.float32).tiny) & (ref32 >= 0)  # subnormal results: within one subnormal step
    assert np.all(np.abs(z[tiny] - ref[tiny]) <= 1.5e-45)
    tail = z.ravel()[-8 * 1024:]  # the specials, in order
    assert tail[0] == np.inf and tail[1] == 0.0 and np.isnan(tail[2]) and tail[3] == 1.0 and tail[4] == 1.0
    assert tail[6] == np.inf and tail[11] == 0.0  # overflow to inf, underflow to zero


# ---- pl.fill_index: an index sequence along the first row ----

@pl.jit
def fill_index_rows(out: pl.Tensor[[2, 48], pl.DT_INT32], out16: pl.Tensor[[1, 32], pl.DT_INT16],
                    start: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[2, 48], dtype=pl.DT_INT32, valid_shape=[-1, -1]), addr=0)
    s = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_INT16), addr=0x1000)
    with pl.section_vector():
        pl.expands(t, -1)
        pl.system.bar_all()
        pl.set_validshape(t, [2, 40])
        pl.fill_index(t, start)      # row 0, columns 0..39; row 1 is not written
        pl.fill_index(s, 32760)      # wraps past the int16 maximum
        pl.system.bar_all()
        pl.set_validshape(t, [2, 48])
        pl.store(out, t, [0, 0])
        pl.store(out16, s, [0, 0])


def test_fill_index_writes_start_plus_k_along_the_first_rows_valid_columns():
    out = torch.zeros(2, 48, dtype=torch.int32)
    out16 = torch.zeros(1, 32, dtype=torch.int16)
    fill_index_rows[None, 1](out, out16, -5)
    pypto_pro.runtime.synchronize()
    ref = torch.full((2, 48), -1, dtype=torch.int32)
    ref[0, :40] = torch.arange(-5, 35, dtype=torch.int32)
    assert torch.equal(out, ref)
    assert torch.equal(out16, (torch.arange(32760, 32792) - 65536 * (torch.arange(32760, 32792) > 32767))
                       .to(torch.int16).reshape(1, 32))


def test_fill_index_misuse_is_refused():
    def one_column(x: pl.Tensor[[8, 1], pl.DT_INT32]):
        t = pl.make_tile(pl.TileType(shape=[8, 1], dtype=pl.DT_INT32), addr=0)
        with pl.section_vector():
            pl.fill_index(t, 0)

    with pytest.raises(errors.ParserTypeError, match="the sequence runs along the first row of 'out'"):
        pl.jit(one_column)[None, 1](torch.zeros(8, 1, dtype=torch.int32))

    def float_tile(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.fill_index(t, 0)

    with pytest.raises(errors.ParserTypeError, match="has dtype fp32, which pl.fill_index"):
        pl.jit(float_tile)[None, 1](torch.zeros(1, 16))


@functools.cache
def float_division_kernel(dtype):
    @pl.jit(name=f"float_division_{dtype_id(dtype)}")
    def divide(x: pl.Tensor[[R, C], dtype], v: pl.Tensor[[R, 1], dtype], out_row: pl.Tensor[[R, C], dtype],
               out_scalar: pl.Tensor[[R, C], dtype], s: pl.DT_FP32):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x0)
        col = pl.make_tile(pl.TileType(shape=[R, 1], dtype=dtype, layout=pl.DN), addr=0x4000)
        d = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x8000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(col, v, [0, 0])
            pl.row_expand_div(d, a, col)
            pl.store(out_row, d, [0, 0])
            pl.divs(d, a, s)
            pl.store(out_scalar, d, [0, 0])

    return divide


@pytest.mark.parametrize("dtype", [FP32, FP16], ids=dtype_id)
def test_float_row_expand_div_and_divs_give_the_divisions_bits(dtype):
    """row_expand_div and divs divide by a divisor per row or per tile (on AVX-512 hosts through its
    reciprocal with two exact corrections): every result has the bits of the division, computed in
    fp32 and rounded to the tile's dtype, for dividends and divisors of every magnitude, zeros,
    infinities and NaNs included."""
    g = torch.Generator().manual_seed(11)
    span = 70 if dtype == FP32 else 12  # binades: beyond the reciprocal's range [2^-60, 2^61) on fp32
    scale = 2.0 ** torch.randint(-span, span, (R, C), generator=g)
    x = (torch.randn(R, C, generator=g) * scale).to(TORCH[dtype])
    x[0, :8] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -3.0,
                             65504.0]).to(TORCH[dtype])
    v = (torch.randn(R, 1, generator=g) * 3).to(TORCH[dtype])
    v[:6, 0] = torch.tensor([0.0, -0.0, float("inf"), float("nan"), 1e-40 if dtype == FP32 else 6e-8,
                             3e38 if dtype == FP32 else 60000.0]).to(TORCH[dtype])
    out_row, out_scalar = torch.empty_like(x), torch.empty_like(x)
    for s in (3.0, -0.1, 1e-30, 0.0):
        float_division_kernel(dtype)(x, v, out_row, out_scalar, s)
        sync()
        exact = x.float()
        torch.testing.assert_close(out_row, (exact / v.float()).to(TORCH[dtype]), rtol=0, atol=0, equal_nan=True)
        divisor = torch.tensor(s).to(TORCH[dtype]).float()  # the scalar as the tile's dtype first
        torch.testing.assert_close(out_scalar, (exact / divisor).to(TORCH[dtype]), rtol=0, atol=0, equal_nan=True)

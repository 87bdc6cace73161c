"""The bitwise, shift, fused-cast, partial and transpose ops of docs/language.md#compute, each run in a
kernel and compared with a numpy/torch reference: exactly (integer and bitwise results, and the
float ones, which are exactly rounded), with the tolerance stated where one applies.

Every family compiles one kernel per dtype (cached below) that runs all of its ops on the full tile
and on a view with a smaller (tail) valid window over a sentinel, so a full-tile store shows that
nothing outside the window changed. The kernels of the public API pages' call examples run as the
pages write them, with the results the pages document, also under sanitizer=True.
"""

import functools
import inspect
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors
from test_vector_ops import ref_cast  # pl.cast's reference: the fused casts convert exactly like it

R, C = 16, 64      # the shape of the data tiles
WR, WC = 13, 40    # the valid window of the views

INT8, INT16, INT32, INT64 = pl.DT_INT8, pl.DT_INT16, pl.DT_INT32, pl.DT_INT64
UINT8, UINT16, UINT32, UINT64 = pl.DT_UINT8, pl.DT_UINT16, pl.DT_UINT32, pl.DT_UINT64
FP16, BF16, FP32 = pl.DT_FP16, pl.DT_BF16, pl.DT_FP32
FLOATS = (FP16, BF16, FP32)
NP = {INT8: np.int8, INT16: np.int16, INT32: np.int32, INT64: np.int64, UINT8: np.uint8, UINT16: np.uint16,
      UINT32: np.uint32, UINT64: np.uint64}
TORCH = {FP16: torch.float16, BF16: torch.bfloat16, FP32: torch.float32, INT8: torch.int8, INT16: torch.int16,
         INT32: torch.int32, INT64: torch.int64, UINT8: torch.uint8}
INTS_8_32 = [INT8, INT16, INT32, UINT8, UINT16, UINT32]   # and_/or_/xor/not_ (public pages: 8/16/32-bit)
INTS = INTS_8_32 + [INT64, UINT64]                         # shl/shr, partadd/partmax/partmin
SENTINEL = 77


def dtype_id(d):
    return d.name


def sync():
    pypto_pro.runtime.synchronize()


def ints(dtype, shape, seed, lo=None, hi=None):
    """Random integers over the dtype's whole range (or [lo, hi])."""
    info = np.iinfo(NP[dtype])
    rng = np.random.default_rng(seed)
    return rng.integers(info.min if lo is None else lo, info.max if hi is None else hi, size=shape,
                        dtype=NP[dtype], endpoint=True)


def as_dtype(value, dtype):
    """A Python int as the element type, modulo 2^bits (the bits the device keeps)."""
    bits = np.dtype(NP[dtype]).itemsize * 8
    return np.array(value % (1 << bits), dtype=np.uint64).astype(NP[dtype])


def windowed(ref, fill=SENTINEL, rows=WR, cols=WC):
    """A full-tile store after an op on the view: the reference inside the window, `fill` elsewhere."""
    if isinstance(ref, torch.Tensor):
        out = torch.full(ref.shape, fill, dtype=ref.dtype)
    else:
        out = np.full(ref.shape, fill, dtype=ref.dtype)
    out[:rows, :cols] = ref[:rows, :cols]
    return out


def assert_equal(actual, expected, what):
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, what
        nan = torch.isnan(expected) if expected.is_floating_point() else torch.zeros_like(expected, dtype=torch.bool)
        if expected.is_floating_point():
            assert torch.equal(torch.isnan(actual), nan), f"{what}: NaNs differ"
        diff = (actual != expected) & ~nan
        if diff.any():
            at = diff.nonzero()[0].tolist()
            raise AssertionError(f"{what}: {int(diff.sum())} elements differ, first at {at}: "
                                 f"{actual[tuple(at)].item()} vs {expected[tuple(at)].item()}")
        return
    assert actual.dtype == expected.dtype, what
    diff = actual != expected
    if diff.any():
        at = tuple(np.argwhere(diff)[0])
        raise AssertionError(f"{what}: {int(diff.sum())} elements differ, first at {list(at)}: "
                             f"{actual[at]} vs {expected[at]}")


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, src in enumerate(lines) if text in src)


def block(out, k, rows=R):
    return out[k * rows:(k + 1) * rows]


# ---------------------------------------------------------------------------------------------
# and_, or_, xor, not_ (tile and scalar forms)
# ---------------------------------------------------------------------------------------------

NEG_CONST = -16   # a bit pattern: 0xF0 on 8-bit elements, 0xFFF0 on 16-bit ones, ...


@functools.lru_cache(maxsize=None)
def bitwise_kernel(dtype):
    @pl.jit(name=f"bitwise_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], y: pl.Tensor[[R, C], dtype], out: pl.Tensor[[14 * R, C], dtype],
               s: pl.DT_INT32):
        full = pl.TileType(shape=[R, C], dtype=dtype)
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        a = pl.make_tile(full, addr=0x0)
        b = pl.make_tile(full, addr=0x2000)
        o = pl.make_tile(full, addr=0x4000)
        tmp = pl.make_tile(full, addr=0x6000)
        aw = pl.make_tile(view, addr=0x0)
        bw = pl.make_tile(view, addr=0x2000)
        ow = pl.make_tile(view, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            # Op k on the full tiles into block 2k, on the views (over the sentinel) into 2k + 1.
            pl.and_(o, a, b)
            pl.store(out, o, [0 * R, 0])
            pl.expands(o, SENTINEL)
            pl.and_(ow, aw, bw)
            pl.store(out, o, [1 * R, 0])
            pl.or_(o, a, b)
            pl.store(out, o, [2 * R, 0])
            pl.expands(o, SENTINEL)
            pl.or_(ow, aw, bw)
            pl.store(out, o, [3 * R, 0])
            pl.xor(o, a, b, tmp)
            pl.store(out, o, [4 * R, 0])
            pl.expands(o, SENTINEL)
            pl.xor(ow, aw, bw, tmp)
            pl.store(out, o, [5 * R, 0])
            pl.not_(o, a)
            pl.store(out, o, [6 * R, 0])
            pl.expands(o, SENTINEL)
            pl.not_(ow, aw)
            pl.store(out, o, [7 * R, 0])
            # Scalar forms: a constant bit pattern, a run-time int32 scalar (its low bits), keywords.
            pl.and_(o, a, NEG_CONST)
            pl.store(out, o, [8 * R, 0])
            pl.expands(o, SENTINEL)
            pl.or_(ow, aw, s)
            pl.store(out, o, [9 * R, 0])
            pl.or_(o, lhs=a, rhs=0x5A)
            pl.store(out, o, [10 * R, 0])
            pl.expands(o, SENTINEL)
            pl.and_(ow, aw, s)
            pl.store(out, o, [11 * R, 0])
            # In place (out is lhs), on the view: lhs keeps its elements outside the window.
            pl.and_(aw, aw, bw)
            pl.store(out, a, [12 * R, 0])
            pl.load(a, x, [0, 0])
            pl.or_(a, a, NEG_CONST)
            pl.store(out, a, [13 * R, 0])

    return kernel


@pytest.mark.parametrize("dtype", INTS_8_32, ids=dtype_id)
def test_bitwise_ops(dtype):
    x, y = ints(dtype, (R, C), seed=1), ints(dtype, (R, C), seed=2)
    out = np.zeros((14 * R, C), NP[dtype])
    s = -123457  # run-time int32 scalar: the element keeps its low bits
    bitwise_kernel(dtype)(x, y, out, s)
    sync()
    sv, neg, hexa = as_dtype(s, dtype), as_dtype(NEG_CONST, dtype), as_dtype(0x5A, dtype)
    refs = [("and_", x & y), ("or_", x | y), ("xor", x ^ y), ("not_", ~x)]
    for k, (name, ref) in enumerate(refs):
        assert_equal(block(out, 2 * k), ref, f"{name} {dtype.name}")
        assert_equal(block(out, 2 * k + 1), windowed(ref), f"{name} {dtype.name} (window)")
    assert_equal(block(out, 8), x & neg, f"and_ constant {NEG_CONST} {dtype.name}")
    assert_equal(block(out, 9), windowed(x | sv), f"or_ run-time scalar {dtype.name} (window)")
    assert_equal(block(out, 10), x | hexa, f"or_ by keywords {dtype.name}")
    assert_equal(block(out, 11), windowed(x & sv), f"and_ run-time scalar {dtype.name} (window)")
    in_place = x.copy()
    in_place[:WR, :WC] = (x & y)[:WR, :WC]
    assert_equal(block(out, 12), in_place, f"and_ in place {dtype.name} (window)")
    assert_equal(block(out, 13), x | neg, f"or_ in place {dtype.name}")


# ---------------------------------------------------------------------------------------------
# shl, shr
# ---------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def shift_kernel(dtype):
    @pl.jit(name=f"shift_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], n: pl.Tensor[[R, C], dtype], out: pl.Tensor[[5 * R, C], dtype]):
        full = pl.TileType(shape=[R, C], dtype=dtype)
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        a = pl.make_tile(full, addr=0x0)
        b = pl.make_tile(full, addr=0x2000)
        o = pl.make_tile(full, addr=0x4000)
        aw = pl.make_tile(view, addr=0x0)
        bw = pl.make_tile(view, addr=0x2000)
        ow = pl.make_tile(view, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, n, [0, 0])
            pl.shl(o, a, b)
            pl.store(out, o, [0, 0])
            pl.expands(o, SENTINEL)
            pl.shl(ow, aw, bw)
            pl.store(out, o, [R, 0])
            pl.shr(o, a, b)
            pl.store(out, o, [2 * R, 0])
            pl.expands(o, SENTINEL)
            pl.shr(ow, aw, bw)
            pl.store(out, o, [3 * R, 0])
            pl.shr(a, a, b)  # in place
            pl.store(out, a, [4 * R, 0])

    return kernel


def shift_inputs(dtype, seed):
    bits = np.dtype(NP[dtype]).itemsize * 8
    x = ints(dtype, (R, C), seed)
    info = np.iinfo(NP[dtype])
    x[0, :4] = [info.min, info.max, -1 if info.min < 0 else 1, 0]
    n = ints(dtype, (R, C), seed + 1, lo=0, hi=bits - 1)
    n[0, :4] = [bits - 1, bits - 1, bits - 1, 3]
    n[1, :2] = [0, 1]
    return x, n, bits


def ref_shl(x, n, dtype):
    # the bits shifted past the width are lost (signed elements wrap)
    wide = x.astype(np.uint64) << n.astype(np.uint64)
    return wide.astype(np.dtype(NP[dtype]).str.replace("i", "u")).view(NP[dtype])


def ref_shr(x, n, dtype):
    # arithmetic on signed elements (numpy's >> on signed ints), logical on unsigned ones
    return (x >> n.astype(x.dtype)).astype(NP[dtype])


@pytest.mark.parametrize("dtype", INTS, ids=dtype_id)
def test_shifts(dtype):
    x, n, bits = shift_inputs(dtype, seed=3)
    out = np.zeros((5 * R, C), NP[dtype])
    shift_kernel(dtype)(x, n, out)
    sync()
    shl, shr = ref_shl(x, n, dtype), ref_shr(x, n, dtype)
    if np.iinfo(NP[dtype]).min < 0:
        assert shr[0, 0] == -1 and shr[0, 2] == -1, "arithmetic shift keeps the sign"
    assert_equal(block(out, 0), shl, f"shl {dtype.name}")
    assert_equal(block(out, 1), windowed(shl), f"shl {dtype.name} (window)")
    assert_equal(block(out, 2), shr, f"shr {dtype.name}")
    assert_equal(block(out, 3), windowed(shr), f"shr {dtype.name} (window)")
    assert_equal(block(out, 4), shr, f"shr in place {dtype.name}")


@functools.lru_cache(maxsize=None)
def shift_on_view_kernel(dtype):
    @pl.jit(name=f"shift_view_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], n: pl.Tensor[[R, C], dtype], out: pl.Tensor[[R, C], dtype],
               left: pl.DT_INT32):
        view = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[WR, WC])
        a = pl.make_tile(view, addr=0x0)
        b = pl.make_tile(view, addr=0x2000)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=dtype), addr=0x4000)
        ow = pl.make_tile(view, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, n, [0, 0])
            pl.expands(o, SENTINEL)
            if left == 1:
                pl.shl(ow, a, b)
            else:
                pl.shr(ow, a, b)
            pl.store(out, o, [0, 0])

    return kernel


@pytest.mark.parametrize("dtype, bad, op", [(INT32, 32, "shl"), (INT16, -1, "shr"), (UINT8, 200, "shr"),
                                             (INT64, 64, "shl"), (UINT64, 2 ** 63, "shr")], ids=str)
def test_shift_amount_outside_the_bit_width_is_a_kernel_fault(dtype, bad, op):
    """The pages ask for 0 <= amount < bits; the ISA gives no result otherwise and a C++ shift by it is
    undefined, so such an amount in the window stops the kernel at its line, naming the element."""
    kernel = shift_on_view_kernel(dtype)
    x, n, bits = shift_inputs(dtype, seed=5)
    out = np.zeros((R, C), NP[dtype])
    n[WR, 3] = as_dtype(bad, dtype)        # outside the view's window: not read, no fault
    n[R - 1, WC] = as_dtype(bad, dtype)
    kernel(x, n, out, int(op == "shl"))
    sync()
    ref = ref_shl(x, n % bits, dtype) if op == "shl" else ref_shr(x, n % bits, dtype)
    assert_equal(out, windowed(ref), f"{op} {dtype.name} (window)")
    n[2, 5] = as_dtype(bad, dtype)          # inside it
    kernel(x, n, out, int(op == "shl"))
    with pytest.raises(pypto_pro.KernelFault) as info:
        sync()
    message = str(info.value)
    assert f"shift amount {bad} in 'rhs' is outside [0, {bits})" in message, message
    assert "offsets [2, 5]" in message, message
    assert info.value.op == op
    assert info.value.line == line_of(kernel.fn, f"pl.{op}(ow, a, b)")


# ---------------------------------------------------------------------------------------------
# add_relu_cast, sub_relu_cast, mul_cast
# ---------------------------------------------------------------------------------------------

MODES = ["CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_NONE", "CAST_ODD"]
EXACT = {(FP16, FP32), (BF16, FP32), (FP16, FP16), (FP32, FP32), (INT16, FP32), (UINT16, FP32), (UINT16, UINT32)}
# (lhs dtype, out dtype, ops): relu ops take fp16/fp32 inputs (public pages), mul_cast 16/32/64-bit
# integers and floats.
BINARY_CAST_CASES = [
    (FP16, FP32, ("add_relu_cast", "sub_relu_cast", "mul_cast")),   # the pages' example: widening
    (FP32, FP16, ("add_relu_cast", "sub_relu_cast", "mul_cast")),   # narrowing: every mode, CAST_ODD too
    (FP32, BF16, ("add_relu_cast", "mul_cast")),
    (FP16, FP16, ("add_relu_cast", "sub_relu_cast")),               # same type: the relu only
    (FP32, INT32, ("sub_relu_cast", "mul_cast")),                   # float -> int rounds by the mode
    (BF16, FP32, ("mul_cast",)),
    (INT32, FP32, ("mul_cast",)),                                   # large products round by the mode
    (INT16, INT8, ("mul_cast",)),                                   # int -> int wraps
    (INT64, INT32, ("mul_cast",)),
    (UINT16, FP16, ("mul_cast",)),
    (UINT32, INT64, ("mul_cast",)),
    (UINT64, INT64, ("mul_cast",)),
    (UINT16, UINT32, ("mul_cast",)),                                # exact: CAST_ODD is accepted and ignored
    (INT32, UINT16, ("mul_cast",)),
    (FP16, UINT8, ("add_relu_cast",)),                              # saturates past 255
    (FP32, INT64, ("sub_relu_cast",)),
    (FP16, BF16, ("sub_relu_cast", "mul_cast")),
]


def modes_of(lhs, out):
    return MODES if (lhs, out) in EXACT or (lhs, out) == (FP32, FP16) else MODES[:6]


@functools.lru_cache(maxsize=None)
def binary_cast_kernel(lhs_t, out_t, names):
    ops = [getattr(pl, name) for name in names]
    modes = [pl.RoundMode[m] for m in modes_of(lhs_t, out_t)]
    n_ops, n_modes = len(ops), len(modes)
    fill = -7.5 if out_t in FLOATS else SENTINEL

    @pl.jit(name=f"binary_cast_{lhs_t.name}_{out_t.name}_{n_ops}")
    def kernel(x: pl.Tensor[[R, C], lhs_t], y: pl.Tensor[[R, C], lhs_t],
               out: pl.Tensor[[(n_ops * (n_modes + 1)) * R, C], out_t],
               lhs_out: pl.Tensor[[2 * n_ops * R, C], lhs_t]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=lhs_t), addr=0x0)
        b = pl.make_tile(pl.TileType(shape=[R, C], dtype=lhs_t), addr=0x4000)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=out_t), addr=0x8000)
        aw = pl.make_tile(pl.TileType(shape=[R, C], dtype=lhs_t, valid_shape=[WR, WC]), addr=0x0)
        bw = pl.make_tile(pl.TileType(shape=[R, C], dtype=lhs_t, valid_shape=[WR, WC]), addr=0x4000)
        ow = pl.make_tile(pl.TileType(shape=[R, C], dtype=out_t, valid_shape=[WR, WC]), addr=0x8000)
        with pl.section_vector():
            pl.load(b, y, [0, 0])
            for i in pl.static_range(n_ops):
                # op i with mode j on the full tiles: block i * (n_modes + 1) + j (lhs reloaded each time)
                for j in pl.static_range(n_modes):
                    pl.load(a, x, [0, 0])
                    ops[i](o, a, b, target_type=out_t, mode=modes[j])
                    pl.store(out, o, [(i * (n_modes + 1) + j) * R, 0])
                pl.store(lhs_out, a, [2 * i * R, 0])  # lhs holds the intermediate result
                # the default mode (CAST_ROUND) on the views, over a sentinel
                pl.load(a, x, [0, 0])
                pl.expands(o, fill)
                ops[i](ow, aw, bw, target_type=out_t)
                pl.store(out, o, [(i * (n_modes + 1) + n_modes) * R, 0])
                pl.store(lhs_out, a, [(2 * i + 1) * R, 0])

    return kernel, fill


def relu_t(t):
    return torch.where(t < 0, torch.zeros_like(t), t)


def cast_case_inputs(lhs_t, seed):
    g = torch.Generator().manual_seed(seed)
    if lhs_t in FLOATS:
        x = torch.randn(R, C, generator=g) * 60
        y = torch.randn(R, C, generator=g) * 60
        x[0, :6] = torch.tensor([1.0 + 2.0 ** -11, 2.5, -0.0, 70000.0, 3.0e-5, 1e-3])  # ties, overflow, tiny
        y[0, :6] = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 3.0e-5])
        return x.to(TORCH[lhs_t]), y.to(TORCH[lhs_t])
    x = ints(lhs_t, (R, C), seed)
    y = ints(lhs_t, (R, C), seed + 1)
    if lhs_t is INT32:
        x[1] = ints(lhs_t, (C,), seed + 2, lo=-40000, hi=40000)  # products past 2^24: fp32 rounds them
        y[1] = ints(lhs_t, (C,), seed + 3, lo=-40000, hi=40000)
    return x, y


def intermediate(name, x, y, lhs_t):
    """lhs after the op: the binary op rounded to lhs's dtype (integers wrap), then the relu."""
    if lhs_t in FLOATS:  # torch rounds every op to the dtype, as the device does
        if name == "mul_cast":
            return x * y
        return relu_t(x + y if name == "add_relu_cast" else x - y)
    with np.errstate(over="ignore"):
        return x * y  # numpy wraps


def as_torch(v):
    """An intermediate as ref_cast wants it: torch, with unsigned integers widened to int64."""
    if isinstance(v, torch.Tensor):
        return v
    if v.dtype in (np.uint16, np.uint32):
        return torch.from_numpy(v.astype(np.int64))
    return torch.from_numpy(v)


@pytest.mark.parametrize("lhs_t, out_t, names", BINARY_CAST_CASES,
                         ids=lambda v: v.name if hasattr(v, "name") else "-".join(v))
def test_binary_cast_ops(lhs_t, out_t, names):
    kernel, fill = binary_cast_kernel(lhs_t, out_t, names)
    modes = modes_of(lhs_t, out_t)
    x, y = cast_case_inputs(lhs_t, seed=11)  # torch for floats, numpy for integers
    step = len(modes) + 1
    n_blocks = len(names) * step
    float_in, float_out = lhs_t in FLOATS, out_t in FLOATS
    out = torch.zeros(n_blocks * R, C, dtype=TORCH[out_t]) if float_out else np.zeros((n_blocks * R, C), NP[out_t])
    shape = (2 * len(names) * R, C)
    lhs_out = torch.zeros(shape, dtype=TORCH[lhs_t]) if float_in else np.zeros(shape, NP[lhs_t])
    kernel(x, y, out, lhs_out)
    sync()

    def converted(mid, mode):
        if not float_in and not float_out:
            return mid.astype(NP[out_t])  # int -> int wraps, whatever the mode
        ref = ref_cast(as_torch(mid), out_t, mode)
        return ref if float_out else ref.numpy().astype(NP[out_t])

    for i, name in enumerate(names):
        mid = intermediate(name, x, y, lhs_t)
        for j, mode in enumerate(modes):
            assert_equal(block(out, i * step + j), converted(mid, mode), f"{name} {lhs_t.name} -> {out_t.name} {mode}")
        assert_equal(block(out, i * step + len(modes)), windowed(converted(mid, "CAST_ROUND"), fill),
                     f"{name} {lhs_t.name} -> {out_t.name} default mode (window)")
        # lhs keeps the intermediate (the pages: it is overwritten), on the view inside the window only
        assert_equal(block(lhs_out, 2 * i), mid, f"{name}: lhs holds the intermediate")
        in_window = x.clone() if float_in else x.copy()
        in_window[:WR, :WC] = mid[:WR, :WC]
        assert_equal(block(lhs_out, 2 * i + 1), in_window, f"{name}: lhs on the view")


# ---------------------------------------------------------------------------------------------
# partadd, partmax, partmin, partmul
# ---------------------------------------------------------------------------------------------

PART_OPS = ["partadd", "partmax", "partmin", "partmul"]
PART_DTYPES = [INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, BF16, FP32]


def part_names(dtype):  # partmul: no 64-bit elements (public page)
    return [n for n in PART_OPS if not (n == "partmul" and dtype in (INT64, UINT64))]


@functools.lru_cache(maxsize=None)
def part_kernel(dtype):
    ops = [getattr(pl, n) for n in part_names(dtype)]
    n = len(ops)
    fill = -7.5 if dtype in FLOATS else SENTINEL

    @pl.jit(name=f"part_{dtype.name}")
    def kernel(x: pl.Tensor[[R, C], dtype], y: pl.Tensor[[R, C], dtype], out: pl.Tensor[[4 * R, C], dtype],
               r0: pl.DT_INT32, c0: pl.DT_INT32, r1: pl.DT_INT32, c1: pl.DT_INT32, rd: pl.DT_INT32,
               cd: pl.DT_INT32):
        tt = pl.TileType(shape=[R, C], dtype=dtype, valid_shape=[-1, -1])
        a = pl.make_tile(tt, addr=0x0)
        b = pl.make_tile(tt, addr=0x2000)
        o = pl.make_tile(tt, addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.load(b, y, [0, 0])
            pl.set_validshape(a, [r0, c0])
            pl.set_validshape(b, [r1, c1])
            for k in pl.static_range(n):
                pl.set_validshape(o, [R, C])
                pl.expands(o, fill)
                pl.set_validshape(o, [rd, cd])
                ops[k](o, a, b)
                pl.set_validshape(o, [R, C])
                pl.store(out, o, [k * R, 0])

    return kernel, fill


def part_data(dtype, seed):
    if dtype in FLOATS:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(R, C, generator=g) * 9).to(TORCH[dtype])
    return ints(dtype, (R, C), seed)


def combine(name, x, y):
    if isinstance(x, torch.Tensor):
        return {"partadd": torch.add, "partmax": torch.maximum, "partmin": torch.minimum,
                "partmul": torch.mul}[name](x, y)
    with np.errstate(over="ignore"):
        return {"partadd": np.add, "partmax": np.maximum, "partmin": np.minimum, "partmul": np.multiply}[name](x, y)


def part_ref(name, x, y, w0, w1, wd, fill):
    """Over out's window: both valid -> combined, only one valid -> that one; elsewhere the fill."""
    both = combine(name, x, y)
    out = torch.full_like(x, fill) if isinstance(x, torch.Tensor) else np.full_like(x, fill)
    for r in range(wd[0]):
        for c in range(wd[1]):
            in0, in1 = r < w0[0] and c < w0[1], r < w1[0] and c < w1[1]
            out[r, c] = both[r, c] if in0 and in1 else x[r, c] if in0 else y[r, c]
    return out


PART_WINDOWS = [  # (src0, src1, out) valid shapes that follow the rule
    ((R, C), (R // 2, C), (R, C)),      # the pages' example: src1 valid over the first rows
    ((R, C), (R, 20), (R, C)),          # src1 valid over the first columns
    ((5, 33), (R, C), (R, C)),          # src0 the partial one
    ((WR, WC), (7, 9), (WR, WC)),       # a tail window of out
    ((R, C), (R, C), (R, C)),           # both whole
    ((R, C), (0, 0), (R, C)),           # an empty source: a copy of the other
    ((R, C), (3, 5), (0, C)),           # an empty out window: nothing written
]


@pytest.mark.parametrize("dtype", PART_DTYPES, ids=dtype_id)
def test_part_ops(dtype):
    kernel, fill = part_kernel(dtype)
    names = part_names(dtype)
    x, y = part_data(dtype, 21), part_data(dtype, 22)
    for w0, w1, wd in PART_WINDOWS:
        out = torch.zeros(4 * R, C, dtype=TORCH[dtype]) if dtype in FLOATS else np.zeros((4 * R, C), NP[dtype])
        kernel(x, y, out, *w0, *w1, *wd)
        sync()
        for k, name in enumerate(names):
            assert_equal(block(out, k), part_ref(name, x, y, w0, w1, wd, fill),
                         f"{name} {dtype.name} src0 {w0} src1 {w1} out {wd}")


def test_part_ops_refuse_windows_outside_the_rule():
    """Neither source's window equal to out's, or the partial one larger than out's: a KernelFault (the
    ISA leaves these target-defined)."""
    kernel, _ = part_kernel(FP32)
    x, y = part_data(FP32, 1), part_data(FP32, 2)
    out = torch.zeros(4 * R, C)
    for w0, w1, wd in [((R, 20), (10, C), (R, C)), ((8, C), (R, C), (8, C))]:
        kernel(x, y, out, *w0, *w1, *wd)
        with pytest.raises(pypto_pro.KernelFault) as info:
            sync()
        message = str(info.value)
        assert (f"partadd: the valid windows of 'src0' [{w0[0]}, {w0[1]}] and 'src1' [{w1[0]}, {w1[1]}] do not fit "
                f"'out' [{wd[0]}, {wd[1]}]: one source's window must equal out's and the other's lie inside it"
                in message), message


# ---------------------------------------------------------------------------------------------
# transpose
# ---------------------------------------------------------------------------------------------

TR, TC = 32, 64   # src [32, 64] -> out [64, 32]: both major dims are multiples of 32 bytes for every dtype
TRANSPOSE_DTYPES = [INT8, INT16, INT32, UINT8, UINT16, UINT32, FP16, BF16, FP32]


@functools.lru_cache(maxsize=None)
def transpose_kernel(dtype):
    fill = -7.5 if dtype in FLOATS else SENTINEL

    @pl.jit(name=f"transpose_{dtype.name}")
    def kernel(x: pl.Tensor[[TR, TC], dtype], out: pl.Tensor[[2 * TC, TR], dtype], rows: pl.DT_INT32,
               cols: pl.DT_INT32):
        a = pl.make_tile(pl.TileType(shape=[TR, TC], dtype=dtype, valid_shape=[-1, -1]), addr=0x0)
        o = pl.make_tile(pl.TileType(shape=[TC, TR], dtype=dtype, valid_shape=[-1, -1]), addr=0x4000)
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.transpose(o, a)
            pl.store(out, o, [0, 0])
            # src's window [rows, cols] lands in out's top-left [cols, rows]; out's window is not consulted
            pl.expands(o, fill)
            pl.set_validshape(a, [rows, cols])
            pl.set_validshape(o, [1, 1])
            pl.transpose(o, a)
            pl.set_validshape(o, [TC, TR])
            pl.store(out, o, [TC, 0])

    return kernel, fill


@pytest.mark.parametrize("dtype", TRANSPOSE_DTYPES, ids=dtype_id)
def test_transpose(dtype):
    kernel, fill = transpose_kernel(dtype)
    if dtype in FLOATS:
        x = (torch.randn(TR, TC, generator=torch.Generator().manual_seed(8)) * 5).to(TORCH[dtype])
        out = torch.zeros(2 * TC, TR, dtype=TORCH[dtype])
        t = x.t().contiguous()
    else:
        x = ints(dtype, (TR, TC), 8)
        out = np.zeros((2 * TC, TR), NP[dtype])
        t = np.ascontiguousarray(x.T)
    for rows, cols in [(TR, TC), (WR, 37), (1, TC), (TR, 1)]:
        kernel(x, out, rows, cols)
        sync()
        assert_equal(out[:TC], t, f"transpose {dtype.name}")
        assert_equal(out[TC:], windowed(t, fill, rows=cols, cols=rows), f"transpose {dtype.name} window [{rows}, "
                                                                       f"{cols}]")


# ---------------------------------------------------------------------------------------------
# Run-time checks of the operands' placement
# ---------------------------------------------------------------------------------------------

@pl.jit
def overlapping_scratch(x: pl.Tensor[[R, C], pl.DT_INT32], out: pl.Tensor[[R, C], pl.DT_INT32], which: pl.DT_INT32):
    a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT32), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT32), addr=0x4000)
    at = pl.make_tile(pl.TileType(shape=[C, R], dtype=pl.DT_INT32), addr=0x0)  # a's bytes, transposed shape
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        if which == 0:
            pl.xor(o, a, a, o)  # tmp is out
        else:
            pl.transpose(at, a)  # out is src's bytes
        pl.store(out, o, [0, 0])


@pytest.mark.parametrize("which, message", [
    (0, "xor: 'tmp' overlaps 'out', 'lhs' or 'rhs'; the scratch tile must lie apart from them"),
    (1, "transpose: 'out' overlaps 'src'; transpose into another tile")])
def test_overlapping_operands_are_a_kernel_fault(which, message):
    x = np.arange(R * C, dtype=np.int32).reshape(R, C)
    overlapping_scratch(x, np.zeros_like(x), which)
    with pytest.raises(pypto_pro.KernelFault, match=message):
        sync()


# ---------------------------------------------------------------------------------------------
# The public API pages' call examples, as the pages write them (hicann/pypto,
# docs/zh/pypto_pro/api/SIMD-API/operation/memory_vector_computation/)
# ---------------------------------------------------------------------------------------------

# elementwise/and_.md
@pl.jit(auto_mutex=True)
def and_scalar_kernel(a: pl.Tensor[[64, 64], pl.DT_INT32],
                      out: pl.Tensor[[64, 64], pl.DT_INT32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_out = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.and_(cur_out, cur_a, 7)
        pl.store(out, cur_out, [0, 0])


# elementwise/xor.md
@pl.jit(auto_mutex=True)
def xor_kernel(
    a: pl.Tensor[[64, 64], pl.DT_INT32],
    b: pl.Tensor[[64, 64], pl.DT_INT32],
    out: pl.Tensor[[64, 64], pl.DT_INT32],
):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_tmp = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    tile_out = pl.make_tile_group(type=tt, addrs=0xC000, mutex_ids=[3])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_tmp = tile_tmp.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.xor(cur_out, cur_a, cur_b, cur_tmp)
        pl.store(out, cur_out, [0, 0])


# elementwise/shl.md
@pl.jit(auto_mutex=True)
def shl_kernel(a: pl.Tensor[[64, 64], pl.DT_INT32],
               b: pl.Tensor[[64, 64], pl.DT_INT32],
               out: pl.Tensor[[64, 64], pl.DT_INT32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.shl(cur_out, cur_a, cur_b)
        pl.store(out, cur_out, [0, 0])


# elementwise/shr.md
@pl.jit(auto_mutex=True)
def shr_kernel(a: pl.Tensor[[64, 64], pl.DT_INT32],
               b: pl.Tensor[[64, 64], pl.DT_INT32],
               out: pl.Tensor[[64, 64], pl.DT_INT32]):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.shr(cur_out, cur_a, cur_b)
        pl.store(out, cur_out, [0, 0])


# fused_vector_computation/add_relu_cast.md
@pl.jit(auto_mutex=True)
def add_relu_cast_kernel(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                         out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt_in = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tt_out = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt_in, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt_in, addrs=0x2000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt_out, addrs=0x4000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.add_relu_cast(cur_out, cur_a, cur_b, target_type=pl.DT_FP32, mode=pl.RoundMode.CAST_ROUND)
        pl.store(out, cur_out, [0, 0])


# fused_vector_computation/sub_relu_cast.md
@pl.jit(auto_mutex=True)
def sub_relu_cast_kernel(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                         out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt_in = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tt_out = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt_in, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt_in, addrs=0x2000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt_out, addrs=0x4000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.sub_relu_cast(cur_out, cur_a, cur_b, target_type=pl.DT_FP32, mode=pl.RoundMode.CAST_ROUND)
        pl.store(out, cur_out, [0, 0])


# fused_vector_computation/mul_cast.md
@pl.jit(auto_mutex=True)
def mul_cast_kernel(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                    out: pl.Tensor[[64, 64], pl.DT_FP32]):
    tt_in = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tt_out = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt_in, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tt_in, addrs=0x2000, mutex_ids=[1])
    tile_out = pl.make_tile_group(type=tt_out, addrs=0x4000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.load(cur_b, b, [0, 0])
        pl.mul_cast(cur_out, cur_a, cur_b, target_type=pl.DT_FP32, mode=pl.RoundMode.CAST_ROUND)
        pl.store(out, cur_out, [0, 0])


M, N = 64, 128


# fused_vector_computation/partadd.md
@pl.jit(auto_mutex=True)
def partadd_kernel(
    x: pl.Tensor[[M, N], pl.DT_FP16],
    y: pl.Tensor[[M, N], pl.DT_FP16],
    z: pl.Tensor[[M, N], pl.DT_FP16],
):
    tile_type = pl.TileType(
        shape=[64, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec,
        valid_shape=[-1, -1])
    tile_a = pl.make_tile_group(type=tile_type, addrs=0x0000, mutex_ids=[0])
    tile_b = pl.make_tile_group(type=tile_type, addrs=0x8000, mutex_ids=[1])
    tile_c = pl.make_tile_group(type=tile_type, addrs=0x10000, mutex_ids=[2])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_b = tile_b.current()
        cur_c = tile_c.current()
        pl.set_validshape(cur_a, [64, 128])
        pl.load(cur_a, x, [0, 0])
        pl.set_validshape(cur_b, [32, 128])
        pl.load(cur_b, y, [0, 0])
        pl.set_validshape(cur_c, [64, 128])
        pl.partadd(cur_c, cur_a, cur_b)
        pl.store(z, cur_c, [0, 0])


# fused_vector_computation/partmax.md
@pl.jit(auto_mutex=True)
def partmax_kernel(x: pl.Tensor[[64, 128], pl.DT_FP16],
                   y: pl.Tensor[[64, 128], pl.DT_FP16],
                   out: pl.Tensor[[64, 128], pl.DT_FP16]):
    tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP16,
                     target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1])
    gx = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    gy = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[1])
    gout = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2])
    with pl.section_vector():
        tx, ty, tout = gx.current(), gy.current(), gout.current()
        pl.set_validshape(tx, [64, 128])
        pl.load(tx, x, [0, 0])
        pl.set_validshape(ty, [32, 128])
        pl.load(ty, y, [0, 0])
        pl.set_validshape(tout, [64, 128])
        pl.partmax(tout, tx, ty)
        pl.store(out, tout, [0, 0])


# fused_vector_computation/partmin.md
@pl.jit(auto_mutex=True)
def partmin_kernel(x: pl.Tensor[[64, 128], pl.DT_FP16],
                   y: pl.Tensor[[64, 128], pl.DT_FP16],
                   out: pl.Tensor[[64, 128], pl.DT_FP16]):
    tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP16,
                     target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1])
    gx = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    gy = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[1])
    gout = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2])
    with pl.section_vector():
        tx, ty, tout = gx.current(), gy.current(), gout.current()
        pl.set_validshape(tx, [64, 128])
        pl.load(tx, x, [0, 0])
        pl.set_validshape(ty, [32, 128])
        pl.load(ty, y, [0, 0])
        pl.set_validshape(tout, [64, 128])
        pl.partmin(tout, tx, ty)
        pl.store(out, tout, [0, 0])


# fused_vector_computation/partmul.md
@pl.jit(auto_mutex=True)
def partmul_kernel(x: pl.Tensor[[64, 128], pl.DT_FP16],
                   y: pl.Tensor[[64, 128], pl.DT_FP16],
                   out: pl.Tensor[[64, 128], pl.DT_FP16]):
    tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP16,
                     target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1])
    gx = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    gy = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[1])
    gout = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2])
    with pl.section_vector():
        tx, ty, tout = gx.current(), gy.current(), gout.current()
        pl.set_validshape(tx, [64, 128])
        pl.load(tx, x, [0, 0])
        pl.set_validshape(ty, [32, 128])
        pl.load(ty, y, [0, 0])
        pl.set_validshape(tout, [64, 128])
        pl.partmul(tout, tx, ty)
        pl.store(out, tout, [0, 0])


# transpose_and_element_access/transpose.md
@pl.jit(auto_mutex=True)
def transpose_kernel_page(
    a: pl.Tensor[[64, 64], pl.DT_FP16],
    out: pl.Tensor[[64, 64], pl.DT_FP16],
):
    tt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
    tile_out = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[1])
    with pl.section_vector():
        cur_a = tile_a.current()
        cur_out = tile_out.current()
        pl.load(cur_a, a, [0, 0])
        pl.transpose(cur_out, cur_a)
        pl.store(out, cur_out, [0, 0])


def ramp(rows, cols, start, step, dtype=torch.float16):
    """The pages' inputs: start + step * (linear index), in the dtype."""
    return (start + step * torch.arange(rows * cols, dtype=torch.float64).reshape(rows, cols)).to(dtype)


def page_cases():
    """(kernel, inputs, expected output, documented prefix rows: {row: first values}) per page."""
    i32 = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
    a_and = i32 * 37 - 5000
    a_xor = i32 + 2                                                    # [[2 3 4 ...], [66 67 ...], ...]
    b_xor = np.tile(np.arange(1, 65, dtype=np.int32), (64, 1))          # [[1 2 3 ...], ...]
    a_shift = (i32 * 7919 - 50000).astype(np.int32)
    b_shift = (i32 % 32).astype(np.int32)
    fa, fb = ramp(64, 64, -2, 0.25), ramp(64, 64, 3, -0.125)           # the fused pages' a and b
    px, py = ramp(M, N, 1, 0.25), ramp(M, N, 10, 0.5)                  # partadd's x and y
    pa = ramp(64, 64, 1, 0.25)                                         # transpose's a
    part_y = torch.cat([py[:32], torch.zeros(32, N, dtype=torch.float16)])
    first32 = lambda f: torch.cat([f(px[:32], py[:32]), px[32:]])     # noqa: E731
    return {
        "and_": (and_scalar_kernel, [a_and], a_and & 7, {}),
        "xor": (xor_kernel, [a_xor, b_xor], a_xor ^ b_xor,
                {0: [3, 1, 7, 1, 3, 1, 15, 1], 1: [67, 65, 71, 65, 67, 65, 79, 65],
                 2: [131, 129, 135, 129, 131, 129, 143, 129], 3: [195, 193, 199, 193, 195, 193, 207, 193]}),
        "shl": (shl_kernel, [a_shift, b_shift], ref_shl(a_shift, b_shift, INT32), {}),
        "shr": (shr_kernel, [a_shift, b_shift], a_shift >> b_shift, {}),
        "add_relu_cast": (add_relu_cast_kernel, [fa, fb], relu_t(fa + fb).float(),
                          {0: [1, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875],
                           1: [9, 9.125, 9.25, 9.375, 9.5, 9.625, 9.75, 9.875],
                           3: [25, 25.125, 25.25, 25.375, 25.5, 25.625, 25.75, 25.875]}),
        "sub_relu_cast": (sub_relu_cast_kernel, [fa, fb], relu_t(fa - fb).float(),
                          {0: [0] * 8, 1: [19, 19.375, 19.75, 20.125, 20.5, 20.875, 21.25, 21.625],
                           3: [67, 67.375, 67.75, 68.125, 68.5, 68.875, 69.25, 69.625]}),
        "mul_cast": (mul_cast_kernel, [fa, fb], (fa * fb).float(),  # the product rounded to fp16 first
                     {0: [-6, -5.03125, -4.125, -3.28125, -2.5, -1.78125, -1.125, -0.53125],
                      1: [-70, -73, -76.125, -79.25, -82.5, -85.75, -89.125, -92.5],
                      3: [-966, -977, -988, -999.5, -1010.5, -1022, -1033, -1045]}),
        "partadd": (partadd_kernel, [px, py], first32(torch.add),
                    {0: [11, 11.75, 12.5, 13.25, 14, 14.75, 15.5, 16.25],
                     1: [107, 107.75, 108.5, 109.25, 110, 110.75, 111.5, 112.25],
                     30: [2892, 2892, 2892, 2894, 2894, 2894, 2896, 2896],
                     32: [1025, 1025, 1026, 1026, 1026, 1026, 1026, 1027]}),
        "partmax": (partmax_kernel, [px, part_y], first32(torch.maximum), {}),
        "partmin": (partmin_kernel, [px, part_y], first32(torch.minimum), {}),
        "partmul": (partmul_kernel, [px, part_y], first32(torch.mul), {}),
        "transpose": (transpose_kernel_page, [pa], pa.t().contiguous(),
                      {0: [1, 17, 33, 49, 65, 81, 97, 113], 1: [1.25, 17.25, 33.25, 49.25, 65.25, 81.25, 97.25,
                                                                113.25]}),
    }


PAGES = list(page_cases())


def run_page(kernel, inputs, expected):
    out = torch.zeros_like(expected) if isinstance(expected, torch.Tensor) else np.zeros_like(expected)
    kernel[None, 1](*[x.copy() if isinstance(x, np.ndarray) else x.clone() for x in inputs], out)
    sync()
    return out


@pytest.mark.parametrize("page", PAGES)
def test_page_example_runs_unchanged(page):
    kernel, inputs, expected, documented = page_cases()[page]
    out = run_page(kernel, inputs, expected)
    assert_equal(out, expected, page)
    for row, values in documented.items():
        got = out[row, :len(values)]
        got = got.tolist() if isinstance(got, torch.Tensor) else got.tolist()
        assert got == values, f"{page}: row {row} is {got}, the page documents {values}"


@pytest.mark.parametrize("page", PAGES)
def test_page_example_runs_clean_under_the_sanitizer(page):
    kernel, inputs, expected, _ = page_cases()[page]
    checked = pl.jit(kernel.fn, sanitizer=True, name=f"{kernel.fn.__name__}_checked")
    assert_equal(run_page(checked, inputs, expected), expected, f"{page} (sanitizer)")


# The sanitizer books each partial source at its own valid window, and transpose's out at the
# transposed window: MTE2 writes that the op does not read are no race; those it reads are.
@pl.jit(sanitizer=True)
def unordered_rows(x: pl.Tensor[[R, C], pl.DT_FP32], y: pl.Tensor[[R, C], pl.DT_FP32],
                   z: pl.Tensor[[R, C], pl.DT_FP32], t: pl.Tensor[[C, R], pl.DT_FP32], which: pl.DT_INT32):
    tt = pl.TileType(shape=[R, C], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    a = pl.make_tile(tt, addr=0x0)
    b = pl.make_tile(tt, addr=0x4000)
    o = pl.make_tile(tt, addr=0x8000)
    ot = pl.make_tile(pl.TileType(shape=[C, R], dtype=pl.DT_FP32), addr=0xc000)
    with pl.section_vector():
        lower = b[R // 2:R, 0:C]
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.load(lower, y, [R // 2, 0])  # after the flag: not ordered before V
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        if which == 0:
            pl.set_validshape(b, [R // 2, C])
            pl.partadd(o, a, b)      # reads b's rows 0..R/2 only
        elif which == 1:
            pl.set_validshape(b, [R // 2, C])
            pl.partmax(o, b, a)      # the same, b as src0
        else:
            pl.partmul(o, a, b)      # reads every row of b: races with the unordered load
        pl.transpose(ot, a)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
        pl.store(z, o, [0, 0])
        pl.store(t, ot, [0, 0])


@pytest.mark.parametrize("which", [0, 1, 2])
def test_sanitizer_books_the_windows_the_op_reads(which):
    x, y = torch.randn(R, C), torch.randn(R, C)
    z, t = torch.zeros(R, C), torch.zeros(C, R)
    unordered_rows(x, y, z, t, which)
    if which < 2:
        sync()
        ref = x.clone()
        ref[:R // 2] = (x + y)[:R // 2] if which == 0 else torch.maximum(y, x)[:R // 2]
        assert_equal(z, ref, "partial op under the sanitizer")
        assert_equal(t, x.t().contiguous(), "transpose under the sanitizer")
        return
    with pytest.raises(pypto_pro.SanitizerError) as info:
        sync()
    (finding,) = info.value.findings
    assert finding.kind == "PIPE_RACE" and "read-after-write: V reads tile 'b'" in finding.message, finding


# ---------------------------------------------------------------------------------------------
# Compile-time errors: located at the op's line, naming the operand, the expected and the actual
# ---------------------------------------------------------------------------------------------

T32 = pl.TileType(shape=[R, C], dtype=pl.DT_INT32)
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
    assert err.filename.endswith("test_vector_ops_more.py")


def test_bitwise_errors():
    def float_tiles(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.or_(a, a, a)

    compile_error(float_tiles, "pl.or_(a, a, a)", errors.ParserTypeError,
                  "pl.or_ operand 'out' has dtype fp32, which pl.or_ does not support there (it takes int8, int16, "
                  "int32, uint8, uint16, uint32)")

    def int64_xor(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT64), addr=0)
        t = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT64), addr=0x4000)
        with pl.section_vector():
            pl.xor(a, a, a, t)

    compile_error(int64_xor, "pl.xor(a, a, a, t)", errors.ParserTypeError,
                  "pl.xor operand 'out' has dtype int64, which pl.xor does not support there")

    def float_scalar(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        with pl.section_vector():
            pl.and_(a, a, 1.5)

    compile_error(float_scalar, "pl.and_(a, a, 1.5)", errors.ParserTypeError,
                  "pl.and_: the scalar 'rhs' must be an integer, got an fp32 value")

    def bool_scalar(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        with pl.section_vector():
            pl.or_(a, a, True)

    compile_error(bool_scalar, "pl.or_(a, a, True)", errors.ParserTypeError,
                  "pl.or_: the scalar 'rhs' must be an integer, got a bool")

    def wide_constant(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT8), addr=0)
        with pl.section_vector():
            pl.and_(a, a, 0x1F0)

    compile_error(wide_constant, "pl.and_(a, a, 0x1F0)", errors.ParserValueError,
                  "pl.and_: the scalar 'rhs' = 496 does not fit the 8-bit elements of 'out' (int8): it must lie in "
                  "[-128, 255]")

    def negative_constant(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_UINT16), addr=0)
        with pl.section_vector():
            pl.or_(a, a, -40000)

    compile_error(negative_constant, "pl.or_(a, a, -40000)", errors.ParserValueError,
                  "pl.or_: the scalar 'rhs' = -40000 does not fit the 16-bit elements of 'out' (uint16): it must lie "
                  "in [-32768, 65535]")

    def xor_without_tmp(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        with pl.section_vector():
            pl.xor(a, a, a)

    compile_error(xor_without_tmp, "pl.xor(a, a, a)", errors.ParserTypeError,
                  "pl.xor(out, lhs, rhs, tmp) is missing its 'tmp' argument")

    def xor_scalar(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        t = pl.make_tile(T32, addr=0x4000)
        with pl.section_vector():
            pl.xor(a, a, 3, t)

    compile_error(xor_scalar, "pl.xor(a, a, 3, t)", errors.ParserTypeError,
                  "pl.xor operand 'rhs' must be a tile, got int")

    def small_tmp(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        t = pl.make_tile(pl.TileType(shape=[8, C], dtype=pl.DT_INT32), addr=0x4000)
        with pl.section_vector():
            pl.xor(a, a, a, t)

    compile_error(small_tmp, "pl.xor(a, a, a, t)", errors.ParserTypeError,
                  "pl.xor: operand 'tmp' has shape Tile[[8, 64], int32, Vec] but 'out' is Tile[[16, 64], int32, Vec]")

    def tmp_dtype(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        t = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_UINT32), addr=0x4000)
        with pl.section_vector():
            pl.xor(a, a, a, t)

    compile_error(tmp_dtype, "pl.xor(a, a, a, t)", errors.ParserTypeError,
                  "pl.xor: dtype mismatch: operand 'tmp' is uint32 but 'out' is int32")

    def not_two_operands(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        with pl.section_vector():
            pl.not_(a, a, a)

    compile_error(not_two_operands, "pl.not_(a, a, a)", errors.ParserTypeError,
                  "pl.not_(out, src) takes 2 arguments, got 3")


def test_shift_errors():
    def float_shift(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0)
        with pl.section_vector():
            pl.shl(a, a, a)

    compile_error(float_shift, "pl.shl(a, a, a)", errors.ParserTypeError,
                  "pl.shl operand 'out' has dtype fp16, which pl.shl does not support there (it takes int8, int16, "
                  "int32, int64, uint8, uint16, uint32, uint64)")

    def amount_dtype(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        n = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT16), addr=0x4000)
        with pl.section_vector():
            pl.shr(a, a, n)

    compile_error(amount_dtype, "pl.shr(a, a, n)", errors.ParserTypeError,
                  "pl.shr: dtype mismatch: operand 'rhs' is int16 but 'out' is int32")

    def scalar_amount(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        with pl.section_vector():
            pl.shl(a, a, 3)

    compile_error(scalar_amount, "pl.shl(a, a, 3)", errors.ParserTypeError,
                  "pl.shl operand 'rhs' must be a tile, got int")


def test_binary_cast_errors():
    def no_target(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.add_relu_cast(a, a, a)

    compile_error(no_target, "pl.add_relu_cast(a, a, a)", errors.ParserTypeError,
                  "pl.add_relu_cast() is missing its 'target_type' keyword")

    def target_unlike_out(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        h = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.sub_relu_cast(h, a, a, target_type=pl.DT_FP32)

    compile_error(target_unlike_out, "pl.sub_relu_cast(h, a, a, target_type=pl.DT_FP32)", errors.ParserTypeError,
                  "pl.sub_relu_cast: 'out' is fp16 but target_type=pl.DT_FP32; 'out' must have the target dtype")

    def target_not_a_dtype(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.mul_cast(a, a, a, target_type="fp32")

    compile_error(target_not_a_dtype, 'pl.mul_cast(a, a, a, target_type="fp32")', errors.ParserValueError,
                  "pl.mul_cast(): target_type must be one of DT_BOOL, DT_INT8")

    def int_relu(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(T32, addr=0)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.add_relu_cast(o, a, a, target_type=pl.DT_FP32)

    compile_error(int_relu, "pl.add_relu_cast(o, a, a, target_type=pl.DT_FP32)", errors.ParserTypeError,
                  "pl.add_relu_cast operand 'lhs' has dtype int32, which pl.add_relu_cast does not support there "
                  "(it takes fp16, fp32)")

    def int8_mul(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT8), addr=0)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.mul_cast(o, a, a, target_type=pl.DT_FP16)

    compile_error(int8_mul, "pl.mul_cast(o, a, a, target_type=pl.DT_FP16)", errors.ParserTypeError,
                  "pl.mul_cast operand 'lhs' has dtype int8")

    def mixed_inputs(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        h = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.mul_cast(a, a, h, target_type=pl.DT_FP32)

    compile_error(mixed_inputs, "pl.mul_cast(a, a, h, target_type=pl.DT_FP32)", errors.ParserTypeError,
                  "pl.mul_cast: dtype mismatch: operand 'rhs' is fp16 but 'lhs' is fp32")

    def odd_to_bf16(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BF16), addr=0x4000)
        with pl.section_vector():
            pl.mul_cast(b, a, a, target_type=pl.DT_BF16, mode=pl.RoundMode.CAST_ODD)

    compile_error(odd_to_bf16, "mode=pl.RoundMode.CAST_ODD)", errors.ParserValueError,
                  "pl.mul_cast: mode=pl.RoundMode.CAST_ODD is only defined for fp32 -> fp16 (and ignored where the "
                  "conversion is exact), not fp32 -> bf16")

    def out_shape(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[R, 32], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.add_relu_cast(o, a, a, target_type=pl.DT_FP16)

    compile_error(out_shape, "pl.add_relu_cast(o, a, a, target_type=pl.DT_FP16)", errors.ParserTypeError,
                  "pl.add_relu_cast: operand 'lhs' has shape Tile[[16, 64], fp32, Vec] but 'out' is "
                  "Tile[[16, 32], fp16, Vec]")


def test_part_errors():
    def shapes_differ(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        b = pl.make_tile(pl.TileType(shape=[R // 2, C], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.partadd(a, a, b)

    compile_error(shapes_differ, "pl.partadd(a, a, b)", errors.ParserTypeError,
                  "pl.partadd: operand 'src1' has shape Tile[[8, 64], fp32, Vec] but 'out' is Tile[[16, 64], fp32, "
                  "Vec]")

    def partmul_int64(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT64), addr=0)
        with pl.section_vector():
            pl.partmul(a, a, a)

    compile_error(partmul_int64, "pl.partmul(a, a, a)", errors.ParserTypeError,
                  "pl.partmul operand 'out' has dtype int64, which pl.partmul does not support there")

    def partmax_bool(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_BOOL), addr=0)
        with pl.section_vector():
            pl.partmax(a, a, a)

    compile_error(partmax_bool, "pl.partmax(a, a, a)", errors.ParserTypeError,
                  "pl.partmax operand 'out' has dtype bool")

    def mixed(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        h = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.partmin(a, a, h)

    compile_error(mixed, "pl.partmin(a, a, h)", errors.ParserTypeError,
                  "pl.partmin: dtype mismatch: operand 'src1' is fp16 but 'out' is fp32")


def test_transpose_errors():
    def same_shape(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(same_shape, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: 'out' must have the transposed shape of 'src' [16, 64], [64, 16], got [16, 64]")

    def same_tile(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.transpose(a, a)

    compile_error(same_tile, "pl.transpose(a, a)", errors.ParserValueError,
                  "pl.transpose: 'out' and 'src' are the same tile; transpose into another one")

    def wide_elements(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_INT64), addr=0)
        o = pl.make_tile(pl.TileType(shape=[C, R], dtype=pl.DT_INT64), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(wide_elements, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose operand 'out' has dtype int64, which pl.transpose does not support there (it takes "
                  "int8, int16, int32, uint8, uint16, uint32, fp16, bf16, fp32)")

    def dtypes_differ(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[C, R], dtype=pl.DT_INT32), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(dtypes_differ, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: dtype mismatch: operand 'src' is fp32 but 'out' is int32")

    def unaligned(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, 4], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[4, R], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(unaligned, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: the major dimension of 'src' (its columns, 4 x 4 bytes) must be a multiple of 32 "
                  "bytes; Tile[[16, 4], fp32, Vec]")

    def column_major_out(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, 4], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[4, R], dtype=pl.DT_FP32, layout=pl.DN), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(column_major_out, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: the major dimension of 'out' (its rows, 4 x 4 bytes) must be a multiple of 32 bytes")

    def one_dimensional(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[C], dtype=pl.DT_FP32), addr=0)
        o = pl.make_tile(pl.TileType(shape=[C, 1], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(one_dimensional, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: 'src' must be a 2-D tile, got Tile[[64], fp32, Vec]")

    def fractal(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, 16], dtype=pl.DT_FP16, layout=pl.NZ), addr=0)
        o = pl.make_tile(pl.TileType(shape=[16, R], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(fractal, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose: 'src' must be row-major (ND) or column-major (DN), got Tile[[16, 16], fp16, Vec, NZ]")

    def mat_source(x: pl.Tensor[[R, C], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[R, C], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0)
        o = pl.make_tile(pl.TileType(shape=[C, R], dtype=pl.DT_FP32), addr=0x4000)
        with pl.section_vector():
            pl.transpose(o, a)

    compile_error(mat_source, "pl.transpose(o, a)", errors.ParserTypeError,
                  "pl.transpose operand 'src' must be a tile in Vec memory")


def test_the_new_ops_are_built_and_documented():
    planned = {name for name, _ in pypto_pro._C.ir.planned_ops()}
    for name in ["and_", "or_", "xor", "not_", "shl", "shr", "add_relu_cast", "sub_relu_cast", "mul_cast", "partadd",
                 "partmax", "partmin", "partmul", "transpose"]:
        assert name not in planned, name
        assert getattr(pl, name).kind == "op", name


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")
def test_integer_loops_use_packed_instructions():
    """The bitwise, shift and partial ops on integers run 64 bytes at a time (checked in the compiled
    library, as test_vectorised.py does for the float ops); speed itself is never asserted."""
    kernel = bitwise_kernel(INT32)
    x = ints(INT32, (R, C), 1)
    kernel(x, x, np.zeros((14 * R, C), np.int32), 3)
    shift_kernel(INT32)(x, ints(INT32, (R, C), 2, lo=0, hi=31), np.zeros((5 * R, C), np.int32))
    part, _ = part_kernel(INT32)
    part(x, x, np.zeros((4 * R, C), np.int32), R, C, R, C, R, C)
    sync()
    flags = open("/proc/cpuinfo").read()
    reg = "zmm" if "avx512f" in flags else "ymm" if " avx" in flags else "xmm"
    for k, pattern in ((kernel, r"\bv?p(and|or|xor)[dq]?\s"), (shift_kernel(INT32), r"\bvpsllv|\bvpsrav|\bpsll|\bpsra"),
                       (part, r"\bv?padd[dq]\s")):
        k.wait_compiled()  # a first launch the tier-0 executor ran leaves the library compiling
        (instance,) = k.instances()
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(instance.library)], capture_output=True,
                              text=True, check=True).stdout
        lines = [line for line in text.splitlines() if re.search(pattern, line)]
        assert any(f"%{reg}" in line for line in lines), f"{pattern}: no packed instruction on {reg} registers"


def test_exp_and_fp32_matmul_give_the_same_bits_with_and_without_avx512(monkeypatch):
    """Fused multiply-adds on every host that has them (AVX-512, or AVX2's FMA): exp's polynomial and
    the fp32 GEMM give the same bits with and without AVX-512 (docs/device.md#numerics)."""
    from kernels import _exp_rows, exp_inputs, make_matmul
    x = exp_inputs()
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(64, 64, generator=gen), torch.randn(64, 64, generator=gen)
    results = []
    for flags in ("", "-mno-avx512f -mno-f16c"):
        monkeypatch.setenv("PYPTO_PRO_CXXFLAGS", flags)
        monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
        suffix = "_avx2" if flags else "_host"
        y, c = torch.empty_like(x), torch.empty(64, 64)
        pl.jit(_exp_rows, name="exp_rows" + suffix)[None, 1](x, y)
        make_matmul(pl.DT_FP32, pl.DT_FP32, 64, 64, 64, "fp32_matmul" + suffix)[None, 1](a, b, c)  # 16 KiB tiles
        pypto_pro.runtime.synchronize()
        results.append((y, c))
    (y0, c0), (y1, c1) = results
    assert torch.equal(y0.view(torch.int32), y1.view(torch.int32))
    assert torch.equal(c0.view(torch.int32), c1.view(torch.int32))
    torch.testing.assert_close(y0, torch.exp(x), rtol=3e-7, atol=0, equal_nan=True)
    torch.testing.assert_close(c0, a @ b, rtol=1e-5, atol=1e-4)

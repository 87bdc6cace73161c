"""fuse_ops (docs/device.md#fused-ops): consecutive element-wise and broadcast ops over one window of
local memory run as one pass over it, and every tile they write holds what op by op gives.
Differential tests: every element-wise op and every row / column broadcast on every float dtype,
compiled with fusion (the default) and without (PYPTO_PRO_FUSE_ROWS=0), compared bit for bit and with
torch, on run-time valid windows with tail rows and columns; the fused compile's IR must show the
fused ops. Then the run-time conditions: destinations of different windows and tiles that share
bytes run op by op, with the same results."""

import re

import pytest
import torch

import pypto_pro
from kernels import fused_and_unfused, module_from_source
from test_fuse_direct import (BINARY, HALF_OPS, NO_BF16, POSITIVE, SCALAR, TORCH_DTYPE, UNARY, _reference, _same_bits,
                              _same_values, half_ops_model, indented)

ROWS, COLS = 13, 200  # of 16 x 208 tiles: tail rows, and 8 columns past a multiple of 16

# The op under test writes `to` from `ta` (and `tb` / a column `tc` / a row `tr`), then an add reads its
# result: two ops of one window, so one fused pass, on a valid window set at run time (no direct run).
TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 208], pl.{D}], y: pl.Tensor[[16, 208], pl.{D}], col: pl.Tensor[[16, 1], pl.{D}],
           row: pl.Tensor[[1, 208], pl.{D}], mid: pl.Tensor[[16, 208], pl.{D}], out: pl.Tensor[[16, 208], pl.{D}],
           rows: pl.DT_INT32, cols: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 208], dtype=pl.{D}, valid_shape=[-1, -1])
    ta = pl.make_tile(tt, addr=0x0)
    tb = pl.make_tile(tt, addr=0x4000)
    to = pl.make_tile(tt, addr=0x8000)
    tp = pl.make_tile(tt, addr=0xC000)
    tc = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.{D}, layout=pl.DN, valid_shape=[-1, -1]), addr=0x10000)
    tr = pl.make_tile(pl.TileType(shape=[1, 208], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x10200)
    with pl.section_vector():
        pl.set_validshape(ta, [rows, cols])
        pl.set_validshape(tb, [rows, cols])
        pl.set_validshape(to, [rows, cols])
        pl.set_validshape(tp, [rows, cols])
        pl.set_validshape(tc, [rows, 1])
        pl.set_validshape(tr, [1, cols])
        pl.load(ta, x, [0, 0])
        pl.load(tb, y, [0, 0])
        pl.load(tc, col, [0, 0])
        pl.load(tr, row, [0, 0])
        {OP}
        pl.add(tp, to, tb)
        pl.store(mid, to, [0, 0])
        pl.store(out, tp, [0, 0])
'''

BROADCAST = [f"{kind}_expand_{op}" for kind in ("row", "col") for op in ("add", "sub", "mul", "div", "max", "min")]


def _call(op):
    if op in BINARY:
        return f"pl.{op}(to, ta, tb)"
    if op in SCALAR:
        return f"pl.{op}(to, ta, 1.5)"
    if op in BROADCAST:
        return f"pl.{op}(to, ta, {'tc' if op.startswith('row') else 'tr'})"
    return f"pl.{op}(to, ta)"


def _broadcast_reference(op, x, col, row):
    other = (col if op.startswith("row") else row).float()
    f = x.float()
    return {"add": lambda: f + other, "sub": lambda: f - other, "mul": lambda: f * other, "div": lambda: f / other,
            "max": lambda: torch.maximum(f, other), "min": lambda: torch.minimum(f, other)}[op.split("_")[-1]]()


def _both(monkeypatch, fn, name, launch):
    """(unfused results, fused results, the fused instance's fuse_ops IR, its kernel.cpp)."""
    return fused_and_unfused(monkeypatch, fn, name, launch, "ir_8_fuse_ops.txt")


CASES = [(op, d) for op in BINARY + SCALAR + UNARY + BROADCAST for d in ("DT_FP32", "DT_FP16", "DT_BF16")
         if not (d == "DT_BF16" and op in NO_BF16)]


@pytest.mark.parametrize("op,dtype", CASES)
def test_each_op_gives_the_unfused_bits(tmp_path, monkeypatch, op, dtype):
    module = module_from_source(tmp_path, f"fused_{op}_{dtype}", TEMPLATE.format(D=dtype, OP=_call(op)))
    g = torch.Generator().manual_seed(sum(map(ord, op + dtype)))
    cast = TORCH_DTYPE[dtype]
    x, y = (torch.randn(16, 208, generator=g) * 3).to(cast), torch.randn(16, 208, generator=g).to(cast)
    col, row = torch.randn(16, 1, generator=g).to(cast), torch.randn(1, 208, generator=g).to(cast)
    if op in POSITIVE or op.endswith("div"):
        x, y, col, row = x.abs() + 0.5, y.abs() + 0.5, col.abs() + 0.5, row.abs() + 0.5
    x[0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])  # specials take the same path

    def launch(kernel):
        mid, out = torch.full_like(x, 7), torch.full_like(x, 7)
        kernel[None, 1](x, y, col, row, mid, out, ROWS, COLS)
        return mid, out

    (mid0, out0), (mid1, out1), ir, code = _both(monkeypatch, module.kernel, f"fused_{op}", launch)
    assert re.search(rf"fused ops:\n +{op}\(to(_rows)?, ", ir), ir
    assert "pto::FusedRows<" in code
    assert _same_bits(mid0, mid1) and _same_bits(out0, out1)
    assert (mid1[ROWS:] == 7).all() and (mid1[:, COLS:] == 7).all()  # nothing outside the valid window
    if op in BROADCAST:
        ref_mid = _broadcast_reference(op, x, col, row).to(x.dtype)
        ref_out = (ref_mid.float() + y.float()).to(x.dtype)
    else:
        ref_mid, ref_out = _reference(op, x, y)
    tol = {"DT_FP32": 1e-6, "DT_FP16": 1e-3, "DT_BF16": 8e-3}[dtype]
    window = (slice(1, ROWS), slice(0, COLS))
    torch.testing.assert_close(mid1[window].float(), ref_mid[window].float(), rtol=tol, atol=tol)
    torch.testing.assert_close(out1[window].float(), ref_out[window].float(), rtol=tol, atol=tol)


# Ops whose tiles a run-time condition keeps apart: `shift` rows of overlap between the written view
# and the one read (8: disjoint, fused; 0: the same bytes through two views, 4 and 2: partly shared,
# op by op), and a destination whose valid window differs from the first op's (op by op).
OVERLAP = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[32, 64], pl.DT_FP32], shift: pl.DT_INT32,
           rows: pl.DT_INT32):
    tt = pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    t = pl.make_tile(tt, addr=0x0)
    p = pl.make_tile(tt, addr=0x2000)
    with pl.section_vector():
        pl.set_validshape(t, [32, 64])
        pl.load(t, x, [0, 0])
        pl.set_validshape(p, [rows, 64])
        src = t[0:8, 0:64]
        dst = t[shift:shift + 8, 0:64]
        pl.muls(dst, src, 2.0)
        pl.adds(dst, dst, 1.0)
        pl.exp(p, p)
        pl.store(out, t, [0, 0])
'''


@pytest.mark.parametrize("shift,rows", [(0, 8), (8, 8), (4, 8), (2, 8), (8, 5)])
def test_windows_that_differ_or_overlap_run_op_by_op(tmp_path, monkeypatch, shift, rows):
    module = module_from_source(tmp_path, f"fused_overlap_{shift}_{rows}", OVERLAP)
    x = torch.randn(32, 64) / 4

    def launch(kernel):
        out = torch.full_like(x, 7)
        kernel[None, 1](x, out, shift, rows)
        return out

    out0, out1, ir, code = _both(monkeypatch, module.kernel, f"fused_overlap_{shift}_{rows}", launch)
    assert "fused ops:\n      muls(dst, src, 2" in ir and "      exp(p, p)\n" in ir, ir
    assert "pto::FusedApart(" in code and "valid_rows == fr" in code
    assert _same_bits(out0, out1)
    # op by op: rows [0, 8) scaled into rows [shift, shift + 8), row by row (what a partly shared
    # window gives depends on that order, which the fused pass would not keep)
    ref = x.clone()
    for r in range(8):
        ref[shift + r] = ref[r] * 2.0
    ref[shift:shift + 8] += 1.0
    torch.testing.assert_close(out1, ref, rtol=1e-6, atol=1e-6)


# Row sums at the end of a run add up in its pass, in row_sum's own order (four accumulators over 64
# columns, then 16 at a time, then the zero-padded tail): every column count exercises another path.
SUMS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 208], pl.{D}], y: pl.Tensor[[16, 208], pl.{D}], mid: pl.Tensor[[16, 208], pl.{D}],
           sums: pl.Tensor[[16, 1], pl.{D}], plain: pl.Tensor[[16, 1], pl.{D}], rows: pl.DT_INT32,
           cols: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 208], dtype=pl.{D}, valid_shape=[-1, -1])
    ct = pl.TileType(shape=[16, 1], dtype=pl.{D}, layout=pl.DN, valid_shape=[-1, -1])
    ta = pl.make_tile(tt, addr=0x0)
    tb = pl.make_tile(tt, addr=0x4000)
    to = pl.make_tile(tt, addr=0x8000)
    tp = pl.make_tile(tt, addr=0xC000)
    ts = pl.make_tile(ct, addr=0x10000)
    tq = pl.make_tile(ct, addr=0x10200)
    with pl.section_vector():
        pl.set_validshape(ta, [rows, cols])
        pl.set_validshape(tb, [rows, cols])
        pl.set_validshape(to, [rows, cols])
        pl.set_validshape(ts, [rows, 1])
        pl.set_validshape(tq, [rows, 1])
        pl.load(ta, x, [0, 0])
        pl.load(tb, y, [0, 0])
        pl.mul(to, ta, tb)
        pl.exp(to, to)
        pl.row_sum(ts, to, tp)
        pl.row_sum(tq, ta, tp)
        pl.store(mid, to, [0, 0])
        pl.store(sums, ts, [0, 0])
        pl.store(plain, tq, [0, 0])
'''


@pytest.mark.parametrize("dtype", ["DT_FP32", "DT_FP16"])  # (row_sum's registry dtypes: no bf16)
@pytest.mark.parametrize("cols", [208, 200, 192, 77, 64, 16, 5])
def test_row_sums_in_the_pass_give_row_sums_bits(tmp_path, monkeypatch, dtype, cols):
    module = module_from_source(tmp_path, f"fused_sums_{dtype}_{cols}", SUMS.format(D=dtype))
    g = torch.Generator().manual_seed(cols)
    cast = TORCH_DTYPE[dtype]
    x, y = torch.randn(16, 208, generator=g).to(cast), torch.randn(16, 208, generator=g).to(cast)

    def launch(kernel):
        mid, sums, plain = torch.full_like(x, 7), torch.full((16, 1), 7.0).to(cast), torch.full((16, 1), 7.0).to(cast)
        kernel[None, 1](x, y, mid, sums, plain, ROWS, cols)
        return mid, sums, plain

    unfused, fused, ir, code = _both(monkeypatch, module.kernel, f"fused_sums_{cols}", launch)
    assert re.search(r"fused ops:\n +mul\(to(_rows)?, ta(_rows)?, tb(_rows)?\)\n +exp\(to(_rows)?, to(_rows)?\)\n"
                     r" +row_sum\(ts(_rows)?, to(_rows)?, tp\)\n +row_sum\(tq(_rows)?, ta(_rows)?, tp\)", ir), ir
    assert "pto::FusedRows<" in code and "fused_sums[]" in code
    for a, b in zip(unfused, fused):
        assert _same_bits(a, b)
    mid, sums, plain = fused
    assert (sums[ROWS:] == 7).all() and (mid[:, cols:] == 7).all()
    tol = {"DT_FP32": 1e-5, "DT_FP16": 2e-2}[dtype]
    ref = (x.float() * y.float()).to(cast).float().exp().to(cast).float()[:ROWS, :cols]
    torch.testing.assert_close(sums[:ROWS, 0].float(), ref.sum(1), rtol=tol, atol=tol)
    torch.testing.assert_close(plain[:ROWS, 0].float(), x.float()[:ROWS, :cols].sum(1), rtol=tol, atol=tol)


# A division by each row's max, then the store (softmax's tail): one op and the strip store after it
# are one fused pass that writes the strip's rows to GM itself, when the store would write them at
# that strip; `total` rows of `cols` columns, `skew` elements in front of y's first (a misaligned y).
STORE_TAIL = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[{total}, {cols}], pl.DT_FP32], y: pl.Tensor[[{total}, {cols}], pl.DT_FP32],
           shift: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, {cols}], dtype=pl.DT_FP32), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[16, {cols}], dtype=pl.DT_FP32), addr=0x8000)
    c = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.DT_FP32, layout=pl.DN), addr=0x10000)
    with pl.section_vector():
        for i in pl.range(0, {total} // 16 - 1):
            pl.load(t, x, [i * 16, 0])
            pl.row_max(c, t, o)
            pl.row_expand_div(o, t, c)
            pl.store(y, o, [i * 16 + shift, 0])
'''


@pytest.mark.parametrize("total,cols,in_place,shift,skew", [
    (64, 256, False, 0, 0), (64, 200, False, 3, 0), (64, 256, False, 0, 1), (64, 256, True, 0, 0),
    (64, 256, True, 4, 0), (64, 256, True, 16, 0), (4096, 256, False, 0, 0), (4096, 256, False, 0, 3)])
def test_a_strip_store_joins_the_pass_with_the_unfused_bits(tmp_path, monkeypatch, total, cols, in_place, shift,
                                                            skew):
    """Separate tensors, or in place on the same rows: the pass writes each strip's rows (streamed
    for a 4 MiB y, where a row is 64-byte aligned). In place into rows a later strip still loads: the
    store writes the whole window after the last strip, as written. Every byte of GM is the unfused
    kernel's, and the quotients are IEEE's (torch's)."""
    name = f"store_tail_{total}_{cols}_{int(in_place)}_{shift}_{skew}"
    module = module_from_source(tmp_path, name, STORE_TAIL.format(total=total, cols=cols))
    x = torch.rand(total, cols, generator=torch.Generator().manual_seed(total + cols + shift)) * 4 + 0.25

    def launch(kernel):
        a = x.clone()
        if in_place:
            b = a
        else:
            b = torch.full((total * cols + skew,), 7.0)[skew:].view(total, cols)
        kernel[None, 1](a, b, shift)
        pypto_pro.runtime.synchronize()
        return b.clone()

    unfused, fused, _, code = _both(monkeypatch, module.kernel, name, launch)
    assert "store_rows_target(" in code and "&fused_gm" in code and "FusedColumnDiv<float>" in code, code
    assert _same_bits(unfused, fused)
    if not in_place:
        rows = slice(shift, (total // 16 - 1) * 16 + shift)
        want = x[:(total // 16 - 1) * 16]
        assert torch.equal(fused[rows], want / want.amax(1, keepdim=True))
        assert (fused[:shift] == 7).all() and (fused[rows.stop:] == 7).all()


HALF_CHAIN = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 208], pl.DT_FP16], y: pl.Tensor[[16, 208], pl.DT_FP16],
           s: pl.Tensor[[16, 208], pl.DT_FP16], out: pl.Tensor[[16, 208], pl.DT_FP16], rows: pl.DT_INT32,
           cols: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 208], dtype=pl.DT_FP16, valid_shape=[-1, -1])
    ta = pl.make_tile(tt, addr=0x0)
    tb = pl.make_tile(tt, addr=0x4000)
    tc = pl.make_tile(tt, addr=0x8000)
    td = pl.make_tile(tt, addr=0xC000)
    with pl.section_vector():
        pl.set_validshape(ta, [rows, cols])
        pl.set_validshape(tb, [rows, cols])
        pl.set_validshape(tc, [rows, cols])
        pl.set_validshape(td, [rows, cols])
        pl.load(ta, x, [0, 0])
        pl.load(tb, y, [0, 0])
        if rows > 0:  # (another block than the loads': fused ops, not a direct run)
{CHAIN}
            pl.store(s, tc, [0, 0])
            pl.store(out, td, [0, 0])
'''


@pytest.mark.parametrize("rows, cols", [(16, 208), (13, 200), (5, 17)])
def test_fp16_fused_ops_on_fp16_lanes_give_the_op_by_op_bits_for_every_kind_of_value(tmp_path, monkeypatch, rows,
                                                                                      cols):
    """fp16 add, sub, mul, maximum, minimum and their scalar forms fuse into a pass on the host's fp16
    lanes where it has them (docs/device.md#fused-ops): the op-by-op bits, and torch's, for operands
    drawn from every fp16 bit pattern, on whole and run-time windows (tails of 8 and 17 columns).
    Which operand's NaN an op of two NaNs returns is not specified: a NaN equals a NaN."""
    module = module_from_source(tmp_path, "fused_half_chain", HALF_CHAIN.replace("{CHAIN}", indented(HALF_OPS, 12)))
    g = torch.Generator().manual_seed(rows * cols)
    x, y = (torch.randint(-32768, 32768, (16, 208), generator=g, dtype=torch.int16).view(torch.float16)
            for _ in range(2))

    def launch(kernel):
        s, out = torch.full_like(x, 7), torch.full_like(x, 7)
        kernel[None, 1](x, y, s, out, rows, cols)
        return s, out

    (s0, out0), (s1, out1), ir, code = _both(monkeypatch, module.kernel, f"fused_half_{rows}_{cols}", launch)
    assert "fused ops:" in ir, ir
    assert "pto::FusedRows<pto::half, 2, 0, 0, 2, 0, -1, true>(" in code
    assert _same_values(s0, s1) and _same_values(out0, out1)
    w = (slice(0, rows), slice(0, cols))
    assert (s1[rows:] == 7).all() and (s1[:, cols:] == 7).all()  # nothing outside the window
    ref_s, ref_out = half_ops_model(x[w], y[w])
    assert _same_values(s1[w], ref_s) and _same_values(out1[w], ref_out)

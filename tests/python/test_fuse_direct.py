"""fuse_direct (docs/device.md#direct-runs): a run of loads, element-wise ops and stores goes from GM
through registers to GM, and every result is the one op by op gives. Differential tests: every
element-wise op of the direct set on every float dtype, compiled with the fusion (the default) and
without it (PYPTO_PRO_FUSE_ROWS=0), compared bit for bit and with torch; the fused compile's IR must
show the direct run, so each case really is one. Then the tiles a later statement reads, GM windows
that overlap (which run op by op), and faults (the same line, message and GM contents)."""

import re
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import fused_and_unfused, module_from_source, synchronize_fault

ROOT = Path(__file__).resolve().parents[2]
_LISTS = (ROOT / "device_include" / "pypto_pro" / "op_lists.h").read_text()


def _ops(macro):
    """The op names of one X-macro list of op_lists.h (the one list the device and the pass use)."""
    body = re.search(rf"#define {macro}\(X\)(.*?)(?:\n\n|\n#)", _LISTS, re.S).group(1)
    return re.findall(r"X\((\w+), \w+\)", body)


BINARY, SCALAR, UNARY = _ops("PTO_BINARY_OPS"), _ops("PTO_SCALAR_OPS"), _ops("PTO_UNARY_OPS")
NO_BF16 = {"abs", "rsqrt", "recip", "relu"}  # (their registry dtypes: fp16 and fp32)
HALF_LANES_EXACT = {"add", "sub", "mul", "div", "maximum", "minimum", "adds", "subs", "muls", "divs", "maxs", "mins",
                    "neg", "abs", "relu"}  # codegen's HalfLanesExact
POSITIVE = {"log", "sqrt", "rsqrt", "recip", "div", "divs"}
TORCH_DTYPE = {"DT_FP32": torch.float32, "DT_FP16": torch.float16, "DT_BF16": torch.bfloat16}

TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[64, {C}], pl.{D}], y: pl.Tensor[[64, {C}], pl.{D}], out: pl.Tensor[[64, {C}], pl.{D}],
           mid: pl.Tensor[[64, {C}], pl.{D}]):
    tt = pl.TileType(shape=[16, {C}], dtype=pl.{D}, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    o = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    p = pl.make_tile_group(type=tt, addrs=0x30000, mutex_ids=[6, 7])
    with pl.section_vector():
        for i in pl.range(4):
            ta, tb, to, tp = a.next(), b.next(), o.next(), p.next()
            pl.load(ta, x, [i * 16, 0])
            pl.load(tb, y, [i * 16, 0])
            {OP}
            pl.add(tp, to, tb)
            pl.store(mid, to, [i * 16, 0])
            pl.store(out, tp, [i * 16, 0])
'''


def _call(op):
    if op in BINARY:
        return f"pl.{op}(to, ta, tb)"
    if op in SCALAR:
        return f"pl.{op}(to, ta, 1.5)"
    return f"pl.{op}(to, ta)"


def _reference(op, x, y):
    f = x.float()
    torch_fn = {"add": lambda: f + y.float(), "sub": lambda: f - y.float(), "mul": lambda: f * y.float(),
                "div": lambda: f / y.float(), "maximum": lambda: torch.maximum(f, y.float()),
                "minimum": lambda: torch.minimum(f, y.float()), "adds": lambda: f + 1.5, "subs": lambda: f - 1.5,
                "muls": lambda: f * 1.5, "divs": lambda: f / 1.5, "maxs": lambda: f.clamp(min=1.5),
                "mins": lambda: f.clamp(max=1.5), "neg": lambda: -f, "abs": lambda: f.abs(), "relu": lambda: f.relu(),
                "exp": lambda: f.exp(), "log": lambda: f.log(), "sqrt": lambda: f.sqrt(), "rsqrt": lambda: f.rsqrt(),
                "recip": lambda: 1 / f}[op]
    mid = torch_fn().to(x.dtype)
    return mid, (mid.float() + y.float()).to(x.dtype)



def _both(monkeypatch, fn, name, launch):
    """(unfused results, fused results, the fused instance's fuse_direct IR, its kernel.cpp)."""
    return fused_and_unfused(monkeypatch, fn, name, launch, "ir_5_fuse_direct.txt")


def _same_bits(a, b):
    return torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                       b.view(torch.int16 if b.element_size() == 2 else torch.int32))


def _same_values(a, b):
    """Bit for bit, except that any NaN equals any NaN (its sign and payload are unspecified)."""
    nan = a.isnan()
    return torch.equal(nan, b.isnan()) and _same_bits(a[~nan], b[~nan])


def test_the_op_lists_are_read():
    assert "add" in BINARY and "adds" in SCALAR and "exp" in UNARY and len(BINARY + SCALAR + UNARY) == 20


CASES = [(op, d) for op in BINARY + SCALAR + UNARY for d in ("DT_FP32", "DT_FP16", "DT_BF16")
         if not (d == "DT_BF16" and op in NO_BF16)]


@pytest.mark.parametrize("op,dtype", CASES)
def test_each_elementwise_op_gives_the_unfused_bits(tmp_path, monkeypatch, op, dtype):
    cols = 200 if dtype == "DT_FP32" else 256  # fp32: 8 columns past a multiple of 16 (the padded tail)
    module = module_from_source(tmp_path, f"direct_{op}_{dtype}", TEMPLATE.format(C=cols, D=dtype, OP=_call(op)))
    g = torch.Generator().manual_seed(sum(map(ord, op + dtype)))
    x, y = (torch.randn(64, cols, generator=g) * 3).to(TORCH_DTYPE[dtype]), \
        torch.randn(64, cols, generator=g).to(TORCH_DTYPE[dtype])
    if op in POSITIVE:
        x, y = x.abs() + 0.5, y.abs() + 0.5
    x[0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])  # specials take the same path

    def launch(kernel):
        out, mid = torch.full_like(x, 7), torch.full_like(x, 7)
        kernel[None, 2](x, y, out, mid)
        return out, mid

    (out0, mid0), (out1, mid1), ir, code = _both(monkeypatch, module.kernel, f"direct_{op}", launch)
    assert "direct run (tiles not written: ta, tb, to, tp):" in ir, ir
    # fp16 runs of ops one rounding defines may go on fp16 lanes (the run's second op is an add)
    native = dtype == "DT_FP16" and op in HALF_LANES_EXACT
    assert ("pto::DirectRows<true>(dr, dc, " if native else "pto::DirectRows(dr, dc, ") in code
    assert _same_bits(out0, out1) and _same_bits(mid0, mid1)
    ref_mid, ref_out = _reference(op, x, y)
    tol = {"DT_FP32": 1e-6, "DT_FP16": 1e-3, "DT_BF16": 8e-3}[dtype]
    torch.testing.assert_close(mid1[1:].float(), ref_mid[1:].float(), rtol=tol, atol=tol)
    torch.testing.assert_close(out1[1:].float(), ref_out[1:].float(), rtol=tol, atol=tol)


LIVE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[32, 128], pl.DT_FP32], out: pl.Tensor[[32, 128], pl.DT_FP32],
           after: pl.Tensor[[32, 128], pl.DT_FP32]):
    tt = pl.TileType(shape=[32, 128], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0x0)
    o = pl.make_tile(tt, addr=0x4000)
    p = pl.make_tile(tt, addr=0x8000)
    bias = pl.make_tile(tt, addr=0xC000)
    with pl.section_vector():
        pl.expands(bias, 0.25)
        pl.load(a, x, [0, 0])
        pl.add(o, a, bias)
        pl.muls(o, o, 3.0)
        pl.store(out, o, [0, 0])
        pl.sub(p, o, a)
        pl.store(after, p, [0, 0])
'''


def test_tiles_read_after_the_run_hold_their_values(tmp_path, monkeypatch):
    """`a` (loaded) and `o` (computed) are read by the sub after the run: the run writes both; the
    bias tile is an input from local memory."""
    module = module_from_source(tmp_path, "direct_live", LIVE)
    x = torch.randn(32, 128)

    def launch(kernel):
        out, after = torch.zeros(32, 128), torch.zeros(32, 128)
        kernel[None, 1](x, out, after)
        return out, after

    (out0, after0), (out1, after1), ir, _ = _both(monkeypatch, module.kernel, "direct_live", launch)
    assert "direct run (tiles not written: none):" in ir, ir
    assert torch.equal(out0, out1) and torch.equal(after0, after1)
    assert torch.equal(out1, (x + 0.25) * 3) and torch.equal(after1, (x + 0.25) * 3 - x)


OVERLAP = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[64, 128], pl.DT_FP32], shift: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 128], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0x0)
    o = pl.make_tile(tt, addr=0x2000)
    with pl.section_vector():
        for i in pl.range(3):
            pl.load(a, x, [i * 16, 0])
            pl.muls(o, a, 2.0)
            pl.store(x, o, [i * 16 + shift, 0])
'''


@pytest.mark.parametrize("shift", [0, 8, 16])
def test_overlapping_windows_give_the_op_by_op_result(tmp_path, monkeypatch, shift):
    """In place (shift 0: the same window, which goes directly), half a window down (shift 8: the
    store overlaps the load, which runs op by op) and a whole window down (the next load reads what
    the store wrote)."""
    module = module_from_source(tmp_path, f"direct_overlap_{shift}", OVERLAP)
    start = torch.randn(64, 128)

    def launch(kernel):
        x = start.clone()
        kernel[None, 1](x, shift)
        return x

    unfused, fused, ir, _ = _both(monkeypatch, module.kernel, f"direct_overlap_{shift}", launch)
    assert "direct run (tiles not written: a, o):" in ir, ir
    expected = start.clone()
    for i in range(3):
        window = expected[i * 16:i * 16 + 16].clone()
        expected[i * 16 + shift:i * 16 + shift + 16] = window * 2
    assert torch.equal(unfused, fused) and torch.equal(fused, expected)


FAULTS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[40, 256], pl.DT_FP32], out: pl.Tensor[[40, 256], pl.DT_FP32], start: pl.DT_INT32,
           shift: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x8000)
    with pl.section_vector():
        for i in pl.range(start, 3):
            pl.load(t, x, [i * 16 - shift, 0])
            pl.muls(o, t, 2.0)
            pl.adds(o, o, 1.0)
            pl.store(out, o, [i * 16, 0])
'''


@pytest.mark.parametrize("shift,op,line", [(0, "load", 10), (8, "store", 13)])
def test_a_direct_run_faults_like_its_statements(tmp_path, monkeypatch, shift, op, line):
    """The third tile leaves the tensors' 40 rows: its load's window (shift 0), or only its store's
    (shift 8: the load reads rows [24, 40)). Either way the run faults at that statement's line with its
    message before writing anything of that tile, and GM holds what it holds op by op."""
    module = module_from_source(tmp_path, f"direct_fault_{op}", FAULTS)
    x = torch.randn(40, 256)
    faults = []

    def launch(kernel):
        out = torch.zeros(40, 256)
        kernel[None, 1](x, out, 1, shift)
        with pytest.raises(pypto_pro.KernelFault) as info:
            pypto_pro.runtime.synchronize()
        faults.append(info.value)
        return out

    unfused, fused, ir, _ = _both(monkeypatch, module.kernel, f"direct_fault_{op}", launch)
    assert "direct run (tiles not written: t, o):" in ir, ir
    assert torch.equal(unfused, fused)
    assert torch.equal(fused[16:32], x[16 - shift:32 - shift] * 2 + 1) and torch.equal(fused[32:], torch.zeros(8, 256))
    assert [(f.op, f.line) for f in faults] == [(op, line)] * 2
    first = [str(f).split("\n")[0].replace("_fuse0", "").replace("_fuse1", "") for f in faults]
    assert first[0] == first[1]
    assert "GM access out of bounds" in first[1]


TWO_STORES = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[40, 256], pl.DT_FP32], out: pl.Tensor[[40, 256], pl.DT_FP32], shift: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x0)
    o = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x8000)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.muls(o, t, 2.0)
        pl.store(out, o, [0, 0])
        pl.store(out, o, [shift, 0])
'''


@pytest.mark.parametrize("shift", [16, 30])
def test_a_later_store_of_a_run_faults_after_the_stores_before_it(tmp_path, monkeypatch, shift):
    """The second store's window leaves the tensor (shift 30): op by op the first store has written rows
    [0, 16) when the second faults, and so has the run, which checks the stores after its first without
    faulting and then goes op by op. Shift 16: both fit, one direct run."""
    module = module_from_source(tmp_path, f"two_stores_{shift}", TWO_STORES)
    x = torch.randn(40, 256)
    faults = []

    def launch(kernel):
        out = torch.zeros(40, 256)
        kernel[None, 1](x, out, shift)
        fault = synchronize_fault()
        if fault:
            faults.append(fault)
        return out

    unfused, fused, ir, code = _both(monkeypatch, module.kernel, f"two_stores_{shift}", launch)
    assert "direct run (tiles not written: t, o):" in ir and "pto::direct_store_after(t_out, " in code, ir
    assert torch.equal(unfused, fused) and torch.equal(fused[:16], x[:16] * 2)
    if shift == 16:
        assert not faults and torch.equal(fused[16:32], x[:16] * 2)
    else:
        assert faults[0] == faults[1] and faults[0][:2] == ("store", 11) and "out of bounds" in faults[0][2]
        assert torch.equal(fused[16:], torch.zeros(24, 256))


STREAMED = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}],
           z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}]):
    tt = pl.TileType(shape=[64, 128], dtype=pl.{D}, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 64, pl.get_block_num()):
            for j in pl.range(x.shape[1] // 128):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [i, j])
                pl.load_tile(tb, y, [i, j])
                pl.add(tc, ta, tb)
                pl.store_tile(z, tc, [i, j])
'''


@pytest.mark.parametrize("dtype", ["DT_FP32", "DT_FP16", "DT_BF16"])
def test_large_outputs_written_around_the_caches_are_exact(tmp_path, monkeypatch, dtype):
    """Outputs of 4 MiB and more take non-temporal stores (docs/device.md#memory); the add of the
    README on such tensors equals torch's bit for bit (both round the fp32 sum once)."""
    monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
    module = module_from_source(tmp_path, f"direct_streamed_{dtype}", STREAMED.format(D=dtype))
    kernel = pl.jit(module.kernel, name=f"direct_streamed_{dtype}")
    rows = 1024 if dtype == "DT_FP32" else 2048
    x, y = (torch.randn(rows, 1024).to(TORCH_DTYPE[dtype]) for _ in range(2))
    z = torch.empty_like(x)
    kernel[None, 8](x, y, z)
    pypto_pro.runtime.synchronize()
    assert z.numel() * z.element_size() >= 4 << 20
    assert torch.equal(z, (x.float() + y.float()).to(x.dtype))


# Valid windows set at run time: the run goes directly over the tiles' window when every tile has
# the same one (tail rows and columns here), and op by op when one differs.
WINDOWS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 208], pl.DT_FP32], y: pl.Tensor[[16, 208], pl.DT_FP32],
           out: pl.Tensor[[16, 208], pl.DT_FP32], rows: pl.DT_INT32, cols: pl.DT_INT32, out_rows: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 208], dtype=pl.DT_FP32, valid_shape=[-1, -1])
    a = pl.make_tile(tt, addr=0x0)
    b = pl.make_tile(tt, addr=0x4000)
    o = pl.make_tile(tt, addr=0x8000)
    with pl.section_vector():
        pl.set_validshape(a, [rows, cols])
        pl.set_validshape(b, [rows, cols])
        pl.set_validshape(o, [out_rows, cols])
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
        pl.mul(o, a, b)
        pl.store(out, o, [0, 0])
'''


@pytest.mark.parametrize("rows,cols,out_rows", [(13, 200, 13), (16, 208, 16), (3, 5, 3), (13, 200, 9)])
def test_run_time_windows_go_directly_when_they_agree(tmp_path, monkeypatch, rows, cols, out_rows):
    module = module_from_source(tmp_path, f"direct_windows_{rows}_{cols}_{out_rows}", WINDOWS)
    x, y = torch.randn(16, 208), torch.randn(16, 208)

    def launch(kernel):
        out = torch.full_like(x, 7)
        kernel[None, 1](x, y, out, rows, cols, out_rows)
        return out

    out0, out1, ir, code = _both(monkeypatch, module.kernel, f"direct_windows_{rows}_{out_rows}", launch)
    assert "direct run (tiles not written: none):" in ir, ir  # set_validshape: no declaration stages
    assert "(*v_o).valid_rows == dr" in code
    assert _same_bits(out0, out1)
    # op by op: the product over o's window, reading a and b there (past their own rows when o's
    # window is larger is not the case here: o's rows <= theirs)
    torch.testing.assert_close(out1[:out_rows, :cols], x[:out_rows, :cols] * y[:out_rows, :cols], rtol=0, atol=0)
    assert (out1[out_rows:] == 7).all() and (out1[:, cols:] == 7).all()


# Runs that change dtype with pl.cast: loads of one float dtype, stores of one, casts between them.
MIXED = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[64, 256], pl.{IN}], y: pl.Tensor[[64, 256], pl.{IN}], out: pl.Tensor[[64, 256], pl.{OUT}],
           after: pl.Tensor[[64, 256], pl.{MID}]):
    tin = pl.TileType(shape=[16, 256], dtype=pl.{IN})
    tmid = pl.TileType(shape=[16, 256], dtype=pl.{MID})
    tout = pl.TileType(shape=[16, 256], dtype=pl.{OUT})
    a = pl.make_tile_group(type=tin, addrs=0x0, mutex_ids=[0, 1])          # 16 KiB slots: room for fp32
    b = pl.make_tile_group(type=tin, addrs=0x8000, mutex_ids=[2, 3])
    a2 = pl.make_tile(tmid, addr=0x10000)
    b2 = pl.make_tile(tmid, addr=0x14000)
    m = pl.make_tile(tmid, addr=0x18000)
    o = pl.make_tile_group(type=tout, addrs=0x1C000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(4):
            ta, tb, to = a.next(), b.next(), o.next()
            pl.load(ta, x, [i * 16, 0])
            pl.load(tb, y, [i * 16, 0])
            pl.cast(a2, ta, mode=pl.RoundMode.CAST_NONE)
            pl.cast(b2, tb, mode=pl.RoundMode.CAST_NONE)
            pl.mul(m, a2, b2)
            pl.adds(m, m, 0.25)
            pl.cast(to, m, mode=pl.RoundMode.{MODE})
            pl.store(out, to, [i * 16, 0])
            {AFTER}
'''

MIXED_CASES = [("DT_FP16", "DT_FP32", "DT_FP16", "CAST_RINT"), ("DT_FP16", "DT_FP32", "DT_FP16", "CAST_ODD"),
               ("DT_BF16", "DT_FP32", "DT_BF16", "CAST_FLOOR"), ("DT_FP32", "DT_BF16", "DT_FP32", "CAST_NONE"),
               ("DT_FP16", "DT_FP32", "DT_FP32", "CAST_NONE"), ("DT_FP32", "DT_FP32", "DT_FP16", "CAST_TRUNC"),
               ("DT_FP16", "DT_FP16", "DT_BF16", "CAST_CEIL")]


@pytest.mark.parametrize("din, dmid, dout, mode", MIXED_CASES)
@pytest.mark.parametrize("after", [False, True])
def test_runs_that_cast_give_the_unfused_bits(tmp_path, monkeypatch, din, dmid, dout, mode, after):
    """fp16 / bf16 computed in fp32 and cast back with each round mode, and the other ways round. With a
    store of the fp32 intermediate after the run (`after`), the run must write that tile, whose dtype
    is not the stores': it runs as written."""
    name = f"direct_mixed_{din}_{dmid}_{dout}_{mode}_{after}"
    source = MIXED.format(IN=din, MID=dmid, OUT=dout, MODE=mode,
                          AFTER="pl.store(after, m, [i * 16, 0])" if after else "pass")
    module = module_from_source(tmp_path, name, source)
    g = torch.Generator().manual_seed(len(name))
    x, y = ((torch.randn(64, 256, generator=g) * 40).to(TORCH_DTYPE[din]) for _ in range(2))

    def launch(kernel):
        out, later = torch.full((64, 256), 7).to(TORCH_DTYPE[dout]), torch.full((64, 256), 7).to(TORCH_DTYPE[dmid])
        kernel[None, 1](x, y, out, later)
        return out, later

    (out0, later0), (out1, later1), ir, _ = _both(monkeypatch, module.kernel, name, launch)
    fused = dmid == dout or not after  # a written intermediate of another dtype than the stores' stays as written
    assert ("direct run" in ir) == fused, ir
    assert _same_bits(out0, out1) and _same_bits(later0, later1)
    if mode in ("CAST_RINT", "CAST_NONE"):
        mid = (x.to(TORCH_DTYPE[dmid]).float() * y.to(TORCH_DTYPE[dmid]).float()).to(TORCH_DTYPE[dmid])
        mid = (mid.float() + 0.25).to(TORCH_DTYPE[dmid])
        assert _same_bits(out1, mid.to(TORCH_DTYPE[dout]))


def test_a_run_reading_a_tile_of_another_dtype_from_local_memory_stays_as_written(tmp_path, monkeypatch):
    source = MIXED.format(IN="DT_FP16", MID="DT_FP32", OUT="DT_FP16", MODE="CAST_RINT", AFTER="pass")
    source = source.replace("pl.mul(m, a2, b2)", "pl.mul(m, a2, b2)\n            pl.add(m, m, bias)")
    source = source.replace("    with pl.section_vector():\n",
                            "    bias = pl.make_tile(tmid, addr=0x24000)\n    with pl.section_vector():\n"
                            "        pl.expands(bias, 1.5)\n")
    module = module_from_source(tmp_path, "direct_mixed_bias", source)
    x, y = (torch.randn(64, 256).half() for _ in range(2))

    def launch(kernel):
        out = torch.zeros(64, 256).half()
        kernel[None, 1](x, y, out, torch.zeros(64, 256))
        return out

    out0, out1, ir, _ = _both(monkeypatch, module.kernel, "direct_mixed_bias", launch)
    assert "direct run" not in ir, ir
    assert _same_bits(out0, out1)
    assert _same_bits(out1, ((x.float() * y.float()) + 1.5 + 0.25).half())


# The fp16 ops of fp16 lanes (HALF_LANES_EXACT) one after another, tc = |ta + tb|, the rest into td,
# and their torch model (each op's result rounded to fp16; the scalars rounded to fp16 first).
HALF_OPS = """pl.add(tc, ta, tb)
pl.mul(td, tc, tb)
pl.maximum(td, td, ta)
pl.minimum(td, td, tb)
pl.sub(td, td, ta)
pl.muls(td, td, 0.1)
pl.maxs(td, td, -3.0)
pl.subs(td, td, 1000.3)
pl.divs(td, td, 3.0)
pl.div(td, td, tb)
pl.relu(td, td)
pl.neg(td, td)
pl.abs(tc, tc)"""


def half_ops_model(a, b):
    """(tc, td) as HALF_OPS leave them, in torch (its maximum / minimum as the device's compare-and-select)."""
    c = a + b
    d = torch.where((m := torch.where(c * b > a, c * b, a)) < b, m, b) - a
    tenth, minus3, big, three = (torch.tensor(v).half() for v in (0.1, -3.0, 1000.3, 3.0))
    d = (torch.where((p := d * tenth) > minus3, p, minus3) - big) / three / b
    return c.abs(), -torch.where(d < 0, torch.zeros_like(d), d)


def indented(lines, spaces):
    return "\n".join(" " * spaces + line for line in lines.splitlines())


HALF_CHAIN = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[64, 208], pl.DT_FP16], y: pl.Tensor[[64, 208], pl.DT_FP16],
           s: pl.Tensor[[64, 208], pl.DT_FP16], out: pl.Tensor[[64, 208], pl.DT_FP16]):
    tt = pl.TileType(shape=[16, 208], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x8000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[4, 5])
    d = pl.make_tile_group(type=tt, addrs=0x18000, mutex_ids=[6, 7])
    with pl.section_vector():
        for i in pl.range(4):
            ta, tb, tc, td = a.next(), b.next(), c.next(), d.next()
            pl.load(ta, x, [i * 16, 0])
            pl.load(tb, y, [i * 16, 0])
{CHAIN}
            pl.store(s, tc, [i * 16, 0])
            pl.store(out, td, [i * 16, 0])
'''


def test_fp16_runs_on_fp16_lanes_give_the_fp32_lanes_bits_for_every_kind_of_value(tmp_path, monkeypatch):
    """add, sub, mul, div, maximum, minimum (of tiles, and of a tile and a scalar), neg, abs and relu of
    fp16 tiles go on the host's
    fp16 lanes where it has them (avx512_fp16; docs/device.md#direct-runs), in a direct run and op by
    op, fp32 lanes elsewhere: either way the bits of the fp32 lanes rounded to fp16 (torch's), for
    operands drawn from every fp16 bit pattern (subnormals, infinities, NaNs with payloads, signed
    zeros, sums and products that overflow), 208 columns (a 16-lane tail). Which operand's NaN an op
    of two NaNs returns is not specified (docs/device.md#numerics): a NaN equals a NaN."""
    module = module_from_source(tmp_path, "direct_half_chain", HALF_CHAIN.replace("{CHAIN}", indented(HALF_OPS, 12)))
    g = torch.Generator().manual_seed(16)
    x, y = (torch.randint(-32768, 32768, (64, 208), generator=g, dtype=torch.int16).view(torch.float16)
            for _ in range(2))
    x[1, :8] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 65504, -65504, 6e-8, -6e-8]).half()
    y[1, :8] = torch.tensor([-0.0, 0.0, float("-inf"), float("inf"), 65504, -65504, -6e-8, 6e-8]).half()

    def launch(kernel):
        s, out = torch.full_like(x, 7), torch.full_like(x, 7)
        kernel[None, 1](x, y, s, out)
        return s, out

    (s0, out0), (s1, out1), ir, code = _both(monkeypatch, module.kernel, "direct_half_chain", launch)
    assert "direct run (tiles not written: ta, tb, tc, td):" in ir, ir
    assert "pto::DirectRows<true>(dr, dc, direct_in, direct_out, [&](const auto* in, auto* out)" in code
    assert _same_values(s0, s1) and _same_values(out0, out1)
    ref_s, ref_out = half_ops_model(x, y)
    assert _same_values(s1, ref_s) and _same_values(out1, ref_out)
    assert (x.isnan().sum() > 100) and (x.float().abs() < 6.2e-5).sum() > 30  # NaNs and subnormals drawn

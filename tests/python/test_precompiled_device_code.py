"""Precompiled device headers (docs/jit.md#precompiled-device-headers): every kernel compile reads
pypto_pro/precompiled.h.gch from the cache directory's pch/, built once per compiler, flags and
headers; a damaged one is dropped and the kernel compiles all the same; PYPTO_PRO_PCH=0 turns it off."""

import itertools
import os
import linecache
import textwrap
import time
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import module_from_source

_fresh = itertools.count(1)


def _plus_kernel():
    """A kernel whose code no earlier compile of this process had (its constant is new), so launching
    it compiles instead of reusing a loaded library; and the value it adds."""
    value = float(next(_fresh))
    source = textwrap.dedent(f'''
        def plus(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):
            t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(t, x, [0, 0])
                pl.adds(t, t, {value})
                pl.store(y, t, [0, 0])
        ''')
    filename = f"<pch_plus_{int(value)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for inspect
    namespace = {"pl": pl}
    exec(compile(source, filename, "exec"), namespace)
    return pl.jit(namespace["plus"], name=f"pch_plus_{int(value)}"), value


def _cache_in(tmp_path, monkeypatch):
    """The default cache directory (no opt-in kernel cache) under tmp_path/xdg."""
    monkeypatch.delenv("PYPTO_PRO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A cache directory the tests that only use the precompiled code share (it builds once)."""
    return tmp_path_factory.mktemp("shared_precompiled")



# The torch dtype of each pl dtype the tests run.
TORCH = {"DT_FP32": torch.float32, "DT_FP16": torch.float16, "DT_BF16": torch.bfloat16, "DT_INT64": torch.int64,
         "DT_INT32": torch.int32, "DT_INT8": torch.int8, "DT_UINT8": torch.uint8}


def _compile_and_check():
    kernel, value = _plus_kernel()
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    y = torch.empty_like(x)
    kernel[None, 1](x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, x + value)
    kernel.wait_compiled()  # its first launch may run on the tier-0 executor while it compiles
    assert kernel.compile_stats()[0]["reused"] == ""  # it compiled


def test_compiles_build_the_precompiled_headers_once_and_read_them(tmp_path, monkeypatch):
    _cache_in(tmp_path, monkeypatch)
    monkeypatch.delenv("PYPTO_PRO_PCH", raising=False)
    _compile_and_check()
    # One directory holds the header and the routines library (nothing else: no parts left over).
    (only,) = (tmp_path / "xdg" / "pypto_pro" / "pch").iterdir()
    assert sorted(str(p.relative_to(only)) for p in only.rglob("*") if p.is_file()) == [
        "libpto_routines.so", "pypto_pro/precompiled.h.gch"]
    assert str(only / "libpto_routines.so") in Path("/proc/self/maps").read_text()
    built = list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/pypto_pro/precompiled.h.gch"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    os.utime(only, (time.time() - 10 * 86400,) * 2)  # a set's modification time is its last use
    _compile_and_check()
    assert list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/pypto_pro/precompiled.h.gch")) == built
    assert built[0].stat().st_mtime_ns == stamp  # read, not built again
    assert time.time() - only.stat().st_mtime < 3600  # and the set marked used
    # Damaged (as by a full disk): the compile that fails reading it runs again without it, which
    # proves the compiler read it, and drops it; the next compile builds a whole one.
    built[0].write_bytes(built[0].read_bytes()[:100000])
    _compile_and_check()
    assert not built[0].exists()
    _compile_and_check()
    assert built[0].exists() and built[0].stat().st_size > 100000
    assert not list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/pypto_pro/.tmp*"))  # no leftovers


def test_pch_0_turns_them_off(tmp_path, monkeypatch):
    _cache_in(tmp_path, monkeypatch)
    monkeypatch.setenv("PYPTO_PRO_PCH", "0")
    _compile_and_check()
    assert not (tmp_path / "xdg" / "pypto_pro" / "pch").exists()


def test_an_unwritable_cache_directory_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.delenv("PYPTO_PRO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    monkeypatch.delenv("PYPTO_PRO_PCH", raising=False)
    _compile_and_check()


def test_the_launcher_reads_the_headers_through_precompiled_h(shared, monkeypatch):
    _cache_in(shared, monkeypatch)
    kernel, value = _plus_kernel()
    x = torch.zeros(64, 64)
    kernel[None, 1](x, torch.empty_like(x))
    pypto_pro.runtime.synchronize()
    launcher = (Path(kernel.compile_stats()[0]["dir"]) / "call_kernel.cpp").read_text().splitlines()
    includes = [line for line in launcher if line.startswith("#include")]
    assert includes[:2] == ['#include "pypto_pro/precompiled.h"', '#include "kernel.cpp"']


MATMUL = '''
import pypto_pro.language as pl

def kernel(a: pl.Tensor[[64, 128], pl.{D}], b: pl.Tensor[[128, 64], pl.{D}], c: pl.Tensor[[64, 64], pl.{A}]):
    a_mat = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.{D}, target_memory=pl.MemorySpace.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.{D}, target_memory=pl.MemorySpace.Mat), addr=0x10000)
    left = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.{D}, target_memory=pl.MemorySpace.Left), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.{D}, target_memory=pl.MemorySpace.Right), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.{A}, target_memory=pl.MemorySpace.Acc), addr=0x0)
    with pl.section_cube():
        for kk in pl.range(2):
            pl.load_tile(a_mat, a, [0, kk])
            pl.load_tile(b_mat, b, [kk, 0])
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            if kk == 0:
                pl.matmul(acc, left, right)
            else:
                pl.matmul_acc(acc, acc, left, right)
        pl.store(c, acc, [0, 0])
'''


@pytest.mark.parametrize("dtype", ["DT_FP16", "DT_BF16", "DT_FP32", "DT_INT8"])
def test_cube_kernels_call_the_precompiled_gemm_and_get_its_bits(tmp_path, monkeypatch, shared, dtype):
    _cache_in(shared, monkeypatch)
    acc = "DT_INT32" if dtype == "DT_INT8" else "DT_FP32"
    module = module_from_source(tmp_path, f"matmul_{dtype}", MATMUL.format(D=dtype, A=acc))
    g = torch.Generator().manual_seed(7)
    if dtype == "DT_INT8":
        a = torch.randint(-128, 128, (64, 128), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (128, 64), generator=g, dtype=torch.int8)
    else:
        torch_dtype = TORCH[dtype]
        a = torch.randn(64, 128, generator=g).to(torch_dtype)
        b = torch.randn(128, 64, generator=g).to(torch_dtype)
    results = []
    for pch in ("1", "0"):  # the precompiled GEMM, then the one compiled into the kernel
        monkeypatch.setenv("PYPTO_PRO_PCH", pch)
        kernel = pl.jit(module.kernel, name=f"pch_matmul_{dtype}_{pch}")
        c = torch.empty(64, 64, dtype=torch.int32 if dtype == "DT_INT8" else torch.float32)
        kernel[None, 1](a, b, c)
        pypto_pro.runtime.synchronize()
        results.append(c)
        if pch == "1":  # the kernel's library loaded the routines with it
            assert str(shared / "xdg" / "pypto_pro" / "pch") in Path("/proc/self/maps").read_text()
    assert torch.equal(results[0], results[1])
    if dtype == "DT_INT8":
        assert torch.equal(results[0].long(), a.long() @ b.long())
    else:
        assert torch.allclose(results[0], a.float() @ b.float(), rtol=1e-5, atol=1e-4)
    assert len(list((shared / "xdg" / "pypto_pro" / "pch").glob("*/libpto_routines.so"))) == 1


TRANSFERS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[40, 48], pl.{D}], v: pl.Tensor[[48], pl.{D}], cube: pl.Tensor[[2, 3, 16, 16], pl.{D}],
           deep: pl.Tensor[[1, 1, 1, 2, 16, 16], pl.{D}], out: pl.Tensor[[40, 48], pl.{D}],
           out_t: pl.Tensor[[16, 16], pl.{D}], out_v: pl.Tensor[[48], pl.{D}],
           out_cube: pl.Tensor[[2, 3, 16, 16], pl.{D}], out_deep: pl.Tensor[[1, 1, 1, 2, 16, 16], pl.{D}],
           row: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x0)
    padded = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.{D}, valid_shape=[-1, -1], pad=pl.TilePad.max),
                          addr=0x1000)
    flat = pl.make_tile(pl.TileType(shape=[48], dtype=pl.{D}), addr=0x2000)
    with pl.section_vector():
        for i in pl.range(2):
            for j in pl.range(3):
                pl.load_tile(t, x, [i, j])
                pl.store_tile(out, t, [i, j])
        pl.set_validshape(padded, [5, 11])
        pl.load(padded, x, [32, 37])          # a window with a pad value around it
        pl.store(out, padded, [24, 0])
        pl.load(t, x, [3, 5], order=[1, 0])   # a transposed (gathered) window
        pl.store(out_t, t, [0, 0])
        pl.load(flat, v, [0])
        pl.store(out_v, flat, [0])
        pl.set_validshape(t, [16, 16])
        pl.load(t, cube, [1, 2, 0, 0])
        pl.store(out_cube, t, [0, 1, 0, 0])
        pl.load(t, deep, [0, 0, 0, 1, 0, 0])   # rank 6: compiled inline either way
        pl.store(out_deep, t, [0, 0, 0, 0, 0, 0])
        pl.load(t, x, [row, 0])               # out of bounds for row > 24: a fault at this line
'''


@pytest.mark.parametrize("dtype", ["DT_FP32", "DT_FP16", "DT_INT8", "DT_UINT8", "DT_INT64"])
def test_transfers_through_the_routines_match_the_inline_ones(tmp_path, monkeypatch, shared, dtype):
    """load / load_tile / store / store_tile of every kind (tile indices, element offsets, a pad value,
    order=, 1-D, 4-D and 6-D tensors) and an out-of-bounds load: through the precompiled routines
    (ranks up to 4) and compiled inline, the same bytes and the same fault."""
    _cache_in(shared, monkeypatch)
    module = module_from_source(tmp_path, f"transfers_{dtype}", TRANSFERS.format(D=dtype))
    torch_dtype = TORCH[dtype]
    g = torch.Generator().manual_seed(3)

    def data(*shape):
        return torch.randint(-100, 100, shape, generator=g).to(torch_dtype)

    x, v, cube, deep = data(40, 48), data(48), data(2, 3, 16, 16), data(1, 1, 1, 2, 16, 16)
    runs = []
    for pch in ("1", "0"):
        monkeypatch.setenv("PYPTO_PRO_PCH", pch)
        kernel = pl.jit(module.kernel, name=f"pch_transfers_{dtype}_{pch}")
        outs = [torch.zeros(40, 48, dtype=torch_dtype), torch.zeros(16, 16, dtype=torch_dtype),
                torch.zeros(48, dtype=torch_dtype), torch.zeros(2, 3, 16, 16, dtype=torch_dtype),
                torch.zeros(1, 1, 1, 2, 16, 16, dtype=torch_dtype)]
        kernel[None, 1](x, v, cube, deep, *outs, 24)
        pypto_pro.runtime.synchronize()
        with pytest.raises(pypto_pro.KernelFault) as fault:
            kernel[None, 1](x, v, cube, deep, *[torch.zeros_like(o) for o in outs], 30)
            pypto_pro.runtime.synchronize()
        runs.append((outs, fault.value, str(fault.value).replace(kernel.kernel_name, "<kernel>")))
    (routine, routine_fault, routine_text), (inline, inline_fault, inline_text) = runs
    for a, b in zip(routine, inline):
        assert torch.equal(a, b)
    assert torch.equal(routine[0][:24], x[:24]) and torch.equal(routine[1], x[3:19, 5:21].t())
    assert torch.equal(routine[2], v) and torch.equal(routine[3][0, 1], cube[1, 2])
    assert torch.equal(routine[4][0, 0, 0, 0], deep[0, 0, 0, 1])
    assert torch.equal(routine[0][24:29, :11], x[32:37, 37:48])
    line = next(i for i, text in enumerate(TRANSFERS.splitlines(), 1) if "a fault at this line" in text)
    assert (routine_fault.op, routine_fault.line) == (inline_fault.op, inline_fault.line) == ("load", line)
    assert routine_text == inline_text
    assert "GM access out of bounds: tensor 'x' of shape [40, 48], offsets [30, 0], window [16, 16]" in \
        str(routine_fault)
    assert "libpto_routines.so" in Path("/proc/self/maps").read_text()


BINARY = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 48], pl.{D}], y: pl.Tensor[[16, 48], pl.{D}], out: pl.Tensor[[6, 16, 48], pl.{D}]):
    a = pl.make_tile(pl.TileType(shape=[16, 48], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x0)
    b = pl.make_tile(pl.TileType(shape=[16, 48], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x2000)
    o = pl.make_tile(pl.TileType(shape=[16, 48], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x4000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
        pl.set_validshape(o, [13, 37])      # a partial window: row by row
        pl.add(o, a, b)
        pl.store(out, o, [0, 0, 0])
        pl.set_validshape(o, [16, 48])      # the whole tile: one run
        pl.sub(o, a, b)
        pl.store(out, o, [1, 0, 0])
        pl.mul(o, a, b)
        pl.store(out, o, [2, 0, 0])
        pl.maximum(o, a, b)
        pl.store(out, o, [3, 0, 0])
        pl.minimum(o, a, b)
        pl.store(out, o, [4, 0, 0])
        pl.div(o, a, b)                     # integers: a zero divisor is a fault at this line
        pl.store(out, o, [5, 0, 0])
'''


@pytest.mark.parametrize("dtype", ["DT_FP32", "DT_FP16", "DT_BF16", "DT_INT32", "DT_INT8"])
def test_binary_ops_through_the_routines_match_the_inline_ones(tmp_path, monkeypatch, shared, dtype):
    _cache_in(shared, monkeypatch)
    module = module_from_source(tmp_path, f"binary_{dtype}", BINARY.format(D=dtype))
    torch_dtype = TORCH[dtype]
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(16, 48, generator=g) * 50).to(torch_dtype)
    y = (torch.randn(16, 48, generator=g) * 50).to(torch_dtype)
    y[y == 0] = 3
    runs = []
    for pch in ("1", "0"):
        monkeypatch.setenv("PYPTO_PRO_PCH", pch)
        kernel = pl.jit(module.kernel, name=f"pch_binary_{dtype}_{pch}")
        out = torch.zeros(6, 16, 48, dtype=torch_dtype)
        kernel[None, 1](x, y, out)
        pypto_pro.runtime.synchronize()
        fault = None
        if not torch_dtype.is_floating_point:
            zero = y.clone()
            zero[9, 20] = 0
            with pytest.raises(pypto_pro.KernelFault) as info:
                kernel[None, 1](x, zero, torch.zeros_like(out))
                pypto_pro.runtime.synchronize()
            fault = str(info.value).replace(kernel.kernel_name, "<kernel>")
        runs.append((out, fault))
    (routine, routine_fault), (inline, inline_fault) = runs
    assert torch.equal(routine.view(torch.uint8) if routine.dtype == torch.bfloat16 else routine,
                       inline.view(torch.uint8) if inline.dtype == torch.bfloat16 else inline)
    assert routine_fault == inline_fault
    if fault is not None:
        assert "integer division by zero in a tile" in routine_fault
    if torch_dtype.is_floating_point:
        ref = (x.float() + y.float()).to(torch_dtype)
        assert torch.equal(routine[0, :13, :37], ref[:13, :37]) and not routine[0, 13:].any()
        assert torch.equal(routine[2], (x.float() * y.float()).to(torch_dtype))
    else:
        assert torch.equal(routine[3], torch.maximum(x, y)) and torch.equal(routine[4], torch.minimum(x, y))


VECTOR = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[16, 48], pl.{D}], y: pl.Tensor[[16, 48], pl.{D}], out: pl.Tensor[[{N}, 16, 48], pl.{D}],
           cols: pl.Tensor[[3, 16, 1], pl.{D}]):
    full = pl.TileType(shape=[16, 48], dtype=pl.{D}, valid_shape=[-1, -1])
    a = pl.make_tile(full, addr=0x0)
    b = pl.make_tile(full, addr=0x2000)
    o = pl.make_tile(full, addr=0x4000)
    t = pl.make_tile(full, addr=0x6000)
    col = pl.make_tile(pl.TileType(shape=[16, 1], dtype=pl.{D}, layout=pl.DN, valid_shape=[-1, -1]), addr=0x8000)
    row = pl.make_tile(pl.TileType(shape=[1, 48], dtype=pl.{D}, valid_shape=[-1, -1]), addr=0x8100)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
        pl.load(row, y, [3, 0])
        pl.set_validshape(a, [13, 37])       # partial windows: row by row
        pl.set_validshape(o, [13, 37])
        pl.set_validshape(col, [13, 1])
{RUN}
'''


def _vector_run(dtype):
    """(statements, outputs): each op's result stored to out[i] (and row reductions to cols[i])."""
    ops = ["pl.neg(o, a)", "pl.abs(o, a)", "pl.relu(o, a)",
           "pl.row_expand_add(o, a, col)", "pl.row_expand_sub(o, a, col)", "pl.row_expand_mul(o, a, col)",
           "pl.row_expand_max(o, a, col)", "pl.row_expand_min(o, a, col)", "pl.row_expand_div(o, a, col)",
           "pl.col_expand_add(o, a, row)", "pl.col_expand_sub(o, a, row)", "pl.col_expand_mul(o, a, row)",
           "pl.col_expand_max(o, a, row)", "pl.col_expand_min(o, a, row)", "pl.col_expand_div(o, a, row)"]
    floats = dtype.startswith("DT_FP")
    scalars = ("1.5", "2.25", "0.75", "3.0", "0.5", "-0.5") if floats else ("3", "2", "5", "3", "1", "-1")
    ops += [f"pl.{op}(o, {src}, {value})" for op, src, value in
            zip(("adds", "subs", "muls", "divs", "maxs", "mins"), "aabbaa", scalars)]
    if dtype.startswith("DT_FP"):
        ops += ["pl.exp(o, a)", "pl.log(o, b)", "pl.sqrt(o, b)", "pl.rsqrt(o, b)", "pl.recip(o, b)"]
    lines = ["pl.row_max(col, b, t)", "pl.store(cols, col, [0, 0, 0])", "pl.row_min(col, b, t)",
             "pl.store(cols, col, [1, 0, 0])", "pl.row_sum(col, b, t)", "pl.store(cols, col, [2, 0, 0])"]
    for i, op in enumerate(ops):
        lines += [op, f"pl.store(out, o, [{i}, 0, 0])"]
    return "\n".join(" " * 8 + line for line in lines), len(ops)


@pytest.mark.parametrize("dtype", ["DT_FP32", "DT_FP16", "DT_INT32"])
def test_vector_ops_through_the_routines_match_the_inline_ones(tmp_path, monkeypatch, shared, dtype):
    """unary ops, scalar forms, row and column broadcasts and row reductions: through the
    precompiled routines and compiled inline, the same bits."""
    _cache_in(shared, monkeypatch)
    run, count = _vector_run(dtype)
    module = module_from_source(tmp_path, f"vector_{dtype}", VECTOR.format(D=dtype, N=count, RUN=run))
    torch_dtype = TORCH[dtype]
    g = torch.Generator().manual_seed(9)
    if not torch_dtype.is_floating_point:
        x = torch.randint(-100, 100, (16, 48), generator=g, dtype=torch_dtype)
        y = torch.randint(1, 20, (16, 48), generator=g, dtype=torch_dtype)  # no zero divisor, no overflow
    else:
        x = (torch.randn(16, 48, generator=g) * 3).to(torch_dtype)
        y = (torch.rand(16, 48, generator=g) * 4 + 0.5).to(torch_dtype)  # positive: log, sqrt, divisors
    results = []
    for pch in ("1", "0"):
        monkeypatch.setenv("PYPTO_PRO_PCH", pch)
        kernel = pl.jit(module.kernel, name=f"pch_vector_{dtype}_{pch}")
        out = torch.zeros(count, 16, 48, dtype=torch_dtype)
        cols = torch.zeros(3, 16, 1, dtype=torch_dtype)
        kernel[None, 1](x, y, out, cols)
        pypto_pro.runtime.synchronize()
        results.append((out, cols))
    for routine, inline in zip(*results):
        assert torch.equal(routine, inline) or (routine.is_floating_point() and
                                                torch.equal(routine.isnan(), inline.isnan()) and
                                                torch.equal(routine.nan_to_num(), inline.nan_to_num()))
    out, cols = results[0]
    assert torch.equal(out[0, :13, :37], -x[:13, :37]) and not out[0, 13:].any()
    assert torch.equal(cols[0, :13, 0], y[:13].max(1).values) and torch.equal(cols[1, :13, 0], y[:13].min(1).values)

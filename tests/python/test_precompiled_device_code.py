"""Precompiled device headers (docs/jit.md#precompiled-device-headers): every kernel compile reads
pypto_pro/precompiled.h.gch from the cache directory's pch/, built once per compiler, flags and
headers; a damaged one is dropped and the kernel compiles all the same; PYPTO_PRO_PCH=0 turns it off."""

import importlib.util
import itertools
import linecache
import textwrap
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

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


def _compile_and_check():
    kernel, value = _plus_kernel()
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    y = torch.empty_like(x)
    kernel[None, 1](x, y)
    pypto_pro.runtime.synchronize()
    assert torch.equal(y, x + value)
    assert kernel.compile_stats()[0]["reused"] == ""  # it compiled


def test_compiles_build_the_precompiled_headers_once_and_read_them(tmp_path, monkeypatch):
    _cache_in(tmp_path, monkeypatch)
    monkeypatch.delenv("PYPTO_PRO_PCH", raising=False)
    _compile_and_check()
    built = list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/pypto_pro/precompiled.h.gch"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    _compile_and_check()
    assert list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/pypto_pro/precompiled.h.gch")) == built
    assert built[0].stat().st_mtime_ns == stamp  # read, not built again
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


def test_the_launcher_reads_the_headers_through_precompiled_h(tmp_path, monkeypatch):
    _cache_in(tmp_path, monkeypatch)
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
def test_cube_kernels_call_the_precompiled_gemm_and_get_its_bits(tmp_path, monkeypatch, dtype):
    _cache_in(tmp_path, monkeypatch)
    acc = "DT_INT32" if dtype == "DT_INT8" else "DT_FP32"
    path = tmp_path / f"matmul_{dtype}.py"
    path.write_text(MATMUL.format(D=dtype, A=acc))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    g = torch.Generator().manual_seed(7)
    if dtype == "DT_INT8":
        a = torch.randint(-128, 128, (64, 128), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (128, 64), generator=g, dtype=torch.int8)
    else:
        torch_dtype = {"DT_FP16": torch.float16, "DT_BF16": torch.bfloat16, "DT_FP32": torch.float32}[dtype]
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
            assert str(tmp_path / "xdg" / "pypto_pro" / "pch") in Path("/proc/self/maps").read_text()
    assert torch.equal(results[0], results[1])
    if dtype == "DT_INT8":
        assert torch.equal(results[0].long(), a.long() @ b.long())
    else:
        assert torch.allclose(results[0], a.float() @ b.float(), rtol=1e-5, atol=1e-4)
    assert len(list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/libpto_routines.so"))) == 1


def test_vector_kernels_do_not_build_the_routines(tmp_path, monkeypatch):
    _cache_in(tmp_path, monkeypatch)
    monkeypatch.delenv("PYPTO_PRO_PCH", raising=False)
    _compile_and_check()
    assert not list((tmp_path / "xdg" / "pypto_pro" / "pch").glob("*/libpto_routines.so"))

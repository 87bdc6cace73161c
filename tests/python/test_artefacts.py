"""The artefact tree of docs/jit.md#artefacts, IR dumps and introspection."""

import logging
import os
import re

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import make_add_kernel


def run_add(kernel):
    x = torch.ones(128, 256, dtype=torch.float16)
    z = torch.zeros_like(x)
    kernel[None, 2](x, x, z)
    pypto_pro.runtime.synchronize()
    assert torch.equal(z, x + x)
    kernel.wait_compiled()  # a first launch on the tier-0 executor returns before its library is built


def test_default_root_is_build_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kernel = make_add_kernel()
    run_add(kernel)
    run_add(kernel)
    inst_dir = tmp_path / "build" / "add_kernel__a5" / "tk_none"
    files = sorted(p.name for p in inst_dir.iterdir())
    libs = [f for f in files if re.fullmatch(r"call_kernel_[0-9a-f]{12}\.so", f)]
    assert len(libs) == 1, files
    assert set(files) == {"kernel.cpp", "call_kernel.cpp", libs[0]}  # no temporaries, no stale log
    assert kernel.cache_info()["compiles"] == 1
    (inst,) = kernel.instances()
    assert os.path.samefile(inst.dir, inst_dir)
    assert os.path.samefile(inst.library, inst_dir / libs[0])
    kernel_cpp = (inst_dir / "kernel.cpp").read_text()
    assert '#include "pypto_pro/device.h"' in kernel_cpp and "pto::add(ctx," in kernel_cpp
    call_cpp = (inst_dir / "call_kernel.cpp").read_text()
    assert re.search(r"int64_t call_kernel\(uint32_t blockDim, void\* stream, uint8_t\* a_x, uint8_t\* a_y, "
                     r"uint8_t\* a_z, int32_t dyn0, int32_t dyn1, int32_t dyn2, int32_t dyn3, int32_t dyn4, "
                     r"int32_t dyn5\)", call_cpp)


def test_ascend_work_path(tmp_path, monkeypatch):
    monkeypatch.setenv("ASCEND_WORK_PATH", str(tmp_path / "work"))
    kernel = make_add_kernel(name="add_in_work_path")
    run_add(kernel)
    inst_dir = tmp_path / "work" / "PYPTO_PRO" / "build" / "add_in_work_path__a5" / "tk_none"
    assert (inst_dir / "kernel.cpp").is_file()
    assert os.path.samefile(kernel.instances()[0].dir, inst_dir)


def test_arch_from_the_environment_is_fixed_at_the_first_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYPTOPRO_JIT_ARCH", "a3")
    kernel = make_add_kernel(name="add_env_arch")
    assert kernel.arch is None
    run_add(kernel)
    assert kernel.arch == "a3"
    assert (tmp_path / "build" / "add_env_arch__a3" / "tk_none" / "kernel.cpp").is_file()
    monkeypatch.setenv("PYPTOPRO_JIT_ARCH", "a5")
    run_add(kernel)
    assert kernel.arch == "a3" and kernel.cache_info()["compiles"] == 1


def test_unknown_arch_from_the_environment(monkeypatch):
    monkeypatch.setenv("PYPTOPRO_JIT_ARCH", "a9")
    with pytest.raises(ValueError, match=r"PYPTOPRO_JIT_ARCH='a9' is not a known arch; known: a5, a3, a2"):
        run_add(make_add_kernel())


def test_dump_ir_after_every_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
    run_add(make_add_kernel(name="add_dump"))
    inst_dir = tmp_path / "build" / "add_dump__a5" / "tk_none"
    dumps = sorted((p.name for p in inst_dir.glob("ir_*.txt")), key=lambda name: int(name.split("_")[1]))
    assert dumps == ["ir_0_parse.txt", "ir_1_fold_constants.txt", "ir_2_check_memory.txt", "ir_3_check_data_paths.txt",
                     "ir_4_cv_pipeline.txt", "ir_5_fuse_direct.txt", "ir_6_fuse_direct_loops.txt", "ir_7_fuse_rows.txt",
                     "ir_8_fuse_ops.txt", "ir_9_forward_moves.txt", "ir_10_auto_mutex.txt",
                     "ir_11_fuse_k_loops.txt"]
    parsed = (inst_dir / "ir_0_parse.txt").read_text()
    assert parsed.startswith("kernel add_dump(x: Tensor[[DYNAMIC#0, DYNAMIC#1], fp16]")
    assert "a = make_tile_group(Tile[[128, 128], fp16, Vec], addrs=[0x0, 0x8000], mutex_ids=[[0], [1]]" in parsed
    assert "for i in range(get_block_idx(), x.shape[0] // 128, get_block_num()):" in parsed
    assert "ta = a.next()" in parsed and "load_tile(ta, x, [i, j])" in parsed


def test_auto_mutex_brackets_ops_on_grouped_tiles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
    run_add(make_add_kernel(name="add_auto"))
    after = (tmp_path / "build" / "add_auto__a5" / "tk_none" / "ir_10_auto_mutex.txt").read_text()
    # (inside the direct run fuse_direct made of the loop body, in the direct loop fuse_direct_loops made
    # of the tile loop: its statements as written)
    expected = """\
          direct run (tiles not written: ta, tb, tc):
            auto_mutex_lock([ta], pipe=MTE2)
            load_tile(ta, x, [i, j])
            auto_mutex_unlock([ta], pipe=MTE2)
            auto_mutex_lock([tb], pipe=MTE2)
            load_tile(tb, y, [i, j])
            auto_mutex_unlock([tb], pipe=MTE2)
            auto_mutex_lock([tc, ta, tb], pipe=V)
            add(tc, ta, tb)
            auto_mutex_unlock([tc, ta, tb], pipe=V)
            auto_mutex_lock([tc], pipe=MTE3)
            store_tile(z, tc, [i, j])
            auto_mutex_unlock([tc], pipe=MTE3)
"""
    assert after.endswith(expected), after
    code = (tmp_path / "build" / "add_auto__a5" / "tk_none" / "kernel.cpp").read_text()
    assert "pto::auto_mutex_lock(ctx, " in code and "pto::kPipeV, *v_tc, *v_ta, *v_tb);" in code

    import kernels
    off = pl.jit(kernels.make_add_kernel(name="add_manual").fn, auto_mutex=False, name="add_manual")
    run_add(off)
    inst_dir = tmp_path / "build" / "add_manual__a5" / "tk_none"
    assert "auto_mutex" not in (inst_dir / "ir_10_auto_mutex.txt").read_text()
    assert "auto_mutex" not in (inst_dir / "kernel.cpp").read_text()


def test_static_dims_make_one_instance_per_value(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @pl.jit
    def scale(x: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            for i in pl.range(x.shape[0] // 16):
                pl.load_tile(t, x, [i, 0])
                pl.muls(t, t, 2.0)
                pl.store_tile(y, t, [i, 0])

    for rows in (32, 64, 32):
        x = torch.arange(rows * 64, dtype=torch.float32).reshape(rows, 64)
        y = torch.zeros_like(x)
        scale[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, 2 * x)
    assert scale.cache_info()["compiles"] == 2
    dirs = sorted(p.name for p in (tmp_path / "build").iterdir())
    assert len(dirs) == 2 and all(re.fullmatch(r"scale__a5__shape_[0-9a-f]{12}", d) for d in dirs), dirs
    # The STATIC dim is a constant in the generated code: no shape read for it.
    code = (tmp_path / "build" / dirs[0] / "tk_none" / "kernel.cpp").read_text()
    assert "for (int64_t it0 = lo0; it0 < hi0; it0 += st0)" in code and "t_x.shape[0]" not in code


def test_compile_stats_cover_every_phase(caplog, monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_TIER0", "0")  # every phase before the launch (tier-0: test_tier0.py)
    kernel = make_add_kernel(name="add_stats")
    with caplog.at_level(logging.DEBUG, logger="pypto_pro.jit"):
        run_add(kernel)
    (stats,) = kernel.compile_stats()
    for phase in ("parse_ms", "passes_ms", "codegen_ms", "write_ms", "compile_ms", "load_ms"):
        assert stats[phase] >= 0.0
    assert stats["compile_ms"] > 1.0  # the host compiler really ran
    # The same breakdown as one DEBUG log line per compiled instance.
    (record,) = [r for r in caplog.records if r.name == "pypto_pro.jit"]
    message = record.getMessage()
    assert message.startswith("compiled add_stats in ") and f"compile {stats['compile_ms']:.1f} ms" in message
    assert all(f"{phase} " in message for phase in ("parse", "passes", "codegen", "write", "load"))


def test_host_compiler_failure_keeps_the_sources(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYPTO_PRO_CXXFLAGS", "-include oops_missing.h")
    kernel = make_add_kernel(name="add_broken")
    with pytest.raises(pypto_pro.CompileError) as info:
        run_add(kernel)
    inst_dir = tmp_path / "build" / "add_broken__a5" / "tk_none"
    assert os.path.samefile(info.value.instance_dir, inst_dir)
    assert "kernel.cpp" in str(info.value) and "oops" in info.value.log
    assert (inst_dir / "kernel.cpp").is_file() and (inst_dir / "compile.log").is_file()
    assert not list(inst_dir.glob("*.so")) and not list(inst_dir.glob("*.tmp"))
    monkeypatch.delenv("PYPTO_PRO_CXXFLAGS")
    run_add(kernel)  # the next launch tries again
    assert not (inst_dir / "compile.log").exists()


def test_edited_device_headers_give_a_new_library(tmp_path, monkeypatch):
    """The library name covers the device headers: a kernel compiled against edited headers must not
    get the already-loaded library of the same sources."""
    import shutil
    from pathlib import Path

    headers = tmp_path / "inc"
    shutil.copytree(Path(pypto_pro.__file__).resolve().parents[2] / "device_include", headers)
    monkeypatch.setenv("PYPTO_PRO_DEVICE_INCLUDE", str(headers))
    monkeypatch.setenv("PYPTO_PRO_PCH", "0")  # no routines library per header version (~25 s each to build)
    monkeypatch.chdir(tmp_path)

    def run():
        @pl.jit(name="edited_headers")
        def k(x: pl.Tensor[[16], pl.DT_FP32]):
            t = pl.make_tile(pl.TileType(shape=[16], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(t, x, [0])
                pl.adds(t, t, 1.0)
                pl.store(x, t, [0])
        x = torch.zeros(16)
        k[None, 1](x)
        pypto_pro.runtime.synchronize()
        return x[0].item()

    assert run() == 1.0
    ops = next(headers.rglob("vector_ops.h"))  # adds' functor made a subtraction
    edited = ops.read_text().replace("AddF { template <typename V> V operator()(V a, V b) const { return a + b; }",
                                     "AddF { template <typename V> V operator()(V a, V b) const { return a - b; }")
    assert edited != ops.read_text()
    ops.write_text(edited)
    assert run() == -1.0

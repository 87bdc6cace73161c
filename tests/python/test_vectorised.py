"""The hot loops of generated kernels are vectorised: the compiled library of a vector kernel uses
packed instructions on the widest registers the host has (checked with objdump, as a reviewer
would). Speed itself is never asserted; this checks the code shape that speed depends on."""

import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import cpu_flags, int8_matmul, make_matmul

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")


def widest_register():
    flags = cpu_flags()
    if "avx512f" in flags:
        return "zmm"
    if "avx" in flags:
        return "ymm"
    return "xmm"


def disassemble(kernel):
    """The kernel library's code, and that of the precompiled routines it links (a cube kernel's GEMM,
    docs/jit.md#precompiled-device-headers-and-routines)."""
    (instance,) = kernel.instances()
    instance.wait_compiled()  # a first launch on the tier-0 executor returns before the library is built
    dynamic = subprocess.run(["readelf", "-d", str(instance.library)], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(/[^\]]*libpto_routines\.so)\]", dynamic)
    return "".join(subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                                  check=True).stdout for path in [str(instance.library), *needed])


@pl.jit
def vec_add(x: pl.Tensor[[pl.DYNAMIC, 256], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, 256], pl.DT_FP32],
            z: pl.Tensor[[pl.DYNAMIC, 256], pl.DT_FP32]):
    tt = pl.TileType(shape=[32, 256], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0x0)
    b = pl.make_tile(tt, addr=0x8000)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 32, pl.get_block_num()):
            pl.load_tile(a, x, [i, 0])
            pl.load_tile(b, y, [i, 0])
            pl.add(a, a, b)
            pl.exp(a, a)
            pl.store_tile(z, a, [i, 0])


@pl.jit
def vec_row_sum(x: pl.Tensor[[32, 256], pl.DT_FP32], z: pl.Tensor[[32, 1], pl.DT_FP32]):
    a = pl.make_tile(pl.TileType(shape=[32, 256], dtype=pl.DT_FP32), addr=0x0)
    tmp = pl.make_tile(pl.TileType(shape=[32, 256], dtype=pl.DT_FP32), addr=0x8000)
    s = pl.make_tile(pl.TileType(shape=[32, 1], dtype=pl.DT_FP32, layout=pl.DN), addr=0x10000)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.row_sum(s, a, tmp)
        pl.store(z, s, [0, 0])


def test_elementwise_ops_use_packed_instructions_on_the_widest_registers():
    x = torch.rand(64, 256)
    y = torch.rand(64, 256)
    z = torch.empty_like(x)
    vec_add[None, 2](x, y, z)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(z, torch.exp(x + y), rtol=1e-6, atol=0)
    text = disassemble(vec_add)
    reg = widest_register()
    assert re.search(rf"\bv?addps\s+.*%{reg}", text), f"no packed fp32 add on {reg} registers"
    assert re.search(rf"\bv?mulps\s+.*%{reg}", text), f"exp's polynomial is not packed on {reg} registers"
    assert re.search(rf"\bv?mov[ua]ps\s+.*%{reg}", text), f"no packed loads/stores on {reg} registers"


def test_row_reduction_uses_packed_adds():
    x = np.random.rand(32, 256).astype(np.float32)
    z = np.zeros((32, 1), np.float32)
    vec_row_sum[None, 1](x, z)
    pypto_pro.runtime.synchronize()
    np.testing.assert_allclose(z[:, 0], x.sum(axis=1, dtype=np.float64), rtol=1e-5)
    reg = widest_register()
    assert re.search(rf"\bv?addps\s+.*%{reg}", disassemble(vec_row_sum)), "row_sum does not add packed lanes"


cube_mm = make_matmul(pl.DT_BF16, pl.DT_FP32, 64, 64, 64, "cube_mm")


def test_matmul_inner_loop_uses_packed_fma_or_bf16_dot_products():
    a = torch.randn(64, 64).bfloat16()
    b = torch.randn(64, 64).bfloat16()
    c = torch.empty(64, 64)
    cube_mm[None, 1](a, b, c)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-4)
    text = disassemble(cube_mm)
    reg = widest_register()
    if "amx_bf16" in cpu_flags():  # the tile unit (gemm.h's AMX path), where the host has it
        assert re.search(r"\btdpbf16ps\s+%tmm", text), "bf16 matmul does not use the AMX tiles"
    if "avx512_bf16" in cpu_flags():
        assert re.search(rf"\bvdpbf16ps\s+.*%{reg}", text), "bf16 matmul does not use vdpbf16ps"
    else:
        assert re.search(rf"\bv(fmadd|mul)\w*ps\s+.*%{reg}", text), f"matmul is not packed on {reg} registers"



def test_int8_matmul_uses_the_byte_dot_product_where_the_host_has_it():
    a = torch.randint(-128, 128, (64, 128), dtype=torch.int8)
    b = torch.randint(-128, 128, (128, 64), dtype=torch.int8)
    a[0, :] = -128  # the extremes: a row of -128 against a column of -128 and one of 127
    b[:, 0] = -128
    b[:, 1] = 127
    c = torch.empty(64, 64, dtype=torch.int32)
    int8_matmul[None, 1](a, b, c)
    pypto_pro.runtime.synchronize()
    assert torch.equal(c.long(), a.long() @ b.long())
    assert c[0, 0] == 128 * 128 * 128 and c[0, 1] == -128 * 127 * 128
    if "avx512_vnni" in cpu_flags():
        assert re.search(r"\bvpdpbusd\s+.*%zmm", disassemble(int8_matmul)), "int8 matmul does not use vpdpbusd"
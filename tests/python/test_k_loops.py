"""fuse_k_loops (docs/device.md#k-loops): a K loop of in-place loads, forwarded moves and matmul then
matmul_acc steps runs as one GEMM over k when that gives the steps' bits, else as written; the store
of its accumulator after it writes its window from the GEMM when it would copy the sums as they are
and its window passes its checks, else runs as written. Each kernel
runs compiled with the fusion passes (PYPTO_PRO_FUSE_ROWS=1) and without: the same bits and faults,
torch's values within the matmul's rounding, and the dumps show which loops were marked. The cases
where one GEMM would not give the steps' bits (values the tile unit would round otherwise, a window
that faults, a loop whose tensor the launch writes over) run the steps."""

import pytest
import torch

import pypto_pro.language as pl
from kernels import fused_and_unfused, line_of, synchronize_fault
from test_forward_moves import TORCH, _k_loop, _operands

M = pl.MemorySpace

DUMP = "ir_11_fuse_k_loops.txt"
MARK = "k loop (one GEMM over its steps):"


def _acc_dtype(dtype):
    return torch.int32 if dtype is pl.DT_INT8 else torch.float32


def _acc_pl(dtype):
    return pl.DT_INT32 if dtype is pl.DT_INT8 else pl.DT_FP32


@pytest.mark.parametrize("dtype,kt,steps", [(pl.DT_BF16, 128, 4), (pl.DT_BF16, 128, 3), (pl.DT_FP16, 128, 2),
                                            (pl.DT_INT8, 256, 5)])
def test_a_k_loop_runs_as_one_gemm_with_the_steps_bits(monkeypatch, dtype, kt, steps):
    a, b = _operands(dtype, 192, steps * kt, 256, seed=steps)

    def launch(kernel):
        c = torch.full((192, 256), -1, dtype=_acc_dtype(dtype))
        kernel[None, 2](a, b, c)
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, _k_loop(dtype, kt), f"kl_{dtype.name}_{steps}", launch,
                                                 DUMP)
    assert ir.count(MARK) == 1
    # the store after the loop joined it: the GEMM writes c's window too (c starts at -1: all of it is the store's)
    assert ("const int kdone1 = pto::k_loop_matmul_store<true>(ctx, *v_acc, g_a_mat[0], g_b_mat[0], t_a, int64_t(v_i), "
            "t_b, int64_t(v_j), klo1, khi1, steady_a, steady_b, t_c, pto::Idx<2>{{int64_t(v_i), int64_t(v_j)}});") in code
    assert torch.equal(fused, unfused)
    if dtype is pl.DT_INT8:
        assert torch.equal(fused.long(), a.long() @ b.long())
    else:
        ref = a.double() @ b.double()
        assert torch.allclose(fused.double(), ref, rtol=1e-5, atol=1e-4 * (steps * kt) ** 0.5)


@pytest.mark.parametrize("a_scale,b_scale", [(2.0 ** -60, 2.0 ** -45), (2.0 ** -40, 2.0 ** -40), (1.0, 2.0 ** -100)])
def test_small_bf16_values_give_the_steps_bits(monkeypatch, a_scale, b_scale):
    """Products near 2^-105 (the steps run on the tile unit, each prior checked and added as the step
    decides), near 2^-80 (one GEMM), and B's values that are subnormal (the fp32 path): the bits of
    the steps every time."""
    a, b = _operands(pl.DT_BF16, 128, 4 * 128, 128, seed=9)
    a = (a.float() * a_scale).to(torch.bfloat16)
    b = (b.float() * b_scale).to(torch.bfloat16)

    def launch(kernel):
        c = torch.zeros(128, 128)
        kernel[None, 1](a, b, c)
        return c

    unfused, fused, ir, _ = fused_and_unfused(monkeypatch, _k_loop(pl.DT_BF16, 128),
                                              f"kl_small_{a_scale:g}_{b_scale:g}".replace(".", "_").replace("-", "m"),
                                              launch, DUMP)
    assert MARK in ir
    assert torch.equal(fused.view(torch.int32), unfused.view(torch.int32))
    ref = a.double() @ b.double()
    scale = a_scale * b_scale
    assert torch.allclose(fused.double() / scale, ref / scale, rtol=1e-4, atol=1e-2)


def _bf16(magnitudes, exponents, gen):
    """bf16 values of random sign and 8-bit mantissa: magnitude in [1, 2) times 2^exponents."""
    mantissa = 1 + torch.randint(0, 128, magnitudes, generator=gen).float() / 128
    sign = torch.randint(0, 2, magnitudes, generator=gen).float() * 2 - 1
    return (sign * mantissa * torch.exp2(exponents.float())).to(torch.bfloat16)


def test_a_prior_the_steps_would_not_keep_in_the_tile_unit_gives_the_steps_bits(monkeypatch):
    """Products of 2^-106 and more (the tile unit takes each step: exponents add up to -106), but row 0's
    sums after a step are below 2^-103, so each later step adds its block's prior after its own sums
    (gemm.h, PriorFitsTiles) where one GEMM would have kept them in the tiles: another rounding order,
    so the loop runs as written."""
    gen = torch.Generator().manual_seed(11)
    k = 4 * 128
    a_exp = torch.randint(-8, 9, (128, k), generator=gen)  # sums of many bits: rounded in the order taken
    a_exp[0] = -30  # row 0: tiny values, 8 of each step's 128 nonzero
    a = _bf16((128, k), a_exp, gen)
    a[0] *= (torch.arange(k) % 16 == 0).to(torch.bfloat16)
    b = _bf16((k, 128), torch.full((k, 128), -76), gen)

    def launch(kernel):
        c = torch.zeros(128, 128)
        kernel[None, 1](a, b, c)
        return c

    unfused, fused, ir, _ = fused_and_unfused(monkeypatch, _k_loop(pl.DT_BF16, 128), "kl_prior", launch, DUMP)
    assert MARK in ir
    first = a[0, :128].double() @ b[:128].double()
    assert ((first != 0) & (first.abs() < 2.0 ** -103)).any()  # step 0 leaves row 0 a prior below 2^-103
    assert torch.equal(fused.view(torch.int32), unfused.view(torch.int32))
    ref = a.double() @ b.double()
    assert torch.allclose(fused.double() * 2.0 ** 76, ref * 2.0 ** 76, rtol=1e-5, atol=1e-3)


def test_a_step_whose_window_faults_faults_at_its_step(monkeypatch):
    """B has rows for two of the three steps: the loop runs as written and faults at the third step's
    load, after storing the tiles before it, as without the pass."""
    a, b = _operands(pl.DT_BF16, 128, 3 * 128, 128, seed=3)
    b = b[:256].contiguous()

    def launch(kernel):
        c = torch.zeros(128, 128)
        kernel[None, 1](a, b, c)
        return synchronize_fault(), c

    (unfused_fault, unfused), (fault, c), ir, _ = fused_and_unfused(monkeypatch, _k_loop(pl.DT_BF16, 128),
                                                                    "kl_fault", launch, DUMP)
    assert MARK in ir
    assert fault == unfused_fault
    assert fault[:2] == ("load_tile", line_of(_k_loop, "pl.load_tile(tb, b, [kk, j])"))
    assert "GM access out of bounds" in fault[2]
    assert torch.equal(c, unfused)


def test_the_steps_run_when_the_launch_writes_over_an_operand(monkeypatch):
    """a is a bf16 view of c's bytes: each output tile's K loop reads what the tiles before it stored
    (block_dim 1: tiles in order), so the loop runs as written, its panels read anew."""
    def inputs():
        gen = torch.Generator().manual_seed(5)
        c = torch.randint(-1, 2, (128, 128), generator=gen).float()  # a: [128, 256] bf16, 2 k steps
        b = torch.randint(-1, 2, (256, 128), generator=gen).to(torch.bfloat16)
        return c, b

    def launch(kernel):
        c, b = inputs()
        kernel[None, 1](c.view(torch.bfloat16), b, c)
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, _k_loop(pl.DT_BF16, 128), "kl_aliased", launch, DUMP)
    assert MARK in ir and "pto::k_loop_matmul_store<true>(" in code
    assert torch.equal(fused, unfused)
    c, b = inputs()  # the tiles in order, each from a as the tiles before it left c
    for t in range(4):
        i, j = divmod(t, 2)
        block = c.view(torch.bfloat16)[64 * i:64 * (i + 1)].float() @ b[:, 64 * j:64 * (j + 1)].float()
        c[64 * i:64 * (i + 1), 64 * j:64 * (j + 1)] = block
    assert torch.equal(fused, c)


def _grid_k_loop(dtype, out_t):
    """_k_loop whose output tiles are A's row tiles x B's column tiles (not c's: a smaller c makes
    stores fault), storing each into an out_t tensor by element offsets."""
    acc_t = pl.DT_INT32 if dtype is pl.DT_INT8 else pl.DT_FP32

    def grid_k_loop(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], b: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
                    c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], out_t]):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[64, 128], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x0, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[128, 64], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x10000, mutex_ids=[2, 3])
        left = pl.make_tile_group(type=pl.TileType(shape=[64, 128], dtype=dtype, target_memory=M.Left),
                                  addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=pl.TileType(shape=[128, 64], dtype=dtype, target_memory=M.Right),
                                   addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=acc_t, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            col_tiles = b.shape[1] // 64
            for t in pl.range(pl.get_block_idx(), a.shape[0] // 64 * col_tiles, pl.get_block_num()):
                i = t // col_tiles
                j = t % col_tiles
                for kk in pl.range(a.shape[1] // 128):
                    ta, tb, tl, tr = a_mat.next(), b_mat.next(), left.next(), right.next()
                    pl.load_tile(ta, a, [i, kk])
                    pl.load_tile(tb, b, [kk, j])
                    pl.move(tl, ta)
                    pl.move(tr, tb)
                    if kk == 0:
                        pl.matmul(acc, tl, tr)
                    else:
                        pl.matmul_acc(acc, acc, tl, tr)
                pl.store(c, acc, [i * 64 + 0, j * 64])

    return grid_k_loop


STORE_CALL = ("const int kdone1 = pto::k_loop_matmul_store<false>(ctx, *v_acc, g_a_mat[0], g_b_mat[0], t_a, int64_t(v_i), "
              "t_b, int64_t(v_j), klo1, khi1, steady_a, steady_b, t_c, pto::Idx<2>{{int64_t(((v_i * int32_t(64)) + "
              "int32_t(0))), int64_t((v_j * int32_t(64)))}});")


@pytest.mark.parametrize("dtype", [pl.DT_BF16, pl.DT_INT8])
def test_the_store_after_a_k_loop_writes_its_window_from_the_gemm(monkeypatch, dtype):
    """pl.store at element offsets computed from the tile indices joins the loop: c's window gets the
    finished sums (c starts at -1 and is 1.5 tiles wider than the output: the columns past it stay)."""
    a, b = _operands(dtype, 192, 3 * 128, 128, seed=21)

    def launch(kernel):
        c = torch.full((192, 160), -1, dtype=_acc_dtype(dtype))
        kernel[None, 2](a, b, c)
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, _grid_k_loop(dtype, _acc_pl(dtype)),
                                                 f"kl_store_{dtype.name}", launch, DUMP)
    assert ir.count(MARK) == 1 and STORE_CALL in code
    assert torch.equal(fused, unfused)
    assert torch.equal(fused[:, 128:], torch.full((192, 32), -1, dtype=fused.dtype))
    if dtype is pl.DT_INT8:
        assert torch.equal(fused[:, :128].long(), a.long() @ b.long())
    else:
        assert torch.allclose(fused[:, :128].double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4 * 384 ** 0.5)


def test_a_store_whose_window_faults_runs_after_the_loop_and_faults_at_its_line(monkeypatch):
    """c has rows for the first of two row tiles: the second tile's K loop runs (one GEMM), then its
    store faults at its own line as without the pass, the first tile stored before it."""
    a, b = _operands(pl.DT_BF16, 128, 2 * 128, 64, seed=22)

    def launch(kernel):
        c = torch.full((96, 64), -1.0)
        kernel[None, 1](a, b, c)
        return synchronize_fault(), c

    (unfused_fault, unfused), (fault, c), ir, code = fused_and_unfused(
        monkeypatch, _grid_k_loop(pl.DT_BF16, pl.DT_FP32), "kl_store_fault", launch, DUMP)
    assert MARK in ir and STORE_CALL in code
    assert fault == unfused_fault
    assert fault[:2] == ("store", line_of(_grid_k_loop, "pl.store(c, acc, [i * 64 + 0, j * 64])"))
    assert "GM access out of bounds" in fault[2]
    assert torch.equal(c, unfused)
    assert torch.allclose(c[:64].double(), a[:64].double() @ b.double(), rtol=1e-5, atol=1e-3)
    assert torch.equal(c[64:], torch.full((32, 64), -1.0))


@pytest.mark.parametrize("out", [pl.DT_FP16, pl.DT_BF16])
def test_a_store_that_converts_runs_as_written_after_the_gemm(monkeypatch, out):
    """An fp32 accumulator stored into an fp16 / bf16 tensor: the fixpipe rounds, so the store runs
    as written after the loop's one GEMM; the same bits as without the pass."""
    a, b = _operands(pl.DT_BF16, 128, 2 * 128, 128, seed=23)
    torch_out = TORCH[out]

    def launch(kernel):
        c = torch.zeros(128, 128, dtype=torch_out)
        kernel[None, 2](a, b, c)
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, _grid_k_loop(pl.DT_BF16, out), f"kl_store_{out.name}",
                                                 launch, DUMP)
    assert MARK in ir and STORE_CALL in code
    assert torch.equal(fused.view(torch.int16), unfused.view(torch.int16))
    assert torch.equal(fused, (a.float() @ b.float()).to(torch_out)) or \
        torch.allclose(fused.float(), a.double().matmul(b.double()).float(), rtol=1e-2, atol=1e-2)


def test_a_store_with_options_stays_after_the_loop(monkeypatch):
    """store_tile(..., relu_pre_mode=NormalRelu) is not taken in: the loop is fused, the store runs as
    written."""
    def k_loop_relu(a: pl.Tensor[[128, 256], pl.DT_BF16], b: pl.Tensor[[256, 64], pl.DT_BF16],
                    c: pl.Tensor[[128, 64], pl.DT_FP32]):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Mat),
                                   addrs=0x0, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[128, 64], dtype=pl.DT_BF16, target_memory=M.Mat),
                                   addrs=0x10000, mutex_ids=[2, 3])
        left = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Left), addr=0)
        right = pl.make_tile(pl.TileType(shape=[128, 64], dtype=pl.DT_BF16, target_memory=M.Right), addr=0)
        acc = pl.make_tile(pl.TileType(shape=[128, 64], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            for kk in pl.range(2):
                ta, tb = a_mat.next(), b_mat.next()
                pl.load_tile(ta, a, [0, kk])
                pl.load_tile(tb, b, [kk, 0])
                pl.move(left, ta)
                pl.move(right, tb)
                if kk == 0:
                    pl.matmul(acc, left, right)
                else:
                    pl.matmul_acc(acc, acc, left, right)
            pl.store_tile(c, acc, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu)

    a, b = _operands(pl.DT_BF16, 128, 256, 64, seed=24)

    def launch(kernel):
        c = torch.full((128, 64), -1.0)
        kernel[None, 1](a, b, c)
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, k_loop_relu, "kl_store_relu", launch, DUMP)
    assert MARK in ir and "pto::k_loop_matmul(" in code and "k_loop_matmul_store" not in code
    assert torch.equal(fused, unfused)
    assert torch.allclose(fused.double(), (a.double() @ b.double()).clamp(min=0), rtol=1e-5, atol=1e-3)

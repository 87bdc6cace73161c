"""forward_moves (docs/device.md#forwarded-moves): a plain move of a Mat tile into a Left/Right tile that only
the matmuls right after it read is not run; they read the Mat tile. Each kernel runs compiled with the pass
(PYPTO_PRO_FUSE_ROWS=1) and without it: the same bits, torch's values within the matmul's rounding, and the
IR dump shows which moves were forwarded. The kernels where forwarding would change a result (the Mat tile
written again before the matmul, an L0 tile read outside the move's shadow, partial windows, views) keep
their moves."""

import pytest
import torch

import pypto_pro.language as pl
from kernels import fused_and_unfused

M = pl.MemorySpace
DUMP = "ir_9_forward_moves.txt"
TORCH = {pl.DT_FP16: torch.float16, pl.DT_BF16: torch.bfloat16, pl.DT_FP32: torch.float32, pl.DT_INT8: torch.int8}


def _k_loop(dtype, kt):
    """The K-loop matmul of the benchmarks: Mat and L0 tile groups, matmul then matmul_acc in an if."""
    acc_t = pl.DT_INT32 if dtype is pl.DT_INT8 else pl.DT_FP32

    def k_loop(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], b: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
               c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], acc_t]):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[64, kt], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x0, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[kt, 64], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x10000, mutex_ids=[2, 3])
        left = pl.make_tile_group(type=pl.TileType(shape=[64, kt], dtype=dtype, target_memory=M.Left),
                                  addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=pl.TileType(shape=[kt, 64], dtype=dtype, target_memory=M.Right),
                                   addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=acc_t, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            col_tiles = c.shape[1] // 64
            for t in pl.range(pl.get_block_idx(), c.shape[0] // 64 * col_tiles, pl.get_block_num()):
                i = t // col_tiles
                j = t % col_tiles
                for kk in pl.range(a.shape[1] // kt):
                    ta, tb, tl, tr = a_mat.next(), b_mat.next(), left.next(), right.next()
                    pl.load_tile(ta, a, [i, kk])
                    pl.load_tile(tb, b, [kk, j])
                    pl.move(tl, ta)
                    pl.move(tr, tb)
                    if kk == 0:
                        pl.matmul(acc, tl, tr)
                    else:
                        pl.matmul_acc(acc, acc, tl, tr)
                pl.store_tile(c, acc, [i, j])

    return k_loop


def _operands(dtype, m, k, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if dtype is pl.DT_INT8:
        return (torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8),
                torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8))
    return (torch.randn(m, k, generator=gen).to(TORCH[dtype]), torch.randn(k, n, generator=gen).to(TORCH[dtype]))


@pytest.mark.parametrize("dtype,kt", [(pl.DT_FP16, 128), (pl.DT_BF16, 128), (pl.DT_FP32, 64), (pl.DT_INT8, 256)])
def test_the_k_loop_matmuls_read_the_mat_tiles(monkeypatch, dtype, kt):
    a, b = _operands(dtype, 192, 3 * kt, 128)
    acc_t = torch.int32 if dtype is pl.DT_INT8 else torch.float32

    def launch(kernel):
        c = torch.full((192, 128), -1, dtype=acc_t)
        kernel[None, 4](a, b, c)
        return c

    unfused, forwarded, ir, code = fused_and_unfused(monkeypatch, _k_loop(dtype, kt), f"fwd_k_loop_{dtype.name}",
                                                     launch, DUMP)
    assert torch.equal(unfused, forwarded)
    if dtype is pl.DT_INT8:
        assert torch.equal(forwarded.long(), a.long() @ b.long())
    else:
        ref = a.double() @ b.double()
        assert torch.allclose(forwarded.double(), ref, rtol=1e-5, atol=1e-4 * kt ** 0.5), \
            (forwarded.double() - ref).abs().max()
    assert ir.count("forwarded (not run):") == 2
    assert ir.count("reading ta for tl, tb for tr:") == 2
    # The moves are comments; the matmuls take the Mat tiles.
    assert "pto::move(" not in code
    assert "*v_acc, *v_ta, *v_tb);" in code and "*v_acc, *v_acc, *v_ta, *v_tb);" in code


def _single(rows=64, reload=False, read_later=False, set_window=False):
    """One [rows, 64] x [64, 64] fp16 matmul through Mat and L0 tiles of 64 rows; the options each break
    one condition of forwarding."""
    partial = rows < 64
    a_valid = [rows, 64] if partial else None
    mat_valid = [-1, -1] if set_window else a_valid
    acc_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Acc, valid_shape=a_valid,
                           compact=int(partial))

    def single(a: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16], a2: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16],
               b: pl.Tensor[[64, 64], pl.DT_FP16], c: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
               c2: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
        ta = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat, valid_shape=mat_valid,
                                      compact=int(partial)), addr=0x0)
        tb = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x8000)
        tl = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Left, valid_shape=a_valid,
                                      compact=int(partial)), addr=0x0)
        tr = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Right), addr=0x0)
        acc = pl.make_tile(acc_type, addr=0x0)
        with pl.section_cube():
            blk = pl.get_block_idx()  # each block its own rows: what one leaves in L0, the next must not read
            if set_window:
                pl.set_validshape(ta, [64, 64])
            pl.load_tile(ta, a, [blk, 0])
            pl.load_tile(tb, b, [0, 0])
            pl.move(tl, ta)
            pl.move(tr, tb)
            if reload:
                pl.load_tile(ta, a2, [blk, 0])  # after the move: the matmul must still see a
            pl.matmul(acc, tl, tr)
            pl.store_tile(c, acc, [blk, 0])
            if read_later:
                pl.load_tile(tb, a2, [blk, 0])
                pl.move(tr, tb)
                pl.matmul(acc, tl, tr)  # tl again, outside its move's shadow
                pl.store_tile(c2, acc, [blk, 0])

    return single


@pytest.mark.parametrize("case", ["plain", "reload", "read_later", "partial", "set_window"])
def test_forwarding_never_changes_a_result(monkeypatch, case):
    blocks = 8
    a, a2 = torch.randn(64 * blocks, 64).half(), torch.randn(64 * blocks, 64).half()
    b = torch.randn(64, 64).half()
    rows = 40 if case == "partial" else 64
    fn = _single(rows, reload=case == "reload", read_later=case == "read_later", set_window=case == "set_window")

    def launch(kernel):
        c, c2 = torch.zeros(64 * blocks, 64), torch.zeros(64 * blocks, 64)
        kernel[None, blocks](a, a2, b, c, c2)
        return c, c2

    (c0, c20), (c, c2), ir, _ = fused_and_unfused(monkeypatch, fn, f"fwd_single_{case}", launch, DUMP)
    assert torch.equal(c0, c) and torch.equal(c20, c2)
    for blk in range(blocks):
        r = slice(64 * blk, 64 * blk + rows)
        assert torch.allclose(c[r], a[r].float() @ b.float(), rtol=1e-3, atol=1e-3)
        assert not c[64 * blk + rows:64 * (blk + 1)].any()
        if case == "read_later":
            right = a2[64 * blk:64 * (blk + 1)].float()  # the block's rows of a2, loaded into tb
            assert torch.allclose(c2[r], a[r].float() @ right, rtol=1e-3, atol=1e-3)
    # What stays: nothing when the Mat tile changes before the matmul (the Right move's shadow ends at
    # the load too); the Right move alone when the Left tile is read again later or its window may
    # change; everything goes when nothing can tell.
    forwarded = {"plain": ["tl", "tr"], "reload": [], "read_later": ["tr", "tr"], "partial": ["tr"],
                 "set_window": ["tr"]}[case]
    assert ir.count("forwarded (not run):") == len(forwarded)
    for name in forwarded:
        assert f"forwarded (not run):\n      move({name}, t{'a' if name == 'tl' else 'b'})" in ir

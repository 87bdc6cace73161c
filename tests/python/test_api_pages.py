"""Kernels written after the call examples of the public SIMD-API reference pages of the language
(repository hicann/pypto, folder docs/zh/pypto_pro/api/SIMD-API/): each kernel uses the same calls
with the same argument forms as its page's example (positional / keyword arguments, enums, offsets,
options, tile types, memories, layouts, synchronisation), and its result is compared with a torch
reference. Where a page's example does not run here, the test stays as the page writes it and is
marked xfail with the exact failure."""

import warnings

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors


def sync():
    pypto_pro.runtime.synchronize()


def seeded(seed):
    return torch.Generator().manual_seed(seed)


# ===========================================================================================
# operation/memory_data_movement/move.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def move_l1_to_l0(lhs: pl.Tensor[[64, 64], pl.DT_FP16], rhs: pl.Tensor[[64, 64], pl.DT_FP16],
                  res: pl.Tensor[[64, 64], pl.DT_FP32]):
    l1_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat)
    l0a_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left)
    l0b_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right)
    l0c_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc)
    lhs_l1 = pl.make_tile_group(type=l1_type, addrs=0x0000, mutex_ids=[0])
    rhs_l1 = pl.make_tile_group(type=l1_type, addrs=0x2000, mutex_ids=[1])
    lhs_l0 = pl.make_tile_group(type=l0a_type, addrs=0x0000, mutex_ids=[2])
    rhs_l0 = pl.make_tile_group(type=l0b_type, addrs=0x0000, mutex_ids=[3])
    res_l0c = pl.make_tile_group(type=l0c_type, addrs=0x0000, mutex_ids=[4])
    with pl.section_cube():
        a1 = lhs_l1.current()
        b1 = rhs_l1.current()
        a0 = lhs_l0.current()
        b0 = rhs_l0.current()
        c0 = res_l0c.current()
        pl.load(a1, lhs, [0, 0])  # GM -> L1
        pl.load(b1, rhs, [0, 0])
        pl.move(a0, a1)  # L1 -> L0A
        pl.move(b0, b1)  # L1 -> L0B
        pl.matmul(c0, a0, b0)
        pl.store(res, c0, [0, 0])  # L0C -> GM on the fixpipe


def test_move_page_l1_to_l0_feeds_the_cube():
    """follows the public `move` page's full kernel: load to L1, move L1 -> L0A / L0B, matmul, store."""
    gen = seeded(1)
    lhs, rhs = torch.randn(64, 64, generator=gen).half(), torch.randn(64, 64, generator=gen).half()
    res = torch.zeros(64, 64)
    move_l1_to_l0[None, 1](lhs, rhs, res)
    sync()
    torch.testing.assert_close(res, lhs.float() @ rhs.float(), rtol=1e-4, atol=1e-3)


@pl.jit(auto_mutex=True)
def move_acc_to_vec_scaled(lhs: pl.Tensor[[32, 32], pl.DT_FP16], rhs: pl.Tensor[[32, 32], pl.DT_FP16],
                           res: pl.Tensor[[32, 32], pl.DT_FP32]):
    lhs_l1 = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                                addrs=0x0000, mutex_ids=[0])
    rhs_l1 = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                                addrs=0x0800, mutex_ids=[1])
    lhs_l0 = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                 target_memory=pl.MemorySpace.Left), addrs=0x0, mutex_ids=[2])
    rhs_l0 = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                 target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[3])
    acc_group = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32,
                                                    target_memory=pl.MemorySpace.Acc), addrs=0x0, mutex_ids=[4])
    ub_group = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32,
                                                   target_memory=pl.MemorySpace.Vec), addrs=0x0, mutex_ids=[5])
    with pl.section_cube():
        acc = acc_group.current()
        vec_tile = ub_group.current()
        pl.load(lhs_l1.current(), lhs, [0, 0])
        pl.load(rhs_l1.current(), rhs, [0, 0])
        pl.move(lhs_l0.current(), lhs_l1.current())
        pl.move(rhs_l0.current(), rhs_l1.current())
        pl.matmul(acc, lhs_l0.current(), rhs_l0.current())
        # L0C -> UB of AIV 0, scaled by 2 on the way
        pl.move(vec_tile, acc, scale=2.0, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(res, ub_group.current(), [0, 0])


def test_move_page_acc_to_vec_with_scale():
    """follows the public `move` page: Acc -> Vec with scale=2.0 and SingleModeVec0."""
    gen = seeded(2)
    lhs, rhs = torch.randn(32, 32, generator=gen).half(), torch.randn(32, 32, generator=gen).half()
    res = torch.full((32, 32), float("nan"))
    move_acc_to_vec_scaled[None, 1](lhs, rhs, res)
    sync()
    torch.testing.assert_close(res, (lhs.float() @ rhs.float()) * 2.0, rtol=1e-4, atol=1e-3)


KL0 = 32


@pl.jit(auto_mutex=True)
def move_extract_k_slices(lhs: pl.Tensor[[32, 2 * KL0], pl.DT_FP16], rhs: pl.Tensor[[2 * KL0, 32], pl.DT_FP16],
                          res: pl.Tensor[[32, 32], pl.DT_FP32]):
    wide_a = pl.make_tile_group(type=pl.TileType(shape=[32, 2 * KL0], dtype=pl.DT_FP16,
                                                 target_memory=pl.MemorySpace.Mat), addrs=0x0000, mutex_ids=[0])
    wide_b = pl.make_tile_group(type=pl.TileType(shape=[2 * KL0, 32], dtype=pl.DT_FP16,
                                                 target_memory=pl.MemorySpace.Mat), addrs=0x1000, mutex_ids=[1])
    left_db = pl.make_tile_group(type=pl.TileType(shape=[32, KL0], dtype=pl.DT_FP16,
                                                  target_memory=pl.MemorySpace.Left), addrs=0x0, mutex_ids=[2, 3])
    right_db = pl.make_tile_group(type=pl.TileType(shape=[KL0, 32], dtype=pl.DT_FP16,
                                                   target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[4, 5])
    acc_group = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32,
                                                    target_memory=pl.MemorySpace.Acc), addrs=0x0, mutex_ids=[6])
    with pl.section_cube():
        a_wide_slot = wide_a.current()
        b_wide_slot = wide_b.current()
        acc = acc_group.current()
        pl.load(a_wide_slot, lhs, [0, 0])
        pl.load(b_wide_slot, rhs, [0, 0])
        for k in pl.range(0, 2 * KL0, KL0):
            cur_a_left = left_db.next()
            cur_b_right = right_db.next()
            pl.move(cur_a_left, a_wide_slot, offset=[0, k])  # extract columns k.. of the wide A (TEXTRACT)
            pl.move(cur_b_right, b_wide_slot, offset=[k, 0])  # rows k.. of the wide B
            if k == 0:
                pl.matmul(acc, cur_a_left, cur_b_right)
            else:
                pl.matmul_acc(acc, acc, cur_a_left, cur_b_right)
        pl.store(res, acc, [0, 0])


def test_move_page_extracts_a_sub_block_of_a_wide_source():
    """follows the public `move` page: pl.move(left, wide_mat, offset=[0, KL0]) extracts a K slice."""
    gen = seeded(3)
    lhs, rhs = torch.randn(32, 2 * KL0, generator=gen).half(), torch.randn(2 * KL0, 32, generator=gen).half()
    res = torch.zeros(32, 32)
    move_extract_k_slices[None, 1](lhs, rhs, res)
    sync()
    torch.testing.assert_close(res, lhs.float() @ rhs.float(), rtol=1e-4, atol=1e-3)


@pl.jit(auto_mutex=True)
def move_auto_insert(x: pl.Tensor[[32, 32], pl.DT_FP16], eye: pl.Tensor[[32, 32], pl.DT_FP16],
                     res: pl.Tensor[[32, 32], pl.DT_FP32]):
    p_mat_group = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                      target_memory=pl.MemorySpace.Mat, layout=pl.NZ),
                                     addrs=0x0000, mutex_ids=[0])
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        nd_group = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16,
                                                       target_memory=pl.MemorySpace.Vec),
                                      addrs=0x0000, mutex_ids=[1])
        nz_group = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16,
                                                       target_memory=pl.MemorySpace.Vec, layout=pl.NZ),
                                      addrs=0x0400, mutex_ids=[2])
        half_nd = nd_group.current()
        half_nz = nz_group.current()
        pl.load(half_nd, x, [sub * 16, 0])
        pl.move(half_nz, half_nd)  # ND -> NZ
        # the source is a sub-block of the destination: move behaves as insert (UB -> L1)
        pl.move(p_mat_group.current(), half_nz, offset=[sub * 16, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
    with pl.section_cube():
        eye_l1 = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                     target_memory=pl.MemorySpace.Mat),
                                    addrs=0x0800, mutex_ids=[3]).current()
        left = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                   target_memory=pl.MemorySpace.Left),
                                  addrs=0x0, mutex_ids=[4]).current()
        right = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                    target_memory=pl.MemorySpace.Right),
                                   addrs=0x0, mutex_ids=[5]).current()
        acc = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32,
                                                  target_memory=pl.MemorySpace.Acc),
                                 addrs=0x0, mutex_ids=[6]).current()
        pl.load(eye_l1, eye, [0, 0])
        pl.move(right, eye_l1)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(left, p_mat_group.current())
        pl.matmul(acc, left, right)
        pl.store(res, acc, [0, 0])


def test_move_page_smaller_source_with_offset_inserts():
    """follows the public `move` page: pl.move(p_mat, tile_nz, offset=[...]) with a source smaller than
    the destination is an insert (TINSERT) of both AIVs' halves into the AIC's L1."""
    x = torch.randn(32, 32, generator=seeded(4)).half()
    res = torch.full((32, 32), float("nan"))
    move_auto_insert[None, 1](x, torch.eye(32).half(), res)
    sync()
    assert torch.equal(res, x.float())


SPLIT_M, SPLIT_K, SPLIT_N = 64, 32, 64


def tail_type(shape, dtype, memory):
    """A tile type whose valid shape is set at run time (a tail block); compact=1, as the public load
    page requires of a tail in a fractal (NZ/ZN) tile."""
    return pl.TileType(shape=shape, dtype=dtype, target_memory=memory, valid_shape=[-1, -1], compact=1)


def split_tail_kernel(split_n):
    """C = A @ B with a run-time tail (rows for DualModeSplitM, columns for DualModeSplitN) carried by
    the valid shapes from L1 to L0C, split between the two AIVs by the move; each AIV sets its own
    share with the page's formulas and stores it."""
    mode = pl.AccToVecMode.DualModeSplitN if split_n else pl.AccToVecMode.DualModeSplitM
    vec_shape = [SPLIT_M, SPLIT_N // 2] if split_n else [SPLIT_M // 2, SPLIT_N]

    @pl.jit(auto_mutex=True, name="move_split_n_tail" if split_n else "move_split_m_tail")
    def kernel(lhs: pl.Tensor[[SPLIT_M, SPLIT_K], pl.DT_FP16], rhs: pl.Tensor[[SPLIT_K, SPLIT_N], pl.DT_FP16],
               res: pl.Tensor[[SPLIT_M, SPLIT_N], pl.DT_FP32], valid: pl.DT_INT32):
        a_l1 = pl.make_tile_group(type=tail_type([SPLIT_M, SPLIT_K], pl.DT_FP16, pl.MemorySpace.Mat),
                                  addrs=0x0000, mutex_ids=[0]).current()
        b_l1 = pl.make_tile_group(type=tail_type([SPLIT_K, SPLIT_N], pl.DT_FP16, pl.MemorySpace.Mat),
                                  addrs=0x1000, mutex_ids=[1]).current()
        al = pl.make_tile_group(type=tail_type([SPLIT_M, SPLIT_K], pl.DT_FP16, pl.MemorySpace.Left),
                                addrs=0x0, mutex_ids=[2]).current()
        br = pl.make_tile_group(type=tail_type([SPLIT_K, SPLIT_N], pl.DT_FP16, pl.MemorySpace.Right),
                                addrs=0x0, mutex_ids=[3]).current()
        ac = pl.make_tile_group(type=tail_type([SPLIT_M, SPLIT_N], pl.DT_FP32, pl.MemorySpace.Acc),
                                addrs=0x0, mutex_ids=[4]).current()
        vec = pl.make_tile_group(type=tail_type(vec_shape, pl.DT_FP32, pl.MemorySpace.Vec),
                                 addrs=0x0, mutex_ids=[5]).current()
        with pl.section_cube():
            # GM -> L1 -> L0A/L0B -> L0C keep the real tail size in their valid shapes
            if split_n:
                pl.set_validshape(b_l1, [SPLIT_K, valid])
                pl.set_validshape(br, [SPLIT_K, valid])
            else:
                pl.set_validshape(a_l1, [valid, SPLIT_K])
                pl.set_validshape(al, [valid, SPLIT_K])
            pl.load(a_l1, lhs, [0, 0])
            pl.load(b_l1, rhs, [0, 0])
            pl.move(al, a_l1)
            pl.move(br, b_l1)
            if split_n:
                pl.set_validshape(ac, [SPLIT_M, valid])
            else:
                pl.set_validshape(ac, [valid, SPLIT_N])
            pl.matmul(ac, al, br)
            pl.move(vec, ac, acc_to_vec_mode=mode)  # the framework aligns the Acc window itself
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
        with pl.section_vector():
            sub_id = pl.get_subblock_idx()
            if split_n:
                v0 = (valid + 31) // 32 * 32 // 2
                if valid <= 16:
                    v0 = valid  # a tail of at most 16 columns goes to AIV 0 whole
                v1 = valid - v0
                if sub_id == 0:
                    pl.set_validshape(vec, [SPLIT_M, v0])
                else:
                    pl.set_validshape(vec, [SPLIT_M, v1])
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
                pl.store(res, vec, [0, sub_id * v0])
            else:
                v0 = (valid + 1) // 2 * 2 // 2
                v1 = valid - v0
                if sub_id == 0:
                    pl.set_validshape(vec, [v0, SPLIT_N])
                else:
                    pl.set_validshape(vec, [v1, SPLIT_N])
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
                pl.store(res, vec, [sub_id * v0, 0])
    return kernel


MOVE_SPLIT_M = split_tail_kernel(False)
MOVE_SPLIT_N = split_tail_kernel(True)


@pytest.mark.parametrize("valid_m", [33, SPLIT_M, 1])
def test_move_page_dual_mode_split_m_tail(valid_m):
    """follows the public `move` page's DualModeSplitM tail section: the Acc window [valid_m, N] is split
    by rows, AIV 0 takes (valid_m + 1) // 2 * 2 // 2 rows and AIV 1 the rest (33 -> 17 + 16)."""
    gen = seeded(valid_m)
    lhs = torch.randn(SPLIT_M, SPLIT_K, generator=gen).half()
    rhs = torch.randn(SPLIT_K, SPLIT_N, generator=gen).half()
    res = torch.full((SPLIT_M, SPLIT_N), float("nan"))
    MOVE_SPLIT_M[None, 1](lhs, rhs, res, valid_m)
    sync()
    torch.testing.assert_close(res[:valid_m], (lhs.float() @ rhs.float())[:valid_m], rtol=1e-4, atol=1e-3)
    assert res[valid_m:].isnan().all()


@pytest.mark.parametrize("valid_n", [33, SPLIT_N, 16])
def test_move_page_dual_mode_split_n_tail(valid_n):
    """follows the public `move` page's DualModeSplitN tail section: the Acc window [M, valid_n] is split
    by columns aligned to 32 (33 -> 32 + 1; up to 16 columns all go to AIV 0)."""
    gen = seeded(100 + valid_n)
    lhs = torch.randn(SPLIT_M, SPLIT_K, generator=gen).half()
    rhs = torch.randn(SPLIT_K, SPLIT_N, generator=gen).half()
    res = torch.full((SPLIT_M, SPLIT_N), float("nan"))
    MOVE_SPLIT_N[None, 1](lhs, rhs, res, valid_n)
    sync()
    torch.testing.assert_close(res[:, :valid_n], (lhs.float() @ rhs.float())[:, :valid_n], rtol=1e-4, atol=1e-3)
    assert res[:, valid_n:].isnan().all()


def test_move_page_refuses_a_per_channel_scale_with_a_dual_mode():
    """the public `move` page: a Tile scale= (per-channel) only works with a single-AIV mode, DualModeSplitM /
    DualModeSplitN are an error."""
    def dual_per_channel(res: pl.Tensor[[32, 32], pl.DT_FP32]):
        factors = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_INT64, target_memory=pl.MemorySpace.Scaling),
                               addr=0x0)
        acc = pl.make_tile(pl.TileType(shape=[32, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
        vec = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0x0)
        with pl.section_cube():
            pl.move(vec, acc, scale=factors, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
        with pl.section_vector():
            pl.store(res, vec, [0, 0])

    with pytest.raises(errors.ParserValueError,
                       match=r"scale= takes a single-AIV acc_to_vec_mode \(SingleModeVec0/1\), not a dual one"):
        pl.jit(dual_per_channel)[None, 1](torch.zeros(32, 32))


# ===========================================================================================
# operation/memory_data_movement/insert.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def insert_then_cube(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32],
                     rhs: pl.Tensor[[64, 64], pl.DT_FP32], res: pl.Tensor[[64, 64], pl.DT_FP32]):
    lhs_l1_group = pl.make_tile_group(
        type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat, layout=pl.NZ),
        addrs=0x10000, mutex_ids=[0])
    with pl.section_vector():
        row = pl.get_subblock_idx() * 32  # each AIV owns 32 rows
        xs = pl.make_tile_group(type=pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                                addrs=0x0000, mutex_ids=[1])
        ys = pl.make_tile_group(type=pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                                addrs=0x2000, mutex_ids=[2])
        sums = pl.make_tile_group(type=pl.TileType(shape=[32, 64], dtype=pl.DT_FP32,
                                                   target_memory=pl.MemorySpace.Vec),
                                  addrs=0x4000, mutex_ids=[3])
        sums_nz = pl.make_tile_group(type=pl.TileType(shape=[32, 64], dtype=pl.DT_FP32,
                                                      target_memory=pl.MemorySpace.Vec, layout=pl.NZ),
                                     addrs=0x6000, mutex_ids=[4])
        lhs_l1 = lhs_l1_group.current()
        tx = xs.current()
        ty = ys.current()
        ts = sums.current()
        tnz = sums_nz.current()
        pl.load(tx, x, [row, 0])
        pl.load(ty, y, [row, 0])
        pl.add(ts, tx, ty)
        pl.move(tnz, ts)  # ND -> NZ
        pl.insert(lhs_l1, tnz, [row, 0])  # UB -> L1, NZ into NZ
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)
    with pl.section_cube():
        rhs_l1_group = pl.make_tile_group(
            type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat, layout=pl.NZ),
            addrs=0x0000, mutex_ids=[5])
        left_group = pl.make_tile_group(
            type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left, layout=pl.NZ),
            addrs=0x0000, mutex_ids=[6])
        right_group = pl.make_tile_group(
            type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Right, layout=pl.ZN),
            addrs=0x0000, mutex_ids=[7])
        acc_group = pl.make_tile_group(
            type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc, layout=pl.NZ,
                             fractal=1024),
            addrs=0x0000, mutex_ids=[8])
        lhs_l1 = lhs_l1_group.current()
        rhs_l1 = rhs_l1_group.current()
        left = left_group.current()
        right = right_group.current()
        acc = acc_group.current()
        pl.load(rhs_l1, rhs, [0, 0])
        pl.move(right, rhs_l1)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=2, sync_mode=pl.CrossCoreSyncMode.INTRA_BLOCK)
        pl.move(left, lhs_l1)
        pl.matmul(acc, left, right)
        pl.store(res, acc, [0, 0])


def test_insert_page_both_aivs_assemble_the_cube_operand():
    """follows the public `insert` page's full kernel: each AIV adds its 32 rows, converts ND -> NZ and
    inserts them into a 64x64 NZ L1 tile at [row, 0]; the AIC multiplies that tile by rhs."""
    gen = seeded(5)
    x, y, rhs = (torch.randn(64, 64, generator=gen) for _ in range(3))
    res = torch.zeros(64, 64)
    insert_then_cube[None, 1](x, y, rhs, res)
    sync()
    torch.testing.assert_close(res, (x + y) @ rhs, rtol=1e-4, atol=1e-3)


TKV, TS_HALF = 32, 16


@pl.jit(auto_mutex=True)
def insert_two_dim_offsets(top: pl.Tensor[[TKV // 2, 2 * TS_HALF], pl.DT_FP16],
                           bottom: pl.Tensor[[TKV // 2, 2 * TS_HALF], pl.DT_FP16],
                           eye: pl.Tensor[[2 * TS_HALF, 2 * TS_HALF], pl.DT_FP16],
                           res: pl.Tensor[[TKV, 2 * TS_HALF], pl.DT_FP32]):
    p_mat_group = pl.make_tile_group(type=pl.TileType(shape=[TKV, 2 * TS_HALF], dtype=pl.DT_FP16,
                                                      target_memory=pl.MemorySpace.Mat, layout=pl.NZ),
                                     addrs=0x0000, mutex_ids=[0])
    with pl.section_vector():
        sub_id = pl.get_subblock_idx()
        p_f16 = pl.make_tile_group(type=pl.TileType(shape=[TKV // 2, TS_HALF], dtype=pl.DT_FP16,
                                                    target_memory=pl.MemorySpace.Vec),
                                   addrs=0x0000, mutex_ids=[1]).current()
        p_f16_back_slot = pl.make_tile_group(type=pl.TileType(shape=[TKV // 2, TS_HALF], dtype=pl.DT_FP16,
                                                              target_memory=pl.MemorySpace.Vec, layout=pl.NZ),
                                             addrs=0x0200, mutex_ids=[2]).current()
        p_mat_slot = p_mat_group.current()
        # upper half: an offset along dim 1 only
        pl.load(p_f16, top, [0, TS_HALF * sub_id])
        pl.move(p_f16_back_slot, p_f16)
        pl.insert(p_mat_slot, p_f16_back_slot, [0, TS_HALF * sub_id])
        # lower half: offsets along both dims
        pl.load(p_f16, bottom, [0, TS_HALF * sub_id])
        pl.move(p_f16_back_slot, p_f16)
        pl.insert(p_mat_slot, p_f16_back_slot, [TKV // 2, TS_HALF * sub_id])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=3)
    with pl.section_cube():
        eye_l1 = pl.make_tile_group(type=pl.TileType(shape=[2 * TS_HALF, 2 * TS_HALF], dtype=pl.DT_FP16,
                                                     target_memory=pl.MemorySpace.Mat),
                                    addrs=0x1000, mutex_ids=[3]).current()
        left = pl.make_tile_group(type=pl.TileType(shape=[TKV, 2 * TS_HALF], dtype=pl.DT_FP16,
                                                   target_memory=pl.MemorySpace.Left),
                                  addrs=0x0, mutex_ids=[4]).current()
        right = pl.make_tile_group(type=pl.TileType(shape=[2 * TS_HALF, 2 * TS_HALF], dtype=pl.DT_FP16,
                                                    target_memory=pl.MemorySpace.Right),
                                   addrs=0x0, mutex_ids=[5]).current()
        acc = pl.make_tile_group(type=pl.TileType(shape=[TKV, 2 * TS_HALF], dtype=pl.DT_FP32,
                                                  target_memory=pl.MemorySpace.Acc),
                                 addrs=0x0, mutex_ids=[6]).current()
        pl.load(eye_l1, eye, [0, 0])
        pl.move(right, eye_l1)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=3)
        pl.move(left, p_mat_group.current())
        pl.matmul(acc, left, right)
        pl.store(res, acc, [0, 0])


def test_insert_page_offsets_along_both_dims():
    """follows the public `insert` page's other uses: pl.insert(p_mat_slot, p_f16_back_slot,
    [TKV // 2, TS_HALF * sub_id]) and an offset along dim 0 / dim 1 only."""
    gen = seeded(6)
    top = torch.randn(TKV // 2, 2 * TS_HALF, generator=gen).half()
    bottom = torch.randn(TKV // 2, 2 * TS_HALF, generator=gen).half()
    res = torch.full((TKV, 2 * TS_HALF), float("nan"))
    insert_two_dim_offsets[None, 1](top, bottom, torch.eye(2 * TS_HALF).half(), res)
    sync()
    assert torch.equal(res, torch.cat([top, bottom]).float())


# ===========================================================================================
# operation/memory_data_movement/load.md, load_tile.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def load_tile_doubling(x: pl.Tensor[[256, 64], pl.DT_FP16], res: pl.Tensor[[256, 64], pl.DT_FP16]):
    blk = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    in_db = pl.make_tile_group(type=blk, addrs=0x0000, mutex_ids=[0, 1])  # two slots: double buffering
    out_db = pl.make_tile_group(type=blk, addrs=0x4000, mutex_ids=[2, 3])
    with pl.section_vector():
        for ti in pl.range(0, 4, 1):
            cur_in = in_db.next()
            cur_out = out_db.next()
            pl.load_tile(cur_in, x, [ti, 0])  # block ti = rows ti * 64 ..
            pl.add(cur_out, cur_in, cur_in)
            pl.store_tile(res, cur_out, [ti, 0])


def test_load_tile_page_block_indices():
    """follows the public `load_tile` page's full kernel: double-buffered groups, load_tile / store_tile
    by block index [ti, 0], each block doubled."""
    x = torch.randn(256, 64, generator=seeded(7)).half()
    res = torch.zeros(256, 64).half()
    load_tile_doubling[None, 1](x, res)
    sync()
    assert torch.equal(res, (x.float() * 2).half())


@pl.jit(auto_mutex=True)
def load_transposed_k(q: pl.Tensor[[16, 32], pl.DT_FP16], k: pl.Tensor[[64, 32], pl.DT_FP16],
                      s: pl.Tensor[[16, 32], pl.DT_FP32], skv_off: pl.DT_INT32):
    q_mat = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                                layout=pl.NZ), addrs=0x0000, mutex_ids=[0]).current()
    # K^T block [D, S_blk]: the Mat tile has the Right tile's shape, ZN, loaded with a descending order
    k_mat = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                                layout=pl.ZN), addrs=0x1000, mutex_ids=[1]).current()
    left = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                              addrs=0x0, mutex_ids=[2]).current()
    right = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP16,
                                                target_memory=pl.MemorySpace.Right),
                               addrs=0x0, mutex_ids=[3]).current()
    acc = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                             addrs=0x0, mutex_ids=[4]).current()
    with pl.section_cube():
        pl.load(q_mat, q, [0, 0])
        pl.load(k_mat, k, [skv_off, 0], order=[1, 0])  # column-major (DN) load of K rows skv_off..
        pl.move(left, q_mat)
        pl.move(right, k_mat)
        pl.matmul(acc, left, right)
        pl.store(s, acc, [0, 0])


def test_load_page_transposed_load_with_order():
    """follows the public `load` page: pl.load(k_mat, k, [skv_off, 0], order=[1, 0]) into a ZN Mat tile of
    the Right tile's shape gives K^T (its cube-side transposition table, right matrix transposed)."""
    gen = seeded(8)
    q, k = torch.randn(16, 32, generator=gen).half(), torch.randn(64, 32, generator=gen).half()
    s = torch.zeros(16, 32)
    load_transposed_k[None, 1](q, k, s, 32)
    sync()
    torch.testing.assert_close(s, q.float() @ k[32:64].float().T, rtol=1e-4, atol=1e-3)


def test_load_page_documented_errors():
    """the public `load` / `load_tile` pages: an L1 / UB tile address that is not 32-byte aligned is a compile
    error, a non-L1 destination on the cube side and a non-UB one on the vector side are errors, and order=
    other than a pair of tensor axes is an error."""
    def misaligned_ub(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec), addr=0x10)
        with pl.section_vector():
            pl.load(t, x, [0, 0])

    with pytest.raises(errors.TileMemoryError, match="at address 0x10, which is not 32-byte aligned as Vec memory"):
        pl.jit(misaligned_ub)[None, 1](torch.zeros(16, 16))

    def misaligned_l1(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0x10)
        with pl.section_cube():
            pl.load(t, x, [0, 0])

    with pytest.raises(errors.TileMemoryError, match="at address 0x10, which is not 32-byte aligned as Mat memory"):
        pl.jit(misaligned_l1)[None, 1](torch.zeros(16, 16))

    def cube_into_l0a(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left), addr=0)
        with pl.section_cube():
            pl.load(t, x, [0, 0])

    with pytest.raises(errors.ParserTypeError, match="pl.load operand 'dst_tile' must be a tile in Vec or Mat memory"):
        pl.jit(cube_into_l0a)[None, 1](torch.zeros(16, 16))

    def vector_into_l1(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, 0])

    with pytest.raises(errors.ParserTypeError, match=r"pl.load uses a Mat tile inside pl.section_vector\(\)"):
        pl.jit(vector_into_l1)[None, 1](torch.zeros(16, 16))

    def tile_three_axes(x: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load_tile(t, x, [0, 0, 0], order=[0, 1, 2])

    with pytest.raises(errors.ParserValueError,
                       match=r"pl.load_tile\(\): order must name two different axes of the 3-D"):
        pl.jit(tile_three_axes)[None, 1](torch.zeros(2, 16, 16))


# ===========================================================================================
# operation/memory_data_movement/store.md, operation/atomic_operations/store_atomic.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def store_sum(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
              res: pl.Tensor[[64, 64], pl.DT_FP16]):
    vt = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a_group = pl.make_tile_group(type=vt, addrs=0x0000, mutex_ids=[0])
    b_group = pl.make_tile_group(type=vt, addrs=0x4000, mutex_ids=[1])
    sum_group = pl.make_tile_group(type=vt, addrs=0x8000, mutex_ids=[2])
    with pl.section_vector():
        ta = a_group.current()
        tb = b_group.current()
        ts = sum_group.current()
        pl.load(ta, a, [0, 0])
        pl.load(tb, b, [0, 0])
        pl.add(ts, ta, tb)
        pl.store(res, ts, [0, 0])  # UB -> GM on MTE3


def test_store_page_vector_add():
    """follows the public `store` (and `load`) page's full kernel: load two fp16 inputs, add, store."""
    gen = seeded(9)
    a, b = torch.randn(64, 64, generator=gen).half(), torch.randn(64, 64, generator=gen).half()
    res = torch.zeros(64, 64).half()
    store_sum[None, 1](a, b, res)
    sync()
    assert torch.equal(res, (a.float() + b.float()).half())  # one fp16 rounding of the fp32 sum


def small_cube_product(a, b, a_l1, b_l1, left, right, acc):
    """acc = a @ b: GM -> L1 -> L0A / L0B -> the cube (inlined into the kernels below)."""
    pl.load(a_l1, a, [0, 0])
    pl.load(b_l1, b, [0, 0])
    pl.move(left, a_l1)
    pl.move(right, b_l1)
    pl.matmul(acc, left, right)


def cube_tiles(m, k, n, first_mutex):
    """The tile groups of an [m, k] x [k, n] product, one mutex id each from first_mutex."""
    a_l1 = pl.make_tile_group(type=pl.TileType(shape=[m, k], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x0000, mutex_ids=[first_mutex])
    b_l1 = pl.make_tile_group(type=pl.TileType(shape=[k, n], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x8000, mutex_ids=[first_mutex + 1])
    left = pl.make_tile_group(type=pl.TileType(shape=[m, k], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                              addrs=0x0, mutex_ids=[first_mutex + 2])
    right = pl.make_tile_group(type=pl.TileType(shape=[k, n], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
                               addrs=0x0, mutex_ids=[first_mutex + 3])
    return a_l1, b_l1, left, right


@pl.jit(auto_mutex=True)
def store_relu_from_acc(a: pl.Tensor[[32, 32], pl.DT_FP16], b: pl.Tensor[[32, 32], pl.DT_FP16],
                        relu_out: pl.Tensor[[32, 32], pl.DT_FP32]):
    a_l1, b_l1, left, right = cube_tiles(32, 32, 32, 0)
    acc_group = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32,
                                                    target_memory=pl.MemorySpace.Acc), addrs=0x0, mutex_ids=[4])
    with pl.section_cube():
        acc = acc_group.current()
        small_cube_product(a, b, a_l1.current(), b_l1.current(), left.current(), right.current(), acc)
        pl.store(relu_out, acc, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu)


def test_store_page_relu_pre_mode_from_acc():
    """follows the public `store` page: pl.store(relu_out, acc, [0, 0], relu_pre_mode=NormalRelu)."""
    gen = seeded(10)
    a, b = torch.randn(32, 32, generator=gen).half(), torch.randn(32, 32, generator=gen).half()
    relu_out = torch.full((32, 32), float("nan"))
    store_relu_from_acc[None, 1](a, b, relu_out)
    sync()
    torch.testing.assert_close(relu_out, (a.float() @ b.float()).clamp(min=0), rtol=1e-4, atol=1e-3)


@pl.jit(auto_mutex=True)
def store_atomic_rows(rows: pl.Tensor[[12, 64], pl.DT_FP32], dk_out: pl.Tensor[[2, 2, 4, 64], pl.DT_FP32]):
    row_group = pl.make_tile_group(type=pl.TileType(shape=[1, 64], dtype=pl.DT_FP32,
                                                    target_memory=pl.MemorySpace.Vec),
                                   addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), 12, pl.get_block_num()):
            fp32_row_tile = row_group.next()
            b_id = i % 2
            g_id = (i // 2) % 2
            single_indice = i % 3
            pl.load(fp32_row_tile, rows, [i, 0])
            # several rows (from several blocks) add into the same 4-D location
            pl.store(dk_out, fp32_row_tile, [b_id, g_id, single_indice, 0], atomic=pl.AtomicType.AtomicAdd)


def test_store_page_atomic_add_into_a_4d_tensor():
    """follows the public `store` page: pl.store(dk_out, fp32_row_tile, [b, g, idx, 0],
    atomic=AtomicAdd), rows of several blocks accumulating into the same elements."""
    rows = torch.randint(-8, 9, (12, 64), generator=seeded(11)).float()  # exact sums in any order
    dk_out = torch.full((2, 2, 4, 64), 0.5)
    store_atomic_rows[None, 3](rows, dk_out)
    sync()
    ref = torch.full((2, 2, 4, 64), 0.5)
    for i in range(12):
        ref[i % 2, (i // 2) % 2, i % 3] += rows[i]
    assert torch.equal(dk_out, ref)


@pl.jit(auto_mutex=True)
def store_phase_final_tiles(a: pl.Tensor[[32, 16], pl.DT_FP16], b: pl.Tensor[[16, 64], pl.DT_FP16],
                            out_tensor: pl.Tensor[[32, 64], pl.DT_FP32]):
    a_l1 = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x0000, mutex_ids=[0])
    b_l1 = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x1000, mutex_ids=[1])
    left = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left),
                              addrs=0x0, mutex_ids=[2])
    right = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP16,
                                                target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[3])
    acc = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                             addrs=0x0, mutex_ids=[4])
    with pl.section_cube():
        for i in pl.range(0, 32, 16):
            for j in pl.range(0, 64, 32):
                pl.load(a_l1.current(), a, [i, 0])
                pl.load(b_l1.current(), b, [0, j])
                pl.move(left.current(), a_l1.current())
                pl.move(right.current(), b_l1.current())
                pl.matmul(acc.current(), left.current(), right.current(), phase=pl.AccPhase.Final)
                # the last (only) write-back of this L0C tile: Final clears the unit flag
                pl.store(out_tensor, acc.current(), [i, j], phase=pl.STPhase.Final)


def test_store_page_phase_final_write_back():
    """follows the public `store` page: pl.store(out_tensor, acc.current(), [i, j], phase=STPhase.Final)
    after a Final matmul, for each output tile."""
    gen = seeded(12)
    a, b = torch.randn(32, 16, generator=gen).half(), torch.randn(16, 64, generator=gen).half()
    out_tensor = torch.full((32, 64), float("nan"))
    store_phase_final_tiles[None, 1](a, b, out_tensor)
    sync()
    torch.testing.assert_close(out_tensor, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


@pl.jit(auto_mutex=True)
def atomic_from_every_block(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], total: pl.Tensor[[16, 64], pl.DT_FP32]):
    vt = pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    part = pl.make_tile_group(type=vt, addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        for blk in pl.range(pl.get_block_idx(), x.shape[0] // 16, pl.get_block_num()):
            t = part.next()
            pl.load(t, x, [blk * 16, 0])
            pl.store(total, t, [0, 0], atomic=pl.AtomicType.AtomicAdd)


@pytest.mark.parametrize("block_dim", [1, 4])
def test_store_atomic_page_many_cores_into_one_region(block_dim):
    """follows the public `store_atomic` page: several cores accumulate into the same GM region with
    atomic=pl.AtomicType.AtomicAdd on top of its initial value."""
    x = torch.randint(-16, 17, (16 * 10, 64), generator=seeded(13)).float()
    total = torch.full((16, 64), 3.0)
    atomic_from_every_block[None, block_dim](x, total)
    sync()
    assert torch.equal(total, 3.0 + x.view(10, 16, 64).sum(0))


def test_store_page_order_rules_are_errors():
    """the public `store` / `store_tile` pages: order= takes a pair of tensor axes in ascending order only,
    any other configuration is an error."""
    def descending(res: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.store(res, t, [0, 0], order=[1, 0])

    with pytest.raises(errors.ParserValueError, match="order= must name the axes in ascending order on a store"):
        pl.jit(descending)[None, 1](torch.zeros(16, 16))

    def three_axes(res: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.store(res, t, [0, 0, 0], order=[0, 1, 2])

    with pytest.raises(errors.ParserValueError, match=r"pl.store\(\): order must name two different axes of the 3-D"):
        pl.jit(three_axes)[None, 1](torch.zeros(2, 16, 16))

    def tile_three_axes(res: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.store_tile(res, t, [0, 0, 0], order=[0, 1, 2])

    with pytest.raises(errors.ParserValueError,
                       match=r"pl.store_tile\(\): order must name two different axes of the 3-D"):
        pl.jit(tile_three_axes)[None, 1](torch.zeros(2, 16, 16))


# ===========================================================================================
# operation/memory_data_movement/store_tile.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def store_tile_repeat(x: pl.Tensor[[64, 64], pl.DT_FP16], res: pl.Tensor[[256, 64], pl.DT_FP16]):
    blk = pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    x_group = pl.make_tile_group(type=blk, addrs=0x0000, mutex_ids=[0])
    with pl.section_vector():
        tx = x_group.current()
        pl.load(tx, x, [0, 0])
        for ti in pl.range(0, 4, 1):
            pl.store_tile(res, tx, [ti, 0])  # block ti = rows ti * 64 ..


def test_store_tile_page_block_index_write_back():
    """follows the public `store_tile` page's full kernel: the same UB tile stored to 4 blocks [ti, 0]."""
    x = torch.randn(64, 64, generator=seeded(14)).half()
    res = torch.zeros(256, 64).half()
    store_tile_repeat[None, 1](x, res)
    sync()
    assert torch.equal(res, x.repeat(4, 1))


@pl.jit(auto_mutex=True)
def store_tile_bsnd(p: pl.Tensor[[2, 64, 32], pl.DT_FP16], p_buf: pl.Tensor[[2, 64, 3, 32], pl.DT_FP16],
                    n_idx: pl.DT_INT32):
    # tile [16, 16]: its rows run along axis 1 (S) and its columns along axis 3 (D) of a BSND tensor
    p_group = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP16,
                                                  target_memory=pl.MemorySpace.Vec),
                                 addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        sub_id = pl.get_block_idx()  # plays the part of the AIV index: two blocks
        for b_idx in pl.range(0, 2):
            for qi in pl.range(0, 2):
                for ki in pl.range(0, 2):
                    p_f16 = p_group.next()
                    pl.load_tile(p_f16, p, [b_idx, qi * 2 + sub_id, ki])
                    pl.store_tile(p_buf, p_f16, [b_idx, qi * 2 + sub_id, n_idx, ki], order=[1, 3])


def test_store_tile_page_order_selects_the_axes_of_a_4d_tensor():
    """follows the public `store_tile` page: pl.store_tile(p_buf, p_f16, [b_idx, qi * 2 + sub_id, n_idx, ki],
    order=[1, 3]): block indices along axes 1 and 3, absolute offsets along axes 0 and 2."""
    p = torch.randn(2, 64, 32, generator=seeded(15)).half()
    p_buf = torch.zeros(2, 64, 3, 32).half()
    store_tile_bsnd[None, 2](p, p_buf, 1)
    sync()
    ref = torch.zeros(2, 64, 3, 32).half()
    ref[:, :, 1, :] = p
    assert torch.equal(p_buf, ref)


# ===========================================================================================
# operation/matrix_computation/phase.md
# ===========================================================================================

TILE_K = 32


def phase_k_split(name, first, middle, last, store_phase, k_total=3 * TILE_K, sanitizer=False):
    """C = A @ B with K split in TILE_K blocks accumulated in one L0C tile, the phases as given."""
    @pl.jit(name=name, auto_mutex=True, sanitizer=sanitizer)
    def kernel(a: pl.Tensor[[16, k_total], pl.DT_FP16], b: pl.Tensor[[k_total, 32], pl.DT_FP16],
               c: pl.Tensor[[16, 32], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=pl.TileType(shape=[16, TILE_K], dtype=pl.DT_FP16,
                                                   target_memory=pl.MemorySpace.Mat),
                                  addrs=0x0000, mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=pl.TileType(shape=[TILE_K, 32], dtype=pl.DT_FP16,
                                                   target_memory=pl.MemorySpace.Mat),
                                  addrs=0x1000, mutex_ids=[2, 3])
        a_left = pl.make_tile_group(type=pl.TileType(shape=[16, TILE_K], dtype=pl.DT_FP16,
                                                     target_memory=pl.MemorySpace.Left),
                                    addrs=0x0, mutex_ids=[4, 5])
        b_right = pl.make_tile_group(type=pl.TileType(shape=[TILE_K, 32], dtype=pl.DT_FP16,
                                                      target_memory=pl.MemorySpace.Right),
                                     addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP32,
                                                  target_memory=pl.MemorySpace.Acc, fractal=1024),
                                 addrs=0x0, mutex_ids=[8])
        with pl.section_cube():
            ac = acc.current()
            for k in pl.range(0, k_total, TILE_K):
                cur_a = a_l1.next()
                cur_b = b_l1.next()
                al = a_left.next()
                br = b_right.next()
                pl.load(cur_a, a, [0, k])
                pl.load(cur_b, b, [k, 0])
                pl.move(al, cur_a)
                pl.move(br, cur_b)
                if k == 0:
                    pl.matmul(ac, al, br, phase=first)  # first block
                elif k < k_total - TILE_K:
                    pl.matmul_acc(ac, ac, al, br, phase=middle)  # middle blocks
                else:
                    pl.matmul_acc(ac, ac, al, br, phase=last)  # last block
            if store_phase is None:
                pl.store(c, ac, [0, 0])
            else:
                pl.store(c, ac, [0, 0], phase=store_phase)  # Final closes the chain
    return kernel


def k_split_inputs(k_total, seed):
    gen = seeded(seed)
    return torch.randn(16, k_total, generator=gen).half(), torch.randn(k_total, 32, generator=gen).half()


@pl.jit(auto_mutex=True)
def phase_single_matmul(a: pl.Tensor[[32, 32], pl.DT_FP16], b: pl.Tensor[[32, 32], pl.DT_FP16],
                        out: pl.Tensor[[32, 32], pl.DT_FP32]):
    a_l1, b_l1, left, right = cube_tiles(32, 32, 32, 0)
    acc = pl.make_tile_group(type=pl.TileType(shape=[32, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                             addrs=0x0, mutex_ids=[4])
    with pl.section_cube():
        ac = acc.current()
        al = left.current()
        br = right.current()
        pl.load(a_l1.current(), a, [0, 0])
        pl.load(b_l1.current(), b, [0, 0])
        pl.move(al, a_l1.current())
        pl.move(br, b_l1.current())
        pl.matmul(ac, al, br)  # no phase: the framework synchronises M and FIX itself
        pl.store(out, ac, [0, 0])


def test_phase_page_single_matmul_without_phase():
    """follows the public phase page's correct use 1: a single matmul and its store, no phase=."""
    gen = seeded(16)
    a, b = torch.randn(32, 32, generator=gen).half(), torch.randn(32, 32, generator=gen).half()
    out = torch.zeros(32, 32)
    phase_single_matmul[None, 1](a, b, out)
    sync()
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_phase_page_k_split_partial_partial_final():
    """follows the public phase page's correct use 2: first and middle blocks Partial, last Final, store
    with STPhase.Final (three K blocks, so the middle branch runs)."""
    a, b = k_split_inputs(3 * TILE_K, 17)
    c = torch.zeros(16, 32)
    phase_k_split("phase_ok", pl.AccPhase.Partial, pl.AccPhase.Partial, pl.AccPhase.Final,
                  pl.STPhase.Final)[None, 1](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_phase_page_error_case_1_matmul_without_final_hangs():
    """the public phase page's error case 1: matmul with Partial only and a Final store hangs on the NPU;
    here the store's wait for the unit flag is a KernelFault saying so."""
    gen = seeded(18)
    a, b = torch.randn(16, TILE_K, generator=gen).half(), torch.randn(TILE_K, 32, generator=gen).half()
    phase_k_split("phase_no_final", pl.AccPhase.Partial, pl.AccPhase.Partial, pl.AccPhase.Partial,
                  pl.STPhase.Final, k_total=TILE_K)[None, 1](a, b, torch.zeros(16, 32))
    with pytest.raises(errors.KernelFault, match="this hangs on the NPU"):
        sync()


def test_phase_page_error_case_2_store_without_phase_races():
    """the public phase page's error case 2: a store without phase= after phase= matmuls is not ordered after
    them (a precision problem on the NPU); the simulator runs in program order, and sanitizer mode reports the
    race between M and FIX."""
    a, b = k_split_inputs(2 * TILE_K, 19)
    first, then = pl.AccPhase.Partial, pl.AccPhase.Final  # the page: Partial for ki == 0, Final after
    c = torch.zeros(16, 32)
    phase_k_split("phase_store_plain", first, then, then, None, k_total=2 * TILE_K)[None, 1](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)  # program order: exact here
    phase_k_split("phase_store_plain_checked", first, then, then, None, k_total=2 * TILE_K,
                  sanitizer=True)[None, 1](a, b, torch.zeros(16, 32))
    with pytest.raises(errors.SanitizerError, match="PIPE_RACE: read-after-write: FIX reads tile 'ac'"):
        sync()


@pl.jit(auto_mutex=True)
def phase_loop_partial_store(a: pl.Tensor[[16, 2 * TILE_K], pl.DT_FP16], b: pl.Tensor[[2 * TILE_K, 32], pl.DT_FP16],
                             out: pl.Tensor[[16, 32], pl.DT_FP32]):
    a_l1 = pl.make_tile_group(type=pl.TileType(shape=[16, TILE_K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x0000, mutex_ids=[0, 1])
    b_l1 = pl.make_tile_group(type=pl.TileType(shape=[TILE_K, 32], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                              addrs=0x1000, mutex_ids=[2, 3])
    a_left = pl.make_tile_group(type=pl.TileType(shape=[16, TILE_K], dtype=pl.DT_FP16,
                                                 target_memory=pl.MemorySpace.Left), addrs=0x0, mutex_ids=[4, 5])
    b_right = pl.make_tile_group(type=pl.TileType(shape=[TILE_K, 32], dtype=pl.DT_FP16,
                                                  target_memory=pl.MemorySpace.Right), addrs=0x0, mutex_ids=[6, 7])
    acc = pl.make_tile_group(type=pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                             addrs=0x0, mutex_ids=[8])
    with pl.section_cube():
        ac = acc.current()
        for ki in pl.range(0, 2 * TILE_K, TILE_K):
            cur_a = a_l1.next()
            cur_b = b_l1.next()
            al = a_left.next()
            br = b_right.next()
            pl.load(cur_a, a, [0, ki])
            pl.load(cur_b, b, [ki, 0])
            pl.move(al, cur_a)
            pl.move(br, cur_b)
            pl.matmul(ac, al, br, phase=pl.AccPhase.Final)
            pl.store(out, ac, [0, 0], phase=pl.AccPhase.Partial)  # as the page writes it


def test_phase_page_error_case_3_store_partial_in_a_loop_hangs():
    """the public phase page's error case 3, as written there (the store's phase= given as
    pl.AccPhase.Partial): the second Final matmul waits for a flag that a Partial store never clears,
    which hangs on the NPU."""
    gen = seeded(20)
    a, b = torch.randn(16, 2 * TILE_K, generator=gen).half(), torch.randn(2 * TILE_K, 32, generator=gen).half()
    phase_loop_partial_store[None, 1](a, b, torch.zeros(16, 32))
    with pytest.raises(errors.KernelFault, match="this hangs on the NPU"):
        sync()


# ===========================================================================================
# operation/matrix_computation/set_mm_layout_transform.md
# ===========================================================================================

TILE_ACC = 128
K_SIZE_ACC = 256


@pl.jit(auto_mutex=True)
def mm_layout_k_split(a: pl.Tensor[[TILE_ACC, K_SIZE_ACC], pl.DT_FP16],
                      b: pl.Tensor[[K_SIZE_ACC, TILE_ACC], pl.DT_FP16],
                      c: pl.Tensor[[TILE_ACC, TILE_ACC], pl.DT_FP32]):
    a_l1 = pl.make_tile_group(
        type=pl.TileType(shape=[TILE_ACC, TILE_ACC], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
        addrs=0x00000, mutex_ids=[0, 1])
    b_l1 = pl.make_tile_group(
        type=pl.TileType(shape=[TILE_ACC, TILE_ACC], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
        addrs=0x10000, mutex_ids=[2, 3])
    a_left = pl.make_tile_group(
        type=pl.TileType(shape=[TILE_ACC, TILE_ACC], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left,
                         layout=pl.NZ),
        addrs=0x0000, mutex_ids=[4, 5])
    b_right = pl.make_tile_group(
        type=pl.TileType(shape=[TILE_ACC, TILE_ACC], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
        addrs=0x0000, mutex_ids=[6, 7])
    acc = pl.make_tile_group(
        type=pl.TileType(shape=[TILE_ACC, TILE_ACC], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc,
                         fractal=1024),
        addrs=0x0000, mutex_ids=[8])
    with pl.section_cube():
        pl.system.set_mm_layout_transform(enabled=True)  # before the K loop
        ac = acc.current()
        for k in pl.range(0, K_SIZE_ACC, TILE_ACC):
            cur_a = a_l1.next()
            cur_b = b_l1.next()
            al = a_left.next()
            br = b_right.next()
            pl.load(cur_a, a, [0, k])
            pl.load(cur_b, b, [k, 0])
            pl.move(al, cur_a)
            pl.move(br, cur_b)
            if k == 0:
                pl.matmul(ac, al, br, phase=pl.AccPhase.Partial)
            else:
                pl.matmul_acc(ac, ac, al, br, phase=pl.AccPhase.Final)
        pl.store(c, ac, [0, 0], phase=pl.STPhase.Final)
        pl.system.set_mm_layout_transform(enabled=False)  # after the write-back


def test_set_mm_layout_transform_page_k_split():
    """follows the public `set_mm_layout_transform` page's full kernel: C[128, 128] = A[128, 256] @ B[256, 128]
    with K split by 128, the transform enabled around the loop and phase= on every step."""
    gen = seeded(21)
    a = torch.randn(TILE_ACC, K_SIZE_ACC, generator=gen).half()
    b = torch.randn(K_SIZE_ACC, TILE_ACC, generator=gen).half()
    c = torch.zeros(TILE_ACC, TILE_ACC)
    mm_layout_k_split[None, 1](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=2e-3)


# ===========================================================================================
# operation/memory_vector_computation/fillpad.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def fillpad_normal(x: pl.Tensor[[8, 8], pl.DT_INT32], z: pl.Tensor[[8, 8], pl.DT_INT32]):
    src_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1])
    dst_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, pad=pl.TilePad.zero)
    src_group = pl.make_tile_group(type=src_t, addrs=0x0000, mutex_ids=[0])
    dst_group = pl.make_tile_group(type=dst_t, addrs=0x0100, mutex_ids=[1])
    with pl.section_vector():
        src = src_group.current()
        dst = dst_group.current()
        pl.load(src, x, [0, 0])
        pl.set_validshape(src, [5, 7])
        pl.fillpad(dst, src)  # NORMAL: same shape, another address
        pl.store(z, dst, [0, 0])


@pl.jit(auto_mutex=True)
def fillpad_expand(x: pl.Tensor[[8, 8], pl.DT_INT32], z: pl.Tensor[[8, 16], pl.DT_INT32]):
    src_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1])
    dst_t = pl.TileType(shape=[8, 16], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, pad=pl.TilePad.zero)
    src_group = pl.make_tile_group(type=src_t, addrs=0x0000, mutex_ids=[0])
    dst_group = pl.make_tile_group(type=dst_t, addrs=0x0100, mutex_ids=[1])
    with pl.section_vector():
        src = src_group.current()
        dst = dst_group.current()
        pl.load(src, x, [0, 0])
        pl.set_validshape(src, [5, 7])
        pl.fillpad(dst, src, mode=pl.FillPadMode.EXPAND)  # a wider destination
        pl.store(z, dst, [0, 0])


@pl.jit(auto_mutex=True)
def fillpad_inplace(x: pl.Tensor[[8, 8], pl.DT_INT32], z: pl.Tensor[[8, 8], pl.DT_INT32]):
    src_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, pad=pl.TilePad.zero,
                        valid_shape=[-1, -1])
    dst_t = pl.TileType(shape=[8, 8], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Vec, pad=pl.TilePad.zero)
    src_group = pl.make_tile_group(type=src_t, addrs=0x0000, mutex_ids=[0])
    dst_group = pl.make_tile_group(type=dst_t, addrs=0x0000, mutex_ids=[1])  # the same bytes
    with pl.section_vector():
        src = src_group.current()
        dst = dst_group.current()
        pl.load(src, x, [0, 0])
        pl.set_validshape(src, [5, 7])
        pl.fillpad(dst, src, mode=pl.FillPadMode.INPLACE)
        pl.store(z, dst, [0, 0])


@pytest.mark.parametrize("kernel, width", [
    pytest.param(fillpad_normal, 8, id="NORMAL"),
    pytest.param(fillpad_expand, 16, id="EXPAND"),
    pytest.param(fillpad_inplace, 8, id="INPLACE"),
])
def test_fillpad_page_modes(kernel, width):
    """follows the public `fillpad` page's three kernels: a [5, 7] valid window of an 8x8 int32 tile is kept,
    everything else of the destination (8x8, or 8x16 for EXPAND) is zero."""
    x = torch.randint(-1000, 1000, (8, 8), dtype=torch.int32, generator=seeded(22))
    z = torch.full((8, width), -1, dtype=torch.int32)
    kernel[None, 1](x, z)
    sync()
    ref = torch.zeros(8, width, dtype=torch.int32)
    ref[:5, :7] = x[:5, :7]
    assert torch.equal(z, ref)


def test_fillpad_page_inplace_declares_one_view_of_the_bytes():
    """the public `fillpad` page's INPLACE kernel declares src and dst at the same address 0x0000 (the mode
    requires it), with tile types that differ only in valid_shape; both declarations are one view of the same
    bytes, which should not warn about overlapping tiles."""
    kernel = pl.jit(fillpad_inplace.fn, auto_mutex=True, name="fillpad_inplace_one_view")
    x = torch.randint(-1000, 1000, (8, 8), dtype=torch.int32, generator=seeded(29))
    z = torch.zeros(8, 8, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", errors.TileOverlapWarning)
        kernel[None, 1](x, z)
    sync()
    ref = torch.zeros(8, 8, dtype=torch.int32)
    ref[:5, :7] = x[:5, :7]
    assert torch.equal(z, ref)


# ===========================================================================================
# operation/memory_data_movement/subview.md
# ===========================================================================================

@pl.jit(auto_mutex=True)
def subview_basic(a: pl.Tensor[[8, 64], pl.DT_FP16], out: pl.Tensor[[4, 34], pl.DT_FP16]):
    whole_group = pl.make_tile_group(type=pl.TileType(shape=[8, 64], dtype=pl.DT_FP16,
                                                      target_memory=pl.MemorySpace.Vec),
                                     addrs=0x0000, mutex_ids=[0])
    with pl.section_vector():
        whole = whole_group.next()
        pl.load(whole, a, [0, 0])
        part = whole[2:6, 16:50]  # rows 2..5, columns 16..49
        pl.store(out, part, [0, 0])


@pl.jit(auto_mutex=True)
def subview_clamped_by_valid_shape(a: pl.Tensor[[8, 64], pl.DT_FP16], out1: pl.Tensor[[4, 24], pl.DT_FP16]):
    whole_group = pl.make_tile_group(type=pl.TileType(shape=[8, 64], dtype=pl.DT_FP16,
                                                      target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1]),
                                     addrs=0x0000, mutex_ids=[0])
    with pl.section_vector():
        whole = whole_group.next()
        pl.load(whole, a, [0, 0])
        pl.set_validshape(whole, [6, 40])
        part = whole[2:6, 16:50]  # clamped to the [6, 40] window: [4, 24]
        pl.store(out1, part, [0, 0])


def test_subview_page_basic_slice_and_valid_shape_clamp():
    """follows the public subview page's first two kernels: tile[2:6, 16:50] stored as a [4, 34] block, and the
    same slice of a tile whose window is [6, 40] clamped to [4, 24]."""
    a = torch.randn(8, 64, generator=seeded(23)).half()
    out = torch.zeros(4, 34).half()
    out1 = torch.zeros(4, 24).half()
    subview_basic[None, 1](a, out)
    subview_clamped_by_valid_shape[None, 1](a, out1)
    sync()
    assert torch.equal(out, a[2:6, 16:50])
    assert torch.equal(out1, a[2:6, 16:40])


@pytest.mark.xfail(strict=True, raises=errors.UnsupportedFeatureError,
                   reason="vector functions (@pl.vector_function, pl.Vf.*) are not implemented yet")
def test_subview_page_vector_function_pointer_offset():
    """follows the public subview page's VF kernel: a @pl.vector_function copies rows of a sliced tile with
    vf.load_align / vf.store_align and `tile + offset` pointer arithmetic."""
    @pl.vector_function
    def vf_copy_rows(dst_tile, src_tile, n_rows, n_cols, stride):
        preg = vf.update_mask(n_cols, dtype=pl.DT_FP16)  # noqa: F821 - vf is the VF namespace
        for r in pl.range(n_rows):
            vreg = vf.load_align(src_tile, r * stride)  # noqa: F821
            vf.store_align(dst_tile + r * n_cols, vreg, preg)  # noqa: F821

    @pl.jit(auto_mutex=True)
    def subview_vf(vf_a: pl.Tensor[[4, 64], pl.DT_FP16], vf_out: pl.Tensor[[3, 32], pl.DT_FP16]):
        src_group = pl.make_tile_group(type=pl.TileType(shape=[4, 64], dtype=pl.DT_FP16,
                                                        target_memory=pl.MemorySpace.Vec),
                                       addrs=0x4000, mutex_ids=[1])
        dst_group = pl.make_tile_group(type=pl.TileType(shape=[3, 32], dtype=pl.DT_FP16,
                                                        target_memory=pl.MemorySpace.Vec),
                                       addrs=0x5000, mutex_ids=[2])
        with pl.section_vector():
            src = src_group.next()
            dst = dst_group.next()
            pl.load(src, vf_a, [0, 0])
            vf_copy_rows(dst, src[1:4, 16:48], 3, 32, 64)  # the slice enters the VF as an offset pointer
            pl.store(vf_out, dst, [0, 0])

    vf_a = torch.randn(4, 64, generator=seeded(24)).half()
    vf_out = torch.zeros(3, 32).half()
    subview_vf[None, 1](vf_a, vf_out)
    sync()
    assert torch.equal(vf_out, vf_a[1:4, 16:48])


# ===========================================================================================
# operation/synchronization/set_cross_core.md
# ===========================================================================================

@pl.jit()
def cross_core_full(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32],
                    rhs: pl.Tensor[[64, 64], pl.DT_FP32], out: pl.Tensor[[64, 64], pl.DT_FP32]):
    lhs_l1 = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat,
                                      layout=pl.NZ), addr=0x10000, size=16384)
    with pl.section_vector():
        row = pl.get_subblock_idx() * 32
        tx = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                          addr=0x0000, size=8192)
        ty = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                          addr=0x2000, size=8192)
        tsum = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec),
                            addr=0x4000, size=8192)
        tnz = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec,
                                       layout=pl.NZ), addr=0x6000, size=8448)
        pl.load(tx, x, [row, 0])
        pl.load(ty, y, [row, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.add(tsum, tx, ty)
        pl.move(tnz, tsum)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
        pl.insert(lhs_l1, tnz, [row, 0])
        pl.system.set_cross_core(
            pipe=pl.PipeType.MTE3,
            event_id=2,
            sync_mode=pl.CrossCoreSyncMode.INTRA_BLOCK,
        )
    with pl.section_cube():
        rhs_l1 = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat,
                                          layout=pl.NZ), addr=0x0000, size=16384)
        left = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left,
                                        layout=pl.NZ), addr=0x0000, size=16384)
        right = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Right,
                                         layout=pl.ZN), addr=0x0000, size=16384)
        acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc,
                                       layout=pl.NZ, fractal=1024), addr=0x0000, size=16384)
        pl.load(rhs_l1, rhs, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(right, rhs_l1)
        pl.system.wait_cross_core(
            pipe=pl.PipeType.MTE1,
            event_id=2,
            sync_mode=pl.CrossCoreSyncMode.INTRA_BLOCK,
        )
        pl.move(left, lhs_l1)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.matmul(acc, left, right)
        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.store(out, acc, [0, 0])


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_set_cross_core_page_full_kernel(sanitizer):
    """follows the public `set_cross_core` page's full kernel: make_tile tiles, manual sync_src / sync_dst
    within each core and an INTRA_BLOCK set (AIVs, MTE3) / wait (AIC, MTE1) around the insert into L1."""
    gen = seeded(25)
    x, y, rhs = (torch.randn(64, 64, generator=gen) for _ in range(3))
    out = torch.zeros(64, 64)
    kernel = cross_core_full if not sanitizer else pl.jit(cross_core_full.fn, sanitizer=True)
    kernel[None, 2](x, y, rhs, out)
    sync()
    torch.testing.assert_close(out, (x + y) @ rhs, rtol=1e-4, atol=1e-3)


@pl.jit()
def cross_core_inter_subblock(x: pl.Tensor[[2, 16, 16], pl.DT_FP32], mid: pl.Tensor[[2, 16, 16], pl.DT_FP32],
                              out: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0x0)
    with pl.section_cube():
        pass
    with pl.section_vector():
        me = pl.get_subblock_idx()
        # each AIV writes 2 * x[me] to GM, then the two AIVs signal each other
        pl.load(t, x, [me, 0, 0])
        pl.system.bar_all()
        pl.muls(t, t, 2.0)
        pl.system.bar_all()
        pl.store(mid, t, [me, 0, 0])
        pl.system.bar_all()
        pl.system.set_cross_core(
            pipe=pl.PipeType.V,
            event_id=1,
            sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK,
        )
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        pl.load(t, mid, [1 - me, 0, 0])  # the other AIV's result
        pl.system.bar_all()
        pl.store(out, t, [me, 0, 0])


def test_set_cross_core_page_inter_subblock():
    """follows the public `set_cross_core` page's INTER_SUBBLOCK example: both AIVs of a block set event 1 on
    pipe V and wait for each other; each then reads what the other wrote."""
    x = torch.randn(2, 16, 16, generator=seeded(26))
    mid, out = torch.zeros(2, 16, 16), torch.zeros(2, 16, 16)
    cross_core_inter_subblock[None, 1](x, mid, out)
    sync()
    assert torch.equal(out, 2 * x.flip(0))


@pl.jit()
def cross_core_unicast_scalar(x: pl.Tensor[[16, 16], pl.DT_FP16], eye: pl.Tensor[[16, 16], pl.DT_FP16],
                              mid: pl.Tensor[[16, 16], pl.DT_FP16], out: pl.Tensor[[16, 16], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16), addr=0x0)
    a_l1 = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0x0)
    b_l1 = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                        addr=0x200)
    left = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
                         addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0x0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(t, x, [0, 0])
            pl.system.bar_all()
            pl.store(mid, t, [0, 0])
            pl.system.bar_all()
            # only AIV 0 signals, from the scalar pipe
            pl.system.set_cross_core(
                pipe=pl.PipeType.S,
                event_id=15,
                sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK,
            )
    with pl.section_cube():
        pl.load(b_l1, eye, [0, 0])
        # on the AIC, ids 0..15 are AIV 0's
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=15, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
        pl.load(a_l1, mid, [0, 0])
        pl.system.bar_all()
        pl.move(left, a_l1)
        pl.move(right, b_l1)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.store(out, acc, [0, 0])


def test_set_cross_core_page_unicast_block_from_the_scalar_pipe():
    """follows the public `set_cross_core` page's UNICAST_BLOCK example: only AIV 0 sets event 15 with
    pipe=pl.PipeType.S (the page allows S for UNICAST_BLOCK); the AIC waits for AIV 0's event 15."""
    x = torch.randn(16, 16, generator=seeded(27)).half()
    mid, out = torch.zeros(16, 16).half(), torch.zeros(16, 16)
    cross_core_unicast_scalar[None, 1](x, torch.eye(16).half(), mid, out)
    sync()
    assert torch.equal(out, x.float())


@pl.jit()
def cross_core_inter_block(x: pl.Tensor[[2, 16, 16], pl.DT_FP32], mid: pl.Tensor[[2, 16, 16], pl.DT_FP32],
                           out: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0x0)
    with pl.section_vector():
        me = pl.get_block_idx()
        pl.load(t, x, [me, 0, 0])
        pl.system.bar_all()
        pl.store(mid, t, [me, 0, 0])
        pl.system.bar_all()
        # every AIV of the launch signals; each waits until all have
        pl.system.set_cross_core(
            pipe=pl.PipeType.MTE3,
            event_id=0,
            sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK,
        )
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0, sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK)
        pl.load(t, mid, [1 - me, 0, 0])
        pl.system.bar_all()
        pl.store(out, t, [me, 0, 0])


def test_set_cross_core_page_inter_block():
    """follows the public `set_cross_core` page's INTER_BLOCK example (a vector section only): every AIV sets
    event 0 on MTE3; after the wait each block reads the other block's data."""
    x = torch.randn(2, 16, 16, generator=seeded(28))
    mid, out = torch.zeros(2, 16, 16), torch.zeros(2, 16, 16)
    cross_core_inter_block[None, 2](x, mid, out)
    sync()
    assert torch.equal(out, x.flip(0))

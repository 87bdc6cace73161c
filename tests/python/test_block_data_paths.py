"""The data paths that cross the cores of a mixed block (docs/device.md#memory): the AIC's fixpipe
writes an AIV's UB (pl.move Acc -> Vec, acc_to_vec_mode SingleModeVec0 / SingleModeVec1) and an AIV's
MTE3 writes the AIC's L1 (pl.move Vec -> Mat), each at the same address in the destination core's
memory. Before, the move landed in the issuing core's own copy and the peer read zeros. Every tile
carries a TileGroup mutex id, so auto_mutex orders the pipes of each core (the sanitizer checks it)."""

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

M = pl.MemorySpace
N = 16
H_MAT = pl.TileType(shape=[N, N], dtype=pl.DT_FP16, target_memory=M.Mat)
H_LEFT = pl.TileType(shape=[N, N], dtype=pl.DT_FP16, target_memory=M.Left)
H_RIGHT = pl.TileType(shape=[N, N], dtype=pl.DT_FP16, target_memory=M.Right)
H_VEC = pl.TileType(shape=[N, N], dtype=pl.DT_FP16, target_memory=M.Vec)
H_VEC_NZ = pl.TileType(shape=[N, N], dtype=pl.DT_FP16, target_memory=M.Vec, layout=pl.NZ)
F_ACC = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=M.Acc)
F_VEC = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=M.Vec)


def sync():
    pypto_pro.runtime.synchronize()


def cube_matmul(acc, left, right, a_mat, b_mat, a, b):
    """acc = a @ b on the cube core: GM -> L1 -> L0A/L0B -> the cube (inlined into the kernels)."""
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    pl.matmul(acc, left, right)


def fixpipe_to_ub(mode):
    """C = A @ B on the AIC, moved Acc -> Vec with `mode` (None: not given) once both AIVs have filled
    their UB tile with -1; each AIV then stores its tile: the receiver's holds C, the other's the -1s."""
    @pl.jit(name=f"fixpipe_to_ub_{mode.name if mode else 'default'}")
    def kernel(a: pl.Tensor[[N, N], pl.DT_FP16], b: pl.Tensor[[N, N], pl.DT_FP16],
               out: pl.Tensor[[2 * N, N], pl.DT_FP32]):
        a_mat = pl.make_tile_group(type=H_MAT, addrs=0x0, mutex_ids=[0]).current()
        b_mat = pl.make_tile_group(type=H_MAT, addrs=0x1000, mutex_ids=[1]).current()
        left = pl.make_tile_group(type=H_LEFT, addrs=0x0, mutex_ids=[2]).current()
        right = pl.make_tile_group(type=H_RIGHT, addrs=0x0, mutex_ids=[3]).current()
        acc = pl.make_tile_group(type=F_ACC, addrs=0x0, mutex_ids=[4]).current()
        vec = pl.make_tile_group(type=F_VEC, addrs=0x2000, mutex_ids=[5]).current()
        with pl.section_cube():
            cube_matmul(acc, left, right, a_mat, b_mat, a, b)
            pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)  # both UB tiles are filled
            if mode is None:
                pl.move(vec, acc)
            else:
                pl.move(vec, acc, acc_to_vec_mode=mode)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
        with pl.section_vector():
            pl.expands(vec, -1.0)
            pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, vec, [pl.get_subblock_idx() * N, 0])
    return kernel


@pytest.mark.parametrize("mode, receiver", [(None, 0), (pl.AccToVecMode.SingleModeVec0, 0),
                                            (pl.AccToVecMode.SingleModeVec1, 1)],
                         ids=["default", "SingleModeVec0", "SingleModeVec1"])
def test_fixpipe_writes_the_ub_of_the_chosen_aiv(mode, receiver):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(N, N, generator=gen).half()
    b = torch.randn(N, N, generator=gen).half()
    out = torch.full((2 * N, N), float("nan"))
    fixpipe_to_ub(mode)[None, 1](a, b, out)
    sync()
    ref = a.float() @ b.float()
    torch.testing.assert_close(out[receiver * N:(receiver + 1) * N], ref, rtol=1e-5, atol=1e-5)
    other = 1 - receiver
    assert torch.equal(out[other * N:(other + 1) * N], torch.full((N, N), -1.0))  # its UB was not written


@pl.jit
def mte3_to_l1(x: pl.Tensor[[N, N], pl.DT_FP16], eye: pl.Tensor[[N, N], pl.DT_FP16],
               out: pl.Tensor[[N, N], pl.DT_FP32]):
    """AIV 0 loads x into its UB, converts it to NZ and moves it to the AIC's L1 (both AIVs doing it
    would be a race on the same L1 bytes, which the sanitizer reports); the AIC multiplies what arrived
    by the identity and stores it."""
    x_nd = pl.make_tile_group(type=H_VEC, addrs=0x0, mutex_ids=[0]).current()
    x_vec = pl.make_tile_group(type=H_VEC_NZ, addrs=0x1000, mutex_ids=[6]).current()
    x_mat = pl.make_tile_group(type=H_MAT, addrs=0x0, mutex_ids=[1]).current()
    eye_mat = pl.make_tile_group(type=H_MAT, addrs=0x1000, mutex_ids=[2]).current()
    left = pl.make_tile_group(type=H_LEFT, addrs=0x0, mutex_ids=[3]).current()
    right = pl.make_tile_group(type=H_RIGHT, addrs=0x0, mutex_ids=[4]).current()
    acc = pl.make_tile_group(type=F_ACC, addrs=0x0, mutex_ids=[5]).current()
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(x_nd, x, [0, 0])
            pl.move(x_vec, x_nd)
            pl.move(x_mat, x_vec)
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
    with pl.section_cube():
        pl.load(eye_mat, eye, [0, 0])
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(left, x_mat)
        pl.move(right, eye_mat)
        pl.matmul(acc, left, right)
        pl.store(out, acc, [0, 0])


@pytest.mark.parametrize("block_dim", [1, 3])
def test_vector_cores_write_the_l1_of_their_aic(block_dim):
    x = torch.randn(N, N).half()
    out = torch.full((N, N), float("nan"))
    mte3_to_l1[None, block_dim](x, torch.eye(N).half(), out)
    sync()
    assert torch.equal(out, x.float())


TM, TK, TN = 64, 32, 64


def fixpipe_split(mode, vec_shape):
    """C = A @ B (64 x 64) on the AIC, its valid window set to [vm, vn], split by `mode` between the
    UBs of both AIVs (prefilled with -1); each AIV stores its whole tile to out[subblock]."""
    @pl.jit(name=f"fixpipe_split_{mode.name}")
    def kernel(a: pl.Tensor[[TM, TK], pl.DT_FP16], b: pl.Tensor[[TK, TN], pl.DT_FP16],
               out: pl.Tensor[[2, vec_shape[0], vec_shape[1]], pl.DT_FP32], vm: pl.DT_INT32, vn: pl.DT_INT32):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[TM, TK], dtype=pl.DT_FP16, target_memory=M.Mat),
                                   addrs=0x0, mutex_ids=[0]).current()
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[TK, TN], dtype=pl.DT_FP16, target_memory=M.Mat),
                                   addrs=0x2000, mutex_ids=[1]).current()
        left = pl.make_tile_group(type=pl.TileType(shape=[TM, TK], dtype=pl.DT_FP16, target_memory=M.Left),
                                  addrs=0x0, mutex_ids=[2]).current()
        right = pl.make_tile_group(type=pl.TileType(shape=[TK, TN], dtype=pl.DT_FP16, target_memory=M.Right),
                                   addrs=0x0, mutex_ids=[3]).current()
        acc = pl.make_tile_group(type=pl.TileType(shape=[TM, TN], dtype=pl.DT_FP32, target_memory=M.Acc,
                                                  valid_shape=[-1, -1], compact=1), addrs=0x0,
                                 mutex_ids=[4]).current()
        vec = pl.make_tile_group(type=pl.TileType(shape=vec_shape, dtype=pl.DT_FP32, target_memory=M.Vec),
                                 addrs=0x0, mutex_ids=[5]).current()
        with pl.section_cube():
            cube_matmul(acc, left, right, a_mat, b_mat, a, b)
            pl.set_validshape(acc, [vm, vn])
            pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)
            pl.move(vec, acc, acc_to_vec_mode=mode)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
        with pl.section_vector():
            pl.expands(vec, -1.0)
            pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, vec, [pl.get_subblock_idx(), 0, 0])
    return kernel


def split_reference(c, mode, vm, vn, vec_shape):
    """What each AIV's tile holds after the split (the documented shares), -1 elsewhere."""
    out = torch.full((2,) + tuple(vec_shape), -1.0)
    if mode is pl.AccToVecMode.DualModeSplitM:
        v0 = (vm + 1) // 2 * 2 // 2
        out[0, :v0, :vn] = c[:v0, :vn]
        out[1, :vm - v0, :vn] = c[v0:vm, :vn]
    else:
        v0 = vn if vn <= 16 else (vn + 31) // 32 * 32 // 2
        out[0, :vm, :v0] = c[:vm, :v0]
        out[1, :vm, :vn - v0] = c[:vm, v0:vn]
    return out


@pytest.mark.parametrize("mode, vec_shape, vm, vn", [
    (pl.AccToVecMode.DualModeSplitM, [32, TN], TM, TN),
    (pl.AccToVecMode.DualModeSplitM, [32, TN], 33, TN),   # odd tail: AIV 0 gets 17 rows, AIV 1 16
    (pl.AccToVecMode.DualModeSplitM, [32, TN], 1, 40),    # one row: all of it to AIV 0
    (pl.AccToVecMode.DualModeSplitN, [TM, 32], TM, TN),
    (pl.AccToVecMode.DualModeSplitN, [TM, 32], 50, 33),   # 33 columns: 32 to AIV 0, 1 to AIV 1
    (pl.AccToVecMode.DualModeSplitN, [TM, 32], TM, 16),   # up to 16 columns: all to AIV 0
    (pl.AccToVecMode.DualModeSplitN, [TM, 32], TM, 20),   # 20 columns: 16 and 4
], ids=lambda v: str(getattr(v, "name", v)))
def test_fixpipe_splits_rows_or_columns_between_the_aivs(mode, vec_shape, vm, vn):
    gen = torch.Generator().manual_seed(vm * 100 + vn)
    a = torch.randn(TM, TK, generator=gen).half()
    b = torch.randn(TK, TN, generator=gen).half()
    out = torch.full((2,) + tuple(vec_shape), float("nan"))
    fixpipe_split(mode, vec_shape)[None, 1](a, b, out, vm, vn)
    sync()
    ref = split_reference(a.float() @ b.float(), mode, vm, vn, vec_shape)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_split_modes_are_clean_under_the_sanitizer():
    a, b = torch.randn(TM, TK).half(), torch.randn(TK, TN).half()
    out = torch.full((2, 32, TN), float("nan"))
    plain = fixpipe_split(pl.AccToVecMode.DualModeSplitM, [32, TN])
    pl.jit(plain.fn, sanitizer=True, name="fixpipe_split_checked")[None, 2](a, b, out, 33, TN)
    sync()
    ref = split_reference(a.float() @ b.float(), pl.AccToVecMode.DualModeSplitM, 33, TN, [32, TN])
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_a_share_that_does_not_fit_its_tile_is_a_fault_and_split_modes_need_a_mixed_kernel():
    a, b = torch.randn(TM, TK).half(), torch.randn(TK, TN).half()
    out = torch.zeros(2, 32, TN)
    fixpipe_split(pl.AccToVecMode.DualModeSplitN, [32, TN])[None, 1](a, b, out, TM, TN)  # 64 rows into 32
    with pytest.raises(pypto_pro.KernelFault, match="the source's valid window does not fit"):
        sync()

    def cube_only(c: pl.Tensor[[N, N], pl.DT_FP32]):
        acc = pl.make_tile(F_ACC, addr=0x0)
        vec = pl.make_tile(F_VEC, addr=0x0)
        with pl.section_cube():
            pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)

    pl.jit(cube_only)[None, 1](torch.zeros(N, N))
    with pytest.raises(pypto_pro.KernelFault, match="DualModeSplitM splits between the two AIVs of a mixed kernel"):
        sync()


def test_acc_to_vec_mode_belongs_to_the_acc_to_vec_path():
    def wrong_path(a: pl.Tensor[[N, N], pl.DT_FP16]):
        mat = pl.make_tile_group(type=H_MAT, addrs=0x0, mutex_ids=[2]).current()
        left = pl.make_tile_group(type=H_LEFT, addrs=0x0, mutex_ids=[3]).current()
        with pl.section_cube():
            pl.load(mat, a, [0, 0])
            pl.move(left, mat, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec1)

    with pytest.raises(errors.ParserValueError, match="acc_to_vec_mode= applies to a move from Acc to Vec only"):
        pl.jit(wrong_path)[None, 1](torch.zeros(N, N).half())


def test_synchronised_hand_offs_are_clean_under_the_sanitizer():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(N, N, generator=gen).half(), torch.randn(N, N, generator=gen).half()
    out = torch.full((2 * N, N), float("nan"))
    checked = pl.jit(fixpipe_to_ub(pl.AccToVecMode.SingleModeVec1).fn, sanitizer=True, name="fixpipe_checked")
    checked[None, 1](a, b, out)
    sync()  # raises SanitizerError on any finding
    torch.testing.assert_close(out[N:], a.float() @ b.float(), rtol=1e-5, atol=1e-5)
    x = torch.randn(N, N).half()
    res = torch.full((N, N), float("nan"))
    pl.jit(mte3_to_l1.fn, sanitizer=True, name="mte3_checked")[None, 2](x, torch.eye(N).half(), res)
    sync()
    assert torch.equal(res, x.float())


@pl.jit(sanitizer=True)
def unsynchronised_hand_off(a: pl.Tensor[[N, N], pl.DT_FP32], out: pl.Tensor[[2 * N, N], pl.DT_FP32]):
    """The seeded race: the AIVs store their UB tile without waiting for the fixpipe's write."""
    acc = pl.make_tile_group(type=F_ACC, addrs=0x0, mutex_ids=[0]).current()
    vec = pl.make_tile_group(type=F_VEC, addrs=0x0, mutex_ids=[1]).current()
    with pl.section_cube():
        pl.move(vec, acc)
    with pl.section_vector():
        pl.store(out, vec, [pl.get_subblock_idx() * N, 0])


def test_an_unordered_fixpipe_write_and_aiv_read_is_a_pipe_race_naming_both_cores():
    unsynchronised_hand_off[None, 1](torch.zeros(N, N), torch.zeros(2 * N, N))
    with pytest.raises(pypto_pro.SanitizerError) as info:
        sync()
    races = [f for f in info.value.findings if f.kind == "PIPE_RACE"]
    assert races, info.value.findings
    line = unsynchronised_hand_off.fn.__code__.co_firstlineno
    messages = " | ".join(f.message for f in races)
    assert "AIC FIX wrote" in messages and "tile 'vec'" in messages, messages
    assert {f.core for f in races} == {"AIV 0"}  # AIV 1's UB is not written (SingleModeVec0)


@pytest.mark.parametrize("arch", ["a3", "a2"])
def test_archs_without_the_local_paths_refuse_the_moves_at_their_line(arch):
    kernel = pl.jit(fixpipe_to_ub(None).fn, arch=arch, name=f"fixpipe_{arch}")
    with pytest.raises(errors.ParserTypeError, match=rf"pl.move: {arch} has no data path from Acc to Vec") as info:
        kernel[None, 1](torch.zeros(N, N).half(), torch.zeros(N, N).half(), torch.zeros(2 * N, N))
    assert "pl.move(vec, acc)" in str(info.value) and "compile for a5" in str(info.value)
    upward = pl.jit(mte3_to_l1.fn, arch=arch, name=f"mte3_{arch}")
    with pytest.raises(errors.ParserTypeError, match=rf"{arch} has no data path from Vec to Mat"):
        upward[None, 1](torch.zeros(N, N).half(), torch.eye(N).half(), torch.zeros(N, N))

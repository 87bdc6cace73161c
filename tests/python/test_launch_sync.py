"""Synchronisation across the blocks of a launch (docs/language.md#cross-core-flags, docs/device.md#execution):
INTER_BLOCK cross-core flags (every AIV, or every AIC, of the launch signals all the others) and
pl.system.sync_all in SOFT mode (the barrier through a GM workspace), each against a torch reference,
with their misuse errors, deadlock reports and sanitizer behaviour."""

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

INTER = pl.CrossCoreSyncMode.INTER_BLOCK


def sync():
    pypto_pro.runtime.synchronize()


# ---- INTER_BLOCK ----

@pl.jit
def pass_rows(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], rounds: pl.DT_INT32,
              buf: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    """`rounds` times: every block publishes its row + 1 to buf, waits for every block to have done so,
    takes the next block's row, and waits again before buf is overwritten. out = x rolled by `rounds`
    rows, plus `rounds`."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    b = pl.get_block_idx()
    n = pl.get_block_num()
    with pl.section_vector():
        pl.load(t, x, [b, 0])
        for r in pl.range(rounds):
            pl.system.bar_all()
            pl.adds(t, t, 1.0)
            pl.system.bar_all()
            pl.store(buf, t, [b, 0])
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=0, sync_mode=INTER)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0, sync_mode=INTER)
            pl.load(t, buf, [(b + 1) % n, 0])
            pl.system.set_cross_core(pipe=pl.PipeType.MTE2, event_id=1, sync_mode=INTER)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=1, sync_mode=INTER)
        pl.system.bar_all()
        pl.store(out, t, [b, 0])


@pytest.mark.parametrize("blocks, rounds, sanitizer", [(1, 2, False), (8, 3, False), (64, 2, False), (5, 4, True)])
def test_inter_block_flags_order_every_block_of_a_vector_kernel(blocks, rounds, sanitizer):
    x = torch.randn(blocks, 64)
    buf, out = torch.zeros(blocks, 64), torch.zeros(blocks, 64)
    kernel = pass_rows if not sanitizer else pl.jit(pass_rows.fn, sanitizer=True)
    kernel[None, blocks](x, rounds, buf, out)
    sync()
    torch.testing.assert_close(out, torch.roll(x, -rounds, dims=0) + rounds, rtol=0, atol=1e-5)


def cube_identity(dst, src, row, eye, b):
    """dst[b] = src[row:row + 16] @ I on the cube (GM -> L1 -> L0 -> Acc -> GM)."""
    m = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0)
    e = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0x1000)
    left = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left), addr=0)
    right = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Right), addr=0)
    acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
    pl.load(m, src, [row, 0])
    pl.load(e, eye, [0, 0])
    pl.system.bar_all()
    pl.move(left, m)
    pl.move(right, e)
    pl.system.bar_all()
    pl.matmul(acc, left, right)
    pl.system.bar_all()
    pl.store(dst, acc, [b * 16, 0])
    pl.system.bar_all()


@pl.jit
def mixed_inter_block(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], eye: pl.Tensor[[16, 16], pl.DT_FP32],
                      mid: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], half: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32],
                      out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32]):
    """The cubes write mid[b] = a[b] @ I, wait for every cube (INTER_BLOCK among the AICs), write
    half[b] = mid[b + 1] @ I and tell their own AIVs (INTRA_BLOCK). Each AIV adds 1 to its 8 rows of
    half[b], stores them to out and waits for every AIV of the launch (INTER_BLOCK among the AIVs)."""
    b = pl.get_block_idx() // pl.get_subblock_num()
    n = pl.get_block_num()
    with pl.section_cube():
        cube_identity(mid, a, b * 16, eye, b)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=3, sync_mode=INTER)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=3, sync_mode=INTER)
        cube_identity(half, mid, (b + 1) % n * 16, eye, b)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=4)
    with pl.section_vector():
        v = pl.make_tile(pl.TileType(shape=[8, 16], dtype=pl.DT_FP32), addr=0)
        row = b * 16 + pl.get_subblock_idx() * 8
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=4)
        pl.load(v, half, [row, 0])
        pl.system.bar_all()
        pl.adds(v, v, 1.0)
        pl.system.bar_all()
        pl.store(out, v, [row, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=5, sync_mode=INTER)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=5, sync_mode=INTER)


@pytest.mark.parametrize("blocks, sanitizer", [(1, False), (6, False), (32, False), (3, True)])
def test_inter_block_flags_in_a_mixed_kernel_pair_cores_of_one_kind(blocks, sanitizer):
    a = torch.randn(blocks * 16, 16)
    mid, half, out = (torch.zeros(blocks * 16, 16) for _ in range(3))
    kernel = mixed_inter_block if not sanitizer else pl.jit(mixed_inter_block.fn, sanitizer=True)
    kernel[None, blocks](a, torch.eye(16), mid, half, out)
    sync()
    assert torch.equal(out, torch.roll(a, -16, dims=0) + 1)


@pl.jit
def cube_ring(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], eye: pl.Tensor[[16, 16], pl.DT_FP32],
              mid: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32]):
    """A cube-only kernel: every AIC writes its rows to mid, waits for all AICs, takes the next one's."""
    b = pl.get_block_idx()
    n = pl.get_block_num()
    with pl.section_cube():
        cube_identity(mid, a, b * 16, eye, b)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=7, sync_mode=INTER)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=7, sync_mode=INTER)
        cube_identity(out, mid, (b + 1) % n * 16, eye, b)


def test_inter_block_flags_in_a_cube_kernel():
    a = torch.randn(7 * 16, 16)
    mid, out = torch.zeros(7 * 16, 16), torch.zeros(7 * 16, 16)
    cube_ring[None, 7](a, torch.eye(16), mid, out)
    sync()
    assert torch.equal(out, torch.roll(a, -16, dims=0))


def test_a_block_that_never_sets_deadlocks_the_others_and_the_stream_goes_on():
    @pl.jit
    def skipping(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_vector():
            if pl.get_block_idx() != 3:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2, sync_mode=INTER)
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=2, sync_mode=INTER)

    skipping[None, 6](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelDeadlock) as info:
        sync()
    message = str(info.value)
    assert "AIV 0 at " in message and "wait_cross_core(pipe=MTE2, event_id=2, sync_mode=INTER_BLOCK) waits for every " \
                                      "AIV of the launch to set event 2 (round 1): AIV 3 has not" in message
    x = torch.randn(3, 64)
    out = torch.zeros(3, 64)
    pass_rows[None, 3](x, 1, torch.zeros(3, 64), out)
    sync()
    torch.testing.assert_close(out, torch.roll(x, -1, dims=0) + 1, rtol=0, atol=1e-5)


def test_a_mixed_block_waiting_for_an_inter_block_flag_names_who_has_not_set_it():
    @pl.jit
    def aivs_skip(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_cube():
            pass
        with pl.section_vector():
            if pl.get_block_idx() != 5:
                pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=9, sync_mode=INTER)
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=9, sync_mode=INTER)

    aivs_skip[None, 4](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelDeadlock, match=r"AIV 0 of block 0 at .*: pl.system.wait_cross_core\(pipe=V, "
                                                       r"event_id=9, sync_mode=INTER_BLOCK\) waits for every AIV of "
                                                       r"the launch to set event 9 \(round 1\): AIV 5 has not"):
        sync()


def test_more_than_15_rounds_pending_is_a_fault():
    @pl.jit
    def flood(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_vector():
            for i in pl.range(16):
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1, sync_mode=INTER)

    flood[None, 2](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelFault, match="INTER_BLOCK event 1 already has 15 rounds of sets that not every "
                                                    "core has waited for; the hardware counter holds at most 15"):
        sync()


def test_inter_block_flags_need_every_block_resident():
    x = torch.randn(65, 64)
    pass_rows[None, 65](x, 1, torch.zeros(65, 64), torch.zeros(65, 64))
    with pytest.raises(pypto_pro.KernelFault, match="INTER_BLOCK cross-core flags need every block of the launch "
                                                    "resident at once, and a5 has 64 AIVs for block_dim 65"):
        sync()


def reload_kernel(flagged):
    """Each block stores its row and loads it back: MTE3 then MTE2 on the same GM bytes of one core,
    ordered only by the INTER_BLOCK flag (set after the store, waited before the load) when `flagged`."""
    def reload(x: pl.Tensor[[4, 64], pl.DT_FP32], buf: pl.Tensor[[4, 64], pl.DT_FP32],
               out: pl.Tensor[[4, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
        u = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0x100)
        b = pl.get_block_idx()
        with pl.section_vector():
            pl.load(t, x, [b, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(buf, t, [b, 0])
            if flagged:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=6, sync_mode=INTER)
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=6, sync_mode=INTER)
            pl.load(u, buf, [b, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.store(out, u, [b, 0])

    return pl.jit(reload, sanitizer=True, name=f"reload_{int(flagged)}")


def test_the_sanitizer_orders_the_pipes_an_inter_block_flag_orders():
    x = torch.randn(4, 64)
    out = torch.zeros(4, 64)
    reload_kernel(True)[None, 4](x, torch.zeros(4, 64), out)
    sync()
    assert torch.equal(out, x)
    reload_kernel(False)[None, 4](x, torch.zeros(4, 64), torch.zeros(4, 64))
    with pytest.raises(pypto_pro.SanitizerError) as info:
        sync()
    kinds = {f.kind for f in info.value.findings}
    assert "PIPE_RACE" in kinds, info.value.findings


# ---- sync_all(mode=SOFT) ----

@pl.jit
def soft_rotate(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], mid: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
                out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], sync_gm: pl.Tensor[[pl.DYNAMIC], pl.DT_INT32]):
    """Block b writes mid[b] = 2 x[b]; after a SOFT barrier out[b] = mid[b + 1] + 1."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    sync_ub = pl.make_tile(pl.TileType(shape=[1, 512], dtype=pl.DT_INT32), addr=0x1000)
    b = pl.get_block_idx()
    n = pl.get_block_num()
    with pl.section_vector():
        pl.load(t, x, [b, 0])
        pl.system.bar_all()
        pl.muls(t, t, 2.0)
        pl.system.bar_all()
        pl.store(mid, t, [b, 0])
        pl.system.bar_all()
        pl.system.sync_all([sync_gm, sync_ub], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)
        pl.load(t, mid, [(b + 1) % n, 0])
        pl.system.bar_all()
        pl.adds(t, t, 1.0)
        pl.system.bar_all()
        pl.store(out, t, [b, 0])


@pytest.mark.parametrize("blocks, sanitizer", [(1, False), (16, False), (6, True)])
def test_soft_sync_all_is_a_barrier_of_every_block(blocks, sanitizer):
    x = torch.randn(blocks, 64)
    mid, out = torch.zeros(blocks, 64), torch.zeros(blocks, 64)
    workspace = torch.zeros(8 * blocks, dtype=torch.int32)
    kernel = soft_rotate if not sanitizer else pl.jit(soft_rotate.fn, sanitizer=True)
    kernel[None, blocks](x, mid, out, workspace)
    sync()
    assert torch.equal(out, 2 * torch.roll(x, -1, dims=0) + 1)
    assert torch.equal(workspace, torch.zeros_like(workspace))  # reusable by the next launch as it is


def test_soft_sync_all_checks_its_gm_workspace_and_the_stream_goes_on():
    x = torch.randn(4, 64)
    soft_rotate[None, 4](x, torch.zeros(4, 64), torch.zeros(4, 64), torch.zeros(31, dtype=torch.int32))
    with pytest.raises(pypto_pro.KernelFault, match=r"the GM workspace of a SOFT sync_all needs 32 bytes per "
                                                    r"participating core: tensor 'sync_gm' of shape \[31\], offsets "
                                                    r"\[0\], window \[32\]"):
        sync()
    dirty = torch.zeros(32, dtype=torch.int32)
    dirty[9] = 7
    soft_rotate[None, 4](x, torch.zeros(4, 64), torch.zeros(4, 64), dirty)
    with pytest.raises(pypto_pro.KernelFault, match=r"must hold zeros .*tensor 'sync_gm' of shape \[32\], offsets \[9\]"):
        sync()
    soft_rotate[None, 65](torch.randn(65, 64), torch.zeros(65, 64), torch.zeros(65, 64),
                          torch.zeros(8 * 65, dtype=torch.int32))
    with pytest.raises(pypto_pro.KernelFault, match="need every block of the launch resident at once"):
        sync()
    out = torch.zeros(4, 64)
    soft_rotate[None, 4](x, torch.zeros(4, 64), out, torch.zeros(32, dtype=torch.int32))
    sync()
    assert torch.equal(out, 2 * torch.roll(x, -1, dims=0) + 1)


@pl.jit
def soft_first_cores(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], used: pl.DT_INT32,
                     mid: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
                     sync_gm: pl.Tensor[[64], pl.DT_INT32]):
    """Only the first `used` blocks take part: they rotate their rows among themselves; the others
    copy theirs."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    sync_ub = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_INT32), addr=0x1000)
    b = pl.get_block_idx()
    with pl.section_vector():
        pl.load(t, x, [b, 0])
        pl.system.bar_all()
        if b < used:
            pl.store(mid, t, [b, 0])
            pl.system.bar_all()
            pl.system.sync_all([used, sync_ub, sync_gm], mode=pl.SyncAllMode.SOFT,
                               core_type=pl.SyncCoreType.AIV_ONLY)
            pl.load(t, mid, [(b + 1) % used, 0])
            pl.system.bar_all()
        pl.store(out, t, [b, 0])


def test_soft_sync_all_with_used_cores_holds_only_those():
    x = torch.randn(6, 64)
    out = torch.zeros(6, 64)
    soft_first_cores[None, 6](x, 4, torch.zeros(6, 64), out, torch.zeros(64, dtype=torch.int32))
    sync()
    ref = x.clone()
    ref[:4] = torch.roll(x[:4], -1, dims=0)
    assert torch.equal(out, ref)
    soft_first_cores[None, 6](x, 7, torch.zeros(6, 64), torch.zeros(6, 64), torch.zeros(64, dtype=torch.int32))
    with pytest.raises(pypto_pro.KernelFault, match=r"used_cores of a SOFT sync_all is outside \[0, the launch's "
                                                    r"cores of core_type\]: size \[6\], offsets \[7\]"):
        sync()


@pl.jit
def soft_mixed(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], eye: pl.Tensor[[16, 16], pl.DT_FP32], mid: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32],
               out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], sync_gm: pl.Tensor[[pl.DYNAMIC], pl.DT_INT32]):
    """MIX: the cubes write mid[b] = a[b] @ I; after the barrier the AIVs take the next block's."""
    b = pl.get_block_idx() // pl.get_subblock_num()
    n = pl.get_block_num()
    sync_ub = pl.make_tile(pl.TileType(shape=[1, 256], dtype=pl.DT_INT32), addr=0x2000)
    sync_l1 = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Mat),
                           addr=0x4000)
    with pl.section_cube():
        cube_identity(mid, a, b * 16, eye, b)
        pl.system.sync_all([sync_gm, sync_ub, sync_l1], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.MIX)
    with pl.section_vector():
        v = pl.make_tile(pl.TileType(shape=[8, 16], dtype=pl.DT_FP32), addr=0)
        row = pl.get_subblock_idx() * 8
        pl.system.sync_all([sync_gm, sync_ub, sync_l1], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.MIX)
        pl.load(v, mid, [(b + 1) % n * 16 + row, 0])
        pl.system.bar_all()
        pl.store(out, v, [b * 16 + row, 0])


def test_soft_sync_all_in_a_mixed_kernel():
    a = torch.randn(5 * 16, 16)
    out = torch.zeros(5 * 16, 16)
    soft_mixed[None, 5](a, torch.eye(16), torch.zeros(5 * 16, 16), out, torch.zeros(8 * 15, dtype=torch.int32))
    sync()
    assert torch.equal(out, torch.roll(a, -16, dims=0))


@pytest.mark.parametrize("call, cls, message", [
    ("pl.system.sync_all([g, u], core_type=pl.SyncCoreType.AIV_ONLY)", errors.ParserValueError,
     "the hardware barrier takes no workspaces"),
    ("pl.system.sync_all([g], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)", errors.ParserValueError,
     "takes the workspaces [gm_workspace, ub_workspace(, used_cores)]"),
    ("pl.system.sync_all([g, u, m], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)",
     errors.ParserValueError, "takes the workspaces [gm_workspace, ub_workspace(, used_cores)]"),
    ("pl.system.sync_all([x, u], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)", errors.ParserTypeError,
     "the GM workspace 'x' must be int32, got fp32"),
    ("pl.system.sync_all([g, f], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)", errors.ParserTypeError,
     "workspace tiles must be int32"),
    ("pl.system.sync_all([g, u, u], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)",
     errors.ParserValueError, "workspaces hold at most one Vec (UB) tile"),
    ("pl.system.sync_all([g, u, -1], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)",
     errors.ParserValueError, "used_cores must be >= 0"),
    ("pl.system.sync_all([g, u, 1.5], mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)",
     errors.ParserTypeError, "workspaces hold a GM tensor, UB / L1 tiles and an integer used_cores"),
])
def test_soft_sync_all_misuse_is_a_located_error(tmp_path, call, cls, message):
    from test_mixed import kernel_from_source
    body = kernel_from_source(
        tmp_path,
        "def body(x: pl.Tensor[[8, 64], pl.DT_FP32], g: pl.Tensor[[64], pl.DT_INT32]):\n"
        "    u = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_INT32), addr=0)\n"
        "    f = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0x100)\n"
        "    m = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_INT32, target_memory=pl.MemorySpace.Mat), addr=0)\n"
        "    with pl.section_vector():\n"
        f"        {call}\n")
    with pytest.raises(cls) as info:
        pl.jit(body)[None, 1](torch.zeros(8, 64), torch.zeros(64, dtype=torch.int32))
    assert message in info.value.message, info.value.message
    assert info.value.lineno == 6


def test_a_hard_barrier_with_its_event_ids_in_flight_is_a_fault():
    @pl.jit
    def clash(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=12)
            pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
        with pl.section_vector():
            pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=12)

    clash[None, 2](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelFault, match=r"sync_all \(mode=HARD\) signals through cross-core event ids "
                                                    r"11..14 itself, and event 12 still has a set_cross_core"):
        sync()

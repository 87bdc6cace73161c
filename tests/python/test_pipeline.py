"""pl.jit(pipeline=pl.pipeline.PipelineConfig(...)): a mixed kernel's loop of stages gets the
cross-core flags of its cross-core buffers (sync_only=True), and with preload the stages of different
iterations are scheduled at once (docs/language.md#pipeline). The kernels follow the public "auto
parallel pipeline" tutorial; every one also runs under the sanitizer, which must find nothing, and
without pipeline= the sanitizer finds the races the flags prevent."""

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import pipeline_generated

TILE = 64
TILE_HALF = TILE // 2
SYNC_ONLY = pl.pipeline.PipelineConfig(sync_only=True)
M = pl.MemorySpace


def sync():
    pypto_pro.runtime.synchronize()


# ---- the tutorial's four stages: out = relu(A_i @ B) @ D per 64-row block i ----

@pl.pipeline.stage
def stage1(ki, a, b_l1, a_l1_db, left_db, right_db, acc_db, mm1_vec_db):
    cur_a = a_l1_db.next()
    pl.load(cur_a, a, [ki * TILE, 0])
    b_slot = b_l1.current()
    left = left_db.next()
    right = right_db.next()
    acc = acc_db.next()
    pl.move(left, cur_a)
    pl.move(right, b_slot)
    pl.matmul(acc, left, right)
    mm1_vec = mm1_vec_db.next()
    pl.move(mm1_vec, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def stage2(ki, sub_id, mm1_vec_db, relu_vec_db, relu_nz_db, p_mat_db):
    mm1_vec = mm1_vec_db.next()
    relu_vec = relu_vec_db.next()
    pl.relu(relu_vec, mm1_vec)
    relu_nz = relu_nz_db.next()
    pl.move(relu_nz, relu_vec)
    p_mat = p_mat_db.next()
    pl.insert(p_mat, relu_nz, [sub_id * TILE_HALF, 0])


@pl.pipeline.stage
def stage3(ki, d_l1, p_mat_db, left_db, right_db, acc_db, out_vec_db):
    d_slot = d_l1.current()
    p_mat = p_mat_db.next()
    left = left_db.next()
    right = right_db.next()
    acc = acc_db.next()
    pl.move(left, p_mat)
    pl.move(right, d_slot)
    pl.matmul(acc, left, right)
    out_vec = out_vec_db.next()
    pl.move(out_vec, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def stage4(ki, sub_id, out, out_vec_db):
    out_vec = out_vec_db.next()
    pl.store(out, out_vec, [ki * TILE + sub_id * TILE_HALF, 0])


def _four_stages(context):
    """The tutorial's kernel; with `context` the loop body also computes scalars the stages read
    (the row of the iteration, and a loop-carried running row), which preload carries in rings."""
    def four_stages(a: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_FP32], b: pl.Tensor[[TILE, TILE], pl.DT_FP32],
                    d: pl.Tensor[[TILE, TILE], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, TILE], pl.DT_FP32]):
        mm1_vec_db = pl.make_tile_group(type=pl.TileType(shape=[TILE_HALF, TILE], dtype=pl.DT_FP32, target_memory=M.Vec),
                                        addrs=0x0000, mutex_ids=[12, 13], fwd_ids=[0, 1], bwd_ids=[2, 3])
        p_mat_db = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                       layout=pl.NZ),
                                      addrs=0x8000, mutex_ids=[14, 15], fwd_ids=[4, 5], bwd_ids=[6, 7])
        out_vec_db = pl.make_tile_group(type=pl.TileType(shape=[TILE_HALF, TILE], dtype=pl.DT_FP32, target_memory=M.Vec),
                                        addrs=0x10000, mutex_ids=[16, 17], fwd_ids=[8, 9], bwd_ids=[10, 11])
        with pl.section_cube():
            a_l1_db = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                          layout=pl.NZ), addrs=0x0000, mutex_ids=[0, 1])
            b_l1 = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                       layout=pl.NZ), addrs=0x10000, mutex_ids=[2])
            d_l1 = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                       layout=pl.NZ), addrs=0x14000, mutex_ids=[3])
            left_db = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Left,
                                                          layout=pl.NZ), addrs=0x0000, mutex_ids=[4, 5])
            right_db = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Right,
                                                           layout=pl.ZN), addrs=0x0000, mutex_ids=[6, 7])
            acc_db = pl.make_tile_group(type=pl.TileType(shape=[TILE, TILE], dtype=pl.DT_FP32, target_memory=M.Acc,
                                                         layout=pl.NZ, fractal=1024),
                                        addrs=0x0000, mutex_ids=[8, 9, 10, 11])
            b_slot = b_l1.current()
            d_slot = d_l1.current()
            pl.load(b_slot, b, [0, 0])
            pl.load(d_slot, d, [0, 0])
        with pl.section_vector():
            sub_id = pl.get_subblock_idx()
            relu_vec_db = pl.make_tile_group(type=pl.TileType(shape=[TILE_HALF, TILE], dtype=pl.DT_FP32,
                                                              target_memory=M.Vec), addrs=0x8000, mutex_ids=[18, 19])
            relu_nz_db = pl.make_tile_group(type=pl.TileType(shape=[TILE_HALF, TILE], dtype=pl.DT_FP32,
                                                             target_memory=M.Vec, layout=pl.NZ),
                                            addrs=0x18000, mutex_ids=[20, 21])
        running = 0
        for ki in pl.range(0, a.shape[0] // TILE):
            if context:
                row = ki * TILE                # read by the first stage
                running = running + TILE       # loop-carried, read by the last stage
            with pl.section_cube():
                stage1(row // TILE if context else ki, a, b_l1, a_l1_db, left_db, right_db, acc_db, mm1_vec_db)
            with pl.section_vector():
                stage2(ki, sub_id, mm1_vec_db, relu_vec_db, relu_nz_db, p_mat_db)
            with pl.section_cube():
                stage3(ki, d_l1, p_mat_db, left_db, right_db, acc_db, out_vec_db)
            with pl.section_vector():
                stage4(running // TILE - 1 if context else ki, sub_id, out, out_vec_db)

    return four_stages


four_stages = _four_stages(False)
four_stages_with_context = _four_stages(True)


four_stage_kernel = pl.jit(four_stages, auto_mutex=True, pipeline=SYNC_ONLY)
four_stage_checked = pl.jit(four_stages, auto_mutex=True, pipeline=SYNC_ONLY, sanitizer=True,
                            name="four_stages_sanitized")
four_stage_unsynchronised = pl.jit(four_stages, auto_mutex=True, sanitizer=True, name="four_stages_serial")


def _inputs(n):
    g = torch.Generator().manual_seed(n)
    a = torch.randn(n * TILE, TILE, generator=g)
    b = torch.randn(TILE, TILE, generator=g)
    d = torch.randn(TILE, TILE, generator=g)
    return a, b, d, torch.zeros(n * TILE, TILE)


@pytest.mark.parametrize("n", [1, 2, 3, 9])   # 1, the depth, depth + 1, many
@pytest.mark.parametrize("kernel", [four_stage_kernel, four_stage_checked], ids=["plain", "sanitizer"])
def test_four_stages_match_torch(kernel, n):
    a, b, d, out = _inputs(n)
    kernel[None, 1](a, b, d, out)
    sync()
    ref = torch.relu(a.double() @ b.double()) @ d.double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-3)


def test_several_blocks_each_run_the_loop():
    a, b, d, out = _inputs(3)
    four_stage_checked[None, 3](a, b, d, out)   # every block computes the same blocks of rows
    sync()
    torch.testing.assert_close(out.double(), torch.relu(a.double() @ b.double()) @ d.double(), rtol=1e-4, atol=1e-3)


def test_without_the_pipeline_the_sanitizer_finds_the_races():
    a, b, d, out = _inputs(2)
    with pytest.raises(pypto_pro.SanitizerError, match=r"PIPE_RACE: read-after-write: V reads tile 'mm1_vec.*' .* that "
                                                       r"AIC FIX wrote"):
        four_stage_unsynchronised[None, 1](a, b, d, out)
        sync()


# ---- two stages: out = relu(A_i @ B), a single-slot buffer and a loop not starting at 0 ----

@pl.pipeline.stage
def mm_stage(k, a, b_mat, a_mat, left, right, acc, vec_buf):
    t = a_mat.next()
    pl.load(t, a, [k * 16, 0])
    l_t = left.next()
    r_t = right.next()
    acc_t = acc.next()
    pl.move(l_t, t)
    pl.move(r_t, b_mat.current())
    pl.matmul(acc_t, l_t, r_t)
    v = vec_buf.next()
    pl.move(v, acc_t, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def relu_stage(k, sub, out, vec_buf, res):
    v = vec_buf.next()
    # Before the data: a descriptor op, which no flag waits for (the wait goes on V, the pipe of the read;
    # on S the sanitizer found the read unordered).
    pl.set_validshape(v, [8, 16])
    r = res.next()
    pl.relu(r, v)
    pl.store(out, r, [k * 16 + sub * 8, 0])


@pl.jit(auto_mutex=True, sanitizer=True, pipeline=SYNC_ONLY)
def two_stages(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], b: pl.Tensor[[16, 16], pl.DT_FP32],
               out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], first: pl.DT_INT32):
    vec_buf = pl.make_tile_group(type=pl.TileType(shape=[8, 16], dtype=pl.DT_FP32, target_memory=M.Vec),
                                 addrs=0x0, mutex_ids=[0], fwd_ids=[3], bwd_ids=[7])
    with pl.section_cube():
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                    layout=pl.NZ), addrs=0x0, mutex_ids=[1, 2])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                    layout=pl.NZ), addrs=0x4000, mutex_ids=[3])
        left = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Left,
                                                   layout=pl.NZ), addrs=0x0, mutex_ids=[4])
        right = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Right,
                                                    layout=pl.ZN), addrs=0x0, mutex_ids=[5])
        acc = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Acc,
                                                  layout=pl.NZ, fractal=1024), addrs=0x0, mutex_ids=[6])
        pl.load(b_mat.current(), b, [0, 0])
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        res = pl.make_tile_group(type=pl.TileType(shape=[8, 16], dtype=pl.DT_FP32, target_memory=M.Vec),
                                 addrs=0x1000, mutex_ids=[7, 8])
    for k in pl.range(first, a.shape[0] // 16, 2):
        with pl.section_cube():
            mm_stage(k, a, b_mat, a_mat, left, right, acc, vec_buf)
        with pl.section_vector():
            relu_stage(k, sub, out, vec_buf, res)


@pytest.mark.parametrize("blocks, first", [(1, 0), (2, 1), (5, 0), (6, 1)])
def test_two_stages_single_slot_strided_loop(blocks, first):
    a = torch.randn(blocks * 16, 16)
    b = torch.randn(16, 16)
    out = torch.zeros(blocks * 16, 16)
    two_stages[None, 1](a, b, out, first)
    sync()
    ref = torch.relu(a @ b)
    for k in range(blocks):
        rows = slice(k * 16, k * 16 + 16)
        expect = ref[rows] if k >= first and (k - first) % 2 == 0 else torch.zeros(16, 16)
        torch.testing.assert_close(out[rows], expect, rtol=1e-5, atol=1e-5)


# ---- what the transform cannot schedule: a PipelineError (a ValueError) at the line ----

def _compile(body, **kwargs):
    kernel = pl.jit(body, pipeline=SYNC_ONLY, **kwargs)
    kernel[None, 1](torch.zeros(16, 16))
    sync()


@pl.pipeline.stage
def vec_stage(k, x, buf):
    t = buf.next()
    pl.load(t, x, [0, 0])


@pl.pipeline.stage
def vec_stage_b(k, x, buf):
    t = buf.next()
    pl.store(x, t, [0, 0])


def test_misuse_is_located():
    def same_core(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2,
                                 fwd_ids=[0, 1])
        for k in pl.range(0, 2):
            with pl.section_vector():
                vec_stage(k, x, buf)
            with pl.section_vector():
                vec_stage_b(k, x, buf)

    with pytest.raises(pypto_pro.PipelineError, match="stages 'vec_stage' and 'vec_stage_b' both run on the vector "
                                                      "core; stages alternate cube and vector") as info:
        _compile(same_core)
    assert "vec_stage_b(k, x, buf)" in str(info.value)

    def no_section(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2)
        with pl.section_vector():
            for k in pl.range(0, 2):
                vec_stage(k, x, buf)

    with pytest.raises(pypto_pro.PipelineError, match="stage 'vec_stage' is not inside a pl.section_cube"):
        _compile(no_section)

    def run_time_if(x: pl.Tensor[[16, 16], pl.DT_FP32], n: pl.DT_INT32):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2)
        for k in pl.range(0, 2):
            if n > 0:
                with pl.section_vector():
                    vec_stage(k, x, buf)

    with pytest.raises(pypto_pro.PipelineError, match="stage 'vec_stage' is inside run-time control flow"):
        pl.jit(run_time_if, pipeline=SYNC_ONLY)[None, 1](torch.zeros(16, 16), 1)

    def more_code(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2)
        for k in pl.range(0, 2):
            with pl.section_vector():
                vec_stage(k, x, buf)
                pl.system.bar_all()

    with pytest.raises(pypto_pro.PipelineError, match="the section of stage 'vec_stage' holds other code as well"):
        _compile(more_code)

    def one_user(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2, fwd_ids=[0, 1])
        other = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                    layout=pl.NZ), addrs=0, depth=2)
        for k in pl.range(0, 2):
            with pl.section_vector():
                vec_stage(k, x, buf)
            with pl.section_cube():
                vec_stage(k, x, other)

    with pytest.raises(pypto_pro.PipelineError, match="cross-core buffer 'buf' is used by 1 stage\\(s\\); it needs "
                                                      "exactly two"):
        _compile(one_user)

    def no_stages(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.bar_all()

    with pytest.raises(pypto_pro.PipelineError, match="the kernel has no @pl.pipeline.stage calls"):
        _compile(no_stages)


def test_ids_shared_with_hand_written_flags_are_refused():
    def clash(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2,
                                 fwd_ids=[0, 1])
        vec = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0x4000, depth=2)
        mat = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                  layout=pl.NZ), addrs=0, depth=2)
        with pl.section_vector():
            pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)
        for k in pl.range(0, 2):
            with pl.section_vector():
                vec_stage(k, x, vec)
            with pl.section_cube():
                vec_stage(k, x, mat)

    with pytest.raises(pypto_pro.PipelineError, match="cross-core event id 1 is used here and by the pipeline's "
                                                      "buffer 'buf'"):
        _compile(clash)


def test_ids_a_hard_barrier_uses_are_refused():
    def barrier(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        buf = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0, depth=2,
                                 fwd_ids=[0, 1], bwd_ids=[12, 13])
        vec = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0x4000, depth=2)
        mat = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                  layout=pl.NZ), addrs=0, depth=2)
        with pl.section_vector():
            pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
        for k in pl.range(0, 2):
            with pl.section_vector():
                vec_stage(k, x, vec)
            with pl.section_cube():
                vec_stage(k, x, mat)

    with pytest.raises(pypto_pro.PipelineError, match="this pl.system.sync_all \\(mode=HARD\\) uses cross-core event "
                                                      "ids 11..14 and the pipeline's buffer 'buf' uses 12"):
        _compile(barrier)


def test_pipeline_must_be_a_config():
    with pytest.raises(TypeError, match="pipeline must be a pl.pipeline.PipelineConfig"):
        pl.jit(four_stages, pipeline=2)


# ---- preload: the stages of different iterations at once ----

PRELOADED = {p: pl.jit(four_stages, auto_mutex=True, sanitizer=True, name=f"four_stages_preload{p}",
                       pipeline=pl.pipeline.PipelineConfig(preload=p)) for p in (1, 2, 3)}


@pytest.mark.parametrize("n", [1, 2, 3, 9])
@pytest.mark.parametrize("preload", [1, 2, 3])
def test_preloaded_four_stages_match_torch_and_the_serial_kernel(preload, n):
    a, b, d, out = _inputs(n)
    PRELOADED[preload][None, 1](a, b, d, out)
    sync()
    serial = torch.zeros_like(out)
    four_stage_kernel[None, 1](a, b, d, serial)
    sync()
    assert torch.equal(out, serial)   # the same ops on the same data: bit for bit
    torch.testing.assert_close(out.double(), torch.relu(a.double() @ b.double()) @ d.double(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [1, 2, 3, 9])
@pytest.mark.parametrize("config", ["sync_only", "preload1", "preload2", "preload3"])
def test_pipeline_generated_runs_as_a_plain_kernel(config, n):
    """pipeline_generated.py of each instance: the transformed kernel as pypto_pro Python, run without
    pipeline= (under the sanitizer), gives the pipelined kernel's bits."""
    kernel = four_stage_checked if config == "sync_only" else PRELOADED[int(config[-1])]
    a, b, d, out = _inputs(n)
    kernel[None, 1](a, b, d, out)
    sync()
    generated = pipeline_generated(kernel, auto_mutex=True, sanitizer=True)
    again = torch.zeros_like(out)
    generated[None, 1](a, b, d, again)
    sync()
    assert torch.equal(out, again)


def test_preload_with_a_strided_loop_and_a_single_slot():
    kernel = pl.jit(two_stages.fn, auto_mutex=True, sanitizer=True, name="two_stages_preloaded",
                    pipeline=pl.pipeline.PipelineConfig(preload=1))
    kernel[None, 1](torch.zeros(16, 16), torch.zeros(16, 16), torch.zeros(16, 16), 0)
    generated = pipeline_generated(kernel, auto_mutex=True, sanitizer=True)  # its start + (beat - 1) * 2
    for blocks, first in [(1, 0), (5, 0), (6, 1)]:
        a = torch.randn(blocks * 16, 16)
        b = torch.randn(16, 16)
        out = torch.zeros(blocks * 16, 16)
        kernel[None, 1](a, b, out, first)
        sync()
        ref = torch.relu(a @ b)
        for k in range(first, blocks, 2):
            torch.testing.assert_close(out[k * 16:k * 16 + 16], ref[k * 16:k * 16 + 16], rtol=1e-5, atol=1e-5)
        again = torch.zeros_like(out)
        generated[None, 1](a, b, again, first)
        sync()
        assert torch.equal(out, again)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 9])   # 1, 2, around the ring depths (2..5), many
@pytest.mark.parametrize("preload", [1, 2, 3])
def test_loop_body_context_rides_in_rings(preload, n):
    """Scalars computed in the loop body between the stages (one loop-carried) reach each stage as they
    were at its place in its own iteration, though the stage runs up to 1 + 2 * preload beats later."""
    kernel = CONTEXT[preload]
    a, b, d, out = _inputs(n)
    kernel[None, 1](a, b, d, out)
    sync()
    serial = torch.zeros_like(out)
    four_stage_kernel[None, 1](a, b, d, serial)
    sync()
    assert torch.equal(out, serial)
    again = torch.zeros_like(out)
    pipeline_generated(kernel, auto_mutex=True, sanitizer=True)[None, 1](a, b, d, again)
    sync()
    assert torch.equal(again, serial)


CONTEXT = {p: pl.jit(four_stages_with_context, auto_mutex=True, sanitizer=True, name=f"four_stages_context{p}",
                     pipeline=pl.pipeline.PipelineConfig(preload=p)) for p in (1, 2, 3)}


def test_preload_misuse():
    too_far = pl.jit(four_stages, pipeline=pl.pipeline.PipelineConfig(preload=4))
    with pytest.raises(pypto_pro.PipelineError,
                       match=r"cross-core buffer 'p_mat_db' has 2 slot\(s\) but with preload=4 its producer 'stage2' "
                             r"runs 3 iteration\(s\) ahead of its consumer 'stage3'; give it at least 3 slots"):
        too_far[None, 1](*_inputs(2))
    with pytest.raises(pypto_pro.PipelineError, match=r"preload=0 overlaps no iterations"):
        pl.jit(four_stages, pipeline=pl.pipeline.PipelineConfig(preload=0))[None, 1](*_inputs(1))

    def extra_code(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        vec = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=0x4000, depth=2)
        mat = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat,
                                                  layout=pl.NZ), addrs=0, depth=2)
        for k in pl.range(0, 2):
            j = k * 2   # a scalar: carried to the stage in a ring
            spare = vec.next()   # not a scalar: it would run once per beat
            with pl.section_vector():
                vec_stage(j, x, vec)
            with pl.section_cube():
                vec_stage(k, x, mat)

    with pytest.raises(pypto_pro.PipelineError, match="with preload the pipeline loop's body holds the stages' "
                                                      "sections and scalar computations only") as info:
        pl.jit(extra_code, pipeline=pl.pipeline.PipelineConfig(preload=1))[None, 1](torch.zeros(16, 16))
    assert info.value.source_line.strip().startswith("spare = vec.next()")

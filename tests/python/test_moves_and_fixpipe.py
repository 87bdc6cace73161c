"""Tile -> tile moves at an offset (extract and insert, pl.insert), transposing NZ <-> ZN moves, and
the fixpipe's options on the way out of Acc (relu_pre_mode=, scale=, atomic=, order=), each against
a torch reference (docs/language.md#data-movement)."""

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

M = pl.MemorySpace


def sync():
    pypto_pro.runtime.synchronize()


def tt(shape, dtype, memory=M.Vec, layout=None, valid_shape=None, fractal=None, compact=None):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=memory, layout=layout, valid_shape=valid_shape,
                       fractal=fractal, compact=compact)


# ---- offset= on Vec -> Vec: extract a part, insert into a larger tile ----

@pl.jit
def extract_part(x: pl.Tensor[[32, 64], pl.DT_FP32], out: pl.Tensor[[16, 32], pl.DT_FP32]):
    big = pl.make_tile(tt([32, 64], pl.DT_FP32), addr=0)
    part = pl.make_tile(tt([16, 32], pl.DT_FP32), addr=0x4000)
    pl.load(big, x, [0, 0])
    pl.system.bar_v()
    pl.move(part, big, [8, 24])  # offset positional, as upstream: the part's window from (8, 24)
    pl.system.bar_v()
    pl.store(out, part, [0, 0])


def test_move_extracts_the_destination_window_at_the_offset():
    x = torch.randn(32, 64)
    out = torch.zeros(16, 32)
    extract_part[None, 1](x, out)
    sync()
    assert torch.equal(out, x[8:24, 24:56])


@pl.jit
def insert_part(x: pl.Tensor[[8, 16], pl.DT_FP32], y: pl.Tensor[[32, 32], pl.DT_FP32],
                out: pl.Tensor[[32, 32], pl.DT_FP32], r: pl.DT_INT32):
    small = pl.make_tile(tt([8, 16], pl.DT_FP32, valid_shape=[-1, -1]), addr=0)
    big = pl.make_tile(tt([32, 32], pl.DT_FP32), addr=0x1000)
    pl.set_validshape(small, [5, 16])  # a tail: only the valid window is inserted
    pl.load(small, x, [0, 0])
    pl.load(big, y, [0, 0])
    pl.system.bar_all()
    pl.move(big, small, offset=[r, 16])  # the source fits inside: insert semantics, run-time offset
    pl.system.bar_v()
    pl.store(out, big, [0, 0])


def test_move_with_a_smaller_source_inserts_its_valid_window():
    x, y = torch.randn(8, 16), torch.randn(32, 32)
    out = torch.zeros(32, 32)
    insert_part[None, 1](x, y, out, 9)
    sync()
    ref = y.clone()
    ref[9:14, 16:32] = x[:5]
    assert torch.equal(out, ref)


def test_an_offset_outside_the_tile_is_a_kernel_fault_and_the_stream_goes_on():
    x, y = torch.randn(8, 16), torch.randn(32, 32)
    out = torch.zeros(32, 32)
    insert_part[None, 1](x, y, out, 30)  # rows 30..34 of 32
    with pytest.raises(errors.KernelFault) as info:
        sync()
    text = str(info.value)
    assert "kernel 'insert_part' faulted" in text and "in pl.move: the window at the offset does not fit" in text
    assert "offsets [30, 16], window [5, 16]" in text
    insert_part[None, 1](x, y, out, 0)
    sync()
    assert torch.equal(out[0:5, 16:32], x[:5])


# ---- the cube: a wide L1 tile feeds two K halves; Kᵀ by a transposing move ----

@pl.jit
def wide_l1_extract(a: pl.Tensor[[32, 64], pl.DT_FP16], b: pl.Tensor[[64, 32], pl.DT_FP16],
                    c: pl.Tensor[[32, 32], pl.DT_FP32]):
    a_mat = pl.make_tile(tt([32, 64], pl.DT_FP16, M.Mat), addr=0)
    b_mat = pl.make_tile(tt([64, 32], pl.DT_FP16, M.Mat), addr=0x2000)
    left = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Left), addr=0)
    right = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Right), addr=0)
    acc = pl.make_tile(tt([32, 32], pl.DT_FP32, M.Acc), addr=0)
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.system.bar_all()
        for k in pl.static_range(2):
            pl.move(left, a_mat, offset=[0, 32 * k])   # columns 32k.. of A
            pl.move(right, b_mat, offset=[32 * k, 0])  # rows 32k.. of B
            pl.system.bar_all()
            if k == 0:
                pl.matmul(acc, left, right)
            else:
                pl.matmul_acc(acc, acc, left, right)
            pl.system.bar_all()
        pl.store(c, acc, [0, 0])


def test_mat_to_l0_extracts_k_slices_of_a_wide_tile():
    a, b = torch.randn(32, 64).half(), torch.randn(64, 32).half()
    c = torch.zeros(32, 32)
    wide_l1_extract[None, 1](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


@pl.jit
def q_kt(q: pl.Tensor[[16, 32], pl.DT_FP16], k: pl.Tensor[[64, 32], pl.DT_FP16], s: pl.Tensor[[16, 64], pl.DT_FP32]):
    q_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
    k_mat = pl.make_tile(tt([64, 32], pl.DT_FP16, M.Mat, layout=pl.NZ), addr=0x1000)  # K as stored: [S, D]
    left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
    kt = pl.make_tile(tt([32, 64], pl.DT_FP16, M.Right, layout=pl.ZN), addr=0)  # the same bytes as [D, S]
    acc = pl.make_tile(tt([16, 64], pl.DT_FP32, M.Acc), addr=0)
    with pl.section_cube():
        pl.load(q_mat, q, [0, 0])
        pl.load(k_mat, k, [0, 0])
        pl.system.bar_all()
        pl.move(left, q_mat)
        pl.move(kt, k_mat)  # NZ [64, 32] -> ZN [32, 64]: Kᵀ
        pl.system.bar_all()
        pl.matmul(acc, left, kt)
        pl.system.bar_all()
        pl.store(s, acc, [0, 0])


@pl.jit
def q_kt_part(q: pl.Tensor[[16, 16], pl.DT_FP16], k: pl.Tensor[[64, 16], pl.DT_FP16], s: pl.Tensor[[16, 32], pl.DT_FP32]):
    """Kᵀ of rows 16..47 of a 64-row K block: the [16, 32] ZN tile only fits the NZ [64, 16] source
    transposed, so the move at offset [16, 0] (source coordinates) extracts transposed."""
    q_mat = pl.make_tile(tt([16, 16], pl.DT_FP16, M.Mat), addr=0)
    k_mat = pl.make_tile(tt([64, 16], pl.DT_FP16, M.Mat, layout=pl.NZ), addr=0x1000)
    left = pl.make_tile(tt([16, 16], pl.DT_FP16, M.Left), addr=0)
    kt = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Right, layout=pl.ZN), addr=0)
    acc = pl.make_tile(tt([16, 32], pl.DT_FP32, M.Acc), addr=0)
    with pl.section_cube():
        pl.load(q_mat, q, [0, 0])
        pl.load(k_mat, k, [0, 0])
        pl.system.bar_all()
        pl.move(left, q_mat)
        pl.move(kt, k_mat, [16, 0])
        pl.system.bar_all()
        pl.matmul(acc, left, kt)
        pl.system.bar_all()
        pl.store(s, acc, [0, 0])


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_an_offset_move_between_nz_and_zn_extracts_transposed(sanitizer):
    q, k = torch.randn(16, 16).half(), torch.randn(64, 16).half()
    s = torch.zeros(16, 32)
    kernel = q_kt_part if not sanitizer else pl.jit(q_kt_part.fn, sanitizer=True)
    kernel[None, 1](q, k, s)
    sync()
    torch.testing.assert_close(s, q.float() @ k[16:48].float().T, rtol=1e-4, atol=1e-3)


def test_nz_to_zn_move_of_swapped_shape_transposes():
    q, k = torch.randn(16, 32).half(), torch.randn(64, 32).half()
    s = torch.zeros(16, 64)
    q_kt[None, 1](q, k, s)
    sync()
    torch.testing.assert_close(s, q.float() @ k.float().T, rtol=1e-4, atol=1e-3)


# ---- pl.insert: both AIVs write their half of the AIC's L1, the AIC multiplies it ----

@pl.jit(auto_mutex=True)
def insert_then_matmul(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32],
                       rhs: pl.Tensor[[64, 64], pl.DT_FP32], out: pl.Tensor[[64, 64], pl.DT_FP32]):
    lhs_mat = pl.make_tile_group(type=tt([64, 64], pl.DT_FP32, M.Mat, layout=pl.NZ), addrs=0x10000,
                                 mutex_ids=[0])
    with pl.section_vector():
        row = pl.get_subblock_idx() * 32
        tx = pl.make_tile_group(type=tt([32, 64], pl.DT_FP32), addrs=0x0, mutex_ids=[1]).current()
        ty = pl.make_tile_group(type=tt([32, 64], pl.DT_FP32), addrs=0x2000, mutex_ids=[2]).current()
        tsum = pl.make_tile_group(type=tt([32, 64], pl.DT_FP32), addrs=0x4000, mutex_ids=[3]).current()
        tnz = pl.make_tile_group(type=tt([32, 64], pl.DT_FP32, layout=pl.NZ), addrs=0x6000, mutex_ids=[4]).current()
        pl.load(tx, x, [row, 0])
        pl.load(ty, y, [row, 0])
        pl.add(tsum, tx, ty)
        pl.move(tnz, tsum)  # ND -> NZ
        pl.insert(lhs_mat.current(), tnz, [row, 0])  # UB -> L1 at this AIV's rows
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)
    with pl.section_cube():
        rhs_mat = pl.make_tile_group(type=tt([64, 64], pl.DT_FP32, M.Mat, layout=pl.NZ), addrs=0x0,
                                     mutex_ids=[5]).current()
        left = pl.make_tile_group(type=tt([64, 64], pl.DT_FP32, M.Left, layout=pl.NZ), addrs=0x0,
                                  mutex_ids=[6]).current()
        right = pl.make_tile_group(type=tt([64, 64], pl.DT_FP32, M.Right, layout=pl.ZN), addrs=0x0,
                                   mutex_ids=[7]).current()
        acc = pl.make_tile_group(type=tt([64, 64], pl.DT_FP32, M.Acc, layout=pl.NZ, fractal=1024), addrs=0x0,
                                 mutex_ids=[8]).current()
        pl.load(rhs_mat, rhs, [0, 0])
        pl.move(right, rhs_mat)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=2, sync_mode=pl.CrossCoreSyncMode.INTRA_BLOCK)
        pl.move(left, lhs_mat.current())
        pl.matmul(acc, left, right)
        pl.store(out, acc, [0, 0])


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_insert_from_both_aivs_into_the_aic_l1(sanitizer):
    gen = torch.Generator().manual_seed(3)
    x, y, rhs = (torch.randn(64, 64, generator=gen) for _ in range(3))
    out = torch.zeros(64, 64)
    kernel = insert_then_matmul if not sanitizer else pl.jit(insert_then_matmul.fn, auto_mutex=True, sanitizer=True)
    kernel[None, 2](x, y, rhs, out)
    sync()
    torch.testing.assert_close(out, (x + y) @ rhs, rtol=1e-4, atol=1e-3)


def transposed_insert_kernel(m, k, halves):
    """The vector cores hold Aᵀ ([k, m], NZ) and insert it into the AIC's ZN L1 tile [m, k]: the same
    bytes read as A (the public load page's transposed left operand from UB). With `halves`, each AIV
    inserts its half of Aᵀ's rows, the offset counting in the NZ source's frame. The AIC computes
    A @ I."""
    rows = k // 2 if halves else k

    @pl.jit(name=f"transposed_insert_{m}_{k}_{int(halves)}")
    def kernel(at: pl.Tensor[[k, m], pl.DT_FP16], eye: pl.Tensor[[k, k], pl.DT_FP16],
               out: pl.Tensor[[m, k], pl.DT_FP32]):
        a_mat = pl.make_tile(tt([m, k], pl.DT_FP16, M.Mat, layout=pl.ZN), addr=0x4000)
        with pl.section_vector():
            t = pl.make_tile(tt([rows, m], pl.DT_FP16), addr=0x0)
            t_nz = pl.make_tile(tt([rows, m], pl.DT_FP16, layout=pl.NZ), addr=0x2000)
            sub = pl.get_subblock_idx()
            if halves or sub == 0:
                row = sub * rows
                pl.load(t, at, [row, 0])
                pl.system.bar_all()
                pl.move(t_nz, t)
                pl.system.bar_all()
                pl.insert(a_mat, t_nz, [row, 0])
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
        with pl.section_cube():
            eye_mat = pl.make_tile(tt([k, k], pl.DT_FP16, M.Mat), addr=0x0)
            left = pl.make_tile(tt([m, k], pl.DT_FP16, M.Left), addr=0x0)
            right = pl.make_tile(tt([k, k], pl.DT_FP16, M.Right), addr=0x0)
            acc = pl.make_tile(tt([m, k], pl.DT_FP32, M.Acc), addr=0x0)
            pl.load(eye_mat, eye, [0, 0])
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=0)
            pl.move(left, a_mat)
            pl.move(right, eye_mat)
            pl.system.bar_all()
            pl.matmul(acc, left, right)
            pl.system.bar_all()
            pl.store(out, acc, [0, 0])

    return kernel


@pytest.mark.parametrize("m, k, halves", [(32, 32, True), (32, 16, False)], ids=["square-both-aivs", "32x16"])
def test_an_nz_tile_inserted_into_a_zn_tile_lands_transposed(m, k, halves):
    a = torch.randn(m, k).half()
    out = torch.full((m, k), float("nan"))
    transposed_insert_kernel(m, k, halves)[None, 1](a.t().contiguous(), torch.eye(k).half(), out)
    sync()
    assert torch.equal(out, a.float())


@pl.jit(sanitizer=True)
def insert_unsynchronised(x: pl.Tensor[[16, 16], pl.DT_FP16], out: pl.Tensor[[32, 16], pl.DT_FP32],
                          eye: pl.Tensor[[16, 16], pl.DT_FP16]):
    """AIV 0 inserts into rows 16.. of the AIC's L1 while the AIC reads them: no cross-core flag."""
    v = pl.make_tile(tt([16, 16], pl.DT_FP16, layout=pl.NZ), addr=0)
    mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0)
    eye_mat = pl.make_tile(tt([16, 16], pl.DT_FP16, M.Mat), addr=0x4000)
    left = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Left), addr=0)
    right = pl.make_tile(tt([16, 16], pl.DT_FP16, M.Right), addr=0)
    acc = pl.make_tile(tt([32, 16], pl.DT_FP32, M.Acc), addr=0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(v, x, [0, 0])
            pl.system.bar_all()
            pl.insert(mat, v, [16, 0])  # RACE
    with pl.section_cube():
        pl.load(eye_mat, eye, [0, 0])
        pl.system.bar_all()
        pl.move(left, mat)
        pl.move(right, eye_mat)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.store(out, acc, [0, 0])


def test_sanitizer_finds_an_insert_the_aic_does_not_wait_for():
    out = torch.zeros(32, 16)
    insert_unsynchronised[None, 1](torch.randn(16, 16).half(), out, torch.eye(16).half())
    with pytest.raises(errors.SanitizerError) as info:
        sync()
    text = str(info.value)
    assert "PIPE_RACE" in text and "insert" in text and "AIC" in text, text


# ---- the fixpipe's options ----

def cube_product(a, b, left, right, a_mat, b_mat, acc):
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    pl.system.bar_all()
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    pl.system.bar_all()
    pl.matmul(acc, left, right)
    pl.system.bar_all()


def fixpipe_store(out_dtype, relu_pre_mode=None, scale=None):
    @pl.jit(name="fixpipe_store")
    def kernel(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 16], pl.DT_FP16],
               c: pl.Tensor[[16, 16], out_dtype]):
        a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
        b_mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0x1000)
        left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
        right = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Right), addr=0)
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        with pl.section_cube():
            cube_product(a, b, left, right, a_mat, b_mat, acc)
            pl.store(c, acc, [0, 0], relu_pre_mode=relu_pre_mode, scale=scale)
    return kernel


def int8_reference(x):
    return torch.clamp(torch.round(x), -128, 127).to(torch.int8)  # torch.round: half to even


@pytest.mark.parametrize("case", ["relu", "scale_fp16", "relu_scale_bf16", "quant_int8"])
def test_store_from_acc_applies_relu_then_scale_then_converts(case):
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(16, 32, generator=gen).half(), torch.randn(32, 16, generator=gen).half()
    prod = a.float() @ b.float()
    relu = pl.ReluPreMode.NormalRelu
    if case == "relu":
        kernel, c, ref = fixpipe_store(pl.DT_FP32, relu_pre_mode=relu), torch.zeros(16, 16), prod.clamp(min=0)
    elif case == "scale_fp16":
        kernel, c, ref = fixpipe_store(pl.DT_FP16, scale=0.25), torch.zeros(16, 16).half(), (prod * 0.25).half()
    elif case == "relu_scale_bf16":
        kernel = fixpipe_store(pl.DT_BF16, relu_pre_mode=relu, scale=3.0)
        c, ref = torch.zeros(16, 16).bfloat16(), (prod.clamp(min=0) * 3.0).bfloat16()
    else:
        kernel, c, ref = fixpipe_store(pl.DT_INT8, scale=20.0), torch.zeros(16, 16, dtype=torch.int8), \
            int8_reference(prod * 20.0)
    kernel[None, 1](a, b, c)
    sync()
    if case == "quant_int8":
        assert (c.int() - ref.int()).abs().max() <= 1  # fp16 products summed in another order may round across .5
    else:
        torch.testing.assert_close(c.float(), ref.float(), rtol=1e-2 if case != "relu" else 1e-5, atol=1e-3)


@pl.jit
def int8_dequant(a: pl.Tensor[[16, 32], pl.DT_INT8], b: pl.Tensor[[32, 16], pl.DT_INT8],
                 c: pl.Tensor[[16, 16], pl.DT_FP16]):
    a_mat = pl.make_tile(tt([16, 32], pl.DT_INT8, M.Mat), addr=0)
    b_mat = pl.make_tile(tt([32, 16], pl.DT_INT8, M.Mat), addr=0x1000)
    left = pl.make_tile(tt([16, 32], pl.DT_INT8, M.Left), addr=0)
    right = pl.make_tile(tt([32, 16], pl.DT_INT8, M.Right), addr=0)
    acc = pl.make_tile(tt([16, 16], pl.DT_INT32, M.Acc), addr=0)
    with pl.section_cube():
        cube_product(a, b, left, right, a_mat, b_mat, acc)
        pl.store(c, acc, [0, 0], scale=0.0078125)  # int32 x 2^-7 -> fp16


def test_int32_accumulator_dequantises_to_fp16_with_scale():
    a = torch.randint(-128, 128, (16, 32), dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 16), dtype=torch.int8)
    c = torch.zeros(16, 16).half()
    int8_dequant[None, 1](a, b, c)
    sync()
    ref = (a.int() @ b.int()).double() * 0.0078125
    torch.testing.assert_close(c.double(), ref.half().double(), rtol=0, atol=0)


@pl.jit
def relu_scaled_move(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 16], pl.DT_FP16],
                     out: pl.Tensor[[16, 16], pl.DT_FP16]):
    a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
    b_mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0x1000)
    left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
    right = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Right), addr=0)
    acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
    vec = pl.make_tile(tt([16, 16], pl.DT_FP16), addr=0)
    with pl.section_cube():
        cube_product(a, b, left, right, a_mat, b_mat, acc)
        pl.move(vec, acc, scale=2.0, relu_pre_mode=pl.ReluPreMode.NormalRelu,
                acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, vec, [0, 0])


def test_acc_to_vec_move_applies_relu_and_scale():
    a, b = torch.randn(16, 32).half(), torch.randn(32, 16).half()
    out = torch.zeros(16, 16).half()
    relu_scaled_move[None, 1](a, b, out)
    sync()
    torch.testing.assert_close(out.float(), ((a.float() @ b.float()).clamp(min=0) * 2).half().float(),
                               rtol=1e-3, atol=1e-3)


# ---- atomic=AtomicAdd from many blocks ----

@pl.jit
def atomic_rows(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
    t = pl.make_tile(tt([16, 64], pl.DT_FP32), addr=0)
    for i in pl.range(pl.get_block_idx(), x.shape[0] // 16, pl.get_block_num()):
        pl.load(t, x, [i * 16, 0])
        pl.system.bar_all()
        pl.store(out, t, [0, 0], atomic=pl.AtomicType.AtomicAdd)
        pl.system.bar_all()


@pytest.mark.parametrize("block_dim", [1, 8])
def test_atomic_add_sums_the_tiles_of_every_block(block_dim):
    gen = torch.Generator().manual_seed(7)
    x = torch.randint(-8, 8, (16 * 40, 64), generator=gen).float()  # exact sums in any order
    out = torch.ones(16, 64)
    atomic_rows[None, block_dim](x, out)
    sync()
    assert torch.equal(out, 1 + x.view(40, 16, 64).sum(0))


@pl.jit
def atomic_from_acc(a: pl.Tensor[[pl.DYNAMIC, 16, 32], pl.DT_FP16], b: pl.Tensor[[32, 16], pl.DT_FP16],
                    c: pl.Tensor[[16, 16], pl.DT_FP32]):
    a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
    b_mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0x1000)
    left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
    right = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Right), addr=0)
    acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
    with pl.section_cube():
        pl.load(b_mat, b, [0, 0])
        for i in pl.range(pl.get_block_idx(), a.shape[0], pl.get_block_num()):
            pl.load(a_mat, a, [i, 0, 0])
            pl.system.bar_all()
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            pl.system.bar_all()
            pl.matmul(acc, left, right)
            pl.system.bar_all()
            pl.store(c, acc, [0, 0], atomic=pl.AtomicType.AtomicAdd)
            pl.system.bar_all()


def test_atomic_add_from_the_fixpipe_of_many_blocks():
    a = torch.randint(-2, 3, (24, 16, 32)).half()
    b = torch.randint(-2, 3, (32, 16)).half()
    c = torch.zeros(16, 16)
    atomic_from_acc[None, 6](a, b, c)
    sync()
    assert torch.equal(c, (a.float() @ b.float()).sum(0))


# ---- order= on stores: the tile's rows and columns along any two ascending axes of up to 8 ----

@pl.jit
def store_4d(x: pl.Tensor[[16, 32], pl.DT_FP32], out: pl.Tensor[[2, 16, 3, 32], pl.DT_FP32]):
    t = pl.make_tile(tt([16, 32], pl.DT_FP32), addr=0)
    pl.load(t, x, [0, 0])
    pl.system.bar_all()
    pl.store(out, t, [1, 0, 2, 0], order=[1, 3])


@pl.jit
def store_8d(x: pl.Tensor[[4, 8], pl.DT_FP32], out: pl.Tensor[[2, 4, 1, 2, 1, 3, 8, 1], pl.DT_FP32]):
    t = pl.make_tile(tt([4, 8], pl.DT_FP32), addr=0)
    pl.load(t, x, [0, 0])
    pl.system.bar_all()
    pl.store(out, t, [1, 0, 0, 1, 0, 2, 0, 0], order=[1, 6])


def test_store_order_places_the_tile_along_the_chosen_axes():
    x = torch.randn(16, 32)
    out = torch.zeros(2, 16, 3, 32)
    store_4d[None, 1](x, out)
    x8 = torch.randn(4, 8)
    out8 = torch.zeros(2, 4, 1, 2, 1, 3, 8, 1)
    store_8d[None, 1](x8, out8)
    sync()
    ref = torch.zeros(2, 16, 3, 32)
    ref[1, :, 2, :] = x
    assert torch.equal(out, ref)
    ref8 = torch.zeros(2, 4, 1, 2, 1, 3, 8, 1)
    ref8[1, :, 0, 1, 0, 2, :, 0] = x8
    assert torch.equal(out8, ref8)


# ---- what is refused, at its line ----

def expect_error(body, exc_type, message, *args):
    with pytest.raises(exc_type) as info:
        pl.jit(body)[None, 1](*(args or (torch.zeros(16, 16),)))
    assert message in info.value.message, info.value.message


def test_misused_offsets_and_fixpipe_options_are_located_errors():
    def offset_rank(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        a = pl.make_tile(tt([16, 16], pl.DT_FP32), addr=0)
        b = pl.make_tile(tt([8, 8], pl.DT_FP32), addr=0x1000)
        pl.move(b, a, [1, 2, 3])

    expect_error(offset_rank, errors.ParserTypeError, "pl.move: offset needs [row, col], got 3 entries")

    def neither(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        a = pl.make_tile(tt([16, 32], pl.DT_FP32), addr=0)
        b = pl.make_tile(tt([32, 16], pl.DT_FP32), addr=0x1000)
        pl.move(b, a, [0, 0])

    expect_error(neither, errors.ParserTypeError,
                 "with offset=, the source is either at least the destination in both dims (extract; transposed "
                 "between NZ and ZN tiles) or fits inside it (insert, without fixpipe options): 'src_tile' is "
                 "[16, 32] and 'dst_tile' is [32, 16]")

    def relu_from_vec(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(tt([16, 16], pl.DT_FP32), addr=0)
        pl.store(c, t, [0, 0], relu_pre_mode=pl.ReluPreMode.NormalRelu)

    expect_error(relu_from_vec, errors.ParserValueError,
                 "pl.store: relu_pre_mode= is applied by the fixpipe, which only stores from Acc tiles")

    def scale_from_vec(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(tt([16, 16], pl.DT_FP32), addr=0)
        pl.store(c, t, [0, 0], scale=2.0)

    expect_error(scale_from_vec, errors.ParserValueError, "pl.store: scale= is applied by the fixpipe")

    def atomic_bool(c: pl.Tensor[[16, 16], pl.DT_BOOL]):
        t = pl.make_tile(tt([16, 16], pl.DT_BOOL), addr=0)
        pl.store(c, t, [0, 0], atomic=pl.AtomicType.AtomicAdd)

    expect_error(atomic_bool, errors.ParserTypeError, "atomic=AtomicAdd accumulates fp32, fp16, bf16, int32, int16 "
                 "or int8 tensors, not bool", torch.zeros(16, 16, dtype=torch.bool))

    def descending(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(tt([16, 16], pl.DT_FP32), addr=0)
        pl.store(c, t, [0, 0], order=[1, 0])

    expect_error(descending, errors.ParserValueError, "order= must name the axes in ascending order on a store")

    def quant_without_scale(c: pl.Tensor[[16, 16], pl.DT_INT8]):
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        with pl.section_cube():
            pl.store(c, acc, [0, 0])

    expect_error(quant_without_scale, errors.ParserTypeError,
                 "an fp32 Acc tile writes int8 only with scale=", torch.zeros(16, 16, dtype=torch.int8))

    def nan_scale(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        with pl.section_cube():
            pl.store(c, acc, [0, 0], scale=float("inf"))

    expect_error(nan_scale, errors.ParserValueError, "scale must be a finite number")

    def transposed_from_acc(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        acc = pl.make_tile(tt([16, 64], pl.DT_FP32, M.Acc, layout=pl.NZ), addr=0)
        v = pl.make_tile(tt([32, 16], pl.DT_FP32, layout=pl.ZN), addr=0)
        with pl.section_cube():
            pl.move(v, acc, [0, 0])
        with pl.section_vector():
            pass

    expect_error(transposed_from_acc, errors.UnsupportedFeatureError,
                 "a transposing offset= move from Acc is not implemented yet")


# ---- phase=: the unit-flag handshake between the cube and the fixpipe ----

TILE_K = 64


def k_split(name, first, middle, last, store_phase, sanitizer=False):
    """C = A @ B with K split in TILE_K blocks accumulated in one L0C tile (auto_mutex, K loop as the
    public tutorial writes it); the phases of the first, middle and last matmuls and of the store."""
    @pl.jit(name=name, auto_mutex=True, sanitizer=sanitizer)
    def kernel(a: pl.Tensor[[32, pl.STATIC], pl.DT_FP16], b: pl.Tensor[[pl.STATIC, 32], pl.DT_FP16],
               c: pl.Tensor[[32, 32], pl.DT_FP32]):
        a_l1 = pl.make_tile_group(type=tt([32, TILE_K], pl.DT_FP16, M.Mat), addrs=[0x0, 0x1000], mutex_ids=[0, 1])
        b_l1 = pl.make_tile_group(type=tt([TILE_K, 32], pl.DT_FP16, M.Mat), addrs=[0x2000, 0x3000],
                                  mutex_ids=[2, 3])
        a_l0 = pl.make_tile_group(type=tt([32, TILE_K], pl.DT_FP16, M.Left), addrs=[0x0, 0x1000], mutex_ids=[4, 5])
        b_l0 = pl.make_tile_group(type=tt([TILE_K, 32], pl.DT_FP16, M.Right), addrs=[0x0, 0x1000], mutex_ids=[6, 7])
        acc = pl.make_tile_group(type=tt([32, 32], pl.DT_FP32, M.Acc, fractal=1024), addrs=0x0, mutex_ids=[8])
        with pl.section_cube():
            pl.system.set_mm_layout_transform(enabled=True)
            ac = acc.current()
            k_total = a.shape[1]
            for k in pl.range(0, k_total, TILE_K):
                cur_a, cur_b, al, br = a_l1.next(), b_l1.next(), a_l0.next(), b_l0.next()
                pl.load(cur_a, a, [0, k])
                pl.load(cur_b, b, [k, 0])
                pl.move(al, cur_a)
                pl.move(br, cur_b)
                if k == 0:
                    pl.matmul(ac, al, br, phase=first)
                elif k < k_total - TILE_K:
                    pl.matmul_acc(ac, ac, al, br, phase=middle)
                else:
                    pl.matmul_acc(ac, ac, al, br, phase=last)
            pl.store(c, ac, [0, 0], phase=store_phase)
            pl.system.set_mm_layout_transform(enabled=False)
    return kernel


P, F = pl.AccPhase.Partial, pl.AccPhase.Final


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
@pytest.mark.parametrize("k", [128, 256])
def test_k_split_accumulation_with_phase(k, sanitizer):
    gen = torch.Generator().manual_seed(k)
    a, b = torch.randn(32, k, generator=gen).half(), torch.randn(k, 32, generator=gen).half()
    c = torch.zeros(32, 32)
    k_split("k_split_ok", P, P, F, pl.STPhase.Final, sanitizer)[None, 1](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-3)


def test_a_store_waiting_for_a_final_matmul_that_never_comes_hangs_as_on_the_npu():
    a, b = torch.randn(32, 128).half(), torch.randn(128, 32).half()
    k_split("k_split_no_final", P, P, P, pl.STPhase.Final)[None, 1](a, b, torch.zeros(32, 32))
    with pytest.raises(errors.KernelFault) as info:
        sync()
    text = str(info.value)
    assert "in pl.store: phase=: the fixpipe waits for the unit flag to be set by a matmul with " \
           "phase=pl.AccPhase.Final, and none came since the last Final store; this hangs on the NPU" in text


def test_a_matmul_after_a_partial_store_hangs_as_on_the_npu():
    @pl.jit
    def final_then_partial(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 16], pl.DT_FP16],
                           c: pl.Tensor[[16, 16], pl.DT_FP32]):
        a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
        b_mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0x1000)
        left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
        right = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Right), addr=0)
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        with pl.section_cube():
            pl.load(a_mat, a, [0, 0])
            pl.load(b_mat, b, [0, 0])
            pl.system.bar_all()
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            pl.system.bar_all()
            for i in pl.range(2):
                pl.matmul(acc, left, right, phase=pl.AccPhase.Final)  # HANG on the second trip
                pl.store(c, acc, [0, 0], phase=pl.STPhase.Partial)

    final_then_partial[None, 1](torch.randn(16, 32).half(), torch.randn(32, 16).half(), torch.zeros(16, 16))
    with pytest.raises(errors.KernelFault) as info:
        sync()
    assert "in pl.matmul: phase=: the cube waits for the unit flag to be cleared" in str(info.value)


def test_sanitizer_finds_a_store_without_phase_after_phased_matmuls():
    """The tutorial's second wrong case: the matmuls hand over through the unit flag, the store does
    not wait for it and auto_mutex inserts no cube/fixpipe sync for phase= ops: the store races."""
    a, b = torch.randn(32, 128).half(), torch.randn(128, 32).half()
    k_split("k_split_store_without_phase", P, P, F, None, sanitizer=True)[None, 1](a, b, torch.zeros(32, 32))
    with pytest.raises(errors.SanitizerError) as info:
        sync()
    text = str(info.value)
    assert "PIPE_RACE" in text and "FIX" in text and "M" in text, text


def test_phase_on_a_vec_store_is_refused():
    def vec_phase(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(tt([16, 16], pl.DT_FP32), addr=0)
        pl.store(c, t, [0, 0], phase=pl.STPhase.Final)

    expect_error(vec_phase, errors.ParserValueError,
                 "pl.store: phase= is the fixpipe's side of the unit-flag handshake with the cube")


# ---- per-channel quantisation: scale= a Scaling tile ----

@pl.jit
def per_channel_int8(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 32], pl.DT_FP16],
                     deq: pl.Tensor[[1, 32], pl.DT_INT64], c: pl.Tensor[[16, 32], pl.DT_INT8], rows: pl.DT_INT32):
    a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
    b_mat = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Mat), addr=0x1000)
    deq_mat = pl.make_tile(tt([1, 32], pl.DT_INT64, M.Mat), addr=0x4000)
    left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
    right = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Right), addr=0)
    acc = pl.make_tile(tt([16, 32], pl.DT_FP32, M.Acc, valid_shape=[-1, -1], compact=1), addr=0)
    factors = pl.make_tile(tt([1, 32], pl.DT_INT64, M.Scaling), addr=0)
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.load(deq_mat, deq, [0, 0])
        pl.system.bar_all()
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.move(factors, deq_mat)  # L1 -> the fixpipe's Scaling buffer (pipe FIX)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.set_validshape(acc, [rows, 32])
        pl.store(c, acc, [0, 0], scale=factors)


def test_per_channel_scale_quantises_each_column_with_its_factor():
    import struct
    gen = torch.Generator().manual_seed(11)
    a, b = torch.randn(16, 32, generator=gen).half(), torch.randn(32, 32, generator=gen).half()
    per_col = torch.linspace(0.5, 20.0, 32)
    deq = torch.tensor([[struct.unpack("<I", struct.pack("<f", float(f)))[0] for f in per_col]], dtype=torch.int64)
    c = torch.full((16, 32), 99, dtype=torch.int8)
    per_channel_int8[None, 1](a, b, deq, c, 13)  # a 13-row tail
    sync()
    ref = int8_reference((a.float() @ b.float()) * per_col)
    assert (c[:13].int() - ref[:13].int()).abs().max() <= 1
    assert torch.all(c[13:] == 99)  # outside the window: untouched


def test_per_channel_scale_misuse_is_refused():
    def with_relu(c: pl.Tensor[[16, 16], pl.DT_INT8]):
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        factors = pl.make_tile(tt([1, 16], pl.DT_INT64, M.Scaling), addr=0)
        with pl.section_cube():
            pl.store(c, acc, [0, 0], scale=factors, relu_pre_mode=pl.ReluPreMode.NormalRelu)

    expect_error(with_relu, errors.ParserValueError, "scale=<Scaling tile> (per-channel) excludes relu_pre_mode=",
                 torch.zeros(16, 16, dtype=torch.int8))

    def dual_on_move(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        v = pl.make_tile(tt([16, 16], pl.DT_FP16), addr=0)
        factors = pl.make_tile(tt([1, 16], pl.DT_INT64, M.Scaling), addr=0)
        with pl.section_cube():
            pl.move(v, acc, scale=factors, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
        with pl.section_vector():
            pass

    expect_error(dual_on_move, errors.ParserValueError, "takes a single-AIV acc_to_vec_mode (SingleModeVec0/1)")

    def bad_shape(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        m = pl.make_tile(tt([1, 24], pl.DT_INT64, M.Mat), addr=0)
        factors = pl.make_tile(tt([1, 24], pl.DT_INT64, M.Scaling), addr=0)
        with pl.section_cube():
            pl.move(factors, m)

    expect_error(bad_shape, errors.ParserTypeError, "a Scaling tile is [1, N] with N a multiple of 16 up to 512")


# ---- a run-time scale=: an fp32 scalar, or an integer carrying the fp32 bit pattern ----

def runtime_scaled(scale_dtype):
    @pl.jit(name=f"runtime_scaled_{scale_dtype.name}")
    def kernel(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 16], pl.DT_FP16],
               c: pl.Tensor[[16, 16], pl.DT_INT8], s: scale_dtype):
        a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
        b_mat = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Mat), addr=0x1000)
        left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
        right = pl.make_tile(tt([32, 16], pl.DT_FP16, M.Right), addr=0)
        acc = pl.make_tile(tt([16, 16], pl.DT_FP32, M.Acc), addr=0)
        with pl.section_cube():
            cube_product(a, b, left, right, a_mat, b_mat, acc)
            pl.store_tile(c, acc, [0, 0], scale=s)
    return kernel


@pytest.mark.parametrize("as_bits", [False, True], ids=["fp32", "int32_bits"])
def test_a_run_time_scale_quantises_like_a_constant_one(as_bits):
    import struct
    gen = torch.Generator().manual_seed(13)
    a, b = torch.randn(16, 32, generator=gen).half(), torch.randn(32, 16, generator=gen).half()
    c = torch.zeros(16, 16, dtype=torch.int8)
    factor = 12.5
    if as_bits:
        runtime_scaled(pl.DT_INT32)[None, 1](a, b, c, struct.unpack("<i", struct.pack("<f", factor))[0])
    else:
        runtime_scaled(pl.DT_FP32)[None, 1](a, b, c, factor)
    sync()
    assert (c.int() - int8_reference((a.float() @ b.float()) * factor).int()).abs().max() <= 1


def test_a_run_time_scale_of_another_dtype_is_refused():
    with pytest.raises(errors.ParserTypeError, match="a run-time scale= is an fp32 scalar .* not int16"):
        runtime_scaled(pl.DT_INT16)[None, 1](torch.zeros(16, 32).half(), torch.zeros(32, 16).half(),
                                             torch.zeros(16, 16, dtype=torch.int8), 3)


@pl.jit
def scaled_moves(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, 32], pl.DT_FP16],
                 deq: pl.Tensor[[1, 32], pl.DT_INT64], out: pl.Tensor[[2, 16, 32], pl.DT_INT8], s: pl.DT_FP32):
    """AIV 0 receives the product quantised per channel, AIV 1 with a run-time factor."""
    v = pl.make_tile(tt([16, 32], pl.DT_INT8), addr=0)
    with pl.section_cube():
        a_mat = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Mat), addr=0)
        b_mat = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Mat), addr=0x1000)
        deq_mat = pl.make_tile(tt([1, 32], pl.DT_INT64, M.Mat), addr=0x4000)
        left = pl.make_tile(tt([16, 32], pl.DT_FP16, M.Left), addr=0)
        right = pl.make_tile(tt([32, 32], pl.DT_FP16, M.Right), addr=0)
        acc = pl.make_tile(tt([16, 32], pl.DT_FP32, M.Acc), addr=0)
        factors = pl.make_tile(tt([1, 32], pl.DT_INT64, M.Scaling), addr=0)
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.load(deq_mat, deq, [0, 0])
        pl.system.bar_all()
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.move(factors, deq_mat)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.move(v, acc, scale=factors, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)
        pl.move(v, acc, scale=s, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec1)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, v, [pl.get_subblock_idx(), 0, 0])


def test_acc_to_vec_moves_with_per_channel_and_run_time_scales():
    import struct
    gen = torch.Generator().manual_seed(17)
    a, b = torch.randn(16, 32, generator=gen).half(), torch.randn(32, 32, generator=gen).half()
    per_col = torch.linspace(1.0, 16.0, 32)
    deq = torch.tensor([[struct.unpack("<I", struct.pack("<f", float(f)))[0] for f in per_col]], dtype=torch.int64)
    out = torch.zeros(2, 16, 32, dtype=torch.int8)
    scaled_moves[None, 1](a, b, deq, out, 9.0)
    sync()
    prod = a.float() @ b.float()
    assert (out[0].int() - int8_reference(prod * per_col).int()).abs().max() <= 1
    assert (out[1].int() - int8_reference(prod * 9.0).int()).abs().max() <= 1

"""Cube kernels: matmul / matmul_acc / bias against torch, moves between tiles, stores from Acc, the
matmul example at several shapes and block_dims, and the located errors of misuse."""


import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors
from kernels import line_of, load_example

M = pl.MemorySpace
TORCH = {pl.DT_FP16: torch.float16, pl.DT_BF16: torch.bfloat16, pl.DT_FP32: torch.float32, pl.DT_INT8: torch.int8,
         pl.DT_INT32: torch.int32}


def sync():
    pypto_pro.runtime.synchronize()


def acc_dtype(dtype):
    return pl.DT_INT32 if dtype is pl.DT_INT8 else pl.DT_FP32


def random(shape, dtype, gen, large=False):
    if dtype is pl.DT_INT8:
        low, high = (-128, -99) if large else (-128, 128)
        return torch.randint(low, high, shape, generator=gen, dtype=torch.int8)
    return torch.randn(shape, generator=gen).to(TORCH[dtype])


def reference(a, b):
    """What the cube computes: fp16/bf16/fp32 products summed in fp32, int8 ones exactly."""
    if a.dtype == torch.int8:
        return torch.from_numpy(a.numpy().astype(np.int64) @ b.numpy().astype(np.int64))
    return a.float() @ b.float()


def check(out, ref, dtype):
    if dtype is pl.DT_INT8:
        assert out.dtype == torch.int32
        assert torch.equal(out.long(), ref), (out.long() - ref).abs().max()
    else:
        tol = 1e-3 if dtype is pl.DT_FP32 else 1e-2
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def matmul_kernel(dtype, shape, valid=None, k_steps=1, bias=None):
    """C[:m, :n] = sum over k_steps of A[:m, k-th :k] x B[k-th :k, :n] (+ bias[:n], given
    "positional"-ly or by "keyword"), with
    tiles of `shape` = (M, K, N) whose valid windows are `valid` = (m, k, n). The first step is a
    matmul; the next ones accumulate in place, the last one into a second Acc tile."""
    tm, tk, tn = shape
    m, k, n = valid or shape
    acc_t = acc_dtype(dtype)

    # compact=1: a tail window of a fractal tile (the public load page requires it)
    def tail(shape, memory, valid, t=dtype):
        return pl.TileType(shape=shape, dtype=t, target_memory=memory, valid_shape=valid, compact=1)

    a_type, b_type = tail([tm, tk], M.Mat, [m, k]), tail([tk, tn], M.Mat, [k, n])
    left_type, right_type = tail([tm, tk], M.Left, [m, k]), tail([tk, tn], M.Right, [k, n])
    acc_type = tail([tm, tn], M.Acc, [m, n], acc_t)

    def kernel(a: pl.Tensor[[m, k * k_steps], dtype], b: pl.Tensor[[k * k_steps, n], dtype],
               bias_in: pl.Tensor[[1, tn], pl.DT_FP16], c: pl.Tensor[[m, n], acc_t]):
        a_mat = pl.make_tile(a_type, addr=0x0)
        b_mat = pl.make_tile(b_type, addr=0x20000)
        left = pl.make_tile(left_type, addr=0x0)
        right = pl.make_tile(right_type, addr=0x0)
        acc = pl.make_tile(acc_type, addr=0x0)
        acc2 = pl.make_tile(acc_type, addr=0x10000)
        bias_mat = pl.make_tile(pl.TileType(shape=[1, tn], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x40000)
        bias_l0 = pl.make_tile(pl.TileType(shape=[1, tn], dtype=pl.DT_FP32, target_memory=M.Bias), addr=0x0)
        with pl.section_cube():
            for step in pl.range(k_steps):
                pl.load(a_mat, a, [0, step * k])
                pl.load(b_mat, b, [step * k, 0])
                pl.move(left, a_mat)
                pl.move(right, b_mat)
                if step == 0:
                    if bias == "positional":
                        pl.load(bias_mat, bias_in, [0, 0])
                        pl.move(bias_l0, bias_mat)        # fp16 -> fp32 on the way into the bias table
                        pl.matmul(acc, left, right, bias_l0)
                    elif bias == "keyword":
                        pl.load(bias_mat, bias_in, [0, 0])
                        pl.move(bias_l0, bias_mat)
                        pl.matmul(acc, left, right, bias=bias_l0)
                    else:
                        pl.matmul(acc, left, right)
                elif step < k_steps - 1:
                    pl.matmul_acc(acc, acc, left, right)
                else:
                    pl.matmul_acc(acc2, acc, left, right)
            if k_steps > 1:
                pl.store(c, acc2, [0, 0])
            else:
                pl.store(c, acc, [0, 0])

    return pl.jit(kernel, name=f"mm_{dtype.name}_{tm}x{tk}x{tn}_{m}x{k}x{n}_{k_steps}{'_' + bias if bias else ''}")


def run_matmul(dtype, shape, valid=None, k_steps=1, bias=None, seed=0):
    m, k, n = valid or shape
    gen = torch.Generator().manual_seed(seed)
    a = random((m, k * k_steps), dtype, gen, large=k_steps > 1)
    b = random((k * k_steps, n), dtype, gen, large=k_steps > 1)
    bias_in = torch.randn(1, shape[2], generator=gen).half()
    c = torch.full((m, n), -7, dtype=TORCH[acc_dtype(dtype)])
    matmul_kernel(dtype, shape, valid, k_steps, bias)[None, 1](a, b, bias_in, c)
    sync()
    ref = reference(a, b)
    if bias:
        ref = ref + bias_in[:, :n].float()
    return c, ref


DTYPES = [pl.DT_FP16, pl.DT_BF16, pl.DT_FP32, pl.DT_INT8]
IDS = lambda v: getattr(v, "name", str(v))  # noqa: E731


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape, valid", [((128, 128, 128), None), ((48, 64, 80), (37, 50, 71))],
                         ids=["full", "tails"])
def test_matmul_matches_torch(dtype, shape, valid):
    c, ref = run_matmul(dtype, shape, valid)
    check(c, ref, dtype)


@pytest.mark.parametrize("dtype", [pl.DT_FP16, pl.DT_BF16, pl.DT_INT8], ids=IDS)
def test_matmul_acc_accumulates_k_blocks(dtype):
    # int8: K = 3 x 512 products of -128..-100 sum past 2^24, where fp32 stops holding every integer.
    shape = (32, 512, 48) if dtype is pl.DT_INT8 else (64, 96, 32)
    c, ref = run_matmul(dtype, shape, k_steps=3)
    check(c, ref, dtype)
    if dtype is pl.DT_INT8:
        assert ref.min() > 2 ** 24 and (ref % 2 == 1).any()


@pytest.mark.parametrize("bias", ["positional", "keyword"])
def test_matmul_bias_moves_fp16_into_the_bias_table(bias):
    c, ref = run_matmul(pl.DT_FP16, (64, 32, 48), (61, 32, 40), bias=bias)
    check(c, ref, pl.DT_FP16)


def test_bias_given_twice_is_refused():
    lt, rt, at = tiles()

    def body(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l, r, acc = pl.make_tile(lt, addr=0), pl.make_tile(rt, addr=0), pl.make_tile(at, addr=0)
        bias = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32, target_memory=M.Bias), addr=0)
        with pl.section_cube():
            pl.matmul(acc, l, r, bias, bias=bias)

    expect_error(body, errors.ParserTypeError, "pl.matmul(acc, l, r, bias, bias=bias)",
                 "pl.matmul() got 'bias' twice")


# ---- stores from Acc: the fixpipe converts fp32 to fp16/bf16 ----

@pytest.mark.parametrize("out_dtype", [pl.DT_FP16, pl.DT_BF16], ids=IDS)
def test_store_from_acc_converts(out_dtype):
    def kernel(a: pl.Tensor[[32, 64], pl.DT_FP16], b: pl.Tensor[[64, 48], pl.DT_FP16],
               c: pl.Tensor[[32, 48], out_dtype]):
        am = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0)
        bm = pl.make_tile(pl.TileType(shape=[64, 48], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x8000)
        l = pl.make_tile(pl.TileType(shape=[32, 64], dtype=pl.DT_FP16, target_memory=M.Left), addr=0)
        r = pl.make_tile(pl.TileType(shape=[64, 48], dtype=pl.DT_FP16, target_memory=M.Right), addr=0)
        acc = pl.make_tile(pl.TileType(shape=[32, 48], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            pl.load(am, a, [0, 0])
            pl.load(bm, b, [0, 0])
            pl.move(l, am)
            pl.move(r, bm)
            pl.matmul(acc, l, r)
            pl.store_tile(c, acc, [0, 0])

    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(32, 64, generator=gen).half(), torch.randn(64, 48, generator=gen).half()
    c = torch.zeros(32, 48, dtype=TORCH[out_dtype])
    pl.jit(kernel, name=f"store_acc_{out_dtype.name}")[None, 1](a, b, c)
    sync()
    ref = a.float() @ b.float()
    # One rounding of the fp32 sum: equal to torch's rounding of its own fp32 sum within one ulp.
    torch.testing.assert_close(c.float(), ref.to(TORCH[out_dtype]).float(), rtol=1e-2, atol=1e-2)
    assert (c.float() != ref).any()  # really rounded, not fp32 bits reinterpreted


# ---- moves between Vec and Mat (vector core), Vec -> Vec ----

def test_move_vec_to_mat_and_back():
    def kernel(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32],
               z: pl.Tensor[[64, 64], pl.DT_FP32]):
        v_in = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
        v_out = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0x4000)
        v_copy = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, valid_shape=[40, 24]), addr=0x8000)
        v_nz = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, layout=pl.NZ), addr=0xC000)
        mat = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Mat), addr=0x100)
        with pl.section_vector():
            pl.load(v_in, x, [0, 0])
            pl.move(v_nz, v_in)       # ND -> NZ in UB (V)
            pl.move(mat, v_nz)        # UB -> L1 (MTE3)
            pl.move(v_out, mat)       # L1 -> UB (V)
            pl.store(y, v_out, [0, 0])
            pl.load(v_copy, x, [8, 16])
            pl.move(v_out, v_copy)    # UB -> UB: the source's 40x24 window
            pl.store(z, v_out, [0, 0])

    x = torch.randn(64, 64)
    y = torch.zeros(64, 64)
    z = torch.zeros(64, 64)
    pl.jit(kernel)[None, 1](x, y, z)
    sync()
    assert torch.equal(y, x)
    assert torch.equal(z[:40, :24], x[8:48, 16:40])
    assert torch.equal(z[40:], x[40:]) and torch.equal(z[:40, 24:], x[:40, 24:])  # the rest is the earlier copy


def test_move_acc_to_vec_runs_in_a_cube_kernel():
    """Acc -> Vec is the cube core's fixpipe writing UB; its numbers are checked in
    tests/cpp/test_cube_ops.cpp (reading UB back needs a mixed kernel)."""
    def kernel(c: pl.Tensor[[16, 32], pl.DT_FP32]):
        acc = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
        vec = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP16), addr=0)
        with pl.section_cube():
            pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)
            pl.store(c, acc, [0, 0])

    jit = pl.jit(kernel)
    jit[None, 1](torch.zeros(16, 32))
    sync()
    assert jit.cache_info()["compiles"] == 1


# ---- the example kernel ----

EXAMPLE = load_example("matmul")


@pytest.mark.parametrize("m, n", [(256, 256), (640, 384), (2048, 2048)])
@pytest.mark.parametrize("block_dim", [1, 7, 32, 48])
def test_example_matmul(m, n, block_dim):
    gen = torch.Generator().manual_seed(m + n)
    a = torch.randn(m, 128, generator=gen).half()
    b = torch.randn(128, n, generator=gen).half()
    c = torch.full((m, n), float("nan"))
    EXAMPLE.matmul_kernel[None, block_dim](a, b, c)
    sync()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    assert EXAMPLE.matmul_kernel.cache_info()["compiles"] == 1  # DYNAMIC dims: one instance for all


# ---- errors point at the offending line ----

def expect_error(body, exc_type, text, message):
    with pytest.raises(exc_type) as info:
        pl.jit(body)[None, 1](torch.zeros(16, 16))
    err = info.value
    assert isinstance(err, errors.CompilationError)
    assert message in err.message, err.message
    assert err.lineno == line_of(body, text), str(err)
    return err


def tiles(dtype=pl.DT_FP16, acc_t=pl.DT_FP32, k=16):
    left = pl.TileType(shape=[16, k], dtype=dtype, target_memory=M.Left)
    right = pl.TileType(shape=[k, 16], dtype=dtype, target_memory=M.Right)
    acc = pl.TileType(shape=[16, 16], dtype=acc_t, target_memory=M.Acc)
    return left, right, acc


def test_matmul_into_a_vec_tile_is_refused():
    lt, rt, _ = tiles()

    def body(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l, r = pl.make_tile(lt, addr=0), pl.make_tile(rt, addr=0)
        v = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_cube():
            pl.matmul(v, l, r)

    expect_error(body, errors.ParserTypeError, "pl.matmul(v, l, r)",
                 "pl.matmul operand 'dst_tile' must be a tile in Acc memory, got Tile[[16, 16], fp32, Vec]")


def test_k_mismatch_is_refused():
    lt, _, at = tiles(k=32)
    _, rt, _ = tiles(k=16)

    def body(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l, r, acc = pl.make_tile(lt, addr=0), pl.make_tile(rt, addr=0), pl.make_tile(at, addr=0)
        with pl.section_cube():
            pl.matmul(acc, l, r)

    expect_error(body, errors.ParserTypeError, "pl.matmul(acc, l, r)",
                 "pl.matmul: K mismatch: 'lhs_tile' is [16, 32] (K = 32) but 'rhs_tile' is [16, 16] (K = 16)")


def test_wrong_dtypes_are_refused():
    lt, rt, at = tiles(dtype=pl.DT_INT8, acc_t=pl.DT_FP32)

    def body(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l, r, acc = pl.make_tile(lt, addr=0), pl.make_tile(rt, addr=0), pl.make_tile(at, addr=0)
        with pl.section_cube():
            pl.matmul_acc(acc, acc, l, r)

    expect_error(body, errors.ParserTypeError, "pl.matmul_acc(acc, acc, l, r)",
                 "pl.matmul_acc: int8 inputs accumulate in int32, but 'dst_tile' is fp32")

    lt16, rt16, at16 = tiles(acc_t=pl.DT_FP16)

    def body16(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l, r, acc = pl.make_tile(lt16, addr=0), pl.make_tile(rt16, addr=0), pl.make_tile(at16, addr=0)
        with pl.section_cube():
            pl.matmul(acc, l, r)

    expect_error(body16, errors.ParserTypeError, "pl.matmul(acc, l, r)",
                 "pl.matmul operand 'dst_tile' has dtype fp16, which pl.matmul does not support there")

    def body_store(c: pl.Tensor[[16, 16], pl.DT_INT32]):
        acc = pl.make_tile(at, addr=0)
        with pl.section_cube():
            pl.store(c, acc, [0, 0])

    with pytest.raises(errors.ParserTypeError) as info:
        pl.jit(body_store)[None, 1](torch.zeros(16, 16, dtype=torch.int32))
    assert "an fp32 Acc tile is written as fp32, fp16 or bf16 (int8 with scale=), not int32" in info.value.message


def test_moves_check_path_dtype_shape_and_core():
    def no_path(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        l = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Left), addr=0)
        m = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0)
        with pl.section_cube():
            pl.move(m, l)

    expect_error(no_path, errors.ParserTypeError, "pl.move(m, l)",
                 "pl.move: there is no data path from Left to Mat")

    def acc_to_int8(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0)
        v = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_INT8), addr=0)
        with pl.section_cube():
            pl.move(v, acc)

    expect_error(acc_to_int8, errors.ParserTypeError, "pl.move(v, acc)",
                 "an fp32 Acc tile writes int8 only with scale=")

    def reshaping(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        m = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0)
        l = pl.make_tile(pl.TileType(shape=[32, 16], dtype=pl.DT_FP16, target_memory=M.Left), addr=0)
        with pl.section_cube():
            pl.move(l, m)

    expect_error(reshaping, errors.ParserTypeError, "pl.move(l, m)",
                 "a move out of Mat keeps the shape (or swaps it between NZ and ZN tiles, which transposes; offset= "
                 "extracts a part): 'src_tile' is [16, 32] and 'dst_tile' is [32, 16]")

    def nd_into_l1(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        m = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat), addr=0)
        v = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.insert(m, v, [0, 0])

    expect_error(nd_into_l1, errors.ParserTypeError, "pl.insert(m, v, [0, 0])",
                 "pl.insert: UB -> L1 copies the source's bytes as they are, so a NZ Mat tile takes an NZ Vec source; "
                 "'src_tile' is ND")

    def wrong_core(c: pl.Tensor[[16, 16], pl.DT_FP32]):
        m = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=M.Mat), addr=0)
        v = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, layout=pl.NZ), addr=0)
        with pl.section_cube():
            pl.move(m, v)

    expect_error(wrong_core, errors.ParserTypeError, "pl.move(m, v)",
                 "pl.move uses a move from Vec to Mat (pipe MTE3) inside pl.section_cube(); the move runs on the "
                 "vector core")


@pytest.mark.parametrize("dtype", [pl.DT_FP16, pl.DT_BF16, pl.DT_INT8], ids=IDS)
def test_portable_matmul_without_avx512(dtype, monkeypatch):
    """Hosts without AVX-512 (or F16C) get the portable paths of the GEMM routine and conversions."""
    monkeypatch.setenv("PYPTO_PRO_CXXFLAGS", "-mno-avx512f -mno-f16c")
    c, ref = run_matmul(dtype, (48, 64, 80), (37, 50, 71), seed=9)
    check(c, ref, dtype)


@pl.jit
def int8_matmul_bias(a: pl.Tensor[[16, 32], pl.DT_INT8], b: pl.Tensor[[32, 16], pl.DT_INT8],
                     bias_in: pl.Tensor[[1, 16], pl.DT_INT32], c: pl.Tensor[[16, 16], pl.DT_INT32]):
    M = pl.MemorySpace
    a_mat = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_INT8, target_memory=M.Mat), addr=0x0)
    b_mat = pl.make_tile(pl.TileType(shape=[32, 16], dtype=pl.DT_INT8, target_memory=M.Mat), addr=0x1000)
    bias_mat = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_INT32, target_memory=M.Mat), addr=0x2000)
    left = pl.make_tile(pl.TileType(shape=[16, 32], dtype=pl.DT_INT8, target_memory=M.Left), addr=0x0)
    right = pl.make_tile(pl.TileType(shape=[32, 16], dtype=pl.DT_INT8, target_memory=M.Right), addr=0x0)
    bias = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_INT32, target_memory=M.Bias), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_INT32, target_memory=M.Acc), addr=0x0)
    with pl.section_cube():
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.load(bias_mat, bias_in, [0, 0])
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.move(bias, bias_mat)
        pl.matmul(acc, left, right, bias=bias)
        pl.store(c, acc, [0, 0])


def test_int8_matmul_takes_an_int32_bias():
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (16, 32), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (32, 16), generator=gen, dtype=torch.int8)
    bias_in = torch.randint(-10000, 10000, (1, 16), generator=gen, dtype=torch.int32)
    c = torch.zeros(16, 16, dtype=torch.int32)
    int8_matmul_bias[None, 1](a, b, bias_in, c)
    sync()
    assert torch.equal(c, a.int() @ b.int() + bias_in)


def _acc_kernel(dtype, acc_dtype, m, k, n):
    def acc_twice(a: pl.Tensor[[m, k], dtype], b: pl.Tensor[[k, n], dtype], c: pl.Tensor[[m, n], acc_dtype]):
        """C = A B + A B (matmul, then matmul_acc in place), m, n, k not multiples of the AMX tiles."""
        M = pl.MemorySpace
        ta = pl.make_tile(pl.TileType(shape=[m, k], dtype=dtype, target_memory=M.Mat), addr=0x0)
        tb = pl.make_tile(pl.TileType(shape=[k, n], dtype=dtype, target_memory=M.Mat), addr=0x4000)
        tl = pl.make_tile(pl.TileType(shape=[m, k], dtype=dtype, target_memory=M.Left), addr=0x0)
        tr = pl.make_tile(pl.TileType(shape=[k, n], dtype=dtype, target_memory=M.Right), addr=0x0)
        tc = pl.make_tile(pl.TileType(shape=[m, n], dtype=acc_dtype, target_memory=M.Acc), addr=0x0)
        with pl.section_cube():
            pl.load(ta, a, [0, 0])
            pl.load(tb, b, [0, 0])
            pl.system.bar_all()
            pl.move(tl, ta)
            pl.move(tr, tb)
            pl.system.bar_all()
            pl.matmul(tc, tl, tr)
            pl.system.bar_all()
            pl.matmul_acc(tc, tc, tl, tr)
            pl.system.bar_all()
            pl.store(c, tc, [0, 0])
    return acc_twice


@pytest.mark.parametrize("flags", ["", "-mno-amx-tile -mno-amx-bf16 -mno-amx-int8",
                                   "-mno-amx-tile -mno-amx-bf16 -mno-amx-int8 -mno-avx512bf16"],
                         ids=["host", "no_amx", "fp32_path"])
def test_bf16_matmul_keeps_subnormal_inputs_and_products(monkeypatch, flags):
    """bf16 inputs are converted to fp32 exactly and their products summed in IEEE fp32 (docs/device.md
    #numerics), subnormals included, on every host: the host's bf16 dot products (AMX, vdpbf16ps)
    flush subnormals, so such matmuls leave them. Every other value is a multiple of 1/4 and every sum
    exact, so C = A B + A B must equal the exact result bit for bit."""
    m = k = n = 64
    monkeypatch.setenv("PYPTO_PRO_CXXFLAGS", flags)
    kernel = pl.jit(_acc_kernel(pl.DT_BF16, pl.DT_FP32, m, k, n), auto_mutex=False,
                    name="acc_bf16_subnormal_" + str(len(flags)))
    i, p, j = torch.arange(m)[:, None], torch.arange(k), torch.arange(n)
    base_a = (0.5 * ((i + 2 * p) % 5 - 2)).to(torch.bfloat16)
    base_b = (0.25 * ((3 * p[:, None] + j) % 7 - 3)).to(torch.bfloat16)
    base_a[:, 1] = 0
    base_a[40, :] = 0                  # row 40 (A's second block of 32 rows): one value, in column 1
    base_b[1, :] = 0
    cases = {
        "subnormal in A": ((40, 1, 2.0 ** -132), (1, slice(None), 2.0 ** 100)),
        "subnormal in B": ((40, 1, 2.0 ** 90), (1, 7, -3 * 2.0 ** -133)),
        "subnormal product": ((40, 1, 2.0 ** -70), (1, 7, -1.5 * 2.0 ** -70)),
    }
    for name, ((ar, ac, av), (br, bc, bv)) in cases.items():
        a, b = base_a.clone(), base_b.clone()
        a[ar, ac] = av
        b[br, bc] = bv
        c = torch.full((m, n), -1.0)
        kernel[None, 1](a, b, c)
        pypto_pro.runtime.synchronize()
        want = (2 * (a.double() @ b.double())).float()
        assert want[40, 7] != 0, name
        assert torch.equal(c, want), (name, c[40, 7].item(), want[40, 7].item())


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "int8"])
def test_matmul_on_the_amx_tiles_matches_the_vector_path(monkeypatch, dtype):
    """gemm.h runs bf16, fp16 (each value split exactly into two bf16) and int8 on the AMX tile unit
    where the host has it; with AMX switched off at compile time the vector path runs: fp sums agree
    to their order, int8 ones exactly."""
    if dtype in ("bf16", "fp16"):
        shape, pl_acc = (48, 80, 48), pl.DT_FP32
        pl_in, torch_in = (pl.DT_BF16, torch.bfloat16) if dtype == "bf16" else (pl.DT_FP16, torch.float16)
        a, b = torch.randn(48, 80).to(torch_in), torch.randn(80, 48).to(torch_in)
    else:
        shape, pl_in, pl_acc = (48, 96, 64), pl.DT_INT8, pl.DT_INT32
        a = torch.randint(-128, 128, (48, 96), dtype=torch.int8)
        b = torch.randint(-128, 128, (96, 64), dtype=torch.int8)
    m, k, n = shape
    results = []
    for flags in ("", "-mno-amx-tile -mno-amx-bf16 -mno-amx-int8"):
        monkeypatch.setenv("PYPTO_PRO_CXXFLAGS", flags)
        kernel = pl.jit(_acc_kernel(pl_in, pl_acc, m, k, n), auto_mutex=False,
                        name=f"acc_{dtype}" + ("_vector" if flags else ""))
        c = torch.empty(m, n, dtype=torch.int32 if dtype == "int8" else torch.float32)
        kernel[None, 1](a, b, c)
        pypto_pro.runtime.synchronize()
        results.append(c)
    if dtype == "int8":
        ref = 2 * (a.long() @ b.long())
        assert torch.equal(results[0].long(), ref) and torch.equal(results[1], results[0])
    else:
        ref = 2 * (a.double() @ b.double())
        for c in results:
            torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(results[0], results[1], rtol=1e-6, atol=1e-5)

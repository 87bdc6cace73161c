"""Run-time scalar features: bit operators, `in`, pl.constexpr, int32 -> int64 widening, early
returns from inlined helpers and annotated helper parameters (docs/language.md#control-flow)."""

import numpy as np
import pytest

import pypto_pro
import pypto_pro.language as pl

MODE = 1


def sync():
    pypto_pro.runtime.synchronize()


@pl.jit
def bits(out: pl.Tensor[[10], pl.DT_INT64], a: pl.DT_INT32, b: pl.DT_INT32, n: pl.DT_INT64):
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.setval(out, 0, a & b)
            pl.setval(out, 1, a | b)
            pl.setval(out, 2, a ^ b)
            pl.setval(out, 3, ~a)
            pl.setval(out, 4, a << b)
            pl.setval(out, 5, a >> b)
            pl.setval(out, 6, (a > 0) & (b > 0))
            pl.setval(out, 7, n << b)           # int64
            pl.setval(out, 8, (a & 0xFF) << 8 | b)
            pl.setval(out, 9, -n >> b)          # arithmetic


def _wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


@pytest.mark.parametrize("a, b, n", [(12, 3, 5_000_000_000), (-7, 5, -3), (0x7FFFFFFF, 1, 1 << 40)])
def test_bit_operators_on_run_time_integers(a, b, n):
    out = np.zeros(10, np.int64)
    bits[None, 1](out, a, b, n)
    sync()
    ref = [a & b, a | b, a ^ b, ~a, _wrap32(a << b), a >> b, int(a > 0 and b > 0), n << b,
           _wrap32((a & 0xFF) << 8 | b), -n >> b]
    np.testing.assert_array_equal(out, ref)


def test_shift_amount_outside_the_width_is_a_fault():
    out = np.zeros(10, np.int64)
    with pytest.raises(pypto_pro.KernelFault, match=r"shift amount 32 is outside \[0, 32\) for a 32-bit value"):
        bits[None, 1](out, 1, 32, 1)
        sync()


def test_bit_operator_errors():
    def float_operand(out: pl.Tensor[[4], pl.DT_INT32], x: pl.DT_FP32):
        pl.setval(out, 0, x & 1)

    with pytest.raises(pypto_pro.ParserTypeError, match="'&' takes integer operands, got fp32 and int32"):
        pl.jit(float_operand)[None, 1](np.zeros(4, np.int32), 1.0)

    def invert_bool(out: pl.Tensor[[4], pl.DT_INT32], x: pl.DT_INT32):
        pl.setval(out, 0, ~(x > 1))

    with pytest.raises(pypto_pro.ParserTypeError, match=r"'~' takes an integer operand, got bool \(use 'not'"):
        pl.jit(invert_bool)[None, 1](np.zeros(4, np.int32), 1)


@pl.jit
def membership_and_constexpr(out: pl.Tensor[[6], pl.DT_INT32], a: pl.DT_INT32, b: pl.DT_INT32):
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.setval(out, 0, a in (1, 5, 7))
            pl.setval(out, 1, a not in (1, 5, 7))
            pl.setval(out, 2, a in (b, b + 1))
            pl.setval(out, 3, 7 if pl.constexpr(MODE == 1) else 9)
            if pl.constexpr(MODE == 2):
                pl.setval(out, 4, 1)
            else:
                pl.setval(out, 4, 2)
            if a in ():
                pl.setval(out, 5, 99)


@pytest.mark.parametrize("a, b", [(5, 0), (3, 2), (8, 8)])
def test_in_and_constexpr(a, b):
    out = np.zeros(6, np.int32)
    membership_and_constexpr[None, 1](out, a, b)
    sync()
    np.testing.assert_array_equal(out, [a in (1, 5, 7), a not in (1, 5, 7), a in (b, b + 1), 7, 2, 0])


def test_constexpr_errors():
    def run_time(out: pl.Tensor[[4], pl.DT_INT32], a: pl.DT_INT32):
        if pl.constexpr(a > 1):
            pl.setval(out, 0, 1)

    with pytest.raises(pypto_pro.ParserSyntaxError,
                       match=r"pl.constexpr\(\) needs a compile-time condition, got a run-time bool scalar: a > 1"):
        pl.jit(run_time)[None, 1](np.zeros(4, np.int32), 1)

    def standalone(out: pl.Tensor[[4], pl.DT_INT32]):
        c = pl.constexpr(True)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="pl.constexpr\\(cond\\) can only be the condition of an 'if'"):
        pl.jit(standalone)[None, 1](np.zeros(4, np.int32))


@pl.jit
def widened(out: pl.Tensor[[2], pl.DT_INT64], n: pl.DT_INT64, m: pl.DT_INT32):
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            off = 0
            for i in pl.range(0, 3):
                off = off + n * i           # int32 first, then int64: off is int64 throughout
            acc = m
            for i in pl.range(0, 2):
                acc += n
            pl.setval(out, 0, off)
            pl.setval(out, 1, acc)


def test_int32_variable_widens_to_int64():
    out = np.zeros(2, np.int64)
    n = 3_000_000_000
    widened[None, 1](out, n, 5)
    sync()
    np.testing.assert_array_equal(out, [3 * n, 5 + 2 * n])


def test_parameters_keep_their_dtype():
    def narrow(out: pl.Tensor[[2], pl.DT_INT64], n: pl.DT_INT64, m: pl.DT_INT32):
        for i in pl.range(0, 2):
            m = m + n

    with pytest.raises(pypto_pro.ParserTypeError, match="'m' is int32 but this assigns a int64 value"):
        pl.jit(narrow)[None, 1](np.zeros(2, np.int64), 1, 1)


# ---- inlined helpers: early returns, annotations ----

def first_over(t, limit: pl.Scalar[pl.DT_INT32]):
    for i in pl.range(0, 16):
        if pl.getval(t, i) > limit:
            return i
    return -1


def clamp(x: pl.DT_INT32):
    if x < 0:
        return 0
    if x > 100:
        return 100
    return x


def pick_tile(a, b, first):
    if first:
        return a
    return b


def half(x: pl.DT_FP32):
    return x / 2


@pl.jit
def helpers(src: pl.Tensor[[1, 16], pl.DT_INT32], out: pl.Tensor[[4], pl.DT_INT32], y: pl.Tensor[[1, 16], pl.DT_INT32],
            a: pl.DT_INT32):
    tt = pl.TileType(shape=[1, 16], dtype=pl.DT_INT32)
    t = pl.make_tile(tt, addr=0)
    u = pl.make_tile(tt, addr=0x100)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.load(t, src, [0, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.S, event_id=0)
            pl.setval(out, 0, first_over(t, a))
            pl.setval(out, 1, clamp(a * 30))
            pl.setval(out, 2, half(3) * 2)          # 3 becomes 3.0: 1.5 * 2
            pl.system.sync_src(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.V, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.V, event_id=1)
            pl.adds(u, pick_tile(t, u, a > 3), 1)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
            pl.store(y, u, [0, 0])


@pytest.mark.parametrize("a", [5, -2, 20])
def test_helpers_return_early(a):
    src = np.arange(16, dtype=np.int32).reshape(1, 16) * 3
    out = np.zeros(4, np.int32)
    y = np.zeros((1, 16), np.int32)
    helpers[None, 1](src, out, y, a)
    sync()
    over = [i for i in range(16) if src[0, i] > a]
    np.testing.assert_array_equal(out[:3], [over[0] if over else -1, min(max(a * 30, 0), 100), 3])
    # u is uninitialised UB unless a > 3 picks t
    if a > 3:
        np.testing.assert_array_equal(y, src + 1)


def test_helper_annotation_errors():
    def wants_tile(t: pl.Tile[[16, 16], pl.DT_FP16]):
        return t

    def bad_tile(out: pl.Tensor[[4], pl.DT_INT32]):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_INT32), addr=0)
        wants_tile(t)

    with pytest.raises(pypto_pro.ParserTypeError,
                       match=r"argument 't' of wants_tile\(\) is annotated .*got a tile of shape \[1, 16\] and dtype"):
        pl.jit(bad_tile)[None, 1](np.zeros(4, np.int32))

    def mixed(x, flag):
        if flag > 0:
            return 1
        return x

    def mixed_kinds(out: pl.Tensor[[4], pl.DT_INT32], f: pl.DT_INT32):
        t = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_INT32), addr=0)
        v = mixed(t, f)

    with pytest.raises(pypto_pro.ParserTypeError, match="'mixed' returns tile 't' here but another type on another path"):
        pl.jit(mixed_kinds)[None, 1](np.zeros(4, np.int32), 1)


# ---- helpers from other modules: inlined, and located in their own file ----

from helper_module import exp_with_extra_argument, read_at, scaled_copy, ssbuf_round_trip  # noqa: E402


@pl.jit
def uses_module_helpers(x: pl.Tensor[[1, 16], pl.DT_FP32], y: pl.Tensor[[1, 16], pl.DT_FP32],
                        out: pl.Tensor[[2], pl.DT_FP32], i: pl.DT_INT32):
    tt = pl.TileType(shape=[1, 16], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0)
    b = pl.make_tile(tt, addr=0x100)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        f = scaled_copy(b, a, 3.0)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(y, b, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.S, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.S, event_id=1)
        pl.setval(out, 0, f)
        pl.setval(out, 1, read_at(b, i))


def test_helpers_from_another_module():
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    y = np.zeros_like(x)
    out = np.zeros(2, np.float32)
    uses_module_helpers[None, 1](x, y, out, 5)
    sync()
    np.testing.assert_allclose(y, 3 * x, rtol=0, atol=0)
    np.testing.assert_array_equal(out, [6.0, 15.0])


def test_a_fault_in_a_module_helper_names_its_file_and_line():
    x = np.zeros((1, 16), np.float32)
    with pytest.raises(pypto_pro.KernelFault, match=r"at .*helper_module.py:12 in pl.getval: element offset out of "
                                                    r"range") as info:
        uses_module_helpers[None, 1](x, np.zeros_like(x), np.zeros(2, np.float32), 40)
        sync()
    assert info.value.line == 12 and info.value.source_file.endswith("helper_module.py")


def test_compile_errors_in_a_module_helper_point_into_it():
    @pl.jit
    def calls_bad_helper(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[1, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            exp_with_extra_argument(a)

    with pytest.raises(pypto_pro.ParserTypeError, match=r"pl.exp\(out, src\) takes 2 arguments, got 3") as info:
        calls_bad_helper[None, 1](np.zeros((1, 16), np.float32))
    assert "helper_module.py:16" in str(info.value) and "pl.exp(t, t, 3)" in str(info.value)

    # a pass's diagnostic (no SSBUF on a3), raised after parsing
    def on_a3(x: pl.Tensor[[1, 16], pl.DT_FP32]):
        m = pl.struct("M", a=1)
        with pl.section_vector():
            ssbuf_round_trip(m)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.ssbuf_store: a3 has no SSBUF") as info:
        pl.jit(on_a3, arch="a3")[None, 1](np.zeros((1, 16), np.float32))
    assert "helper_module.py:20" in str(info.value) and "pl.ssbuf_store(m, 0)" in str(info.value)

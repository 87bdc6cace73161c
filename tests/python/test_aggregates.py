"""pl.struct, pl.struct_array, pl.make_tuple, run-time indices into lists, and run-time event / mutex
ids (docs/language.md#structs-and-tuples, #flags-mutexes-barriers)."""

import numpy as np
import pytest

import pypto_pro
import pypto_pro.language as pl


def sync():
    pypto_pro.runtime.synchronize()


# ---- the public make_tuple page's two kernels, unchanged ----

@pl.jit()
def tuple_scalar_kernel(
    out: pl.Tensor[[2], pl.DT_INT32],
):
    s = pl.struct("TScalar", a=11, b=22)
    with pl.section_vector():
        t = pl.make_tuple(first=s.a, second=s.b)
        pl.setval(out, 0, t.first + t.second)
        pl.setval(out, 1, t.second - t.first)


@pl.jit()
def tuple_in_loop_kernel(
    out: pl.Tensor[[1], pl.DT_INT32],
):
    acc = pl.struct("LoopT", v=0, cur=0)
    with pl.section_vector():
        for i in pl.range(0, 4):
            acc.cur = i
            t = pl.make_tuple(x=acc.cur, y=acc.cur * 10)
            acc.v = acc.v + t.x + t.y
        pl.setval(out, 0, acc.v)


def test_make_tuple_page_examples():
    out = np.zeros(2, np.int32)
    tuple_scalar_kernel[None, 1](out)
    sync()
    np.testing.assert_array_equal(out, [33, 11])
    out = np.zeros(1, np.int32)
    tuple_in_loop_kernel[None, 1](out)
    sync()
    assert out[0] == sum(i + 10 * i for i in range(4))


# ---- struct fields: dtypes, writes, aliases, tuples keep their values ----

@pl.jit
def struct_fields(out: pl.Tensor[[8], pl.DT_FP32], a: pl.DT_INT32, big: pl.DT_INT64):
    s = pl.struct("S", i=0, f=0.5, flag=False)
    alias = s
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            t = pl.make_tuple(before=s.i, pair=(s.f, a))
            s.i = a * 3            # int32 into an int64 field
            s.i += big             # int64 arithmetic, no truncation
            alias.f = a            # an int into the fp32 field; alias is the same struct
            s.flag = a > 2
            pl.setval(out, 0, s.i - big)
            pl.setval(out, 1, s.f)
            pl.setval(out, 2, s.flag)
            pl.setval(out, 3, t.before)       # the value at make_tuple, not the later one
            pl.setval(out, 4, t.pair[0] + t.pair[1])
            pl.setval(out, 5, s.i > big)      # no wrap: s.i = 3a + big


def test_struct_fields_keep_their_dtypes_and_aliases_share():
    out = np.zeros(8, np.float32)
    struct_fields[None, 1](out, 7, 5_000_000_000)
    sync()
    np.testing.assert_array_equal(out[:6], [21.0, 7.0, 1.0, 0.0, 7.5, 1.0])


# ---- struct_array: a ring of per-iteration context indexed at run time ----

@pl.jit
def ring(out: pl.Tensor[[8], pl.DT_INT64], n: pl.DT_INT32):
    ctx_arr = pl.struct_array(3, "CubeCtx", task_id=0, ki=0)
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            for ki in pl.range(0, n):
                ctx_curr = ctx_arr[ki % 3]
                ctx_curr.task_id = ki * 100
                ki = ki + 1             # the picked slot stays the one ki % 3 named
                ctx_curr.ki += ki - 1
            for j in pl.static_range(3):
                pl.setval(out, j, ctx_arr[j].task_id)
                pl.setval(out, 3 + j, ctx_arr[j].ki)
            pl.setval(out, 6, ctx_arr[n - 5].ki)


def test_struct_array_ring_buffer():
    n = 7
    out = np.zeros(8, np.int64)
    ring[None, 1](out, n)
    sync()
    task = [max(k for k in range(n) if k % 3 == j) * 100 for j in range(3)]
    ks = [sum(k for k in range(n) if k % 3 == j) for j in range(3)]
    np.testing.assert_array_equal(out[:7], task + ks + [ks[n - 5]])


def test_struct_array_run_time_index_out_of_range_is_a_fault():
    out = np.zeros(8, np.int64)
    with pytest.raises(pypto_pro.KernelFault, match=r"test_aggregates.py:\d+: index 4 is outside \[0, 2\] of "
                                                    r"'ctx_arr'"):
        ring[None, 1](out, 9)
        sync()
    ring[None, 1](out, 7)   # the stream stays usable
    sync()
    assert out[0] == 600


# ---- run-time indices into Python lists: module globals, tiles ----

EVENTS = [0, 3, 5]
SCALES = [1.5, -2.0, 4.0]


@pl.jit
def pick(out: pl.Tensor[[4], pl.DT_FP32], k: pl.DT_INT32):
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            e = EVENTS[k]
            pl.system.sync_src(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=e)
            pl.system.sync_dst(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=e)
            pl.setval(out, 0, e)
            pl.setval(out, 1, SCALES[k] * 2)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_run_time_index_into_module_lists(k):
    out = np.zeros(4, np.float32)
    pick[None, 1](out, k)
    sync()
    np.testing.assert_array_equal(out[:2], [EVENTS[k], SCALES[k] * 2])


def test_run_time_list_index_out_of_range_is_a_fault():
    out = np.zeros(4, np.float32)
    with pytest.raises(pypto_pro.KernelFault, match=r"index -1 is outside \[0, 2\] of 'EVENTS'"):
        pick[None, 1](out, -1)
        sync()


@pl.jit
def pick_tile(x: pl.Tensor[[2, 16, 16], pl.DT_FP32], y: pl.Tensor[[16, 16], pl.DT_FP32], k: pl.DT_INT32):
    tt = pl.TileType(shape=[16, 16], dtype=pl.DT_FP32)
    a = pl.make_tile(tt, addr=0)
    b = pl.make_tile(tt, addr=0x400)
    c = pl.make_tile(tt, addr=0x800)
    tiles = [a, b]
    with pl.section_vector():
        pl.load(a, x, [0, 0, 0])
        pl.load(b, x, [1, 0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.add(c, tiles[k], tiles[1 - k])
        pl.add(c, c, tiles[k])                  # c = 2 * tiles[k] + the other
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(y, c, [0, 0])


@pytest.mark.parametrize("k", [0, 1])
def test_run_time_index_into_a_list_of_tiles(k):
    x = np.random.default_rng(k).standard_normal((2, 16, 16)).astype(np.float32)
    y = np.zeros((16, 16), np.float32)
    pick_tile[None, 1](x, y, k)
    sync()
    np.testing.assert_allclose(y, 2 * x[k] + x[1 - k], rtol=1e-6, atol=1e-6)


# ---- run-time event and mutex ids ----

@pl.jit
def runtime_ids(out: pl.Tensor[[2], pl.DT_INT32], e: pl.DT_INT32):
    with pl.section_vector():
        if pl.get_block_idx() == 0:
            pl.system.sync_src(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=e + 1)
            pl.system.sync_dst(set_pipe=pl.PipeType.S, wait_pipe=pl.PipeType.MTE3, event_id=e + 1)
            pl.system.mutex_lock(pipe=pl.PipeType.S, mutex_id=e * 2)
            pl.system.mutex_unlock(pipe=pl.PipeType.S, mutex_id=e * 2)
            pl.setval(out, 0, e)


def test_run_time_event_and_mutex_ids():
    out = np.zeros(2, np.int32)
    for e in (0, 7, 14):
        runtime_ids[None, 1](out, e)
        sync()
        assert out[0] == e


@pytest.mark.parametrize("e, bad", [(15, "event_id=16"), (-2, "event_id=-1")])
def test_run_time_event_id_outside_the_legal_ids_is_a_fault(e, bad):
    out = np.zeros(2, np.int32)
    with pytest.raises(pypto_pro.KernelFault,
                       match=rf"pl.system.sync_src\(\): {bad} at run time is not one of the legal ids 0..15"):
        runtime_ids[None, 1](out, e)
        sync()


def test_run_time_mutex_id_outside_the_legal_ids_is_a_fault():
    out = np.zeros(2, np.int32)
    with pytest.raises(pypto_pro.KernelFault, match=r"mutex_id=32 at run time is not one of the legal ids 0..31"):
        runtime_mutex[None, 1](out, 32)
        sync()


@pl.jit
def runtime_mutex(out: pl.Tensor[[2], pl.DT_INT32], m: pl.DT_INT32):
    with pl.section_vector():
        pl.system.mutex_lock(pipe=pl.PipeType.V, mutex_id=m)
        pl.system.mutex_unlock(pipe=pl.PipeType.V, mutex_id=m)


# ---- compile errors ----

def _launch(body, *args):
    kernel = pl.jit(body)
    kernel[None, 1](np.zeros(4, np.float32), *args)
    sync()


def test_struct_errors():
    def no_fields(out: pl.Tensor[[4], pl.DT_FP32]):
        s = pl.struct("S")

    with pytest.raises(pypto_pro.ParserSyntaxError, match="pl.struct needs at least one keyword field"):
        _launch(no_fields)

    name = "S"

    def name_not_literal(out: pl.Tensor[[4], pl.DT_FP32]):
        s = pl.struct(name, a=1)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="the struct type name must be a string literal"):
        _launch(name_not_literal)

    def bad_name(out: pl.Tensor[[4], pl.DT_FP32]):
        s = pl.struct("9lives", a=1)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="'9lives' is not a C identifier"):
        _launch(bad_name)

    def tile_field(out: pl.Tensor[[4], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 8], dtype=pl.DT_FP32), addr=0)
        s = pl.struct(a=t)

    with pytest.raises(pypto_pro.ParserTypeError, match="struct field 'a' holds a scalar .* got tile 't'"):
        _launch(tile_field)

    def float_into_int(out: pl.Tensor[[4], pl.DT_FP32]):
        s = pl.struct(a=1)
        s.a = 2.5

    with pytest.raises(pypto_pro.ParserTypeError, match="struct field 'a' is int64; assigning a float would drop"):
        _launch(float_into_int)

    def unknown_field(out: pl.Tensor[[4], pl.DT_FP32]):
        s = pl.struct("Msg", a=1, b=2)
        pl.setval(out, 0, s.c)

    with pytest.raises(pypto_pro.UndefinedVariableError, match=r"struct Msg has no field 'c' \(fields: a, b\)"):
        _launch(unknown_field)


def test_tuple_and_array_errors():
    def positional(out: pl.Tensor[[4], pl.DT_FP32]):
        t = pl.make_tuple(1, a=2)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="pl.make_tuple takes keyword fields only"):
        _launch(positional)

    def assign_tuple(out: pl.Tensor[[4], pl.DT_FP32]):
        t = pl.make_tuple(a=2)
        t.a = 3

    with pytest.raises(pypto_pro.ParserTypeError, match="the fields of a pl.make_tuple cannot be assigned"):
        _launch(assign_tuple)

    def zero_size(out: pl.Tensor[[4], pl.DT_FP32]):
        arr = pl.struct_array(0, "C", a=1)

    with pytest.raises(pypto_pro.ParserSyntaxError, match="pl.struct_array size must be a compile-time int >= 1"):
        _launch(zero_size)

    def constant_out_of_bounds(out: pl.Tensor[[4], pl.DT_FP32]):
        arr = pl.struct_array(2, "C", a=1)
        pl.setval(out, 0, arr[2].a)

    with pytest.raises(pypto_pro.ParserValueError, match="index 2 is out of bounds for 'arr' with 2 elements"):
        _launch(constant_out_of_bounds)

    def tensors(out: pl.Tensor[[4], pl.DT_FP32], k: pl.DT_INT32):
        both = [out, out]
        pl.setval(both[k], 0, 1.0)

    with pytest.raises(pypto_pro.UnsupportedFeatureError,
                       match="a run-time index picks among scalars, tiles of one type or structs of one layout; "
                             "'both' holds GM tensor 'out'"):
        _launch(tensors, 0)


# ---- pl.ssbuf_store / pl.ssbuf_load: a struct through the block's SSBUF ----

# The public ssbuf pages' kernel. Their set_cross_core on the S pipe omits sync_mode, which the
# set_cross_core page allows only with UNICAST_BLOCK (the mode its wait uses): added here.
@pl.jit()
def ssbuf_copy_kernel(x: pl.Tensor[[1], pl.DT_INT32]):
    message = pl.struct("Message", batch=0, block=0, offset=0)

    with pl.section_vector():
        message.batch = 8
        message.block = 1
        message.offset = 32768
        if pl.get_subblock_idx() == 0:
            pl.ssbuf_store(message, 0)
            pl.system.set_cross_core(pipe=pl.PipeType.S, event_id=15, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)

    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.S, event_id=15, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
        pl.ssbuf_load(message, 0)
        pl.printf("Get ssbuf message: batch=%d, block=%d, offset=%d",
                  message.batch, message.block, message.offset)
        pl.setval(x, 0, message.batch * 100000 + message.block * 1000 + message.offset // 1024)


def test_ssbuf_page_kernel(capfd):
    x = np.zeros(1, np.int32)
    ssbuf_copy_kernel[None, 2](x)
    sync()
    assert x[0] == 8 * 100000 + 1 * 1000 + 32
    assert capfd.readouterr().out.count("Get ssbuf message: batch=8, block=1, offset=32768") == 2


@pl.jit
def ssbuf_mixed_fields(out: pl.Tensor[[4], pl.DT_FP32], off: pl.DT_INT32):
    send = pl.struct("Pack", flag=True, scale=0.25, count=0)
    recv = pl.struct("Pack", flag=False, scale=0.0, count=0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 1:
            send.count = pl.get_block_idx() * 10
            pl.ssbuf_store(send, off)
            pl.system.set_cross_core(pipe=pl.PipeType.S, event_id=3, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.S, event_id=19, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
        pl.ssbuf_load(recv, off)
        pl.setval(out, 0, recv.flag)
        pl.setval(out, 1, recv.scale)
        pl.setval(out, 2, recv.count)


def test_ssbuf_layout_and_run_time_offset():
    out = np.zeros(4, np.float32)
    ssbuf_mixed_fields[None, 1](out, 256 - 16)    # bool at 0, fp32 at 4, int64 at 8: 16 bytes
    sync()
    np.testing.assert_array_equal(out[:3], [1.0, 0.25, 10.0])
    with pytest.raises(pypto_pro.KernelFault,
                       match=r"in pl.ssbuf_store: struct 'Pack' \(16 bytes\) at byte offset 244 does not fit the SSBUF "
                             r"of 256 bytes"):
        ssbuf_mixed_fields[None, 1](out, 244)
        sync()


@pl.jit(sanitizer=True)
def ssbuf_unsynchronised(x: pl.Tensor[[1], pl.DT_INT32]):
    message = pl.struct("Message", batch=0)
    with pl.section_vector():
        message.batch = 8
        if pl.get_subblock_idx() == 0:
            pl.ssbuf_store(message, 0)
    with pl.section_cube():
        pl.ssbuf_load(message, 0)
        pl.setval(x, 0, message.batch)


def test_sanitizer_reports_an_unsynchronised_ssbuf():
    with pytest.raises(pypto_pro.SanitizerError,
                       match=r"PIPE_RACE: write-after-read: S writes struct 'Message' \(SSBUF bytes \[0x0, 0x8\)\) "
                             r"that AIC S read at line \d+"):
        ssbuf_unsynchronised[None, 1](np.zeros(1, np.int32))
        sync()


def test_ssbuf_errors():
    def misaligned(out: pl.Tensor[[4], pl.DT_FP32]):
        m = pl.struct("M", a=0, b=0.5)
        with pl.section_vector():
            pl.ssbuf_store(m, 6)

    with pytest.raises(pypto_pro.ParserValueError, match="pl.ssbuf_store: the struct's 16 bytes at byte offset 6 are "
                                                         "not 4-byte aligned"):
        _launch(misaligned)

    def not_a_struct(out: pl.Tensor[[4], pl.DT_FP32]):
        with pl.section_vector():
            pl.ssbuf_load(out, 0)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.ssbuf_load takes a pl.struct, got GM tensor 'out'"):
        _launch(not_a_struct)

    def on_a3(out: pl.Tensor[[4], pl.DT_FP32]):
        m = pl.struct("M", a=0)
        with pl.section_vector():
            pl.ssbuf_store(m, 0)

    with pytest.raises(pypto_pro.ParserTypeError, match="pl.ssbuf_store: a3 has no SSBUF"):
        kernel = pl.jit(on_a3, arch="a3")
        kernel[None, 1](np.zeros(4, np.float32))

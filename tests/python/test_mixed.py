"""Mixed kernels (1 AIC + 2 AIV per logical block), cross-core flags, manual synchronisation and the
debug ops pl.printf / pl.pto_assert (docs/language.md#debug and #synchronisation; docs/device.md
"Execution")."""

import inspect
import re
import time
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

ROWS, COLS = 32, 128  # one fp32 tile: 16 KiB of UB
TILE = pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def sync():
    pypto_pro.runtime.synchronize()


# ---- mixed kernels: numbers, indices, handshakes ----

@pl.jit
def scale_add(x: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32], y: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32],
              z: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32]):
    a = pl.make_tile_group(type=TILE, addrs=0x0000, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=TILE, addrs=0x8000, mutex_ids=[2, 3])
    with pl.section_cube():
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)    # start the two AIVs...
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)   # ...and wait until both are done
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0)
        for i in pl.range(pl.get_block_idx(), x.shape[0] // ROWS, pl.get_block_num() * pl.get_subblock_num()):
            ta, tb = a.next(), b.next()
            pl.load_tile(ta, x, [i, 0])
            pl.load_tile(tb, y, [i, 0])
            pl.mul(ta, ta, 2.0)
            pl.add(tb, ta, tb)
            pl.store_tile(z, tb, [i, 0])
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)


@pytest.mark.parametrize("block_dim", [1, 2, 3, 8, 24, 40])
def test_mixed_kernel_numbers(block_dim):
    # 48 row tiles: with block_dim b the 2b AIVs stride over them (40 blocks run in two waves on a5's 32 AICs).
    x = torch.randn(48 * ROWS, COLS)
    y = torch.randn_like(x)
    z = torch.full_like(x, float("nan"))
    scale_add[None, block_dim](x, y, z)
    sync()
    torch.testing.assert_close(z, 2 * x + y, rtol=1e-6, atol=1e-6)


@pl.jit
def identity(ones: pl.Tensor[[1, 8], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 32], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[1, 8], dtype=pl.DT_FP32), addr=0)
    v = pl.make_tile(pl.TileType(shape=[1, 8], dtype=pl.DT_FP32), addr=0x100)
    with pl.section_cube():
        pass
    with pl.section_vector():
        row = pl.get_block_idx()
        pl.load(t, ones, [0, 0])
        pl.mul(v, t, pl.get_block_idx())
        pl.store(out, v, [row, 0])
        pl.mul(v, t, pl.get_block_num())
        pl.store(out, v, [row, 8])
        pl.mul(v, t, pl.get_subblock_idx())
        pl.store(out, v, [row, 16])
        pl.mul(v, t, pl.get_subblock_num())
        pl.store(out, v, [row, 24])


@pytest.mark.parametrize("block_dim", [1, 5, 32, 33, 50])
def test_vector_indices_of_a_mixed_kernel(block_dim):
    blocks = block_dim  # never truncated: 33 and 50 logical blocks run in waves over a5's 32 AICs
    out = torch.full((128, 32), -1.0)
    identity[None, block_dim](torch.ones(1, 8), out)
    sync()
    seen = out[:, ::8]  # one column per builtin
    aivs = torch.arange(2 * blocks, dtype=torch.float32)
    assert torch.equal(seen[:2 * blocks, 0], aivs)                                   # flattened over AIVs
    assert torch.equal(seen[:2 * blocks, 1], torch.full((2 * blocks,), float(blocks)))  # logical blocks
    assert torch.equal(seen[:2 * blocks, 2], aivs % 2)
    assert torch.equal(seen[:2 * blocks, 3], torch.full((2 * blocks,), 2.0))
    assert bool((out[2 * blocks:] == -1).all())  # no other AIV ran


def make_relay(flags):
    """AIV 1 of each block writes 3x into the GM workspace; AIV 0 reads it back and stores 3x + 1.
    With flags, AIV 1 signals the AIC, which waits for both AIVs and then releases them."""

    def relay(x: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32], ws: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32],
              out: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32]):
        t = pl.make_tile(TILE, addr=0)
        with pl.section_cube():
            if flags:
                pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)
                pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=2)
        with pl.section_vector():
            blk = pl.get_block_idx() // pl.get_subblock_num()
            if pl.get_subblock_idx() == 1:
                pl.load_tile(t, x, [blk, 0])
                pl.mul(t, t, 3.0)
                pl.store_tile(ws, t, [blk, 0])
            if flags:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=2)
            if pl.get_subblock_idx() == 0:
                pl.load_tile(t, ws, [blk, 0])
                pl.add(t, t, 1.0)
                pl.store_tile(out, t, [blk, 0])

    return pl.jit(relay, name="relay_flags" if flags else "relay_unsynchronised")


def test_cross_core_flags_order_gm_data_between_cores():
    x = torch.randn(6 * ROWS, COLS)
    ws, out = torch.zeros_like(x), torch.zeros_like(x)
    make_relay(True)[None, 6](x, ws, out)
    sync()
    torch.testing.assert_close(out, 3 * x + 1)
    kernel_cpp = (Path("build") / "relay_flags__a5" / "tk_none" / "kernel.cpp").read_text()
    assert "PTO_KERNEL_MIXED" in kernel_cpp and "if (ctx.core_type == PTO_CORE_AIC)" in kernel_cpp


def test_without_flags_the_reader_runs_first():
    # The control for the test above: the cores of a block are scheduled AIC, AIV 0, AIV 1, so
    # without the handshake AIV 0 reads the workspace before AIV 1 has written it.
    x = torch.randn(6 * ROWS, COLS)
    ws, out = torch.zeros_like(x), torch.zeros_like(x)
    make_relay(False)[None, 6](x, ws, out)
    sync()
    assert torch.equal(out, torch.ones_like(x))


@pl.jit
def deadlock(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=3)  # cube waits first
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=4)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=4)  # vector waits first
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=3)


def test_deadlock_is_reported_with_every_waiting_core_and_the_stream_stays_usable():
    stream = pypto_pro.runtime.Stream()
    x = torch.zeros(ROWS, COLS)
    deadlock[stream, 4](x)  # compiles, then queues
    start = time.monotonic()
    with pytest.raises(pypto_pro.KernelDeadlock) as info:
        stream.synchronize()
    assert time.monotonic() - start < 1.0
    err = info.value
    assert isinstance(err, pypto_pro.KernelFault)
    cube_line = line_of(deadlock.fn, "event_id=3)  # cube waits first")
    vector_line = line_of(deadlock.fn, "event_id=4)  # vector waits first")
    b = err.block
    assert 0 <= b < 4
    assert (err.kernel, err.core, err.line) == ("deadlock", "AIC", cube_line)
    message = str(err)
    assert message.startswith(f"kernel 'deadlock' deadlocked in block {b}: every unfinished core of block {b} "
                              f"waits for a cross-core flag"), message
    file = Path(__file__).name
    assert re.search(rf"AIC of block {b} at \S*{file}:{cube_line}: pl.system.wait_cross_core\(pipe=FIX, "
                     rf"event_id=3\) waits for AIV 0 and AIV 1 to set event 3", message), message
    for aiv in (0, 1):
        assert re.search(rf"AIV {aiv} of block {b} at \S*{file}:{vector_line}: pl.system.wait_cross_core\("
                         rf"pipe=MTE2, event_id=4\) waits for the AIC to set event 4", message), message

    stream.synchronize()  # the deadlock was reported once and cleared
    src = torch.randn(8 * ROWS, COLS)
    y, z = torch.zeros_like(src), torch.empty_like(src)
    scale_add[stream, 4](src, y, z)
    stream.synchronize()
    torch.testing.assert_close(z, 2 * src)


def test_cross_core_flags_need_a_mixed_kernel():
    def body(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)

    with pytest.raises(errors.ParserSyntaxError) as info:
        pl.jit(body)[None, 1](torch.zeros(ROWS, COLS))
    assert "synchronises the cube and vector cores of a mixed kernel, but 'body' is a vector kernel" in str(info.value)
    assert info.value.lineno == line_of(body, "wait_cross_core")


# ---- manual synchronisation ----

@pl.jit(auto_mutex=False)
def manual_sync(x: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP32]):
    a = pl.make_tile(TILE, addr=0)
    c = pl.make_tile(TILE, addr=0x4000)
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // ROWS, pl.get_block_num()):
            pl.system.bar_all()
            pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=0)
            pl.load_tile(a, x, [i, 0])
            pl.system.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=0)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.mul(c, a, 2.0)
            pl.system.bar_v()
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=15)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=15)
            pl.mutex.mutex_lock(pipe=pl.PipeType.MTE3, mutex_id=31)
            pl.store_tile(z, c, [i, 0])
            pl.mutex.mutex_unlock(pipe=pl.PipeType.MTE3, mutex_id=31)
            pl.system.bar_mte3()


def test_manual_sync_ops_are_in_the_ir_and_kernel_cpp(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
    x = torch.randn(4 * ROWS, COLS)
    z = torch.empty_like(x)
    manual_sync[None, 3](x, z)
    sync()
    torch.testing.assert_close(z, 2 * x)
    inst = Path("build") / "manual_sync__a5" / "tk_none"
    ir_text = (inst / "ir_0_parse.txt").read_text()
    for op in ("system.bar_all", "system.mutex_lock", "system.sync_src", "system.sync_dst", "system.bar_v",
               "system.mutex_unlock", "system.bar_mte3"):
        assert op in ir_text, op
    kernel_cpp = (inst / "kernel.cpp").read_text()
    line = line_of(manual_sync.fn, "event_id=15)")
    assert f"pto::sync_src(ctx, {line}, pto::kPipeV, pto::kPipeMTE3, 15);" in kernel_cpp
    assert "pto::mutex_lock(ctx, " in kernel_cpp and "pto::kPipeMTE3, 31);" in kernel_cpp
    assert "pto::pipe_barrier<pto::kPipeALL>(ctx, " in kernel_cpp


def kernel_from_source(directory, src):
    """A kernel function defined in its own file (the parser reads a kernel's source from its file)."""
    path = directory / "case.py"
    path.write_text(src)
    namespace = {"pl": pl}
    exec(compile(src, str(path), "exec"), namespace)  # noqa: S102 - each case is its own kernel
    return namespace["body"]


@pytest.mark.parametrize("call, cls, message", [
    ("pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=16)",
     errors.ParserTypeError, "pl.system.sync_src(): event_id=16 is out of range [0, 15]"),
    ("pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=-1)",
     errors.ParserTypeError, "pl.system.sync_dst(): event_id=-1 is out of range [0, 15]"),
    ("pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=32)",
     errors.ParserTypeError, "pl.system.mutex_lock(): mutex_id=32 is out of range [0, 31]"),
    ("pl.mutex.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=40)",
     errors.ParserTypeError, "pl.system.mutex_unlock(): mutex_id=40 is out of range [0, 31]"),
    ("pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=16)",
     errors.ParserTypeError, "pl.system.set_cross_core(sync_mode=pl.CrossCoreSyncMode.INTRA_BLOCK): event_id=16 is out of range [0, 15]"),
    ("pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3)",
     errors.ParserTypeError, "pl.system.sync_src() is missing its 'event_id' keyword"),
    ("pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.V, event_id=1)",
     errors.ParserValueError, "set_pipe and wait_pipe are both V; a flag orders two different pipes"),
    ("pl.system.mutex_lock(pipe=pl.PipeType.ALL, mutex_id=1)",
     errors.ParserValueError, "pl.system.mutex_lock(): pipe=ALL is not a pipe it can use; use one of MTE1, MTE2, "
                              "MTE3, M, V, S, FIX"),
    ("pl.system.set_cross_core(pipe=pl.PipeType.S, event_id=1)",
     errors.ParserValueError, "pipe=S is not a pipe it can use; use one of MTE1, MTE2, MTE3, M, V, FIX"),
    ("pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=16, sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK)",
     errors.ParserTypeError, "sync_mode=pl.CrossCoreSyncMode.INTER_BLOCK): event_id=16 is out of range [0, 15]"),
])
def test_sync_op_options_are_checked_at_compile_time(tmp_path, call, cls, message):
    body = kernel_from_source(tmp_path, "def body(x: pl.Tensor[[32, 128], pl.DT_FP32]):\n"
                                        "    with pl.section_cube():\n"
                                        "        pass\n"
                                        "    with pl.section_vector():\n"
                                        f"        {call}\n")
    with pytest.raises(cls) as info:
        pl.jit(body)[None, 1](torch.zeros(ROWS, COLS))
    assert message in info.value.message, info.value.message
    assert info.value.lineno == 5 and "^" in str(info.value)


# ---- printf ----

@pl.jit
def chatty(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    with pl.section_cube():
        pl.printf("cube %d of %d\n", pl.get_block_idx(), pl.get_block_num())
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=0)
        for i in pl.range(3):
            pl.printf("step %d: aiv %x, %.2f%%", i, pl.get_block_idx(), 12.5)  # the line goes on...
            pl.printf(" done\n")                                                   # ...and ends here
        pl.printf("last", loc=True)  # no newline: printed when the core ends


def test_printf_lines_are_whole_and_in_order_per_core(capfd, monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
    chatty[None, 3](torch.zeros(ROWS, COLS))
    sync()
    ir_text = (Path("build") / "chatty__a5" / "tk_none" / "ir_0_parse.txt").read_text()
    assert "printf([get_block_idx(), get_block_num()], fmt='cube %d of %d\\n')" in ir_text, ir_text
    out = capfd.readouterr().out.splitlines()
    assert len(out) == 3 * (1 + 2 * 4), out
    per_core = {}
    for line in out:
        core, text = re.fullmatch(r"\[(block \d (?:AIC|AIV [01]))\] (.*)", line).groups()
        per_core.setdefault(core, []).append(text)
    loc = f"{Path(__file__).name}:{line_of(chatty.fn, 'loc=True')}: last"
    for b in range(3):
        assert per_core[f"block {b} AIC"] == [f"cube {b} of 3"]
        for s in (0, 1):
            texts = per_core[f"block {b} AIV {s}"]
            assert texts[:3] == [f"step {i}: aiv {2 * b + s:x}, 12.50% done" for i in range(3)]
            assert texts[3].endswith(loc), texts[3]


@pl.jit
def truths(x: pl.Tensor[[8, 8], pl.DT_FP32], n: pl.Scalar[pl.DT_INT32]):
    with pl.section_vector():
        pl.printf("%d %d %u %x|\n", n > 2, n < 2, n > 2, n > 2)


def test_printf_prints_a_bool_as_c_does_after_promotion(capfd):
    truths[None, 1](torch.zeros(8, 8), 5)
    sync()
    assert capfd.readouterr().out == "[block 0 AIV] 1 0 1 1|\n"


@pytest.mark.parametrize("call, cls, message", [
    ('pl.printf("%s", 1)', errors.ParserValueError, "unsupported conversion '%s'; supported: %d %i %u %x %f"),
    ('pl.printf("%ld", 1)', errors.ParserValueError, "unsupported conversion '%l'"),
    ('pl.printf("%d %d", 1)', errors.ParserTypeError, "the format has 2 conversion(s) but 1 argument(s) follow it"),
    ('pl.printf("%f", pl.get_block_idx())', errors.ParserTypeError, "argument 1 is int32 but its conversion '%f' "
                                                                    "needs an fp32 scalar"),
    ('pl.printf("%5d", 1.5)', errors.ParserTypeError, "conversion '%5d' needs an integer or bool scalar"),
    ('pl.printf("%.f", 1.5)', errors.ParserValueError, "needs digits after the '.'"),
    ('pl.pto_assert(pl.get_block_idx(), "x")', errors.ParserTypeError,
     "pl.pto_assert: the condition must be a bool scalar (a comparison), got int32"),
])
def test_debug_formats_are_checked_at_compile_time(tmp_path, call, cls, message):
    body = kernel_from_source(tmp_path, "def body(x: pl.Tensor[[32, 128], pl.DT_FP32]):\n"
                                        "    with pl.section_vector():\n"
                                        f"        {call}\n")
    with pytest.raises(cls) as info:
        pl.jit(body)[None, 1](torch.zeros(ROWS, COLS))
    assert message in info.value.message, info.value.message
    assert info.value.lineno == 3


# ---- pto_assert ----

@pl.jit
def checked(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], limit: pl.DT_INT32):
    with pl.section_vector():
        b = pl.get_block_idx()
        pl.printf("block %d checks %d\n", b, limit)
        pl.pto_assert(b != limit + 10)
        pl.pto_assert(b < limit, "block %d is not below the limit %d", b, limit)
        pl.printf("block %d goes on\n", b)


def test_pto_assert_passes_silently(capfd):
    checked[None, 4](torch.zeros(ROWS, COLS), 10)
    sync()
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == sorted([f"[block {b} AIV] block {b} checks 10" for b in range(4)] +
                           [f"[block {b} AIV] block {b} goes on" for b in range(4)])


def test_a_failed_pto_assert_prints_its_condition_and_message_and_the_kernel_goes_on(capfd, monkeypatch):
    monkeypatch.delenv("PYPTO_PRO_ASSERT", raising=False)
    x = torch.zeros(ROWS, COLS)
    checked[None, 4](x, 3)  # only block 3 fails
    sync()  # no fault: the NPU only reports a failed assertion
    out = capfd.readouterr().out.splitlines()
    line = line_of(checked.fn, '"block %d is not below the limit %d"')
    file = checked.fn.__code__.co_filename
    assert f"[block 3 AIV] {file}:{line}: Assertion failed: b < limit: block 3 is not below the limit 3" in out
    assert "[block 3 AIV] block 3 goes on" in out
    assert sum("Assertion failed" in text for text in out) == 1

    checked[None, 1](x, -10)  # both fail; the first has no message
    sync()
    out = capfd.readouterr().out
    assert f"{file}:{line - 1}: Assertion failed: b != limit + 10\n" in out
    assert "Assertion failed: b < limit: block 0 is not below the limit -10" in out


def test_pto_assert_raises_with_pypto_pro_assert_raise(monkeypatch):
    monkeypatch.setenv("PYPTO_PRO_ASSERT", "raise")
    checked[None, 4](torch.zeros(ROWS, COLS), 3)
    with pytest.raises(pypto_pro.KernelFault) as info:
        sync()
    err = info.value
    line = line_of(checked.fn, '"block %d is not below the limit %d"')
    assert (err.kernel, err.block, err.core, err.line, err.op) == ("checked", 3, "AIV 3", line, "pto_assert")
    assert str(err) == (f"kernel 'checked' faulted in block 3 (AIV 3) at {err.source_file}:{line} in "
                        f"pl.pto_assert: Assertion failed: b < limit: block 3 is not below the limit 3")
    # The launch reads the variable (a core never calls getenv): a bad value is the launch's ValueError,
    # and the stream stays usable; a change takes effect at the next launch, not for one queued before.
    monkeypatch.setenv("PYPTO_PRO_ASSERT", "loud")
    with pytest.raises(ValueError, match="environment variable PYPTO_PRO_ASSERT must be print or raise, got 'loud'"):
        checked[None, 1](torch.zeros(ROWS, COLS), -1)
    monkeypatch.setenv("PYPTO_PRO_ASSERT", "raise")
    checked[None, 4](torch.zeros(ROWS, COLS), 3)  # queued with raise
    monkeypatch.setenv("PYPTO_PRO_ASSERT", "print")
    with pytest.raises(pypto_pro.KernelFault, match="block 3 is not below the limit 3"):
        sync()
    checked[None, 4](torch.zeros(ROWS, COLS), 3)  # launched with print: reported, no fault
    sync()


@pl.jit
def trapping(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    with pl.section_vector():
        if pl.get_block_idx() == 2:
            pl.trap()
        pl.printf("block %d passed the trap\n", pl.get_block_idx())


def test_trap_stops_the_core_with_a_fault_at_its_line(capfd):
    trapping[None, 4](torch.zeros(ROWS, COLS))
    with pytest.raises(pypto_pro.KernelFault) as info:
        sync()
    err = info.value
    assert (err.block, err.core, err.line, err.op) == (2, "AIV 2", line_of(trapping.fn, "pl.trap()"), "trap")
    assert "pl.trap() stopped the kernel" in str(err)
    assert "block 2 passed" not in capfd.readouterr().out


@pl.jit
def always_false(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    with pl.section_vector():
        pl.pto_assert(1 > 2, "reached block %d", pl.get_block_idx(), loc=True)
        pl.pto_assert(2 > 1, "never printed")


def test_a_pto_assert_false_at_compile_time_is_legal_and_reported_when_reached(capfd):
    always_false[None, 2](torch.zeros(ROWS, COLS))
    sync()
    out = sorted(capfd.readouterr().out.splitlines())
    line = line_of(always_false.fn, "reached block")
    file = always_false.fn.__code__.co_filename
    assert out == [f"[block {b} AIV] {file}:{line}: Assertion failed: 1 > 2: reached block {b}" for b in range(2)]


# ---- the sync modes within a block: UNICAST_BLOCK and INTER_SUBBLOCK ----

@pl.jit
def unicast_to_aiv1(x: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[2, 16, 16], pl.DT_FP32]):
    """The AIC signals AIV 1 alone (its event 16 + 3 is AIV 1's event 3); AIV 1 answers on its event 5,
    which the AIC waits for as 16 + 5. AIV 0 takes no part and writes its marker at once."""
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
    with pl.section_cube():
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=16 + 3, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=16 + 5, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        if sub == 1:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=3, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)
        pl.load(t, x, [0, 0])
        pl.system.bar_all()
        pl.adds(t, t, sub * 1.0)
        pl.system.bar_all()
        pl.store(out, t, [sub, 0, 0])
        if sub == 1:
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=5, sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)


@pl.jit
def subblock_relay(x: pl.Tensor[[16, 16], pl.DT_FP32], mid: pl.Tensor[[16, 16], pl.DT_FP32],
                   out: pl.Tensor[[16, 16], pl.DT_FP32]):
    """AIV 0 writes mid = 2 x through GM and signals AIV 1 (INTER_SUBBLOCK), which reads it back and
    writes out = mid + 1: a hand-over between the two vector cores of one block."""
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
    with pl.section_cube():
        pass
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            pl.load(t, x, [0, 0])
            pl.system.bar_all()
            pl.muls(t, t, 2.0)
            pl.system.bar_all()
            pl.store(mid, t, [0, 0])
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=7,
                                     sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        else:
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=7,
                                      sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
            pl.load(t, mid, [0, 0])
            pl.system.bar_all()
            pl.adds(t, t, 1.0)
            pl.system.bar_all()
            pl.store(out, t, [0, 0])


@pytest.mark.parametrize("sanitizer", [False, True], ids=["plain", "sanitizer"])
def test_unicast_and_inter_subblock_flags(sanitizer):
    x = torch.randn(16, 16)
    out = torch.zeros(2, 16, 16)
    kernel = unicast_to_aiv1 if not sanitizer else pl.jit(unicast_to_aiv1.fn, sanitizer=True)
    kernel[None, 1](x, out)
    mid, out2 = torch.zeros(16, 16), torch.zeros(16, 16)
    relay = subblock_relay if not sanitizer else pl.jit(subblock_relay.fn, sanitizer=True)
    relay[None, 3](x, mid, out2)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out[0], x) and torch.equal(out[1], x + 1)
    assert torch.equal(out2, 2 * x + 1)


def test_sanitizer_finds_an_inter_subblock_hand_over_without_its_flag():
    @pl.jit(sanitizer=True)
    def unsynchronised(x: pl.Tensor[[16, 16], pl.DT_FP32], mid: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        with pl.section_cube():
            pass
        with pl.section_vector():
            if pl.get_subblock_idx() == 0:
                pl.load(t, x, [0, 0])
                pl.system.bar_all()
                pl.store(mid, t, [0, 0])
            else:
                pl.load(t, mid, [0, 0])  # RACE: nothing orders it after AIV 0's store

    unsynchronised[None, 1](torch.randn(16, 16), torch.zeros(16, 16))
    with pytest.raises(pypto_pro.SanitizerError, match="PIPE_RACE"):
        pypto_pro.runtime.synchronize()


def test_a_unicast_wait_for_the_other_aiv_deadlocks_naming_it():
    @pl.jit
    def wrong_aiv(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=16 + 2,
                                      sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)  # AIV 1's event 2
        with pl.section_vector():
            if pl.get_subblock_idx() == 0:
                pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2,
                                         sync_mode=pl.CrossCoreSyncMode.UNICAST_BLOCK)

    wrong_aiv[None, 1](torch.zeros(16, 16))
    with pytest.raises(pypto_pro.KernelDeadlock, match="waits for AIV 1 to set event 2"):
        pypto_pro.runtime.synchronize()


def test_sync_mode_misuse_is_refused():
    @pl.jit
    def aic_subblock(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=1, sync_mode=pl.CrossCoreSyncMode.INTER_SUBBLOCK)
        with pl.section_vector():
            pass

    aic_subblock[None, 1](torch.zeros(16, 16))
    with pytest.raises(pypto_pro.KernelFault, match="INTER_SUBBLOCK pairs the two AIVs of a block; the AIC takes no"):
        pypto_pro.runtime.synchronize()

    def high_id(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=20)
        with pl.section_vector():
            pass

    with pytest.raises(errors.ParserTypeError, match=r"event_id=20 is out of range \[0, 15\] \(ids 16..31 exist"):
        pl.jit(high_id)[None, 1](torch.zeros(16, 16))


# ---- pl.system.dcci: coherent host memory, checked arguments ----

@pl.jit
def dcci_forms(x: pl.Tensor[[16, 16], pl.DT_FP32], out: pl.Tensor[[16, 16], pl.DT_FP32], i: pl.DT_INT32):
    t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
    pl.system.dcci(x)
    pl.system.dcci(x, [0, 0], cache_line=pl.CacheLine.SINGLE_CACHE_LINE, dst=pl.DcciDst.CACHELINE_OUT)
    pl.system.dcci(x, i, cache_line=pl.CacheLine.ENTIRE_DATA_CACHE)
    pl.load(t, x, [0, 0])
    pl.system.bar_all()
    pl.system.dcci(t, offset=3, dst=pl.DcciDst.CACHELINE_UB)
    pl.store(out, t, [0, 0])


def test_dcci_takes_every_documented_form_and_checks_its_offset():
    x = torch.randn(16, 16)
    out = torch.zeros(16, 16)
    dcci_forms[None, 2](x, out, 255)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, x)
    dcci_forms[None, 1](x, out, 256)  # a linear offset past the 256 elements
    with pytest.raises(pypto_pro.KernelFault, match="element offset out of range"):
        pypto_pro.runtime.synchronize()

    def tile_list(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        pl.system.dcci(t, [0, 0])

    with pytest.raises(errors.ParserTypeError, match="a Vec tile takes a linear element offset, not a list"):
        pl.jit(tile_list)[None, 1](torch.zeros(16, 16))

    def wrong_rank(x: pl.Tensor[[16, 16], pl.DT_FP32]):
        pl.system.dcci(x, [0, 0, 0])

    with pytest.raises(errors.ParserTypeError, match=r"needs one entry per axis of tensor 'x' \(2\), got 3"):
        pl.jit(wrong_rank)[None, 1](torch.zeros(16, 16))


# ---- pl.system.sync_all: every block of the launch resident at once ----

@pl.jit
def rotate_rows(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], mid: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
                out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    """Phase 1: block b writes mid[b] = 2 x[b]. Phase 2, after the barrier: out[b] = mid[b + 1] + 1,
    a row another block wrote; without the barrier that row may not be there yet."""
    t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
    b = pl.get_block_idx()
    n = pl.get_block_num()
    with pl.section_vector():
        pl.load(t, x, [b, 0])
        pl.system.bar_all()
        pl.muls(t, t, 2.0)
        pl.system.bar_all()
        pl.store(mid, t, [b, 0])
        pl.system.bar_all()  # the store is done (the barrier orders cores, not the pipes of one)
        pl.system.sync_all(mode=pl.SyncAllMode.HARD, core_type=pl.SyncCoreType.AIV_ONLY)
        pl.load(t, mid, [(b + 1) % n, 0])
        pl.system.bar_all()
        pl.adds(t, t, 1.0)
        pl.system.bar_all()
        pl.store(out, t, [b, 0])


@pytest.mark.parametrize("blocks, sanitizer", [(1, False), (8, False), (64, False), (8, True)])
def test_sync_all_is_a_barrier_of_every_block(blocks, sanitizer):
    x = torch.randn(blocks, 64)
    mid, out = torch.zeros(blocks, 64), torch.zeros(blocks, 64)
    kernel = rotate_rows if not sanitizer else pl.jit(rotate_rows.fn, sanitizer=True)
    kernel[None, blocks](x, mid, out)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, 2 * torch.roll(x, -1, dims=0) + 1)


def test_sync_all_with_more_blocks_than_cores_is_refused_and_the_stream_goes_on():
    x = torch.randn(65, 64)
    rotate_rows[None, 65](x, torch.zeros(65, 64), torch.zeros(65, 64))
    with pytest.raises(pypto_pro.KernelFault, match="need every block of the launch resident at once, and a5 has "
                                                    "64 AIVs for block_dim 65"):
        pypto_pro.runtime.synchronize()
    out = torch.zeros(4, 64)
    rotate_rows[None, 4](x[:4], torch.zeros(4, 64), out)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, 2 * torch.roll(x[:4], -1, dims=0) + 1)


def test_a_block_that_skips_sync_all_deadlocks_the_others():
    @pl.jit
    def skipping(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_vector():
            if pl.get_block_idx() != 3:
                pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)

    skipping[None, 8](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelDeadlock, match=r"7 of 8 blocks wait at pl.system.sync_all\(core_type=AIV_ONLY\) "
                                                       r"\(.*\) for block\(s\) 3, which never reach it"):
        pypto_pro.runtime.synchronize()


def test_sync_all_misuse_is_refused():
    def mix_in_vector(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_all()  # core_type=MIX by default

    with pytest.raises(errors.ParserValueError, match=r"core_type=pl.SyncCoreType.MIX\) in 'mix_in_vector', a "
                                                      r"vector kernel.*use core_type=pl.SyncCoreType.AIV_ONLY"):
        pl.jit(mix_in_vector)[None, 1](torch.zeros(8, 64))

    def soft(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_all(mode=pl.SyncAllMode.SOFT, core_type=pl.SyncCoreType.AIV_ONLY)

    with pytest.raises(errors.ParserValueError, match=r"mode=pl.SyncAllMode.SOFT\) needs its workspaces"):
        pl.jit(soft)[None, 1](torch.zeros(8, 64))

    def aiv_barrier_in_cube(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_cube():
            pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
        with pl.section_vector():
            pass

    with pytest.raises(errors.ParserValueError, match=r"inside pl.section_cube\(\): the barrier holds the vector "
                                                      r"cores, which never run this section"):
        pl.jit(aiv_barrier_in_cube)[None, 1](torch.zeros(8, 64))


@pl.jit
def mixed_phases(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP16], eye: pl.Tensor[[16, 16], pl.DT_FP16],
                 mid: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32]):
    """Each block's cube writes mid[block] = a[block] @ I; after a MIX barrier each block's AIV 0
    copies the next block's rows to out, AIV 1 adds 1 to them after an AIV_ONLY barrier."""
    b = pl.get_block_idx() // pl.get_subblock_num()
    n = pl.get_block_num()
    with pl.section_cube():
        a_mat = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0)
        e_mat = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                             addr=0x1000)
        left = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0)
        right = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right),
                             addr=0)
        acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
        pl.load(a_mat, a, [b * 16, 0])
        pl.load(e_mat, eye, [0, 0])
        pl.system.bar_all()
        pl.move(left, a_mat)
        pl.move(right, e_mat)
        pl.system.bar_all()
        pl.matmul(acc, left, right)
        pl.system.bar_all()
        pl.store(mid, acc, [b * 16, 0])
        pl.system.bar_all()
        pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
    with pl.section_vector():
        t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
        pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
        if pl.get_subblock_idx() == 0:
            pl.load(t, mid, [(b + 1) % n * 16, 0])
            pl.system.bar_all()
            pl.store(out, t, [b * 16, 0])
            pl.system.bar_all()
        pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
        if pl.get_subblock_idx() == 1:
            pl.load(t, out, [b * 16, 0])
            pl.system.bar_all()
            pl.adds(t, t, 1.0)
            pl.system.bar_all()
            pl.store(out, t, [b * 16, 0])


@pytest.mark.parametrize("blocks, sanitizer", [(1, False), (5, False), (32, False), (4, True)])
def test_sync_all_in_a_mixed_kernel_holds_every_core_of_the_launch(blocks, sanitizer):
    a = torch.randn(blocks * 16, 16).half()
    mid, out = torch.zeros(blocks * 16, 16), torch.zeros(blocks * 16, 16)
    kernel = mixed_phases if not sanitizer else pl.jit(mixed_phases.fn, sanitizer=True)
    kernel[None, blocks](a, torch.eye(16).half(), mid, out)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, torch.roll(a.float(), -16, dims=0) + 1)


def test_mixed_sync_all_limits_and_deadlocks():
    a = torch.randn(33 * 16, 16).half()
    mixed_phases[None, 33](a, torch.eye(16).half(), torch.zeros(33 * 16, 16), torch.zeros(33 * 16, 16))
    with pytest.raises(pypto_pro.KernelFault, match=r"a5 has 32 AICs \(one per mixed block\) for block_dim 33"):
        pypto_pro.runtime.synchronize()

    @pl.jit
    def cube_skips(x: pl.Tensor[[8, 64], pl.DT_FP32]):
        with pl.section_cube():
            pass
        with pl.section_vector():
            pl.system.sync_all(core_type=pl.SyncCoreType.MIX)

    cube_skips[None, 2](torch.zeros(8, 64))
    with pytest.raises(pypto_pro.KernelDeadlock, match=r"4 of 6 cores wait at pl.system.sync_all\(core_type=MIX\)"):
        pypto_pro.runtime.synchronize()


def test_sanitizer_finds_a_store_the_barrier_does_not_cover():
    """sync_all orders cores, not the work still in flight on a core's pipes: without the bar_all
    before it, AIV 0's load of what the AIC stored races that store."""
    @pl.jit(sanitizer=True)
    def no_bar_before(a: pl.Tensor[[16, 16], pl.DT_FP32], mid: pl.Tensor[[16, 16], pl.DT_FP32]):
        with pl.section_cube():
            acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc),
                               addr=0)
            pl.store(mid, acc, [0, 0])
            pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
        with pl.section_vector():
            t = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addr=0)
            pl.system.sync_all(core_type=pl.SyncCoreType.MIX)
            pl.load(t, mid, [0, 0])  # RACE

    no_bar_before[None, 1](torch.zeros(16, 16), torch.zeros(16, 16))
    with pytest.raises(pypto_pro.SanitizerError, match="PIPE_RACE: read-after-write: MTE2 reads GM tensor 'mid'"):
        pypto_pro.runtime.synchronize()

"""Compile-time errors point at the user's source line with a caret (docs/language.md#errors)."""

import inspect

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors

X = torch.zeros(128, 128)


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def launch(kernel, *args):
    kernel[None, 1](*(args or (X, X)))


def check(exc_info, fn, text, message):
    err = exc_info.value
    assert isinstance(err, errors.CompilationError)
    assert message in err.message, err.message
    assert err.lineno == line_of(fn, text), str(err)
    assert err.filename.endswith("test_compile_errors.py")
    rendered = str(err)
    assert f"test_compile_errors.py:{err.lineno}:" in rendered
    assert text.strip() in rendered and "^" in rendered
    return err


def test_for_over_plain_range():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            for i in range(4):
                pass

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    err = check(info, body, "for i in range(4):", "a kernel 'for' loop must iterate over pl.range(...)")
    assert "hint: write `for i in pl.range(start, stop, step):`" in str(err)
    caret_line = str(err).splitlines()[-2]
    assert caret_line.endswith("^" * len("range(4)"))


def test_tile_outside_its_memory():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_FP32), addr=0x30000)
        with pl.section_vector():
            pl.load(t, x, [0, 0])

    with pytest.raises(ValueError) as info:  # TileMemoryError is a ValueError
        launch(pl.jit(body))
    assert isinstance(info.value, errors.TileMemoryError)
    check(info, body, "t = pl.make_tile(", "ends at 0x40000, outside Vec memory (253952 bytes on a5)")


def test_tile_fits_a5_but_not_a3():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        big = pl.make_tile(pl.TileType(shape=[200, 256], dtype=pl.DT_FP32), addr=0)  # 200 KiB
        with pl.section_vector():
            pl.load(big, x, [0, 0])

    a5 = pl.jit(body, arch="a5")
    with pytest.raises(pypto_pro.KernelFault):  # compiles for a5; the 200-row window leaves the 128-row tensor
        launch(a5)
        pypto_pro.runtime.synchronize()
    with pytest.raises(errors.TileMemoryError) as info:
        launch(pl.jit(body, arch="a3"))
    check(info, body, "big = pl.make_tile(", "outside Vec memory (196608 bytes on a3)")


def test_misaligned_tile_address():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[16, 16], dtype=pl.DT_FP32), addrs=[0x0, 0x410], depth=2)
        with pl.section_vector():
            pl.load(g[1], x, [0, 0])

    with pytest.raises(ValueError) as info:
        launch(pl.jit(body))
    check(info, body, "g = pl.make_tile_group(", "slot 1 of tile group 'g' is at address 0x410, which is not "
                                                 "32-byte aligned as Vec memory requires")


def test_undefined_variable():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0, undefined_offset])  # noqa: F821

    with pytest.raises(NameError) as info:
        launch(pl.jit(body))
    assert isinstance(info.value, errors.UndefinedVariableError)
    check(info, body, "undefined_offset]", "name 'undefined_offset' is not defined")


def test_op_not_implemented_yet_says_so():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.sort32(t, t)

    with pytest.raises(NotImplementedError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.sort32(t, t)", "pl.sort32 is part of the public language but is not implemented yet "
                                         "(planned for a later version: sort each group of 32 elements of a Vec "
                                         "tile, with their indices; see docs/language.md#planned)")


def test_mutex_id_out_of_range():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0, 32])

    with pytest.raises(errors.ParserTypeError) as info:
        launch(pl.jit(body))
    check(info, body, "mutex_ids=[0, 32]", "mutex id 32 is out of range [0, 31]")


def test_constant_group_index_out_of_range():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        g = pl.make_tile_group(type=pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0, 1])
        with pl.section_vector():
            pl.load(g[2], x, [0, 0])

    with pytest.raises(errors.ParserTypeError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.load(g[2]", "index 2 is out of range for tile group 'g' of depth 2")


def test_op_on_the_wrong_memory():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        m = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat), addr=0)
        with pl.section_vector():
            pl.add(m, m, m)

    with pytest.raises(errors.ParserTypeError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.add(m, m, m)", "pl.add operand 'out' must be a tile in Vec memory, got "
                                         "Tile[[64, 64], fp32, Mat, NZ]")


def test_dtype_mismatch():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
        h = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16), addr=0x4000)
        with pl.section_vector():
            pl.add(a, a, h)

    with pytest.raises(errors.ParserTypeError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.add(a, a, h)", "pl.add: dtype mismatch: operand 'rhs' is fp16 but 'out' is fp32")


def test_kernels_return_nothing():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        return 1

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    check(info, body, "return 1", "kernels return nothing")


def test_scalar_changing_type_across_branches():
    def body(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
        n = x.shape[0]
        if n > 64:
            n = 0.5

    with pytest.raises(errors.ParserTypeError) as info:
        launch(pl.jit(body))
    check(info, body, "n = 0.5", "'n' is int32 but this assigns a fp32 value")


def test_bad_with_statement():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with open("f"):
            pass

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    check(info, body, 'with open("f"):', "a kernel 'with' takes exactly pl.section_vector() or pl.section_cube()")


def test_compile_errors_repeat_on_the_next_launch():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        for i in range(2):
            pass

    kernel = pl.jit(body)
    for _ in range(2):
        with pytest.raises(errors.ParserSyntaxError):
            launch(kernel)
    assert kernel.cache_info()["compiles"] == 0


def test_print_in_a_kernel_points_to_pl_printf(capsys):
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            print("hello from the kernel")

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    err = check(info, body, 'print("hello from the kernel")',
                "print() inside a kernel would run once, on the host, while the kernel compiles")
    assert "hint: print from the device with pl.printf(" in str(err)
    assert "hello from the kernel" not in capsys.readouterr().out  # it did not run at compile time


def test_other_host_builtins_in_a_kernel():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            breakpoint()

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    check(info, body, "breakpoint()", "breakpoint() inside a kernel would run once, on the host")


def test_overlapping_tiles_are_a_warning_at_the_later_declaration():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        a = pl.make_tile(pl.TileType(shape=[64, 128], dtype=pl.DT_FP32), addr=0x0)        # [0, 0x8000)
        b = pl.make_tile(pl.TileType(shape=[64, 128], dtype=pl.DT_FP32), addr=0x4000)     # inside a
        col = pl.make_tile(pl.TileType(shape=[32, 1], dtype=pl.DT_FP32, layout=pl.DN), addr=0x10000)
        row = pl.make_tile(pl.TileType(shape=[1, 32], dtype=pl.DT_FP32), addr=0x10000)   # the same 32 values
        with pl.section_vector():
            pl.load(a, x, [0, 0])
            pl.store(z, a, [0, 0])

    with pytest.warns(pypto_pro.TileOverlapWarning) as record:
        launch(pl.jit(body, name="overlap_warning"))
    pypto_pro.runtime.synchronize()
    assert len(record) == 1, [str(w.message) for w in record]
    w = record[0]
    assert w.filename.endswith("test_compile_errors.py") and w.lineno == line_of(body, "addr=0x4000")
    assert str(w.message) == (
        "kernel 'overlap_warning': tile 'b' at [0x4000, 0xc000) of Vec overlaps tile 'a' (line "
        f"{line_of(body, 'addr=0x0)')}) at [0x0, 0x8000): they share bytes [0x4000, 0x8000) and writing one "
        "changes the other; if the reuse is deliberate (one is no longer used when the other is), filter this "
        "warning category")


def test_static_range_needs_compile_time_bounds():
    def body(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            for i in pl.static_range(x.shape[0]):
                pass

    with pytest.raises(TypeError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.static_range(x.shape[0])", "pl.static_range bounds must be compile-time ints")


def test_static_range_refuses_break_and_zero_step_and_huge_unrolls():
    def jump(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            for i in pl.static_range(4):
                break

    with pytest.raises(NotImplementedError) as info:
        launch(pl.jit(jump))
    check(info, jump, "break", "'break' inside pl.static_range is not supported")

    def zero(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            for i in pl.static_range(0, 4, 0):
                pass

    with pytest.raises(ValueError) as info:
        launch(pl.jit(zero))
    check(info, zero, "pl.static_range(0, 4, 0)", "pl.static_range step must not be zero")

    def huge(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            for i in pl.static_range(100000):
                pass

    with pytest.raises(ValueError) as info:
        launch(pl.jit(huge))
    check(info, huge, "pl.static_range(100000)", "pl.static_range unrolls 100000 iterations; at most 4096")


def test_loop_ranges_outside_a_for_loop():
    def body(x: pl.Tensor[[128, 128], pl.DT_FP32], z: pl.Tensor[[128, 128], pl.DT_FP32]):
        with pl.section_vector():
            r = pl.static_range(3)

    with pytest.raises(errors.ParserSyntaxError) as info:
        launch(pl.jit(body))
    check(info, body, "pl.static_range(3)", "pl.static_range(...) can only be the iterable of a for loop")


# ---- errors that end at the user's code ----

def _misspelt(x: pl.Tensor[[64, 64], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.laod(t, x, [0, 0])


def test_a_misspelt_name_suggests_the_closest_ones():
    with pytest.raises(errors.UndefinedVariableError, match=r"pl.laod is no name of the language; did you mean "
                                                            r"pl.load or pl.loads\?") as info:
        pl.jit(_misspelt)[None, 1](torch.zeros(64, 64))
    assert info.value.source_line.strip() == "pl.laod(t, x, [0, 0])"

    def sync_typo(x: pl.Tensor[[64, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.system.sync_scr(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)

    with pytest.raises(errors.UndefinedVariableError, match=r"pl.system.sync_scr is no name of the language; did "
                                                            r"you mean pl.system.sync_src"):
        pl.jit(sync_typo)[None, 1](torch.zeros(64, 64))

    def nothing_close(x: pl.Tensor[[64, 64], pl.DT_FP32]):
        with pl.section_vector():
            pl.frobnicate(x)

    with pytest.raises(errors.UndefinedVariableError) as info:
        pl.jit(nothing_close)[None, 1](torch.zeros(64, 64))
    assert info.value.message == "pl.frobnicate is no name of the language"


def test_a_parse_error_traceback_ends_at_the_launch(monkeypatch):
    """The message points at the kernel's line with a caret; the parser's frames are left out of the
    traceback unless PYPTO_PRO_TRACEBACK=full."""
    import traceback

    def frames(exc):
        return [f.filename for f in traceback.extract_tb(exc.__traceback__)]

    with pytest.raises(errors.UndefinedVariableError) as short:
        pl.jit(_misspelt)[None, 1](torch.zeros(64, 64))
    assert not any("/language/parser/" in f for f in frames(short.value)), frames(short.value)
    assert frames(short.value)[0].endswith("test_compile_errors.py")  # it starts at the launch
    monkeypatch.setenv("PYPTO_PRO_TRACEBACK", "full")
    with pytest.raises(errors.UndefinedVariableError) as full:
        pl.jit(_misspelt)[None, 1](torch.zeros(64, 64))
    assert any("/language/parser/parser.py" in f for f in frames(full.value))

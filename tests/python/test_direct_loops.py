"""fuse_direct_loops (docs/device.md#direct-loops): a tile loop whose body is one direct run stepping
along its tensors' rows runs as one run over the iterations' windows side by side, and every result
is the loop's. Differential tests: each kernel compiled with the fusion (the default) and without it
(PYPTO_PRO_FUSE_ROWS=0), compared bit for bit and with torch; the fused compile's IR must show the
direct loop. Then in-place updates, GM windows that overlap across iterations (which run as
written), faults in a later iteration, valid windows set at run time and the loop variable after the
loop."""

import pytest
import torch

import pypto_pro
from kernels import fused_and_unfused, module_from_source

TORCH_DTYPE = {"DT_FP32": torch.float32, "DT_FP16": torch.float16, "DT_BF16": torch.bfloat16}

# z = op(x, y) over 32 x 128 tiles, row tiles split over the blocks, the column tiles in a loop; `last`
# gets x's tile of each row of tiles at the loop variable's value after the loop.
TEMPLATE = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}],
           z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}], last: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.{D}],
           col_tiles: pl.DT_INT32):
    tt = pl.TileType(shape=[32, 128], dtype=pl.{D}, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 32, pl.get_block_num()):
            j = 0
            for j in pl.range(col_tiles):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [i, j])
                pl.load_tile(tb, y, [i, j])
                {OP}
                pl.store_tile(z, tc, [i, j])
            tl = a.next()
            pl.load_tile(tl, x, [i, j])
            pl.store_tile(last, tl, [i, 0])
'''

OPS = {"add": ("pl.add(tc, ta, tb)", lambda x, y: x + y),
       "muls_sub": ("pl.muls(tc, ta, 1.5)\n                pl.sub(tc, tc, tb)",
                    None),  # two roundings: the reference rounds between them too
       "exp": ("pl.exp(tc, ta)", lambda x, y: x.exp())}


def _reference(op, x, y):
    if op == "muls_sub":
        return ((x.float() * 1.5).to(x.dtype).float() - y.float()).to(x.dtype)
    return OPS[op][1](x.float(), y.float()).to(x.dtype)


def _same_bits(a, b):
    return torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                       b.view(torch.int16 if b.element_size() == 2 else torch.int32))


def _kernel(tmp_path, name, dtype="DT_FP32", op="add"):
    return module_from_source(tmp_path, name, TEMPLATE.format(D=dtype, OP=OPS[op][0])).kernel


def _both(monkeypatch, fn, name, launch):
    return fused_and_unfused(monkeypatch, fn, name, launch, "ir_6_fuse_direct_loops.txt")


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", sorted(TORCH_DTYPE))
def test_a_tile_loop_runs_as_one_run_with_the_loops_bits(tmp_path, monkeypatch, dtype, op):
    fn = _kernel(tmp_path, f"dloop_{op}_{dtype}", dtype, op)
    g = torch.Generator().manual_seed(len(op) * 7 + len(dtype))
    x, y = (torch.randn(96, 512, generator=g).to(TORCH_DTYPE[dtype]) for _ in range(2))

    def launch(kernel):
        z, last = torch.full_like(x, 7), torch.full_like(x[:, :128], 7)
        kernel[None, 2](x, y, z, last, 4)
        return z, last

    (z0, last0), (z1, last1), ir, code = _both(monkeypatch, fn, f"dloop_{op}_{dtype}", launch)
    assert "direct loop:\n" in ir and "for j in range(0, col_tiles, 1):" in ir, ir
    assert "pto::direct_loop_window(" in code
    assert _same_bits(z0, z1) and _same_bits(last0, last1)
    tol = {"DT_FP32": 1e-6, "DT_FP16": 1e-3, "DT_BF16": 8e-3}[dtype]
    torch.testing.assert_close(z1.float(), _reference(op, x, y).float(), rtol=tol, atol=tol)
    assert torch.equal(last1, x[:, 384:])  # j is the last iteration's after the loop


@pytest.mark.parametrize("col_tiles", [0, 1, 2, 3])
def test_loops_of_any_length_give_the_loops_result(tmp_path, monkeypatch, col_tiles):
    """No iteration, one (both run as written) and a few; the columns the loop does not reach keep
    their values, and after a loop of no iteration j is still 0."""
    fn = _kernel(tmp_path, f"dloop_len_{col_tiles}")
    x, y = torch.randn(64, 384), torch.randn(64, 384)

    def launch(kernel):
        z, last = torch.full_like(x, 7), torch.full_like(x[:, :128], 7)
        kernel[None, 2](x, y, z, last, col_tiles)
        return z, last

    (z0, last0), (z1, last1), _, _ = _both(monkeypatch, fn, f"dloop_len_{col_tiles}", launch)
    assert torch.equal(z0, z1) and torch.equal(last0, last1)
    reached = 128 * col_tiles
    assert torch.equal(z1[:, :reached], x[:, :reached] + y[:, :reached])
    assert torch.equal(z1[:, reached:], torch.full_like(x[:, reached:], 7))
    j = max(col_tiles - 1, 0)
    assert torch.equal(last1, x[:, 128 * j:128 * j + 128])


def test_in_place_and_overlapping_tensors(tmp_path, monkeypatch):
    """z is x itself (the same windows: one run), and z is x one tile further on in the same buffer
    (each iteration reads what the one before wrote: the merged windows overlap, so the loop runs as
    written)."""
    fn = _kernel(tmp_path, "dloop_overlap")
    start, y = torch.randn(64 * 512 + 128), torch.randn(64, 512)

    def launch(kernel):
        same = start[:64 * 512].clone().view(64, 512)
        kernel[None, 1](same, y, same, torch.empty(64, 128), 4)
        shifted = start.clone()
        kernel[None, 1](shifted[:64 * 512].view(64, 512), y, shifted[128:].view(64, 512), torch.empty(64, 128), 4)
        return same, shifted

    (same0, shifted0), (same1, shifted1), _, _ = _both(monkeypatch, fn, "dloop_overlap", launch)
    assert torch.equal(same0, same1) and torch.equal(shifted0, shifted1)
    assert torch.equal(same1, start[:64 * 512].view(64, 512) + y)
    expected = start.clone()
    x, z = expected[:64 * 512].view(64, 512), expected[128:].view(64, 512)
    for i in range(2):  # the loop as written, window by window
        for j in range(4):
            rows, cols = slice(32 * i, 32 * i + 32), slice(128 * j, 128 * j + 128)
            z[rows, cols] = x[rows, cols] + y[rows, cols]
    assert torch.equal(shifted1, expected)


@pytest.mark.parametrize("narrow", ["x", "z"])
def test_a_later_iterations_fault_comes_after_the_iterations_before_it(tmp_path, monkeypatch, narrow):
    """Five column tiles of 128 on tensors 576 wide: the fifth iteration's load (x narrow) or store (z
    narrow) leaves the tensor. The loop faults there with the unfused message, after writing the
    iterations before it."""
    fn = _kernel(tmp_path, f"dloop_fault_{narrow}")
    x, y = torch.randn(32, 576 if narrow == "x" else 640), torch.randn(32, 640)
    faults = []

    def launch(kernel):
        z = torch.zeros(32, 576 if narrow == "z" else 640)
        kernel[None, 1](x, y, z, torch.empty(32, 128), 5)
        with pytest.raises(pypto_pro.KernelFault) as info:
            pypto_pro.runtime.synchronize()
        faults.append(info.value)
        return z

    z0, z1, ir, _ = _both(monkeypatch, fn, f"dloop_fault_{narrow}", launch)
    assert "direct loop:" in ir
    assert torch.equal(z0, z1)
    assert torch.equal(z1[:, :512], x[:, :512] + y[:, :512]) and not z1[:, 512:].any()
    lines = TEMPLATE.split("\n")
    line = 1 + next(n for n, text in enumerate(lines) if ("load_tile(ta, x" if narrow == "x" else "store_tile(z") in text)
    assert [(f.op, f.line) for f in faults] == [("load_tile" if narrow == "x" else "store_tile", line)] * 2
    messages = [str(f).split("\n")[0].replace("_fuse0", "").replace("_fuse1", "") for f in faults]
    assert messages[0] == messages[1] and "GM access out of bounds" in messages[1]


WINDOWS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[32, 512], pl.DT_FP16], y: pl.Tensor[[32, 512], pl.DT_FP16],
           z: pl.Tensor[[32, 512], pl.DT_FP16], rows: pl.DT_INT32, odd_rows: pl.DT_INT32, cols: pl.DT_INT32):
    tt = pl.TileType(shape=[32, 128], dtype=pl.DT_FP16, valid_shape=[-1, -1])
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        for k in pl.range(2):
            pl.set_validshape(a[k], [rows, cols])
            pl.set_validshape(b[k], [rows, cols])
            pl.set_validshape(c[k], [rows, cols])
        pl.set_validshape(b[1], [odd_rows, cols])
        for j in pl.range(4):
            ta, tb, tc = a.next(), b.next(), c.next()
            pl.load_tile(ta, x, [0, j])
            pl.load_tile(tb, y, [0, j])
            pl.mul(tc, ta, tb)
            pl.store_tile(z, tc, [0, j])
'''


@pytest.mark.parametrize("rows,odd_rows,cols", [(32, 32, 128), (13, 13, 128), (13, 9, 128), (32, 32, 100)])
def test_valid_windows_set_at_run_time(tmp_path, monkeypatch, rows, odd_rows, cols):
    """set_validshape on the groups' slots: their tiles do not only stage data, so the runs write them
    and the loop runs as written, each iteration over its own window (op by op where its tiles'
    windows differ), as unfused."""
    module = module_from_source(tmp_path, f"dloop_windows_{rows}_{odd_rows}_{cols}", WINDOWS)
    x, y = torch.randn(32, 512).half(), torch.randn(32, 512).half()

    def launch(kernel):
        z = torch.zeros(32, 512).half()
        kernel[None, 1](x, y, z, rows, odd_rows, cols)
        return z

    z0, z1, ir, _ = _both(monkeypatch, module.kernel, f"dloop_windows_{rows}_{odd_rows}_{cols}", launch)
    assert "direct loop:" not in ir
    expected = torch.zeros(32, 512).half()
    for j in range(4):
        r = odd_rows if j % 2 == 1 else rows  # b's slots alternate; the store takes c's window
        expected[:rows, 128 * j:128 * j + cols] = (x[:rows, 128 * j:128 * j + cols].float() *
                                                   y[:rows, 128 * j:128 * j + cols].float()).half()
        if r < rows:  # tb's rows past its window are not loaded: op by op reads what the slot holds,
            # which is whatever the host thread that ran each launch left in its local memory
            expected[r:rows, 128 * j:128 * j + cols] = z1[r:rows, 128 * j:128 * j + cols]
            z0[r:rows, 128 * j:128 * j + cols] = z1[r:rows, 128 * j:128 * j + cols]
    assert _same_bits(z0, z1)
    assert _same_bits(z1, expected)


ELEMENTS = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_BF16], z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_BF16]):
    tt = pl.TileType(shape=[16, 128], dtype=pl.DT_BF16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(x.shape[0] // 16):
            for j in pl.range(x.shape[1] // {STEP} - {LESS}):
                ta, tc = a.next(), c.next()
                pl.load(ta, x, [i * 16, j * {STEP}])
                pl.adds(tc, ta, 0.5)
                pl.store(z, tc, [i * 16, {STEP} * j])
'''


@pytest.mark.parametrize("step", [128, 64])
def test_element_offsets_that_step_one_tile_width(tmp_path, monkeypatch, step):
    """pl.load / pl.store at [..., j * 128] step like tile indices; at j * 64 the windows of
    neighbouring iterations overlap and the loop stays as written."""
    module = module_from_source(tmp_path, f"dloop_elements_{step}", ELEMENTS.format(STEP=step, LESS=0 if step == 128 else 1))
    x = torch.randn(48, 512).bfloat16()

    def launch(kernel):
        z = torch.zeros(48, 512 + 64).bfloat16()[:, :512].contiguous()
        kernel[None, 1](x, z)
        return z

    z0, z1, ir, _ = _both(monkeypatch, module.kernel, f"dloop_elements_{step}", launch)
    assert ("direct loop:" in ir) == (step == 128), ir
    assert _same_bits(z0, z1)
    if step == 128:
        assert _same_bits(z1, (x.float() + 0.5).bfloat16())


def test_every_element_wise_op_in_a_direct_loop_gives_the_unfused_bits(tmp_path, monkeypatch):
    """All element-wise ops of the direct set, one kernel per op on fp16 (the dtypes' arithmetic is
    test_fuse_direct.py's): each loop is marked and its bits are the loop's."""
    from test_fuse_direct import BINARY, POSITIVE, SCALAR, UNARY, _call, _reference

    source = TEMPLATE.replace("pl.load_tile(tb, y, [i, j])\n                {OP}",
                              "pl.load_tile(tb, y, [i, j])\n                {OP}\n                pl.add(tc, to, tb)")
    source = source.replace("ta, tb, tc = a.next(), b.next(), c.next()",
                            "ta, tb, tc, to = a.next(), b.next(), c.next(), o.next()")
    source = source.replace("    with pl.section_vector():",
                            "    o = pl.make_tile_group(type=tt, addrs=0x30000, mutex_ids=[6, 7])\n"
                            "    with pl.section_vector():", 1)
    g = torch.Generator().manual_seed(5)
    x, y = (torch.randn(64, 512, generator=g) * 3).half(), torch.randn(64, 512, generator=g).half()
    for op in BINARY + SCALAR + UNARY:
        xs, ys = (x.abs() + 0.5, y.abs() + 0.5) if op in POSITIVE else (x, y)
        fn = module_from_source(tmp_path, f"dloop_all_{op}", source.format(D="DT_FP16", OP=_call(op))).kernel

        def launch(kernel):
            z, last = torch.full_like(xs, 7), torch.full_like(xs[:, :128], 7)
            kernel[None, 2](xs, ys, z, last, 4)
            return z

        z0, z1, ir, _ = _both(monkeypatch, fn, f"dloop_all_{op}", launch)
        assert "direct loop:" in ir, (op, ir)
        assert _same_bits(z0, z1), op
        _, ref_out = _reference(op, xs, ys)
        torch.testing.assert_close(z1.float(), ref_out.float(), rtol=1e-3, atol=1e-3, msg=op)


ONE_D = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[pl.DYNAMIC], pl.DT_FP16], y: pl.Tensor[[pl.DYNAMIC], pl.DT_FP16],
           z: pl.Tensor[[pl.DYNAMIC], pl.DT_FP16], per_block: pl.DT_INT32):
    tt = pl.TileType(shape=[1024], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
    c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    with pl.section_vector():
        first = pl.get_block_idx() * per_block
        for j in pl.range(first, first + per_block):
            ta, tb, tc = a.next(), b.next(), c.next()
            pl.load_tile(ta, x, [j])
            pl.load_tile(tb, y, [j])
            pl.mul(tc, ta, tb)
            pl.store_tile(z, tc, [j])
        for k in pl.range(first + per_block - 1, first - 1, -1):
            ta, tb, tc = a.next(), b.next(), c.next()
            pl.load_tile(ta, x, [k])
            pl.load_tile(tb, z, [k])
            pl.add(tc, ta, tb)
            pl.store_tile(z, tc, [k])
'''


@pytest.mark.parametrize("length", [8 * 1024, 7 * 1024])
def test_one_dimensional_tensors_run_directly(tmp_path, monkeypatch, length):
    """1-D tiles over 1-D tensors: each block's contiguous chunk in a direct loop (z = x * y), then the
    same chunk backwards in direct runs (z = x + z, in place). 7 tiles for one block of 8: the last tile
    leaves the tensors and faults, after every tile before it."""
    module = module_from_source(tmp_path, f"dloop_1d_{length}", ONE_D)
    g = torch.Generator().manual_seed(9)
    x, y = (torch.randn(length, generator=g).half() for _ in range(2))
    faults = []

    def launch(kernel):
        z = torch.zeros(length).half()
        if length % 4096:
            kernel[None, 1](x, y, z, 8)
        else:
            kernel[None, 2](x, y, z, 4)
        if length % 4096:
            with pytest.raises(pypto_pro.KernelFault) as info:
                pypto_pro.runtime.synchronize()
            faults.append(info.value)
        return z

    z0, z1, ir, code = _both(monkeypatch, module.kernel, f"dloop_1d_{length}", launch)
    assert ir.count("direct loop:") == 1 and ir.count("direct run") == 2, ir
    assert _same_bits(z0, z1)
    if length % 4096 == 0:
        assert _same_bits(z1, (x.float() + (x.float() * y.float()).half().float()).half())
    else:
        line = 1 + next(n for n, text in enumerate(ONE_D.split("\n")) if "load_tile(ta, x, [j])" in text)
        assert [(f.op, f.line) for f in faults] == [("load_tile", line)] * 2
        assert _same_bits(z1, x * y)  # (the add loop never ran)


MIXED_LOOP = '''
import pypto_pro.language as pl

def kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
           z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16]):
    t16 = pl.TileType(shape=[32, 128], dtype=pl.DT_FP16)
    t32 = pl.TileType(shape=[32, 128], dtype=pl.DT_FP32)
    a = pl.make_tile_group(type=t16, addrs=0x0, mutex_ids=[0, 1])
    b = pl.make_tile_group(type=t16, addrs=0x4000, mutex_ids=[2, 3])
    a32 = pl.make_tile(t32, addr=0x8000)
    b32 = pl.make_tile(t32, addr=0xC000)
    o32 = pl.make_tile(t32, addr=0x10000)
    o = pl.make_tile_group(type=t16, addrs=0x14000, mutex_ids=[4, 5])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 32, pl.get_block_num()):
            for j in pl.range(x.shape[1] // 128):
                ta, tb, to = a.next(), b.next(), o.next()
                pl.load_tile(ta, x, [i, j])
                pl.load_tile(tb, y, [i, j])
                pl.cast(a32, ta, mode=pl.RoundMode.CAST_NONE)
                pl.cast(b32, tb, mode=pl.RoundMode.CAST_NONE)
                pl.mul(o32, a32, b32)
                pl.adds(o32, o32, 0.5)
                pl.cast(to, o32, mode=pl.RoundMode.CAST_RINT)
                pl.store_tile(z, to, [i, j])
'''


def test_a_mixed_precision_tile_loop_runs_as_one_run(tmp_path, monkeypatch):
    """fp16 in and out, computed in fp32 through pl.cast: one run with casts, one loop."""
    module = module_from_source(tmp_path, "dloop_mixed", MIXED_LOOP)
    x, y = (torch.randn(96, 512).half() for _ in range(2))

    def launch(kernel):
        z = torch.zeros(96, 512).half()
        kernel[None, 2](x, y, z)
        return z

    z0, z1, ir, code = _both(monkeypatch, module.kernel, "dloop_mixed", launch)
    assert "direct loop:" in ir and "pto::DirectCast<pto::half, pto::RoundMode::CAST_RINT>" in code
    assert _same_bits(z0, z1) and _same_bits(z1, (x.float() * y.float() + 0.5).half())

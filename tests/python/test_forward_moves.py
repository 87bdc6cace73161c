"""forward_moves (docs/device.md#forwarded-moves): a plain move of a Mat tile into a Left/Right tile that only
the matmuls right after it read is not run; they read the Mat tile, or the GM window of the load before it
(in place). Each kernel runs compiled with the pass (PYPTO_PRO_FUSE_ROWS=1) and without it: the same bits
and faults, torch's values within the matmul's rounding, and the IR dump shows which moves were forwarded
and which loads left their windows in GM. The kernels where forwarding would change a result (the Mat
tile written again before the matmul, an L0 tile read outside the move's shadow, partial windows, a
written tensor, another tile reading the loaded bytes) keep those moves and loads."""

import re

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import fused_and_unfused, line_of, load_example, synchronize_fault

M = pl.MemorySpace
DUMP = "ir_9_forward_moves.txt"
TORCH = {pl.DT_FP16: torch.float16, pl.DT_BF16: torch.bfloat16, pl.DT_FP32: torch.float32, pl.DT_INT8: torch.int8}


def _k_loop(dtype, kt):
    """The K-loop matmul of the benchmarks: Mat and L0 tile groups, matmul then matmul_acc in an if."""
    acc_t = pl.DT_INT32 if dtype is pl.DT_INT8 else pl.DT_FP32

    def k_loop(a: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype], b: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
               c: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], acc_t]):
        a_mat = pl.make_tile_group(type=pl.TileType(shape=[64, kt], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x0, mutex_ids=[0, 1])
        b_mat = pl.make_tile_group(type=pl.TileType(shape=[kt, 64], dtype=dtype, target_memory=M.Mat),
                                   addrs=0x10000, mutex_ids=[2, 3])
        left = pl.make_tile_group(type=pl.TileType(shape=[64, kt], dtype=dtype, target_memory=M.Left),
                                  addrs=0x0, mutex_ids=[4, 5])
        right = pl.make_tile_group(type=pl.TileType(shape=[kt, 64], dtype=dtype, target_memory=M.Right),
                                   addrs=0x0, mutex_ids=[6, 7])
        acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=acc_t, target_memory=M.Acc), addr=0)
        with pl.section_cube():
            col_tiles = c.shape[1] // 64
            for t in pl.range(pl.get_block_idx(), c.shape[0] // 64 * col_tiles, pl.get_block_num()):
                i = t // col_tiles
                j = t % col_tiles
                for kk in pl.range(a.shape[1] // kt):
                    ta, tb, tl, tr = a_mat.next(), b_mat.next(), left.next(), right.next()
                    pl.load_tile(ta, a, [i, kk])
                    pl.load_tile(tb, b, [kk, j])
                    pl.move(tl, ta)
                    pl.move(tr, tb)
                    if kk == 0:
                        pl.matmul(acc, tl, tr)
                    else:
                        pl.matmul_acc(acc, acc, tl, tr)
                pl.store_tile(c, acc, [i, j])

    return k_loop


def _operands(dtype, m, k, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if dtype is pl.DT_INT8:
        return (torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8),
                torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8))
    return (torch.randn(m, k, generator=gen).to(TORCH[dtype]), torch.randn(k, n, generator=gen).to(TORCH[dtype]))


@pytest.mark.parametrize("dtype,kt", [(pl.DT_FP16, 128), (pl.DT_BF16, 128), (pl.DT_FP32, 64), (pl.DT_INT8, 256)])
def test_the_k_loop_matmuls_read_the_mat_tiles(monkeypatch, dtype, kt):
    a, b = _operands(dtype, 192, 3 * kt, 128)
    acc_t = torch.int32 if dtype is pl.DT_INT8 else torch.float32

    def launch(kernel):
        c = torch.full((192, 128), -1, dtype=acc_t)
        kernel[None, 4](a, b, c)
        return c

    unfused, forwarded, ir, code = fused_and_unfused(monkeypatch, _k_loop(dtype, kt), f"fwd_k_loop_{dtype.name}",
                                                     launch, DUMP)
    assert torch.equal(unfused, forwarded)
    if dtype is pl.DT_INT8:
        assert torch.equal(forwarded.long(), a.long() @ b.long())
    else:
        ref = a.double() @ b.double()
        assert torch.allclose(forwarded.double(), ref, rtol=1e-5, atol=1e-4 * kt ** 0.5), \
            (forwarded.double() - ref).abs().max()
    assert ir.count("forwarded (not run):") == 2
    assert ir.count("reading ta (in place #0) for tl, tb (in place #1) for tr:") == 2
    assert "in place #0 (window checked, left in GM):\n          load_tile(ta, a, [i, kk])" in ir
    assert "in place #1 (window checked, left in GM):\n          load_tile(tb, b, [kk, j])" in ir
    # The moves are comments; the loads check their windows; the matmuls read GM.
    assert "pto::move(" not in code and "pto::load_tile(" not in code
    assert "const auto in_place_0 = pto::load_tile_in_place(" in code
    operands = "pto::ReadInPlace(*v_ta, in_place_0), pto::ReadInPlace(*v_tb, in_place_1));"
    assert f"*v_acc, {operands}" in code and f"*v_acc, *v_acc, {operands}" in code


def test_an_in_place_load_faults_as_the_load(monkeypatch):
    """A window past the tensor's end: the same fault (op, line, message) with the loads in place."""
    a, b = _operands(pl.DT_BF16, 150, 256, 128)  # row tile 2 of a ends at row 192 > 150

    def launch(kernel):
        c = torch.zeros(192, 128)
        kernel[None, 1](a, b, c)
        return synchronize_fault(), c

    (unfused_fault, unfused), (fault, c), ir, _ = fused_and_unfused(monkeypatch, _k_loop(pl.DT_BF16, 128),
                                                                    "fwd_k_loop_fault", launch, DUMP)
    assert "in place #0" in ir
    assert fault == unfused_fault
    assert fault[:2] == ("load_tile", line_of(_k_loop, "pl.load_tile(ta, a, [i, kk])"))
    assert "GM access out of bounds" in fault[2]
    assert torch.equal(c, unfused)  # the tiles before the fault were stored, as without the pass
    assert torch.allclose(c[:128], a[:128].float() @ b.float(), rtol=1e-5, atol=1e-3)


def _single(rows=64, reload=False, read_later=False, set_window=False, write_a=False):
    """One [rows, 64] x [64, 64] fp16 matmul through Mat and L0 tiles of 64 rows; the options each break
    one condition of forwarding."""
    partial = rows < 64
    a_valid = [rows, 64] if partial else None
    mat_valid = [-1, -1] if set_window else a_valid
    acc_type = pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Acc, valid_shape=a_valid,
                           compact=int(partial))

    def single(a: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16], a2: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP16],
               b: pl.Tensor[[64, 64], pl.DT_FP16], c: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32],
               c2: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
        ta = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat, valid_shape=mat_valid,
                                      compact=int(partial)), addr=0x0)
        tb = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x8000)
        tl = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Left, valid_shape=a_valid,
                                      compact=int(partial)), addr=0x0)
        tr = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Right), addr=0x0)
        acc = pl.make_tile(acc_type, addr=0x0)
        with pl.section_cube():
            blk = pl.get_block_idx()  # each block its own rows: what one leaves in L0, the next must not read
            if set_window:
                pl.set_validshape(ta, [64, 64])
            pl.load_tile(ta, a, [blk, 0])
            pl.load_tile(tb, b, [0, 0])
            pl.move(tl, ta)
            pl.move(tr, tb)
            if reload:
                pl.load_tile(ta, a2, [blk, 0])  # after the move: the matmul must still see a
            pl.matmul(acc, tl, tr)
            pl.store_tile(c, acc, [blk, 0])
            if write_a:
                pl.store_tile(a, acc, [blk, 0])  # a is written: its loads copy their windows
            if read_later:
                pl.load_tile(tb, a2, [blk, 0])
                pl.move(tr, tb)
                pl.matmul(acc, tl, tr)  # tl again, outside its move's shadow
                pl.store_tile(c2, acc, [blk, 0])

    return single


@pytest.mark.parametrize("case", ["plain", "reload", "read_later", "partial", "set_window", "write_a"])
def test_forwarding_never_changes_a_result(monkeypatch, case):
    blocks = 8
    a, a2 = torch.randn(64 * blocks, 64).half(), torch.randn(64 * blocks, 64).half()
    b = torch.randn(64, 64).half()
    rows = 40 if case == "partial" else 64
    fn = _single(rows, reload=case == "reload", read_later=case == "read_later", set_window=case == "set_window",
                 write_a=case == "write_a")

    def launch(kernel):
        c, c2, a_out = torch.zeros(64 * blocks, 64), torch.zeros(64 * blocks, 64), a.clone()
        kernel[None, blocks](a_out, a2, b, c, c2)
        return c, c2, a_out

    (c0, c20, a0), (c, c2, a_out), ir, _ = fused_and_unfused(monkeypatch, fn, f"fwd_single_{case}", launch, DUMP)
    assert torch.equal(c0, c) and torch.equal(c20, c2) and torch.equal(a0, a_out)
    if case == "write_a":
        assert torch.equal(a_out, c.half())
    for blk in range(blocks):
        r = slice(64 * blk, 64 * blk + rows)
        assert torch.allclose(c[r], a[r].float() @ b.float(), rtol=1e-3, atol=1e-3)
        assert not c[64 * blk + rows:64 * (blk + 1)].any()
        if case == "read_later":
            right = a2[64 * blk:64 * (blk + 1)].float()  # the block's rows of a2, loaded into tb
            assert torch.allclose(c2[r], a[r].float() @ right, rtol=1e-3, atol=1e-3)
    # What stays: nothing when the Mat tile changes before the matmul (the Right move's shadow ends at
    # the load too); the Right move alone when the Left tile is read again later or its window may
    # change; everything goes when nothing can tell. A load goes in place when all its moves go, and
    # its tensor is not written.
    forwarded, in_place = {"plain": (["tl", "tr"], ["ta", "tb"]), "reload": ([], []),
                           "read_later": (["tr", "tr"], ["tb", "tb"]), "partial": (["tr"], ["tb"]),
                           "set_window": (["tr"], ["tb"]), "write_a": (["tl", "tr"], ["tb"])}[case]
    assert ir.count("forwarded (not run):") == len(forwarded)
    for name in forwarded:
        assert f"forwarded (not run):\n      move({name}, t{'a' if name == 'tl' else 'b'})" in ir
    assert ir.count("(window checked, left in GM):") == len(in_place)
    for name in in_place:
        assert f"(window checked, left in GM):\n      load_tile({name}, " in ir


def aliased_row(a: pl.Tensor[[64, 64], pl.DT_FP16], b: pl.Tensor[[64, 64], pl.DT_FP16],
                c: pl.Tensor[[64, 64], pl.DT_FP32]):
    """The bias row is the first row of the loaded Mat tile (another tile at its address)."""
    ta = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat, layout=pl.ND), addr=0x0)
    first_row = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP16, target_memory=M.Mat, layout=pl.ND), addr=0x0)
    tb = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Mat), addr=0x8000)
    tl = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Left), addr=0x0)
    tr = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP16, target_memory=M.Right), addr=0x0)
    bias = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32, target_memory=M.Bias), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0x0)
    with pl.section_cube():
        pl.load_tile(ta, a, [0, 0])
        pl.load_tile(tb, b, [0, 0])
        pl.move(tl, ta)
        pl.move(tr, tb)
        pl.move(bias, first_row)  # reads the bytes the load wrote: the load must write them
        pl.matmul(acc, tl, tr, bias)
        pl.store_tile(c, acc, [0, 0])


@pytest.mark.filterwarnings("ignore::pypto_pro.TileOverlapWarning")
def test_a_load_whose_bytes_another_tile_reads_writes_them(monkeypatch):
    a, b = torch.randn(64, 64).half(), torch.randn(64, 64).half()

    def launch(kernel):
        c = torch.zeros(64, 64)
        kernel[None, 1](a, b, c)
        return c

    unfused, c, ir, _ = fused_and_unfused(monkeypatch, aliased_row, "fwd_aliased_row", launch, DUMP)
    assert torch.equal(unfused, c)
    assert torch.allclose(c, a.float() @ b.float() + a[0].float(), rtol=1e-3, atol=1e-3)
    # The matmul reads ta and tb; tb's window in GM, ta's tile as loaded.
    assert ir.count("forwarded (not run):") == 2 and "in place #1" not in ir
    assert "in place #0 (window checked, left in GM):\n      load_tile(tb, b, [0, 0])" in ir
    assert "reading ta for tl, tb (in place #0) for tr:" in ir


def test_tiles_the_vector_cores_write_keep_their_moves(monkeypatch):
    """pipeline_mlp: the weights' Right tiles (loaded from GM) are forwarded; the Left tile of the second
    product, whose Mat tile the vector cores insert into, is moved as written (and with it every Left
    move: Left memory is then read outside forwarded matmuls)."""
    mlp = load_example("pipeline_mlp", "fwd_example")
    a, b, d = torch.randn(192, 64), torch.randn(64, 64), torch.randn(64, 64)

    def launch(kernel):
        return mlp.relu_mlp(a, b, d, kernel=kernel)

    unfused, out, ir, _ = fused_and_unfused(monkeypatch, mlp.mlp, "fwd_mlp", launch, DUMP,
                                            auto_mutex=True, pipeline=pl.pipeline.PipelineConfig(preload=2))
    assert torch.equal(unfused, out)
    assert torch.allclose(out, torch.relu(a @ b) @ d, rtol=1e-4, atol=1e-4)
    assert ir.count("forwarded (not run):") == 2 and "insert(" in ir
    assert re.search(r"forwarded \(not run\):\n +move\(r_t", ir) and not re.search(r"forwarded \(not run\):\n +move\(l_t", ir)


@pytest.mark.parametrize("dtype,kt", [(pl.DT_FP16, 128), (pl.DT_BF16, 128), (pl.DT_INT8, 256)])
def test_what_matmuls_keep_of_in_place_windows_lasts_one_launch(monkeypatch, dtype, kt):
    """Each B window is read by every row of output tiles and each A window by every column (what the
    matmuls derive from them is kept for the launch, gemm::Reuse); the tensors' values change in place
    between launches, and each launch computes from its own."""
    acc_t = torch.int32 if dtype is pl.DT_INT8 else torch.float32

    def launch(kernel):
        a, b = _operands(dtype, 256, 2 * kt, 256)
        results = []
        for seed in (1, 2):
            c = torch.full((256, 256), -1, dtype=acc_t)
            kernel[None, 2](a, b, c)
            pypto_pro.runtime.synchronize()
            results.append((c, a.clone(), b.clone()))
            new_a, new_b = _operands(dtype, 256, 2 * kt, 256, seed=seed)
            a.copy_(new_a)
            b.copy_(new_b)
        return results

    unfused, fused, _, code = fused_and_unfused(monkeypatch, _k_loop(dtype, kt), f"fwd_kept_{dtype.name}", launch,
                                                DUMP)
    assert "const bool steady_b = pto::detail::ApartFrom(" in code
    for (c, a_then, b_then), (c_unfused, _, _) in zip(fused, unfused):
        assert torch.equal(c, c_unfused)
        if dtype is pl.DT_INT8:
            assert torch.equal(c.long(), a_then.long() @ b_then.long())
        else:
            assert torch.allclose(c.double(), a_then.double() @ b_then.double(), rtol=1e-5, atol=1e-3)


def _twice(a: pl.Tensor[[128, 128], pl.DT_BF16], b: pl.Tensor[[128, 128], pl.DT_BF16],
           c: pl.Tensor[[128, 128], pl.DT_BF16]):
    """c = a @ b twice, b's window read in place each time: where c is b's storage, the second product
    reads the first one's result."""
    ta = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Mat), addr=0x0)
    tb = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Mat), addr=0x8000)
    tl = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Left), addr=0x0)
    tr = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_BF16, target_memory=M.Right), addr=0x0)
    acc = pl.make_tile(pl.TileType(shape=[128, 128], dtype=pl.DT_FP32, target_memory=M.Acc), addr=0x0)
    with pl.section_cube():
        for r in pl.range(2):
            pl.load(ta, a, [0, 0])
            pl.load(tb, b, [0, 0])
            pl.move(tl, ta)
            pl.move(tr, tb)
            pl.matmul(acc, tl, tr)
            pl.store(c, acc, [0, 0])


@pytest.mark.parametrize("aliased", [False, True])
def test_a_window_the_launch_writes_over_is_read_anew(monkeypatch, aliased):
    """b's load is in place (the kernel never writes b), and the tensor passed as b is c's storage: the
    second matmul reads what the first stored (4 b), not what was kept from the first read (2 b)."""
    a = (2 * torch.eye(128)).to(torch.bfloat16)
    b0 = torch.randint(-8, 9, (128, 128)).to(torch.bfloat16)

    def launch(kernel):
        c = b0.clone() if aliased else torch.zeros(128, 128, dtype=torch.bfloat16)
        b = c if aliased else b0.clone()
        kernel[None, 1](a, b, c)
        pypto_pro.runtime.synchronize()
        return c

    unfused, fused, ir, code = fused_and_unfused(monkeypatch, _twice, f"fwd_aliased_{int(aliased)}", launch, DUMP)
    assert "in place #1 (window checked, left in GM):\n" in ir
    assert "const bool steady_b = pto::detail::ApartFrom(" in code
    assert torch.equal(fused, unfused)
    assert torch.equal(fused, (4 if aliased else 2) * b0)

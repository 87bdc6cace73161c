"""GM pointers and views: pl.Ptr parameters, pl.make_tensor, pl.addptr, pl.make_ptr, pl.set_stride.

The kernels follow the public reference pages and tutorials of the language (repository hicann/pypto):
docs/zh/pypto_pro/api/SIMD-API/basic_data_structures/Ptr.md, operation/resource_management/
make_tensor.md, make_ptr.md, addptr.md, operation/memory_vector_computation/transpose_and_element_access/
set_stride.md, and the tutorials that build dynamic-rank and dtype-generic kernels on them (the kernel
function page's TilingData pointers, the load page's folded [M, N] views and BSND -> TND view, the
offline-compilation page's datatype= kernel over pl.Ptr[pl.DT_UINT8]). Every result is compared with
numpy / torch (copies and exact arithmetic exactly, scaled values with explicit tolerances); the error
paths check the exception's type, message and source line: wrong launch arguments, views reaching
outside the buffer the launch passed (a KernelFault at the line of the access, nothing written), bad
arguments (compile errors at the call).
"""

import inspect
from dataclasses import dataclass

import numpy as np
import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from pypto_pro import errors


def sync():
    pypto_pro.runtime.synchronize()


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def fault_of(launch):
    """Runs `launch` and returns the KernelFault the next synchronisation raises."""
    launch()
    with pytest.raises(errors.KernelFault) as info:
        sync()
    return info.value


def seeded(seed):
    return torch.Generator().manual_seed(seed)


# ===========================================================================================
# basic_data_structures/Ptr.md, resource_management/make_tensor.md, addptr.md: a workspace pointer,
# moved to its second half and viewed as [64, 128]
# ===========================================================================================

@pl.jit(auto_mutex=True)
def workspace_kernel(
    a: pl.Tensor[[64, 128], pl.DT_FP16],
    workspace: pl.Ptr[pl.DT_FP16],
    out: pl.Tensor[[64, 128], pl.DT_FP16],
):
    ws_buf_ptr = pl.addptr(workspace, 64 * 128)
    ws_buf = pl.make_tensor(ws_buf_ptr, [64, 128], [128, 1])

    tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tile = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])

    with pl.section_vector():
        t = tile.current()
        pl.load(t, a, [0, 0])
        pl.add(t, t, t)
        pl.store(ws_buf, t, [0, 0])
        pl.load(t, ws_buf, [0, 0])
        pl.store(out, t, [0, 0])


def test_workspace_pointer_moved_and_viewed():
    a = torch.randn(64, 128, generator=seeded(1)).half()
    workspace = torch.full((2 * 64 * 128,), -7.0, dtype=torch.float16)
    out = torch.zeros(64, 128, dtype=torch.float16)
    workspace_kernel[None, 1](a, workspace, out)
    sync()
    assert torch.equal(out, a + a)  # a + a is exact in fp16
    assert torch.equal(workspace[64 * 128:].view(64, 128), a + a)
    assert torch.all(workspace[:64 * 128] == -7.0)  # the first half is not touched


def test_workspace_too_small_is_a_fault_at_the_store_and_writes_nothing():
    a = torch.ones(64, 128, dtype=torch.float16)
    # the workspace is the first part of a larger allocation: what lies after it must stay as it was
    backing = torch.full((3 * 64 * 128,), 5.0, dtype=torch.float16)
    workspace = backing[: 64 * 128 + 100]  # row-major contiguous, 100 elements past the first half
    out = torch.zeros(64, 128, dtype=torch.float16)
    fault = fault_of(lambda: workspace_kernel[None, 1](a, workspace, out))
    assert fault.line == line_of(workspace_kernel.fn, "pl.store(ws_buf, t, [0, 0])")
    assert fault.kernel == "workspace_kernel" and fault.op == "store"
    message = str(fault)
    assert "GM access outside the buffer passed for parameter 'workspace' (16584 bytes)" in message
    assert "it would touch bytes [16384, 32768) of that buffer" in message
    assert "tensor 'ws_buf' of shape [64, 128], offsets [0, 0], window [64, 128]" in message
    assert torch.all(backing == 5.0)  # nothing written, inside or outside the buffer


# ===========================================================================================
# make_tensor.md: a view whose rows are 256 elements apart (row padding), two halves of 32 rows
# ===========================================================================================

@pl.jit(auto_mutex=True)
def pitched_workspace_kernel(
    a: pl.Tensor[[64, 128], pl.DT_FP16],
    workspace: pl.Ptr[pl.DT_FP16],
    out: pl.Tensor[[64, 128], pl.DT_FP16],
):
    ws_buf_ptr = pl.addptr(workspace, 64 * 128)
    ws_buf = pl.make_tensor(ws_buf_ptr, [64, 128], [256, 1])

    tt = pl.TileType(shape=[32, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tile = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])

    with pl.section_vector():
        t = tile.current()
        pl.load(t, a, [0, 0])
        pl.add(t, t, t)
        pl.store(ws_buf, t, [0, 0])
        pl.load(t, ws_buf, [0, 0])
        pl.store(out, t, [0, 0])

        pl.load(t, a, [32, 0])
        pl.add(t, t, t)
        pl.store(ws_buf, t, [32, 0])
        pl.load(t, ws_buf, [32, 0])
        pl.store(out, t, [32, 0])


def test_row_padded_view():
    a = torch.randn(64, 128, generator=seeded(2)).half()
    workspace = torch.zeros(64 * 128 + 64 * 256, dtype=torch.float16)
    out = torch.zeros(64, 128, dtype=torch.float16)
    pitched_workspace_kernel[None, 1](a, workspace, out)
    sync()
    assert torch.equal(out, a + a)
    rows = workspace[64 * 128:].view(64, 256)
    assert torch.equal(rows[:, :128], a + a)
    assert torch.all(rows[:, 128:] == 0)  # the padding between rows is not written


def test_row_padded_view_past_the_buffer_faults_at_its_last_rows():
    """The view describes 64 rows 256 apart; a buffer holding only 40 of them lets the first half
    through and stops the second store (rows 32..63) at its line."""
    a = torch.ones(64, 128, dtype=torch.float16)
    workspace = torch.zeros(64 * 128 + 40 * 256, dtype=torch.float16)
    out = torch.zeros(64, 128, dtype=torch.float16)
    fault = fault_of(lambda: pitched_workspace_kernel[None, 1](a, workspace, out))
    assert fault.line == line_of(pitched_workspace_kernel.fn, "pl.store(ws_buf, t, [32, 0])")
    assert "outside the buffer passed for parameter 'workspace'" in str(fault)
    assert "offsets [32, 0], window [32, 128]" in str(fault)
    assert torch.all(out[:32] == 2) and torch.all(out[32:] == 0)  # the first half ran, the second did not


# ===========================================================================================
# make_ptr.md: a pl.Ptr[pl.DT_UINT8] workspace read as fp16
# ===========================================================================================

@pl.jit(auto_mutex=True)
def make_ptr_kernel(
    workspace: pl.Ptr[pl.DT_UINT8],
    out: pl.Tensor[[64, 128], pl.DT_FP16],
):
    fp16_ptr = pl.make_ptr(workspace, dtype=pl.DT_FP16)
    ws_buf = pl.make_tensor(fp16_ptr, [64, 128], [128, 1])

    tt = pl.TileType(shape=[64, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    tile = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])

    with pl.section_vector():
        t = tile.current()
        pl.load(t, ws_buf, [0, 0])
        pl.store(out, t, [0, 0])


def test_byte_workspace_read_as_fp16():
    data = torch.randn(64, 128, generator=seeded(3)).half()
    out = torch.zeros(64, 128, dtype=torch.float16)
    make_ptr_kernel[None, 1](data.view(torch.uint8).reshape(-1), out)  # the same bytes, as uint8
    sync()
    assert torch.equal(out, data)
    # a byte pointer takes a buffer of any dtype the language has: here the fp16 tensor itself
    out.zero_()
    make_ptr_kernel[None, 1](data, out)
    sync()
    assert torch.equal(out, data)


@pl.jit
def byte_offsets_kernel(w: pl.Ptr[pl.DT_UINT8], out: pl.Tensor[[4, 8], pl.DT_FP32], skip: pl.DT_INT32):
    p = pl.make_ptr(pl.addptr(w, skip), dtype=pl.DT_FP32)  # a byte offset, then fp32 elements
    same = pl.make_ptr(p)
    v = pl.make_tensor(same, [4, 8])
    t = pl.make_tile(pl.TileType(shape=[4, 8], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, v, [0, 0])
        pl.store(out, t, [0, 0])


def test_addptr_counts_elements_of_its_dtype():
    w = np.arange(40, dtype=np.float32)
    out = np.zeros((4, 8), np.float32)
    byte_offsets_kernel[None, 1](w, out, 16)  # 16 bytes: four fp32 elements
    sync()
    np.testing.assert_array_equal(out.ravel(), w[4:36])


def test_make_ptr_at_a_misaligned_address_faults():
    w = np.arange(40, dtype=np.float32)
    out = np.zeros((4, 8), np.float32)
    fault = fault_of(lambda: byte_offsets_kernel[None, 1](w, out, 2))
    assert fault.line == line_of(byte_offsets_kernel.fn, "p = pl.make_ptr(pl.addptr(w, skip)")
    assert fault.op == "make_ptr"
    assert "the address (byte 2 of its buffer) is not aligned to the 4 bytes of the new dtype" in str(fault)
    assert "in the buffer passed for parameter 'w', 160 bytes" in str(fault)


def test_addptr_leaving_its_buffer_faults():
    w = np.arange(40, dtype=np.float32)
    out = np.zeros((4, 8), np.float32)
    fault = fault_of(lambda: byte_offsets_kernel[None, 1](w, out, 164))
    assert fault.line == line_of(byte_offsets_kernel.fn, "p = pl.make_ptr(pl.addptr(w, skip)")
    assert fault.op == "addptr"
    assert "the pointer at byte 0 moved by 164 elements of 1 bytes leaves its buffer" in str(fault)
    # its end is allowed: an empty view may start there, and the load of [4, 8] is what faults then
    fault = fault_of(lambda: byte_offsets_kernel[None, 1](w, out, 160))
    assert fault.op == "load" and "outside the buffer passed for parameter 'w' (160 bytes)" in str(fault)


# ===========================================================================================
# set_stride.md: a run-time row stride gathers rows that lie apart into one tile
# ===========================================================================================

N_LINES = 512
LINE = 128
N_PAIRS = 4


@pl.jit(auto_mutex=True)
def set_stride_basic_kernel(
    x: pl.Tensor[[N_LINES, LINE], pl.DT_FP16],
    strides: pl.Tensor[[1, 1], pl.DT_INT32],
    out: pl.Tensor[[2, LINE], pl.DT_FP16],
):
    ub_type = pl.TileType(shape=[2, LINE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    ub_db = pl.make_tile_group(type=ub_type, addrs=0x0000, mutex_ids=[0, 1])

    with pl.section_vector():
        s = strides[0, 0]
        tile = ub_db.next()
        pl.set_stride(x, [s, 1])
        pl.load(tile, x, [0, 0])
        pl.store(out, tile, [0, 0])


@pl.jit(auto_mutex=True)
def set_stride_loop_kernel(
    x: pl.Tensor[[N_LINES, LINE], pl.DT_FP16],
    strides: pl.Tensor[[1, N_PAIRS], pl.DT_INT32],
    out: pl.Tensor[[2 * N_PAIRS, LINE], pl.DT_FP16],
):
    ub_type = pl.TileType(shape=[2, LINE], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    ub_db = pl.make_tile_group(type=ub_type, addrs=0x0000, mutex_ids=[0, 1])

    with pl.section_vector():
        for i in pl.range(0, N_PAIRS, 1):
            s = strides[0, i]
            tile = ub_db.next()
            pl.set_stride(x, [s, 1])
            pl.load(tile, x, [i, 0])
            pl.store(out, tile, [2 * i, 0])


def test_set_stride_gathers_two_lines():
    x = torch.randn(N_LINES, LINE, generator=seeded(4)).half()
    out = torch.zeros(2, LINE, dtype=torch.float16)
    set_stride_basic_kernel[None, 1](x, torch.tensor([[LINE * 37]], dtype=torch.int32), out)
    sync()
    assert torch.equal(out[0], x[0]) and torch.equal(out[1], x[37])


def test_set_stride_in_a_loop():
    x = torch.randn(N_LINES, LINE, generator=seeded(5)).half()
    steps = [LINE, 3 * LINE, 50 * LINE, 100 * LINE]
    out = torch.zeros(2 * N_PAIRS, LINE, dtype=torch.float16)
    set_stride_loop_kernel[None, 1](x, torch.tensor([steps], dtype=torch.int32), out)
    sync()
    flat = x.reshape(-1)
    for i, s in enumerate(steps):  # rows i and i + 1 of a view with row stride s
        assert torch.equal(out[2 * i], flat[i * s:i * s + LINE]), i
        assert torch.equal(out[2 * i + 1], flat[(i + 1) * s:(i + 1) * s + LINE]), i


def test_set_stride_past_the_buffer_faults_at_the_load():
    x = torch.randn(N_LINES, LINE, generator=seeded(6)).half()
    out = torch.zeros(2, LINE, dtype=torch.float16)
    fault = fault_of(lambda: set_stride_basic_kernel[None, 1](x, torch.tensor([[LINE * N_LINES]],
                                                                              dtype=torch.int32), out))
    assert fault.line == line_of(set_stride_basic_kernel.fn, "pl.load(tile, x, [0, 0])")
    assert "GM access outside the buffer passed for parameter 'x' (131072 bytes)" in str(fault)
    assert "bytes [0, 131328)" in str(fault)
    assert torch.all(out == 0)


def test_negative_run_time_stride_faults_at_set_stride():
    x = torch.zeros(N_LINES, LINE, dtype=torch.float16)
    out = torch.zeros(2, LINE, dtype=torch.float16)
    fault = fault_of(lambda: set_stride_basic_kernel[None, 1](x, torch.tensor([[-LINE]], dtype=torch.int32), out))
    assert fault.line == line_of(set_stride_basic_kernel.fn, "pl.set_stride(x, [s, 1])")
    assert "stride 0 of 'x' is -128; strides must not be negative" in str(fault)


# ===========================================================================================
# kernel_function.md (tutorial): pl.Ptr parameters whose shape comes from TilingData
# ===========================================================================================

@dataclass
class AddTiling:
    rows: int
    cols: int


@pl.jit(auto_mutex=True)
def dynamic_kernel(
    x: pl.Ptr[pl.DT_FP16],
    out: pl.Ptr[pl.DT_FP16],
    scale: pl.DT_FP32,
    tiling: AddTiling,
):
    tensor_x = pl.make_tensor(x, [tiling.rows, tiling.cols])
    tensor_out = pl.make_tensor(out, [tiling.rows, tiling.cols])
    tt = pl.TileType(shape=[16, 64], dtype=pl.DT_FP16, valid_shape=[-1, -1])
    g = pl.make_tile_group(type=tt, addrs=0x0, mutex_ids=[0, 1])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), (tiling.rows + 15) // 16, pl.get_block_num()):
            for j in pl.range(0, (tiling.cols + 63) // 64):
                t = g.next()
                pl.set_validshape(t, [pl.min(16, tiling.rows - i * 16), pl.min(64, tiling.cols - j * 64)])
                pl.load(t, tensor_x, [i * 16, j * 64])
                pl.muls(t, t, scale)
                pl.store(tensor_out, t, [i * 16, j * 64])


@pytest.mark.parametrize("rows, cols", [(16, 64), (37, 100), (5, 200)])
def test_shape_from_tiling_data(rows, cols):
    x = torch.randn(rows, cols, generator=seeded(rows)).half()
    out = torch.zeros(rows, cols, dtype=torch.float16)
    dynamic_kernel[None, 3](x, out, 0.75, AddTiling(rows, cols))
    sync()
    torch.testing.assert_close(out, (x.float() * 0.75).half(), rtol=1e-3, atol=1e-3)


def test_shape_from_tiling_data_never_recompiles():
    compiles = None
    for rows, cols in [(8, 8), (3, 130), (70, 5)]:
        x = torch.randn(rows, cols, generator=seeded(7)).half()
        out = torch.zeros(rows, cols, dtype=torch.float16)
        dynamic_kernel[None, 2](x, out, 2.0, AddTiling(rows, cols))
        sync()
        assert torch.equal(out, x * 2)  # doubling is exact in fp16
        if compiles is None:
            compiles = dynamic_kernel.cache_info()["compiles"]
    assert dynamic_kernel.cache_info()["compiles"] == compiles


def test_tiling_data_larger_than_the_buffer_faults():
    x = torch.ones(16, 64, dtype=torch.float16)
    out = torch.zeros(16, 64, dtype=torch.float16)
    fault = fault_of(lambda: dynamic_kernel[None, 1](x, out, 1.0, AddTiling(32, 64)))
    assert fault.line == line_of(dynamic_kernel.fn, "pl.load(t, tensor_x, [i * 16, j * 64])")
    assert "outside the buffer passed for parameter 'x' (2048 bytes)" in str(fault)
    assert "tensor 'tensor_x' of shape [32, 64], offsets [16, 0], window [16, 64]" in str(fault)


# ===========================================================================================
# load.md (the section on rebuilding views): inputs of 2 to 4 dims folded into [M, N]; BSND as TND
# ===========================================================================================

@dataclass
class FoldTiling:
    shape: "int[4]"


@pl.jit(auto_mutex=True)
def add_dynrank_kernel(x: pl.Ptr[pl.DT_FP16], y: pl.Ptr[pl.DT_FP16], z: pl.Ptr[pl.DT_FP16], tiling: FoldTiling):
    N = tiling.shape[3]
    M = tiling.shape[0] * tiling.shape[1] * tiling.shape[2]
    tensor_x = pl.make_tensor(x, [M, N], [N, 1])
    tensor_y = pl.make_tensor(y, [M, N], [N, 1])
    tensor_z = pl.make_tensor(z, [M, N], [N, 1])
    tt = pl.TileType(shape=[16, 64], dtype=pl.DT_FP16)
    tile_a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])
    tile_b = pl.make_tile_group(type=tt, addrs=0x4000, mutex_ids=[2, 3])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), M // 16, pl.get_block_num()):
            for j in pl.range(0, N // 64):
                a, b = tile_a.next(), tile_b.next()
                pl.load_tile(a, tensor_x, [i, j])
                pl.load_tile(b, tensor_y, [i, j])
                pl.add(a, a, b)
                pl.store_tile(tensor_z, a, [i, j])


@pytest.mark.parametrize("shape", [(2, 4, 32, 64), (8, 32, 128), (64, 192)])
def test_dynamic_rank_folded_to_2d(shape):
    x = torch.randn(*shape, generator=seeded(8)).half()
    y = torch.randn(*shape, generator=seeded(9)).half()
    z = torch.zeros(*shape, dtype=torch.float16)
    padded = [1] * (4 - len(shape)) + list(shape)
    add_dynrank_kernel[None, 4](x, y, z, FoldTiling(padded))
    sync()
    torch.testing.assert_close(z, (x.float() + y.float()).half(), rtol=0, atol=0)


B, S, N, D, TS = 2, 32, 4, 64, 16


@pl.jit
def bsnd_as_tnd_kernel(q: pl.Tensor[[B, S, N, D], pl.DT_FP32], out: pl.Tensor[[N, B * S, D], pl.DT_FP32]):
    q_tnd = pl.make_tensor(q, [B * S, N, D], [N * D, D, 1])  # B and S folded into T = B * S
    t = pl.make_tile(pl.TileType(shape=[TS, D], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        for n in pl.range(0, N):
            for ti in pl.range(0, B * S // TS):
                pl.load_tile(t, q_tnd, [ti, n, 0], order=[0, 2])  # the (T, D) plane of head n
                pl.store(out, t, [n, ti * TS, 0])


def test_bsnd_viewed_as_tnd():
    q = torch.randn(B, S, N, D, generator=seeded(10))
    out = torch.zeros(N, B * S, D)
    bsnd_as_tnd_kernel[None, 1](q, out)
    sync()
    assert torch.equal(out, q.reshape(B * S, N, D).permute(1, 0, 2))


# ===========================================================================================
# offline_binary_compilation.md: a datatype= kernel over pl.Ptr[pl.DT_UINT8] parameters
# ===========================================================================================

@dataclass
class AddExampleTilingData:
    total_length: int
    tile_num: int


@pl.jit(datatype={"x": "data_dtype", "y": "data_dtype", "z": "data_dtype"})
def add_example(
    x: pl.Ptr[pl.DT_UINT8],
    y: pl.Ptr[pl.DT_UINT8],
    z: pl.Ptr[pl.DT_UINT8],
    workspace: pl.Ptr[pl.DT_UINT8],
    tiling: AddExampleTilingData,
):
    x_tensor = pl.make_tensor(x, [tiling.total_length], [1], dtype=data_dtype)
    y_tensor = pl.make_tensor(y, [tiling.total_length], [1], dtype=data_dtype)
    z_tensor = pl.make_tensor(z, [tiling.total_length], [1], dtype=data_dtype)
    tt = pl.TileType(shape=[64], dtype=data_dtype, valid_shape=[-1])
    a = pl.make_tile(tt, addr=0x0)
    b = pl.make_tile(tt, addr=0x400)
    with pl.section_vector():
        per_block = (tiling.total_length + pl.get_block_num() - 1) // pl.get_block_num()
        start = pl.get_block_idx() * per_block
        stop = pl.min(start + per_block, tiling.total_length)
        for off in pl.range(start, stop, tiling.tile_num):
            n = pl.min(tiling.tile_num, stop - off)
            pl.set_validshape(a, [n])
            pl.set_validshape(b, [n])
            pl.load(a, x_tensor, [off])
            pl.load(b, y_tensor, [off])
            pl.add(a, a, b)
            pl.store(z_tensor, a, [off])


@pytest.mark.parametrize("dtype, torch_dtype, tol", [
    (pl.DT_FP16, torch.float16, 1e-3),
    (pl.DT_BF16, torch.bfloat16, 1e-2),
    (pl.DT_FP32, torch.float32, 1e-6),
    (pl.DT_INT32, torch.int32, 0),
])
def test_dtype_generic_over_byte_pointers(dtype, torch_dtype, tol):
    n = 1000
    if torch_dtype.is_floating_point:
        x = torch.randn(n, generator=seeded(11)).to(torch_dtype)
        y = torch.randn(n, generator=seeded(12)).to(torch_dtype)
    else:
        x = torch.randint(-1000, 1000, (n,), generator=seeded(11), dtype=torch_dtype)
        y = torch.randint(-1000, 1000, (n,), generator=seeded(12), dtype=torch_dtype)
    z = torch.zeros(n, dtype=torch_dtype)
    workspace = torch.zeros(16, dtype=torch.uint8)
    types = {"x": dtype, "y": dtype, "z": dtype}
    add_example[None, 3, types](x, y, z, workspace, AddExampleTilingData(n, 64))
    sync()
    torch.testing.assert_close(z.float(), (x.float() + y.float()).to(torch_dtype).float(), rtol=tol, atol=tol)


def test_datatype_dict_decides_the_pointer_arguments_dtype():
    x = torch.zeros(8, dtype=torch.float16)
    y = torch.zeros(8, dtype=torch.float32)
    with pytest.raises(TypeError) as info:
        add_example[None, 1, {"x": pl.DT_FP16, "y": pl.DT_FP16, "z": pl.DT_FP16}](
            x, y, x, torch.zeros(4, dtype=torch.uint8), AddExampleTilingData(8, 8))
    assert "add_example(): argument 'y' (a pl.Ptr) expects a buffer of dtype fp16 (pl.DT_FP16) as its datatype " \
           "dict says, got torch.float32" in str(info.value)


@pl.jit(datatype={"src": "T", "dst": "T"})
def typed_pointer_copy(src: pl.Ptr["T"], dst: pl.Ptr["T"], n: pl.DT_INT32):
    s = pl.make_tensor(src, [n])
    d = pl.make_tensor(dst, [n])
    with pl.section_vector():
        for i in pl.range(0, n):
            d[i] = s[n - 1 - i] + 1  # element access through views, in the pointers' dtype


def test_pointer_dtype_from_its_datatype_variable():
    for dtype, np_dtype in ((pl.DT_INT16, np.int16), (pl.DT_FP32, np.float32)):
        src = np.arange(10, dtype=np_dtype)
        dst = np.zeros(10, np_dtype)
        typed_pointer_copy[None, 1, {"src": dtype, "dst": dtype}](src, dst, 10)
        sync()
        np.testing.assert_array_equal(dst, src[::-1] + 1)


# ===========================================================================================
# make_tensor.md: shape and stride swapped describe the transpose; views over tensors
# ===========================================================================================

@pl.jit
def transposed_view_kernel(a: pl.Ptr[pl.DT_FP32], out: pl.Tensor[[16, 8], pl.DT_FP32],
                           cols: pl.Tensor[[2, 16], pl.DT_FP32]):
    normal = pl.make_tensor(a, [8, 16], [16, 1])
    transposed = pl.make_tensor(a, [16, 8], [1, 16])
    t = pl.make_tile(pl.TileType(shape=[16, 8], dtype=pl.DT_FP32), addr=0)
    c = pl.make_tile(pl.TileType(shape=[2, 16], dtype=pl.DT_FP32), addr=0x400)
    with pl.section_vector():
        pl.load(t, transposed, [0, 0])            # columns strided in GM: gathered
        pl.store(out, t, [0, 0])
        pl.load(c, transposed, [0, 3], order=[1, 0])  # rows 3, 4 of `normal`, through the transpose
        pl.store(cols, c, [0, 0])
        transposed[2, 1] = normal[5, 3] + 100.0   # the same memory under two views


def test_transposed_view():
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    before = a.copy()
    out = np.zeros((16, 8), np.float32)
    cols = np.zeros((2, 16), np.float32)
    transposed_view_kernel[None, 1](a, out, cols)
    sync()
    np.testing.assert_array_equal(out, before.T)
    np.testing.assert_array_equal(cols, before[3:5])
    expected = before.copy()
    expected[1, 2] = before[5, 3] + 100.0
    np.testing.assert_array_equal(a, expected)


@pl.jit
def tensor_view_kernel(x: pl.Tensor[[8, 32], pl.DT_FP16], out: pl.Tensor[[4, 32], pl.DT_INT16],
                       half: pl.Tensor[[4, 32], pl.DT_FP16]):
    bits = pl.make_tensor(x, [8, 32], dtype=pl.DT_INT16)   # a tensor's bytes read as int16
    every_other = pl.make_tensor(x, [4, 32], [64, 1])      # rows 0, 2, 4, 6
    t = pl.make_tile(pl.TileType(shape=[4, 32], dtype=pl.DT_INT16), addr=0)
    h = pl.make_tile(pl.TileType(shape=[4, 32], dtype=pl.DT_FP16), addr=0x400)
    with pl.section_vector():
        pl.load(t, bits, [4, 0])
        pl.store(out, t, [0, 0])
        pl.load(h, every_other, [0, 0])
        pl.store(half, h, [0, 0])


def test_views_over_a_tensor_parameter():
    x = torch.randn(8, 32, generator=seeded(13)).half()
    out = torch.zeros(4, 32, dtype=torch.int16)
    half = torch.zeros(4, 32, dtype=torch.float16)
    tensor_view_kernel[None, 1](x, out, half)
    sync()
    assert torch.equal(out, x[4:].view(torch.int16))
    assert torch.equal(half, x[::2])


# ===========================================================================================
# Tensor.md (aliases): a name bound to a view keeps it; views in loops; element access and dumps
# ===========================================================================================

@pl.jit
def alias_and_loop_kernel(w: pl.Ptr[pl.DT_INT32], out: pl.Tensor[[6], pl.DT_INT32], n: pl.DT_INT32):
    first = pl.make_tensor(w, [4])
    alias = first
    first = pl.make_tensor(pl.addptr(w, 4), [4])      # rebinding `first` leaves `alias` alone
    with pl.section_vector():
        out[0] = alias[0]
        out[1] = first[0]
        total = pl.const(0, pl.DT_INT32)
        for i in pl.range(0, n):
            row = pl.make_tensor(pl.addptr(w, i * 4), [2, 2], [2, 1])  # a new view each iteration
            total = total + row[1, 1]
        out[2] = total
        if n > 2:
            v = pl.make_tensor(w, [2, 2], [4, 1])
        else:
            v = pl.make_tensor(w, [2, 2], [1, 2])
        out[3] = v[1, 0]                                 # the view chosen at run time
        pl.set_stride(v, [1, 1])
        out[4] = v[1, 1]
        out[5] = alias.shape[0] * 10 + v.shape[1]


def test_view_names_aliases_and_loops():
    w = np.arange(100, 132, dtype=np.int32)
    for n, chosen in ((3, 104), (2, 101)):
        out = np.zeros(6, np.int32)
        alias_and_loop_kernel[None, 1](w, out, n)
        sync()
        assert out.tolist() == [100, 104, sum(w[4 * i + 3] for i in range(n)), chosen, 102, 42]


@pl.jit
def dump_view_kernel(w: pl.Ptr[pl.DT_FP32], rows: pl.DT_INT32):
    v = pl.make_tensor(w, [rows, 3], [5, 2])
    with pl.section_vector():
        pl.dump_data(v, [1, 0], [2, 3])


def test_dump_through_a_strided_view():
    w = np.arange(20, dtype=np.float32)
    dump_view_kernel[None, 1](w, 4)
    sync()
    dump = dump_view_kernel.dumps()[-1]
    np.testing.assert_array_equal(dump.data, np.array([[5, 7, 9], [10, 12, 14]], np.float32))
    # the dumped window's last element is element 14 of the buffer: a buffer of 14 elements is too short
    fault = fault_of(lambda: dump_view_kernel[None, 1](np.arange(14, dtype=np.float32), 4))
    assert fault.line == line_of(dump_view_kernel.fn, "pl.dump_data(v, [1, 0], [2, 3])")
    assert fault.op == "dump_data" and "outside the buffer passed for parameter 'w' (56 bytes)" in str(fault)
    assert "it would touch bytes [20, 60) of that buffer" in str(fault)


@pl.jit
def element_fault_kernel(w: pl.Ptr[pl.DT_FP32], n: pl.DT_INT32, out: pl.Tensor[[1], pl.DT_FP32]):
    v = pl.make_tensor(w, [n, 4], [8, 1])
    with pl.section_vector():
        v[n - 1, 0] = 1.0
        out[0] = v[n - 1, 3]


def test_element_access_outside_the_buffer_faults():
    w = np.zeros(16, np.float32)
    out = np.zeros(1, np.float32)
    w[11] = 7.0
    element_fault_kernel[None, 1](w, 2, out)  # elements 8 and 11: inside
    sync()
    assert out[0] == 7.0 and w[8] == 1.0
    # row 2 of the view: element 16 is the first past a buffer of 16 (the rest of `backing`)
    backing = np.full(32, 3.0, np.float32)
    fault = fault_of(lambda: element_fault_kernel[None, 1](backing[:16], 3, out))
    assert fault.line == line_of(element_fault_kernel.fn, "v[n - 1, 0] = 1.0")
    assert fault.op == "setval"
    assert "bytes [64, 68) of that buffer: tensor 'v' of shape [3, 4], offsets [2, 0], window [1, 1]" in str(fault)
    assert np.all(backing == 3.0)  # not written
    # element 16 inside an 18-element buffer, element 19 past it: the read faults
    fault = fault_of(lambda: element_fault_kernel[None, 1](np.zeros(18, np.float32), 3, out))
    assert fault.line == line_of(element_fault_kernel.fn, "out[0] = v[n - 1, 3]")
    assert fault.op == "getval" and "bytes [76, 80) of that buffer" in str(fault)


@pl.jit
def negative_dim_kernel(w: pl.Ptr[pl.DT_FP32], n: pl.DT_INT32):
    v = pl.make_tensor(w, [4, n])


def test_negative_run_time_dim_faults_at_make_tensor():
    fault = fault_of(lambda: negative_dim_kernel[None, 1](np.zeros(4, np.float32), -2))
    assert fault.line == line_of(negative_dim_kernel.fn, "v = pl.make_tensor(w, [4, n])")
    assert fault.op == "make_tensor" and "dim 1 of view 'v' is -2; dims are 0..2147483647" in str(fault)


# ===========================================================================================
# Sanitizer mode: an access outside the buffer is a GM_OUT_OF_BOUNDS finding, skipped
# ===========================================================================================

def sanitized_view(w: pl.Ptr[pl.DT_FP32], out: pl.Tensor[[4, 8], pl.DT_FP32], row: pl.DT_INT32):
    v = pl.make_tensor(w, [8, 8])
    t = pl.make_tile(pl.TileType(shape=[4, 8], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, v, [row, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, t, [0, 0])


def test_sanitizer_reports_a_view_outside_its_buffer():
    kernel = pl.jit(sanitized_view, sanitizer=True)
    w = np.arange(32, dtype=np.float32)
    out = np.zeros((4, 8), np.float32)
    kernel[None, 1](w, out, 0)
    sync()
    np.testing.assert_array_equal(out.ravel(), w)
    kernel[None, 1](w, out, 4)
    with pytest.raises(errors.SanitizerError) as info:
        sync()
    findings = [f for f in info.value.findings if f.kind == "GM_OUT_OF_BOUNDS"]
    assert findings and findings[0].line == line_of(sanitized_view, "pl.load(t, v, [row, 0])")
    assert "GM access outside the buffer passed for the tensor's parameter: tensor 'v' of shape [8, 8], " \
           "offsets [4, 0], window [4, 8]" in findings[0].message


# ===========================================================================================
# Launch errors: TypeError / ValueError naming the parameter, nothing queued
# ===========================================================================================

@pl.jit
def ptr_store_kernel(w: pl.Ptr[pl.DT_FP32], x: pl.Tensor[[4], pl.DT_FP32]):
    v = pl.make_tensor(w, [4])
    t = pl.make_tile(pl.TileType(shape=[4], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0])
        pl.store(v, t, [0])


@pytest.mark.parametrize("arg, error, message", [
    (np.zeros(4, np.float64), TypeError,
     "ptr_store_kernel(): argument 'w' (a pl.Ptr[pl.DT_FP32]) expects a buffer of dtype fp32 (pl.DT_FP32), "
     "got float64"),
    (torch.zeros(4, dtype=torch.float16), TypeError,
     "argument 'w' (a pl.Ptr[pl.DT_FP32]) expects a buffer of dtype fp32 (pl.DT_FP32), got torch.float16"),
    (3, TypeError, "argument 'w' (a pl.Ptr[pl.DT_FP32]) must be a torch.Tensor or numpy.ndarray whose buffer the "
                   "kernel uses, got int"),
    (np.zeros(8, np.float32)[::2], ValueError,
     "argument 'w' (a pl.Ptr[pl.DT_FP32]) must be contiguous (row-major) with shape (4,)"),
    (torch.zeros(4, 4).t(), ValueError, "must be contiguous (row-major) with shape (4, 4)"),
])
def test_wrong_pointer_argument(arg, error, message):
    with pytest.raises(error) as info:
        ptr_store_kernel[None, 1](arg, np.zeros(4, np.float32))
    assert message in str(info.value)


def test_written_pointer_buffer_must_be_writable():
    w = np.zeros(4, np.float32)
    w.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'w' is a read-only array"):
        ptr_store_kernel[None, 1](w, np.zeros(4, np.float32))
    # a pointer of any rank works; the store writes its first four elements
    w = np.zeros((2, 3), np.float32)
    ptr_store_kernel(w, np.arange(4, dtype=np.float32))
    sync()
    assert w.ravel().tolist() == [0, 1, 2, 3, 0, 0]


def test_byte_pointer_takes_only_dtypes_the_language_has():
    with pytest.raises(TypeError, match=r"argument 'workspace' \(a pl.Ptr\[pl.DT_UINT8\]\) expects a buffer of a "
                                        r"dtype the language has \(a pl.DT_\* dtype\), got float64"):
        make_ptr_kernel[None, 1](np.zeros(64 * 128, np.float64), torch.zeros(64, 128, dtype=torch.float16))


def test_pointer_annotations_checked_when_the_kernel_is_built():
    def names_a_variable(w: pl.Ptr["T"]):
        pass

    with pytest.raises(TypeError, match=r"parameter 'w': pl.Ptr\['T'\] names a dtype variable, but it is not in "
                                        r"datatype="):
        pl.jit(names_a_variable)
    with pytest.raises(TypeError, match="pl.Ptr takes a pl.DT_"):
        pl.Ptr[3]

    def unsupported(w: pl.Ptr[pl.DT_FP8E5M2]):
        pass

    with pytest.raises(TypeError, match=r"parameter 'w': pl.Ptr dtype pl.DT_FP8E5M2 is not supported yet"):
        pl.jit(unsupported)


# ===========================================================================================
# Compile errors: located at the call, ParserError subclasses
# ===========================================================================================

def compile_error(fn, text, cls, message, *args):
    with pytest.raises(cls) as info:
        pl.jit(fn)[None, 1](*args)
    err = info.value
    assert isinstance(err, errors.ParserError)
    assert message in err.message, err.message
    assert err.lineno == line_of(fn, text), str(err)
    return err


W = np.zeros(64, np.float32)
X = np.zeros((4, 4), np.float32)


def test_make_tensor_needs_a_pointer_or_tensor():
    def body(w: pl.Ptr[pl.DT_FP32], n: pl.DT_INT32):
        v = pl.make_tensor(n, [4])

    compile_error(body, "pl.make_tensor(n, [4])", errors.ParserTypeError,
                  "pl.make_tensor views a pl.Ptr or a GM tensor, got a run-time int32 scalar", W, 1)


@pytest.mark.parametrize("call, cls, message", [
    ("pl.make_tensor(w, [4, -1])", errors.ParserValueError,
     "pl.make_tensor shape entry 1 is -1; it must not be negative"),
    ("pl.make_tensor(w, [4, 4], [4])", errors.ParserTypeError,
     "pl.make_tensor stride needs one entry per shape entry (2), got 1"),
    ("pl.make_tensor(w, [4, 4], [-4, 1])", errors.ParserValueError, "pl.make_tensor stride entry 0 is -4"),
    ("pl.make_tensor(w, [])", errors.ParserTypeError, "pl.make_tensor shape needs 1 to 8 entries, got 0"),
    ("pl.make_tensor(w, [1] * 9)", errors.ParserTypeError, "pl.make_tensor shape needs 1 to 8 entries, got 9"),
    ("pl.make_tensor(w, 4)", errors.ParserTypeError, "pl.make_tensor shape must be a list of integers, got 4"),
    ("pl.make_tensor(w, [4, 2.5])", errors.ParserTypeError, "pl.make_tensor shape entry 1 must be an integer"),
    ("pl.make_tensor(w, [f, 4])", errors.ParserTypeError,
     "pl.make_tensor shape entry 0 must be an integer, got a fp32 value"),
    ("pl.make_tensor(w, [4], dtype=pl.DT_FP8E4M3FN)", errors.ParserTypeError,
     "pl.make_tensor dtype pl.DT_FP8E4M3FN is not supported yet"),
    ("pl.make_tensor(w, [4], dtype=4)", errors.ParserTypeError, "pl.make_tensor dtype= must be a pl.DT_* value"),
    ("pl.addptr(x, 4)", errors.ParserTypeError, "pl.addptr takes a pl.Ptr, got GM tensor 'x'"),
    ("pl.addptr(w, f)", errors.ParserTypeError, "pl.addptr offset must be an integer, got a fp32 value"),
    ("pl.make_ptr(x, pl.DT_INT32)", errors.ParserTypeError, "pl.make_ptr takes a pl.Ptr, got GM tensor 'x'"),
    ("pl.make_ptr(w, dtype='fp16')", errors.ParserTypeError, "pl.make_ptr dtype= must be a pl.DT_* value"),
    ("pl.make_tensor(w)", errors.ParserTypeError, "is missing its 'shape' argument"),
])
def test_bad_view_arguments(tmp_path, call, cls, message):
    src = f'''
def body(w: pl.Ptr[pl.DT_FP32], x: pl.Tensor[[4, 4], pl.DT_FP32], f: pl.DT_FP32):
    v = {call}
'''
    namespace = {"pl": pl}
    path = str(tmp_path / "bad_view_arguments.py")
    with open(path, "w") as fh:
        fh.write(src)
    exec(compile(src, path, "exec"), namespace)
    with pytest.raises(cls) as info:
        pl.jit(namespace["body"])[None, 1](W, X, 1.0)
    assert message in info.value.message, info.value.message
    assert info.value.lineno == 3 and info.value.filename == path


def test_addptr_hints_make_tensor_for_a_tensor():
    def body(x: pl.Tensor[[4, 4], pl.DT_FP32]):
        p = pl.addptr(x, 4)

    err = compile_error(body, "pl.addptr(x, 4)", errors.ParserTypeError, "pl.addptr takes a pl.Ptr", X)
    assert "pl.make_tensor(tensor, shape, stride)" in err.hint


def test_pointer_is_no_tensor():
    def body(w: pl.Ptr[pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[4, 8], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, w, [0, 0])

    compile_error(body, "pl.load(t, w, [0, 0])", errors.ParserTypeError,
                  "pl.load argument 2 cannot be pointer 'w' (pl.DT_FP32)", W)

    def shape_of_pointer(w: pl.Ptr[pl.DT_FP32]):
        n = w.shape[0]

    err = compile_error(shape_of_pointer, "n = w.shape[0]", errors.ParserTypeError,
                        "pointer 'w' (pl.DT_FP32) has no attribute 'shape' in kernels", W)
    assert "pl.make_tensor(ptr, shape, stride)" in err.hint


def test_set_stride_arguments():
    def too_many(x: pl.Tensor[[4, 4], pl.DT_FP32]):
        pl.set_stride(x, [4, 1, 1])

    compile_error(too_many, "pl.set_stride(x, [4, 1, 1])", errors.ParserTypeError,
                  "pl.set_stride: 'stride' needs one entry per axis of tensor 'x' (2), got 3", X)

    def negative(x: pl.Tensor[[4, 4], pl.DT_FP32]):
        pl.set_stride(x, [-4, 1])

    compile_error(negative, "pl.set_stride(x, [-4, 1])", errors.ParserValueError,
                  "pl.set_stride: a stride is -4; strides must not be negative", X)

    def of_pointer(w: pl.Ptr[pl.DT_FP32]):
        pl.set_stride(w, [1])

    compile_error(of_pointer, "pl.set_stride(w, [1])", errors.ParserTypeError,
                  "pl.set_stride argument 1 cannot be pointer 'w'", W)


def test_pointer_annotation_in_a_kernel():
    def good(w: pl.Ptr[pl.DT_UINT8], out: pl.Tensor[[2], pl.DT_INT16]):
        p: pl.Ptr[pl.DT_INT16] = pl.make_ptr(w, pl.DT_INT16)
        v: pl.Tensor[[2], pl.DT_INT16] = pl.make_tensor(p, [2])
        with pl.section_vector():
            out[0] = v[1]
            out[1] = 1 if v.dtype == pl.DT_INT16 else 0

    out = np.zeros(2, np.int16)
    pl.jit(good)[None, 1](np.array([1, 2, 3, 4], np.uint8), out)
    sync()
    assert out.tolist() == [4 * 256 + 3, 1]

    def bad(w: pl.Ptr[pl.DT_UINT8]):
        p: pl.Ptr[pl.DT_INT16] = w

    compile_error(bad, "p: pl.Ptr[pl.DT_INT16] = w", errors.ParserTypeError,
                  "the annotation pl.Ptr[pl.DT_INT16] does not match pointer 'w' to pl.DT_UINT8",
                  np.zeros(4, np.uint8))


def test_names_are_built_not_planned():
    for name in ("make_tensor", "make_ptr", "addptr"):
        assert getattr(pl, name).kind == "special"
    assert pl.set_stride.kind == "op"
    planned = {name for name, _ in pypto_pro._C.ir.planned_ops()}
    assert not planned & {"make_tensor", "make_ptr", "addptr", "set_stride"}
    with pytest.raises(RuntimeError, match="can only be used inside a @pl.jit kernel body"):
        pl.make_tensor(None, [4])

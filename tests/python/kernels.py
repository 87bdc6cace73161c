"""Kernels and helpers shared by the tests. make_add_kernel builds a fresh kernel object each call (so
each test sees its own compile counts) from the add kernel of docs/language.md#kernels-and-launch."""

import importlib.util
import inspect
import sys
import threading
from pathlib import Path

import torch

import pypto_pro
import pypto_pro.language as pl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name, prefix="example"):
    """A fresh module of examples/<name>.py (its own kernel objects and compile counts), named
    <prefix>_<name>. examples/ is on the import path, as when an example runs as a script (one
    imports another's helpers)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.append(str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"{prefix}_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def module_from_source(tmp_path, name, source):
    """The module of kernel source text written to tmp_path/<name>.py (kernels need a file: the
    front end reads their source lines)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(fn, text):
    """The source line of the first line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def fault_of(error):
    """A KernelFault as what two runs of one program must agree on: (op, line, the first line of its
    message without the kernel's name)."""
    return (error.op, error.line, str(error).split("\n")[0].split(": ", 1)[-1])


def synchronize_fault():
    """Synchronizes the device: the fault it raises, as fault_of, or None."""
    try:
        pypto_pro.runtime.synchronize()
    except pypto_pro.KernelFault as e:
        return fault_of(e)
    return None


def cpu_flags():
    """The host CPU's feature flags (/proc/cpuinfo)."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def fp16_matmul_on_amx():
    """Whether fp16 matmuls run on the AMX tile unit here (gemm.h: each value split into two bf16):
    their fp32 sums then group the products otherwise than one fp32 sum per k."""
    return "amx_bf16" in cpu_flags()


def fused_and_unfused(monkeypatch, fn, name, launch, dump, **jit_options):
    """`fn` compiled (with `jit_options`) without the fusion passes (PYPTO_PRO_FUSE_ROWS=0) and with
    them, each launched by `launch(kernel)` on its compiled library (no tier-0): (unfused results, fused
    results, the fused instance's IR dump `dump` (PYPTO_PRO_DUMP_IR's ir_<n>_<pass>.txt), its
    kernel.cpp)."""
    results = []
    for fuse in ("0", "1"):
        monkeypatch.setenv("PYPTO_PRO_FUSE_ROWS", fuse)
        monkeypatch.setenv("PYPTO_PRO_DUMP_IR", "1")
        monkeypatch.setenv("PYPTO_PRO_TIER0", "0")
        kernel = pl.jit(fn, name=f"{name}_fuse{fuse}", **jit_options)
        results.append(launch(kernel))
        pypto_pro.runtime.synchronize()
        inst = Path(kernel.instances()[0].dir)
    return results[0], results[1], (inst / dump).read_text(), (inst / "kernel.cpp").read_text()


def pipeline_generated(kernel, tiling_key=None, **jit_options):
    """The pipeline_generated.py of `kernel`'s instance for `tiling_key` (a dict; None: the last
    instance), loaded as a module, and its kernel as a plain pl.jit kernel with `jit_options`
    (sanitizer=True, ...)."""
    dirs = [s["dir"] for s in kernel.signatures() if tiling_key is None or s["tiling_key"] == tiling_key]
    path = Path(dirs[-1]) / "pipeline_generated.py"
    spec = importlib.util.spec_from_file_location(f"generated_{kernel.kernel_name}_{len(dirs)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generated = getattr(module, kernel.kernel_name + "_generated")
    assert generated.pipeline is None  # a plain kernel
    return pl.jit(generated.fn, name=kernel.kernel_name + "_generated", **jit_options) if jit_options else generated


class SlotsKey:
    """slots_add's TilingKey: single (1) or double (2) buffered tiles."""
    Slots = pl.TilingKeyField(bits=2, values=[1, 2])


def slots_add(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16], y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
              z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16]):
    """z = x + y in 128x128 fp16 tiles, single- or double-buffered by the TilingKey (the profiler's and
    the autotuner's tests: pl.jit(slots_add, tiling_key=SlotsKey))."""
    tt = pl.TileType(shape=[128, 128], dtype=pl.DT_FP16)
    if Slots == 2:
        a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])
        b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
        c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4, 5])
    else:
        a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0])
        b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2])
        c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[4])
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 128, pl.get_block_num()):
            for j in pl.range(0, x.shape[1] // 128, 1):
                ta, tb, tc = a.next(), b.next(), c.next()
                pl.load_tile(ta, x, [i, j])
                pl.load_tile(tb, y, [i, j])
                pl.add(tc, ta, tb)
                pl.store_tile(z, tc, [i, j])


@pl.jit
def add_n(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32], n: pl.DT_INT64):
    """y = x + n, one pl.adds per iteration: a kernel as long as we like (n = 2**62 never ends)."""
    t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        for i in pl.range(n):
            pl.adds(t, t, 1.0)
        pl.store(y, t, [0, 0])


def run_threads(n, target):
    """Runs target(i) on n threads released together; fails with every thread's exception."""
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # reported below, with the thread's index
            errors.append((i, exc))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def make_add_kernel(dtype=pl.DT_FP16, tile=(128, 128), name=None):
    rows, cols = tile

    def add_kernel(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
                   y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype],
                   z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], dtype]):
        tt = pl.TileType(shape=[rows, cols], dtype=dtype, target_memory=pl.MemorySpace.Vec)
        a = pl.make_tile_group(type=tt, addrs=0x0000, mutex_ids=[0, 1])     # double buffer in UB
        b = pl.make_tile_group(type=tt, addrs=0x10000, mutex_ids=[2, 3])
        c = pl.make_tile_group(type=tt, addrs=0x20000, mutex_ids=[30, 31])
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), x.shape[0] // rows, pl.get_block_num()):
                for j in pl.range(0, x.shape[1] // cols, 1):
                    ta, tb, tc = a.next(), b.next(), c.next()
                    pl.load_tile(ta, x, [i, j]); pl.load_tile(tb, y, [i, j])
                    pl.add(tc, ta, tb)
                    pl.store_tile(z, tc, [i, j])

    return pl.jit(add_kernel, auto_mutex=True, name=name)


# Tiles that fit three double-buffered groups in 0x30000 bytes of UB.
TILE_FOR = {pl.DT_FP16: (128, 128), pl.DT_FP32: (64, 128)}


def make_matmul(dtype, acc_dtype, m, k, n, name):
    """A kernel computing c = a @ b (a [m, k], b [k, n] of `dtype`, c of `acc_dtype`) through L1,
    L0A/L0B and L0C in one matmul."""
    def matmul(a: pl.Tensor[[m, k], dtype], b: pl.Tensor[[k, n], dtype], c: pl.Tensor[[m, n], acc_dtype]):
        ta = pl.make_tile(pl.TileType(shape=[m, k], dtype=dtype, target_memory=pl.MemorySpace.Mat), addr=0x0)
        tb = pl.make_tile(pl.TileType(shape=[k, n], dtype=dtype, target_memory=pl.MemorySpace.Mat), addr=0x4000)
        tl = pl.make_tile(pl.TileType(shape=[m, k], dtype=dtype, target_memory=pl.MemorySpace.Left), addr=0x0)
        tr = pl.make_tile(pl.TileType(shape=[k, n], dtype=dtype, target_memory=pl.MemorySpace.Right), addr=0x0)
        tc = pl.make_tile(pl.TileType(shape=[m, n], dtype=acc_dtype, target_memory=pl.MemorySpace.Acc), addr=0x0)
        with pl.section_cube():
            pl.load(ta, a, [0, 0])
            pl.load(tb, b, [0, 0])
            pl.move(tl, ta)
            pl.move(tr, tb)
            pl.matmul(tc, tl, tr)
            pl.store(c, tc, [0, 0])
    return pl.jit(matmul, name=name)


int8_matmul = make_matmul(pl.DT_INT8, pl.DT_INT32, 64, 128, 64, "int8_matmul")


def _exp_rows(x: pl.Tensor[[16, 256], pl.DT_FP32], y: pl.Tensor[[16, 256], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[16, 256], dtype=pl.DT_FP32), addr=0x0)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        pl.exp(t, t)
        pl.store(y, t, [0, 0])


exp_rows = pl.jit(_exp_rows, name="exp_rows")


def exp_inputs():
    """Inputs of exp_rows across its whole range (underflow to subnormals and zero, overflow, specials)."""
    x = torch.linspace(-110.0, 92.0, 16 * 256).reshape(16, 256)
    x[0, :6] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30])
    return x


def _example_attention(module):
    """The attention example's outputs for one input, causal and not."""
    q, k, v = (torch.randn(1, 256, 2, 128).half() for _ in range(3))
    return [module.attention(q, k, v, causal, block_dim=3) for causal in (False, True)]


def _example_matmul(module):
    a, b = torch.randn(256, 128).half(), torch.randn(128, 384).half()
    c = torch.empty(256, 384)
    module.matmul_kernel[None, 5](a, b, c)
    return c


def _example_add(module):
    x, y = torch.randn(256, 384).half(), torch.randn(256, 384).half()
    z = torch.empty_like(x)
    module.add_kernel[None, 5](x, y, z)
    return z


# Every example but distributed.py (which runs softmax.py's kernel on several processes): its own
# launch code, on a fresh module (load_example); the differential tests run each twice (fused and
# unfused: test_fuse_rows.py; on the tier-0 executor and compiled: test_tier0.py) and compare the bits.
EXAMPLE_RUNS = {
    "add": _example_add,
    "matmul": _example_matmul,
    "softmax": lambda m: m.softmax(torch.randn(1000, 300) * 3, block_dim=7),
    "layernorm": lambda m: m.layernorm(torch.randn(777, 300) * 3, torch.randn(300), torch.randn(300), block_dim=7),
    "fused_softmax_matmul": lambda m: m.run(m=96, block_dim=3, seed=1)[0],
    "flash_attention": _example_attention,
    "flash_attention_gm": _example_attention,
    "flash_attention_pipeline": _example_attention,
    "pipeline_mlp": lambda m: m.relu_mlp(torch.randn(192, 64), torch.randn(64, 64), torch.randn(64, 64)),
    "data_paths": lambda m: [path()[0] for path in m.PATHS],
}


def example_outputs(monkeypatch, name, variable, values):
    """EXAMPLE_RUNS[name] on a fresh module of the example (its kernels compile anew) for each value of
    the environment variable `variable`: [(module, its outputs as a list)] in the order of `values`."""
    runs = []
    for value in values:
        monkeypatch.setenv(variable, value)
        module = load_example(name, f"ex_{variable.removeprefix('PYPTO_PRO_').lower()}_{value}")
        torch.manual_seed(0)
        out = EXAMPLE_RUNS[name](module)
        pypto_pro.runtime.synchronize()
        runs.append((module, out if isinstance(out, list) else [out]))
    return runs

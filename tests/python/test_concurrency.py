"""Several threads and processes compiling and launching at once (docs/jit.md)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import run_threads

PYTHONPATH = str(Path(pypto_pro.__file__).resolve().parent.parent)


def make_static_scale(name):
    @pl.jit(name=name)
    def scale(x: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            for i in pl.range(pl.get_block_idx(), x.shape[0] // 8, pl.get_block_num()):
                pl.load_tile(t, x, [i, 0])
                pl.muls(t, t, 3.0)
                pl.store_tile(y, t, [i, 0])
    return scale


def test_threads_launching_one_new_signature_compile_it_once():
    kernel = make_static_scale("scale_threads_same")
    x = torch.randn(64, 64)
    outs = [torch.zeros_like(x) for _ in range(8)]
    run_threads(8, lambda i: kernel[None, 2](x, outs[i]))
    pypto_pro.runtime.synchronize()
    assert kernel.cache_info()["compiles"] == 1
    assert all(torch.equal(o, x * 3) for o in outs)


def test_threads_launching_different_signatures_compile_each_once():
    kernel = make_static_scale("scale_threads_many")
    rows = [8, 16, 24, 32]
    xs = [torch.randn(r, 64) for r in rows]
    outs = [torch.zeros_like(x) for x in xs]
    run_threads(8, lambda i: kernel[None, 2](xs[i % 4], outs[i % 4]))
    pypto_pro.runtime.synchronize()
    assert kernel.cache_info()["compiles"] == 4
    assert all(torch.equal(o, x * 3) for o, x in zip(outs, xs))


CHILD = textwrap.dedent("""
    import sys, torch, pypto_pro
    import pypto_pro.language as pl

    @pl.jit(name="shared_dir")
    def scale(x: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32], y: pl.Tensor[[pl.STATIC, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            for i in pl.range(x.shape[0] // 8):
                pl.load_tile(t, x, [i, 0])
                pl.muls(t, t, 3.0)
                pl.store_tile(y, t, [i, 0])

    for rows in [8, 16, 8, 24, 16]:
        x = torch.randn(rows, 64)
        y = torch.zeros_like(x)
        scale[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, 3 * x), rows
    print("ok", scale.cache_info()["compiles"])
""")


def test_processes_sharing_a_build_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    script = tmp_path / "child.py"  # kernels need a source file (python -c has none)
    script.write_text(CHILD)
    procs = [subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.split() == ["ok", "3"]  # every process compiles its own instances
    build = tmp_path / "build"
    assert len(list(build.iterdir())) == 3  # one directory per STATIC signature, shared by the processes
    assert not list(build.rglob("*.tmp")), "a temporary file was left behind"


DIST_CHILD = textwrap.dedent("""
    import sys, torch, torch.distributed as dist, pypto_pro
    import pypto_pro.language as pl

    rank, store = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)

    @pl.jit(name="ranked")
    def inc(x: pl.Tensor[[16], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[16], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            pl.load(t, x, [0])
            pl.adds(t, t, 1.0)
            pl.store(x, t, [0])

    x = torch.full((16,), float(rank))
    inc[None, 1](x)
    pypto_pro.runtime.synchronize()
    assert torch.equal(x, torch.full((16,), rank + 1.0))
    print(inc.instances()[0].dir)
    dist.barrier()
    dist.destroy_process_group()
""")


def test_rank_suffix_under_torch_distributed(tmp_path):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    store = tmp_path / "store"
    script = tmp_path / "dist_child.py"
    script.write_text(DIST_CHILD)
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(store)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    dirs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        dirs.append(out.strip())
    assert sorted(dirs) == ["build/ranked__a5__d0_r0/tk_none", "build/ranked__a5__d0_r1/tk_none"]


COLLIDE = textwrap.dedent("""
    import sys, time, torch, pypto_pro
    from pathlib import Path
    import pypto_pro.language as pl

    me, other, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])

    def make():
        @pl.jit(name="same_name")
        def scale(x: pl.Tensor[[8, 64], pl.DT_FP32], y: pl.Tensor[[8, 64], pl.DT_FP32]):
            t = pl.make_tile(pl.TileType(shape=[8, 64], dtype=pl.DT_FP32), addr=0)
            with pl.section_vector():
                pl.load(t, x, [0, 0])
                pl.muls(t, t, factor)
                pl.store(y, t, [0, 0])
        return scale

    def meet(round_):  # both processes start each round's compile together
        Path(f"ready_{me}_{round_}").touch()
        deadline = time.monotonic() + 60
        while not Path(f"ready_{other}_{round_}").exists():
            assert time.monotonic() < deadline, "the other process never came"
            time.sleep(0.001)

    x = torch.randn(8, 64)
    for round_ in range(8):
        kernel = make()  # a new kernel object: every round compiles
        y = torch.zeros(8, 64)
        meet(round_)
        kernel[None, 1](x, y)
        pypto_pro.runtime.synchronize()
        assert torch.equal(y, x * factor), (round_, factor)
        print(kernel.instances()[0].library.name)
""")


def test_processes_compiling_different_kernels_of_one_name(tmp_path):
    """Two scripts that both define kernel 'same_name' with different bodies, compiling at once: each
    runs its own body, and the instance directory always holds one complete instance."""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    script = tmp_path / "collide.py"
    script.write_text(COLLIDE)
    procs = {factor: subprocess.Popen([sys.executable, str(script), me, other, str(factor)], cwd=tmp_path, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me, other, factor in (("a", "b", 2.0), ("b", "a", 3.0))}
    libraries = {}
    for factor, p in procs.items():
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        libraries[factor] = set(out.split())
        assert len(libraries[factor]) == 1  # the same code every round: the same library name
    assert libraries[2.0] != libraries[3.0]
    inst = tmp_path / "build" / "same_name__a5" / "tk_none"
    left = sorted(p.name for p in inst.iterdir())
    assert len([n for n in left if n.endswith(".so")]) == 1, left
    assert not [n for n in left if n.startswith(".build") or n.endswith(".tmp")], left
    # The sources left beside the library are the ones it was built from.
    library = next(n for n in left if n.endswith(".so"))
    factor = 2.0 if library in libraries[2.0] else 3.0
    kernel_cpp = (inst / "kernel.cpp").read_text()
    literal = {2.0: "float(0x1p+1f)", 3.0: "float(0x1.8p+1f)"}  # how kernel.cpp spells the factors
    assert literal[factor] in kernel_cpp, kernel_cpp
    assert literal[5.0 - factor] not in kernel_cpp

"""pypto_pro.profiler: the performance model's behaviour, not its numbers (docs/profiler.md). The model
must overlap pipes exactly where a kernel's synchronisation lets them, scale with blocks up to the
arch's cores and in waves beyond, and never change a result."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import SlotsKey, slots_add
from pypto_pro.profiler import profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

F16 = pl.DT_FP16


_slots_add = pl.jit(slots_add, tiling_key=SlotsKey, name="slots_add")
single_buffered, double_buffered = _slots_add[None, 2, {"Slots": 1}], _slots_add[None, 2, {"Slots": 2}]


def overlap(launch, pipe_a, pipe_b):
    """Cycles during which an op of pipe_a and an op of pipe_b of one core run at once."""
    total = 0
    ops = launch.ops
    for blk, core, _, pipe, start, end, *_ in ops:
        if pipe != pipe_a:
            continue
        for blk2, core2, _, pipe2, start2, end2, *_ in ops:
            if pipe2 == pipe_b and blk2 == blk and core2 == core:
                total += max(0, min(end, end2) - max(start, start2))
    return total


def test_double_buffering_overlaps_the_loads_with_the_adds():
    x = torch.randn(256, 1024, dtype=torch.float16)
    y = torch.randn_like(x)
    out1, out2 = torch.empty_like(x), torch.empty_like(x)
    with profile() as prof:
        single_buffered(x, y, out1)
        double_buffered(x, y, out2)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out1, x + y) and torch.equal(out2, x + y)
    single, double = prof.launches
    assert (single.kernel, double.kernel) == ("slots_add", "slots_add")
    assert overlap(single, "MTE2", "V") == 0          # the next loads wait for the add to free the tiles
    assert overlap(double, "MTE2", "V") > 0           # they go to the other slots meanwhile
    assert double.cycles < single.cycles
    assert double.busy["MTE2"] == single.busy["MTE2"]  # the same work, packed tighter
    assert double.busy_percent("MTE2") > single.busy_percent("MTE2")
    assert single.gm_bytes == 3 * x.numel() * 2
    # A stall says what the pipe waits for and where that was released.
    assert any(pipe == "MTE2" and "waits for mutex" in reason and "released by V at line" in reason
               for _, _, pipe, _, _, _, reason in single.stalls)


def _flagged(wait):
    def flagged(x: pl.Tensor[[128, 128], F16], z: pl.Tensor[[128, 128], F16]):
        t = pl.make_tile(pl.TileType(shape=[128, 128], dtype=F16), addr=0)
        u = pl.make_tile(pl.TileType(shape=[128, 128], dtype=F16), addr=0x8000)
        with pl.section_vector():
            pl.load(t, x, [0, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            if wait:
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.adds(u, t, 1.0)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=1)
            pl.store(z, u, [0, 0])
    return flagged


def test_without_its_wait_the_add_overlaps_the_load_where_the_sanitizer_finds_the_race():
    x = torch.randn(128, 128, dtype=torch.float16)
    z = torch.empty_like(x)
    ordered = pl.jit(_flagged(True), auto_mutex=False, name="flagged")
    racy = pl.jit(_flagged(False), auto_mutex=False, name="flagged_racy")
    with profile() as prof:
        ordered[None, 1](x, z)
        racy[None, 1](x, z)
    good, bad = prof.launches
    assert overlap(good, "MTE2", "V") == 0
    assert overlap(bad, "MTE2", "V") > 0
    assert bad.cycles < good.cycles
    checked = pl.jit(_flagged(False), auto_mutex=False, sanitizer=True, name="flagged_racy_checked")
    with pytest.raises(pypto_pro.SanitizerError, match="PIPE_RACE: read-after-write: V reads tile 't'"):
        checked[None, 1](x, z)
        pypto_pro.runtime.synchronize()


def test_cube_busy_rises_with_k():
    spec = importlib.util.spec_from_file_location("bench_kernels", ROOT / "benchmarks" / "kernels.py")
    bench_kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_kernels)  # the benchmark's K-loop matmul (128-deep slices, matmul_acc)
    kernel = pl.jit(bench_kernels._matmul_k_loop(F16), name="profiled_k_loop")
    busy = []
    for k in (128, 512, 2048):
        a = torch.randn(128, k, dtype=torch.float16)
        b = torch.randn(k, 128, dtype=torch.float16)
        c = torch.empty(128, 128)
        with profile() as prof:
            kernel[None, 1](a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-2)
        (launch,) = prof.launches
        assert launch.flops == 2 * 128 * 128 * k
        busy.append(launch.busy_percent("M"))
    assert busy[0] < busy[1] < busy[2], busy


def test_the_pipelined_mixed_kernel_overlaps_cube_and_vector():
    import pipeline_mlp as mlp

    a, b, d = torch.randn(8 * 64, 64), torch.randn(64, 64), torch.randn(64, 64)
    with profile() as prof:
        serial = mlp.relu_mlp(a, b, d, mlp.mlp_serial)
        pipelined = mlp.relu_mlp(a, b, d, mlp.mlp_pipelined)
    assert torch.equal(serial, pipelined)
    by_name = {l.kernel: l for l in prof.launches}
    s, p = by_name["mlp_serial"], by_name["mlp_pipelined"]

    def cube_vector_overlap(launch):
        cube = [(start, end) for _, core, _, _, start, end, *_ in launch.ops if core == 0]
        vector = [(start, end) for _, core, _, pipe, start, end, *_ in launch.ops if core == 1 and pipe == "V"]
        return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in cube for s2, e2 in vector)

    assert cube_vector_overlap(p) > cube_vector_overlap(s)
    assert p.cycles < s.cycles
    assert len(p.flows) > 0 and all(f[6] >= f[5] for f in p.flows)  # a flag is taken after it is set


def _busy_vector(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[8, 128], dtype=pl.DT_FP32), addr=0)
    with pl.section_vector():
        row = pl.get_block_idx() * 8
        pl.load(t, x, [row, 0])
        for _ in pl.range(64):
            pl.exp(t, t)
            pl.muls(t, t, 0.0)
        pl.store(z, t, [row, 0])


def test_modelled_time_scales_with_blocks_up_to_the_cores_and_in_waves_beyond():
    kernel = pl.jit(_busy_vector, name="busy_vector")
    cores = 64  # a5's AIVs
    cycles = {}
    with profile() as prof:
        for blocks in (1, cores, 2 * cores, 3 * cores):
            x = torch.zeros(blocks * 8, 128)
            kernel[None, blocks](x, torch.empty_like(x))
    for launch in prof.launches:
        cycles[launch.block_dim] = launch.cycles
        assert launch.waves == -(-launch.block_dim // cores)
    assert cycles[cores] < 1.1 * cycles[1]                  # one block per core: about one block's time
    assert 1.9 * cycles[cores] < cycles[2 * cores] < 2.1 * cycles[cores]
    assert 2.9 * cycles[cores] < cycles[3 * cores] < 3.1 * cycles[cores]


def test_profiling_changes_no_result_and_records_nothing_outside(tmp_path):
    x = torch.randn(256, 256, dtype=torch.float16)
    y = torch.randn_like(x)
    plain, profiled = torch.empty_like(x), torch.empty_like(x)
    _slots_add[None, 3, {"Slots": 2}](x, y, plain)
    pypto_pro.runtime.synchronize()
    with profile() as prof:
        _slots_add[None, 3, {"Slots": 2}](x, y, profiled)
    assert torch.equal(plain, profiled)
    assert len(prof.launches) == 1
    with profile() as empty:
        pass
    assert empty.launches == []  # launches before a profile are not its
    assert not pypto_pro._C._profiling()
    # The profiler's instance is its own: the kernel's instances are the plain ones.
    assert all("__profile" not in s["dir"] for s in _slots_add.signatures())
    with profile():
        with pytest.raises(RuntimeError, match="already open"):
            with profile():
                pass


def test_the_table_and_the_chrome_trace(tmp_path):
    x = torch.randn(256, 256, dtype=torch.float16)
    with profile() as prof:
        for _ in range(2):
            double_buffered(x, x, torch.empty_like(x))
    (row,) = prof.key_averages()
    assert row["kernel"] == "slots_add" and row["launches"] == 2 and row["cycles"] > 0
    assert 0 < row["busy"]["MTE2"] <= 100 and "M" not in row["busy"]  # a vector kernel has no cube pipe
    assert 0 < row["gm_percent"] <= 100
    table = prof.key_averages().table()
    assert "slots_add" in table and "MTE2 %" in table and "cube % peak" in table
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    ops = [e for e in events if e["ph"] == "X" and e["cat"] != "stall"]
    assert {e["name"] for e in ops} == {"pl.load_tile", "pl.add", "pl.store_tile"}
    assert all(e["dur"] > 0 and e["args"]["line"].startswith("kernels.py:") for e in ops)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "block 0 AIV MTE2" in names and "block 1 AIV V" in names


def test_the_html_timeline_is_self_contained(tmp_path):
    import pipeline_mlp as mlp

    a, b, d = torch.randn(3 * 64, 64), torch.randn(64, 64), torch.randn(64, 64)
    with profile() as prof:
        mlp.relu_mlp(a, b, d, mlp.mlp_pipelined)
    prof.export_chrome_trace(str(tmp_path / "mlp.json"))
    html = (tmp_path / "mlp.html").read_text()  # written next to the trace
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert html.count("<svg") == 1 and "block 0 AIC M" in html and "block 0 AIV 1 V" in html
    assert html.count("<rect") > 20 and "marker-end" in html  # ops, and arrows for the cross-core flags
    assert "waits for cross-core event" in html


def test_python_m_pypto_pro_profile_runs_a_script(tmp_path):
    import subprocess

    script = tmp_path / "script.py"
    script.write_text(
        "import torch, pypto_pro, pypto_pro.language as pl\n"
        "@pl.jit\n"
        "def k(x: pl.Tensor[[64, 64], pl.DT_FP32], y: pl.Tensor[[64, 64], pl.DT_FP32]):\n"
        "    t = pl.make_tile(pl.TileType(shape=[64, 64], dtype=pl.DT_FP32), addr=0)\n"
        "    with pl.section_vector():\n"
        "        pl.load(t, x, [0, 0])\n"
        "        pl.exp(t, t)\n"
        "        pl.store(y, t, [0, 0])\n"
        "x = torch.zeros(64, 64); y = torch.empty_like(x)\n"
        "k[None, 1](x, y)\n"
        "pypto_pro.runtime.synchronize()\n"
        "assert torch.equal(y, torch.ones(64, 64))\n"
        "print('script done')\n")
    env = dict(__import__("os").environ, PYTHONPATH=str(ROOT / "python"))
    run = subprocess.run([sys.executable, "-m", "pypto_pro", "profile", "-o", str(tmp_path / "out"), str(script)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "script done" in run.stdout and "MTE2 %" in run.stdout and "1 launch(es)" in run.stdout
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert any(e.get("name") == "pl.exp" for e in trace["traceEvents"])
    assert (tmp_path / "out" / "trace.html").exists()
    bad = subprocess.run([sys.executable, "-m", "pypto_pro", "nonsense"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "unknown command 'nonsense'" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "pypto_pro", "profile", str(tmp_path / "none.py")],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "no script" in missing.stderr


def _skewed(barrier):
    def skewed(x: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 128], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[8, 128], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            row = pl.get_block_idx() * 8
            pl.load(t, x, [row, 0])
            if pl.get_block_idx() == 0:  # block 0 has far more to do before the barrier
                for _ in pl.range(32):
                    pl.exp(t, t)
                    pl.muls(t, t, 0.0)
            pl.system.bar_all()  # the work in flight on the pipes done: sync_all waits for the scalar unit only
            if barrier:
                pl.system.sync_all(core_type=pl.SyncCoreType.AIV_ONLY)
            pl.adds(t, t, 1.0)
            pl.store(z, t, [row, 0])
    return skewed


def test_sync_all_holds_every_block_until_the_last_arrives():
    x = torch.zeros(4 * 8, 128)
    with profile() as prof:
        for barrier in (False, True):
            pl.jit(_skewed(barrier), name=f"skewed_{barrier}")[None, 4](x, torch.empty_like(x))
    free, held = prof.launches

    def adds_start(launch, block):
        return min(start for b, _, _, _, start, _, _, name, *_ in launch.ops
                   if b == block and launch.names[name] == "pl.adds")

    def last_exp_end(launch):
        return max(end for b, _, _, _, _, end, _, name, *_ in launch.ops if b == 0 and launch.names[name] == "pl.exp")

    assert adds_start(free, 1) < last_exp_end(free)          # independent blocks run ahead
    for block in range(4):
        assert adds_start(held, block) >= last_exp_end(held)  # the barrier holds them
    assert any("waits at pl.system.sync_all" in reason for *_, reason in held.stalls)


def test_inter_block_flags_order_the_blocks_in_the_model():
    """Every block's load of its neighbour's row waits for the INTER_BLOCK round every block set: a
    block whose store is late holds the others' loads."""
    from test_launch_sync import pass_rows

    blocks, rounds = 4, 2
    x = torch.randn(blocks, 64)
    buf, out = torch.zeros(blocks, 64), torch.zeros(blocks, 64)
    with profile() as prof:
        pass_rows[None, blocks](x, rounds, buf, out)
    torch.testing.assert_close(out, torch.roll(x, -rounds, dims=0) + rounds, rtol=0, atol=1e-5)
    (launch,) = prof.launches
    stores = [end for b, _, _, pipe, _, end, _, name, *_ in launch.ops if launch.names[name] == "pl.store"]
    neighbour_loads = sorted(start for b, _, _, pipe, start, _, _, name, *_ in launch.ops
                             if launch.names[name] == "pl.load" and pipe == "MTE2")[blocks:]  # after the first loads
    # Round 1: no block loads a neighbour's row before every block stored its own.
    first_round_stores = sorted(stores)[:blocks]
    assert min(neighbour_loads) >= max(first_round_stores)
    assert any("waits for INTER_BLOCK event 0 from every core" in reason for *_, reason in launch.stalls)


def test_a_launch_past_the_recording_budget_says_it_is_truncated():
    def many_ops(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], z: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
        t = pl.make_tile(pl.TileType(shape=[1, 64], dtype=pl.DT_FP32), addr=0)
        with pl.section_vector():
            b = pl.get_block_idx()
            pl.load(t, x, [b, 0])
            for _ in pl.range(1200):
                pl.adds(t, t, 1.0)
            pl.store(z, t, [b, 0])

    blocks = 2048  # the launch's budget shared by 2048 cores: 1024 events each, fewer than 1200 ops make
    x = torch.zeros(blocks, 64)
    z = torch.empty_like(x)
    with profile() as prof:
        pl.jit(many_ops, name="many_ops")[None, blocks](x, z)
    assert torch.equal(z, torch.full_like(x, 1200.0))  # the kernel itself ran whole
    (launch,) = prof.launches
    assert launch.truncated
    table = prof.key_averages().table()
    assert "many_ops*" in table and "the model covers a prefix of the launch" in table

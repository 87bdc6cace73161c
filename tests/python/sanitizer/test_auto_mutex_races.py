"""auto_mutex against the sanitizer's pipe model: the add and matmul examples without auto_mutex and
without manual synchronisation race, with it they are clean, and so is an add synchronised by hand
with sync_src / sync_dst. A tile selected by a run-time index locks its own slot's mutex id."""


import pytest
import torch

import pypto_pro.language as pl
from kernels import load_example
from san_util import findings_of, line_of

V, MTE2, MTE3 = pl.PipeType.V, pl.PipeType.MTE2, pl.PipeType.MTE3


ADD = load_example("add", "auto_mutex")
MATMUL = load_example("matmul", "auto_mutex")


def add_findings(kernel, shape=(512, 512), block_dim=2):
    x, y = torch.randn(shape, dtype=torch.float16), torch.randn(shape, dtype=torch.float16)
    z = torch.empty_like(x)
    findings = findings_of(lambda: kernel[None, block_dim](x, y, z))
    return findings, torch.equal(z, x + y)


def matmul_findings(kernel, m=512, n=512, block_dim=2):
    a, b = torch.randn(m, MATMUL.K, dtype=torch.float16), torch.randn(MATMUL.K, n, dtype=torch.float16)
    c = torch.empty(m, n)
    return findings_of(lambda: kernel[None, block_dim](a, b, c))


def test_add_without_auto_mutex_races_on_every_hand_over():
    fn = ADD.add_kernel.fn
    findings, _ = add_findings(pl.jit(fn, sanitizer=True, auto_mutex=False, name="add_no_mutex"))
    assert {f.kind for f in findings} == {"PIPE_RACE"}
    lines = {f.line for f in findings}
    # V reads what MTE2 loaded, MTE3 stores what V wrote, the next loads overwrite what V read.
    assert {line_of(fn, "pl.add(tc, ta, tb)"), line_of(fn, "pl.store_tile(z, tc"),
            line_of(fn, "pl.load_tile(ta, x")} <= lines
    race = next(f for f in findings if f.line == line_of(fn, "pl.add(tc, ta, tb)"))
    assert "MTE2" in race.message and race.hits > 1


def test_add_with_auto_mutex_is_clean():
    findings, exact = add_findings(pl.jit(ADD.add_kernel.fn, sanitizer=True, auto_mutex=True, name="add_mutex"))
    assert findings == [] and exact


def test_matmul_without_auto_mutex_races_and_with_it_is_clean():
    fn = MATMUL.matmul_kernel.fn
    findings = matmul_findings(pl.jit(fn, sanitizer=True, auto_mutex=False, name="matmul_no_mutex"))
    assert {f.kind for f in findings} == {"PIPE_RACE"}
    assert {line_of(fn, "pl.move(tl, ta)"), line_of(fn, "pl.matmul(tc, tl, tr)"),
            line_of(fn, "pl.store_tile(c, tc")} <= {f.line for f in findings}
    assert matmul_findings(pl.jit(fn, sanitizer=True, auto_mutex=True, name="matmul_mutex")) == []


@pl.jit(sanitizer=True, auto_mutex=False)
def add_by_hand(x: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                y: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16],
                z: pl.Tensor[[pl.DYNAMIC, pl.DYNAMIC], pl.DT_FP16]):
    """The add example ordered with flags instead of mutexes (one buffer each): event 0 "a and b are
    free" (V -> MTE2), 1 "c is free" (MTE3 -> V), 2 "a and b are loaded" (MTE2 -> V), 3 "c is
    computed" (V -> MTE3). The free flags are set once before the loop and taken once after it."""
    tt = pl.TileType(shape=[128, 128], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a = pl.make_tile(tt, addr=0x00000)
    b = pl.make_tile(tt, addr=0x10000)
    c = pl.make_tile(tt, addr=0x20000)
    with pl.section_vector():
        pl.system.sync_src(set_pipe=V, wait_pipe=MTE2, event_id=0)
        pl.system.sync_src(set_pipe=MTE3, wait_pipe=V, event_id=1)
        for i in pl.range(pl.get_block_idx(), x.shape[0] // 128, pl.get_block_num()):
            for j in pl.range(0, x.shape[1] // 128):
                pl.system.sync_dst(set_pipe=V, wait_pipe=MTE2, event_id=0)
                pl.load_tile(a, x, [i, j])
                pl.load_tile(b, y, [i, j])
                pl.system.sync_src(set_pipe=MTE2, wait_pipe=V, event_id=2)
                pl.system.sync_dst(set_pipe=MTE2, wait_pipe=V, event_id=2)
                pl.system.sync_dst(set_pipe=MTE3, wait_pipe=V, event_id=1)
                pl.add(c, a, b)
                pl.system.sync_src(set_pipe=V, wait_pipe=MTE2, event_id=0)
                pl.system.sync_src(set_pipe=V, wait_pipe=MTE3, event_id=3)
                pl.system.sync_dst(set_pipe=V, wait_pipe=MTE3, event_id=3)
                pl.store_tile(z, c, [i, j])
                pl.system.sync_src(set_pipe=MTE3, wait_pipe=V, event_id=1)
        pl.system.sync_dst(set_pipe=V, wait_pipe=MTE2, event_id=0)
        pl.system.sync_dst(set_pipe=MTE3, wait_pipe=V, event_id=1)


@pytest.mark.parametrize("shape, block_dim", [((128, 128), 1), ((1024, 512), 3), ((2048, 1024), 64)])
def test_hand_synchronised_add_is_clean(shape, block_dim):
    findings, exact = add_findings(add_by_hand, shape, block_dim)
    assert findings == [] and exact


@pl.jit(sanitizer=True)
def group_index(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32], k: pl.DT_INT32):
    g = pl.make_tile_group(type=pl.TileType(shape=[32, 128], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0, 1])
    with pl.section_vector():
        t = g[k % 2]
        pl.system.mutex_lock(pipe=MTE2, mutex_id=1)  # MTE2 holds mutex 1 around the load
        pl.load(t, x, [0, 0])  # auto_mutex locks the id of the slot k selects
        pl.system.mutex_unlock(pipe=MTE2, mutex_id=1)
        pl.muls(t, t, 2.0)
        pl.store(y, t, [0, 0])


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_a_run_time_group_index_locks_its_slots_mutex_id(k):
    """g[k % 2] locks mutex k % 2: for odd k that is the id MTE2 already holds, which the sanitizer
    reports as a second lock (and the manual unlock as one too many); for even k nothing clashes."""
    fn = group_index.fn
    x, y = torch.randn(32, 128), torch.zeros(32, 128)
    findings = findings_of(lambda: group_index[None, 1](x, y, k))
    if k % 2 == 0:
        assert findings == []
        assert torch.equal(y, 2 * x)
        return
    assert sorted((f.kind, f.line) for f in findings) == [
        ("MUTEX_UNLOCK_BEFORE_LOCK", line_of(fn, "pl.system.mutex_unlock")),
        ("UNPAIRED_MUTEX_LOCK", line_of(fn, "pl.system.mutex_lock"))]
    relock = next(f for f in findings if f.kind == "UNPAIRED_MUTEX_LOCK")
    assert f"locked again at line {line_of(fn, 'pl.load(t, x')} (auto_mutex)" in relock.message
    assert group_index.cache_info()["compiles"] == 1


@pl.jit(sanitizer=True)
def shared_slot(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32]):
    g = pl.make_tile_group(type=pl.TileType(shape=[32, 128], dtype=pl.DT_FP32), addrs=0, mutex_ids=[[3, 4], [5, 6]],
                           depth=2)
    with pl.section_vector():
        first = g[0]
        again = g[0]
        pl.load(first, x, [0, 0])
        pl.add(first, first, again)  # two operands, one slot: ids 3 and 4 are locked once on V
        pl.store(y, again, [0, 0])


def test_ids_two_operands_share_are_locked_once():
    x, y = torch.randn(32, 128), torch.zeros(32, 128)
    assert findings_of(lambda: shared_slot[None, 1](x, y)) == []
    assert torch.equal(y, x + x)


def first_element(x: pl.Tensor[[32, 128], pl.DT_FP32], y: pl.Tensor[[32, 128], pl.DT_FP32]):
    g = pl.make_tile_group(type=pl.TileType(shape=[32, 128], dtype=pl.DT_FP32), addrs=0, mutex_ids=[0])
    h = pl.make_tile_group(type=pl.TileType(shape=[32, 128], dtype=pl.DT_FP32), addrs=0x4000, mutex_ids=[1])
    with pl.section_vector():
        t, u = g.current(), h.current()
        pl.load(t, x, [0, 0])
        pl.muls(t, t, 2.0)
        scale = t[0, 0]  # the scalar pipe reads what V wrote
        pl.muls(u, t, scale)
        pl.store(y, u, [0, 0])


@pytest.mark.parametrize("auto_mutex", [True, False])
def test_element_reads_are_ordered_on_the_scalar_pipe(auto_mutex):
    kernel = pl.jit(first_element, sanitizer=True, auto_mutex=auto_mutex, name=f"first_element_{auto_mutex}")
    x, y = torch.randn(32, 128), torch.zeros(32, 128)
    findings = findings_of(lambda: kernel[None, 1](x, y))
    if auto_mutex:
        assert findings == []
        assert torch.equal(y, (2 * x) * (2 * x[0, 0]))
    else:
        reads = [f for f in findings if f.line == line_of(first_element, "scale = t[0, 0]")]
        assert len(reads) == 1 and reads[0].kind == "PIPE_RACE"
        assert reads[0].message.startswith("read-after-write: S reads tile 't'")

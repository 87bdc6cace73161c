"""Every loop pl.jit(pipeline=...) cannot schedule is a PipelineError (a ValueError) at the line to
change, saying what to change (docs/language.md#pipeline). Each case is a small two-stage kernel
(a cube stage computing A @ A into the vector cores' UB, a vector stage storing its relu) with one
thing wrong, written to a module of its own from the template below so the error's line is known."""

import importlib.util
import textwrap

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl

TEMPLATE = '''
import pypto_pro.language as pl

M = pl.MemorySpace


def tt(shape, memory=M.Vec, layout=None):
    return pl.TileType(shape=shape, dtype=pl.DT_FP32, target_memory=memory, layout=layout)


@pl.pipeline.stage
def produce(k, a, buf, a_mat, left, right, acc):
    t = a_mat.next()
    pl.load(t, a, [k * 16, 0])
    l_t = left.next()
    r_t = right.next()
    acc_t = acc.next()
    pl.move(l_t, t)
    pl.move(r_t, t)
    pl.matmul(acc_t, l_t, r_t)
    pl.move(buf.next(), acc_t, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)


@pl.pipeline.stage
def consume(k, sub, out, buf, res):
    v = buf.next()
    r = res.next()
    pl.relu(r, v)
    pl.store(out, r, [k * 16 + sub * 8, 0])


@pl.pipeline.stage
def consume_scalar_last(k, sub, out, buf, res):
    v = buf.next()
    r = res.next()
    pl.relu(r, v)
    pl.store(out, r, [sub * 8, 0])
    pl.setval(v, 0, 1.0)


@pl.pipeline.stage
def take_twice(k, sub, out, buf, res):
    v = buf.next()
    w = buf.next()
    pl.relu(v, w)


@pl.pipeline.stage
def only_take(k, buf):
    v = buf.next()


@pl.pipeline.stage
def idle(k):
    pass


def kernel(a: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 16], pl.DT_FP32],
           n: pl.DT_INT32):
    buf = pl.make_tile_group(type=tt([8, 16]), addrs=0x0, mutex_ids=[0, 1], fwd_ids=[0, 1], bwd_ids=[2, 3])
    with pl.section_cube():
        a_mat = pl.make_tile_group(type=tt([16, 16], M.Mat, pl.NZ), addrs=0x0, mutex_ids=[2])
        left = pl.make_tile_group(type=tt([16, 16], M.Left, pl.NZ), addrs=0x0, mutex_ids=[3])
        right = pl.make_tile_group(type=tt([16, 16], M.Right, pl.ZN), addrs=0x0, mutex_ids=[4])
        acc = pl.make_tile_group(type=tt([16, 16], M.Acc, pl.NZ), addrs=0x0, mutex_ids=[5])
    with pl.section_vector():
        sub = pl.get_subblock_idx()
        res = pl.make_tile_group(type=tt([8, 16]), addrs=0x4000, mutex_ids=[6])
{body}
'''

LOOP = '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            consume(k, sub, out, buf, res)
'''

# (case, the kernel's body after the declarations, the message, the source line it points at)
CASES = [
    ("not alternating", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            consume(k, sub, out, buf, res)
        with pl.section_vector():
            idle(k)
''', "stages 'consume' and 'idle' both run on the vector core; stages alternate cube and vector", "idle(k)"),
    ("outside a section", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        idle(k)
''', "stage 'idle' is not inside a pl.section_cube", "idle(k)"),
    ("outside the loop", '''
    with pl.section_vector():
        idle(0)
''', "stage 'idle' is not directly in a pl.range loop", "idle(0)"),
    ("in another loop", LOOP + '''
    for k2 in pl.range(0, n):
        with pl.section_cube():
            idle(k2)
''', "stage 'idle' is in another loop than stage 'produce'", "idle(k2)"),
    ("under a run-time condition", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        if k > 0:
            with pl.section_vector():
                consume(k, sub, out, buf, res)
''', "stage 'consume' is inside run-time control flow; conditions around stages must be compile-time constants",
     "consume(k, sub, out, buf, res)"),
    ("other code in a section", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            pl.expands(res.current(), 0.0)
            consume(k, sub, out, buf, res)
''', "the section of stage 'consume' holds other code as well", "with pl.section_vector():"),
    ("a buffer in three stages", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            consume(k, sub, out, buf, res)
        with pl.section_cube():
            idle(k)
        with pl.section_vector():
            consume(k, sub, out, buf, res)
''', r"cross-core buffer 'buf' is used by 3 stage\(s\); it needs exactly two", "buf = pl.make_tile_group("),
    ("a buffer on one core", '''
    for k in pl.range(0, n):
        with pl.section_vector():
            consume(k, sub, out, buf, res)
        with pl.section_cube():
            idle(k)
        with pl.section_vector():
            consume(k, sub, out, buf, res)
''', "cross-core buffer 'buf' is used by stages 'consume' and 'consume' on the same core",
     "buf = pl.make_tile_group("),
    ("a buffer outside UB and L1", '''
    with pl.section_cube():
        left_buf = pl.make_tile_group(type=tt([16, 16], M.Left, pl.NZ), addrs=0x4000, mutex_ids=[7], fwd_ids=[4],
                                      bwd_ids=[5])
''' + LOOP, "cross-core buffer 'left_buf' is in Left; cross-core buffers are in UB \\(Vec\\) or L1 \\(Mat\\)",
     "left_buf = pl.make_tile_group("),
    ("the consumer first: it would wait forever", '''
    for k in pl.range(0, n):
        with pl.section_vector():
            consume(k, sub, out, buf, res)
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
''', "stage 'consume' is the first to use cross-core buffer 'buf' but does not write it: it would wait for data a "
     r"later stage writes, forever \(a deadlock\)",
     "pl.relu(r, v)"),
    ("two slots in one stage", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            take_twice(k, sub, out, buf, res)
''', r"stage 'take_twice' must take a slot of cross-core buffer 'buf' with exactly one buf.next\(\) per iteration",
     "w = buf.next()"),
    ("a slot nobody uses", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            only_take(k, buf)
''', "stage 'only_take' takes a slot of 'buf' but no op uses it", "v = buf.next()"),
    ("a buffer used outside the stages", '''
    with pl.section_vector():
        pl.expands(buf.current(), 0.0)
''' + LOOP, "cross-core buffer 'buf' is used outside the pipeline's stages", "buf = pl.make_tile_group("),
    ("the last use on the scalar pipe", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        with pl.section_vector():
            consume_scalar_last(k, sub, out, buf, res)
''', "stage 'consume_scalar_last' last uses cross-core buffer 'buf' on the scalar pipe",
     "consume_scalar_last(k, sub, out, buf, res)"),
    ("two buffers sharing an id", '''
    other = pl.make_tile_group(type=tt([8, 16]), addrs=0x8000, mutex_ids=[8], fwd_ids=[3], bwd_ids=[9])
''' + LOOP, "cross-core event id 3 of buffer 'other' is also an id of buffer 'buf'",
     "other = pl.make_tile_group("),
    ("an id a hand-written flag uses", '''
    with pl.section_vector():
        pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)
    with pl.section_cube():
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)
''' + LOOP, "cross-core event id 1 is used here and by the pipeline's buffer 'buf'",
     "pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)"),
    ("a hand-written flag with a run-time id", '''
    with pl.section_vector():
        pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=n)
''' + LOOP, "this cross-core flag's event_id is computed at run time and may be 0, which the pipeline's buffer "
     "'buf' uses", "pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=n)"),
    ("code between the stages that is not a scalar", '''
    for k in pl.range(0, n):
        with pl.section_cube():
            produce(k, a, buf, a_mat, left, right, acc)
        spare = res.next()
        with pl.section_vector():
            consume(k, sub, out, buf, res)
''', "with preload the pipeline loop's body holds the stages' sections and scalar computations only",
     "spare = res.next()"),
]


def _kernel(tmp_path, name, body):
    path = tmp_path / f"pipeline_case_{name}.py"
    path.write_text(TEMPLATE.replace("{body}", textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("case, body, message, line", CASES, ids=[c[0] for c in CASES])
def test_misuse_is_a_pipeline_error_at_its_line(tmp_path, case, body, message, line):
    kernel = pl.jit(_kernel(tmp_path, str(CASES.index((case, body, message, line))), body),
                    pipeline=pl.pipeline.PipelineConfig(preload=2))
    with pytest.raises(pypto_pro.PipelineError, match=message) as info:
        kernel[None, 1](torch.zeros(16, 16), torch.zeros(16, 16), 2)
    assert isinstance(info.value, ValueError)
    assert info.value.source_line.strip().startswith(line), info.value.source_line
    assert info.value.filename.endswith(".py") and info.value.lineno > 0


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])  # none, depth - 1, the depth (2 slots), depth + 1, many
@pytest.mark.parametrize("config", ["sync_only", "preload1", "preload2", "preload3"])
def test_the_two_stages_run_for_every_config_and_count(tmp_path, config, n):
    """The cases differ from a kernel that works: the two stages as written run sanitizer-clean for
    every iteration count, and their pipeline_generated.py gives the same bits."""
    from kernels import pipeline_generated

    options = {"sync_only": True} if config == "sync_only" else {"preload": int(config[-1])}
    kernel = pl.jit(_kernel(tmp_path, "good", LOOP), name=f"two_stage_{config}", sanitizer=True,
                    pipeline=pl.pipeline.PipelineConfig(**options))
    a = torch.randn(16 * max(n, 1), 16)
    out = torch.zeros_like(a)
    kernel[None, 1](a, out, n)
    pypto_pro.runtime.synchronize()
    expect = torch.cat([torch.relu(a[i * 16:i * 16 + 16] @ a[i * 16:i * 16 + 16]) for i in range(n)] +
                       [torch.zeros(16, 16)] * (n == 0))
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-5)
    again = torch.zeros_like(a)
    pipeline_generated(kernel, sanitizer=True)[None, 1](a, again, n)
    pypto_pro.runtime.synchronize()
    assert torch.equal(again, out)

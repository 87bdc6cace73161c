"""The examples of examples/ against torch references, on the shapes the tile-language issue lists
(the add and matmul examples are covered by test_add_kernel.py and test_cube.py)."""

from pathlib import Path

import pytest
import torch

import pypto_pro
from kernels import load_example as load, pipeline_generated

SHAPES = [(2048, 64), (1000, 200), (777, 300), (100, 512), (2049, 100)]


@pytest.fixture(scope="module")
def softmax():
    return load("softmax")


@pytest.fixture(scope="module")
def layernorm():
    return load("layernorm")


@pytest.fixture(scope="module")
def fused():
    return load("fused_softmax_matmul")


@pytest.fixture(scope="module")
def attention():
    return load("flash_attention")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block_dim", [1, 7, 64])
def test_softmax(softmax, shape, block_dim):
    torch.manual_seed(shape[0])
    x = torch.randn(shape) * 4
    y = softmax.softmax(x, block_dim=block_dim)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=-1), rtol=1e-3, atol=1e-3)


def test_softmax_refuses_too_many_columns(softmax, capfd):
    softmax.softmax(torch.zeros(16, 513), block_dim=1)
    with pytest.raises(pypto_pro.KernelFault, match=r"in pl.trap: pl.trap\(\) stopped the kernel"):
        pypto_pro.runtime.synchronize()
    assert "Assertion failed: cols <= MAX_COLS: softmax_kernel handles at most 512 columns, got 513" in \
        capfd.readouterr().out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block_dim", [1, 64])
def test_layernorm(layernorm, shape, block_dim):
    torch.manual_seed(shape[1])
    x = torch.randn(shape) * 3 + 1
    gamma, beta = torch.randn(shape[1]), torch.randn(shape[1])
    y = layernorm.layernorm(x, gamma, beta, block_dim=block_dim)
    pypto_pro.runtime.synchronize()
    ref = torch.nn.functional.layer_norm(x, (shape[1],), gamma, beta, eps=1e-5)
    torch.testing.assert_close(y, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("m, block_dim", [(48, 1), (48, 3), (96, 2), (48, 32)])
def test_fused_softmax_matmul(fused, m, block_dim):
    out, ref = fused.run(m=m, block_dim=block_dim, seed=m)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out.sum(dim=-1), torch.ones(m), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 512, False, 1), (1, 512, True, 5), (2, 1024, True, 32),
                                                     (2, 333, False, 24), (1, 1000, True, 7), (3, 129, True, 4),
                                                     (1, 70, False, 2)])
def test_flash_attention(attention, b, s, causal, block_dim):
    """The UB / L1 hand-over example, sequence lengths with tails included."""
    torch.manual_seed(s + b)
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    out = attention.attention(q, k, v, causal, block_dim=block_dim)
    pypto_pro.runtime.synchronize()
    ref = attention.reference(q, k, v, causal)
    torch.testing.assert_close(out.float(), ref, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("s, causal", [(200, True), (256, False)])
def test_flash_attention_is_clean_under_the_sanitizer(attention, s, causal):
    """Every cross-core hand-over (fixpipe -> UB, insert -> L1) is ordered by its flags: no finding."""
    torch.manual_seed(s)
    q, k, v = (torch.randn(1, s, 2, 128).half() for _ in range(3))
    out = attention.attention(q, k, v, causal, block_dim=2, sanitizer=True)
    pypto_pro.runtime.synchronize()  # raises SanitizerError on any finding
    torch.testing.assert_close(out.float(), attention.reference(q, k, v, causal), rtol=5e-3, atol=5e-3)


@pytest.fixture(scope="module")
def attention_pipeline():
    return load("flash_attention_pipeline")


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 512, False, 1), (1, 300, True, 3), (2, 129, False, 4),
                                                     (1, 70, True, 2), (2, 384, True, 32)])
def test_flash_attention_in_pipeline_form(attention, attention_pipeline, b, s, causal, block_dim):
    """The four-stage attention, serial with flags (sync_only) and preloaded, gives the bits of the
    hand-synchronised kernel (the same ops in the same order), which matches torch."""
    torch.manual_seed(s + b)
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    hand = attention.attention(q, k, v, causal, block_dim=block_dim)
    serial = attention_pipeline.attention(q, k, v, causal, block_dim=block_dim, kernel=attention_pipeline.serial)
    pipelined = attention_pipeline.attention(q, k, v, causal, block_dim=block_dim)
    pypto_pro.runtime.synchronize()
    assert torch.equal(serial, hand) and torch.equal(pipelined, hand)
    torch.testing.assert_close(pipelined.float(), attention.reference(q, k, v, causal), rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_pipeline_is_clean_and_its_generated_kernel_runs(attention, attention_pipeline, causal):
    """Under the sanitizer the scheduled kernel has no race; its pipeline_generated.py, a plain kernel
    specialised on Causal, runs clean too and gives the same bits."""
    import pypto_pro.language as pl

    checked = pl.jit(attention_pipeline.flash_attention_pipeline, tiling_key=attention.AttentionKey, sanitizer=True,
                     name="fa_pipeline_checked", pipeline=pl.pipeline.PipelineConfig(preload=2))
    torch.manual_seed(7)
    b, s = 2, 200
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    out = attention_pipeline.attention(q, k, v, causal, block_dim=3, kernel=checked)
    pypto_pro.runtime.synchronize()  # raises SanitizerError on any finding
    hand = attention.attention(q, k, v, causal, block_dim=3)
    pypto_pro.runtime.synchronize()
    assert torch.equal(out, hand)
    generated = pipeline_generated(checked, {"Causal": int(causal)}, sanitizer=True)
    again = torch.empty_like(q)
    mask = torch.triu(torch.full((128, 128), float("-inf")), diagonal=1)
    generated[None, 3](*(t.view(b * s, 256) for t in (q, k, v, again)), mask, s, 1.0 / 128 ** 0.5)
    pypto_pro.runtime.synchronize()
    assert torch.equal(again, out)


@pytest.fixture(scope="module")
def attention_gm():
    return load("flash_attention_gm")


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 512, True, 5), (2, 512, False, 24)])
def test_flash_attention_through_gm_workspaces(attention_gm, b, s, causal, block_dim):
    torch.manual_seed(s + b)
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    out = attention_gm.attention(q, k, v, causal, block_dim=block_dim)
    pypto_pro.runtime.synchronize()
    torch.testing.assert_close(out.float(), attention_gm.reference(q, k, v, causal), rtol=5e-3, atol=5e-3)


def test_flash_attention_causal_and_full_are_two_instances(attention):
    q = torch.randn(1, 128, 2, 128).half()
    for causal in (False, True, False):
        attention.attention(q, q, q, causal, block_dim=2)
    pypto_pro.runtime.synchronize()
    kernel = attention.flash_attention
    dirs = {s["tiling_key"]["Causal"] for s in kernel.signatures()}
    assert dirs == {0, 1} and kernel.cache_info()["compiles"] == 2
    codes = {s["tiling_key"]["Causal"]: (Path(s["dir"]) / "kernel.cpp").read_text() for s in kernel.signatures()}
    # The mask branch exists only in the causal instance: Causal is a constant, its dead branch is gone.
    assert ", t_mask, " in codes[1] and ", t_mask, " not in codes[0]


@pytest.fixture(scope="module")
def data_paths():
    return load("data_paths")


@pytest.mark.parametrize("path", ["acc_to_vec_single", "acc_to_vec_dual", "insert", "quantised_store",
                                  "atomic_add"])
def test_data_path_examples(data_paths, path):
    out, ref = getattr(data_paths, path)()
    if path == "quantised_store":  # int8 after rounding: fp32 sums in another order may round across .5
        assert (out - ref).abs().max() <= 1
    else:
        torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("blocks", [1, 2, 5])
def test_pipeline_mlp(blocks):
    example = load("pipeline_mlp")
    torch.manual_seed(blocks)
    a, b, d = torch.randn(blocks * 64, 64), torch.randn(64, 64), torch.randn(64, 64)
    ref = torch.relu(a.double() @ b.double()) @ d.double()
    serial = example.relu_mlp(a, b, d, example.mlp_serial)
    pipelined = example.relu_mlp(a, b, d, example.mlp_pipelined)
    assert torch.equal(serial, pipelined)
    torch.testing.assert_close(pipelined.double(), ref, rtol=1e-4, atol=1e-3)
    for kernel in (example.mlp_serial, example.mlp_pipelined):  # pipeline_generated.py: a plain kernel
        assert torch.equal(example.relu_mlp(a, b, d, pipeline_generated(kernel, sanitizer=True)), pipelined)


@pytest.mark.parametrize("ranks", [2, 3])
def test_distributed_ranks_each_run_their_shard(tmp_path, ranks):
    """examples/distributed.py: gloo ranks (spawned processes), each its own simulated device and
    artefact directory (<name>__a5__d0_r<rank>), an all_reduce of the shards equal to torch's softmax."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python"))
    run = subprocess.run([sys.executable, str(root / "examples" / "distributed.py"), str(ranks)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"on {ranks} ranks (gloo): max |err| vs torch = " in run.stdout
    dirs = sorted(p.name for p in (tmp_path / "build").iterdir())
    assert dirs == [f"softmax_kernel__a5__d0_r{r}" for r in range(ranks)]

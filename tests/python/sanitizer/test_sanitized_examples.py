"""Every example kernel under the sanitizer: no findings (zero false positives) and exactly the numbers
of the plain kernel. Each example module's kernel is swapped for a sanitized build of the same
function, so the example's own launch code runs it."""

import functools

import pytest
import torch

import pypto_pro
import pypto_pro.language as pl
from kernels import load_example



@functools.cache
def load(name):
    return load_example(name, "sanitized")


@functools.cache
def sanitized(module, attr, tiling_key=None):
    """A sanitizer-mode build of the function of the module's kernel `attr`, with its other jit options."""
    kernel = getattr(module, attr)
    return pl.jit(kernel.fn, sanitizer=True, auto_mutex=kernel.auto_mutex, name=f"{kernel.kernel_name}_checked",
                  tiling_key=tiling_key, pipeline=kernel.pipeline)


def plain_and_sanitized(module, attr, run, **options):
    """run() with the module's plain kernel, then with its sanitized build; both results."""
    plain = getattr(module, attr)
    checked = sanitized(module, attr, **options)
    want = run()
    pypto_pro.runtime.synchronize()
    setattr(module, attr, checked)
    try:
        got = run()
        pypto_pro.runtime.synchronize()  # raises SanitizerError on any finding
    finally:
        setattr(module, attr, plain)
    # The sanitized instance really ran: its launch appended a clean section to its report.
    report = checked.instances()[-1].sanitizer_report
    assert report.read_text().endswith("PyPTO Sanitizer: 0 issue(s) detected\n")
    return want, got


def assert_same(want, got):
    for a, b in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("shape, block_dim", [((128, 128), 1), ((2048, 1024), 64), ((1024, 2048), 7)])
def test_add(shape, block_dim):
    module = load("add")
    torch.manual_seed(shape[0])
    x, y = torch.randn(shape, dtype=torch.float16), torch.randn(shape, dtype=torch.float16)

    def run():
        z = torch.empty_like(x)
        module.add_kernel[None, block_dim](x, y, z)
        return z

    want, got = plain_and_sanitized(module, "add_kernel", run)
    assert_same(want, got)
    assert torch.equal(got, x + y)


@pytest.mark.parametrize("m, n, block_dim", [(256, 256, 1), (512, 512, 32), (1024, 256, 3)])
def test_matmul(m, n, block_dim):
    module = load("matmul")
    torch.manual_seed(m + n)
    a, b = torch.randn(m, module.K, dtype=torch.float16), torch.randn(module.K, n, dtype=torch.float16)

    def run():
        c = torch.empty(m, n)
        module.matmul_kernel[None, block_dim](a, b, c)
        return c

    want, got = plain_and_sanitized(module, "matmul_kernel", run)
    assert_same(want, got)


@pytest.mark.parametrize("shape, block_dim", [((2048, 64), 64), ((777, 300), 7), ((2049, 100), 1)])
def test_softmax(shape, block_dim):
    module = load("softmax")
    torch.manual_seed(shape[0])
    x = torch.randn(shape) * 4
    want, got = plain_and_sanitized(module, "softmax_kernel", lambda: module.softmax(x, block_dim=block_dim))
    assert_same(want, got)


@pytest.mark.parametrize("shape, block_dim", [((1000, 200), 64), ((100, 512), 1)])
def test_layernorm(shape, block_dim):
    module = load("layernorm")
    torch.manual_seed(shape[1])
    x = torch.randn(shape) * 3 + 1
    gamma, beta = torch.randn(shape[1]), torch.randn(shape[1])
    want, got = plain_and_sanitized(module, "layernorm_kernel",
                                    lambda: module.layernorm(x, gamma, beta, block_dim=block_dim))
    assert_same(want, got)


@pytest.mark.parametrize("m, block_dim", [(48, 1), (48, 3), (96, 2)])
def test_fused_softmax_matmul(m, block_dim):
    module = load("fused_softmax_matmul")
    want, got = plain_and_sanitized(module, "fused_softmax_matmul",
                                    lambda: module.run(m=m, block_dim=block_dim, seed=m)[0])
    assert_same(want, got)


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 512, False, 1), (1, 512, True, 5), (2, 512, False, 24),
                                                     (2, 1024, True, 32)])
def test_flash_attention(b, s, causal, block_dim):
    check_attention("flash_attention", b, s, causal, block_dim)


def check_attention(name, b, s, causal, block_dim):
    """examples/<name>.py's attention(), whose kernel has the module's name, plain and sanitized."""
    module = load(name)
    torch.manual_seed(s + b)
    q, k, v = (torch.randn(b, s, 2, 128).half() for _ in range(3))
    want, got = plain_and_sanitized(module, name, lambda: module.attention(q, k, v, causal, block_dim=block_dim),
                                    tiling_key=module.AttentionKey)
    assert_same(want, got)


@pytest.mark.parametrize("b, s, causal, block_dim", [(1, 256, False, 1), (1, 384, True, 3), (2, 256, True, 8)])
def test_flash_attention_gm(b, s, causal, block_dim):
    check_attention("flash_attention_gm", b, s, causal, block_dim)


@pytest.mark.parametrize("path", ["acc_to_vec_single", "acc_to_vec_dual", "insert", "quantised_store", "atomic_add"])
def test_data_paths(path):
    """Each cube <-> vector data path of the a5 example (and its atomic-add store) under the sanitizer."""
    module = load("data_paths")

    def run():
        torch.manual_seed(0)  # the same inputs for the plain and the sanitized run
        return getattr(module, path)()[0]

    want, got = plain_and_sanitized(module, f"{path}_kernel", run)
    assert_same(want, got)


@pytest.mark.parametrize("kernel", ["mlp_serial", "mlp_pipelined"])
@pytest.mark.parametrize("blocks", [1, 3])
def test_pipeline_mlp(kernel, blocks):
    """The pipeline= kernels themselves (the flags the pass inserted), not only their generated form."""
    module = load("pipeline_mlp")
    torch.manual_seed(blocks)
    a, b, d = torch.randn(blocks * 64, 64), torch.randn(64, 64), torch.randn(64, 64)
    want, got = plain_and_sanitized(module, kernel, lambda: module.relu_mlp(a, b, d, getattr(module, kernel)))
    assert_same(want, got)

"""examples/fused_softmax_matmul.py: softmax(A @ B) as a mixed kernel, against torch. It needs the
cube ops (pl.matmul, pl.move) and the vector reductions (pl.row_max, ...) of the tile language,
tier 1, which land separately: until then the test is skipped."""

import importlib.util
from pathlib import Path

import pytest
import torch

from pypto_pro import _C

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fused_softmax_matmul.py"

pytestmark = pytest.mark.skipif(
    "matmul" not in _C.ir.op_names() or "row_max" not in _C.ir.op_names(),
    reason="needs pl.matmul/pl.move (cube ops) and pl.row_max/row_sum/exp/row_expand_* (vector ops), "
           "built in parallel to the mixed-kernel machinery")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("fused_softmax_matmul", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("block_dim", [1, 2, 3])
def test_fused_softmax_matmul_matches_torch(example, block_dim):
    out, ref = example.run(m=48, block_dim=block_dim)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out.sum(dim=-1), torch.ones(48), rtol=1e-3, atol=1e-3)


def test_more_bands_than_blocks(example):
    out, ref = example.run(m=96, block_dim=2, seed=1)  # block 0 takes bands 0, 2, 4: three flags in a row
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)

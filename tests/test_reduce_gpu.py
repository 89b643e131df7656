"""reduce and map on a real GPU (skipped without one): the softmax and
rmsnorm examples against torch on random inputs with NaN-poisoned outputs,
and the CPU tests' wgmma-accumulator and across-warps kernels against
numpy.  Compiled for sm_90a (the examples' target): an H100-class device."""
from pathlib import Path

import numpy as np
import pytest

from test_reduce_map import ACROSS_WARPS, ATTENTION_TILE, LANE_SUMS, build
from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str, defines: dict):
    r = compile_source((EXAMPLES / f"{name}.tile").read_text(), f"{name}.tile", target="sm_90a", defines=defines)
    return CompiledModule(r.ptx, r.meta, "sm_90a").kernel(name)


SHAPES = [(64, 4096, 512), (256, 1024, 128), (3, 2048, 64)]


@pytest.mark.parametrize("rows,n,threads", SHAPES)
def test_softmax_example_matches_torch(hopper, rows, n, threads):
    torch = pytest.importorskip("torch")
    x = (torch.randn(rows, n, device="cuda") * 3).half()
    y = torch.full_like(x, float("nan"))
    example("softmax", {"ROWS": rows, "N": n, "THREADS": threads})(x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x.float(), dim=1).half(), atol=1e-3, rtol=1e-2)


@pytest.mark.parametrize("rows,n,threads,rpc", [s + (1,) for s in SHAPES] + [(64, 1024, 32, 4)])
def test_rmsnorm_example_matches_torch(hopper, rows, n, threads, rpc):
    torch = pytest.importorskip("torch")
    x = torch.randn(rows, n, device="cuda").half()
    w = torch.randn(n, device="cuda").half()
    y = torch.full_like(x, float("nan"))
    example("rmsnorm", {"ROWS": rows, "N": n, "THREADS": threads, "RPC": rpc})(x, w, y)
    torch.cuda.synchronize()
    xf = x.float()
    want = (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).half()
    torch.testing.assert_close(y, want, atol=2e-2, rtol=1e-2)


def kernel(text: str):
    r = build(text)
    return CompiledModule(r.ptx, r.meta, "sm_90a").kernel()


def test_row_statistics_of_a_wgmma_accumulator_on_the_device(hopper):
    a = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32)
    p, m, l = (np.full(s, np.nan, np.float32) for s in ((64, 64), 64, 64))
    kernel(ATTENTION_TILE)(a, p, m, l)
    e = np.exp2(a - a.max(1, keepdims=True))
    np.testing.assert_array_equal(m, a.max(1))
    np.testing.assert_allclose(l, e.sum(1), rtol=1e-5)
    np.testing.assert_allclose(p, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_reduction_across_warps_on_the_device(hopper):
    a = np.random.default_rng(6).standard_normal((32, 6)).astype(np.float32)
    b = np.full((32, 2), np.nan, np.float32)
    kernel(ACROSS_WARPS)(a, b)
    want = np.maximum(a.max(1), 1.0)
    np.testing.assert_array_equal(b, np.stack([want, want], 1))


@pytest.mark.parametrize("op", ["sum", "max"])
def test_integer_rows_across_lane_quads_with_redux_on_the_device(hopper, op):
    text = LANE_SUMS.format(layout="S[(8, 4, 4) : (4@laneid, 1@laneid, 1)]", rows=8, cols=16, op=op)
    a = np.random.default_rng(10).integers(-1000, 1000, (8, 16)).astype(np.int32)
    b = np.zeros(8, np.int32)
    kernel(text)(a, b)
    np.testing.assert_array_equal(b, a.sum(1) if op == "sum" else a.max(1))

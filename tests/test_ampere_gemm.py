"""examples/ampere/gemm_cp_async.tile: the sm_80 multistage GEMM (cp.async
ring, ldmatrix, mma.sync).  On the CPU the lowered IR runs in the dispatch
model (tests/dispatch_model.py: cp.async, ldmatrix and mma.sync written from
the PTX ISA) on one CTA, square and ragged; the GPU tests run it at 4096^3
and at a ragged size against numpy.  Its speed against cuBLAS is in bench/."""
from pathlib import Path

import numpy as np
import pytest

from dispatch_model import Model
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble, resource_usage

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "ampere" / "gemm_cp_async.tile"


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


def test_the_corner_cta_in_the_model():
    """The last CTA of a ragged 136 x 144 x 72 GEMM: its 128 x 128 tile has
    8 rows and 16 columns inside D, and the third K step 8 of its 32 columns
    inside A and B; the rest is zero-filled on load and not stored."""
    m, n, k = 136, 144, 72
    module = compile_source(SOURCE.read_text(), str(SOURCE), defines={"M": m, "N": n, "K": k},
                            options=Options(stop_after="unroll")).module
    a, b, want = _operands(m, n, k)
    d = np.full((m, n), np.nan, np.float32)
    Model(module, "sm_80", cta=(1, 1)).run({"A": a, "B": b, "D": d})
    np.testing.assert_allclose(d[128:, 128:], want[128:, 128:], rtol=1e-4, atol=1e-3)
    assert np.isnan(d[:128]).all() and np.isnan(d[:, :128]).all()  # other CTAs' tiles untouched


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_it_assembles_without_spills(target):
    r = compile_source(SOURCE.read_text(), str(SOURCE), target=target)
    assemble(r.ptx, target)
    usage = resource_usage(r.ptx, target)["gemm"]
    assert usage["spill_stores"] == 0 and usage["smem"] == 49152
    for opcode in ("cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4", "mma.sync.aligned.m16n8k16",
                   "cp.async.wait_group 1;"):
        assert opcode in r.ptx


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(4096, 4096, 4096), (1000, 1544, 1000)])
def test_on_the_device(m, n, k):
    import torch

    from tilec.runtime.module import CompiledModule

    r = compile_source(SOURCE.read_text(), str(SOURCE), defines={"M": m, "N": n, "K": k})
    kernel = CompiledModule(r.ptx, r.meta, "sm_80").kernel("gemm")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=g).half()
    b = torch.randn(n, k, device="cuda", generator=g).half()
    d = torch.full((m, n), float("nan"), device="cuda")
    kernel(a, b, d)
    torch.cuda.synchronize()
    want = a.double() @ b.double().T
    err = (d.double() - want).abs().max().item()
    assert not torch.isnan(d).any() and err < 1e-3 * k ** 0.5 * 4, err

"""examples/hopper/gemm_small_m.tile, the decode-shaped GEMM (M <= 256):
its size rules, a simulated run (tests/wgmma_ptx_sim.py) through the ring
and the transposed store, and the H100 against numpy.  hgemm_v7 with BLK_N
128 is checked here too, as tilec.autotune offers it."""
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from test_hopper_gemm import inputs, relative_error
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"


def build(name, **defines):
    path = EXAMPLES / f"{name}.tile"
    return compile_source(path.read_text(), str(path), defines=defines)


def operands(m, n, k, seed=0):
    A, B = inputs(m, n, k, seed)
    return A, B, A.astype(np.float64) @ B.astype(np.float64).T


@pytest.mark.parametrize("m", [8, 16, 64, 136, 256])
def test_every_m_compiles_to_one_wgmma_shape(m):
    r = build("gemm_small_m", M=m, N=512, K=512)
    assemble(r.ptx, "sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{m}k16.f32.f16.f16" in r.ptx
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [512 // 64, 1, 1] and kernel["block"] == [256, 1, 1]
    assert kernel["dynamic_smem"] <= 227 * 1024


@pytest.mark.parametrize(
    "defines, message",
    [
        ({"M": 12}, "M must be a multiple of 8"),
        ({"M": 264}, "M must be a multiple of 8"),
        ({"N": 4000}, "N must be a multiple of 64"),
        ({"K": 36}, "K must be a multiple of 8"),
    ],
)
def test_unsupported_sizes_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message):
        build("gemm_small_m", **{"M": 64, "N": 512, "K": 512, **defines})


def test_simulated_ring_wraps_and_store_transposes():
    """K = 9 tiles through a 3-stage ring (three passes, the last partial),
    two CTAs, M = 24: every element of D written once, in place."""
    m, n, k = 24, 128, 9 * 64
    r = build("gemm_small_m", M=m, N=n, K=k, STAGES=3)
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, ref) < 1e-3


def test_simulated_v7_with_128_wide_tiles():
    m, n, k = 128, 256, 192
    r = build("hgemm_v7", M=m, N=n, K=k, BLK_N=128, SM_COUNT=1)
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("m", [8, 16, 64, 128, 256])
@pytest.mark.parametrize("n, k", [(1024, 4096), (4096, 1032)])
def test_matches_numpy_on_the_gpu(m, n, k):
    from tilec.runtime.module import CompiledModule

    r = build("gemm_small_m", M=m, N=n, K=k)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    A, B, ref = operands(m, n, k, seed=m)
    D = np.full((m, n), np.nan, np.float16)
    kernel(A, B, D)
    assert relative_error(D, ref) < 1e-2

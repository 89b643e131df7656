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
        ({"N": 4000}, "N must be a multiple of ROWS \\(64 by default\\)"),
        ({"K": 36}, "K must be a multiple of 8"),
        ({"ROWS": 48}, "ROWS must be 16, 32 or 64"),
        ({"ROWS": 32, "N": 528}, "N must be a multiple of ROWS"),
        ({"HINT": 2}, "HINT must be 0 or 1"),
        ({"ROWS": 32, "HAS_BIAS": True}, "the bias and the residual need ROWS = 64"),
        ({"ROWS": 32, "HAS_RESIDUAL": True}, "the bias and the residual need ROWS = 64"),
    ],
)
def test_unsupported_sizes_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message):
        build("gemm_small_m", **{"M": 64, "N": 512, "K": 512, **defines})


@pytest.mark.parametrize("rows", [16, 32])
def test_narrow_slabs_give_more_ctas(rows):
    """ROWS columns of D per CTA: N / ROWS CTAs, B's box ROWS rows; a
    stage's first fill adds the boxes of zeros for rows ROWS..63 (expect_tx
    64 + M rows, later ROWS + M); the store goes through shared memory in
    16-byte pieces."""
    m, n = 16, 1536
    r = build("gemm_small_m", M=m, N=n, K=512, ROWS=rows)
    assemble(r.ptx, "sm_90a")
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [n // rows, 1, 1] and kernel["block"] == [256, 1, 1]
    boxes = sorted(t["box"] for t in kernel["tensormaps"])
    assert boxes == sorted([[64, rows], [64, m]]), boxes
    expects = sorted(int(line.rstrip(";").split(", ")[-1]) for line in r.ptx.splitlines() if "expect_tx" in line)
    assert expects == [(rows + m) * 128, (64 + m) * 128], expects
    loads = [line for line in r.ptx.splitlines() if "cp.async.bulk.tensor" in line]
    assert len(loads) == 2 + 64 // rows - 1   # B, A, and the zero boxes (unrolled)
    assert "st.global.v4.b32" in r.ptx and "st.global.b16" not in r.ptx


def test_default_stores_directly_and_hint_marks_only_b():
    """By default B's loads (not A's) carry the evict_first policy; HINT=0
    drops it.  ROWS = 64 stores from registers, no shared staging."""
    plain = build("gemm_small_m", M=16, N=512, K=512, HINT=0).ptx
    assemble(plain, "sm_90a")
    assert "cache_hint" not in plain and "st.shared" not in plain
    hinted = build("gemm_small_m", M=16, N=512, K=512).ptx
    assert "st.shared" not in hinted
    loads = [line.strip() for line in hinted.splitlines() if "cp.async.bulk.tensor" in line]
    assert len(loads) == 2
    assert sum(".L2::cache_hint" in line for line in loads) == 1
    assert [line.endswith(", 1364590687093260288;") for line in loads].count(True) == 1  # 0x12F0000000000000


def test_simulated_ring_wraps_and_store_transposes():
    """K = 9 tiles through a 3-stage ring (three passes, the last partial),
    two CTAs, M = 24: every element of D written once, in place."""
    m, n, k = 24, 128, 9 * 64
    r = build("gemm_small_m", M=m, N=n, K=k, STAGES=3)
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, ref) < 1e-3


@pytest.mark.parametrize("rows, hint, m, n", [(32, 0, 24, 128), (16, 1, 8, 64)])
def test_simulated_narrow_slabs(rows, hint, m, n):
    """ROWS < 64: K = 5 tiles through a 3-stage ring on N / ROWS CTAs; the
    wgmma's rows past ROWS are zeros and not stored, so every element of
    the NaN-poisoned D is written once, by its own CTA."""
    k = 5 * 64
    r = build("gemm_small_m", M=m, N=n, K=k, STAGES=3, ROWS=rows, HINT=hint)
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


@pytest.mark.gpu
@pytest.mark.parametrize("m", [16, 128])
@pytest.mark.parametrize("rows, hint", [(64, 0), (32, 0), (32, 1), (16, 1)])
def test_narrow_slabs_and_hint_on_the_gpu(m, rows, hint):
    from tilec.runtime.module import CompiledModule

    n, k = 1536, 1032
    r = build("gemm_small_m", M=m, N=n, K=k, ROWS=rows, HINT=hint, STAGES=4)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    A, B, ref = operands(m, n, k, seed=rows + m)
    D = np.full((m, n), np.nan, np.float16)
    kernel(A, B, D)
    assert relative_error(D, ref) < 1e-2

"""The stream-K GEMMs: examples/hopper/gemm_small_m_stream_k.tile (the
decode GEMM with its (slab, K tile) steps shared evenly among a persistent
grid) and gemm_stream_k.tile (hgemm_v7's tiles, each row of M-tiles
shared evenly by a lane of CTAs by K steps).  Their size rules, simulated runs (tests/wgmma_ptx_sim.py) that
reach every kind of segment (a whole tile or slab stored directly, a
partial one in a CTA's first or last slot, two and three contributors,
lanes of CTAs per row of M-tiles, an idle CTA) and give the same D bit for bit in
any CTA order with the counters back at zero, and the H100 against torch."""
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from test_gemm_small_m import build, operands
from test_hopper_gemm import relative_error
from tilec.compiler.diagnostics import TilecError
from tilec.runtime.assemble import assemble

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"
NAME = "gemm_small_m_stream_k"


def cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("m", [8, 64, 256])
def test_compiles_to_a_persistent_grid(m):
    r = build(NAME, M=m, N=4096, K=4096, SM_COUNT=132)
    assemble(r.ptx, "sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{m}k16.f32.f16.f16" in r.ptx
    assert "fence.acq_rel.gpu;" in r.ptx and "atom.global.add.s32" in r.ptx
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [132, 1, 1] and kernel["block"] == [256, 1, 1]
    shapes = {p["name"]: p["shape"] for p in kernel["params"] if p["kind"] == "buffer"}
    assert shapes["W"] == [132, 2, 64, m] and shapes["C"] == [64]


@pytest.mark.parametrize(
    "defines, message",
    [
        ({"M": 12}, "M must be a multiple of 8"),
        ({"N": 4000}, "N must be a multiple of 64"),
        ({"K": 36}, "K must be a multiple of 8"),
        ({"SM_COUNT": 0}, "SM_COUNT must be at least 1"),
    ],
)
def test_unsupported_sizes_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message):
        build(NAME, **{"M": 64, "N": 512, "K": 512, **defines})


def run(m, n, k, sms, order):
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    W = np.full((sms, 2, 64, m), np.nan, np.float32)
    C = np.zeros(n // 64, np.int32)
    r = build(NAME, M=m, N=n, K=k, SM_COUNT=sms, STAGES=2)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "W": W, "C": C},
                      ctas=[(g, 0, 0) for g in order])
    assert relative_error(D, ref) < 1e-3
    assert not C.any()
    return D


@pytest.mark.parametrize(
    "m, n, k, sms",
    [
        # 2 slabs x 5 K tiles (the last partial) on 3 CTAs: steps 0-2 | 3-5 | 6-9.
        # CTA 1 ends slab 0 (slot 0) and starts slab 1 (slot 1); slab 1 sums CTA 1's
        # last slot and CTA 2's first
        (24, 128, 4 * 64 + 8, 3),
        # 3 slabs x 3 K tiles on 2 CTAs: steps 0-3 | 4-8.  Slabs 0 and 2 are whole
        # (stored directly); slab 1 is CTA 0's last slot and CTA 1's first
        (16, 192, 3 * 64, 2),
        # 1 slab x 7 K tiles on 3 CTAs: three contributors
        (8, 64, 7 * 64, 3),
    ],
)
def test_simulated_segments_sum_the_same_in_any_order(m, n, k, sms):
    forward = run(m, n, k, sms, range(sms))
    backward = run(m, n, k, sms, reversed(range(sms)))
    assert forward.tobytes() == backward.tobytes()


@pytest.mark.parametrize("blk_m, blk_n", [(128, 192), (64, 128)])
def test_v7_stream_k_compiles_and_assembles(blk_m, blk_n):
    r = build("gemm_stream_k", M=512, N=1536, K=512, SM_COUNT=132, BLK_M=blk_m, BLK_N=blk_n)
    assemble(r.ptx, "sm_90a")  # no warning: the wgmmas are not serialized
    assert f"wgmma.mma_async.sync.aligned.m64n{blk_n}k16.f32.f16.f16" in r.ptx
    assert "fence.acq_rel.gpu;" in r.ptx and "atom.global.add.s32" in r.ptx
    consumers = blk_m // 64
    assert r.ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == consumers
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [132, 1, 1] and kernel["block"] == [128 * (1 + consumers), 1, 1]
    shapes = {p["name"]: p["shape"] for p in kernel["params"] if p["kind"] == "buffer"}
    tiles = cdiv(512, blk_m) * cdiv(1536, blk_n)
    assert shapes["W"] == [132, 2, blk_m, blk_n] and shapes["C"] == [tiles * consumers]


@pytest.mark.parametrize(
    "defines, message",
    [
        ({"BLK_M": 96}, "BLK_M must be 64 or 128"),
        ({"BLK_N": 160}, "BLK_N must be 64, 128, 192 or 256"),
        ({"N": 1020}, "N and K must be multiples of 8"),
        ({"M": 64}, "must be at least one tile"),
        ({"M": 512, "SM_COUNT": 3}, "at most SM_COUNT rows of M-tiles"),
        ({"MIN_STEPS": 0}, "MIN_STEPS must be at least 1"),
    ],
)
def test_v7_stream_k_unsupported_sizes_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message):
        build("gemm_stream_k", **{"M": 512, "N": 512, "K": 512, "SM_COUNT": 132, **defines})


def run_v7(m, n, k, sms, order, **defines):
    A, B, ref = operands(m, n, k)
    bm, bn = defines.get("BLK_M", 128), defines.get("BLK_N", 256)
    D = np.full((m, n), np.nan, np.float16)
    W = np.full((sms, 2, bm, bn), np.nan, np.float32)
    C = np.zeros(cdiv(m, bm) * cdiv(n, bn) * bm // 64, np.int32)
    r = build("gemm_stream_k", M=m, N=n, K=k, SM_COUNT=sms, **defines)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "W": W, "C": C},
                      ctas=[(g, 0, 0) for g in order])
    assert relative_error(D, ref) < 1e-3
    assert not C.any()
    return D


def test_simulated_v7_stream_k_lanes():
    """3 rows of 64x64 M-tiles (the last 8 rows high) on 7 CTAs: 3 lanes of
    2 (CTA 6 idle).  Each lane's 3 N-tiles (the last 8 wide) x 3 K tiles
    (the last partial) are 9 steps: place 0 has N-tile 0 whole and N-tile
    1's first step (slot 1), place 1 N-tile 1's other two (slot 0) and
    N-tile 2 whole; lane r's N-tile 1 is summed from CTAs r and r + 3."""
    run_v7(136, 136, 136, 7, range(7), BLK_M=64, BLK_N=64, STAGES=2, MIN_STEPS=1)


def test_simulated_v7_stream_k_three_contributors_in_any_order():
    """One 64x64 tile of 7 K tiles shared by 3 CTAs (2, 2 and 3 steps): the
    same D bits whichever CTA arrives last."""
    forward = run_v7(64, 64, 7 * 64, 3, range(3), BLK_M=64, BLK_N=64, STAGES=3, MIN_STEPS=2)
    backward = run_v7(64, 64, 7 * 64, 3, reversed(range(3)), BLK_M=64, BLK_N=64, STAGES=3, MIN_STEPS=2)
    assert forward.tobytes() == backward.tobytes()


def test_simulated_v7_stream_k_odd_store_count_alternates_staging():
    """64x192 tiles make three stores each, so the CTA's second whole tile
    starts on the other staging tile (store_tile's leader waits only for the
    stores before the latest; the simulator completes bulk stores at once, so
    this pins the indexing, not the race)."""
    run_v7(64, 384, 128, 1, range(1), BLK_M=64, BLK_N=192, STAGES=2, MIN_STEPS=1)


def _runs_twice_like_torch(torch, kernel, A, B, W, C):
    """Two launches into NaN-poisoned outputs: each within 1e-2 of torch in
    f32, the counters back to zero after each, and the two bit-identical
    (the fixup sums in a fixed order)."""
    ref = A.float() @ B.float().T
    outputs = []
    for _ in range(2):
        D = torch.full((A.shape[0], B.shape[0]), float("nan"), dtype=torch.float16, device="cuda")
        kernel(A, B, D, W, C)
        torch.cuda.synchronize()
        assert not torch.isnan(D).any()
        assert float((D.float() - ref).norm() / ref.norm()) < 1e-2
        assert not C.any()
        outputs.append(D)
    assert torch.equal(outputs[0], outputs[1])


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(16, 4096, 4096), (64, 10240, 1032), (128, 6144, 4096), (256, 1024, 512)])
def test_matches_torch_on_the_gpu(m, n, k):
    """Two launches (the counters reset by the first) write the same D bit
    for bit into a NaN-poisoned output, within 1e-2 of torch's f32 product."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("needs an H100-class GPU")
    from tilec.runtime.module import CompiledModule

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r = build(NAME, M=m, N=n, K=k, SM_COUNT=sms)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    A = torch.randn(m, k, dtype=torch.float16, device="cuda")
    B = torch.randn(n, k, dtype=torch.float16, device="cuda")
    W = torch.empty(sms, 2, 64, m, device="cuda")
    C = torch.zeros(n // 64, dtype=torch.int32, device="cuda")
    _runs_twice_like_torch(torch, kernel, A, B, W, C)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, blk_m, blk_n", [(512, 10240, 1024, 128, 192), (1000, 1032, 1064, 64, 128),
                                                   (512, 6144, 4096, 128, 256)])
def test_v7_stream_k_matches_torch_on_the_gpu(m, n, k, blk_m, blk_n):
    """As above, for hgemm_v7's tiles shared by K steps."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("needs an H100-class GPU")
    from tilec.runtime.module import CompiledModule

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r = build("gemm_stream_k", M=m, N=n, K=k, SM_COUNT=sms, BLK_M=blk_m, BLK_N=blk_n)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    A = torch.randn(m, k, dtype=torch.float16, device="cuda")
    B = torch.randn(n, k, dtype=torch.float16, device="cuda")
    W = torch.empty(sms, 2, blk_m, blk_n, device="cuda")
    C = torch.zeros(cdiv(m, blk_m) * cdiv(n, blk_n) * blk_m // 64, dtype=torch.int32, device="cuda")
    _runs_twice_like_torch(torch, kernel, A, B, W, C)

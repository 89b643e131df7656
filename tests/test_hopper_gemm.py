"""The sm_90a GEMM kernels (examples/hopper/hgemm_v4 ... v7): they compile
and assemble cleanly, use the instructions their design is about, refuse
the sizes they do not support, and compute A @ B^T -- in the PTX simulator
(tests/wgmma_ptx_sim.py) at small sizes that exercise their edge cases, and
on an H100 (`gpu` tests)."""
import re
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"
VERSIONS = (4, 5, 6, 7)


def source(version: int, dtype: str = "f16") -> str:
    """The example; bf16 is the same program with its element type replaced."""
    text = (EXAMPLES / f"hgemm_v{version}.tile").read_text()
    return text if dtype == "f16" else re.sub(r"\bf16\b", dtype, text)


def build(version: int, dtype: str = "f16", **defines):
    return compile_source(source(version, dtype), str(EXAMPLES / f"hgemm_v{version}.tile"), defines=defines)


def inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((n, k)).astype(np.float16)


def relative_error(d, ref) -> float:
    d = d.astype(np.float64)
    if np.isnan(d).any():
        return float("inf")
    return float(np.linalg.norm(d - ref) / np.linalg.norm(ref))


# --------------------------------------------------------------------------
# Compilation (CPU)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_builds():
    return {v: build(v) for v in VERSIONS}


@pytest.mark.parametrize("version", VERSIONS)
def test_compiles_and_assembles_without_warnings(default_builds, version):
    r = default_builds[version]
    assemble(r.ptx, "sm_90a")  # fails on any ptxas warning (e.g. serialized wgmmas)
    ptx = r.ptx
    n = 256 if version == 7 else 128
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "wgmma.wait_group.sync.aligned" in ptx


def test_launch_shapes(default_builds):
    grids = {v: default_builds[v].meta["kernels"][0] for v in VERSIONS}
    assert grids[4]["grid"] == grids[5]["grid"] == [32, 32, 1]
    assert grids[6]["grid"] == grids[7]["grid"] == [132, 1, 1]
    assert [grids[v]["block"][0] for v in VERSIONS] == [128, 128, 128, 384]
    assert grids[7]["dynamic_smem"] <= 227 * 1024


def test_v7_specializes_warps(default_builds):
    ptx = default_builds[7].ptx
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == 2  # one per consumer warpgroup
    assert "wgmma.wait_group.sync.aligned 1;" in ptx  # one batch stays in flight
    assert "mbarrier.arrive.shared::cta.b64" in ptx  # consumers release stages


# Tile shapes with the deepest ring each fits (the header's rule)
TILE_SHAPES = [(128, 192, 4), (128, 128, 6), (64, 256, 5), (64, 192, 6), (64, 128, 8), (64, 64, 13),
               (128, 240, 4), (128, 224, 4), (128, 176, 5), (128, 160, 5), (128, 80, 7), (64, 208, 6),
               (64, 112, 9)]


@pytest.mark.parametrize("blk_m, blk_n, stages", TILE_SHAPES)
def test_v7_tile_shapes_compile_and_assemble(blk_m, blk_n, stages):
    """Every tile shape the tuner offers: one m64nBLK_Nk16 wgmma shape, one
    consumer warpgroup per 64 rows (each raising its registers once), each
    consumer's stage releases counted, and the ring as deep as the header's
    rule says fits the 227 KiB an sm_90a CTA may have (one stage more would
    not)."""
    r = build(7, M=1024, N=1024, K=1024, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages)
    assemble(r.ptx, "sm_90a")  # no warning: the wgmmas are not serialized
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", r.ptx)) == {f"m64n{blk_n}k16"}
    consumers = blk_m // 64
    assert r.ptx.count("setmaxnreg.inc.sync.aligned.u32 232;") == consumers
    (kernel,) = r.meta["kernels"]
    assert kernel["block"] == [128 * (1 + consumers), 1, 1]
    assert kernel["grid"] == [132, 1, 1]
    stage_bytes = (blk_m + blk_n) * 64 * 2
    assert kernel["dynamic_smem"] == 1024 + stages * stage_bytes + blk_m * 256
    assert kernel["dynamic_smem"] <= 227 * 1024 < kernel["dynamic_smem"] + stage_bytes


@pytest.mark.parametrize("blk_n, widths", [(256, [64] * 4), (192, [64] * 3), (160, [64, 64, 32]),
                                           (176, [64, 64, 32, 16]), (80, [64, 16]), (112, [64, 32, 16])])
def test_v7_epilogue_stores_64_32_and_16_columns(blk_n, widths):
    """A tile's columns leave in TMA stores of 64, then 32, then 16 columns
    (what BLK_N % 64 leaves), each staged in a tile whose swizzle spans its
    row (128, 64, 32 bytes), so each store is one box; every store is one
    cp.async.bulk.tensor per consumer warpgroup."""
    r = build(7, M=1024, N=1024, K=1024, BLK_N=blk_n, STAGES=3)
    assemble(r.ptx, "sm_90a")
    (kernel,) = r.meta["kernels"]
    boxes = sorted((t["box"][0], t["swizzle"]) for t in kernel["tensormaps"] if t["tensor"] == "D")
    assert boxes == sorted({(w, {64: "128B", 32: "64B", 16: "32B"}[w]) for w in widths})
    assert r.ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 2 * len(widths)
    assert "st.shared" not in r.ptx  # the registers go to shared memory by stmatrix alone


@pytest.mark.parametrize("defines, message", [
    ({"BLK_M": 96}, "BLK_M must be 64 or 128"),
    ({"BLK_N": 168}, "BLK_N must be a multiple of 16 from 64 to 256"),
    ({"BLK_N": 48}, "BLK_N must be a multiple of 16 from 64 to 256"),
    ({"BLK_N": 272}, "BLK_N must be a multiple of 16 from 64 to 256"),
    ({"M": 64, "BLK_M": 128}, "must be at least one tile"),
    ({"N": 128, "BLK_N": 192}, "must be at least one tile"),
    ({"CLUSTER_M": 4}, "CLUSTER_M must be 1 or 2"),
    ({"CLUSTER_M": 2, "SM_COUNT": 133}, "SM_COUNT must be a whole number of clusters"),
])
def test_v7_unsupported_tiles_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=f"assertion failed: .*{message}"):
        build(7, **{"M": 1024, "N": 1024, "K": 1024, **defines})


@pytest.mark.parametrize("blk_m, blk_n, stages", [(128, 256, 4), (128, 160, 5), (64, 176, 7)])
def test_v7_cluster_pairs_share_b_by_multicast(blk_m, blk_n, stages):
    """CLUSTER_M=2: 2-CTA clusters, each CTA loading its A tile alone and
    half of the B tile into the same stage of both (one multicast load per
    K step, mask 3); a consumer releases a stage in both CTAs (a local
    arrive and, through mapa, one on the peer's barrier, at each of the two
    releases of the main loop, per consumer warpgroup); the barriers are
    initialised and the kernel left behind cluster barriers.  The default (CLUSTER_M=1) has none of it."""
    r = build(7, M=1024, N=1024, K=1024, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages, CLUSTER_M=2)
    assemble(r.ptx, "sm_90a")
    (kernel,) = r.meta["kernels"]
    assert kernel["cluster"] == [2, 1, 1] and kernel["grid"] == [132, 1, 1]
    assert ".reqnctapercluster 2, 1, 1" in r.ptx
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\S*", r.ptx)
    assert sorted(loads) == ["cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                             "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                             ".multicast::cluster"]
    b_boxes = [t["box"] for t in kernel["tensormaps"] if t["tensor"] == "B"]
    assert b_boxes == [[64, blk_n // 2]]
    consumers = blk_m // 64
    assert r.ptx.count("mapa.shared::cluster.u32") == 2 * consumers
    assert r.ptx.count("mbarrier.arrive.shared::cluster.b64") == 2 * consumers
    assert r.ptx.count("mbarrier.arrive.shared::cta.b64") == 2 * consumers
    assert r.ptx.count("barrier.cluster.arrive.release.aligned;") == 2
    assert re.search(rf"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], {2 * consumers};", r.ptx)
    default = build(7, M=1024, N=1024, K=1024, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages)
    assert "cluster" not in default.meta["kernels"][0] or default.meta["kernels"][0]["cluster"] == [1, 1, 1]
    assert "multicast" not in default.ptx and "mapa" not in default.ptx and "barrier.cluster" not in default.ptx


def test_v7_ring_too_deep_for_shared_memory_is_a_compile_error():
    with pytest.raises(TilecError, match="shared memory reaches .* over the 232448 bytes"):
        build(7, M=1024, N=1024, K=1024, BLK_N=160, STAGES=6)


def test_bf16_versions_compile():
    r = build(7, "bf16")
    assemble(r.ptx, "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in r.ptx
    assert "cvt.rn.bf16x2.f32" in r.ptx


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("defines, message", [
    ({"N": 1020}, "N and K must be multiples of 8"),
    ({"K": 4100}, "N and K must be multiples of 8"),
    ({"M": 64}, "must be at least one tile"),
])
def test_unsupported_sizes_are_compile_errors(version, defines, message):
    with pytest.raises(TilecError, match=f"assertion failed: .*{message}"):
        build(version, **defines)


# --------------------------------------------------------------------------
# Simulated (CPU): small sizes that reach the edge cases
# --------------------------------------------------------------------------


def simulate(version, m, n, k, ctas=None, **defines):
    r = build(version, M=m, N=n, K=k, **defines)
    A, B = inputs(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D}, ctas=ctas)
    return D, A.astype(np.float64) @ B.astype(np.float64).T


def test_v4_ragged_corner_tile():
    """The CTA of the last tile row and column: 72 of its 128 rows, 8 of its
    128 columns and 8 of the 64 columns of its second K tile exist."""
    D, ref = simulate(4, 200, 136, 72, ctas=[(1, 1, 0)])
    assert relative_error(D[128:, 128:], ref[128:, 128:]) < 1e-3
    assert np.isnan(D[:128, :].astype(np.float32)).all()  # other CTAs' tiles were not run


def test_v5_ring_wraps_with_an_odd_number_of_k_tiles():
    D, ref = simulate(5, 128, 128, 320)
    assert relative_error(D, ref) < 1e-3


def test_v6_carries_stage_phases_across_tiles():
    """Two tiles in one CTA with 3 K tiles: stage 0's barrier completes twice
    per tile and stage 1's once, so resetting the phases per tile (as the
    seed does) would wait forever on the second tile."""
    D, ref = simulate(6, 256, 128, 192, SM_COUNT=1)
    assert relative_error(D, ref) < 1e-3


def test_v7_ring_runs_on_across_tiles():
    """Two tiles in one CTA with 3 K tiles in a 4-stage ring: the second
    tile starts at stage 3 in the second phase."""
    D, ref = simulate(7, 256, 256, 192, SM_COUNT=1)
    assert relative_error(D, ref) < 1e-3


def test_v7_one_consumer_192_wide_tiles():
    """64x192 tiles (one consumer warpgroup, m64n192k16) over a ragged
    136 x 200 output: 3 x 2 tiles on 2 persistent CTAs, the last row of
    tiles 8 rows high and the last column 8 wide, through a 3-stage ring
    that wraps within and across tiles."""
    D, ref = simulate(7, 136, 200, 192, SM_COUNT=2, BLK_M=64, BLK_N=192, STAGES=3)
    assert relative_error(D, ref) < 1e-3


def test_v7_two_consumers_192_wide_tiles():
    """128x192 tiles: two tiles in one CTA, the second 8 columns wide."""
    D, ref = simulate(7, 128, 200, 128, SM_COUNT=1, BLK_N=192)
    assert relative_error(D, ref) < 1e-3


def test_v7_one_consumer_176_wide_tiles():
    """64x176 tiles (stores of 64, 64, 32 and 16 columns) over a ragged
    136 x 344 output on 2 persistent CTAs: the last row of tiles 8 rows
    high, the last column's 32-column store full and its 16-column store 8
    columns wide."""
    D, ref = simulate(7, 136, 344, 192, SM_COUNT=2, BLK_M=64, BLK_N=176, STAGES=3)
    assert relative_error(D, ref) < 1e-3


def test_v7_odd_store_count_alternates_staging_across_tiles():
    """128x160 tiles make three stores each (64, 64, 32), so a CTA's second
    tile starts on the other staging tile; the second tile is 8 of its 32
    last columns wide."""
    D, ref = simulate(7, 128, 328, 128, SM_COUNT=1, BLK_N=160, STAGES=3)
    assert relative_error(D, ref) < 1e-3


def test_v7_cluster_pairs_share_b_in_the_simulator():
    """CLUSTER_M=2 on 2 clusters of 64x64 tiles over 136 rows, 2 K tiles a
    tile and 2 tiles a cluster through a 3-stage ring: each CTA multicasts
    its half of B into both, releases stages in both through mapa, and the
    last pair's second CTA has no rows at all but still loads and releases
    its half of B for its peer."""
    D, ref = simulate(7, 136, 128, 128, SM_COUNT=4, BLK_M=64, BLK_N=64, STAGES=3, CLUSTER_M=2)
    assert relative_error(D, ref) < 1e-3


# --------------------------------------------------------------------------
# On the GPU (H100)
# --------------------------------------------------------------------------


def run_on_gpu(version, m, n, k, **defines):
    from tilec.runtime.module import CompiledModule

    r = build(version, M=m, N=n, K=k, **defines)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    A, B = inputs(m, n, k, seed=version)
    D = np.full((m, n), np.nan, np.float16)
    kernel(A, B, D)
    return relative_error(D, A.astype(np.float32) @ B.astype(np.float32).T)


@pytest.mark.gpu
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("m, n, k", [(1024, 1024, 1024), (1000, 1032, 1064)], ids=["1024^3", "ragged"])
def test_matches_numpy_on_the_gpu(hopper, version, m, n, k):
    assert run_on_gpu(version, m, n, k) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("blk_m, blk_n, stages", [(128, 192, 4), (64, 256, 5), (64, 192, 6), (64, 128, 8),
                                                  (64, 64, 12), (128, 160, 5), (128, 240, 4), (64, 176, 7),
                                                  (128, 80, 7)])
def test_v7_tile_shapes_match_numpy_on_the_gpu(hopper, blk_m, blk_n, stages):
    """Each tile shape on a ragged output: partial tiles on every edge, K not a multiple of 64."""
    assert run_on_gpu(7, 1000, 1032, 1064, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("blk_m, blk_n, stages, m", [(128, 256, 4, 1000), (128, 160, 5, 1100), (64, 176, 7, 1000)])
def test_v7_cluster_pairs_match_numpy_on_the_gpu(hopper, blk_m, blk_n, stages, m):
    """2-CTA clusters with B multicast on a ragged output; at M = 1100 (9
    tiles of 128 rows) the last pair's second CTA has no rows at all but
    still loads and releases its half of B for its peer."""
    assert run_on_gpu(7, m, 1032, 1064, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages, CLUSTER_M=2) < 1e-2

"""examples/hopper/hgemm_pingpong.tile: two consumer warpgroups that own
whole tiles in turn.  On the CPU its configurations compile and assemble
without warnings or spills, and in the PTX simulator with named barriers
modelled (ptx_sim.Kernel(named_barriers=True)) each CTA's tiles run their
main loops and their epilogues strictly one after the other, alternating
between the consumers, with every named barrier phase complete at exit and
D right; the same checks fail for a kernel with the ordering mutated.  On
the H100 (`gpu` tests) it matches torch at exact and ragged shapes, f16 and
bf16."""
import re
from itertools import groupby
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from ptx_sim import Kernel
from test_gemm_small_m import operands
from test_hopper_gemm import relative_error
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble, resource_usage
from tma_ptx_sim import TmaModel

PATH = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "hgemm_pingpong.tile"


def build(text=None, dtype="f16", **defines):
    text = PATH.read_text() if text is None else text
    if dtype != "f16":
        text = re.sub(r"\bf16\b", dtype, text)
    return compile_source(text, str(PATH), defines=defines)


def cdiv(a, b):
    return -(-a // b)


# --------------------------------------------------------------------------
# Compilation (CPU)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("defines, smem", [
    (dict(BLK_M=128, BLK_N=192, STAGES=4), 1024 + 4 * 40960 + 65536),
    (dict(BLK_M=128, BLK_N=160, STAGES=4, HAS_BIAS=True, ACT=2, HAS_RESIDUAL=True), 1024 + 4 * 36864 + 65536),
    (dict(BLK_M=128, BLK_N=128, STAGES=5), 1024 + 5 * 32768 + 65536),
    (dict(BLK_M=64, BLK_N=256, STAGES=4), 1024 + 4 * 40960 + 32768),
    (dict(BLK_M=128, BLK_N=96, STAGES=5), 1024 + 5 * 28672 + 65536),
    (dict(BLK_M=64, BLK_N=192, STAGES=6), 1024 + 6 * 32768 + 32768),
    (dict(BLK_M=128, BLK_N=80, STAGES=6, HAS_BIAS=True, ACT=2, HAS_RESIDUAL=True), 1024 + 6 * 26624 + 65536),
    (dict(BLK_M=128, BLK_N=128, STAGES=5, CLUSTER_M=2), 1024 + 5 * 32768 + 65536),
    (dict(BLK_M=64, BLK_N=256, STAGES=4, CLUSTER_M=2), 1024 + 4 * 40960 + 32768),
])
def test_configurations_assemble_without_spills(defines, smem):
    """Each tile shape and ring depth (the header's table: the deepest ring
    that fits) assembles with no ptxas warning, with one wgmma per 64 rows
    and K step, and the two turn sequences' named barriers: each consumer
    syncs on its own and arrives on the other's.  A consumer holds BLK_M x
    BLK_N / 128 accumulators per thread; up to 128 nothing spills.  Above
    that (up to 192, under setmaxnreg 240) it depends on the assembler:
    ptxas 13.0 and the 580 driver's JIT (the H100's resource report,
    bench/RESULTS.md) allocate them without a spill, nvJitLink 13.5
    (`resource_usage`) spills from 128x160 up."""
    r = build(M=1000, N=1032, K=1064, **defines)
    assemble(r.ptx, "sm_90a")
    if defines["BLK_M"] * defines["BLK_N"] <= 128 * 128:
        usage = resource_usage(r.ptx, "sm_90a")["hgemm_pingpong"]
        assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0
    (kernel,) = r.meta["kernels"]
    assert kernel["dynamic_smem"] == smem <= 227 * 1024
    assert kernel["block"] == [384, 1, 1]
    assert f"wgmma.mma_async.sync.aligned.m64n{defines['BLK_N']}k16.f32.f16.f16" in r.ptx
    for barrier in (3, 4, 5, 6):
        assert r.ptx.count(f"bar.sync {barrier}, 256;") == 1
        assert r.ptx.count(f"bar.arrive {barrier}, 256;") == 1


def test_bf16_compiles():
    r = build(dtype="bf16", M=512, N=512, K=512)
    assemble(r.ptx, "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in r.ptx


@pytest.mark.parametrize("defines, message", [
    (dict(BLK_M=128, BLK_N=208), "BLK_M x BLK_N must be at most 128 x 192"),
    (dict(BLK_M=96), "BLK_M must be 64 or 128"),
    (dict(BLK_N=72), "BLK_N must be a multiple of 16 from 64 to 256"),
    (dict(M=64), "M, N and K must be at least one tile"),
])
def test_refused_configurations(defines, message):
    with pytest.raises(TilecError, match=r"hgemm_pingpong\.tile:\d+:\d+: error: assertion failed: " + message):
        build(**{"M": 512, "N": 512, "K": 512, **defines})


# --------------------------------------------------------------------------
# The schedule, in the simulator
# --------------------------------------------------------------------------


class Turns(wgmma_ptx_sim.HopperModel):
    """The Hopper model, noting per CTA which warpgroup issued each wgmma
    (its thread 0's) and each TMA store of D."""

    def __init__(self, tensormaps):
        super().__init__(TmaModel(tensormaps))
        self.mmas, self.stores = {}, {}   # cta -> [warpgroup, ...]

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        cta, tid = special["%ctaid.x"], special["%tid.x"]
        if op.startswith("wgmma.mma_async") and tid % 128 == 0:
            self.mmas.setdefault(cta, []).append(tid // 128)
        if op.startswith("cp.async.bulk.tensor.") and op.split(".")[5] == "global":
            self.stores.setdefault(cta, []).append(tid // 128)
        return super().__call__(op, ops, regs, special, symbols, mem, shared)


# 3 x 2 tiles of 64x64 on 2 CTAs: 3 tiles each, so consumer 0 takes two and
# consumer 1 one; 4 K tiles (the last ragged) through a 2-stage ring, so
# consumer 1's first K tile (ring position 4) is stage 0 at parity 0, the
# phase the CTA's very first load completes: a consumer 1 that did not wait
# for its turn would pass its first wait on tile 0's data
SIM = dict(M=136, N=128, K=248, SM_COUNT=2, BLK_M=64, BLK_N=64, STAGES=2)
# The same in 2-CTA clusters sharing B: 3 x 2 tiles of 128 rows on 2
# pairs, the last pair's second CTA without rows (it still loads and
# releases its half of B)
SIM_PAIRS = dict(SIM, M=264, SM_COUNT=4, CLUSTER_M=2)


def run_schedule(text=None, sim=SIM, max_steps=3_000_000):
    """Simulate `sim`'s defines; (D's error, per CTA the warpgroups' runs
    of wgmmas and of stores as [(warpgroup, count), ...], the named
    barriers left half arrived per CTA)."""
    r = build(text, **sim)
    (kernel,) = r.meta["kernels"]
    m, n, k = sim["M"], sim["N"], sim["K"]
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    model = Turns(kernel["tensormaps"])
    simulator = Kernel(r.ptx, kernel["name"], extension=model, named_barriers=True)
    simulator.run({"A": A, "B": B, "D": D}, grid=kernel["grid"], dynamic_smem=kernel["dynamic_smem"],
                  cluster=kernel.get("cluster"), max_steps=max_steps)
    runs = {cta: ([(wg, len(list(g))) for wg, g in groupby(model.mmas[cta])],
                  [(wg, len(list(g))) for wg, g in groupby(model.stores[cta])]) for cta in model.mmas}
    pending = {cta: b.pending() for cta, b in simulator.barriers.items() if b.pending()}
    return relative_error(D, ref), runs, pending


def expected_runs(sim):
    """Per CTA: its tiles j = 0, 1, ... (the scheduler's linear tiles
    cluster, cluster + clusters, ...) alternate between consumer warpgroups
    1 and 2, each whole: K tiles x 4 K steps x BLK_M / 64 wgmmas, BLK_N / 64
    stores."""
    pair = sim.get("CLUSTER_M", 1)
    clusters = sim["SM_COUNT"] // pair
    tiles = cdiv(sim["M"], pair * sim["BLK_M"]) * cdiv(sim["N"], sim["BLK_N"])
    mmas, stores = cdiv(sim["K"], 64) * 4 * sim["BLK_M"] // 64, sim["BLK_N"] // 64
    out = {}
    for cta in range(sim["SM_COUNT"]):
        mine = len(range(cta // pair, tiles, clusters))
        out[cta] = ([(1 + j % 2, mmas) for j in range(mine)], [(1 + j % 2, stores) for j in range(mine)])
    return out


@pytest.mark.parametrize("sim", [SIM, SIM_PAIRS], ids=["single", "pairs"])
def test_simulated_tiles_take_turns(sim):
    """Per CTA: the wgmmas of tile j all issue before any of tile j + 1,
    the tiles alternating between the consumers (and so do the epilogues'
    stores); every named barrier's last phase completes; D is A B^T."""
    err, runs, pending = run_schedule(sim=sim)
    assert err < 1e-3
    assert runs == expected_runs(sim)
    assert pending == {}


MAIN_TURN = """            if tile >= CLUSTERS:
                cuda.named_barrier_sync(MMA_BAR + c, 256)
"""
EPI_ARRIVAL = """            if tile + CLUSTERS < TILES:
                cuda.named_barrier_arrive(EPI_BAR + 1 - c, 256)
"""


@pytest.mark.parametrize("mutation", ["no main-loop turn", "unconditional arrival", "sync on the first tile"])
def test_simulated_mutations_fail(mutation):
    """The checks above catch a broken ordering: without the main loops'
    turn consumer 1's first parity wait passes on tile 0's data and its
    early releases throw the ring out of step (the kernel hangs or computes
    a wrong D); an epilogue arrival with no later tile to take it leaves a
    barrier half arrived at exit; a sync on a CTA's first tile waits
    forever.  A hang is the simulator's step limit."""
    text = PATH.read_text()
    assert text.count(MAIN_TURN) == 1 and text.count(EPI_ARRIVAL) == 1
    if mutation == "no main-loop turn":
        text = text.replace(MAIN_TURN, "").replace("cuda.named_barrier_arrive(MMA_BAR + 1 - c, 256)", "pass")
    elif mutation == "unconditional arrival":
        text = text.replace(EPI_ARRIVAL, "            cuda.named_barrier_arrive(EPI_BAR + 1 - c, 256)\n")
    else:
        text = text.replace(MAIN_TURN, "            cuda.named_barrier_sync(MMA_BAR + c, 256)\n")
    try:
        err, runs, pending = run_schedule(text)
    except RuntimeError as e:
        assert "did not finish" in str(e)
        return
    assert not (err < 1e-3 and runs == expected_runs(SIM) and pending == {})


# --------------------------------------------------------------------------
# On the GPU (H100)
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("blk_m, blk_n, stages, pair", [(128, 192, 4, 1), (128, 176, 4, 1), (128, 160, 4, 1),
                                                        (128, 128, 5, 1), (64, 256, 4, 1), (128, 96, 5, 1),
                                                        (64, 192, 6, 1), (128, 80, 6, 1), (128, 128, 5, 2),
                                                        (64, 256, 4, 2)])
@pytest.mark.parametrize("m, n, k", [(1024, 1024, 1024), (1000, 1032, 1064), (2048, 1536, 520)],
                         ids=["1024^3", "ragged", "odd tiles per CTA"])
def test_matches_torch_on_the_gpu(hopper, dtype, blk_m, blk_n, stages, pair, m, n, k):
    """Exact and ragged shapes (partial tiles on every edge, K not a
    multiple of 64), and tile counts that leave some CTAs an odd number of
    tiles, unpaired and in 2-CTA clusters (at M = 1000 with 128-row tiles
    the last pair's second CTA has no rows), against torch's GEMM in f32,
    the output NaN-poisoned."""
    torch = pytest.importorskip("torch")
    from tilec.runtime.module import CompiledModule

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    r = build(dtype=dtype, M=m, N=n, K=k, SM_COUNT=sms, BLK_M=blk_m, BLK_N=blk_n, STAGES=stages,
              CLUSTER_M=pair)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(blk_n + m)
    A = torch.randn(m, k, dtype=tdt, device="cuda", generator=g)
    B = torch.randn(n, k, dtype=tdt, device="cuda", generator=g)
    D = torch.full((m, n), float("nan"), dtype=tdt, device="cuda")
    kernel(A, B, D)
    torch.cuda.synchronize()
    ref = A.float() @ B.float().T
    assert not D.isnan().any()
    assert float((D.float() - ref).norm() / ref.norm()) < 1e-2

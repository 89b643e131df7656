"""examples/hopper/hgemm_v7.tile with -D PDL=1, a programmatic dependent
launch: in the PTX simulator, only B (the weights) is loaded before
ptx.griddepcontrol.wait, in single CTAs and in 2-CTA clusters, and each CTA
releases the next kernel after its last load; on the H100, chained GEMMs
launched programmatically match torch."""
from collections import Counter

import numpy as np
import pytest

from ptx_sim import Kernel
from test_gemm_small_m import GridDependencyOrder, build, check_programmatic_chain, operands
from test_hopper_gemm import relative_error
from tilec.compiler.diagnostics import TilecError
from tilec.runtime.assemble import assemble


class PerCta(GridDependencyOrder):
    """GridDependencyOrder, also noting which CTA issued each load and each
    launch_dependents (the CTAs of a cluster run interleaved)."""

    def __init__(self, tensormaps):
        super().__init__(tensormaps)
        self.load_ctas = []
        self.trigger_ctas = []

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        loads, triggers = len(self.loads), len(self.triggers)
        handled = super().__call__(op, ops, regs, special, symbols, mem, shared)
        cta = special["%ctaid.x"]
        self.load_ctas += [cta] * (len(self.loads) - loads)
        self.trigger_ctas += [cta] * (len(self.triggers) - triggers)
        return handled


def cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("m, n, k, defines", [
    # 2 x 2 tiles of 128x64 on 2 CTAs, 5 K tiles through a 3-stage ring
    (136, 128, 320, dict(SM_COUNT=2, BLK_M=128, BLK_N=64, STAGES=3)),
    # 3 x 2 tiles of 64x64 on 8 CTAs (two without a tile), 2 K tiles in a
    # 3-stage ring: the prologue fills 2 stages and the next tile starts at
    # stage 2
    (136, 128, 128, dict(SM_COUNT=8, BLK_M=64, BLK_N=64, STAGES=3)),
    # 2-CTA clusters sharing B: 2 x 2 cluster tiles on 5 clusters (one idle),
    # the last pair's second CTA without rows
    (136, 128, 320, dict(SM_COUNT=10, BLK_M=64, BLK_N=64, STAGES=3, CLUSTER_M=2)),
])
def test_simulated_pdl_loads_only_weights_before_the_wait(m, n, k, defines):
    """Per CTA with a tile: min(STAGES, K tiles) loads of B before its wait
    (the first tile's, in a pair its half of each, multicast), every A and
    the other B loads after it, and one launch_dependents after its last
    load; a CTA without a tile loads nothing.  Every thread that touches
    memory waits: the producer thread and the consumer warpgroups.  D is
    the GEMM's."""
    r = build("hgemm_v7", M=m, N=n, K=k, PDL=1, **defines)
    (kernel,) = r.meta["kernels"]
    assert kernel["grid_dependency_wait"] is True
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    model = PerCta(kernel["tensormaps"])
    Kernel(r.ptx, kernel["name"], extension=model).run(
        {"A": A, "B": B, "D": D}, grid=kernel["grid"], dynamic_smem=kernel["dynamic_smem"],
        cluster=kernel.get("cluster"), max_steps=20_000_000)
    assert relative_error(D, ref) < 1e-3

    pair, blk_m, stages = defines.get("CLUSTER_M", 1), defines["BLK_M"], defines["STAGES"]
    k_tiles, ctas = k // 64, defines["SM_COUNT"]
    clusters = ctas // pair
    tiles = cdiv(m, pair * blk_m) * cdiv(n, defines["BLK_N"])  # the scheduler's (cluster) tiles
    pre = min(stages, k_tiles)
    for cta in range(ctas):
        own = [(t, waited) for (t, waited), c in zip(model.loads, model.load_ctas) if c == cta]
        mine = len(range(cta // pair, tiles, clusters))  # the tiles this CTA (its cluster) computes
        assert [t for t, waited in own if not waited] == (["B"] * pre if mine else [])
        assert Counter(t for t, waited in own if waited) == Counter(
            {"A": mine * k_tiles, "B": mine * k_tiles - (pre if mine else 0)})
        # one release of the next kernel, after the CTA's last load
        (at,) = [i for i, c in zip(model.triggers, model.trigger_ctas) if c == cta]
        assert model.load_ctas[:at].count(cta) == len(own)
    consumers = 128 * (blk_m // 64)
    assert len(model.waited) == ctas * (1 + consumers)


def test_pdl_is_off_by_default():
    """PDL = 0 (the default) has no griddepcontrol; PDL = 1 assembles, with
    the producer's wait and trigger and one wait per consumer warpgroup,
    also in clusters; other values are a located compile error."""
    plain = build("hgemm_v7", M=256, N=512, K=512)
    assert "griddepcontrol" not in plain.ptx and "grid_dependency_wait" not in plain.meta["kernels"][0]
    for defines, consumers in [({}, 2), ({"BLK_M": 64}, 1), ({"CLUSTER_M": 2}, 2)]:
        pdl = build("hgemm_v7", M=256, N=512, K=512, PDL=1, **defines)
        assemble(pdl.ptx, "sm_90a")
        assert pdl.ptx.count("griddepcontrol.wait;") == 1 + consumers
        assert pdl.ptx.count("griddepcontrol.launch_dependents;") == 1
    with pytest.raises(TilecError, match="hgemm_v7.tile:[0-9]+:[0-9]+: error: assertion failed: PDL must be 0 or 1"):
        build("hgemm_v7", M=256, N=512, K=512, PDL=2)


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [None, False])
@pytest.mark.parametrize("defines", [dict(BLK_M=64, BLK_N=96, STAGES=10), dict(BLK_M=128, BLK_N=128, STAGES=6),
                                     dict(BLK_M=64, BLK_N=128, STAGES=8, CLUSTER_M=2)])
def test_chained_programmatic_gemms_on_the_gpu(defines, pdl):
    """y1 = x W1^T, then y2 = y1 W2^T, back to back for 24 inputs x at
    M = 128, PDL = 1 launched programmatically (pdl=None, the default) or
    plainly: each y2 reads the y1 just written and each y1 overwrites the
    buffer the y2 before it reads (one y1 buffer), so an overlap past the
    wait would show in the NaN-poisoned outputs.  Against torch's f16 GEMMs
    of the same chain."""
    torch = pytest.importorskip("torch")
    m, n1, n2, k = 128, 3072, 1024, 1024
    first = build("hgemm_v7", M=m, N=n1, K=k, PDL=1, **defines)
    second = build("hgemm_v7", M=m, N=n2, K=n1, PDL=1, **defines)
    check_programmatic_chain(torch, first, second, (m, n1, n2, k),
                             seed=defines["BLK_N"] + defines.get("CLUSTER_M", 1), w2_scale=55, pdl=pdl)

"""examples/hopper/gemm_small_m.tile, the decode-shaped GEMM (M <= 256):
its size rules, a simulated run (tests/wgmma_ptx_sim.py) through the ring
and the transposed store, and the H100 against numpy.  hgemm_v7 with BLK_N
128 is checked here too, as tilec.autotune offers it."""
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from ptx_sim import Kernel
from tma_ptx_sim import _LOAD as _TMA_LOAD, _TMAP_BASE, TmaModel
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


class GridDependencyOrder(wgmma_ptx_sim.HopperModel):
    """The Hopper model, watching ptx.griddepcontrol.* and the TMA loads:
    which tensors each thread loads before and after its first wait, and
    which threads wait."""

    def __init__(self, tensormaps):
        super().__init__(TmaModel(tensormaps))
        self.tensors = [t["tensor"] for t in tensormaps]
        self.waited = set()  # (cta, tid)
        self.loads = []  # (tensor, whether the loading thread had waited)
        self.triggers = []  # per launch_dependents: the loads issued before it

    def claims(self, op, ops):
        return op.startswith("griddepcontrol.") or super().claims(op, ops)

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        who = (special["%ctaid.x"], special["%tid.x"])
        if op == "griddepcontrol.wait":
            self.waited.add(who)
            return True
        if op == "griddepcontrol.launch_dependents":
            assert who in self.waited  # the next kernel launches after this one waited
            self.triggers.append(len(self.loads))
            return True
        if op.startswith("cp.async.bulk.tensor.") and ".global." in op and "shared" in op.split(".")[5]:
            m = _TMA_LOAD.match(", ".join(ops))
            self.loads.append((self.tensors[regs[m[2]] - _TMAP_BASE], who in self.waited))
        return super().__call__(op, ops, regs, special, symbols, mem, shared)


@pytest.mark.parametrize("k_tiles, stages, rows, trigger", [(5, 3, 64, 1), (2, 3, 64, 1), (4, 3, 32, 0), (5, 3, 64, 0)])
def test_simulated_pdl_loads_only_weights_before_the_wait(k_tiles, stages, rows, trigger):
    """PDL = 1: the producer loads B (and the zero boxes past it) for the
    ring's first pass before ptx.griddepcontrol.wait, every A load after it,
    and releases the next kernel after its wait (TRIGGER = 0) or its last
    load (1); the consumers wait before their epilogue.  The result is the
    GEMM's, every element of D written."""
    m, n, k = 16, 2 * rows, k_tiles * 64
    r = build("gemm_small_m", M=m, N=n, K=k, STAGES=stages, ROWS=rows, PDL=1, TRIGGER=trigger)
    (kernel,) = r.meta["kernels"]
    assert kernel["grid_dependency_wait"] is True
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    model = GridDependencyOrder(kernel["tensormaps"])
    Kernel(r.ptx, kernel["name"], extension=model).run(
        {"A": A, "B": B, "D": D}, grid=kernel["grid"], dynamic_smem=kernel["dynamic_smem"], max_steps=20_000_000
    )
    assert relative_error(D, ref) < 1e-3
    ctas, pre = n // rows, min(stages, k_tiles)
    boxes = 1 + (64 // rows - 1)  # B's own box and the zero boxes of a first fill
    before = [t for t, waited in model.loads if not waited]
    assert before == ["B"] * (ctas * pre * boxes)
    assert sorted(t for t, waited in model.loads if waited) == sorted(["A"] * (ctas * k_tiles) + ["B"] * (ctas * (k_tiles - pre)))
    # per CTA: the producer thread and the 128 consumer threads wait; one
    # trigger, after the CTA's last load or after its prologue's B loads
    # (the simulator runs one CTA after the other)
    assert len(model.waited) == ctas * 129 and len(model.triggers) == ctas
    per_cta = len(model.loads) // ctas
    assert model.triggers == [c * per_cta + (per_cta if trigger else pre * boxes) for c in range(ctas)]


def test_pdl_is_off_by_default():
    plain = build("gemm_small_m", M=16, N=512, K=512)
    assert "griddepcontrol" not in plain.ptx and "grid_dependency_wait" not in plain.meta["kernels"][0]
    pdl = build("gemm_small_m", M=16, N=512, K=512, PDL=1)
    assemble(pdl.ptx, "sm_90a")
    assert pdl.ptx.count("griddepcontrol.wait;") == 2 and pdl.ptx.count("griddepcontrol.launch_dependents;") == 1
    with pytest.raises(TilecError, match="PDL must be 0 or 1"):
        build("gemm_small_m", M=16, N=512, K=512, PDL=2)
    with pytest.raises(TilecError, match="TRIGGER must be 0 or 1"):
        build("gemm_small_m", M=16, N=512, K=512, PDL=1, TRIGGER=2)


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


@pytest.mark.gpu
@pytest.mark.parametrize("pdl", [None, False])
@pytest.mark.parametrize("m, rows, trigger", [(16, 64, 1), (64, 32, 1), (16, 64, 0)])
def test_chained_programmatic_gemms_on_the_gpu(m, rows, trigger, pdl):
    """y1 = x W1^T, then y2 = y1 W2^T, back to back for 24 inputs x, PDL = 1
    launched programmatically (pdl=None, the default) or plainly: each
    y2 reads the y1 just written, and each y1 overwrites the buffer the y2
    before it reads (one y1 buffer), so an overlap past the wait would show
    in the NaN-poisoned outputs.  Against torch's f16 GEMMs of the same
    chain."""
    torch = pytest.importorskip("torch")
    n1, n2, k = 2048, 1024, 1024
    first = build("gemm_small_m", M=m, N=n1, K=k, ROWS=rows, PDL=1, TRIGGER=trigger)
    second = build("gemm_small_m", M=m, N=n2, K=n1, ROWS=rows, PDL=1, TRIGGER=trigger)
    check_programmatic_chain(torch, first, second, (m, n1, n2, k), seed=m + rows, w2_scale=45, pdl=pdl)


def check_programmatic_chain(torch, first, second, shape, seed, w2_scale, pdl):
    """Run y1 = x W1^T (kernel `first`), y2 = y1 W2^T (`second`) for 24
    inputs x back to back, launched with `pdl`, and check every y2 against
    torch's GEMMs of the same chain (shape: m, n1, n2, k)."""
    from tilec.runtime.module import CompiledModule

    m, n1, n2, k = shape
    g1 = CompiledModule(first.ptx, first.meta, "sm_90a").kernel()
    g2 = CompiledModule(second.ptx, second.meta, "sm_90a").kernel()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    w1 = torch.randn(n1, k, device="cuda", dtype=torch.float16, generator=gen) / 32
    w2 = torch.randn(n2, n1, device="cuda", dtype=torch.float16, generator=gen) / w2_scale
    xs = [torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen) for _ in range(24)]
    y1 = torch.full((m, n1), float("nan"), device="cuda", dtype=torch.float16)
    y2 = [torch.full((m, n2), float("nan"), device="cuda", dtype=torch.float16) for _ in xs]
    torch.cuda.synchronize()  # the weights, written by torch, are done before the first pre-wait load
    for x, out in zip(xs, y2):
        g1(x, w1, y1, pdl=pdl)
        g2(y1, w2, out, pdl=pdl)
    torch.cuda.synchronize()
    for x, out in zip(xs, y2):
        ref = (x @ w1.T) @ w2.T
        assert not out.isnan().any()
        assert float((out.float() - ref.float()).norm() / ref.float().norm()) < 1e-2

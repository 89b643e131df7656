"""The FlashAttention forward example (examples/hopper/flash_attn_fwd.tile):
it compiles and assembles cleanly in every configuration, uses the
instructions its design is about, refuses the sizes it does not support, and
computes softmax(Q K^T * scale) V and the log-sum-exp -- in the PTX
simulator (tests/wgmma_ptx_sim.py) on one CTA of a small head, and on an
H100 (`gpu` tests) against torch."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from ptx_sim import YIELD, Kernel
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble
from tma_ptx_sim import TmaModel

PATH = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "flash_attn_fwd.tile"


def build(dtype: str = "f16", **defines):
    text = PATH.read_text()
    if dtype != "f16":
        text = re.sub(r"\bf16\b", dtype, text)
    if "D" in defines:
        defines.setdefault("SCALE_LOG2", math.log2(math.e) / math.sqrt(defines["D"]))
    return compile_source(text, PATH.name, target="sm_90a", defines=defines)


def reference(q, k, v, causal: bool):
    """float64 O and LSE of one head."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(s.shape[1])[None, :] > np.arange(s.shape[0])[:, None], -np.inf, s)
    lse = np.log(np.exp(s - s.max(1, keepdims=True)).sum(1)) + s.max(1)
    return np.exp(s - lse[:, None]) @ v, lse


# --------------------------------------------------------------------------
# Compilation (CPU)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, d, causal", [("f16", 128, 0), ("f16", 64, 1), ("bf16", 128, 1), ("bf16", 64, 0)])
def test_compiles_and_assembles_without_warnings(dtype, d, causal):
    r = build(dtype, D=d, CAUSAL=causal, SEQ=1024, BH=4)
    assemble(r.ptx, "sm_90a")
    ptx = r.ptx
    assert f"wgmma.mma_async.sync.aligned.m64n128k16.f32.{dtype}.{dtype}" in ptx  # S = Q K^T
    assert re.search(rf"wgmma.mma_async.sync.aligned.m64n{d}k16.f32.{dtype}.{dtype} \{{[^}}]*\}}, \{{", ptx)  # P V, P in registers
    assert "ex2.approx.ftz.f32" in ptx
    assert "shfl.sync.bfly.b32" in ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\.mbarrier::complete_tx::bytes", ptx)
    assert re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\.bulk_group", ptx)  # O: a TMA store
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 240;") == 2
    assert "bar.arrive" in ptx  # the consumers' ping-pong
    assert ("fence.acq_rel.cta;" in ptx) == (d == 64)  # the softmax ahead of the wait for P V, at d 64
    meta = r.meta["kernels"][0]
    assert meta["block"] == [384, 1, 1] and meta["grid"] == [4 * 1024 // 128, 1, 1]  # one CTA per query block
    assert meta["dynamic_smem"] <= 227 * 1024


@pytest.mark.parametrize("defines, message", [
    ({"SEQ": 1000}, "SEQ must be a multiple of 128"),
    ({"D": 96}, "D must be 64 or 128"),
])
def test_unsupported_sizes_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message):
        build(**defines)


# --------------------------------------------------------------------------
# Simulation (CPU)
# --------------------------------------------------------------------------


class Shuffles(wgmma_ptx_sim.HopperModel):
    """The Hopper model plus shfl.sync.bfly.b32 over a full warp: each lane
    deposits its value and ends its turn; the last lane of the warp to
    arrive gives every lane the value of lane ^ mask."""

    def claims(self, op, ops):
        return op.startswith("shfl.sync.") or super().claims(op, ops)

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        if not op.startswith("shfl.sync."):
            return super().__call__(op, ops, regs, special, symbols, mem, shared)
        assert op == "shfl.sync.bfly.b32" and int(ops[3], 0) == 31 and int(ops[4], 0) == 0xFFFFFFFF, (op, ops)
        value = regs[ops[1]] if ops[1] in regs else int(ops[1], 0)
        mask = regs[ops[2]] if ops[2] in regs else int(ops[2], 0)
        group = self.arrive("shfl", 32, special, (regs, ops[0], value, mask))
        if group is not None:
            for lane, (r, dst, _, m) in group.items():
                r[dst] = group[lane ^ m][2]
        return YIELD


def simulate(r, args, ctas=None):
    entry = r.meta["kernels"][0]
    model = Shuffles(TmaModel(entry.get("tensormaps", [])))
    k = Kernel(r.ptx, entry["name"], extension=model)
    k.run(args, grid=entry["grid"], ctas=ctas, dynamic_smem=entry["dynamic_smem"], max_steps=50_000_000)
    assert not model.pending


@pytest.mark.parametrize("causal, bh, group, cta, head", [(0, 1, 1, 0, 0), (1, 3, 2, 4, 2)])
def test_simulated_block_matches_numpy(causal, bh, group, cta, head):
    """The last query block of a 256-long head: two K/V tiles (the diagonal
    one masked when causal), so the ring wraps, the online softmax rescales
    and both consumers ping-pong.  CTAs walk the heads in groups of `group`
    (L2_KV_BYTES set to that many heads' K and V), longest block first: with
    3 heads in groups of 2, CTAs 0-3 are heads 0 and 1, and CTA 4 the first
    of the last, smaller group: head 2, block 1."""
    seq, d = 256, 64
    r = build(D=d, SEQ=seq, BH=bh, CAUSAL=causal, L2_KV_BYTES=group * seq * d * 2 * 2)
    rng = np.random.default_rng(causal)
    q, k, v = (rng.standard_normal((bh * seq, d)).astype(np.float16) for _ in range(3))
    out = np.full((bh * seq, d), np.nan, np.float16)
    lse = np.full(bh * seq, np.nan, np.float32)
    simulate(r, {"Q": q, "K": k, "V": v, "O": out, "LSE": lse}, ctas=[(cta, 0, 0)])
    heads = slice(head * seq, head * seq + seq)
    ref_o, ref_lse = reference(q[heads], k[heads], v[heads], bool(causal))
    rows = slice(128, 256)
    got = out[heads][rows].astype(np.float64)
    err = np.linalg.norm(got - ref_o[rows]) / np.linalg.norm(ref_o[rows])
    assert err < 2e-3, err
    np.testing.assert_allclose(lse[heads][rows], ref_lse[rows], atol=1e-3)
    written = np.zeros(bh * seq, bool)
    written[head * seq + 128: head * seq + 256] = True
    assert np.isnan(out[~written]).all() and np.isnan(lse[~written]).all()  # every other block is another CTA's


# --------------------------------------------------------------------------
# On an H100 (gpu)
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, d, causal, seq, group", [
    ("f16", 128, 0, 512, 4), ("f16", 64, 1, 384, 6), ("bf16", 128, 1, 256, 4), ("bf16", 64, 0, 1024, 1),
])
def test_matches_torch_on_the_gpu(hopper, dtype, d, causal, seq, group):
    """Every head and block of 6 heads, which CTAs walk in groups of
    `group` heads (4: a group of 4 and one of 2)."""
    torch = pytest.importorskip("torch")
    from tilec.runtime.module import CompiledModule

    bh = 6
    r = build(dtype, D=d, CAUSAL=causal, SEQ=seq, BH=bh, L2_KV_BYTES=group * seq * d * 2 * 2)
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q, k, v = (torch.randn(bh, seq, d, dtype=tdt, device="cuda") for _ in range(3))
    out = torch.full((bh, seq, d), float("nan"), dtype=tdt, device="cuda")
    lse = torch.full((bh, seq), float("nan"), dtype=torch.float32, device="cuda")
    kernel(*(t.view(-1, d) for t in (q, k, v, out)), lse.view(-1))
    torch.cuda.synchronize()
    s = (q.float() @ k.float().transpose(1, 2)) / math.sqrt(d)
    if causal:
        s.masked_fill_(torch.ones(seq, seq, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    ref = torch.exp(s - ref_lse[..., None]) @ v.float()
    err = float(torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref))
    assert err < (2e-3 if dtype == "f16" else 1e-2), err
    assert float((lse - ref_lse).abs().max()) < 1e-3

"""The split-K GEMMs, examples/hopper/gemm_split_k.tile (hgemm_v7's tiles)
and gemm_small_m_split_k.tile (the swap-AB decode kernel): their size rules,
simulated runs (tests/wgmma_ptx_sim.py) in which the last split of each tile
sums the workspace and resets its counter -- the same D bit for bit whatever
order the CTAs run in -- and the H100 against torch, through
tilec.autotune with a per-configuration workspace."""
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from test_gemm_small_m import build, operands
from test_hopper_gemm import relative_error
from tilec.compiler.diagnostics import TilecError
from tilec.runtime.assemble import assemble

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"


def cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("blk_n, split_k", [(128, 2), (256, 4)])
def test_split_k_compiles_and_assembles(blk_n, split_k):
    r = build("gemm_split_k", M=1024, N=1024, K=1024, BLK_N=blk_n, SPLIT_K=split_k, SM_COUNT=132)
    assemble(r.ptx, "sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{blk_n}k16.f32.f16.f16" in r.ptx
    assert "fence.acq_rel.gpu;" in r.ptx and "atom.global.add.s32" in r.ptx
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [132, 1, 1] and kernel["block"] == [384, 1, 1]
    shapes = {p["name"]: p["shape"] for p in kernel["params"] if p["kind"] == "buffer"}
    assert shapes["W"] == [split_k, 1024, 1024] and shapes["C"] == [8 * (1024 // blk_n) * 2]


@pytest.mark.parametrize("m, split_k", [(8, 2), (64, 3), (256, 4)])
def test_small_m_split_k_compiles_and_assembles(m, split_k):
    r = build("gemm_small_m_split_k", M=m, N=4096, K=4096, SPLIT_K=split_k)
    assemble(r.ptx, "sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{m}k16.f32.f16.f16" in r.ptx
    (kernel,) = r.meta["kernels"]
    assert kernel["grid"] == [4096 // 64 * split_k, 1, 1]
    shapes = {p["name"]: p["shape"] for p in kernel["params"] if p["kind"] == "buffer"}
    assert shapes["W"] == [split_k, 4096, m] and shapes["C"] == [64]


@pytest.mark.parametrize(
    "name, defines, message",
    [
        ("gemm_split_k", {"SPLIT_K": 1}, "SPLIT_K must be at least 2"),
        ("gemm_split_k", {"K": 192, "SPLIT_K": 4}, "leave every split a K tile"),
        ("gemm_split_k", {"N": 1004}, "N and K must be multiples of 8"),
        ("gemm_small_m_split_k", {"SPLIT_K": 1}, "SPLIT_K must be at least 2"),
        ("gemm_small_m_split_k", {"K": 320, "SPLIT_K": 4}, "leave every split a K tile"),
        ("gemm_small_m_split_k", {"M": 264}, "M must be a multiple of 8"),
    ],
)
def test_unsupported_configurations_are_compile_errors(name, defines, message):
    base = {"M": 128, "N": 512, "K": 512}
    if name == "gemm_split_k":
        base["SM_COUNT"] = 4
    with pytest.raises(TilecError, match=message):
        build(name, **{**base, **defines})


def simulate(name, args, ctas, **defines):
    r = build(name, **defines)
    wgmma_ptx_sim.run(r.ptx, r.meta, args, ctas=ctas)


def test_simulated_small_m_split_k_is_the_same_in_any_order():
    """K = 10 tiles (the last partial) in 4 splits of 3, 3, 3 and 1 through a
    3-stage ring: run with the CTAs in order and in reverse (so a different
    split is last and sums), D is the same bits and the counter is zero."""
    m, n, k, split_k = 24, 64, 9 * 64 + 8, 4
    A, B, ref = operands(m, n, k)
    results = []
    for ctas in ([(i, 0, 0) for i in range(split_k)], [(i, 0, 0) for i in reversed(range(split_k))]):
        D = np.full((m, n), np.nan, np.float16)
        W = np.full((split_k, n, m), np.nan, np.float32)
        C = np.zeros(1, np.int32)
        simulate("gemm_small_m_split_k", {"A": A, "B": B, "D": D, "W": W, "C": C}, ctas,
                 M=m, N=n, K=k, SPLIT_K=split_k, STAGES=3)
        assert relative_error(D, ref) < 1e-3
        assert C.tolist() == [0]
        results.append(D)
    assert results[0].tobytes() == results[1].tobytes()


def test_simulated_split_k_persistent_units():
    """One 128 x 128 tile, K = 6 tiles (the last partial) in 3 splits of 2,
    a 2-stage ring, two persistent CTAs: CTA 0 runs splits 0 and 2 (its ring
    runs on across them), CTA 1 split 1; the last, CTA 0's second unit,
    sums and stores."""
    m, n, k, split_k = 128, 128, 5 * 64 + 8, 3
    A, B, ref = operands(m, n, k)
    D = np.full((m, n), np.nan, np.float16)
    W = np.full((split_k, 128, 128), np.nan, np.float32)
    C = np.zeros(2, np.int32)
    simulate("gemm_split_k", {"A": A, "B": B, "D": D, "W": W, "C": C}, None,
             M=m, N=n, K=k, BLK_N=128, SPLIT_K=split_k, SM_COUNT=2, STAGES=2)
    assert relative_error(D, ref) < 1e-3
    assert C.tolist() == [0, 0]


@pytest.fixture(scope="module")
def cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("needs an H100-class GPU")
    return torch


def workspace(torch, name, m, n):
    """The kernel's W and C for a configuration (as bench/gemm_sweep.py)."""
    def make(config):
        if name == "gemm_split_k":
            tm, tn = cdiv(m, 128), cdiv(n, config["BLK_N"])
            return (torch.empty(config["SPLIT_K"], tm * 128, tn * config["BLK_N"], device="cuda"),
                    torch.zeros(tm * tn * 2, dtype=torch.int32, device="cuda"))
        return (torch.empty(config["SPLIT_K"], n, m, device="cuda"),
                torch.zeros(n // 64, dtype=torch.int32, device="cuda"))
    return make


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, m, n, k, space",
    [
        ("gemm_split_k", 1000, 1032, 1064, {"BLK_N": [128, 256], "SPLIT_K": [2, 3]}),
        ("gemm_split_k", 512, 512, 4096, {"BLK_N": [128], "SPLIT_K": [4, 7]}),
        ("gemm_small_m_split_k", 64, 4096, 4096, {"SPLIT_K": [2, 3]}),
        ("gemm_small_m_split_k", 128, 1024, 1032, {"SPLIT_K": [2, 4]}),
    ],
)
def test_matches_torch_on_the_gpu(cuda, tmp_path, monkeypatch, name, m, n, k, space):
    """Tuned with a workspace per configuration; then each launch (the
    counters reset by the one before) writes the same D bit for bit into a
    NaN-poisoned output, within 1e-2 of torch's f32 product."""
    torch = cuda
    from tilec import autotune

    tmp_path.chmod(0o700)
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    defines = {"M": m, "N": n, "K": k}
    if name == "gemm_split_k":
        defines["SM_COUNT"] = sms

    def inputs():
        return (torch.randn(m, k, dtype=torch.float16, device="cuda"),
                torch.randn(n, k, dtype=torch.float16, device="cuda"),
                torch.empty(m, n, dtype=torch.float16, device="cuda"))

    tuned = autotune.tune(EXAMPLES / f"{name}.tile", space, inputs, defines=defines, runs=3,
                          progress=False, workspace=workspace(torch, name, m, n))
    assert tuned.how == "tuned" and not tuned.rejected
    W, C = tuned.workspace
    assert W.shape[0] == tuned.config["SPLIT_K"] and not C.any()  # the timed launches left C at zero
    A, B, _ = inputs()
    ref = A.float() @ B.float().T
    outputs = []
    for _ in range(2):
        D = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
        tuned.kernel(A, B, D, W, C)
        torch.cuda.synchronize()
        assert not torch.isnan(D).any()
        assert float((D.float() - ref).norm() / ref.norm()) < 1e-2
        assert not C.any()
        outputs.append(D)
    assert torch.equal(outputs[0], outputs[1])

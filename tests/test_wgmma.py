"""gemm_async -> wgmma (sm_90a) and the warpgroup stmatrix epilogue copy.

The numbers come from the PTX simulator with the wgmma model of
tests/wgmma_ptx_sim.py (written from the PTX ISA, not from the lowering):
operands are copied into shared memory with every swizzle mode, multiplied
by the lowered wgmmas and compared with numpy.  The rest pins what the
lowering writes and what it refuses."""
import re

import numpy as np
import pytest

import wgmma_ptx_sim
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.runtime.assemble import assemble

# A, B copied to swizzled shared tiles, C = A @ B^T accumulated in registers
# in the wgmma fragment layout, stored as f32.
GEMM = """
target sm_90a
const M = 128
const N = 128
const K = 64
const MODE = SWIZZLE_128B_ATOM
const ACC = S[(M // 64, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]

kernel gemm(A: f16[M, K], B: f16[N, K], D: f32[M, N]):
    cta_id([1])
    tid = thread_id([128])
    pool = smem_pool()
    Asmem = pool.alloc((M, K), f16, layout=mma_shared_layout(f16, MODE, (M, K)))
    Bsmem = pool.alloc((N, K), f16, layout=mma_shared_layout(f16, MODE, (N, K)))
    pool.commit()
    acc = alloc_local((M, N), f32, layout=ACC)
    copy(Asmem[:, :], A[:, :])
    copy(Bsmem[:, :], B[:, :])
    ptx.fence.proxy_async("shared::cta")
    cuda.cta_sync()
    gemm_async(acc[:, :], Asmem[:, :], Bsmem[:, :])
    ptx.wgmma.commit_group()
    ptx.wgmma.wait_group(0)
    copy(D[:, :], acc[:, :])
"""

# A in registers (the wgmma A fragment, K / 16 steps of 8 values), B from a
# stage of a two-stage ring picked at run time, two calls accumulating.
GEMM_RS = """
target sm_90a
const M = 64
const N = 64
const K = 32
const ACC = S[(M // 64, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
const A_FRAG = S[(M // 64, 4, 2, 8, K // 16, 2, 4, 2) : (K // 2, 32@tid_in_wg, 2, 4@tid_in_wg, 8, 4, 1@tid_in_wg, 1)]

kernel gemm(A: f16[M, K], B: f16[N, K], D: f32[M, N], stage: i32):
    cta_id([1])
    tid = thread_id([128])
    pool = smem_pool()
    Bsmem = pool.alloc((2, N, K), f16, layout=mma_shared_layout(f16, SWIZZLE_64B_ATOM, (2, N, K)))
    pool.commit()
    acc = alloc_local((M, N), f32, layout=ACC)
    afrag = alloc_local((M, K), f16, layout=A_FRAG)
    copy(afrag[:, :], A[:, :])
    copy(Bsmem[stage, :, :], B[:, :])
    ptx.fence.proxy_async("shared::cta")
    cuda.cta_sync()
    gemm_async(acc[:, :], afrag[:, :], Bsmem[stage, :, :], accum=False)
    gemm_async(acc[:, :], afrag[:, :], Bsmem[stage, :, :], accum=stage >= 0)
    ptx.wgmma.commit_group()
    ptx.wgmma.wait_group(0)
    copy(D[:, :], acc[:, :])
"""

# The epilogue: accumulator -> f16 registers -> shared (stmatrix) -> global.
EPILOGUE = """
target sm_90a
const M = 128
const N = 40
const K = 32
const ACC = S[(M // 64, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]

kernel gemm(A: f16[M, K], B: f16[N, K], D: f16[M, N]):
    cta_id([1])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    pool = smem_pool()
    Asmem = pool.alloc((M, K), f16, layout=mma_shared_layout(f16, SWIZZLE_64B_ATOM, (M, K)))
    Bsmem = pool.alloc((N, K), f16, layout=mma_shared_layout(f16, SWIZZLE_64B_ATOM, (N, K)))
    Dsmem = pool.alloc((M, N), f16, layout=mma_shared_layout(f16, SWIZZLE_NONE, (M, N)))
    pool.commit()
    acc = alloc_local((M, N), f32, layout=ACC)
    acc16 = alloc_local((M, N), f16, layout=ACC)
    copy(Asmem[:, :], A[:, :])
    copy(Bsmem[:, :], B[:, :])
    ptx.fence.proxy_async("shared::cta")
    cuda.cta_sync()
    gemm_async(acc[:, :], Asmem[:, :], Bsmem[:, :])
    ptx.wgmma.commit_group()
    ptx.wgmma.wait_group(0)
    cast(acc16[:, :], acc[:, :])
    copy(Dsmem[:, :], acc16[:, :])
    cuda.cta_sync()
    copy(D[:, :], Dsmem[:, :])
"""


def build(text, **defines):
    result = compile_source(text, "t.tile", defines=defines)
    assemble(result.ptx, "sm_90a")
    return result


def dispatched(text, **defines) -> str:
    return print_module(compile_source(text, "t.tile", defines=defines,
                                       options=Options(stop_after="dispatch")).module)


def inputs(m, n, k, dtype=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)


def relative_error(d, ref) -> float:
    return float(np.linalg.norm(d.astype(np.float64) - ref) / np.linalg.norm(ref))


def simulate(text, m, n, k, extra=(), out=np.float32, **defines):
    r = build(text, M=m, N=n, K=k, **defines)
    A, B = inputs(m, n, k)
    D = np.full((m, n), np.nan, out)
    args = {"A": A, "B": B, "D": D}
    args.update(extra)
    wgmma_ptx_sim.run(r.ptx, r.meta, args)
    return A.astype(np.float64) @ B.astype(np.float64).T, D, r


# --------------------------------------------------------------------------
# What the lowering writes
# --------------------------------------------------------------------------


def test_descriptors_and_k_steps():
    """128x64 K-major 128B tiles: LBO 64 (unused), SBO 1024 B, swizzle 3 --
    seed 000's (64, 64, 3); each K step of 16 moves the start 32 bytes (+2),
    the second 64-row block of A 8 KB (+512)."""
    ir = dispatched(GEMM)
    assert "ptx.wgmma.encode_matrix_descriptor(Asmem.ptr_to([0, 0]), 64, 64, 3)" in ir
    assert "ptx.wgmma.encode_matrix_descriptor(Bsmem.ptr_to([0, 0]), 64, 64, 3)" in ir
    calls = re.findall(r"ptx\.wgmma\.mma_async\(\((acc\[\d+, \d+\]).*?\), (wgmma_desc_a[^,]*), "
                       r"(wgmma_desc_b[^,]*), (\w+), n=128, dtype=f16\)", ir)
    assert [(c[1], c[2], c[3]) for c in calls] == [
        ("wgmma_desc_a", "wgmma_desc_b", "False"),
        ("wgmma_desc_a + 512", "wgmma_desc_b", "False"),
        ("wgmma_desc_a + 2", "wgmma_desc_b + 2", "True"),
        ("wgmma_desc_a + 514", "wgmma_desc_b + 2", "True"),
        ("wgmma_desc_a + 4", "wgmma_desc_b + 4", "True"),
        ("wgmma_desc_a + 516", "wgmma_desc_b + 4", "True"),
        ("wgmma_desc_a + 6", "wgmma_desc_b + 6", "True"),
        ("wgmma_desc_a + 518", "wgmma_desc_b + 6", "True"),
    ]
    assert [c[0] for c in calls[:2]] == ["acc[0, 0]", "acc[64, 0]"]  # register 0 of each m64 block
    assert ir.index("ptx.wgmma.fence()") < ir.index("ptx.wgmma.mma_async")


def test_ptx_has_the_instructions():
    ptx = build(GEMM, N=256, M=64).ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {") == 4
    assert ptx.count("wgmma.fence.sync.aligned;") == 1
    bf = build(GEMM.replace("f16", "bf16"), N=24).ptx
    assert bf.count("wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16 {") == 8


def test_n_over_256_is_cut_into_equal_instructions():
    ptx = build(GEMM, M=64, N=384, K=16, MODE="SWIZZLE_32B_ATOM").ptx
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16") == 2


# --------------------------------------------------------------------------
# What it computes (simulated)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("m, n, k, mode", [
    (128, 128, 64, "SWIZZLE_128B_ATOM"),
    (64, 64, 64, "SWIZZLE_64B_ATOM"),
    (64, 32, 32, "SWIZZLE_32B_ATOM"),
    (64, 24, 32, "SWIZZLE_NONE"),
    (192, 8, 16, "SWIZZLE_NONE"),
    (64, 384, 32, "SWIZZLE_64B_ATOM"),
])
def test_simulated_gemm(m, n, k, mode):
    ref, D, _ = simulate(GEMM, m, n, k, MODE=mode)
    assert relative_error(D, ref) < 1e-6


def test_simulated_bf16():
    r = build(GEMM.replace("f16", "bf16"), M=64, N=48, K=64)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((48, 64)).astype(np.float32)
    A, B = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))
    D = np.zeros((64, 48), np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    exact = lambda u: (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    assert relative_error(D, exact(A) @ exact(B).T) < 1e-6


def test_a_from_registers_runtime_stage_and_accumulation():
    r = build(GEMM_RS)
    assert r.ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") == 4
    A, B = inputs(64, 64, 32, seed=2)
    D = np.zeros((64, 64), np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "stage": 1})
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    assert relative_error(D, 2 * ref) < 1e-6  # accum=False, then accum=True


def test_a_from_registers_is_packed_before_the_fence():
    """16-bit A fragments are packed into 32-bit registers ahead of the
    wgmma.fence: no register a wgmma reads is written between the fence and
    the instructions, so ptxas need not fence (and serialize) each one."""
    lines = [line.strip() for line in build(GEMM_RS).ptx.splitlines()]
    fences = [i for i, line in enumerate(lines) if line.startswith("wgmma.fence")]
    mmas = [i for i, line in enumerate(lines) if line.startswith("wgmma.mma_async")]
    assert len(fences) == 2 and len(mmas) == 4
    for a, b in zip(mmas, mmas[1:]):  # within one gemm_async (no fence between), nothing is packed
        if not any(a < f < b for f in fences):
            assert not any(line.startswith("mov.b32") for line in lines[a:b])
    for f in fences:  # K 32: two instructions' A, four registers each, packed just before
        assert all(line.startswith("mov.b32 %r") for line in lines[f - 8:f])

    ref, D, r = simulate(EPILOGUE, 128, 40, 32, out=np.float16)
    assert relative_error(D, ref) < 1e-3
    # 40 columns: two x4 (16 columns each) and one x2 per 64-row block and warp
    assert r.ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert r.ptx.count("stmatrix.sync.aligned.m8n8.x2.shared.b16") == 2


# --------------------------------------------------------------------------
# What it refuses
# --------------------------------------------------------------------------


def rejected(text, message, **defines):
    with pytest.raises(TilecError, match=message) as err:
        compile_source(text, "t.tile", defines=defines, options=Options(stop_after="dispatch"))
    return err.value


CALL = "gemm_async(acc[:, :], Asmem[:, :], Bsmem[:, :])"


@pytest.mark.parametrize("old, new, message", [
    (CALL, "if tid < 32:\n        warp." + CALL, "must be made by one whole warpgroup .wg scope., not at warp scope"),
    (CALL, "if tid == 0:\n        " + CALL, "not at thread scope"),
    (CALL, "if tid < 64:\n        wg." + CALL, "runs under 'tid < 64'"),
    (CALL, CALL.replace(")", ", cta_group=2)"), "wgmma runs in one CTA"),
    (CALL, CALL.replace(")", ", SFA=acc)"), "wgmma takes no SFA"),
    (CALL, "gemm_async(acc[:, :], A[:, :], Bsmem[:, :])", "A 'A' must be in shared memory or registers, not global"),
    (CALL, "gemm_async(acc[:, :], Asmem[:, :], B[:, :])", "B 'B' must be in shared memory, not global"),
    (CALL, "gemm_async(Asmem[:, 0:64], Asmem[:, :], Bsmem[:, :])", "must be a register .local. buffer"),
    (CALL, "gemm_async(acc[0:64, :], Asmem[0:64, :], Bsmem[0:64, :])", r"C 64x128 = A 64x64 @ B\^T with B 64x64"),
])
def test_rejected_calls(old, new, message):
    rejected(GEMM.replace(CALL, new), message)


def test_rejected_shapes_and_dtypes():
    rejected(GEMM.replace(CALL, "gemm_async(acc[0:32, :], Asmem[0:32, :], Bsmem[:, :])"),
             r"M \(32\) must be a multiple of 64")
    rejected(GEMM.replace(CALL, "gemm_async(acc[:, 0:12], Asmem[:, :], Bsmem[0:12, :])"),
             r"N \(12\) must be a multiple of 8")
    rejected(GEMM, r"K \(8\) must be a multiple of 16", K=8, MODE="SWIZZLE_NONE")
    rejected(GEMM.replace("f16", "f32"), "wgmma multiplies f16, bf16, tf32, e4m3/e5m2, i8/u8, got A f32",
             MODE="SWIZZLE_NONE")
    rejected(GEMM.replace("f16", "bf16").replace("acc = alloc_local((M, N), f32", "acc = alloc_local((M, N), f16")
             .replace("D: f32[M, N]", "D: f16[M, N]"), "the accumulator must be f32, got f16")  # f16 only for f16, fp8
    mixed = GEMM.replace("Bsmem = pool.alloc((N, K), f16, layout=mma_shared_layout(f16",
                         "Bsmem = pool.alloc((N, K), bf16, layout=mma_shared_layout(bf16").replace("B: f16", "B: bf16")
    rejected(mixed, "A and B must have one dtype, got f16 and bf16")


def test_rejected_layouts():
    # B stored N-contiguous but as one long column, not in 64-element atoms: the rule and the fix are named
    mn_major = GEMM.replace("layout=mma_shared_layout(f16, MODE, (N, K))", "layout=S[(N, K) : (1, N)]")
    rejected(mn_major, r"B 'Bsmem' is not in a layout the tensor core reads \(MN-major, 16B atoms of 8 K rows.*"
             r"use tma_shared_layout\(f16, 0, \(MN, K\)\) for a K-major tile or tma_shared_layout\(f16, 0, \(K, MN\)\)",
             MODE="SWIZZLE_NONE")
    # an accumulator in plain row-major registers per thread is no wgmma fragment
    row_major = GEMM.replace("layout=ACC", "layout=S[(M, N) : (N, 1)]").replace(CALL, "wg." + CALL)
    rejected(row_major, "wgmma +10 +declined: register buffer 'acc'")
    # rows of the accumulator swapped between warps
    swapped = GEMM.replace("2, 4@tid_in_wg, 4, 1@tid_in_wg, 1", "2, 1@tid_in_wg, 4, 8@tid_in_wg, 1")
    rejected(swapped, r"is not in the wgmma fragment layout: thread 1 must hold element \(0, 2\) in its register 0")
    # a tile starting inside a 128B swizzle atom
    rejected(GEMM.replace("Asmem[:, :], Bsmem", "Asmem[4:68, :], Bsmem").replace("acc[:, :], Asmem", "acc[0:64, :], Asmem"),
             "does not start on a 1024-byte boundary")


def test_one_instruction_is_at_most_n256():
    """gemm_async cuts a wider N into instructions (above); the instruction
    itself refuses N over 256 or not a multiple of 8."""
    for n, message in ((264, "got 264"), (20, "got 20")):
        text = f"""
kernel k(D: f32[4]):
    cta_id([1])
    thread_id([128])
    acc = alloc_local(({n // 2},), f32)
    ptx.wgmma.mma_async(({", ".join(f"acc[{i}]" for i in range(n // 2))}), 0, 0, False, n={n}, dtype=f16)
"""
        with pytest.raises(TilecError, match=f"wgmma m64nNk16 needs N a multiple of 8 in \\[8, 256\\], {message}"):
            compile_source(text, "k.tile")


# --------------------------------------------------------------------------
# The rest of the Hopper wgmma table: 8-bit floats, tf32, integers, MN-major
# --------------------------------------------------------------------------


def typed(text, a, b, acc="f32"):
    """GEMM with A of type `a`, B of type `b` and a `acc` accumulator and D."""
    out = text.replace("A: f16", f"A: {a}").replace("B: f16", f"B: {b}")
    out = out.replace("(M, K), f16, layout=mma_shared_layout(f16", f"(M, K), {a}, layout=mma_shared_layout({a}")
    out = out.replace("(N, K), f16, layout=mma_shared_layout(f16", f"(N, K), {b}, layout=mma_shared_layout({b}")
    return out.replace("alloc_local((M, N), f32", f"alloc_local((M, N), {acc}").replace("D: f32", f"D: {acc}")


def fp8_bits(shape, dtype, rng):
    """Random finite values of an 8-bit float type, as their bytes."""
    values = wgmma_ptx_sim._from_bits(np.arange(256), dtype)
    finite = np.flatnonzero(np.isfinite(values) & (np.abs(values) <= 64))
    return rng.choice(finite, size=shape).astype(np.uint8), values


@pytest.mark.parametrize("a, b, mode, n", [
    ("e4m3", "e4m3", "SWIZZLE_128B_ATOM", 128),
    ("e4m3", "e5m2", "SWIZZLE_64B_ATOM", 64),
    ("e5m2", "e4m3", "SWIZZLE_NONE", 24),
    ("e5m2", "e5m2", "SWIZZLE_32B_ATOM", 32),
])
def test_simulated_fp8(a, b, mode, n):
    m, k = 64, 128
    r = build(typed(GEMM, a, b), M=m, N=n, K=k, MODE=mode)
    assert r.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{a}.{b} {{") == k // 32
    rng = np.random.default_rng(3)
    (A, va), (B, vb) = fp8_bits((m, k), a, rng), fp8_bits((n, k), b, rng)
    D = np.full((m, n), np.nan, np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, va[A] @ vb[B].T) < 1e-6


def test_simulated_tf32():
    r = build(typed(GEMM, "tf32", "tf32"), M=64, N=40, K=32, MODE="SWIZZLE_128B_ATOM")
    assert r.ptx.count("wgmma.mma_async.sync.aligned.m64n40k8.f32.tf32.tf32 {") == 4
    rng = np.random.default_rng(4)
    A = (rng.standard_normal((64, 32)).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    B = (rng.standard_normal((40, 32)).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    D = np.full((64, 40), np.nan, np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, A.astype(np.float64) @ B.astype(np.float64).T) < 1e-6


@pytest.mark.parametrize("a, b, n", [("i8", "u8", 48), ("u8", "u8", 24), ("i8", "i8", 32)])
def test_simulated_integers(a, b, n):
    r = build(typed(GEMM, a, b, acc="i32"), M=64, N=n, K=64, MODE="SWIZZLE_64B_ATOM")
    ptx_type = {"i8": "s8", "u8": "u8"}
    assert r.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.{ptx_type[a]}.{ptx_type[b]} {{") == 2
    rng = np.random.default_rng(5)
    lo = {"i8": (-128, 128), "u8": (0, 256)}
    A = rng.integers(*lo[a], size=(64, 64)).astype(np.int8 if a == "i8" else np.uint8)
    B = rng.integers(*lo[b], size=(n, 64)).astype(np.int8 if b == "i8" else np.uint8)
    D = np.zeros((64, n), np.int32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert np.array_equal(D, A.astype(np.int64) @ B.astype(np.int64).T)


def test_integer_n_follows_the_isa():
    """m64n40k32 exists for f16 but not for s8: an integer N of 40 is cut
    into five n8 instructions; N 80 is one instruction for both."""
    i8 = typed(GEMM, "i8", "i8", acc="i32")
    assert build(i8, M=64, N=80, K=32, MODE="SWIZZLE_32B_ATOM").ptx.count("m64n80k32.s32.s8.s8") == 1
    assert build(GEMM, M=64, N=80, K=32, MODE="SWIZZLE_32B_ATOM").ptx.count("m64n80k16.f32.f16.f16") == 2
    assert build(i8, M=64, N=40, K=32, MODE="SWIZZLE_32B_ATOM").ptx.count("m64n8k32.s32.s8.s8") == 5


def transposed(text, a=False, b=True):
    """GEMM with A stored K x M (`a`) and B stored K x N (`b`), both in the
    TMA layout of their stored shape (MN-major)."""
    out = text
    if b:
        out = out.replace("B: f16[N, K]", "B: f16[K, N]").replace(
            "pool.alloc((N, K), f16, layout=mma_shared_layout(f16, MODE, (N, K)))",
            "pool.alloc((K, N), f16, layout=tma_shared_layout(f16, MODE, (K, N)))")
    if a:
        out = out.replace("A: f16[M, K]", "A: f16[K, M]").replace(
            "pool.alloc((M, K), f16, layout=mma_shared_layout(f16, MODE, (M, K)))",
            "pool.alloc((K, M), f16, layout=tma_shared_layout(f16, MODE, (K, M)))")
    flags = (", transpose_A=True" if a else "") + (", transpose_B=True" if b else "")
    return out.replace("Asmem[:, :], Bsmem[:, :])", f"Asmem[:, :], Bsmem[:, :]{flags})")


@pytest.mark.parametrize("m, n, k, mode, a, b", [
    (64, 128, 64, "SWIZZLE_128B_ATOM", False, True),
    (128, 64, 32, "SWIZZLE_64B_ATOM", True, True),
    (64, 32, 32, "SWIZZLE_32B_ATOM", True, False),
    (64, 24, 32, "SWIZZLE_NONE", False, True),
    (128, 64, 64, "SWIZZLE_128B_ATOM", True, False),
])
def test_simulated_mn_major(m, n, k, mode, a, b):
    r = build(transposed(GEMM, a, b), M=m, N=n, K=k, MODE=mode)
    A, B = inputs(m, n, k, seed=6)
    D = np.full((m, n), np.nan, np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": np.ascontiguousarray(A.T) if a else A,
                                      "B": np.ascontiguousarray(B.T) if b else B, "D": D})
    assert relative_error(D, A.astype(np.float64) @ B.astype(np.float64).T) < 1e-6
    assert re.search(rf", {int(a)}, {int(b)};", r.ptx)


def test_mn_major_bf16_with_a_from_registers():
    text = transposed(GEMM_RS.replace("f16", "bf16").replace("copy(Bsmem[stage, :, :], B[:, :])",
                                                            "copy(Bsmem[stage, :, :], B[:, :])"), a=False, b=False)
    text = text.replace("B: bf16[N, K]", "B: bf16[K, N]").replace(
        "pool.alloc((2, N, K), bf16, layout=mma_shared_layout(bf16, SWIZZLE_64B_ATOM, (2, N, K)))",
        "pool.alloc((2, K, N), bf16, layout=tma_shared_layout(bf16, SWIZZLE_64B_ATOM, (2, K, N)))")
    text = text.replace("Bsmem[stage, :, :], accum", "Bsmem[stage, :, :], transpose_B=True, accum")
    r = build(text)
    assert r.ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 4
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    A, B = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))
    D = np.zeros((64, 64), np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "stage": 1})
    exact = lambda u: (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa: E731
    assert relative_error(D, 2 * exact(A) @ exact(B)) < 1e-6


def test_what_wgmma_reads_only_k_major():
    fp8 = typed(GEMM, "e4m3", "e4m3")
    rejected(fp8.replace("Asmem[:, :], Bsmem[:, :])", "Asmem[:, :], Bsmem[:, :], transpose_B=True)"),
             "wgmma reads e4m3 B only K-major: transpose_B=True needs f16 or bf16", K=128)
    # an N-contiguous e4m3 B (MN-major) is refused with the rule and the layout to use instead
    mn = fp8.replace("layout=mma_shared_layout(e4m3, MODE, (N, K))", "layout=S[(N, K) : (1, N)]")
    rejected(mn, r"B 'Bsmem' must be K-major in shared memory .*use tma_shared_layout\(e4m3, 0, \(MN, K\)\)",
             MODE="SWIZZLE_NONE")
    rejected(typed(GEMM, "e4m3", "f16"), "A and B must have dtypes of one family .e4m3 or e5m2., got e4m3 and f16",
             MODE="SWIZZLE_NONE")
    rejected(typed(GEMM, "i8", "u8"), "the accumulator must be i32, got f32", K=128)
    rejected(typed(GEMM, "e4m3", "e4m3"), r"K \(48\) must be a multiple of 32", K=48, MODE="SWIZZLE_NONE")


# A in registers as 8-bit floats: the m64nNk32 A fragment, four values to a
# register (rows l/4 and l/4 + 8 of the warp's 16, columns 4 (l % 4) + 0..3
# and 16 on), B from shared memory.
GEMM_RS8 = """
target sm_90a
const M = 64
const N = 64
const K = 64
const ACC = S[(M // 64, 4, 2, 8, N // 8, 4, 2) : (N // 2, 32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
const A_FRAG = S[(M // 64, 4, 2, 8, K // 32, 2, 4, 4) : (K // 2, 32@tid_in_wg, 4, 4@tid_in_wg, 16, 8, 1@tid_in_wg, 1)]

kernel gemm(A: e4m3[M, K], B: e5m2[N, K], D: f32[M, N]):
    cta_id([1])
    tid = thread_id([128])
    pool = smem_pool()
    Bsmem = pool.alloc((N, K), e5m2, layout=mma_shared_layout(e5m2, SWIZZLE_64B_ATOM, (N, K)))
    pool.commit()
    acc = alloc_local((M, N), f32, layout=ACC)
    afrag = alloc_local((M, K), e4m3, layout=A_FRAG)
    copy(afrag[:, :], A[:, :])
    copy(Bsmem[:, :], B[:, :])
    ptx.fence.proxy_async("shared::cta")
    cuda.cta_sync()
    gemm_async(acc[:, :], afrag[:, :], Bsmem[:, :])
    ptx.wgmma.commit_group()
    ptx.wgmma.wait_group(0)
    copy(D[:, :], acc[:, :])
"""


def test_simulated_fp8_a_from_registers():
    r = build(GEMM_RS8)
    assert r.ptx.count("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {") == 2
    rng = np.random.default_rng(8)
    (A, va), (B, vb) = fp8_bits((64, 64), "e4m3", rng), fp8_bits((64, 64), "e5m2", rng)
    D = np.full((64, 64), np.nan, np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D})
    assert relative_error(D, va[A] @ vb[B].T) < 1e-6

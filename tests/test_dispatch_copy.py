"""Synchronous copy: the ldst variant (plain, vectorized loads and stores)
and ldstmatrix (ldmatrix / stmatrix for warp fragments).

On the CPU, ldst kernels run in the PTX simulator (tests/ptx_sim.py):
every swizzle mode, 1/2/4-byte elements, thread/warp/warpgroup/CTA scope,
global <-> shared <-> registers.  The other side of each copy is written by
hand (an element loop, or the fragment formula through `.local(n)`), so a
copy that put elements in the wrong places cannot cancel out.  ldmatrix and
stmatrix are warp-collective, which the simulator does not model; they run
in the lowered-IR model (tests/dispatch_model.py).  The `gpu` tests run the
same kernels on a device."""
import re

import numpy as np
import pytest

from dispatch_model import Model
from ptx_sim import Kernel
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

NP = {"u8": np.uint8, "f16": np.float16, "f32": np.float32}
ROW_BYTES = 128  # one row of the test tiles: the widest swizzle atom


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.standard_normal(shape).astype(NP[dtype])


def poison(shape, dtype):
    return np.full(shape, 0xA5 if dtype == "u8" else np.nan, NP[dtype])


def compile_kernel(text, target="sm_90a"):
    r = compile_source(text, "copy.tile", target=target)
    assemble(r.ptx, target)
    return r


def simulate(r, args):
    entry = r.meta["kernels"][0]
    Kernel(r.ptx, entry["name"]).run(args, grid=entry["grid"], dynamic_smem=entry["dynamic_smem"])


def lowered(text, target="sm_90a"):
    return compile_source(text, "copy.tile", target=target, options=Options(stop_after="dispatch")).module


# --------------------------------------------------------------------------
# Memory to memory, at every scope
# --------------------------------------------------------------------------

# Each scope runs the copy in one part of a 256-thread block: the guard
# decides the scope infer-scope gives it.
SCOPES = {
    "thread": ("if tid == 37:", "copy"),
    "warp": ("if wid == 5:", "copy"),
    "wg": ("if wgid == 1:", "wg.copy"),
    "cta": ("if True:", "cta.copy"),
}


def mem_source(scope, dtype, mode, direction, mode2=None):
    """g2s: A -> S by the scope, S -> B by hand; s2g: A -> S by hand, S -> B
    by the scope; s2s: A -> S by hand, S -> S2 by the scope, S2 -> B by hand;
    g2g: A -> B by the scope."""
    cols = ROW_BYTES * 8 // {"u8": 8, "f16": 16, "f32": 32}[dtype]
    rows = 16
    guard, copy = SCOPES[scope]
    shared = f'alloc(({rows}, {cols}), {dtype}, scope="shared", layout=mma_shared_layout({dtype}, {{m}}, ({rows}, {cols})))'
    by_hand = f"for e in range(tid, {rows * cols}, 256):\n        {{dst}}[e // {cols}, e % {cols}] = {{src}}[e // {cols}, e % {cols}]"
    lines = [
        f"kernel k(A: {dtype}[{rows}, {cols}], B: {dtype}[{rows}, {cols}]):",
        "    cta_id([1])",
        "    tid = thread_id([256])",
        "    wid = warp_id([8])",
        "    wgid = warpgroup_id([2])",
        "    Sm = " + shared.format(m=mode),
        "    Sm2 = " + shared.format(m=mode if mode2 is None else mode2),
    ]
    scoped = {
        "g2s": ("Sm", "A"), "s2g": ("B", "Sm"), "s2s": ("Sm2", "Sm"), "g2g": ("B", "A"),
    }[direction]
    if direction in ("s2g", "s2s"):
        lines += ["    " + by_hand.format(dst="Sm", src="A"), "    cuda.cta_sync()"]
    lines += [f"    {guard}", f"        {copy}({scoped[0]}, {scoped[1]})", "    cuda.cta_sync()"]
    if direction == "g2s":
        lines += ["    " + by_hand.format(dst="B", src="Sm")]
    if direction == "s2s":
        lines += ["    " + by_hand.format(dst="B", src="Sm2")]
    return "\n".join(lines) + "\n", (rows, cols)


def run_mem(scope, dtype, mode, direction, mode2=None):
    text, shape = mem_source(scope, dtype, mode, direction, mode2)
    r = compile_kernel(text)
    a, b = values(shape, dtype), poison(shape, dtype)
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)
    return r


@pytest.mark.parametrize("dtype", ["u8", "f16", "f32"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_global_to_shared_every_swizzle_and_width(dtype, mode):
    r = run_mem("cta", dtype, mode, "g2s")
    assert "ld.global.v4.b32" in r.ptx and "st.shared.v4.b32" in r.ptx  # 16-byte accesses


@pytest.mark.parametrize("scope", ["thread", "warp", "wg", "cta"])
@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_every_scope_and_direction(scope, direction):
    run_mem(scope, "f16", 3, direction)


@pytest.mark.parametrize("scope", ["warp", "cta"])
def test_global_to_global_and_shared_to_shared(scope):
    run_mem(scope, "f32", 0, "g2g")
    run_mem(scope, "u8", 3, "s2s", mode2=1)


def test_narrow_alignment_gives_narrower_vectors():
    text = """
kernel k(A: f16[8, 64], B: f16[8, 64]):
    cta_id([1])
    tid = thread_id([32])
    Sm = alloc((8, 64), f16, scope="shared")
    copy(Sm[0:8, 2:34], A[0:8, 6:38])
    cuda.cta_sync()
    copy(B[0:8, 2:34], Sm[0:8, 2:34])
"""
    r = compile_kernel(text)
    assert "ld.global.v2.b16" not in r.ptx and "ld.global.b32" in r.ptx  # 4-byte runs: 6 and 2 are even
    a, b = values((8, 64), "f16"), poison((8, 64), "f16")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b[:, 2:34], a[:, 6:38])


def test_tma_seed_copy_back_from_a_128b_swizzled_tile():
    """Seed 004's last line, `cta.copy(B[0:8, 0:256], A_smem[0:8, 0:256])`,
    with 8 threads and A_smem filled by hand."""
    text = """
kernel k(A: f16[8, 256], B: f16[8, 256]):
    cta_id([1])
    tid = thread_id([8])
    A_smem = alloc((8, 256), f16, scope="shared", layout=mma_shared_layout(f16, 3, (8, 256)))
    for e in range(tid, 2048, 8):
        A_smem[e // 256, e % 256] = A[e // 256, e % 256]
    cuda.cta_sync()
    cta.copy(B[0:8, 0:256], A_smem[0:8, 0:256])
"""
    r = compile_kernel(text)
    assert r.ptx.count("ld.shared.v4.b32") == 32  # 256 16-byte chunks over 8 threads
    a, b = values((8, 256), "f16"), poison((8, 256), "f16")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


# --------------------------------------------------------------------------
# Registers
# --------------------------------------------------------------------------


def test_tutorial_epilogue_registers_to_a_swizzled_shared_row():
    """The GEMM tutorial's epilogue: each thread casts its f32 row and copies
    it into its row of a 128B-swizzled shared tile, which goes out whole."""
    text = """
const BLK_N = 64
kernel k(A: f32[128, 64], D: f16[128, 64]):
    cta_id([1])
    warp_id = warp_id([4])
    lane_id = lane_id([32])
    Dsmem = alloc((128, 64), f16, scope="shared", layout=mma_shared_layout(f16, 3, (128, 64)))
    Dreg = alloc_local((BLK_N,), f32)
    Dreg_f16 = alloc_local((BLK_N,), f16)
    copy(Dreg[:], A[warp_id * 32 + lane_id, 0:BLK_N])
    cast(Dreg_f16[:], Dreg[:])
    copy(Dsmem[warp_id * 32 + lane_id, 0:BLK_N], Dreg_f16[:])
    cuda.cta_sync()
    copy(D, Dsmem)
"""
    after = lowered(text)
    assert "for j_2 in unroll(8):\n        copy_vec(Dsmem[warp_id * 32 + lane_id, j_2 * 8], Dreg_f16[j_2 * 8], 8)" in \
        _printed(after)
    r = compile_kernel(text)
    assert r.ptx.count("st.shared.v4.b32") == 8 and r.ptx.count("cvt.rn.f16x2.f32") == 32
    a, d = values((128, 64), "f32"), poison((128, 64), "f16")
    simulate(r, {"A": a, "D": d})
    np.testing.assert_array_equal(d, a.astype(np.float16))


def _printed(module):
    from tilec.compiler.printer import print_module

    return print_module(module)


def row_source(dtype, mode):
    """Each of 32 threads moves its own row: global -> registers -> a row of
    a swizzled shared tile (thread scope); the tile goes out whole (CTA)."""
    cols = ROW_BYTES * 8 // {"u8": 8, "f16": 16, "f32": 32}[dtype]
    return f"""
kernel k(A: {dtype}[32, {cols}], B: {dtype}[32, {cols}]):
    cta_id([1])
    tid = thread_id([32])
    Sm = alloc((32, {cols}), {dtype}, scope="shared", layout=mma_shared_layout({dtype}, {mode}, (32, {cols})))
    r = alloc_local(({cols},), {dtype})
    copy(r, A[tid, :])
    copy(Sm[tid, 0:{cols}], r[:])
    cuda.cta_sync()
    copy(B, Sm)
""", (32, cols)


@pytest.mark.parametrize("dtype", ["u8", "f16", "f32"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_thread_rows_through_registers(dtype, mode):
    text, shape = row_source(dtype, mode)
    r = compile_kernel(text)
    if dtype != "u8":  # 8-bit registers move one by one
        assert "st.shared.v4.b32" in r.ptx and "ld.global.v4.b32" in r.ptx
    a, b = values(shape, dtype), poison(shape, dtype)
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


FRAG_F32 = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"  # the mma accumulator


@pytest.mark.parametrize("memory", ["global", "shared"])
def test_warp_fragment_to_memory_and_back(memory):
    """A 16x8 f32 accumulator fragment: written by hand per the PTX figure
    (lane l holds rows l // 4 (+ 8), columns 2 (l % 4) (+ 1)), copied out by
    the warp, and copied back in and out again."""
    via = "Sm" if memory == "shared" else "B"
    text = f"""
kernel k(A: f32[16, 8], B: f32[16, 8], C: f32[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    Sm = alloc((16, 8), f32, scope="shared", layout=S[(16, 2, 4) : (4, 64, 1)])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    E_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    D_reg = D_f.local(4)
    for s in unroll(4):
        D_reg[s] = A[lane // 4 + 8 * (s // 2), 2 * (lane % 4) + s % 2]
    warp.copy({via}, D_f)
    cuda.cta_sync()
    warp.copy(E_f, {via})
    warp.copy(C, E_f)
    if {str(memory == "shared")}:
        warp.copy(B, Sm)
"""
    r = compile_kernel(text)
    assert "st.{}.v2.b32".format("shared" if memory == "shared" else "global") in r.ptx
    a, b, c = values((16, 8), "f32"), poison((16, 8), "f32"), poison((16, 8), "f32")
    simulate(r, {"A": a, "B": b, "C": c})
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(c, a)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_half_fragments_with_plain_loads_and_stores(mode):
    """The ldmatrix-shaped fragments moved by ldst instead (forced), through
    each swizzle: 32-bit accesses of the lane's column pairs."""
    text = matrix_source("f16", mode, A_FRAG, (16, 16), "0:16, 16:32").replace(
        "warp.copy(F, Sm[0:16, 16:32])", 'warp.copy(F, Sm[0:16, 16:32], dispatch="ldst")'
    ).replace("warp.copy(Tm[0:16, 16:32], F)", 'warp.copy(Tm[0:16, 16:32], F, dispatch="ldst")')
    r = compile_kernel(text)
    assert "ldmatrix" not in r.ptx and "stmatrix" not in r.ptx and "ld.shared.b32" in r.ptx
    a, b = values((16, 64), "f16"), poison((16, 64), "f16")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_warpgroup_rows_in_registers():
    """The tutorial's Dreg_wg view: one row of a 128 x 64 tile per thread of
    the warpgroup, written by hand and copied out by the warpgroup."""
    text = """
kernel k(A: f32[128, 64], B: f32[128, 64]):
    cta_id([1])
    t = thread_id_in_wg([128])
    Dreg = alloc_local((64,), f32)
    Dreg_wg = Dreg.view(128, 64, layout=S[(128, 64) : (1@tid_in_wg, 1)])
    for c in unroll(64):
        Dreg[c] = A[t, c]
    wg.copy(B[:, :], Dreg_wg[:, :])
"""
    r = compile_kernel(text)
    assert r.ptx.count("st.global.v4.b32") == 16
    a, b = values((128, 64), "f32"), poison((128, 64), "f32")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_register_to_register_between_layouts():
    """Two layouts that give each lane the same elements in other registers."""
    text = f"""
kernel k(A: f32[16, 8], B: f32[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    E_f = alloc((16, 8), f32, scope="local", layout=S[(2, 8, 4, 2) : (1, 4@laneid, 1@laneid, 2)])
    D_reg = D_f.local(4)
    for s in unroll(4):
        D_reg[s] = A[lane // 4 + 8 * (s // 2), 2 * (lane % 4) + s % 2]
    warp.copy(E_f, D_f)
    E_reg = E_f.local(4)
    for s in unroll(4):
        B[lane // 4 + 8 * (s % 2), 2 * (lane % 4) + s // 2] = E_reg[s]
"""
    r = compile_kernel(text)
    a, b = values((16, 8), "f32"), poison((16, 8), "f32")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_a_register_layout_with_two_elements_in_one_register_is_declined():
    """Each register holds one element: a layout whose memory iterators
    overlap (two strides of 1 along m) is not a register array."""
    text = """
kernel k(A: f32[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    E_f = alloc((16, 8), f32, scope="local", layout=S[(2, 8, 4, 2) : (1, 4@laneid, 1@laneid, 1)])
    warp.copy(E_f, A)
"""
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile")
    assert row(err.value, "ldst") == (
        "declined: register buffer 'E_f' keeps two elements in one register (S[(2, 32, 2) : (1, 1@laneid, 1)])")


def test_a_region_that_splits_a_register_between_threads_is_declined():
    """Rows 0..3 of the accumulator: slot 0 holds rows 0..7, one per group
    of four lanes, so the region takes it from some threads only (the
    columns, a whole dim, take every slot)."""
    text = f"""
kernel k(A: f32[4, 8]):
    cta_id([1])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    warp.copy(D_f[0:4, :], A)
"""
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile")
    assert row(err.value, "ldst") == (
        "declined: region 'D_f[0:4, :]' splits the elements of register slot 0 between threads; copy whole fragments")


def test_a_sub_region_of_a_fragment():
    """Rows 8..15 of the accumulator: the registers of slots 2 and 3."""
    text = f"""
kernel k(A: f32[8, 8], B: f32[8, 8]):
    cta_id([1])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    warp.copy(D_f[8:16, :], A)
    warp.copy(B, D_f[8:16, 0:8])
"""
    after = lowered(text)
    assert "D_f[8, 0]" in _printed(after) and "D_f[0, 0]" not in _printed(after)
    r = compile_kernel(text)
    a, b = values((8, 8), "f32"), poison((8, 8), "f32")
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


# --------------------------------------------------------------------------
# ldmatrix / stmatrix (lowered-IR model)
# --------------------------------------------------------------------------

A_FRAG = "S[(2, 8, 2, 4, 2) : (2, 4@laneid, 4, 1@laneid, 1)]"  # m16n8k16 A, registers a0..a7
B_FRAG = "S[(2, 4, 2, 8) : (2, 1@laneid, 1, 4@laneid)]"  # m16n8k16 B (k x n)
B_FRAG_NK = "S[(8, 2, 4, 2) : (4@laneid, 2, 1@laneid, 1)]"  # the same B, stored n x k
ACC = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"


def matrix_source(dtype, mode, frag, shape, region, smem_cols=64):
    """Shared tile (16 x smem_cols) loaded from global, `region` of it ->
    registers (ldmatrix), registers -> another shared tile (stmatrix), and
    that tile -> global B."""
    return f"""
kernel k(A: {dtype}[16, {smem_cols}], B: {dtype}[16, {smem_cols}]):
    cta_id([1])
    lane = lane_id([32])
    Sm = alloc((16, {smem_cols}), {dtype}, scope="shared", layout=mma_shared_layout({dtype}, {mode}, (16, {smem_cols})))
    Tm = alloc((16, {smem_cols}), {dtype}, scope="shared", layout=mma_shared_layout({dtype}, {mode}, (16, {smem_cols})))
    F = alloc({shape}, {dtype}, scope="local", layout={frag})
    warp.copy(Sm, A)
    warp.copy(Tm, A)
    cuda.cta_sync()
    warp.copy(F, Sm[{region}])
    warp.copy(Tm[{region}], F)
    cuda.cta_sync()
    warp.copy(B, Tm)
"""


MATRIX_CASES = [
    # fragment, shape, region, (instruction, count)
    (A_FRAG, (16, 16), "0:16, 16:32", ("x4", False)),
    (B_FRAG, (16, 8), "0:16, 40:48", ("x2", True)),
    (B_FRAG_NK, (8, 16), "8:16, 32:48", ("x2", False)),
    (ACC, (16, 8), "0:16, 56:64", ("x2", False)),
    ("S[(4, 2, 8) : (1@laneid, 1, 4@laneid)]", (8, 8), "8:16, 0:8", ("x1", True)),
]


@pytest.mark.parametrize("frag, shape, region, instr", MATRIX_CASES)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_ldmatrix_stmatrix(frag, shape, region, instr, mode):
    text = matrix_source("f16", mode, frag, shape, region)
    num, trans = instr
    suffix = f".{num}" + (".trans" if trans else "")
    r = compile_kernel(text)
    assert f"ldmatrix.sync.aligned.m8n8{suffix}.shared.b16" in r.ptx
    assert f"stmatrix.sync.aligned.m8n8{suffix}.shared.b16" in r.ptx
    module = compile_source(text, "copy.tile", options=Options(stop_after="unroll")).module
    a, b = values((16, 64), "f16"), poison((16, 64), "f16")
    Model(module).run({"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_bf16_ldmatrix_and_sm80_falls_back_to_stores():
    text = matrix_source("bf16", 3, A_FRAG, (16, 16), "0:16, 0:16")
    r = compile_kernel(text, target="sm_80")
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in r.ptx and "stmatrix" not in r.ptx
    module = compile_source(text, "copy.tile", target="sm_80", options=Options(stop_after="unroll")).module
    a = values((16, 64), "f16").astype(np.float32)  # f16 values are exact in bf16? no: round them
    from dispatch_model import bf16

    a = np.vectorize(bf16)(a).astype(np.float32)
    b = np.full((16, 64), np.nan, np.float32)
    Model(module, "sm_80").run({"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_ldmatrix_lowered_ir():
    after = lowered(matrix_source("f16", 3, A_FRAG, (16, 16), "0:16, 16:32"))
    assert (
        "ptx.ldmatrix((F[0, 0], F[0, 1], F[8, 0], F[8, 1], F[0, 8], F[0, 9], F[8, 8], F[8, 9]), "
        "Sm.ptr_to([lane // 8 % 2 * 8 + lane % 8, 16 + lane // 16 * 8]), num=4, trans=False)"
    ) in _printed(after)


# --------------------------------------------------------------------------
# Rejections
# --------------------------------------------------------------------------

REJECT = """
kernel k(A: f16[16, 16], B: f32[16, 16], C: f16[8, 8]):
    cta_id([1])
    tid = thread_id([64])
    Sm = alloc((16, 16), f16, scope="shared")
    Rl = alloc_local((16,), f16)
    F = alloc((16, 16), f16, scope="local", layout=A_FRAG)
    CALL
"""


def reject(call, target="sm_90a"):
    text = REJECT.replace("A_FRAG", A_FRAG).replace("CALL", call)
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile", target=target)
    return err.value


def row(err, variant):
    (line,) = [l for l in err.message.splitlines() if l.strip().startswith(variant + " ")]
    return line.split(None, 2)[2]


def select_in(text, target="sm_90a"):
    """The selection for the one tile primitive of `text`, without the
    verifier that runs after parsing (so the variant's own checks show)."""
    from tilec.compiler.symbols import analyze_kernel
    from tilec.compiler.targets import TARGETS
    from tilec.grammar.parser import parse
    from tilec.passes.dispatch import DispatchContext, TileOp, select
    from tilec.compiler.fold import fold

    module = fold(parse(text, "k.tile"))
    kernel = module.kernels[0]
    call = kernel.body[-1].expr
    return select(TileOp.from_call(call), DispatchContext(TARGETS[target], analyze_kernel(kernel, module, TARGETS[target])))


@pytest.mark.parametrize(
    "call, message",
    [
        ("cta.copy(B, A)", "copy: 'B' is f32 but 'A' is f16; use cast to convert"),
        ("cta.copy(Sm, C)", "copy: 'Sm' is 16x16 but 'C' is 8x8 (extents of 1 aside)"),
    ],
)
def test_operands_that_no_variant_can_copy(call, message):
    with pytest.raises(TilecError) as err:
        select_in(REJECT.replace("A_FRAG", A_FRAG).replace("CALL", call))
    assert err.value.message == message
    assert (err.value.span.line, err.value.span.col) == (8, 5)


def test_a_cta_copy_under_a_thread_condition():
    err = reject("if tid < 32:\n        cta.copy(Sm, A)")
    assert row(err, "ldst") == (
        "rejected by whole_scope: the copy is at cta scope but runs under 'tid < 32', which not every "
        "thread of the cta takes; write thread.copy under a one-thread condition, or drop the condition"
    )


def test_per_thread_registers_are_not_written_by_a_cta():
    err = reject("cta.copy(Sm[0, :], Rl)")
    assert row(err, "ldst") == (
        "declined: every thread of the cta holds its own 'Rl' and would write the same memory; "
        "copy per thread (thread.copy)"
    )


def test_forced_ldstmatrix_reports_why():
    err = reject('cta.copy(Sm, F, dispatch="ldstmatrix")')
    assert err.message.endswith("rejected by warp_collective: the instruction is warp-collective: the call "
                                "must be at warp scope, not cta")


def test_stmatrix_needs_sm90():
    text = REJECT.replace("A_FRAG", A_FRAG).replace("tid = thread_id([64])", "lane = lane_id([32])")
    text = text.replace("CALL", 'warp.copy(Sm, F, dispatch="ldstmatrix")')
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile", target="sm_80")
    assert row(err.value, "ldstmatrix") == "rejected by stmatrix_target: stmatrix needs sm_90a or newer (the target is sm_80)"


# --------------------------------------------------------------------------
# On a GPU
# --------------------------------------------------------------------------


def run_on_gpu(text, args, target="sm_90a"):
    from tilec.runtime import driver
    from tilec.runtime.module import CompiledModule

    if target == "sm_90a" and driver.device().compute_capability != (9, 0):
        pytest.skip("sm_90a kernels need compute capability 9.0")
    r = compile_source(text, "copy.tile", target=target)
    CompiledModule(r.ptx, r.meta, target).kernel()(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["u8", "f16", "f32"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("scope", ["thread", "warp", "wg", "cta"])
@pytest.mark.parametrize("direction", ["g2s", "s2g", "s2s", "g2g"])
def test_gpu_memory_copies(dtype, mode, scope, direction):
    text, shape = mem_source(scope, dtype, mode, direction, mode2=(mode + 1) % 4)
    a, b = values(shape, dtype), poison(shape, dtype)
    run_on_gpu(text, [a, b])
    np.testing.assert_array_equal(b, a)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["u8", "f16", "f32"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_gpu_thread_rows_through_registers(dtype, mode):
    text, shape = row_source(dtype, mode)
    a, b = values(shape, dtype), poison(shape, dtype)
    run_on_gpu(text, [a, b])
    np.testing.assert_array_equal(b, a)


@pytest.mark.gpu
@pytest.mark.parametrize("frag, shape, region, instr", MATRIX_CASES)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_gpu_ldmatrix_stmatrix(frag, shape, region, instr, mode):
    a, b = values((16, 64), "f16"), poison((16, 64), "f16")
    run_on_gpu(matrix_source("f16", mode, frag, shape, region), [a, b])
    np.testing.assert_array_equal(b, a)


@pytest.mark.gpu
@pytest.mark.parametrize("memory", ["global", "shared"])
def test_gpu_warp_fragment(memory):
    via = "Sm" if memory == "shared" else "B"
    text = f"""
kernel k(A: f32[16, 8], B: f32[16, 8], C: f32[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    Sm = alloc((16, 8), f32, scope="shared", layout=S[(16, 2, 4) : (4, 64, 1)])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    E_f = alloc((16, 8), f32, scope="local", layout={FRAG_F32})
    D_reg = D_f.local(4)
    for s in unroll(4):
        D_reg[s] = A[lane // 4 + 8 * (s // 2), 2 * (lane % 4) + s % 2]
    warp.copy({via}, D_f)
    cuda.cta_sync()
    warp.copy(E_f, {via})
    warp.copy(C, E_f)
"""
    a, b, c = values((16, 8), "f32"), poison((16, 8), "f32"), poison((16, 8), "f32")
    run_on_gpu(text, [a, b, c])
    np.testing.assert_array_equal(c, a)


# --------------------------------------------------------------------------
# oob="zero": a global region past its tensor's end, loaded into registers
# --------------------------------------------------------------------------

# The wgmma accumulator fragment (the GEMM epilogue's registers) over a
# region that may run past X's last rows and columns at run-time starts.
OOB = """
const ACC = S[(4, 2, 8, 2, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
kernel k(X: f16[100, ROW], Y: f16[64, 16], r0: i32, c0: i32):
    cta_id([1])
    t = thread_id_in_wg([128])
    regs = alloc_local((64, 16), f16, layout=ACC)
    copy(regs, SRC[r0 : r0 + 64, COL : COL + 16], oob="zero")
    copy(Y, regs)
"""


def oob_kernel(row=22, col="c0", src="X", extra=""):
    text = OOB.replace("ROW", str(row)).replace("COL", col).replace("SRC", src)
    return compile_kernel(text.replace("    copy(regs", extra + "    copy(regs"))


def zero_padded(x, r0, c0, shape):
    out = np.zeros(shape, x.dtype)
    part = x[r0 : r0 + shape[0], c0 : c0 + shape[1]]
    out[: part.shape[0], : part.shape[1]] = part
    return out


@pytest.mark.parametrize("r0, c0", [(0, 0), (36, 6), (60, 0), (0, 10), (90, 20), (99, 21)])
def test_oob_zero_reads_zeros_past_the_edge(r0, c0):
    """Inside, past the last row, past the last column, both, and one
    element left: what lies outside X reads as 0 and is never loaded (the
    simulator faults on an access outside an array)."""
    r = oob_kernel()
    x, y = values((100, 22), "f16"), poison((64, 16), "f16")
    simulate(r, {"X": x, "Y": y, "r0": r0, "c0": c0})
    np.testing.assert_array_equal(y, zero_padded(x, r0, c0, (64, 16)))


@pytest.mark.parametrize("row, loads", [(22, "ld.global.b32"), (21, "ld.global.b16")])
def test_oob_vectors_never_straddle_the_edge(row, loads):
    """Columns from an even start go two at a time (4 bytes) when the last
    extent is even; with 21 columns a pair could straddle it (element 20 in,
    21 out), so each element is loaded alone.  X is read through a
    broadcast view here (every row is X's row 0), whose row stride, 0,
    proves nothing about the last extent."""
    r = oob_kernel(row, "c0 * 2", "Xb", f"    Xb = X.view(100, {row}, layout=S[(100, {row}) : (0, 1)])\n")
    assert set(re.findall(r"ld\.global\.\w+", r.ptx)) == {loads}
    x, y = values((100, row), "f16"), poison((64, 16), "f16")
    for r0, c in [(0, 0), (50, 3), (40, 5), (0, 9)]:
        simulate(r, {"X": x, "Y": y, "r0": r0, "c0": c})
        broadcast = np.broadcast_to(x[0], (100, row))
        np.testing.assert_array_equal(y, zero_padded(broadcast, r0, 2 * c, (64, 16)))


@pytest.mark.parametrize("src, dst, message", [
    ("Sm[0:16, 0:16]", "Rg", "copy with oob=\"zero\" loads a global region that may run past its tensor's end "
                             "into registers, not shared 'Sm' into local 'Rg'"),
    ("X[0:16, 0:16]", "Sm[0:16, 0:16]", "not global 'X' into shared 'Sm'"),
])
def test_oob_is_for_a_global_source_loaded_into_registers(src, dst, message):
    text = f"""
kernel k(X: f16[100, 22]):
    cta_id([1])
    t = thread_id_in_wg([128])
    Sm = alloc((16, 16), f16, scope="shared")
    Rg = alloc_local((16, 16), f16, layout=S[(2, 8, 2, 4, 2) : (2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)])
    copy({dst}, {src}, oob="zero")
"""
    with pytest.raises(TilecError, match=re.escape(message)) as err:
        compile_kernel(text)
    assert (err.value.span.line, err.value.span.col) == (7, 5)


@pytest.mark.parametrize("call, message", [
    ('copy(regs, X[0:64, 0:16], oob="nan")', "oob"),
    ('copy(regs, X[100:164, 0:16], oob="zero")', "slice 100:164 is out of bounds for dimension 0 of 'X'"),
    ("copy(regs, X[40:104, 0:16])", "slice 40:104 is out of bounds for dimension 0 of 'X' (size 100)"),
])
def test_oob_regions_still_start_inside(call, message):
    """oob lets a region run past the end, not start there; without it the
    region must lie inside (as before)."""
    with pytest.raises(TilecError, match=re.escape(message)) as err:
        compile_kernel(OOB.replace("ROW", "22").replace('copy(regs, SRC[r0 : r0 + 64, COL : COL + 16], oob="zero")',
                                                       call))
    assert err.value.span.line == 7


TILED = """
const ACC = S[(4, 2, 8, 2, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
kernel k(X: f16[ROWS, 64], Y: f16[64, 16], r: i32, c: i32):
    cta_id([1])
    t = thread_id_in_wg([128])
    regs = alloc_local((64, 16), f16, layout=ACC)
    copy(regs, X[r * 64 : r * 64 + 64, c * 16 : c * 16 + 16], oob="zero")
    copy(Y, regs)
"""


def zeroing_tests(module):
    """The conditions of the selects that zero registers (`r = r if c else 0.0`)."""
    from tilec.compiler import ir, visit

    body = list(visit.walk(module.kernels[0]))
    assert not [n for n in body if isinstance(n, ir.If)], "the copy branches"
    return {n.value.cond for n in body if isinstance(n, ir.Assign) and isinstance(n.value, ir.Select)
            and n.value.then == n.targets[0]}


@pytest.mark.parametrize("rows, tests", [(128, 1), (100, 2)])
def test_oob_tests_a_dim_once_where_a_slice_lies_wholly_inside_or_outside(rows, tests):
    """No branch: each access reads inside the tensor (a start past a
    uniform dim's end is read as 0, a ragged coordinate past it as 0) and
    its registers are selected to zero where it lies outside.  A 64-row
    slice at a multiple of 64 of a 128-row tensor is inside or outside as a
    whole, as is a 16-column slice at a multiple of 16 of 64 columns: one
    test of the starts, the same for every access.  With 100 rows the row
    dim is ragged: a thread's accesses test its two rows (r and r + 8)."""
    text = TILED.replace("ROWS", str(rows))
    assert len(zeroing_tests(lowered(text))) == tests
    r = compile_kernel(text)
    assert set(re.findall(r"ld\.global\.\w+", r.ptx)) == {"ld.global.b32"}
    assert not re.search(r"\bbra\b", r.ptx)
    x = values((rows, 64), "f16")
    for r0, c0 in [(0, 0), (1, 3), (2, 1), (0, 4)]:   # (2, _) and (_, 4): wholly outside
        y = poison((64, 16), "f16")
        simulate(r, {"X": x, "Y": y, "r": r0, "c": c0})
        np.testing.assert_array_equal(y, zero_padded(x, 64 * r0, 16 * c0, (64, 16)))


def test_oob_bounds_a_runtime_extent_by_its_value_at_launch():
    """X: f16[M, N] with extents bound at launch: the tests compare with
    them, and `assume(N % 2 == 0)` lets column pairs load as one access."""
    text = """
const ACC = S[(4, 2, 8, 2, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
kernel k(X: f16[M, N], Y: f16[64, 16], r0: i32, c0: i32):
    assume(N % 2 == 0)
    cta_id([1])
    t = thread_id_in_wg([128])
    regs = alloc_local((64, 16), f16, layout=ACC)
    copy(regs, X[r0 : r0 + 64, c0 * 2 : c0 * 2 + 16], oob="zero")
    copy(Y, regs)
"""
    r = compile_kernel(text)
    assert set(re.findall(r"ld\.global\.\w+", r.ptx)) == {"ld.global.b32"}
    x = values((70, 20), "f16")
    for r0, c0 in [(0, 0), (10, 3), (60, 5)]:
        y = poison((64, 16), "f16")
        simulate(r, {"X": x, "Y": y, "r0": r0, "c0": c0, "M": 70, "N": 20})
        np.testing.assert_array_equal(y, zero_padded(x, r0, 2 * c0, (64, 16)))


@pytest.mark.parametrize("r0, c0", [(36, 6), (90, 20), (0, 0)])
def test_oob_any_reads_inside_and_leaves_the_outside_unspecified(r0, c0):
    """oob="any": the same reads inside the tensor as "zero" (the simulator
    faults on any outside it), no select: the registers of positions past
    the edge hold some element of X, and every position inside is X's."""
    text = OOB.replace("ROW", "22").replace("SRC", "X").replace("COL", "c0").replace('oob="zero"', 'oob="any"')
    assert not zeroing_tests(lowered(text))
    r = compile_kernel(text)
    assert "selp.b16" not in r.ptx and not re.search(r"\bbra\b", r.ptx)
    x, y = values((100, 22), "f16"), poison((64, 16), "f16")
    simulate(r, {"X": x, "Y": y, "r0": r0, "c0": c0})
    part = x[r0 : r0 + 64, c0 : c0 + 16]
    np.testing.assert_array_equal(y[: part.shape[0], : part.shape[1]], part)
    assert np.isin(y, x).all()

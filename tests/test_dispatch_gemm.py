"""gemm -> mma.sync (variant mma_sync): the PTX, the rejections, what the
lowered IR computes (on the CPU, in the lowered-IR model of
tests/dispatch_model.py), and the same grid on a GPU (`gpu` marker).

Each case is one warp computing D (16 Mt x 8 Nt) = A @ B (+ C) with K =
16 Kt (m16n8k16) or 8 Kt (m16n8k8): operands staged from global memory with
warp.copy into fragment layouts (tile_to of the PTX ISA fragments), the
gemm, and D copied back."""
from pathlib import Path

import numpy as np
import pytest

from dispatch_model import Model, bf16
from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout_ir import to_layout, to_lit
from tilec.compiler.layout_shape import permute_dims, tile_to
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_expr
from tilec.grammar.parser import parse
from tilec.runtime.assemble import assemble

ACC = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"
A_K8 = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"
B_K8 = "S[(4, 2, 8) : (1@laneid, 1, 4@laneid)]"

K16 = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 2), (4, 1, 1)]
K8 = [(1, 1, 1), (1, 1, 3), (2, 2, 3)]
GRID = [(t, 16) for t in K16] + [(t, 8) for t in K8]


def lit(text: str):
    return to_layout(parse(f"const L = {text}\n", "l.tile").consts[0].value)


def layout_text(layout) -> str:
    return print_expr(to_lit(layout))


def fragment(atom: str, atom_shape, shape, transposed=False) -> str:
    """The layout text of `atom` tiled over `shape` (transposed: the same
    placement seen through a (cols, rows) buffer)."""
    layout = tile_to(lit(atom), shape, atom_shape)
    if transposed:
        layout = permute_dims(layout, shape, (1, 0))
    return layout_text(layout)


def gemm_source(counts, k, dtype="f16", beta=0.0, trans_a=False, trans_b=False, in_place=False, target="sm_80"):
    mt, nt, kt = counts
    M, N, K = 16 * mt, 8 * nt, k * kt
    a_atom = A_K8 if k == 8 else layout_text(tile_to(lit(A_K8), (16, 16), (16, 8)))
    b_atom = B_K8 if k == 8 else layout_text(tile_to(lit(B_K8), (16, 8), (8, 8)))
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a_layout = fragment(a_atom, (16, k), (M, K), trans_a)
    b_layout = fragment(b_atom, (k, 8), (K, N), trans_b)
    acc = fragment(ACC, (16, 8), (M, N))
    c_operand = "D_f" if in_place else "C_f"
    stage_c = f"warp.copy({c_operand}, C)"
    return f"""
target {target}
kernel gemm(A: {dtype}[{a_shape[0]}, {a_shape[1]}], B: {dtype}[{b_shape[0]}, {b_shape[1]}], C: f32[{M}, {N}], D: f32[{M}, {N}]):
    cta_id([1])
    lane = lane_id([32])
    A_f = alloc(({a_shape[0]}, {a_shape[1]}), {dtype}, scope="local", layout={a_layout})
    B_f = alloc(({b_shape[0]}, {b_shape[1]}), {dtype}, scope="local", layout={b_layout})
    C_f = alloc(({M}, {N}), f32, scope="local", layout={acc})
    D_f = alloc(({M}, {N}), f32, scope="local", layout={acc})
    warp.copy(A_f, A)
    warp.copy(B_f, B)
    {stage_c}
    warp.gemm(D_f, A_f, B_f, {c_operand}, transpose_A={trans_a}, transpose_B={trans_b}, alpha=1.0, beta={beta})
    warp.copy(D, D_f)
"""


def operands(counts, k, dtype, trans_a=False, trans_b=False, seed=0):
    """Inputs (f16 arrays, or bf16 bit patterns in uint16), their exact
    values as float64 (A, B as M x K and K x N), and C."""
    mt, nt, kt = counts
    M, N, K = 16 * mt, 8 * nt, k * kt
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    c = rng.standard_normal((M, N)).astype(np.float32)
    if dtype == "f16":
        a, b = a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64)
        enc = lambda x: x.astype(np.float16)
    else:
        a, b = np.vectorize(bf16)(a), np.vectorize(bf16)(b)
        enc = lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    host_a = a.T.copy() if trans_a else a
    host_b = b.T.copy() if trans_b else b
    return enc(host_a), enc(host_b), host_a, host_b, a, b, c


def lowered(text, target="sm_80"):
    return compile_source(text, "gemm.tile", target=target, options=Options(stop_after="unroll")).module


# --------------------------------------------------------------------------
# PTX
# --------------------------------------------------------------------------


@pytest.mark.parametrize("k, dtype", [(16, "f16"), (16, "bf16"), (8, "f16"), (8, "bf16")])
@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
def test_ptx_has_the_mma_and_assembles(k, dtype, target):
    kt = 2 if k == 16 else 3  # K = 32 or 24: k16 is used whenever K allows it
    r = compile_source(gemm_source((2, 2, kt), k, dtype, beta=1.0, target=target), "gemm.tile")
    instr = f"mma.sync.aligned.m16n8k{k}.row.col.f32.{dtype}.{dtype}.f32"
    assert r.ptx.count(instr) == 2 * 2 * kt  # one per output tile and k step
    assemble(r.ptx, target)


SEED = Path(__file__).resolve().parent.parent / "examples" / "gemm_mma_16x8x16.tile"


def test_seed_example_lowers_to_one_mma():
    path = str(SEED)
    text = SEED.read_text()
    after = compile_source(text, path, options=Options(stop_after="dispatch")).module
    calls = [s.expr for s in after.kernels[0].body if hasattr(s, "expr") and getattr(s.expr, "func", "") == "ptx.mma"]
    assert len(calls) == 1
    assert print_expr(calls[0]) == (
        'ptx.mma("m16n8k16", (D_f[0, 0], D_f[0, 1], D_f[8, 0], D_f[8, 1]), '
        "(A_f[0, 0], A_f[0, 1], A_f[8, 0], A_f[8, 1], A_f[0, 8], A_f[0, 9], A_f[8, 8], A_f[8, 9]), "
        "(B_f[0, 0], B_f[1, 0], B_f[8, 0], B_f[9, 0]), (D_f[0, 0], D_f[0, 1], D_f[8, 0], D_f[8, 1]), dtype=f16)"
    )
    r = compile_source(text, path)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in r.ptx
    assemble(r.ptx, "sm_80")


def test_seed_example_computes_a_times_b():
    module = lowered(SEED.read_text())
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16)
    d = np.full((16, 8), np.nan, np.float32)
    Model(module, "sm_80").run({"A_g": a, "B_g": b, "D_g": d})
    np.testing.assert_allclose(d, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_tiles_become_unroll_loops():
    text = gemm_source((2, 2, 2), 16, beta=1.0)
    after = compile_source(text, "gemm.tile", options=Options(stop_after="dispatch")).module
    (m_loop,) = [s for s in after.kernels[0].body if isinstance(s, ir.For)
                 and any(isinstance(n, ir.Call) and n.func == "ptx.mma" for n in visit.walk(s))]
    (n_loop,) = m_loop.body
    *init, k_loop = n_loop.body
    assert (m_loop.kind, m_loop.stop, n_loop.stop, k_loop.stop) == ("unroll", ir.Int(2), ir.Int(2), ir.Int(2))
    assert [print_expr(s.targets[0]) + " = " + print_expr(s.value) for s in init] == [
        "D_f[m * 16, n * 8] = C_f[m * 16, n * 8]",
        "D_f[m * 16, n * 8 + 1] = C_f[m * 16, n * 8 + 1]",
        "D_f[m * 16 + 8, n * 8] = C_f[m * 16 + 8, n * 8]",
        "D_f[m * 16 + 8, n * 8 + 1] = C_f[m * 16 + 8, n * 8 + 1]",
    ]
    (mma,) = k_loop.body
    assert print_expr(mma.expr.args[2]) == (
        "(A_f[m * 16, k * 16], A_f[m * 16, k * 16 + 1], A_f[m * 16 + 8, k * 16], A_f[m * 16 + 8, k * 16 + 1], "
        "A_f[m * 16, k * 16 + 8], A_f[m * 16, k * 16 + 9], A_f[m * 16 + 8, k * 16 + 8], A_f[m * 16 + 8, k * 16 + 9])"
    )


# --------------------------------------------------------------------------
# What the lowered IR computes (CPU model)
# --------------------------------------------------------------------------


def run_model(counts, k, dtype, beta, trans_a=False, trans_b=False, in_place=False):
    enc_a, enc_b, host_a, host_b, a, b, c = operands(counts, k, dtype, trans_a, trans_b)
    module = lowered(gemm_source(counts, k, dtype, beta, trans_a, trans_b, in_place))
    d = np.full(c.shape, np.nan, np.float32)
    Model(module, "sm_80").run({"A": host_a, "B": host_b, "C": c, "D": d})
    want = a @ b + (c if beta == 1.0 else 0)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("counts, k", GRID)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_model_grid(counts, k, dtype, beta):
    run_model(counts, k, dtype, beta)


@pytest.mark.parametrize("trans_a, trans_b", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("k", [16, 8])
def test_model_transposed_operands(trans_a, trans_b, k):
    run_model((2, 1, 2), k, "f16", 1.0, trans_a, trans_b)


def test_model_accumulates_in_place():
    after = compile_source(gemm_source((2, 2, 2), 16, beta=1.0, in_place=True), "g.tile",
                           options=Options(stop_after="dispatch")).module
    assert not [s for s in visit.walk(after) if isinstance(s, ir.Assign) and print_expr(s.targets[0]).startswith("D_f[")]
    run_model((2, 2, 2), 16, "f16", 1.0, in_place=True)


# --------------------------------------------------------------------------
# Rejections
# --------------------------------------------------------------------------

BASE = """
kernel k(A: f16[16, 16], D: f32[16, 8]):
    cta_id([1])
    wid = warp_id([WARPS])
    lane = lane_id([LANES])
    A_f = alloc((16, 16), f16, scope="local", layout=A_FRAG)
    A_s = alloc((16, 16), f16, scope="shared")
    B_f = alloc((16, 8), f16, scope="local", layout=B_FRAG)
    D_f = alloc((16, 8), f32, scope="local", layout=D_LAYOUT)
    CALL
"""


def reject(call, warps=1, lanes=32, d_layout=ACC):
    base = BASE if lanes == 32 else BASE.replace("    wid = warp_id([WARPS])\n", "")
    text = (
        base.replace("CALL", call)
        .replace("WARPS", str(warps))
        .replace("LANES", str(lanes))
        .replace("A_FRAG", layout_text(tile_to(lit(A_K8), (16, 16), (16, 8))))
        .replace("B_FRAG", layout_text(tile_to(lit(B_K8), (16, 8), (8, 8))))
        .replace("D_LAYOUT", d_layout)
    )
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile")
    return err.value


def mma_row(err) -> str:
    (row,) = [line for line in err.message.splitlines() if line.strip().startswith("mma_sync")]
    return row.split(None, 2)[2]


def test_shared_operand_is_rejected_with_the_seed_message():
    err = reject("warp.gemm(D_f, A_s, B_f, D_f)")
    assert err.message.startswith("no variant of 'gemm' accepts this call on sm_90a")
    assert mma_row(err) == (
        "rejected by operands_in_registers: gemm mma requires A in register (local) scope, got shared"
    )
    assert (err.span.line, err.span.col) == (10, 5)


@pytest.mark.parametrize(
    "call, lanes, message",
    [
        ("warp.gemm(D_f, A_f, B_f, D_f)", 16,
         "rejected by warp_collective: the block has 16 threads; a warp-collective instruction needs all 32 lanes of a warp"),
        ("thread.gemm(D_f, A_f, B_f, D_f)", 32,
         "rejected by warp_collective: the instruction is warp-collective: the call must be at warp scope, not thread"),
        ("if lane < 16:\n        warp.gemm(D_f, A_f, B_f, D_f)", 32,
         "rejected by warp_collective: the call runs under 'lane < 16', which not every lane of the warp takes"),
    ],
)
def test_partial_warp(call, lanes, message):
    assert mma_row(reject(call, lanes=lanes)) == message


def test_a_condition_on_the_warp_keeps_whole_warps():
    text = (BASE.replace("CALL", "if wid == 1:\n        warp.gemm(D_f, A_f, B_f, D_f)")
            .replace("WARPS", "2").replace("LANES", "32")
            .replace("A_FRAG", layout_text(tile_to(lit(A_K8), (16, 16), (16, 8))))
            .replace("B_FRAG", layout_text(tile_to(lit(B_K8), (16, 8), (8, 8))))
            .replace("D_LAYOUT", ACC))
    assert "mma.sync.aligned.m16n8k16" in compile_source(text, "k.tile").ptx


def test_replica_axes():
    err = reject("warp.gemm(D_f, A_f, B_f, D_f)", warps=2, d_layout=ACC + " + R[2 : 1@wid_in_wg]")
    assert mma_row(err) == "rejected by no_replica: gemm mma requires D without replica axes, but 'D_f' has R[2 : 32@tid_in_wg]"


@pytest.mark.parametrize(
    "args, message",
    [
        ("alpha=2.0", "gemm mma supports alpha == 1.0 and beta 0.0 or 1.0, got alpha=2, beta=0"),
        ("beta=0.5", "gemm mma supports alpha == 1.0 and beta 0.0 or 1.0, got alpha=1, beta=0.5"),
    ],
)
def test_alpha_beta(args, message):
    assert mma_row(reject(f"warp.gemm(D_f, A_f, B_f, D_f, {args})")) == f"rejected by alpha_beta: {message}"


def test_beta_one_needs_c():
    err = reject("warp.gemm(D_f, A_f, B_f, beta=1.0)")
    assert mma_row(err) == "rejected by alpha_beta: beta=1.0 adds C, but no C is given"


def test_shapes_that_do_not_tile():
    err = reject("warp.gemm(D_f[0:16, 0:4], A_f, B_f[:, 0:4], D_f[0:16, 0:4])")
    assert mma_row(err) == (
        "declined: the shape M=16, N=4, K=16 does not tile into m16n8k8 atoms (M % 16, N % 8, K % 8 must be 0)"
    )


def test_layout_that_is_not_a_fragment():
    err = reject("warp.gemm(D_f, A_f, B_f, D_f)", d_layout="S[(32, 4) : (1@laneid, 1)]")
    assert mma_row(err) == (
        "declined: D's layout is not the m16n8k16 fragment: lane 1 must hold D[0, 2] in the register "
        "where lane 0 holds D[0, 0]"
    )


def test_operand_shapes_must_agree():
    err = reject("warp.gemm(D_f, A_f, A_f, D_f)")
    assert err.message == "gemm: D is 16x8 and A is 16x16 (as used), so B must be 16x8, but it is 16x16"


def test_dtypes():
    text = BASE.replace("A_f = alloc((16, 16), f16", "A_f = alloc((16, 16), f32")
    err = reject_text(text, "warp.gemm(D_f, A_f, B_f, D_f)")
    assert mma_row(err) == "rejected by dtypes: gemm mma takes f16 or bf16 A and B of one dtype, got A f32 and B f16"


def reject_text(base, call):
    text = (base.replace("CALL", call).replace("WARPS", "1").replace("LANES", "32")
            .replace("A_FRAG", layout_text(tile_to(lit(A_K8), (16, 16), (16, 8))))
            .replace("B_FRAG", layout_text(tile_to(lit(B_K8), (16, 8), (8, 8))))
            .replace("D_LAYOUT", ACC))
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile")
    return err.value


# --------------------------------------------------------------------------
# On a GPU
# --------------------------------------------------------------------------


def run_gpu(counts, k, dtype, beta, trans_a=False, trans_b=False):
    from tilec.runtime import driver
    from tilec.runtime.module import CompiledModule

    if driver.device().compute_capability < (8, 0):
        pytest.skip("mma.sync m16n8k16 needs compute capability 8.0")
    enc_a, enc_b, _, _, a, b, c = operands(counts, k, dtype, trans_a, trans_b)
    r = compile_source(gemm_source(counts, k, dtype, beta, trans_a, trans_b), "gemm.tile")
    kernel = CompiledModule(r.ptx, r.meta, "sm_80").kernel()
    d = np.full(c.shape, np.nan, np.float32)
    kernel(enc_a, enc_b, c, d)
    want = a @ b + (c if beta == 1.0 else 0)
    np.testing.assert_allclose(d, want, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("counts, k", GRID)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_gpu_grid(counts, k, dtype, beta):
    run_gpu(counts, k, dtype, beta)


@pytest.mark.gpu
@pytest.mark.parametrize("trans_a, trans_b", [(True, False), (False, True), (True, True)])
def test_gpu_transposed_operands(trans_a, trans_b):
    run_gpu((2, 1, 2), 16, "f16", 1.0, trans_a, trans_b)

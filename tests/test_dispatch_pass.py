"""The dispatch pass: where it sits in the pipeline, what its output looks
like (ordinary IR that prints and parses back, located at the call), how
errors are located, and which conditions around a call count as leaving
threads out."""
from pathlib import Path

import numpy as np
import pytest

from ptx_sim import Kernel
from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options, PassInstrumentation
from tilec.pipeline import compile_source, pass_manager
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse
from tilec.passes.dispatch.build import difference

FRAG = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"


def dispatched(text, target="sm_90a"):
    return compile_source(text, "k.tile", target=target, options=Options(stop_after="dispatch")).module


def error(text, target="sm_90a"):
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile", target=target)
    return err.value


def test_pipeline_order():
    names = pass_manager().names
    assert names[-3:] == ["dispatch", "unroll", "emit-ptx"]
    assert names.index("plan-tma") < names.index("dispatch")


BLOCK_COPY = """
kernel k(A: f16[128, 32], B: f16[128, 32]):
    cta_id([1])
    tid = thread_id([64])
    i = 3
    Sm = alloc((32, 32), f16, scope="shared", layout=mma_shared_layout(f16, 2, (32, 32)))
    for k in range(4):
        cta.copy(Sm, A[k * 32 : k * 32 + 32, :])
        cuda.cta_sync()
        if k % 2 == 0:
            cta.copy(B[k * 32 : (k + 1) * 32, 0:32], Sm)
        else:
            copy(B[k * 32 + tid // 2, tid % 2 * 16 : tid % 2 * 16 + 16], Sm[tid // 2, tid % 2 * 16 : tid % 2 * 16 + 16])
        cuda.cta_sync()
"""


def test_lowered_ir_round_trips_and_is_located_at_the_call():
    m = dispatched(BLOCK_COPY)
    assert parse(print_module(m), "again.tile") == m
    calls = [n for n in visit.walk(m) if isinstance(n, ir.Call) and n.func == "copy_vec"]
    assert calls and {c.span.line for c in calls} == {8, 11, 13}


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("example, target", [
    ("hopper/hgemm_v7.tile", "sm_90a"),  # wgmma, cast, stmatrix, TMA
    ("hopper/flash_attn_fwd.tile", "sm_90a"),  # register-A wgmma, reduce, map, fill
    ("hopper/gemm_split_k.tile", "sm_90a"),
    ("gemm_mma_16x8x16.tile", "sm_80"),  # mma.sync
    ("softmax.tile", "sm_80"),  # reduce through shared memory, copies to registers
    ("rmsnorm.tile", "sm_80"),
    ("ampere/gemm_cp_async.tile", "sm_80"),
    ("gemm_async_tcgen05.tile", "sm_100a"),  # tcgen05
    ("hgemm_v4.tile", "sm_100a"),
])
def test_every_node_a_lowering_builds_is_located(example, target):
    """Dispatch keeps a node a lowering built at the call's span with all
    below it (`build.located`): that is sound only while lowerings build
    such nodes of located parts, which this checks of every node in the
    dispatched kernels that the program did not already have."""
    path = EXAMPLES / example
    seen = {}

    class Before(PassInstrumentation):
        def before_pass(self, p, module, ctx, position):
            if p.name == "dispatch":
                seen["ids"] = {id(n) for n in visit.walk(module)}
                seen["module"] = module  # kept alive: its ids are not reused

    m = compile_source(path.read_text(), str(path), target=target,
                       options=Options(stop_after="dispatch", instrumentations=(Before(),))).module
    built = [n for n in visit.walk(m) if id(n) not in seen["ids"]]
    assert len(built) > 100
    assert [n for n in built if n.span is None] == []


def test_fresh_names_avoid_the_kernel_s_names():
    m = dispatched(BLOCK_COPY)
    loops = [n.var for n in visit.walk(m) if isinstance(n, ir.For) and n.kind == "unroll"]
    assert loops and "i" not in loops and "k" not in loops and len(set(loops)) == len(loops)


def test_copies_in_loops_and_branches_with_run_time_starts():
    r = compile_source(BLOCK_COPY, "k.tile")
    a, b = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float16), np.full((128, 32), np.nan, np.float16)
    Kernel(r.ptx, "k").run({"A": a, "B": b})
    np.testing.assert_array_equal(b, a)


def test_extents_must_be_compile_time():
    err = error("""
kernel k(A: f16[64], n: i32):
    cta_id([1])
    tid = thread_id([32])
    Sm = alloc((64,), f16, scope="shared")
    cta.copy(Sm[0:n], A[0:n])
""")
    assert err.message == "the extent of dim 0 of region 'Sm[0:n]' must be a compile-time integer (the slice runs from '0' to 'n')"
    assert (err.span.line, err.span.col) == (6, 17)


@pytest.mark.parametrize(
    "stop, start, extent",
    [("k * 64 + 64", "k * 64", 64), ("(k + 1) * 16", "k * 16", 16), ("2 * k + 8", "k + k", 8), ("n", "0", None),
     ("k * k + 1", "k * k", 1), ("4 * (k // 2)", "k // 2", None)],
)
def test_extent_arithmetic(stop, start, extent):
    def e(text):
        return parse(f"const C = {text}\n", "c.tile").consts[0].value

    assert difference(e(stop), e(start)) == extent


def test_unknown_variant_is_located():
    err = error("""
kernel k(A: f16[64]):
    cta_id([1])
    tid = thread_id([32])
    Sm = alloc((64,), f16, scope="shared")
    cta.copy(Sm, A, dispatch="bulk")
""")
    assert err.message.startswith("unknown variant 'bulk' of 'copy' (known: ")
    assert (err.span.line, err.span.col) == (6, 5)


# --------------------------------------------------------------------------
# Conditions that leave threads out
# --------------------------------------------------------------------------

GUARDED = f"""
kernel k(A: f32[16, 8]):
    cta_id([1])
    wid = warp_id([2])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG})
    half = lane // 16
    CODE
"""


@pytest.mark.parametrize(
    "code, guard",
    [
        ("if half == 0:\n        warp.copy(A, D_f)", "half == 0"),
        ("if lane == 3:\n        pass\n    else:\n        warp.copy(A, D_f)", "not lane == 3"),
        ("for r in range(lane):\n        warp.copy(A, D_f)", "0 < lane"),
        ("while half < 1:\n        warp.copy(A, D_f)", "half < 1"),
    ],
)
def test_lane_dependent_conditions_leave_lanes_out(code, guard):
    err = error(GUARDED.replace("CODE", code))
    assert f"rejected by whole_scope: the copy is at warp scope but runs under '{guard}'" in err.message


def test_a_guard_s_names_take_every_assignment_s_stride():
    """The strides of the names a guard reads are found when a guard first
    reads them (`threads._Strides`): `x` and `y` are set together from the
    warp id, so `x` is the same across a warp; `y`, which the lane id is
    assigned to later, is not, though its first assignment was already
    followed for `x`."""
    text = GUARDED.replace("CODE", "y: i32 = 0\n    x, y = wid, wid\n    if x == 0:\n        warp.copy(A, D_f)\n"
                                   "    y = lane\n    if y == 0:\n        warp.copy(A, D_f)")
    err = error(text)
    assert err.span.line == 14
    assert "rejected by whole_scope: the copy is at warp scope but runs under 'y == 0'" in err.message


def test_warp_conditions_keep_whole_warps():
    text = GUARDED.replace("CODE", "if wid == 1:\n        warp.copy(A, D_f)")
    assert "st.global.v2.b32" in compile_source(text, "k.tile").ptx


def test_map_children_replaces_other_fields_in_the_same_rebuild():
    span = ir.Span("k.tile", 3, 1, 3, 9)
    leaf = ir.Name("x")
    located = visit.map_children(leaf, lambda n: n, span=span)
    assert (located, located.span) == (leaf, span)
    node = ir.Binary("+", ir.Name("a"), ir.Int(1))
    new = visit.map_children(node, lambda n: ir.Name("b") if n == ir.Name("a") else n, span=span)
    assert (new, new.span, new.rhs is node.rhs) == (ir.Binary("+", ir.Name("b"), ir.Int(1)), span, True)
    assert visit.map_children(node, lambda n: n) is node  # nothing changed, nothing asked: the same node


def test_located_elements_place_what_located_places():
    """`build.located_elements` builds, for each index, the element
    `located(r.element(index), span)` would (spans included: a start the
    program wrote keeps its own), each coordinate built once for the
    elements that share its index expression."""
    from tilec.compiler.region import Region
    from tilec.compiler.symbols import Buffer
    from tilec.passes.dispatch.build import located, located_elements

    at, call = ir.Span("k.tile", 2, 5, 2, 9), ir.Span("k.tile", 7, 1, 7, 30)
    k = ir.Name("k", span=at)
    expr = ir.Index(ir.Name("W", span=at), (k, ir.Slice(ir.Int(64), ir.Int(128)), ir.Slice(None, None)), span=at)
    r = Region.read(expr, Buffer("W", "f32", (4, 128, 64), "global"))
    lane = ir.Name("lane")
    rows = [ir.Binary("//", lane, ir.Int(4)), ir.Binary("+", ir.Int(8), ir.Binary("//", lane, ir.Int(4)))]
    cols = [ir.Binary("+", ir.Int(c), ir.Binary("*", ir.Binary("%", lane, ir.Int(4)), ir.Int(2))) for c in (0, 1, 8)]
    element = located_elements(r, call)
    built = [element((row, col)) for row in rows for col in cols]
    want = [located(r.element((row, col)), call) for row in rows for col in cols]
    assert [[(n, n.span) for n in visit.walk(e)] for e in built] == [[(n, n.span) for n in visit.walk(e)] for e in want]
    assert built[0].indices[0].span is at  # the program's start, as written
    assert built[0].indices[1] is built[1].indices[1]  # one coordinate for the row's elements
    broadcast = located_elements(r, call, dims=(2,))(cols[:1])  # moves along the last dim only
    assert [(n, n.span) for n in visit.walk(broadcast)] == [
        (n, n.span) for n in visit.walk(located(ir.Index(ir.Name("W"), (k, ir.Int(64), cols[0])), call))]


def test_register_elements_are_shared_within_a_kernel_and_forgotten_after():
    """The register elements lowerings name are built once per span of a
    kernel (hgemm_v7's epilogue casts, one inlined helper's, name the same
    f16 registers: one node each) and none is kept after the pass."""
    from tilec.passes.dispatch import build

    path = EXAMPLES / "hopper/hgemm_v7.tile"
    m = compile_source(path.read_text(), str(path), options=Options(stop_after="dispatch")).module
    casts = [n for n in visit.walk(m) if isinstance(n, ir.Call) and n.func == "ptx.cvt.f16x2.f32"]
    firsts = {(n.args[0], n.span): [] for n in casts}
    for n in casts:
        firsts[(n.args[0], n.span)].append(n.args[0])
    assert len(casts) > len(firsts) and all(all(e is es[0] for e in es) for es in firsts.values())
    assert build._BUILT == []

"""The front passes on small programs: expand-inline, fold-constants,
infer-scope, plan-smem and unroll.  Each test compares the pass's output with
the program an author would have written by hand (parsed, so spans and
formatting do not matter)."""
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from tilec.compiler import ir, targets
from tilec.compiler.visit import walk
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import PassContext
from tilec.grammar.parser import parse
from tilec.passes.expand_inline import ExpandInline
from tilec.compiler.fold import Copies, fold_expr
from tilec.passes.fold_constants import FoldConstants
from tilec.passes.infer_scope import InferScope
from tilec.passes.plan_smem import PlanSmem
from tilec.passes.unroll import Unroll


def src(text):
    return textwrap.dedent(text).strip() + "\n"


def run(text, *passes, defines=None, target="sm_90a"):
    text = src(text)
    ctx = PassContext(targets.target(target), "t.tile", text, dict(defines or {}))
    module = parse(text, "t.tile")
    for p in passes:
        module = p.apply(module, ctx)
    return module, ctx


def body(module):
    return module.kernels[0].body


def body_of(text):
    return body(parse(src(text), "expected.tile"))


def error_of(text, *passes, **kw):
    with pytest.raises(TilecError) as info:
        run(text, *passes, **kw)
    return info.value


EXPAND = (ExpandInline(),)
FOLD = (ExpandInline(), FoldConstants())


# --------------------------------------------------------------------------
# expand-inline
# --------------------------------------------------------------------------


def test_consts_and_defines_are_substituted():
    m, _ = run(
        """
        const M = 128
        const N = M * 2
        kernel k(A: f16[M, N]):
            bx = cta_id([N // 64])
        """,
        *EXPAND,
        defines={"M": "0x40"},
    )
    k = m.kernels[0]
    assert k.params[0].shape == (ir.Int(64), ir.Binary("*", ir.Int(64), ir.Int(2)))
    assert [c.value for c in m.consts] == [ir.Int(64), ir.Binary("*", ir.Int(64), ir.Int(2))]
    assert body(m) == body_of(
        """
        kernel k(A: f16[1, 1]):
            bx = cta_id([64 * 2 // 64])
        """
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        ("-3", ir.Int(-3)),
        ("0x10", ir.Int(16)),
        ("2.5", ir.Float(2.5)),
        ("1e3", ir.Float(1000.0)),
        ("True", ir.Bool(True)),
        ("bf16", ir.DTypeLit("bf16")),
        ("SWIZZLE_64B_ATOM", ir.Name("SWIZZLE_64B_ATOM")),
        (8192, ir.Int(8192)),
    ],
)
def test_define_values(value, expected):
    m, _ = run("const X = 1\n", *EXPAND, defines={"X": value})
    assert m.consts[0].value == expected


def test_define_of_an_unknown_const_is_an_error():
    err = error_of("const M = 1\n", *EXPAND, defines={"MM": "2"})
    assert "no const named 'MM'" in err.message and "M" in err.message


def test_define_with_a_malformed_value_is_an_error():
    err = error_of("const M = 1\n", *EXPAND, defines={"M": "1+2"})
    assert err.message == "-D M=1+2: expected an integer, a float or a name"


def test_meta_is_substituted_at_each_use_and_scoped_to_its_block():
    m, _ = run(
        """
        kernel k(A: f16[8]):
            bx = cta_id([2])
            meta base = bx * 4
            for i in range(2):
                meta off = base + i
                A[off] = A[base]
            x = off
        """,
        *EXPAND,
    )
    assert body(m) == body_of(
        """
        kernel k(A: f16[8]):
            bx = cta_id([2])
            for i in range(2):
                A[bx * 4 + i] = A[bx * 4]
            x = off
        """
    )


def test_inline_helpers_see_the_callers_names_and_take_keywords_and_splats():
    m, _ = run(
        """
        inline def issue(stage, accum):
            meta cfg = {"dispatch": "tcgen05", "cta_group": 1}
            gemm_async(acc[:, :], As[stage, :, :], Bs[stage, :, :], accum=accum, **cfg)

        kernel k(A: f16[8]):
            acc = alloc_local((8,), f32)
            for kk in range(4):
                issue(kk % 2, accum=kk != 0)
        """,
        *EXPAND,
    )
    assert body(m) == body_of(
        """
        kernel k(A: f16[8]):
            acc = alloc_local((8,), f32)
            for kk in range(4):
                gemm_async(acc[:, :], As[kk % 2, :, :], Bs[kk % 2, :, :], accum=kk != 0, dispatch="tcgen05", cta_group=1)
        """
    )
    assert m.helpers == ()


def test_helper_locals_are_renamed_when_they_would_capture_the_callers_names():
    m, _ = run(
        """
        kernel k(A: f32[64]):
            t = thread_id([32])
            for s in range(2):
                inline def fill_row(base):
                    for s in unroll(2):
                        A[base + s] = 0.0
                fill_row(s * 2)
        """,
        *EXPAND,
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[64]):
            t = thread_id([32])
            for s in range(2):
                for s_1 in unroll(2):
                    A[s * 2 + s_1] = 0.0
        """
    )


def test_each_expansion_gets_its_own_locals():
    m, _ = run(
        """
        inline def bump(x):
            tmp: i32 = x
            tmp += 1

        kernel k(A: f32[4]):
            bump(1)
            bump(2)
            tmp = 5
        """,
        *EXPAND,
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[4]):
            tmp_1: i32 = 1
            tmp_1 += 1
            tmp_2: i32 = 2
            tmp_2 += 1
            tmp = 5
        """
    )


@pytest.mark.parametrize(
    "call, message",
    [
        ("h(1, 2)", "inline helper 'h' takes 1 argument but 2 were given"),
        ("h()", "inline helper 'h' is missing argument 'x'"),
        ("h(y=1)", "inline helper 'h' has no parameter 'y'"),
        ("h(1, x=2)", "argument 'x' of inline helper 'h' is given twice"),
        ("a = h(1)", "inline helper 'h' returns no value (it has no 'return expr')"),
    ],
)
def test_helper_call_errors_are_located_at_the_call(call, message):
    err = error_of(
        f"""
        inline def h(x):
            pass
        kernel k(A: f32[4]):
            {call}
        """,
        *EXPAND,
    )
    assert err.message == message
    assert err.span.line == 4


def test_recursive_helpers_are_an_error_naming_the_chain():
    err = error_of(
        """
        inline def a():
            b()
        inline def b():
            a()
        kernel k(A: f32[4]):
            a()
        """,
        *EXPAND,
    )
    assert err.message == "inline helper 'a' calls itself (a -> b -> a)"
    assert err.span.line == 4


@pytest.mark.parametrize(
    "stmt, message",
    [
        ("N = 3", "'N' is a const and cannot be assigned"),
        ("meta m = 1\n    m = 2", "'m' is a meta value and cannot be assigned"),
        ("for N in range(2):\n        pass", "'N' is a const and cannot be assigned"),
    ],
)
def test_consts_and_metas_cannot_be_rebound(stmt, message):
    err = error_of(f"const N = 4\nkernel k(A: f32[4]):\n    {stmt}\n", *EXPAND)
    assert err.message == message


def test_splat_of_a_non_dict_is_an_error():
    err = error_of(
        """
        kernel k(A: f32[4]):
            meta cfg = 3
            fill(A[:], 0.0, **cfg)
        """,
        *EXPAND,
    )
    assert "'**' needs a dict" in err.message


# --------------------------------------------------------------------------
# fold-constants
# --------------------------------------------------------------------------


def folded(text):
    return fold_expr(parse(f"const X = {text}\n", "e").consts[0].value)


@pytest.mark.parametrize(
    "text, value",
    [
        ("7 // 2", ir.Int(3)),
        ("-7 // 2", ir.Int(-4)),
        ("-7 % 3", ir.Int(2)),
        ("7 / 2", ir.Float(3.5)),
        ("1 << 10 | 3", ir.Int(1027)),
        ("~0 ^ 5", ir.Int(-6)),
        ("2 * 3.0", ir.Float(6.0)),
        ("3 < 4 and 2 != 2", ir.Bool(False)),
        ("not (1 == 1)", ir.Bool(False)),
        ('"tma" == "tma"', ir.Bool(True)),
        ("min(4, 2, 8) + max(1, 5)", ir.Int(7)),
        ("(4, 5, 6)[1] * (1, 2)[-1]", ir.Int(10)),
        ("10 if 2 > 1 else 20", ir.Int(10)),
        ("SWIZZLE_128B_ATOM + SWIZZLE_NONE", ir.Int(3)),
    ],
)
def test_constant_arithmetic_folds_with_python_semantics(text, value):
    assert folded(text) == value


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x + 1 * 2", "x + 2"),
        ("True and x", "x"),
        ("False and x", "False"),
        ("x and False", "x and False"),
        ("False or x", "x"),
        ("a if x else 2 + 2", "a if x else 4"),
        ("min(x, 3 + 1)", "min(x, 4)"),
    ],
)
def test_runtime_values_stay_and_only_their_constant_parts_fold(text, expected):
    assert folded(text) == parse(f"const X = {expected}\n", "e").consts[0].value


@given(st.integers(-1000, 1000), st.integers(-50, 50), st.sampled_from(["+", "-", "*", "//", "%"]))
@settings(max_examples=60, deadline=None)
def test_integer_folding_agrees_with_python(a, b, op):
    if op in ("//", "%") and b == 0:
        return
    expr = ir.Binary(op, ir.Int(a), ir.Int(b))
    assert fold_expr(expr) == ir.Int(eval(f"({a}) {op} ({b})"))


def test_division_by_zero_is_located():
    with pytest.raises(TilecError) as info:
        folded("1 + 4 // (2 - 2)")
    assert info.value.message == "division by zero in a constant expression"
    assert info.value.span.col == 15


def test_tuple_index_out_of_range():
    with pytest.raises(TilecError, match="index 3 is out of range for a tuple of 2 items"):
        folded("(1, 2)[3]")


def test_layout_constructors_fold_to_layout_literals_and_shape_only_layouts_stay():
    m, _ = run(
        """
        const L = mma_shared_layout(f16, SWIZZLE_128B_ATOM, (8, 256))
        const FRAG = S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]
        const T = tile_to(FRAG, (16, 16), (16, 8))
        const G = S[8, 256]
        """,
        *FOLD,
    )
    consts = {c.name: c.value for c in m.consts}
    expect = parse(
        src(
            """
            const L = SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)]
            const G = S[8, 256]
            """
        ),
        "e",
    ).consts
    assert consts["L"] == expect[0].value
    assert consts["G"] == expect[1].value
    assert isinstance(consts["T"], ir.LayoutLit) and consts["T"] != consts["FRAG"]


def test_a_malformed_layout_constructor_is_located():
    err = error_of("const L = mma_shared_layout(f16, 3, (8, 100))\n", *FOLD)
    assert "multiple of" in err.message and err.span.line == 1


def test_constant_ifs_are_resolved():
    m, _ = run(
        """
        const DEBUG = 0
        kernel k(A: f32[4]):
            if DEBUG == 1:
                A[0] = 1.0
            elif 2 > 1:
                A[1] = 2.0
            else:
                A[2] = 3.0
            for i in range(4):
                if DEBUG > 0:
                    A[i] = 0.0
            while 1 < 0:
                A[3] = 4.0
        """,
        *FOLD,
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[4]):
            A[1] = 2.0
            for i in range(4):
                pass
        """
    )


# --------------------------------------------------------------------------
# infer-scope
# --------------------------------------------------------------------------

_LAUNCH = """
kernel k(G: f16[128, 64]):
    bx = cta_id([1])
    wgi = warpgroup_id([2])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    sm = alloc((128, 64), f16, scope="shared")
    regs = alloc_local((8,), f16)
    frag = alloc_local((16, 8), f32, layout=S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)])
"""


DECIDED = """
    const HAS_BIAS = False
    inline def add_bias(x):
        A[0] = x
    kernel k(A: f32[4]):
        if HAS_BIAS:
            add_bias(1.0, 2.0)
            A[0] = undefined_name * (N // 0)
            assert_const(False, "never checked")
        else:
            add_bias(3.0)
"""


def test_a_branch_decided_at_compile_time_is_kept_as_written_and_dropped_unchecked():
    m, _ = run(DECIDED, *EXPAND)
    (s,) = body(m)
    assert s.cond == ir.Bool(False)  # the decided condition (spans do not compare)
    assert s.then == parse(src(DECIDED), "t.tile").kernels[0].body[0].then  # as written: nothing expanded
    assert s.orelse == body_of(
        """
        kernel k(A: f32[4]):
            A[0] = 3.0
        """
    )
    m, _ = run(DECIDED, *FOLD)
    assert body(m) == body_of(
        """
        kernel k(A: f32[4]):
            A[0] = 3.0
        """
    )


def test_a_branch_taken_at_compile_time_or_at_run_time_is_checked():
    assert "takes 1 argument but 2 were given" in str(error_of(DECIDED, *EXPAND, defines={"HAS_BIAS": "True"}))
    runtime = DECIDED.replace("if HAS_BIAS:", "if A[1] > 0.0:")
    assert "takes 1 argument but 2 were given" in str(error_of(runtime, *EXPAND))


def scoped(stmts):
    text = _LAUNCH + textwrap.indent(src(stmts), "    ")
    m, _ = run(text, ExpandInline(), FoldConstants(), InferScope())
    return list(body(m)[7:])


def scope_of(stmts):
    """The scope prefix of every tile primitive in `stmts`, in order."""
    out = []
    for s in scoped(stmts):
        for node in walk(s):
            if isinstance(node, ir.Call) and "." in node.func and node.func.split(".")[0] in (
                "cta", "wg", "warp", "thread"
            ):
                out.append(node.func.split(".")[0])
    return out


@pytest.mark.parametrize(
    "guard, scope",
    [
        ("wid == 0 and lane == 0", "thread"),
        ("lane == 0 and wid == 1", "thread"),
        ("wid * 32 + lane == 0", "thread"),
        ("0 == lane", "thread"),
        ("ptx.elect_sync()", "thread"),
        ("wid == 0", "warp"),
        ("wgi == 1", "wg"),
        ("bx == 0", "cta"),
        ("wid < 1", "cta"),
        ("wid == 0 or lane == 0", "cta"),
        ("lane // 4 == 0", "cta"),
    ],
)
def test_guards_set_the_scope(guard, scope):
    assert scope_of(f"if {guard}:\n    copy(sm[:, :], G[:, :])\n") == [scope]


def test_nested_guards_combine_and_else_branches_do_not_inherit():
    stmts = """
    if wgi == 0:
        copy(sm[:, :], G[:, :])
        if wid == 2:
            copy(sm[:, :], G[:, :])
            if lane == 0:
                fill(sm[:, :], 0.0)
        else:
            copy(sm[:, :], G[:, :])
    copy(sm[:, :], G[:, :])
    """
    assert scope_of(stmts) == ["wg", "warp", "thread", "wg", "cta"]


def test_operands_set_the_scope_when_unguarded():
    stmts = """
    cast(regs[:], regs[:])
    copy(sm[wid * 32 + lane, 0:8], regs[:])
    fill(frag[:, :], 0.0)
    if wid == 0:
        fill(regs[:], 0.0)
    """
    assert scope_of(stmts) == ["thread", "thread", "warp", "thread"]


def test_explicit_prefixes_are_kept():
    stmts = """
    if lane == 0:
        wg.copy(sm[:, :], G[:, :])
    cta.fill(sm[:, :], 0.0)
    """
    assert scope_of(stmts) == ["wg", "cta"]


# --------------------------------------------------------------------------
# plan-smem
# --------------------------------------------------------------------------

_POOL = """
const BLK = 64
kernel k(A: f16[128, 64]):
    bx = cta_id([1])
    t = thread_id([128])
    pool = smem_pool()
    tmem_addr = pool.alloc((1,), u32)
    bar = pool.alloc((2,), u64, align=8)
    {move}
    As = pool.alloc((2, BLK, 64), f16, layout=tma_shared_layout(f16, SWIZZLE_128B_ATOM, (2, BLK, 64)))
    Cs = pool.alloc((BLK, 64), f32)
    pool.commit()
    if t == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
"""


def test_pool_becomes_an_arena_with_views_at_fixed_offsets():
    m, ctx = run(_POOL.format(move="pool.move_base_to(1024)"), ExpandInline(), FoldConstants(), PlanSmem())
    layout = parse("const L = tma_shared_layout(f16, 3, (2, 64, 64))\n", "x")
    layout = FoldConstants().apply(layout, None).consts[0].value
    stmts = body(m)
    assert stmts[2] == body_of(
        """
        kernel k(A: f16[1]):
            pool = alloc((33792,), u8, scope="shared.dyn", align=1024)
        """
    )[0]
    views = {s.targets[0].id: s.value for s in stmts[3:7]}
    assert views["tmem_addr"] == parse(
        'const X = decl_buffer((1,), u32, data=pool, elem_offset=0)\n', "x"
    ).consts[0].value
    assert views["bar"].kwargs[1].value == ir.Int(1)  # 8 bytes in: its align=8
    assert views["As"].kwargs[1].value == ir.Int(512)  # 1024 bytes
    assert views["As"].kwargs[2].value == layout
    assert views["Cs"].kwargs[1].value == ir.Int((1024 + 16384) // 4)
    assert isinstance(stmts[7], ir.If)
    assert ctx.artifacts["dynamic_smem"] == {"k": 1024 + 16384 + 16384}


def test_swizzled_buffers_are_aligned_to_the_swizzle_period():
    m, ctx = run(_POOL.format(move=""), ExpandInline(), FoldConstants(), PlanSmem())
    views = {s.targets[0].id: s.value for s in body(m)[3:7]}
    assert views["As"].kwargs[1].value == ir.Int(512)  # raised from the default 16 to 1024 bytes


def test_moving_the_pool_base_backwards_is_an_error():
    text = _POOL.format(move="pool.move_base_to(8)")
    with pytest.raises(TilecError, match="move back"):
        run(text, ExpandInline(), FoldConstants(), PlanSmem())


# --------------------------------------------------------------------------
# unroll
# --------------------------------------------------------------------------


def test_unroll_expands_folds_and_handles_nesting():
    m, _ = run(
        """
        kernel k(A: f32[16]):
            t = thread_id([32])
            for i in unroll(2):
                for j in unroll(i, 3):
                    A[i * 4 + j] = 0.0
                    if j == 2:
                        A[15] = 1.0
            for r in range(2):
                for s in unroll(1, 6, 3):
                    A[r + s] = 2.0
        """,
        Unroll(),
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[16]):
            t = thread_id([32])
            A[0] = 0.0
            A[1] = 0.0
            A[2] = 0.0
            A[15] = 1.0
            A[5] = 0.0
            A[6] = 0.0
            A[15] = 1.0
            for r in range(2):
                A[r + 1] = 2.0
                A[r + 4] = 2.0
        """
    )


def test_unroll_nested_copies_take_the_enclosing_copys_names():
    """An inner loop's copies see the outer copy's index and the names it
    bound before the loop (its bounds too); the outer copy's bindings are
    renamed before the inner loop's, in each outer copy."""
    m, _ = run(
        """
        kernel k(A: f32[16], B: f32[64]):
            t = thread_id([32])
            for i in unroll(2):
                x = A[i] * 2.0
                for j in unroll(i, 3):
                    y = x + B[t * 4 + j]
                    A[4 * i + j] = y + B[t + 6]
                    if i == j:
                        A[15] = y
                z = x + 1.0
                A[8 + i] = z
        """,
        Unroll(),
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[16], B: f32[64]):
            t = thread_id([32])
            x_1 = A[0] * 2.0
            y_1 = x_1 + B[t * 4 + 0]
            A[0] = y_1 + B[t + 6]
            A[15] = y_1
            y_2 = x_1 + B[t * 4 + 1]
            A[1] = y_2 + B[t + 6]
            y_3 = x_1 + B[t * 4 + 2]
            A[2] = y_3 + B[t + 6]
            z_1 = x_1 + 1.0
            A[8] = z_1
            x_2 = A[1] * 2.0
            y_4 = x_2 + B[t * 4 + 1]
            A[5] = y_4 + B[t + 6]
            A[15] = y_4
            y_5 = x_2 + B[t * 4 + 2]
            A[6] = y_5 + B[t + 6]
            z_2 = x_2 + 1.0
            A[9] = z_2
        """
    )


def test_unroll_copies_share_what_does_not_mention_the_loop():
    """A subtree that mentions no replaced name folds alike in every copy,
    and the copies hold one object of it (emit-ptx types it once)."""
    m, _ = run(
        """
        kernel k(A: f32[16], B: f32[64]):
            t = thread_id([32])
            for i in unroll(3):
                A[i] = B[t * 4 + 2 * 3]
        """,
        Unroll(),
    )
    assert body(m) == body_of(
        """
        kernel k(A: f32[16], B: f32[64]):
            t = thread_id([32])
            A[0] = B[t * 4 + 6]
            A[1] = B[t * 4 + 6]
            A[2] = B[t * 4 + 6]
        """
    )
    loads = [s.value for s in body(m)[1:]]
    assert loads[0] is loads[1] is loads[2]


def test_copies_replace_a_name_first_replaced_after_its_subtree_was_shared():
    x_plus_1 = parse(src("kernel k():\n    y = x + 1\n"), "t.tile").kernels[0].body
    copies = Copies()
    assert copies.block(x_plus_1, {"i": ir.Int(0)}) == x_plus_1  # `x + 1` shared: no `x` replaced yet
    (again,) = copies.block(x_plus_1, {"i": ir.Int(1), "x": ir.Int(5)})
    assert again.value == ir.Int(6)


def test_copies_raise_a_folding_error_in_every_copy():
    stmts = parse(src("kernel k():\n    y = 1 // 0 + i\n"), "t.tile").kernels[0].body
    copies = Copies()
    for i in range(2):
        with pytest.raises(TilecError, match="division by zero"):
            copies.block(stmts, {"i": ir.Int(i)})


@pytest.mark.parametrize(
    "loop, message",
    [
        ("for i in unroll(t):\n        pass", "the stop of unroll loop 'i' must be a compile-time integer"),
        ("for i in unroll(0, 4, 0):\n        pass", "unroll loop 'i' has step 0"),
        ("for i in unroll(4):\n        i = 2", "cannot assign to the unroll variable 'i'"),
    ],
)
def test_unroll_errors(loop, message):
    err = error_of(f"kernel k(A: f32[4]):\n    t = thread_id([32])\n    {loop}\n", Unroll())
    assert err.message == message

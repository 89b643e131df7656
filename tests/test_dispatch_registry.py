"""The dispatch registry, exercised with toy variants in a private Registry."""
import subprocess
import sys
from pathlib import Path

import pytest

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.targets import TARGETS
from tilec.passes.dispatch import (
    Decline,
    DispatchContext,
    NameGen,
    Registry,
    TileOp,
    predicate,
    select,
)

ROOT = Path(__file__).resolve().parent.parent
SPAN = ir.Span("k.tile", 12, 5, 12, 30)
ALL = ("ampere", "hopper", "blackwell")


def call(func="warp.gemm", *args, **kwargs):
    kws = tuple(ir.Keyword(k, v) for k, v in kwargs.items())
    args = args or (ir.Name("D"), ir.Name("A"), ir.Name("B"), ir.Name("C"))
    return ir.Call(func, args, kws, span=SPAN)


def op(func="warp.gemm", **kwargs):
    return TileOp.from_call(call(func, **kwargs))


def ctx(target="sm_90a"):
    return DispatchContext(TARGETS[target])


def stmt(tag):
    return ir.ExprStmt(ir.Call("ptx.mma", (ir.Str(tag),)))


def lowering(tag, log=None):
    def lower(o, c):
        if log is not None:
            log.append(tag)
        return [stmt(tag)]

    return lower


# --------------------------------------------------------------------------
# TileOp
# --------------------------------------------------------------------------


def test_tile_op_view_of_a_call():
    c = ir.Call(
        "warp.gemm",
        (ir.Name("D"), ir.Name("A")),
        (
            ir.Keyword("transpose_A", ir.Bool(True)),
            ir.Keyword(None, ir.DictExpr(("dispatch", "alpha"), (ir.Str("mma_sync"), ir.Float(2.0)))),
        ),
        span=SPAN,
    )
    o = TileOp.from_call(c)
    assert (o.name, o.scope, o.dispatch, o.span, o.call) == ("gemm", "warp", "mma_sync", SPAN, c)
    assert o.args == (ir.Name("D"), ir.Name("A"))
    assert dict(o.kwargs) == {"transpose_A": ir.Bool(True), "alpha": ir.Float(2.0)}
    unscoped = op("copy")
    assert (unscoped.name, unscoped.scope, unscoped.dispatch) == ("copy", None, None)


@pytest.mark.parametrize(
    "c, message",
    [
        (
            ir.Call("gemm", (), (ir.Keyword("alpha", ir.Int(1)), ir.Keyword(None, ir.DictExpr(("alpha",), (ir.Int(2),)))), span=SPAN),
            "gemm() got keyword 'alpha' twice",
        ),
        (ir.Call("gemm", (), (ir.Keyword(None, ir.Name("opts")),), span=SPAN), "a ** argument must be a {...} dict literal"),
        (ir.Call("gemm", (), (ir.Keyword("dispatch", ir.Name("v")),), span=SPAN), "dispatch= must be a string literal"),
    ],
)
def test_tile_op_rejects(c, message):
    with pytest.raises(TilecError) as err:
        TileOp.from_call(c)
    assert message in err.value.message
    assert err.value.span == SPAN


def test_tile_op_of_a_non_primitive_is_a_bug():
    with pytest.raises(ValueError):
        TileOp.from_call(ir.Call("ptx.mma", ()))
    with pytest.raises(ValueError):
        TileOp.from_call(ir.Call("lane.copy", ()))


# --------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------


def test_highest_priority_that_applies_wins_and_ties_keep_registration_order():
    reg = Registry()
    reg.register("gemm", families=ALL, name="low", priority=0)(lowering("low"))
    reg.register("gemm", families=ALL, name="high_a", priority=10)(lowering("high_a"))
    reg.register("gemm", families=ALL, name="high_b", priority=10)(lowering("high_b"))
    assert [v.name for v in reg.variants("gemm")] == ["high_a", "high_b", "low"]
    sel = reg.select(op(), ctx())
    assert sel.variant.name == "high_a"
    assert sel.stmts == (stmt("high_a"),)


def test_failed_predicate_and_decline_fall_through():
    reg = Registry()
    log = []

    @reg.register("gemm", families=ALL, name="declines", priority=20)
    def declines(o, c):
        log.append("declines")
        raise Decline("tile too small")

    reg.register(
        "gemm", families=ALL, name="needs_cta", priority=30, when=[predicate("cta_scope", lambda o, c: o.scope == "cta")]
    )(lowering("needs_cta", log))
    reg.register("gemm", families=ALL, name="fallback", priority=0)(lowering("fallback", log))
    assert reg.select(op(), ctx()).variant.name == "fallback"
    assert log == ["declines", "fallback"]  # a rejected variant's lowering never runs


def test_predicates_run_in_order_and_stop_at_the_first_failure():
    reg = Registry()
    seen = []

    def pred(name, ok):
        def fn(o, c):
            seen.append(name)
            return ok, f"{name} failed"

        return predicate(name, fn)

    reg.register("copy", families=ALL, name="v", when=[pred("p1", True), pred("p2", False), pred("p3", True)])(
        lowering("v")
    )
    with pytest.raises(TilecError) as err:
        reg.select(op("copy"), ctx())
    assert seen == ["p1", "p2"]
    assert "rejected by p2: p2 failed" in err.value.message


def test_variants_of_other_families_are_not_tried():
    reg = Registry()
    log = []
    reg.register("gemm_async", families=("blackwell",), name="tcgen05", priority=10)(lowering("tcgen05", log))
    reg.register("gemm_async", families=("hopper",), name="wgmma", priority=5)(lowering("wgmma", log))
    assert reg.select(op("gemm_async"), ctx("sm_90a")).variant.name == "wgmma"
    assert reg.select(op("gemm_async"), ctx("sm_100a")).variant.name == "tcgen05"
    assert log == ["wgmma", "tcgen05"]


def test_forced_dispatch_skips_higher_priorities():
    reg = Registry()
    reg.register("gemm", families=ALL, name="high", priority=10)(lowering("high"))
    reg.register("gemm", families=ALL, name="low", priority=0)(lowering("low"))
    sel = reg.select(op(dispatch=ir.Str("low")), ctx())
    assert sel.variant.name == "low" and sel.stmts == (stmt("low"),)


def test_forced_dispatch_that_is_rejected_reports_only_that_variant():
    reg = Registry()
    reg.register("gemm", families=ALL, name="ok", priority=10)(lowering("ok"))
    reg.register(
        "gemm", families=ALL, name="picky", when=[predicate("never", lambda o, c: (False, "it never applies"))]
    )(lowering("picky"))
    with pytest.raises(TilecError) as err:
        reg.select(op(dispatch=ir.Str("picky")), ctx())
    assert err.value.message == (
        "variant 'picky' of 'gemm' does not accept this call on sm_90a\n"
        "  variant  priority  result\n"
        "  picky    0         rejected by never: it never applies"
    )


def test_unknown_forced_variant_lists_the_known_ones():
    reg = Registry()
    reg.register("gemm", families=ALL, name="mma_sync")(lowering("a"))
    reg.register("gemm", families=("hopper",), name="wgmma")(lowering("b"))
    with pytest.raises(TilecError) as err:
        reg.select(op(dispatch=ir.Str("tcgen05")), ctx())
    assert err.value.message == "unknown variant 'tcgen05' of 'gemm' (known: mma_sync, wgmma)"
    assert err.value.span == SPAN


def test_forced_variant_of_another_family():
    reg = Registry()
    reg.register("gemm_async", families=("blackwell",), name="tcgen05")(lowering("a"))
    with pytest.raises(TilecError) as err:
        reg.select(op("gemm_async", dispatch=ir.Str("tcgen05")), ctx("sm_90a"))
    assert err.value.message == "variant 'tcgen05' of 'gemm_async' is not available on sm_90a (it supports blackwell)"


def test_no_match_lists_every_variant_with_its_reason():
    reg = Registry()
    reg.register(
        "gemm",
        families=ALL,
        name="mma_sync",
        priority=10,
        when=[
            predicate("warp_scope", lambda o, c: True),
            predicate(
                "operands_in_registers",
                lambda o, c: (False, "gemm mma requires A in register (local) scope, got shared"),
            ),
        ],
    )(lowering("mma_sync"))

    @reg.register("gemm", families=("hopper",), name="wgmma_rs", priority=5)
    def wgmma_rs(o, c):
        raise Decline("N=12 is not a multiple of 8")

    reg.register("gemm", families=("blackwell",), name="tcgen05", priority=20)(lowering("tcgen05"))
    reg.register("gemm", families=ALL, name="scalar", when=[predicate("small", lambda o, c: False)])(lowering("s"))
    with pytest.raises(TilecError) as err:
        reg.select(op(), ctx("sm_90a"))
    assert err.value.span == SPAN
    assert str(err.value) == (
        "k.tile:12:5: error: no variant of 'gemm' accepts this call on sm_90a\n"
        "  variant   priority  result\n"
        "  tcgen05   20        not available on hopper (supports blackwell)\n"
        "  mma_sync  10        rejected by operands_in_registers: gemm mma requires A in register (local) scope, got shared\n"
        "  wgmma_rs  5         declined: N=12 is not a multiple of 8\n"
        "  scalar    0         rejected by small"
    )


def test_no_variant_registered():
    with pytest.raises(TilecError) as err:
        Registry().select(op("fill"), ctx())
    assert err.value.message == "no variant of 'fill' is registered"


def test_user_errors_inside_a_lowering_propagate():
    reg = Registry()

    @reg.register("cast", families=ALL, name="v")
    def v(o, c):
        raise TilecError("cast from f32 to e2m1 needs an even element count", o.span)

    reg.register("cast", families=ALL, name="w", priority=-1)(lowering("w"))
    with pytest.raises(TilecError, match="even element count"):
        reg.select(op("thread.cast"), ctx())


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda o, c: "yes", "returned 'yes'"),
        (lambda o, c: (True, 3), r"returned \(True, 3\)"),
    ],
)
def test_malformed_predicate_results_are_bugs(fn, message):
    reg = Registry()
    reg.register("fill", families=ALL, name="v", when=[predicate("p", fn)])(lowering("v"))
    with pytest.raises(TypeError, match=message):
        reg.select(op("fill"), ctx())


def test_a_lowering_must_return_statements():
    reg = Registry()
    reg.register("fill", families=ALL, name="v")(lambda o, c: ir.Int(0))
    with pytest.raises(TypeError, match="not a list of statements"):
        reg.select(op("fill"), ctx())


@pytest.mark.parametrize(
    "op_name, kw, message",
    [
        ("matmul", {"families": ALL, "name": "v"}, "not a tile primitive"),
        ("gemm", {"families": "hopper", "name": "v"}, "families must be"),
        ("gemm", {"families": (), "name": "v"}, "families must be"),
        ("gemm", {"families": ("volta",), "name": "v"}, "families must be"),
        ("gemm", {"families": ALL, "name": ""}, "non-empty word"),
    ],
)
def test_registration_errors(op_name, kw, message):
    with pytest.raises(ValueError, match=message):
        Registry().register(op_name, **kw)


def test_duplicate_registration_and_bad_predicates():
    reg = Registry()
    reg.register("gemm", families=ALL, name="v")(lowering("v"))
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("gemm", families=ALL, name="v")
    reg.register("copy", families=ALL, name="v")(lowering("v"))  # the same name under another op is fine
    with pytest.raises(TypeError, match="predicate"):
        reg.register("fill", families=ALL, name="v", when=[lambda o, c: True])


def test_global_select_reports_an_unknown_forced_variant():
    with pytest.raises(TilecError, match="unknown variant 'no_such_variant' of 'fill'"):
        select(op("fill", dispatch=ir.Str("no_such_variant")), ctx())


# --------------------------------------------------------------------------
# fresh names
# --------------------------------------------------------------------------


def test_fresh_names_avoid_the_kernel_and_each_other():
    names = NameGen({"desc", "desc_1", "i"})
    assert [names.fresh("desc"), names.fresh("desc"), names.fresh("k"), names.fresh("k")] == [
        "desc_2",
        "desc_3",
        "k",
        "k_1",
    ]
    c = DispatchContext(TARGETS["sm_100a"], symbols="opaque", names=NameGen({"tmp"}))
    assert (c.fresh("tmp"), c.symbols) == ("tmp_1", "opaque")
    with pytest.raises(ValueError):
        names.fresh("not a name")


def test_fresh_names_avoiding_a_kernel_take_all_its_identifiers():
    loop = ir.For("i", "range", ir.Int(0), ir.Int(4), ir.Int(1), (ir.Assign((ir.Name("tmp"),), ir.Name("desc")),))
    k = ir.Kernel("k", (ir.Param("desc", "u64"),), (loop,))
    module = ir.Module(None, (ir.Const("N", ir.Int(8)),), (), (k,))
    names = NameGen(visit.identifiers(k, module=module))
    assert [names.fresh(h) for h in ("desc", "i", "tmp", "N", "x")] == ["desc_1", "i_1", "tmp_1", "N_1", "x"]


def test_fresh_names_resume_each_hints_search():
    names = NameGen({"x", "x_1", "x_3", "y_1"})
    assert [names.fresh(h) for h in ("x", "x", "y", "x", "y", "y")] == ["x_2", "x_4", "y", "x_5", "y_2", "y_3"]


def test_identifiers_of_a_subtree_shared_by_two_statements():
    """A kernel is a DAG (a subtree object at many uses): each use's names
    are found, the shared subtree's among them."""
    shared = ir.Binary("+", ir.Name("a"), ir.Index(ir.Name("B"), (ir.Int(0),)))
    body = (ir.Assign((ir.Name("x"),), shared), ir.For("i", "range", ir.Int(0), ir.Int(2), ir.Int(1),
                                                         (ir.Assign((ir.Name("y"),), shared),)))
    k = ir.Kernel("k", (ir.Param("B", "f32", (ir.Int(4),)),), body)
    assert visit.identifiers(k) == {"a", "B", "x", "i", "y"}


# --------------------------------------------------------------------------
# variant packages
# --------------------------------------------------------------------------


def test_each_variant_registers_for_the_primitive_its_package_is_named_after():
    """Dispatch loads `dispatch/<op>/` when a call of `op` is first lowered:
    that registers every variant of `op` only if no variant of `op` lives
    in another primitive's package (and a fresh process sees which package
    each import registered)."""
    script = (
        "from tilec.compiler.builtins import TILE_PRIMITIVES\n"
        "from tilec.passes.dispatch import REGISTRY, load_variants\n"
        "for op in sorted(TILE_PRIMITIVES):\n"
        "    before = {o: REGISTRY.variants(o) for o in TILE_PRIMITIVES}\n"
        "    load_variants(op)\n"
        "    for o in TILE_PRIMITIVES:\n"
        "        new = REGISTRY.variants(o)\n"
        "        if o != op:\n"
        "            assert new == before[o], (op, o)\n"
        "    assert REGISTRY.variants(op), op\n"
        "    for v in REGISTRY.variants(op):\n"
        "        assert v.impl.__module__.startswith(f'tilec.passes.dispatch.{op}.'), (op, v.impl.__module__)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout == "ok\n", out.stderr

"""cast -> cvt ("cvt"): each thread converts the register elements it holds.

Both operands are register buffers whose layouts give every thread the same
elements (`register_storage.register_pairs`), so a cast never moves data between
threads.  f32 to f16 or bf16 goes two elements at a time through one
`cvt.rn.f16x2.f32` (`ptx.cvt.f16x2.f32`); any two elements pair, since
register arrays keep one element per register.  Other conversions are one
`convert` per element (cvt with the default rounding: to nearest for a
float result, toward zero for an integer one).
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.build import assign, guarded
from tilec.passes.dispatch.operands import bind, region, same_shape
from tilec.passes.dispatch.per_kernel import last_call
from tilec.passes.dispatch.register_storage import (
    axis_exprs,
    register_element,
    register_pairs,
    scalar_elements,
)
from tilec.passes.dispatch.roll import roll
from tilec.passes.dispatch.threads import Threads, scope_of

_PAIRED = {"f16": "ptx.cvt.f16x2.f32", "bf16": "ptx.cvt.bf16x2.f32"}


@last_call
def cast_operands(op, ctx) -> tuple:
    """(dst, src) regions of a cast, read once per call (`last_call`) for
    both predicates and the lowering."""
    args = bind(op)
    dst = region(args["dst"], ctx.symbols, "the destination of cast")
    src = region(args["src"], ctx.symbols, "the source of cast")
    same_shape(dst, src, "cast", op.span)
    return dst, src


def _registers(op, ctx):
    for r in cast_operands(op, ctx):
        if not r.is_local:
            return False, f"cast converts register (local) buffers; '{r.name}' is in {r.scope} (copy it to registers first)"
    return True


def _scalar_dtypes(op, ctx):
    for r in cast_operands(op, ctx):
        if not scalar_elements(r.dtype):
            return False, f"cvt converts floating-point and integer registers; '{r.name}' is {r.dtype}"
    return True


@register(
    "cast",
    families=FAMILIES,
    name="cvt",
    priority=10,
    when=[predicate("registers", _registers), predicate("scalar_dtypes", _scalar_dtypes)],
)
def lower(op, ctx):
    dst, src = cast_operands(op, ctx)
    threads = Threads(ctx.symbols)
    pairs, st = register_pairs(dst, src, threads, scope_of(op))
    elems = [(register_element(dst.buffer, cd, op.span), register_element(src.buffer, cs, op.span))
             for cd, cs in pairs]
    stmts = []
    paired = _PAIRED.get(dst.dtype) if src.dtype == "f32" else None
    if paired is not None:
        while len(elems) >= 2:
            (d0, s0), (d1, s1), elems = elems[0], elems[1], elems[2:]
            stmts.append(ir.ExprStmt(ir.Call(paired, (d0, d1, s0, s1))))
    for d, s in elems:
        value = s if dst.dtype == src.dtype else ir.Call("convert", (s, ir.DTypeLit(dst.dtype)))
        stmts.append(assign(d, value))
    return guarded(st.guard(threads, axis_exprs(st, threads)), roll(ctx, stmts))

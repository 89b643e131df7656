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
    register_elements,
    register_pairs,
    scalar_elements,
)
from tilec.passes.dispatch.roll import roll_rows
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
    span = op.span
    paired = _PAIRED.get(dst.dtype) if src.dtype == "f32" else None
    # one row per statement: its kind and its integers (the elements' indices, in order)
    rows, rest = [], pairs
    if paired is not None:
        rows = [(paired, pairs[k][0] + pairs[k + 1][0] + pairs[k][1] + pairs[k + 1][1])
                for k in range(0, len(pairs) - 1, 2)]
        rest = pairs[len(pairs) - len(pairs) % 2:]
    rows += [("convert", cd + cs) for cd, cs in rest]
    nd, ns = len(dst.buffer.shape), len(src.buffer.shape)
    registers = register_elements(dst.buffer, span), register_elements(src.buffer, span)

    def moving(buf):
        """Elements of `buf` in a rolled loop's body: indices that move with the loop variable."""
        name = ir.Name(buf.name, span=span)
        return lambda values: ir.Index(
            name, tuple(ir.Int(v, span=span) if isinstance(v, int) else v for v in values), span=span)

    def build(kind, values):
        d, s = registers if all(type(v) is int for v in values) else (moving(dst.buffer), moving(src.buffer))
        if kind == "convert":
            d0, s0 = d(values[:nd]), s(values[nd:])
            value = s0 if dst.dtype == src.dtype else ir.Call("convert", (s0, ir.DTypeLit(dst.dtype, span=span)), span=span)
            return assign(d0, value, span)
        args = d(values[:nd]), d(values[nd:2 * nd]), s(values[2 * nd:2 * nd + ns]), s(values[2 * nd + ns:])
        return ir.ExprStmt(ir.Call(kind, args, span=span), span=span)

    return guarded(st.guard(threads, axis_exprs(st, threads)), roll_rows(ctx, rows, build, span))

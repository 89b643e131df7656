"""fill -> stores ("store"): every element of a register or memory region
set to one value.

Registers: each thread sets the elements it holds.  Memory: the threads of
the scope share the elements, consecutive threads on consecutive elements.
The value is converted to the element type once, as written (`convert` when
it is a run-time value of another type; a literal that the type cannot hold
is an error).
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.compiler.value_types import assignable, value_type_of_dtype
from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.build import assign, guarded, located
from tilec.passes.dispatch.operands import bind, region
from tilec.passes.dispatch.register_storage import (
    axis_exprs,
    check_scope,
    held_slots,
    register_elements,
    scalar_elements,
    storage,
)
from tilec.passes.dispatch.roll import roll
from tilec.passes.dispatch.threads import Threads, scope_of, whole_scope
from tilec.passes.dispatch.vectors import spread


def _destination(op, ctx):
    return region(bind(op)["dst"], ctx.symbols, "the destination of fill")


def _storable(op, ctx):
    dst = _destination(op, ctx)
    if dst.scope == "tmem":
        return False, f"'{dst.name}' is in tensor memory; fill registers and copy them with copy_async"
    if not scalar_elements(dst.dtype):
        return False, f"'{dst.name}' has {dst.dtype} elements, which are not scalar values; fill a u8 view of it"
    return True


def _all_threads_for_memory(op, ctx):
    if _destination(op, ctx).is_local:
        return True  # each thread sets its own registers
    return whole_scope(op, ctx)


def fill_value(value: ir.Expr, dtype: str, ctx) -> ir.Expr:
    """`value` as an element of `dtype` (a located error for a literal the
    type cannot hold)."""
    want = value_type_of_dtype(dtype)
    have = ctx.symbols.type_of(value)
    if assignable(have, want, value):
        return value
    if isinstance(value, (ir.Int, ir.Float)):
        raise TilecError(f"fill: {print_expr(value)} cannot be stored in {dtype} elements", value.span)
    return ir.Call("convert", (value, ir.DTypeLit(want)))


@register(
    "fill",
    families=FAMILIES,
    name="store",
    priority=10,
    when=[predicate("storable", _storable), predicate("whole_scope", _all_threads_for_memory)],
)
def lower(op, ctx):
    args = bind(op)
    dst = _destination(op, ctx)
    value = fill_value(args["value"], dst.dtype, ctx)
    threads = Threads(ctx.symbols)
    scope = scope_of(op)
    if dst.is_local:
        st = storage(dst.buffer, threads, replicated=True)  # each copy is set alike
        check_scope(st, scope, threads, "register buffer")
        axes = axis_exprs(st, threads)
        value = located(value, op.span)
        held = held_slots(dst, st)
        element = register_elements(dst.buffer, op.span)
        stmts = [assign(element(coord), value, op.span) for _, coord, _ in held]
        stmts = roll(ctx, stmts, op.span, anchors=[coord for _, coord, _ in held])  # each sets its register
        return guarded(st.guard(threads, axes), stmts)
    tid = threads.require(threads.index(scope), f"each thread's position in its {scope}")
    return spread(ctx, threads.size(scope), tid, dst.shape, 1, lambda index: [assign(dst.element(index), value)])

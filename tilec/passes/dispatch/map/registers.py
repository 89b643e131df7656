"""map -> one assignment per register element ("registers").

    map(S[:, :], exp2(S[:, :] * scale - m[:, :]))

evaluates the expression once for every element the running thread holds
of the destination, a register buffer: buffer operands inside it stand for
their element at the same index, broadcast numpy style (extents aligned
from the last dim; an extent of 1 repeats), so `m` of shape (64, 1) is a
per-row value and `w` of shape (N,) a per-column one.

A register operand must be held, in every thread, where that thread's
destination elements are: checked for thread 0 element by element (the
register it reads is named by thread 0's coordinate, the same register in
every thread) and for every other thread by how its elements move with its
position, as `cast` checks its two sides.  A row statistic in
`reduce_layout(...)` of the tile it came from fits.  A shared- or
global-memory operand is read at the element's index, each thread reading
what it needs.  The value is converted to the destination's dtype (round
to nearest) when it is of another type.
"""
from __future__ import annotations

from typing import Dict, List

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.compiler.symbols import assignable, value_type_of_dtype
from tilec.passes.dispatch import FAMILIES, Decline, predicate, register
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import assign, guarded, located, located_elements
from tilec.passes.dispatch.operands import bind, region
from tilec.passes.dispatch.register_storage import (
    axis_exprs,
    follows,
    held_elements,
    register_elements,
    scalar_elements,
    storage,
)
from tilec.passes.dispatch.roll import roll
from tilec.passes.dispatch.threads import Threads, narrowing_guard


def _destination(op, ctx) -> Region:
    return region(bind(op)["dst"], ctx.symbols, "the destination of map")


def _registers(op, ctx):
    dst = _destination(op, ctx)
    if not dst.is_local:
        return False, f"map computes register (local) tiles; '{dst.name}' is in {dst.scope}"
    if not scalar_elements(dst.dtype):
        return False, f"'{dst.name}' has {dst.dtype} elements, which are not scalar values"
    return True


def _whole_tile(op, ctx):
    """Every thread sharing the destination runs the call, so no thread's
    elements are left behind."""
    st = storage(_destination(op, ctx).buffer, Threads(ctx.symbols), replicated=True)
    g = narrowing_guard(op, ctx, st.scope)
    if g is not None:
        return False, f"'{_destination(op, ctx).name}' is spread over a {st.scope} but the call runs under '{print_expr(g)}'"
    return True


def _operands(value: ir.Expr, syms) -> List[ir.Expr]:
    """The buffer references in `value` (a name or a region), outermost,
    in walk order.  (A loop over a stack, not a recursive closure, which
    would be a reference cycle left to the cyclic collector.)"""
    out, todo = [], [value]
    while todo:
        e = todo.pop()
        base = e.base if isinstance(e, ir.Index) else e
        if isinstance(base, ir.Name) and base.id in syms.buffers:
            out.append(e)
        elif not isinstance(e, ir.Method):
            todo.extend(reversed(list(visit.children(e))))
    return out


def _aligned(dst: Region, src: Region, span) -> list:
    """For each dim of `src`, the destination dim it broadcasts along (None
    for an extent of 1), numpy style; an error when the extents disagree."""
    lead = len(src.extents) - len(dst.extents)
    out = []
    for j, e in enumerate(src.extents):
        i = j - lead
        if e == 1:
            out.append(None)
        elif i >= 0 and dst.extents[i] == e:
            out.append(i)
        else:
            raise TilecError(
                f"map: '{print_expr(src.expr)}' (extents {src.extents}) does not broadcast to "
                f"'{print_expr(dst.expr)}' (extents {dst.extents}): aligned from the last dim, each "
                "extent must equal the destination's or be 1",
                src.expr.span or span,
            )
    return out


@register(
    "map",
    families=FAMILIES,
    name="registers",
    priority=10,
    when=[predicate("registers", _registers), predicate("whole_tile", _whole_tile)],
)
def lower(op, ctx):
    syms = ctx.symbols
    value = bind(op)["value"]
    dst = _destination(op, ctx)
    threads = Threads(syms)
    sd = storage(dst.buffer, threads, replicated=True)
    held = held_elements(dst, sd, axis_exprs(sd, threads))
    starts = dst.const_starts()
    span = op.span
    elements = []  # per operand, the element each held one reads
    for ref in _operands(value, syms):
        src = region(ref, syms, "an operand of map")
        dims = _aligned(dst, src, span)
        if src.name == dst.name and src.expr != dst.expr and src.starts != dst.starts:
            raise TilecError(f"map: '{print_expr(ref)}' overlaps the destination at another position", ref.span or span)
        elements.append(_elements(src, dims, dst, sd, held, starts, threads, span))
    # the value placed at the call once (its operands, in the same order, stand for their elements), so
    # that each statement is built placed, of placed parts, and `located` walks none of them
    placed = located(value, span)
    per_operand: Dict[int, list] = {id(ref): values for ref, values in zip(_operands(placed, syms), elements)}
    stmts = []
    want = value_type_of_dtype(dst.dtype)
    convert = None  # whether the value needs converting: the same for every element (each operand's is its dtype)
    dst_element = register_elements(dst.buffer, span)
    for k, h in enumerate(held):
        elems = {key: values[k] for key, values in per_operand.items()}
        computed = _substitute(placed, elems)
        if convert is None:
            convert = not assignable(syms.type_of(computed), want, computed)
        if convert:
            computed = ir.Call("convert", (computed, ir.DTypeLit(want, span=span)), span=span)
        stmts.append(assign(dst_element(h.coord), computed, span))
    stmts = roll(ctx, stmts, op.span, anchors=[h.coord for h in held])  # each statement assigns its register
    return guarded(sd.guard(threads, axis_exprs(sd, threads)), stmts)


def _substitute(value: ir.Expr, elems: Dict[int, ir.Expr]) -> ir.Expr:
    if id(value) in elems:
        return elems[id(value)]
    if isinstance(value, ir.Method):
        return value
    return visit.map_children(value, lambda c: _substitute(c, elems))


def _elements(src: Region, dims: list, dst: Region, sd, held, starts, threads, span) -> list:
    """The element of `src` each held destination element reads, built at
    `span` (the call's, where dispatch places what a lowering builds)."""
    if src.is_local:
        return _register_elements(src, dims, dst, sd, held, starts, threads, span)
    if src.scope == "tmem":
        raise Decline(f"'{src.name}' is in tensor memory; copy it to registers first")
    # the src dims that move with a destination dim, and that dim's place in the held index
    moving = [(j, dst.dims.index(i)) for j, i in enumerate(dims) if i is not None]
    element = located_elements(src, span, [j for j, _ in moving])
    return [element([h.index[k] for _, k in moving]) for h in held]


def _register_elements(src: Region, dims: list, dst: Region, sd, held, starts, threads, span) -> list:
    so = storage(src.buffer, threads, replicated=True)
    sstarts = src.const_starts()
    if sstarts is None:
        raise Decline(f"the region of register buffer '{src.name}' must have compile-time bounds")
    if not follows(so, sd, tuple(dims)):
        raise Decline(
            f"'{src.name}' is not held where '{dst.name}' is: some thread holds elements of "
            f"'{dst.name}' without the elements of '{src.name}' they read (a register operand "
            "cannot move between threads)"
        )
    slot_of = so.slot_of()
    src_element = register_elements(src.buffer, span)
    out = []
    for h in held:
        coord = tuple(s if i is None else s + h.coord[i] - starts[i] for s, i in zip(sstarts, dims))
        if coord not in slot_of:
            raise Decline(f"thread 0 holds {dst.name}{list(h.coord)} but not {src.name}{list(coord)}")
        out.append(src_element(coord))
    return out

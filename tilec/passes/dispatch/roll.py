"""Readable output: repetitive statements written back as `unroll` loops."""
from __future__ import annotations

import attrs

from tilec.compiler import ir, visit
from tilec.passes.dispatch.build import add, mul
from tilec.passes.dispatch.registry import DispatchContext


_EQ_FIELDS: dict = {}  # node class -> the fields its equality compares (all but the span)


def _shape(node: ir.Node, ints: list):
    """`node` with its integers left out, as a key (nested tuples) that
    compares equal exactly when two nodes would after every `Int` became
    `Int(0)` (attrs equality: the class, then every field but the span);
    the integers are appended to `ints` in walk (pre-)order.  Comparing keys
    is one C-level tuple comparison, where rebuilt trees compared node by
    node through attrs' `__eq__`."""
    if isinstance(node, ir.Int):
        ints.append(node.value)
        return ir.Int
    cls = type(node)
    names = _EQ_FIELDS.get(cls)
    if names is None:
        names = _EQ_FIELDS[cls] = tuple(f.name for f in attrs.fields(cls) if f.eq)
    return (cls,) + tuple(_field_shape(getattr(node, name), ints) for name in names)


def _field_shape(value, ints: list):
    if isinstance(value, ir.Node):
        return _shape(value, ints)
    if isinstance(value, tuple):
        return tuple(_field_shape(v, ints) for v in value)
    return value


def _template(stmt: ir.Stmt, var: ir.Name, first: list, step: list) -> ir.Stmt:
    """`stmt` (the first of a run) with every integer that changes along the
    run written as `first + var * step`."""
    values = iter(zip(first, step))

    def fn(n):
        if not isinstance(n, ir.Int):
            return n
        v, d = next(values)
        return n if d == 0 else add(mul(var, d), v)

    return _rewrite_preorder(stmt, fn)


def _rewrite_preorder(node: ir.Node, fn) -> ir.Node:
    """`fn` on every Int in walk (pre-)order, the order `_shape` collects them."""
    if isinstance(node, ir.Int):
        return fn(node)
    return visit.map_children(node, lambda child: _rewrite_preorder(child, fn))


def roll(ctx: DispatchContext, stmts: list, shortest: int = 3) -> list:
    """`stmts` with every run of `shortest` or more statements that differ
    only in integers, each changing by a fixed step, written as one `unroll`
    loop -- what an author would write; the unroll pass expands it again."""
    ints = [[] for _ in stmts]
    shapes = [_shape(s, found) for s, found in zip(stmts, ints)]
    out, i = [], 0
    while i < len(stmts):
        shape = shapes[i]
        first = ints[i]
        j = i + 1
        step = None
        while j < len(stmts) and shapes[j] == shape:
            values = ints[j]
            d = [b - a for a, b in zip(first, values)]
            if step is None:
                step = d
            elif any(v != a + (j - i) * s for a, v, s in zip(first, values, step)):
                break
            j += 1
        if j - i >= shortest:
            var = ctx.fresh("j")
            body = _template(stmts[i], ir.Name(var), first, step)
            out.append(ir.For(var, "unroll", ir.Int(0), ir.Int(j - i), ir.Int(1), (body,)))
            i = j
        else:
            out.append(stmts[i])
            i += 1
    return out

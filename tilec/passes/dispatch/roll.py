"""Readable output: repetitive statements written back as `unroll` loops."""
from __future__ import annotations

from tilec.compiler import ir, visit
from tilec.passes.dispatch.build import add, mul
from tilec.passes.dispatch.registry import DispatchContext


def _blank_ints(node: ir.Node) -> ir.Node:
    return visit.transform(node, lambda n: ir.Int(0) if isinstance(n, ir.Int) else n)


def _ints(node: ir.Node) -> list:
    return [n.value for n in visit.walk(node) if isinstance(n, ir.Int)]


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
    """`fn` on every Int in walk (pre-)order, the order `_ints` lists them."""
    if isinstance(node, ir.Int):
        return fn(node)
    return visit.map_children(node, lambda child: _rewrite_preorder(child, fn))


def roll(ctx: DispatchContext, stmts: list, shortest: int = 3) -> list:
    """`stmts` with every run of `shortest` or more statements that differ
    only in integers, each changing by a fixed step, written as one `unroll`
    loop -- what an author would write; the unroll pass expands it again."""
    shapes = [_blank_ints(s) for s in stmts]
    ints = [_ints(s) for s in stmts]
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

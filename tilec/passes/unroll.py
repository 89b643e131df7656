"""The `unroll` pass: `for v in unroll(...)` becomes one copy of the body per
iteration, with `v` replaced by its value and the resulting constants folded.

Dispatch variants write their instruction nests as unroll loops (one `mma`
per (m, n, k) tile), so this runs after dispatch; after it, every register
index the emitter sees is a literal, which is what lets a register array live
in registers rather than local memory.  Nested unroll loops expand outside
in, so an inner loop's bounds may use the outer index.
"""
from __future__ import annotations

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.passes.fold_constants import fold_block, fold_expr


class Unroll(Pass):
    name = "unroll"
    requires = frozenset({"dispatched"})
    provides = frozenset({"unrolled"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return unroll_module(module)


def unroll_module(module: ir.Module) -> ir.Module:
    kernels = tuple(attrs.evolve(k, body=unroll_block(k.body)) for k in module.kernels)
    return attrs.evolve(module, kernels=kernels)


def unroll_block(stmts) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, ir.For) and s.kind == "unroll":
            out.extend(_expand(s))
        else:
            out.append(_unroll_inside(s))
    return tuple(out)


def _unroll_inside(s: ir.Stmt) -> ir.Stmt:
    changes = {}
    for field in ("body", "then", "orelse"):
        value = getattr(s, field, None)
        if isinstance(value, tuple) and value:
            block = unroll_block(value)
            changes[field] = block if block or field == "orelse" else (ir.Pass(span=value[0].span),)
    return attrs.evolve(s, **changes) if changes else s


def _expand(loop: ir.For) -> list:
    bounds = []
    for what, e in (("start", loop.start), ("stop", loop.stop), ("step", loop.step)):
        value = fold_expr(e)
        if not isinstance(value, ir.Int):
            raise TilecError(
                f"the {what} of unroll loop '{loop.var}' must be a compile-time integer", e.span or loop.span
            )
        bounds.append(value.value)
    start, stop, step = bounds
    if step == 0:
        raise TilecError(f"unroll loop '{loop.var}' has step 0", loop.step.span or loop.span)
    _check_not_rebound(loop)
    out = []
    for i in range(start, stop, step):
        body = tuple(_substitute(s, loop.var, i) for s in loop.body)
        out.extend(unroll_block(fold_block(body)))
    return out


def _check_not_rebound(loop: ir.For) -> None:
    for s in loop.body:
        for n in visit.walk(s):
            if isinstance(n, ir.For) and n.var == loop.var:
                raise TilecError(f"inner loop reuses the unroll variable '{loop.var}'", n.span)
            targets = ()
            if isinstance(n, ir.Assign):
                targets = n.targets
            elif isinstance(n, ir.AugAssign):
                targets = (n.target,)
            for t in targets:
                items = t.items if isinstance(t, ir.TupleExpr) else (t,)
                for item in items:
                    if isinstance(item, ir.Name) and item.id == loop.var:
                        raise TilecError(f"cannot assign to the unroll variable '{loop.var}'", item.span)


def _substitute(s: ir.Stmt, var: str, value: int) -> ir.Stmt:
    def fn(node):
        if isinstance(node, ir.Name) and node.id == var:
            return ir.Int(value, span=node.span)
        return node

    return visit.transform(s, fn)

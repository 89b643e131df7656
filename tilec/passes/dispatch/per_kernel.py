"""Memoizing what dispatch asks of one kernel for every call in it, and of
one call in each of its candidate variants."""
from __future__ import annotations

from tilec.compiler import ir, visit


def last_kernel(fn):
    """Memoize `fn(obj)` for the last `obj` it saw: dispatch asks the same
    question of one kernel for every call in it."""
    last = [None, None]

    def memo(obj):
        if last[0] is not obj:
            last[0], last[1] = obj, fn(obj)
        return last[1]

    return memo


def last_call(fn):
    """Memoize `fn(op, ctx)` for the last call it saw (the same `TileOp`
    and `DispatchContext` objects): each predicate of each candidate
    variant of a call asks it, and then the lowering does.  An exception
    is not kept (it is raised again at the next ask)."""
    last = [None, None, None]

    def memo(op, ctx):
        if last[0] is not op or last[1] is not ctx:
            result = fn(op, ctx)
            last[0], last[1], last[2] = op, ctx, result
        return last[2]

    return memo


def kernel_memo():
    """A memo of a pure reading of a kernel's objects (its buffers, its
    operands), which every predicate of every candidate variant and then the
    lowering itself would otherwise recompute: `memo(syms, obj, variant,
    compute)` is `compute()`, worked out once per (obj, variant) while
    dispatch lowers the kernel of `syms` (`last_kernel`).  An entry is keyed
    by the object's id and keeps the object, so that the id is not reused
    while the entry lives; an exception is not kept (it is raised again at
    the next ask)."""
    tables = last_kernel(lambda syms: {})

    def memo(syms, obj, variant, compute):
        table = tables(syms)
        key = (id(obj), variant)
        hit = table.get(key)
        if hit is None:
            hit = table[key] = (obj, compute())
        return hit[1]

    return memo


@last_kernel
def statements(kernel: ir.Kernel) -> tuple:
    """Every statement of `kernel`, in `visit.walk`'s (pre-)order, found
    without entering an expression (no statement is inside one): the
    questions dispatch asks of a kernel's assignments and loops would
    otherwise walk every node of it, several times per compile."""
    return tuple(visit.statements(kernel.body))

"""The (destination, source) regions of a `copy_async`, read leniently so
that any variant's predicate can look at any call.
"""
from __future__ import annotations

from tilec.compiler.diagnostics import TilecError
from tilec.passes.dispatch.operands import region
from tilec.passes.dispatch.registry import DispatchContext, TileOp


def operand_pair(op: TileOp, ctx: DispatchContext):
    """(dst, src) regions of a copy_async, read leniently (no keyword
    checks), so that a predicate can look at any variant's call."""
    dst = op.args[0] if op.args else op.kwargs.get("dst")
    src = op.args[1] if len(op.args) > 1 else op.kwargs.get("src")
    if dst is None or src is None:
        raise TilecError(f"{op.call.func} takes a destination and a source")
    return (region(dst, ctx.symbols, "the destination of copy_async"),
            region(src, ctx.symbols, "the source of copy_async"))

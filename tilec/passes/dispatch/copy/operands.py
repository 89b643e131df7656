"""The operands of `copy`, read once for every copy variant: two regions of
one dtype and one shape (unit dims aside), or a located error that no
variant could do better than.
"""
from __future__ import annotations

from tilec.compiler.diagnostics import TilecError
from tilec.passes.dispatch.operands import bind, region, same_shape


def copy_operands(op, ctx) -> tuple:
    """(dst, src) regions of a copy; a located error when they cannot be
    copied one onto the other by any variant."""
    args = bind(op)
    dst = region(args["dst"], ctx.symbols, "the destination of copy")
    src = region(args["src"], ctx.symbols, "the source of copy")
    if dst.dtype != src.dtype:
        raise TilecError(
            f"copy: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}; use cast to convert", op.span
        )
    same_shape(dst, src, "copy", op.span)
    return dst, src

"""The operands of `copy`, read once for every copy variant: two regions of
one dtype and one shape (unit dims aside), or a located error that no
variant could do better than.
"""
from __future__ import annotations

from tilec.compiler.diagnostics import TilecError
from tilec.passes.dispatch.operands import SIGNATURES, bind, region, same_shape
from tilec.passes.dispatch.per_kernel import last_call


@last_call
def copy_operands(op, ctx) -> tuple:
    """(dst, src) regions of a copy; a located error when they cannot be
    copied one onto the other by any variant.  With `oob=` the source is a
    global region that may run past its tensor's end, loaded into
    registers (`ldst` reads the elements outside as zeros, or with "any"
    as elements of the tensor it does not specify).  Read once per call
    (`last_call`): each predicate of each copy variant asks, then the
    lowering."""
    args = bind(op)
    oob = oob_fill(op, args)
    dst = region(args["dst"], ctx.symbols, "the destination of copy")
    src = region(args["src"], ctx.symbols, "the source of copy", past_end=oob is not None)
    if oob is not None and (src.scope != "global" or not dst.is_local):
        raise TilecError(
            f"copy with oob=\"{oob}\" loads a global region that may run past its tensor's end into "
            f"registers, not {src.scope} '{src.name}' into {dst.scope} '{dst.name}'",
            op.span,
        )
    if dst.dtype != src.dtype:
        raise TilecError(
            f"copy: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}; use cast to convert", op.span
        )
    same_shape(dst, src, "copy", op.span)
    return dst, src


def oob_fill(op, args=None) -> str | None:
    """The copy's `oob=` ("zero" or "any"), or None when its source must lie
    in its buffer; `args` the call's arguments when bound already."""
    return SIGNATURES["copy"].literals(op.call.func, bind(op) if args is None else args, op.span)["oob"]

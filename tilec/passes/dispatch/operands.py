"""Reading a synchronous primitive's operands (gemm, copy, cast, fill,
reduce, map): `bind` matches a call against its primitive's signature, and
`region` reads an operand `buf` / `buf[a:b, i, :]` as a `Region` (the
buffer, the start of each dim -- a run-time expression is fine -- and its
extent, which must be a compile-time integer, `k * 64 + 64` minus `k * 64`
included).  The other dispatch variants (tma, wgmma, tcgen05) read their
regions here too.
"""
from __future__ import annotations

from typing import Dict

from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.compiler.symbols import KernelSymbols
from tilec.compiler.tile_op import TileOp
from tilec.passes.dispatch.per_kernel import kernel_memo


SIGNATURES = {
    "copy": Signature.parse("dst: expr, src: expr, *, oob: str(zero|any) = None"),
    "cast": Signature.parse("dst: expr, src: expr"),
    "fill": Signature.parse("dst: expr, value: expr"),
    "gemm": Signature.parse(
        "D: expr, A: expr, B: expr, C: expr = None, *, transpose_A: bool = False, "
        "transpose_B: bool = False, alpha: expr = None, beta: expr = None"
    ),
    "reduce": Signature.parse(
        "dst: expr, src: expr, *, op: str(sum|max|min), axes: shape, accum: bool = False, scratch: expr = None"
    ),
    "map": Signature.parse("dst: expr, value: expr"),
}


def bind(op: TileOp) -> Dict:
    """The call's arguments by parameter name (a located error for a call
    that does not fit the primitive's signature)."""
    return op.bind(SIGNATURES[op.name])


def region(expr: ir.Expr, syms: KernelSymbols, what: str, past_end: bool = False) -> Region:
    """The region an operand names (`tilec.compiler.region`); a located
    error when it is not one, when an extent is not a compile-time integer,
    or when it leaves its buffer (`past_end`: see `Region.check_bounds`).

    Read once per operand of a kernel: each predicate of each candidate
    variant reads the call's operands, and then the lowering does.  `what`
    only words an error, and an error is not kept (it is raised again)."""
    return _REGIONS(syms, expr, past_end, lambda: _region(expr, syms, what, past_end))


_REGIONS = kernel_memo()  # (operand, past_end) -> its Region, per kernel


def _region(expr: ir.Expr, syms: KernelSymbols, what: str, past_end: bool) -> Region:
    base = expr.base if isinstance(expr, ir.Index) else expr
    if isinstance(expr, ir.LayoutLit):
        raise TilecError(f"{what} must be a buffer or a region of one, not a layout; {ir.S_IS_A_LAYOUT}",
                         expr.span)
    if not isinstance(base, ir.Name):
        raise TilecError(f"{what} must be a buffer or a region of one (buf[a:b, ...])", expr.span)
    r = Region.read(expr, syms.buffer(base.id, base.span))
    r.check_extents()
    r.check_bounds(past_end)
    return r


def same_shape(a: Region, b: Region, verb: str, span=None) -> None:
    if a.shape != b.shape:
        raise TilecError(
            f"{verb}: '{print_expr(a.expr)}' is {shape_text(a.shape)} but '{print_expr(b.expr)}' is "
            f"{shape_text(b.shape)} (extents of 1 aside)",
            span,
        )


def shape_text(shape) -> str:
    return "x".join(map(str, shape)) if shape else "one element"

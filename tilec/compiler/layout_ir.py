"""Between the layout literal the program writes (`ir.LayoutLit`, syntax) and
the `TileLayout` the algebra computes with (value).

The literal keeps expressions so that `S[(BLK_M, 64) : (64, 1)]` prints back
as written; after constant folding its children are integers and
`to_layout` gives it meaning.  `to_lit` writes a value back in the one
spelling every pass emits: explicit integer strides, `m` left unwritten,
offsets in axis order.  It does not simplify: pass `canonicalize(layout)`
for the canonical layout, and `to_layout(to_lit(l)) == l` for every `l`.
"""
from __future__ import annotations

from typing import Optional, Sequence

from tilec.compiler import ir
from tilec.compiler.layout import Iter, TileLayout, row_major
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.layout_shape import group
from tilec.compiler.swizzle import Swizzle


def _int(expr: ir.Expr, what: str) -> int:
    if isinstance(expr, ir.Int):
        return expr.value
    shown = f"'{expr.id}'" if isinstance(expr, ir.Name) else f"a {type(expr).__name__} expression"
    raise LayoutError(
        f"{what} of a layout must be an integer literal once constants are folded, got {shown}",
        expr.span,
    )


def _iter(node: ir.LayoutIter, what: str) -> Iter:
    if node.stride is None:
        raise LayoutError(f"{what} iterator needs a stride (extent : stride)", node.span)
    return Iter(_int(node.extent, "the extent"), _int(node.stride, "a stride"), node.axis or "m")


def to_layout(lit: ir.LayoutLit, shape: Optional[Sequence[int]] = None) -> TileLayout:
    """The layout `lit` denotes.  With `shape` (a buffer's), also check that
    the layout has that many elements and groups by it.  Errors are located at
    the offending node."""
    try:
        strides = [it.stride for it in lit.shard]
        if all(s is None for s in strides):
            base = row_major([_int(it.extent, "the extent") for it in lit.shard])
            shard = base.shard
        elif any(s is None for s in strides):
            raise LayoutError("a layout gives a stride for every iterator or for none", lit.span)
        else:
            shard = [_iter(it, "a shard") for it in lit.shard]
        replica = [_iter(it, "a replica") for it in lit.replica]
        offset = []
        for node in lit.offset:
            if _int(node.extent, "an offset's extent") != 1 or node.stride is None:
                raise LayoutError("an offset is written O[value@axis]", node.span)
            offset.append((node.axis or "m", _int(node.stride, "an offset")))
        swizzle = None
        if lit.swizzle is not None:
            swizzle = Swizzle(*(_int(e, "a swizzle parameter") for e in lit.swizzle))
        layout = TileLayout(shard, replica, offset, swizzle)
        if shape is not None:
            group(layout, shape)
        return layout
    except LayoutError as err:
        err.with_span(lit.span)
        raise


def _lit_iter(it: Iter) -> ir.LayoutIter:
    return ir.LayoutIter(ir.Int(it.extent), ir.Int(it.stride), None if it.axis == "m" else it.axis)


def to_lit(layout: TileLayout) -> ir.LayoutLit:
    """`layout` as a literal with integer children (no spans)."""
    swizzle = None
    if layout.swizzle is not None:
        sw = layout.swizzle
        swizzle = (ir.Int(sw.per_element), ir.Int(sw.swizzle_bits), ir.Int(sw.atom_bits))
    return ir.LayoutLit(
        shard=tuple(_lit_iter(it) for it in layout.shard),
        replica=tuple(_lit_iter(it) for it in layout.replica),
        offset=tuple(_lit_iter(Iter(1, v, name)) for name, v in layout.offset),
        swizzle=swizzle,
    )

"""`LayoutLit` (syntax) to `TileLayout` (value) and back."""
import pytest

from tilec.compiler import ir
from tilec.compiler.layout import LayoutError, make
from tilec.compiler.layout_ir import to_layout, to_lit
from tilec.compiler.swizzle import Swizzle

SPAN = ir.Span("k.tile", 3, 9, 3, 40)
NAME_SPAN = ir.Span("k.tile", 3, 12, 3, 17)


def _expr(v):
    return v if isinstance(v, ir.Expr) else ir.Int(v)


def it(extent, stride=None, axis=None):
    return ir.LayoutIter(_expr(extent), None if stride is None else _expr(stride), axis)


def test_literal_with_every_part():
    """SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)] + R[4 : 32@TLane] + O[5@TCol, 3]."""
    lit = ir.LayoutLit(
        shard=(it(8, 64), it(4, 512), it(64, 1)),
        replica=(it(4, 32, "TLane"),),
        offset=(it(1, 5, "TCol"), it(1, 3)),
        swizzle=(ir.Int(3), ir.Int(3), ir.Int(3)),
    )
    want = make((8, 4, 64), (64, 512, 1), replica=[(4, 32, "TLane")], offset={"TCol": 5, "m": 3},
                swizzle=Swizzle(3, 3, 3))
    assert to_layout(lit) == want
    assert to_layout(to_lit(want)) == want
    assert to_lit(want).offset == (it(1, 3), it(1, 5, "TCol"))


def test_shape_only_form_is_row_major():
    """S[8, 256] is S[(8, 256) : (256, 1)]."""
    assert to_layout(ir.LayoutLit(shard=(it(8), it(256)))) == make((8, 256), (256, 1))


def test_thread_axes_and_the_buffer_shape():
    lit = ir.LayoutLit(shard=(it(2, 2), it(8, 4, "laneid"), it(4, 1, "laneid"), it(2, 1)))
    assert to_layout(lit, (16, 8)) == make((2, 8, 4, 2), (2, (4, "laneid"), (1, "laneid"), 1))
    with pytest.raises(LayoutError, match="has 128 elements but shape"):
        to_layout(lit, (16, 16))


@pytest.mark.parametrize("lit, why", [
    (ir.LayoutLit(shard=(it(ir.Name("BLK_N", span=NAME_SPAN), 1),), span=SPAN), "'BLK_N'"),
    (ir.LayoutLit(shard=(it(8, ir.Binary("*", ir.Int(2), ir.Int(4), span=SPAN)),), span=SPAN), "Binary"),
    (ir.LayoutLit(shard=(it(8), it(8, 1)), span=SPAN), "for every iterator or for none"),
    (ir.LayoutLit(shard=(it(8, 1),), replica=(it(4),), span=SPAN), "needs a stride"),
    (ir.LayoutLit(shard=(it(8, 1, "lane"),), span=SPAN), "unknown layout axis 'lane'"),
    (ir.LayoutLit(shard=(it(8, -3),), span=SPAN), "stride"),
    (ir.LayoutLit(shard=(it(64, 1, "laneid"),), span=SPAN), "laneid 63"),
])
def test_errors_are_located(lit, why):
    """At the offending child when it has a span (the symbolic extent), else at the literal."""
    with pytest.raises(LayoutError, match=why) as info:
        to_layout(lit)
    assert info.value.span == (NAME_SPAN if "BLK_N" in why else SPAN)

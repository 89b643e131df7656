"""Unit tests of the layout algebra: each operation on small hand-checked
layouts, and the errors it gives when it cannot be done."""
import itertools

import pytest

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import (
    Iter,
    LayoutError,
    TileLayout,
    apply,
    canonicalize,
    cosize,
    make,
    pack,
    row_major,
    size,
    span,
    split_thread_axes,
    storage,
    storage_size,
    unpack,
)
from tilec.compiler.layout_shape import (
    flatten,
    group,
    is_tile_inner,
    is_tile_outer,
    permute_by_groups,
    permute_dims,
    slice_region,
    tile,
    tile_to,
)
from tilec.compiler.swizzle import Swizzle

D_FRAG = make((2, 8, 4, 2), (2, (4, "laneid"), (1, "laneid"), 1))


def test_layout_error_is_a_tilec_error():
    assert issubclass(LayoutError, TilecError)


def test_str_uses_the_grammar_notation():
    full = make((8, 4, 64), (64, 512, 1), replica=[(4, 32, "TLane")],
                offset={"TCol": 5, "m": 3}, swizzle=Swizzle(3, 3, 3))
    assert str(full) == "SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)] + R[4 : 32@TLane] + O[3, 5@TCol]"
    assert str(make((8,), ((4, "laneid"),))) == "S[8 : 4@laneid]"


def test_apply_flat_and_per_dim():
    """Row 9 of D_FRAG is group 1 in the upper half; column 5 is lane-in-group 2, register bit 1."""
    assert apply(D_FRAG, (9, 5), (16, 8)) == {"m": 3, "laneid": 4 * 1 + 2}
    assert apply(D_FRAG, 9 * 8 + 5) == apply(D_FRAG, (9, 5), (16, 8))
    assert apply(row_major((3, 5)), (2, 4), (3, 5)) == {"m": 14}


def test_apply_reports_threads_on_one_level_axes():
    """Thread 37 of a warpgroup is lane 5 of warp 1, however the layout spells it."""
    for layout in (make((4, 32), ((1, "wid_in_wg"), (1, "laneid"))), make((128,), ((1, "tid_in_wg"),))):
        assert apply(layout, 37) == {"m": 0, "laneid": 5, "wid_in_wg": 1}
    assert apply(make((2,), ((3, "warpid"),)), 1) == {"m": 0, "wid_in_wg": 3, "wgid": 0}


def test_apply_adds_offsets_then_swizzles():
    layout = make((64,), (1,), offset={"m": 64, "TCol": 2}, swizzle=Swizzle(3, 3, 3))
    # element 8 is at 72 = row 1, chunk 1; the 128B swizzle XORs chunk 1 with row 1
    assert apply(layout, 8) == {"m": 64, "TCol": 2}


@pytest.mark.parametrize("coord, shape", [
    (128, None), (-1, None), ((16, 0), (16, 8)), ((1, 2), (4, 4)), ((1, 2), None), (3, (16, 8)),
])
def test_apply_rejects_bad_coordinates(coord, shape):
    with pytest.raises(LayoutError):
        apply(D_FRAG, coord, shape)


def test_size_span_cosize():
    tmem = make((32, 16), ((1, "TLane"), (1, "TCol")), replica=[(4, 32, "TLane")])
    assert size(tmem) == 512 and size(tmem, "TLane") == 32
    assert span(tmem, "TLane") == 32 and cosize(tmem, "TLane") == 128
    assert span(D_FRAG) == 4 and span(D_FRAG, "laneid") == 32
    assert cosize(make((4,), (1,), offset={"m": 6})) == 10
    # a swizzled footprint rounds up to the swizzle's self-mapping block
    assert cosize(make((8,), (1,), swizzle=Swizzle(3, 3, 3))) == 64


@pytest.mark.parametrize("build, why", [
    (lambda: make((64,), ((1, "laneid"),)), "laneid 63"),
    (lambda: make((2, 32), ((1, "wid_in_wg"), (4, "laneid"))), "laneid"),
    (lambda: make((2, 4), ((64, "tid_in_wg"), (1, "wid_in_wg"))), "tid_in_wg 160"),
    (lambda: make((2,), ((1, "lane"),)), "unknown layout axis"),
    (lambda: make((0,), (1,)), "extent"),
    (lambda: make((2,), (-1,)), "stride"),
    (lambda: TileLayout([]), "at least one"),
    (lambda: make((2,), (1,), offset={"m": -1}), "offset"),
])
def test_construction_errors(build, why):
    with pytest.raises(LayoutError, match=why):
        build()


def test_canonicalize_fuses_drops_and_rewrites_threads():
    assert canonicalize(D_FRAG) == make((2, 32, 2), (2, (1, "laneid"), 1))
    wg = make((4, 1, 32), ((1, "wid_in_wg"), 7, (1, "laneid")), offset={"m": 0})
    assert canonicalize(wg) == make((128,), ((1, "tid_in_wg"),))
    cta = make((2, 4, 32), ((1, "wgid"), (1, "wid_in_wg"), (1, "laneid")))
    assert canonicalize(cta) == make((256,), ((1, "tx"),))
    assert canonicalize(make((4, 32), ((1, "warpid"), (1, "laneid")))) == make((128,), ((1, "tx"),))
    assert canonicalize(make((1,), (3,))) == make((1,), (1,))
    assert canonicalize(make((4,), (1,), swizzle=Swizzle(3, 0, 3))).swizzle is None


def test_canonicalize_keeps_the_scope_of_a_partial_warpgroup():
    """Lanes 0-31 of warp 0 of a warpgroup are not every warp's lanes 0-31."""
    layout = make((1, 32), ((1, "wid_in_wg"), (1, "laneid")))
    assert canonicalize(layout) == make((32,), ((1, "tid_in_wg"),))


def test_a_zero_thread_offset_is_the_scope_and_canonicalization_keeps_it():
    """Issue 18 item 3: naming a thread axis, at 0 too, says which threads own
    the layout.  `O[0@wgid]` beside lanes makes it the CTA's threads 0-15, so it
    canonicalizes to that (`S[16 : 1@tx]`), not to every warp's lanes 0-15; and
    a thread axis that only a zero offset, a unit iterator, a stride-0 iterator
    or a stride-0 replica names stays named, as `O[0@axis]`."""
    lanes = make((16,), ((1, "laneid"),))
    cta = make((16,), ((1, "laneid"),), offset={"wgid": 0})
    assert canonicalize(cta) == make((16,), ((1, "tx"),))
    assert canonicalize(cta) != canonicalize(lanes)
    assert apply(cta, 3) == {"m": 0, "laneid": 3, "wid_in_wg": 0, "wgid": 0}
    assert apply(lanes, 3) == {"m": 0, "laneid": 3}
    lane0 = make((4,), (1,), offset={"laneid": 0})
    assert canonicalize(lane0) == lane0 and str(lane0) == "S[4 : 1] + O[0@laneid]"
    for spelling in (
        make((4, 1), (1, (5, "laneid"))),
        make((4,), (1,), replica=[(3, 0, "laneid")]),
        make((4,), (1,), offset={"laneid": 0, "m": 0, "TCol": 0}),
    ):
        assert canonicalize(spelling) == lane0, spelling
    assert canonicalize(make((4, 2), (1, (0, "laneid")))) == make((4, 2), (1, 0), offset={"laneid": 0})
    assert canonicalize(make((4,), (1,), offset={"laneid": 0, "wid_in_wg": 0})) == make(
        (4,), (1,), offset={"tid_in_wg": 0})
    assert canonicalize(make((4,), (1,))) == make((4,), (1,))  # no thread axis: every thread's
    assert canonicalize(make((4,), (1,), offset={"m": 0, "TCol": 0})) == make((4,), (1,))


def test_canonical_replicas_are_sorted_and_fused():
    layout = make((4,), (1,), replica=[(2, 32, "TLane"), (2, 64, "TLane"), (3, 1, "m")])
    assert canonicalize(layout).replica == (Iter(3, 1), Iter(4, 32, "TLane"))


def test_split_thread_axes():
    assert split_thread_axes(make((256,), ((1, "tx"),))) == make(
        (2, 4, 32), ((1, "wgid"), (1, "wid_in_wg"), (1, "laneid")))
    assert split_thread_axes(make((8,), ((16, "tid_in_wg"),))) == make(
        (4, 2), ((1, "wid_in_wg"), (16, "laneid")))
    assert split_thread_axes(make((2,), (1,), offset={"tx": 165})).offset == (
        ("laneid", 5), ("wid_in_wg", 1), ("wgid", 1))
    with pytest.raises(LayoutError, match="cannot be split"):
        split_thread_axes(make((3,), ((16, "tid_in_wg"),)))


def test_storage():
    assert storage(D_FRAG) == make((2, 2), (2, 1))
    assert storage_size(D_FRAG) == 4
    regs = make((128, 64), ((1, "tid_in_wg"), 1))
    assert storage_size(regs) == 64


def test_pack_and_unpack():
    packed = pack(D_FRAG, 2)
    assert packed == make((2, 8, 4), (1, (4, "laneid"), (1, "laneid")))
    assert unpack(packed, 2) == D_FRAG
    sw = make((8, 64), (64, 1), swizzle=Swizzle(3, 3, 3))
    assert pack(sw, 2).swizzle == Swizzle(2, 3, 3)
    assert unpack(pack(sw, 2), 2).swizzle == Swizzle(3, 3, 3)
    with pytest.raises(LayoutError, match="innermost"):
        pack(make((4, 2), (1, 4)), 2)
    with pytest.raises(LayoutError, match="not a multiple of 2"):
        pack(make((3, 2), (3, 1)), 2)
    with pytest.raises(LayoutError, match="power of two"):
        pack(make((8, 16), (16, 1), swizzle=Swizzle(1, 3, 3)), 4)


def test_group_splits_iterators_at_dim_boundaries():
    g = group(make((32,), (1,)), (4, 8))
    assert g.dim(0) == (Iter(4, 8),) and g.dim(1) == (Iter(8, 1),)
    g = group(D_FRAG, (16, 8))
    assert g.dim(0) == (Iter(2, 2), Iter(8, 4, "laneid"))
    assert g.dim(1) == (Iter(4, 1, "laneid"), Iter(2, 1))
    assert flatten(group(make((32,), (1,)), (4, 8))) == make((32,), (1,))


@pytest.mark.parametrize("layout, shape, why", [
    (make((3, 4), (4, 1)), (2, 6), "iterator 4:1 straddles the boundary of dim 1"),
    (D_FRAG, (3,), "has 128 elements"),
    (D_FRAG, (), "one or more"),
])
def test_group_errors(layout, shape, why):
    with pytest.raises(LayoutError, match=why):
        group(layout, shape)


def test_slice():
    lower = slice_region(D_FRAG, (16, 8), [(8, 8), (0, 8)])
    assert lower == make((1, 8, 4, 2), (2, (4, "laneid"), (1, "laneid"), 1), offset={"m": 2})
    cols = slice_region(D_FRAG, (16, 8), [(0, 16), (4, 4)])
    assert cols == make((2, 8, 2, 2), (2, (4, "laneid"), (1, "laneid"), 1), offset={"laneid": 2})
    tmem = make((128, 512), ((1, "TLane"), (1, "TCol")))
    assert slice_region(tmem, (128, 512), [(0, 128), (256, 128)]).offset == (("TCol", 256),)


@pytest.mark.parametrize("region, why", [
    ([(3, 7), (0, 8)], "not a run"),
    ([(0, 16), (1, 4)], "not a run"),
    ([(0, 17), (0, 8)], "outside"),
])
def test_slice_errors(region, why):
    with pytest.raises(LayoutError, match=why):
        slice_region(D_FRAG, (16, 8), region)


def test_tile_scales_outer_by_inner_span():
    """Outer (2, 3) row-major over inner S[(2, 2) : (2, 1)] (span 4): dims interleave
    outer-then-inner, and outer strides are counted in spans of the inner."""
    tiled = tile(make((2, 3), (3, 1)), make((2, 2), (2, 1)), (2, 3), (2, 2))
    assert tiled == make((2, 2, 3, 2), (12, 2, 4, 1))
    by_warps = tile(make((3,), ((1, "wid_in_wg"),)), D_FRAG, (3, 1), (16, 8))
    assert by_warps.shard[0] == Iter(3, 1, "wid_in_wg")  # an axis the inner does not use: unscaled


def test_tile_errors():
    with pytest.raises(LayoutError, match="swizzled outer"):
        tile(make((2,), (1,), swizzle=Swizzle(3, 3, 3)), D_FRAG, (2, 1), (16, 8))
    atom = make((8, 64), (64, 1), swizzle=Swizzle(3, 3, 3))
    with pytest.raises(LayoutError, match="period"):
        tile(make((2,), (1,)), make((8, 32), (32, 1), swizzle=Swizzle(3, 3, 3)), (1, 2), (8, 32))
    assert tile(make((2,), (1,)), atom, (2, 1), (8, 64)).swizzle == Swizzle(3, 3, 3)
    with pytest.raises(LayoutError, match="whole number"):
        tile_to(D_FRAG, (24, 8), (16, 8))


def test_tile_to_is_tile_by_a_row_major_grid():
    """The reference's definition, tile(S[counts], counts, atom): whole atoms placed
    row-major, each repeat above all of the atom's elements (issue 18 item 3: a port
    that calls tile_to on a memory layout gets the reference's placement)."""
    assert tile_to(make((8, 8), (8, 1)), (64, 64), (8, 8)) == make((8, 8, 8, 8), (512, 8, 64, 1))
    atom = make((2, 2), (2, 1))
    assert tile_to(atom, (2, 4), (2, 2)) == make((2, 2, 2), (2, 4, 1))
    assert tile_to(atom, (4, 2), (2, 2)) == tile(make((2,), (1,)), atom, (2, 1), (2, 2))
    assert tile_to(D_FRAG, (16, 8), (16, 8)) == D_FRAG
    lanes = make((32, 2), ((1, "laneid"), 1), offset={"m": 3})  # a dim without registers, an offset
    assert tile_to(lanes, (64, 4), (32, 2)) == make((2, 32, 2, 2), (4, (1, "laneid"), 2, 1), offset={"m": 3})
    with pytest.raises(LayoutError, match="period"):  # tile's own rules apply
        tile_to(make((8, 32), (32, 1), swizzle=Swizzle(3, 3, 3)), (8, 64), (8, 32))


def test_is_tile_inner_and_outer():
    atom = make((4, 2, 8), ((1, "laneid"), 1, (4, "laneid")))
    tiled = tile_to(atom, (16, 8), (8, 8))
    outer = is_tile_inner(atom, tiled, (16, 8), (8, 8))
    assert outer is not None and canonicalize(tile(outer, atom, (2, 1), (8, 8))) == canonicalize(tiled)
    inner = is_tile_outer(row_major((2, 1)), tiled, (16, 8), (2, 1))
    assert inner is not None and canonicalize(inner) == canonicalize(atom)
    assert is_tile_inner(make((4, 2, 8), ((1, "laneid"), 1, (4, "laneid")), offset={"m": 1}),
                         tiled, (16, 8), (8, 8)) is None
    assert is_tile_outer(make((2,), (3,)), tiled, (16, 8), (2, 1)) is None


def test_permute():
    layout = row_major((2, 3, 4))
    moved = permute_dims(layout, (2, 3, 4), (2, 0, 1))
    assert apply(moved, (3, 1, 2), (4, 2, 3)) == apply(layout, (1, 2, 3), (2, 3, 4))
    g = group(D_FRAG, (16, 8))
    swapped = permute_by_groups(g.layout, g.seps, (1, 0))
    assert swapped.shard == g.dim(1) + g.dim(0)
    with pytest.raises(LayoutError, match="permutation"):
        permute_by_groups(g.layout, g.seps, (0, 0))
    with pytest.raises(LayoutError, match="separators"):
        permute_by_groups(g.layout, (0, 1), (0,))


@pytest.mark.parametrize("axis", ["warpid", "tid_in_wg", "tx"])
def test_is_tile_with_thread_axis_replicas(axis):
    """Issue 18 item 3: an outer layout with a replica on a thread axis that
    spans several levels (warpid, tid_in_wg, tx) is recognised from either
    side, and the other part comes back on the caller's axes."""
    outer = make((2,), ((2, axis),), replica=[(2, 1, axis)])
    inner = make((64, 128), (128, 1))
    tiled = tile(outer, inner, (2, 1), (64, 128))
    assert is_tile_outer(outer, tiled, (128, 128), (2, 1)) == inner
    assert is_tile_inner(inner, tiled, (128, 128), (64, 128)) == outer


def test_slice_across_a_digit_boundary():
    """Issue 18 item 3: a K-slice across two 64-wide shared chunks starts
    mid-digit and crosses into the next; it is a layout, so slice gives it."""
    chunks = make((128, 2, 64), (64, 8192, 1))
    sub = slice_region(chunks, (128, 128), [(0, 128), (32, 64)])
    assert sub == make((128, 2, 32), (64, 8160, 1), offset={"m": 32})
    for i, j in itertools.product(range(0, 128, 9), range(64)):
        assert apply(sub, (i, j), (128, 64)) == apply(chunks, (i, 32 + j), (128, 128))


def test_slice_that_is_no_layout_is_refused_with_the_reason():
    """Columns 32..79 of the chunks: 32 then 16 elements, no iterators give that."""
    with pytest.raises(LayoutError, match=r"cannot slice \[32:80\] of dim 1 .* not a sum of strided digits"):
        slice_region(make((128, 2, 64), (64, 8192, 1)), (128, 128), [(0, 128), (32, 48)])

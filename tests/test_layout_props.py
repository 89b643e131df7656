"""Laws of the layout algebra, checked on random layouts with hypothesis.

Random layouts mix memory iterators with thread iterators that split lanes,
warps and warpgroups in any order and write them on any axis of the thread
hierarchy (a lane step may be written on laneid, tid_in_wg or tx), so the
laws are exercised across every fusion of thread axes."""
import math

from hypothesis import assume, given, settings, strategies as st

from tilec.compiler import ir
from tilec.compiler.layout import (
    Iter,
    LayoutError,
    TileLayout,
    apply,
    canonicalize,
    pack,
    row_major,
    size,
    span,
    split_thread_axes,
    unpack,
)
from tilec.compiler.layout_axes import AXES, in_hierarchy, is_thread, scope_axis
from tilec.compiler.layout_ir import to_layout, to_lit
from tilec.compiler.printer import print_expr
from tilec.compiler.layout_shape import (
    flatten,
    group,
    is_tile_inner,
    is_tile_outer,
    permute_dims,
    slice_region,
    tile,
    tile_to,
)
from tilec.compiler.swizzle import Swizzle
from tilec.grammar.parser import parse

SETTINGS = settings(max_examples=60, deadline=None)

# Where one step of each level may be written, with the step's weight there.
LEVEL_SPELLINGS = {
    "lane": [("laneid", 1), ("tid_in_wg", 1), ("tx", 1)],
    "warp": [("wid_in_wg", 1), ("tid_in_wg", 32), ("warpid", 1), ("tx", 32)],
    "wg": [("wgid", 1), ("warpid", 4), ("tx", 128)],
}
THREAD_WEIGHT = {"laneid": 1, "wid_in_wg": 32, "wgid": 128, "tid_in_wg": 1, "warpid": 32, "tx": 1}


def nonzero(result: dict) -> dict:
    """An apply result with axes at 0 left out (absent means 0)."""
    return {k: v for k, v in result.items() if v}


@st.composite
def level_iters(draw, level, bits_max):
    """Iterators that together enumerate 2**bits positions of one level (a
    random mixed-radix split in a random order), each written on a random
    spelling of that level."""
    bits = draw(st.integers(0, bits_max))
    pieces, left = [], bits
    while left:
        b = draw(st.integers(1, left))
        pieces.append(b)
        left -= b
    order = draw(st.permutations(range(len(pieces))))
    iters, stride = [], 1
    for i in order:
        axis, weight = draw(st.sampled_from(LEVEL_SPELLINGS[level]))
        iters.append(Iter(1 << pieces[i], stride * weight, axis))
        stride <<= pieces[i]
    return iters


@st.composite
def layouts(draw, levels=("lane", "warp", "wg"), swizzle=True, extras=True, max_size=1024):
    mem = draw(st.lists(
        st.builds(Iter, st.sampled_from([1, 2, 3, 4, 8]), st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64]),
                  st.sampled_from(["m", "m", "m", "TCol"])),
        min_size=1, max_size=4))
    bits = {"lane": 5, "warp": 2, "wg": 1}
    thread = [it for level in levels for it in draw(level_iters(level, bits[level]))]
    shard = draw(st.permutations(mem + thread))[:6]
    assume(math.prod(it.extent for it in shard) <= max_size)
    replica, offset = [], {}
    if extras:
        replica = draw(st.lists(st.builds(Iter, st.integers(1, 4), st.integers(0, 64),
                                          st.sampled_from(["m", "TLane"])), max_size=2))
        offset = draw(st.dictionaries(st.sampled_from(["m", "TCol", "wgid", "bx"]), st.integers(0, 40), max_size=2))
    sw = None
    if swizzle and draw(st.booleans()):
        sw = Swizzle(draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.integers(1, 3)))
    try:
        return TileLayout(shard, replica, offset, sw)
    except LayoutError:
        assume(False)


@st.composite
def layout_and_shape(draw, **kw):
    """A layout and a logical shape it groups by: each extent optionally cut
    into two factors, then consecutive runs multiplied into dims."""
    layout = draw(layouts(**kw))
    factors = []
    for it in layout.shard:
        e = it.extent
        cuts = [d for d in range(2, e) if e % d == 0]
        if cuts and draw(st.booleans()):
            d = draw(st.sampled_from(cuts))
            factors += [e // d, d]
        else:
            factors.append(e)
    shape, run = [], 1
    for i, f in enumerate(factors):
        run *= f
        if i == len(factors) - 1 or draw(st.booleans()):
            shape.append(run)
            run = 1
    return layout, tuple(shape)


def all_equal(a: TileLayout, b: TileLayout) -> bool:
    return size(a) == size(b) and all(nonzero(apply(a, i)) == nonzero(apply(b, i)) for i in range(size(a)))


def meaning(layout: TileLayout) -> list:
    """What a layout says, element by element: the set of places each element
    is at (one per replica position), each with every thread axis `apply`
    reports -- at 0 too, since the thread axes a layout names are its scope,
    the threads that own it -- and the memory axes that are not 0."""
    expanded = TileLayout(layout.replica + layout.shard, (), layout.offset, layout.swizzle)
    copies = math.prod(it.extent for it in layout.replica)
    n = size(layout)

    def place(i):
        return frozenset((k, v) for k, v in apply(expanded, i).items() if v or is_thread(k))

    return [frozenset(place(r * n + i) for r in range(copies)) for i in range(n)]


@SETTINGS
@given(layouts())
def test_canonicalize_preserves_apply_and_is_idempotent(layout):
    """canonicalize(L) means what L means (every element's places, thread axes at 0
    included, and every replica position), and canonicalize(canonicalize(L)) == canonicalize(L)."""
    canon = canonicalize(layout)
    assert meaning(canon) == meaning(layout)
    assert canonicalize(canon) == canon


def _scope_levels(layout: TileLayout):
    names = {it.axis for it in layout.shard + layout.replica} | {n for n, _ in layout.offset}
    scope = scope_axis(names)
    return AXES[scope].levels if scope else None


@st.composite
def respelled(draw, layout: TileLayout):
    """Another spelling of `layout`: thread axes split per level, iterators cut
    into digits, unit iterators, zero offsets, stride-0 replicas and an
    identity swizzle added on axes the layout's scope already covers, the
    axis of a stride-0 iterator moved, replicas shuffled.  Each step keeps
    the meaning (the test checks that too)."""
    if draw(st.booleans()):
        try:
            layout = split_thread_axes(layout)
        except LayoutError:
            pass
    levels = _scope_levels(layout)
    threads = {n for n in AXES if is_thread(n) and not in_hierarchy(n)} & (
        {it.axis for it in layout.shard + layout.replica} | {n for n, _ in layout.offset})
    if levels is not None:
        threads |= {n for n, a in AXES.items() if a.levels and levels[0] <= a.levels[0] and a.levels[1] <= levels[1]}
    free = sorted(threads) + ["m", "TLane", "TCol"]  # naming these at 0 changes nothing
    shard = []
    for it in layout.shard:
        cuts = [d for d in range(2, it.extent) if it.extent % d == 0]
        if cuts and draw(st.booleans()):
            d = draw(st.sampled_from(cuts))
            shard += [Iter(it.extent // d, it.stride * d, it.axis), Iter(d, it.stride, it.axis)]
        elif it.stride == 0 and draw(st.booleans()):
            shard.append(Iter(it.extent, 0, draw(st.sampled_from(free))))
        else:
            shard.append(it)
    for _ in range(draw(st.integers(0, 2))):
        shard.insert(draw(st.integers(0, len(shard))), Iter(1, draw(st.integers(0, 3)), draw(st.sampled_from(free))))
    replica = list(layout.replica)
    for _ in range(draw(st.integers(0, 2))):
        replica.append(Iter(draw(st.integers(1, 3)), 0, draw(st.sampled_from(free))))
    replica = draw(st.permutations(replica))
    offset = dict(layout.offset)
    for name in draw(st.lists(st.sampled_from(free), max_size=2)):
        offset.setdefault(name, 0)
    swizzle = layout.swizzle
    if swizzle is None and draw(st.booleans()):
        swizzle = Swizzle(draw(st.integers(0, 3)), 0, draw(st.integers(1, 3)))
    return TileLayout(shard, replica, offset, swizzle)


@SETTINGS
@given(st.data())
def test_spellings_of_one_layout_canonicalize_equal(data):
    """Two spellings of one layout (same meaning) have one canonical form."""
    layout = data.draw(layouts())
    other = data.draw(respelled(layout))
    assert meaning(other) == meaning(layout)
    assert canonicalize(other) == canonicalize(layout)


@SETTINGS
@given(layouts(swizzle=False))
def test_fused_and_split_thread_axes_agree(layout):
    """Thread axes fused (canonicalize) and split to lane/warp/warpgroup (split_thread_axes)
    send every element to the same thread and offset, and split then canonicalize is canonicalize."""
    split = split_thread_axes(layout)
    assert all(it.axis in ("m", "TCol", "laneid", "wid_in_wg", "wgid") for it in split.shard)
    assert all_equal(split, layout)
    assert all_equal(split_thread_axes(canonicalize(layout)), layout)
    assert canonicalize(split) == canonicalize(layout)


@SETTINGS
@given(layout_and_shape())
def test_group_then_flatten_preserves_the_mapping(case):
    """group(L, shape) cuts the shard so dim d's extents multiply to shape[d], without changing
    the function; flatten of it is again the same function."""
    layout, shape = case
    grouped = group(layout, shape)
    assert tuple(math.prod(it.extent for it in grouped.dim(d)) for d in range(len(shape))) == shape
    assert all_equal(grouped.layout, layout)
    assert all_equal(flatten(grouped), layout)


def _coords(shape):
    return [tuple(c) for c in __import__("itertools").product(*map(range, shape))]


@st.composite
def sliceable(draw):
    """A layout, a shape, and a region each of whose dims is a run of one digit of the
    grouped iterators over whole inner digits: the regions slicing must accept."""
    layout, shape = draw(layout_and_shape())
    grouped = group(layout, shape)
    region = []
    for d in range(len(shape)):
        iters = grouped.dim(d)
        if not iters:
            region.append((0, 1))
            continue
        j = draw(st.integers(0, len(iters) - 1))
        inner = math.prod(it.extent for it in iters[j + 1:])
        outer_digits = [draw(st.integers(0, it.extent - 1)) for it in iters[:j]]
        digit = draw(st.integers(0, iters[j].extent - 1))
        count = draw(st.integers(1, iters[j].extent - digit))
        start = 0
        for it, dg in zip(iters[:j], outer_digits):
            start = start * it.extent + dg
        start = (start * iters[j].extent + digit) * inner
        region.append((start, count * inner))
    return layout, shape, region


@SETTINGS
@given(sliceable())
def test_slice_agrees_with_apply_on_the_region(case):
    """slice_region(L, shape, region) at c gives L at start + c, for every c in the region."""
    layout, shape, region = case
    sub = slice_region(layout, shape, region)
    sub_shape = tuple(e for _, e in region)
    for c in _coords(sub_shape):
        full = tuple(s + x for (s, _), x in zip(region, c))
        assert nonzero(apply(sub, c, sub_shape)) == nonzero(apply(layout, full, shape))


@SETTINGS
@given(layout_and_shape(extras=False), st.data())
def test_slice_either_agrees_or_says_why(case, data):
    """Any in-bounds region either slices to a layout that agrees with apply or raises LayoutError."""
    layout, shape = case
    region = []
    for e in shape:
        start = data.draw(st.integers(0, e - 1))
        region.append((start, data.draw(st.integers(1, e - start))))
    try:
        sub = slice_region(layout, shape, region)
    except LayoutError:
        return
    sub_shape = tuple(e for _, e in region)
    for c in _coords(sub_shape):
        full = tuple(s + x for (s, _), x in zip(region, c))
        assert nonzero(apply(sub, c, sub_shape)) == nonzero(apply(layout, full, shape))


def _split(result):
    """An apply result as (memory axes, thread position in CTA thread units)."""
    threads = sum(v * THREAD_WEIGHT[k] for k, v in result.items() if k in THREAD_WEIGHT)
    return {k: v for k, v in result.items() if k not in THREAD_WEIGHT and v}, threads


@st.composite
def tile_case(draw):
    """Inner: memory iterators and lanes.  Outer: memory iterators and warps or
    warpgroups, so the thread parts of the two never overlap."""
    inner, inner_shape = draw(layout_and_shape(levels=("lane",), swizzle=False, extras=False, max_size=256))
    mem = draw(st.lists(st.builds(Iter, st.sampled_from([1, 2, 3]), st.sampled_from([0, 1, 2, 5]),
                                  st.sampled_from(["m", "TCol"])), min_size=1, max_size=2))
    warps = draw(st.sampled_from([[], [Iter(2, 1, "wid_in_wg")], [Iter(2, 1, "wgid")]]))
    shard = draw(st.permutations(mem + warps))
    outer = TileLayout(shard)
    # an outer shape of the inner's rank that outer groups by: all of it in one dim
    k = draw(st.integers(0, len(inner_shape) - 1))
    outer_shape = tuple(size(outer) if d == k else 1 for d in range(len(inner_shape)))
    return outer, inner, outer_shape, inner_shape


@SETTINGS
@given(tile_case())
def test_tile_is_outer_times_inner_span_plus_inner(case):
    """tile(O, I) at (o * inner_shape + i) is O(o) with each memory axis scaled by span(I, axis),
    plus I(i); thread positions add."""
    outer, inner, outer_shape, inner_shape = case
    tiled = tile(outer, inner, outer_shape, inner_shape)
    full = tuple(o * i for o, i in zip(outer_shape, inner_shape))
    for o in _coords(outer_shape):
        om, ot = _split(apply(outer, o, outer_shape))
        for i in _coords(inner_shape):
            im, it = _split(apply(inner, i, inner_shape))
            want = {k: om.get(k, 0) * span(inner, k) + im.get(k, 0) for k in set(om) | set(im)}
            got = apply(tiled, tuple(a * n + b for a, n, b in zip(o, inner_shape, i)), full)
            assert _split(got) == ({k: v for k, v in want.items() if v}, ot + it)


@st.composite
def fragment_case(draw):
    """A register fragment and a grid to repeat it over.  Each of 1-3 dims is a random
    order of register iterators, lane iterators (a random split of up to 16 lanes spread
    over the dims) and at most one TCol iterator; each dim's registers get its place
    values in a random order, the dims row-major.  Returns the atom, its shape, each
    dim's register count and the grid counts."""
    rank = draw(st.integers(1, 3))
    dims = [[] for _ in range(rank)]
    for it in draw(level_iters("lane", 4)):
        dims[draw(st.integers(0, rank - 1))].append(it)
    regs = []
    for d in range(rank):
        extents = draw(st.lists(st.sampled_from([2, 3, 4]), max_size=2 if rank < 3 else 1))
        values, place = [], 1
        for e in extents:
            values.append(place)
            place *= e
        regs.append(place)
        order = draw(st.permutations(range(len(extents))))
        dims[d] += [("reg", extents[k], values[k]) for k in order]
        if draw(st.booleans()):
            dims[d].append(Iter(draw(st.sampled_from([2, 3])), draw(st.sampled_from([1, 5])), "TCol"))
        dims[d] = draw(st.permutations(dims[d]))
    shard, shape = [], []
    for d in range(rank):
        below = math.prod(regs[d + 1:])
        iters = [Iter(it[1], it[2] * below) if isinstance(it, tuple) else it for it in dims[d]] or [Iter(1, 1)]
        shard += iters
        shape.append(math.prod(it.extent for it in iters))
    offset = draw(st.dictionaries(st.sampled_from(["m", "TCol", "bx"]), st.integers(0, 9), max_size=2))
    atom = TileLayout(shard, offset=offset)
    counts = tuple(draw(st.sampled_from([1, 2, 3])) for _ in range(rank))
    assume(math.prod(shape) * math.prod(counts) <= 1024)
    return atom, tuple(shape), tuple(regs), counts


@SETTINGS
@given(fragment_case())
def test_tile_to_matches_its_definition(case):
    """tile_to(L, shape, atom) is the reference's tile(S[counts], counts, atom): element
    o * atom + i is on L(i)'s threads and other axes, and on m at L(i) plus the row-major
    index of o over the grid times L's m span (every repeat above all of L's registers).
    A grid of ones gives L back."""
    atom, atom_shape, regs, counts = case
    full = tuple(c * a for c, a in zip(counts, atom_shape))
    tiled = tile_to(atom, full, atom_shape)
    assert all_equal(tiled, tile(row_major(counts), atom, counts, atom_shape))
    step = span(atom, "m")
    for x in _coords(full):
        o = [xd // a for xd, a in zip(x, atom_shape)]
        i = tuple(xd % a for xd, a in zip(x, atom_shape))
        want = apply(atom, i, atom_shape)
        want["m"] = want.get("m", 0) + step * _row_major_index(o, counts)
        assert nonzero(apply(tiled, x, full)) == nonzero(want), x
    assert all_equal(tile_to(atom, atom_shape, atom_shape), atom)


def _row_major_index(o, counts) -> int:
    k = 0
    for od, c in zip(o, counts):
        k = k * c + od
    return k


@SETTINGS
@given(tile_case())
def test_tiles_are_recognised(case):
    """For T = tile(O, I), is_tile_inner(I, T) and is_tile_outer(O, T) find parts that rebuild T."""
    outer, inner, outer_shape, inner_shape = case
    full = tuple(o * i for o, i in zip(outer_shape, inner_shape))
    tiled = tile(outer, inner, outer_shape, inner_shape)
    found_outer = is_tile_inner(inner, tiled, full, inner_shape)
    assert found_outer is not None
    assert canonicalize(tile(found_outer, inner, outer_shape, inner_shape)) == canonicalize(tiled)
    found_inner = is_tile_outer(outer, tiled, full, outer_shape)
    assert found_inner is not None
    assert canonicalize(tile(outer, found_inner, outer_shape, inner_shape)) == canonicalize(tiled)


@SETTINGS
@given(layout_and_shape(), st.data())
def test_permute_dims_moves_coordinates(case, data):
    """permute_dims(L, shape, perm) at c gives L at the coordinate whose dim perm[k] is c[k]."""
    layout, shape = case
    perm = data.draw(st.permutations(range(len(shape))))
    moved = permute_dims(layout, shape, perm)
    new_shape = tuple(shape[p] for p in perm)
    for c in _coords(new_shape)[:256]:
        orig = [0] * len(shape)
        for k, p in enumerate(perm):
            orig[p] = c[k]
        assert nonzero(apply(moved, c, new_shape)) == nonzero(apply(layout, tuple(orig), shape))


@SETTINGS
@given(layouts(), st.sampled_from([1, 2, 4]))
def test_unpack_then_pack_is_identity(layout, n):
    """pack(unpack(L, n), n) == L; unpack(L, n) at i*n + r is n*L(i) + r on m (before the swizzle)."""
    assert pack(unpack(layout, n), n) == layout
    plain = TileLayout(layout.shard, layout.replica, layout.offset)
    wide = unpack(plain, n)
    for i in range(min(size(plain), 64)):
        base = apply(plain, i)
        for r in range(n):
            assert apply(wide, i * n + r) == {**base, "m": base["m"] * n + r}


@SETTINGS
@given(st.integers(0, 4), st.integers(0, 3), st.integers(1, 4))
def test_swizzle_is_a_bijection_on_its_atom(p, b, a):
    """SW[p, b, a] permutes each aligned atom of 2**(p+a+b) offsets and each aligned block of 2**(p+b)."""
    sw = Swizzle(p, b, a)
    for base in (0, sw.period, 5 * sw.period):
        atom = range(base, base + sw.period)
        assert sorted(sw(o) for o in atom) == list(atom)
    for start in range(0, sw.period, sw.block):
        block = range(start, start + sw.block)
        assert sorted(sw(o) for o in block) == list(block)


@SETTINGS
@given(layouts())
def test_to_lit_round_trips(layout):
    """to_layout(to_lit(L)) == L, and the literal's children are integer literals."""
    lit = to_lit(layout)
    assert isinstance(lit, ir.LayoutLit)
    nodes = lit.shard + lit.replica + lit.offset
    assert all(isinstance(it.extent, ir.Int) and isinstance(it.stride, ir.Int) for it in nodes)
    assert to_layout(lit) == layout


@SETTINGS
@given(layouts())
def test_str_is_the_printed_literal_and_parses_back(layout):
    """str(L) is the printer's text of to_lit(L), and parsing that text gives L again."""
    text = print_expr(to_lit(layout))
    assert str(layout) == text
    (const,) = parse(f"const X = {text}\n").consts
    assert to_layout(const.value) == layout


def test_random_layouts_cover_every_thread_axis():
    """The strategy reaches each thread-hierarchy axis (a guard on the strategy itself)."""
    seen = set()

    @settings(max_examples=200, deadline=None)
    @given(layouts(swizzle=False, extras=False))
    def collect(layout):
        seen.update(it.axis for it in layout.shard)

    collect()
    assert {"laneid", "wid_in_wg", "wgid", "tid_in_wg", "warpid", "tx"} <= seen

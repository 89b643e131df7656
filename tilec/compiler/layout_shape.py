"""Layout operations that need a logical shape: grouping, slicing, tiling,
permuting.

A layout is a function of the flat element index; a buffer of shape (16, 8)
reads that index row-major.  *Grouping* cuts the shard iterators where the
buffer's dims begin and end -- D_FRAG's `(2, 8, 4, 2)` grouped by (16, 8) is
`(2, 8)` for rows and `(4, 2)` for columns -- splitting an iterator when a
dim boundary falls inside it.  Everything here starts from a grouping: a
slice keeps a run of each dim's digits, a tiling interleaves two groupings
dim by dim, a permutation reorders the groups.
"""
from __future__ import annotations

from math import prod
from typing import Optional, Sequence

from tilec.compiler import records
from tilec.compiler.layout_axes import in_hierarchy, is_thread
from tilec.compiler.layout import (
    Iter,
    LayoutError,
    TileLayout,
    canonicalize,
    fuse_contiguous,
    join_thread_axes,
    row_major,
    size,
    span,
    split_thread_axes,
)

__all__ = [
    "Grouped", "group", "flatten", "slice_region", "tile", "tile_to", "is_tile_inner",
    "is_tile_outer", "permute_by_groups", "permute_dims", "reduce_dims",
]


@records.frozen
class Grouped:
    """A layout whose shard is cut by a logical shape: the iterators of dim d
    are `layout.shard[seps[d]:seps[d + 1]]`, outermost first (none for a dim
    of extent 1).  `layout` is the same function as the one grouped."""

    layout: TileLayout
    shape: tuple[int, ...]
    seps: tuple[int, ...]

    def dim(self, d: int) -> tuple[Iter, ...]:
        return self.layout.shard[self.seps[d]:self.seps[d + 1]]


def _shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    shape = tuple(shape)
    if not shape or not all(type(e) is int and e >= 1 for e in shape):
        raise LayoutError(f"{what} must be one or more positive integers, got {shape}")
    return shape


def group(layout: TileLayout, shape: Sequence[int]) -> Grouped:
    """`layout` cut by `shape`: each dim boundary must fall between two
    iterators or inside one at a factor of its extent (then it is split).
    An error names the iterator that straddles a boundary."""
    shape = _shape(shape, "a shape")
    if prod(shape) != size(layout):
        raise LayoutError(
            f"layout {layout} has {size(layout)} elements but shape {shape} has {prod(shape)}"
        )
    pending = list(layout.shard)  # consumed from the innermost end
    groups: list[list[Iter]] = []
    for d in reversed(range(len(shape))):
        need, dim = shape[d], []
        while need > 1:
            it = pending.pop()
            if it.extent <= need:
                if need % it.extent:
                    raise _straddle(layout, shape, it, d)
                dim.append(it)
                need //= it.extent
            else:
                if it.extent % need:
                    raise _straddle(layout, shape, it, d)
                dim.append(Iter(need, it.stride, it.axis))
                pending.append(Iter(it.extent // need, it.stride * need, it.axis))
                need = 1
        groups.append(dim[::-1])
    groups.reverse()
    groups[0][:0] = pending  # only unit iterators are left over
    seps, shard = [0], []
    for dim in groups:
        shard.extend(dim)
        seps.append(len(shard))
    return Grouped(records.evolve(layout, shard=shard), shape, tuple(seps))


def _straddle(layout, shape, it, d) -> LayoutError:
    return LayoutError(
        f"layout {layout} cannot be grouped by shape {shape}: iterator {it} "
        f"straddles the boundary of dim {d} (extent {shape[d]})"
    )


def flatten(grouped: Grouped) -> TileLayout:
    """Forget the grouping: contiguous iterators, such as those `group`
    split, are fused again.  The result is the same function of the flat
    index."""
    return records.evolve(grouped.layout, shard=fuse_contiguous(grouped.layout.shard))


def slice_region(
    layout: TileLayout, shape: Sequence[int], region: Sequence[tuple[int, int]]
) -> TileLayout:
    """The layout of the sub-tile `region` ((start, extent) per dim) of a
    buffer of `shape`: at index c of the region it gives what `layout` gives
    at start + c.  The start's position becomes an offset (inside the
    swizzle).  Possible when each dim's range keeps whole inner digits and a
    run of one more that does not wrap; the error says which dim and why."""
    shape = _shape(shape, "a shape")
    if len(region) != len(shape):
        raise LayoutError(f"region {tuple(region)} has {len(region)} dims but shape {shape} has {len(shape)}")
    grouped = group(layout, shape)
    shard: list[Iter] = []
    offset = dict(layout.offset)
    for d, (start, extent) in enumerate(region):
        if extent < 1 or start < 0 or start + extent > shape[d]:
            raise LayoutError(f"region [{start}:{start + extent}] is outside dim {d} of shape {shape}")
        iters = grouped.dim(d)
        digits, rest = [], start
        for it in reversed(iters):
            rest, digit = divmod(rest, it.extent)
            digits.append(digit)
        digits.reverse()
        for it, digit in zip(iters, digits):
            if digit * it.stride:
                offset[it.axis] = offset.get(it.axis, 0) + digit * it.stride
        whole, inner = len(iters), 1  # iters[whole:] are covered entirely
        while whole > 0 and extent % (inner * iters[whole - 1].extent) == 0:
            inner *= iters[whole - 1].extent
            whole -= 1
        count = extent // inner
        if whole == 0:
            shard.extend(iters)
            continue
        part = iters[whole - 1]
        if start % inner or digits[whole - 1] + count > part.extent:
            fitted = _fit_range(iters, start, extent)
            if fitted is None:
                split = ", ".join(str(it) for it in iters)
                raise LayoutError(
                    f"cannot slice [{start}:{start + extent}] of dim {d} of layout {layout}: "
                    f"the dim's digits are ({split}); the range is not a run of one digit over "
                    "whole inner ones, and no iterators give its elements in order (their offsets "
                    "are not a sum of strided digits)"
                )
            shard.extend(fitted)
            continue
        shard.append(Iter(count, part.stride, part.axis))
        shard.extend(iters[whole:])
    named = {it.axis for it in shard + list(layout.replica)} | set(offset)
    for it in layout.shard:
        if in_hierarchy(it.axis) and it.axis not in named:
            offset[it.axis] = 0  # a zero offset keeps the layout's thread scope
    return TileLayout(shard or [Iter(1, 1)], layout.replica, offset, layout.swizzle)


def _offsets_along(iters: Sequence[Iter], index: int) -> dict[str, int]:
    """What a dim's iterators (outermost first) give index `index` of it."""
    out: dict[str, int] = {}
    for it in reversed(iters):
        index, digit = divmod(index, it.extent)
        if digit * it.stride:
            out[it.axis] = out.get(it.axis, 0) + digit * it.stride
    return out


def _fit_range(iters: Sequence[Iter], start: int, extent: int) -> Optional[list[Iter]]:
    """Iterators (outermost first) that give element c of the range
    [start, start + extent) of a dim what `iters` give start + c, less what
    they give start; None when there are none.  A range that starts inside
    one digit and crosses into the next (columns 32..95 of two 64-column
    chunks 8192 apart) is such a layout: `(2, 32) : (8160, 1)`.  Each
    iterator is the longest run from the last one's step that is a
    multiple of one axis's stride and divides what is left; the whole range
    is then checked element by element."""
    base = _offsets_along(iters, start)

    def relative(c: int) -> dict[str, int]:
        at = _offsets_along(iters, start + c)
        return {a: at.get(a, 0) - base.get(a, 0) for a in at.keys() | base.keys() if at.get(a, 0) != base.get(a, 0)}

    rel = [relative(c) for c in range(extent)]
    fitted, unit = [], 1
    while unit < extent:
        step = rel[unit]
        if len(step) != 1:
            return None
        (axis, stride), = step.items()
        run = 1
        while unit * (run + 1) <= extent and rel[unit * run] == {axis: stride * run}:
            run += 1
        n = next((k for k in range(run, 1, -1) if (extent // unit) % k == 0), None)
        if n is None:
            return None
        fitted.append(Iter(n, stride, axis))
        unit *= n
    fitted.reverse()
    for c in range(extent):
        if _offsets_along(fitted, c) != rel[c]:
            return None
    return fitted or [Iter(1, 1)]


def tile(
    outer: TileLayout, inner: TileLayout, outer_shape: Sequence[int], inner_shape: Sequence[int]
) -> TileLayout:
    """Repeat `inner` (over `inner_shape`) in the pattern of `outer` (over
    `outer_shape`): the result is over the shape of per-dim products, and
    element (o * inner_shape + i) goes to outer(o) * span(inner) + inner(i),
    where outer's value on each axis that inner's shard uses is scaled by
    inner's span there (an outer on other axes, such as warps over a lane
    fragment, is not scaled).  Outer replicas and offsets scale alike.
    Inner's swizzle carries over when every scaled outer step on `m` is a
    multiple of its period; the outer may not be swizzled."""
    outer_shape = _shape(outer_shape, "an outer shape")
    inner_shape = _shape(inner_shape, "an inner shape")
    if len(outer_shape) != len(inner_shape):
        raise LayoutError(f"outer shape {outer_shape} and inner shape {inner_shape} differ in rank")
    if outer.swizzle is not None:
        raise LayoutError(f"cannot tile with a swizzled outer layout {outer}")
    go, gi = group(outer, outer_shape), group(inner, inner_shape)
    spans = {it.axis: span(inner, it.axis) for it in inner.shard}

    def scale(it: Iter) -> Iter:
        return Iter(it.extent, it.stride * spans.get(it.axis, 1), it.axis)

    offset = dict(inner.offset)
    for name, value in outer.offset:
        offset[name] = offset.get(name, 0) + value * spans.get(name, 1)
    if inner.swizzle is not None:
        period = inner.swizzle.period
        steps = [it.stride for it in map(scale, outer.shard + outer.replica) if it.axis == "m" and it.extent > 1]
        steps.append(dict(outer.offset).get("m", 0) * spans.get("m", 1))
        if any(s % period for s in steps):
            raise LayoutError(
                f"cannot tile {inner} by {outer}: the outer steps {steps} on m are not all "
                f"multiples of the swizzle period {period}, so the swizzle would not repeat"
            )
    shard: list[Iter] = []
    for d in range(len(outer_shape)):
        shard.extend(scale(it) for it in go.dim(d))
        shard.extend(gi.dim(d))
    replica = inner.replica + tuple(scale(it) for it in outer.replica)
    return TileLayout(shard, replica, offset, inner.swizzle)


def _divide(shape, by, what) -> tuple[int, ...]:
    shape, by = _shape(shape, "a shape"), _shape(by, what)
    if len(shape) != len(by) or any(s % b for s, b in zip(shape, by)):
        raise LayoutError(f"shape {shape} is not a whole number of {what} {by} in every dim")
    return tuple(s // b for s, b in zip(shape, by))


def tile_to(layout: TileLayout, shape: Sequence[int], atom_shape: Sequence[int]) -> TileLayout:
    """`layout` (over `atom_shape`) repeated row-major to cover `shape`:
    `tile(row_major(counts), layout, counts, atom_shape)` with counts =
    shape / atom_shape, the reference system's definition, so a program
    that calls it on a memory layout gets the reference's placement
    (`S[(8, 8) : (8, 1)]` to (64, 64) is `S[(8, 8, 8, 8) : (512, 8, 64, 1)]`:
    whole 8x8 blocks, row-major).  On seed 001's A fragment it gives the
    PTX figure's register order (kHi, rM, kp); see docs/layout.md."""
    counts = _divide(shape, atom_shape, "atom shape")
    tiled = tile(row_major(counts), layout, counts, atom_shape)
    # a dim repeated once adds a unit iterator, which changes nothing
    return records.evolve(tiled, shard=[it for it in tiled.shard if it.extent != 1] or [Iter(1, 1)])


def _interleaved(tiled_shape, part_shape, part_is_inner) -> tuple[tuple[int, ...], tuple[int, ...]]:
    other = _divide(tiled_shape, part_shape, "part shape")
    pairs = zip(other, part_shape) if part_is_inner else zip(part_shape, other)
    return other, tuple(e for pair in pairs for e in pair)


def _candidate_parts(tiled: TileLayout, factored: tuple[int, ...]) -> Optional[Grouped]:
    """`tiled` grouped by the interleaved (outer, inner) shape, its thread
    iterators split per level when they can be: a canonical tiled layout has
    fused warps and lanes into tid_in_wg, which no part alone uses.  The
    candidate parts are only a guess; the callers check them by re-tiling."""
    try:
        tiled = split_thread_axes(tiled)
    except LayoutError:
        pass
    try:
        return group(tiled, factored)
    except LayoutError:
        return None


def _same(a: TileLayout, b: TileLayout) -> bool:
    return canonicalize(a) == canonicalize(b)


def _checked(part: TileLayout, tiling, tiled: TileLayout) -> Optional[TileLayout]:
    """`part` when `tiling(part)` is `tiled`, written on the thread axes the
    caller uses (per-level pieces joined back, when that is still the part)
    and without the zero thread offsets that splitting `tiled` gave it when
    the other part already names those axes; None when it is not."""
    joined = join_thread_axes(part)
    bare = records.evolve(joined, offset=[(n, v) for n, v in joined.offset if v or not is_thread(n)])
    for candidate in (bare, joined, part):
        try:
            if _same(tiling(candidate), tiled):
                return candidate
        except LayoutError:
            pass
    return None


def _split_like_parts(layout: TileLayout) -> TileLayout:
    """`layout` with its thread axes split per level, as `_candidate_parts`
    splits the tiled layout, so that its replicas and offsets compare with
    the parts' (`R[2 : 1@warpid]` is `R[2 : 1@wid_in_wg]` there)."""
    try:
        return split_thread_axes(layout)
    except LayoutError:
        return layout


def is_tile_inner(
    layout: TileLayout, tiled: TileLayout, tiled_shape: Sequence[int], inner_shape: Sequence[int]
) -> Optional[TileLayout]:
    """The outer layout O with `tile(O, layout, ...) == tiled` (as canonical
    layouts) when `layout` over `inner_shape` is the inner part of `tiled`
    over `tiled_shape`; None when it is not."""
    outer_shape, factored = _interleaved(tiled_shape, inner_shape, True)
    parts = _candidate_parts(tiled, factored)
    if parts is None or tiled.swizzle != layout.swizzle:
        return None
    given, layout = layout, _split_like_parts(layout)
    pieces = parts.layout
    spans = {it.axis: span(layout, it.axis) for it in layout.shard}
    shard = []
    for d in range(len(outer_shape)):
        for it in parts.dim(2 * d):
            unit = spans.get(it.axis, 1)
            if it.extent == 1:
                continue  # its stride means nothing; grouping may hand the outer an inner one
            if it.stride % unit:
                return None
            shard.append(Iter(it.extent, it.stride // unit, it.axis))
    offset = {}
    inner_offset = dict(layout.offset)
    for name, value in pieces.offset:
        rest = value - inner_offset.get(name, 0)
        unit = spans.get(name, 1)
        if rest < 0 or rest % unit:
            return None
        offset[name] = rest // unit
    replica = list(pieces.replica)
    for it in layout.replica:
        if it not in replica:
            return None
        replica.remove(it)
    for it in replica:
        if it.stride % spans.get(it.axis, 1):
            return None
    replica = [Iter(it.extent, it.stride // spans.get(it.axis, 1), it.axis) for it in replica]
    try:
        outer = TileLayout(shard or [Iter(1, 1)], replica, offset)
    except LayoutError:
        return None
    return _checked(outer, lambda o: tile(o, given, outer_shape, inner_shape), tiled)


def is_tile_outer(
    layout: TileLayout, tiled: TileLayout, tiled_shape: Sequence[int], outer_shape: Sequence[int]
) -> Optional[TileLayout]:
    """The inner layout I with `tile(layout, I, ...) == tiled` (as canonical
    layouts) when `layout` over `outer_shape` is the outer part of `tiled`
    over `tiled_shape`; None when it is not."""
    inner_shape, factored = _interleaved(tiled_shape, outer_shape, False)
    parts = _candidate_parts(tiled, factored)
    if parts is None or layout.swizzle is not None:
        return None
    given, layout = layout, _split_like_parts(layout)
    pieces = parts.layout
    shard = [it for d in range(len(inner_shape)) for it in parts.dim(2 * d + 1)] or [Iter(1, 1)]
    spans = {it.axis: span(TileLayout(shard), it.axis) for it in shard}
    offset = dict(pieces.offset)
    for name, value in layout.offset:
        offset[name] = offset.get(name, 0) - value * spans.get(name, 1)
        if offset[name] < 0:
            return None
    replica = list(pieces.replica)
    for it in layout.replica:
        scaled = Iter(it.extent, it.stride * spans.get(it.axis, 1), it.axis)
        if scaled not in replica:
            return None
        replica.remove(scaled)
    try:
        inner = TileLayout(shard, replica, offset, tiled.swizzle)
    except LayoutError:
        return None
    return _checked(inner, lambda i: tile(given, i, outer_shape, inner_shape), tiled)


def permute_by_groups(layout: TileLayout, seps: Sequence[int], perm: Sequence[int]) -> TileLayout:
    """The shard's iterator groups `shard[seps[i]:seps[i + 1]]` reordered so
    that group perm[k] comes k-th.  The groups must cover the shard."""
    seps, perm = tuple(seps), tuple(perm)
    n = len(seps) - 1
    if n < 0 or seps[0] != 0 or seps[-1] != len(layout.shard) or list(seps) != sorted(seps):
        raise LayoutError(f"separators {seps} do not cut the {len(layout.shard)} iterators of {layout} in order")
    if sorted(perm) != list(range(n)):
        raise LayoutError(f"{perm} is not a permutation of the {n} groups")
    shard = [it for g in perm for it in layout.shard[seps[g]:seps[g + 1]]]
    return records.evolve(layout, shard=shard)


def permute_dims(layout: TileLayout, shape: Sequence[int], perm: Sequence[int]) -> TileLayout:
    """The layout over shape `(shape[perm[0]], shape[perm[1]], ...)` with
    element c at what `layout` gives at the coordinate whose dim perm[k] is
    c[k]: a transposed view of the same storage."""
    grouped = group(layout, shape)
    return permute_by_groups(grouped.layout, grouped.seps, perm)


def reduce_dims(layout: TileLayout, shape: Sequence[int], axes: Sequence[int]) -> TileLayout:
    """The layout of a register buffer holding the reduction of `layout`
    (over `shape`) along dims `axes`: the same shape with those dims of
    extent 1, each kept element held by every thread that held a piece of
    its row.

    That is what a reduction leaves behind: the threads that shared a row
    (the reduced dims' thread iterators) all end with its result, so their
    iterators become replicas; the reduced dims' registers go, and the kept
    registers are renumbered compactly in their old order.  For the wgmma
    accumulator `S[(4, 2, 8, 8, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4,
    1@tid_in_wg, 1)]` over (64, 64), reducing dim 1 gives `S[(4, 2, 8) :
    (32@tid_in_wg, 1, 4@tid_in_wg)] + R[4 : 1@tid_in_wg]` over (64, 1): two
    row values per thread, the same in the four lanes of a quad."""
    shape = _shape(shape, "a shape")
    axes = tuple(axes)
    if not axes or len(set(axes)) != len(axes) or not all(type(a) is int and 0 <= a < len(shape) for a in axes):
        raise LayoutError(f"the reduced axes {axes} must be distinct dims of shape {shape}")
    if layout.swizzle is not None or any(it.axis == "m" for it in layout.replica):
        raise LayoutError(f"cannot reduce {layout}: a register layout has no swizzle and no replica on m")
    grouped = group(layout, shape)
    shard, replica = [], list(layout.replica)
    for d in range(len(shape)):
        for it in grouped.dim(d):
            if it.axis != "m" and not is_thread(it.axis):
                raise LayoutError(f"cannot reduce {layout}: iterator {it} is on {it.axis}, not on registers or threads")
            if d not in axes:
                shard.append(it)
            elif is_thread(it.axis) and it.extent > 1:
                replica.append(it)
    registers = sorted((it.stride, i) for i, it in enumerate(shard) if it.axis == "m")
    stride = 1
    for _, i in registers:
        shard[i] = Iter(shard[i].extent, stride)
        stride *= shard[i].extent
    offset = [(n, v) for n, v in layout.offset if n != "m"]
    return TileLayout(shard or [Iter(1, 1)], replica, offset)

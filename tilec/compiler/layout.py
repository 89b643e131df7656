"""The layout algebra: where each element of a tile lives.

A `TileLayout` is a function from an element's index to a point on named axes
(`tilec.compiler.layout_axes`): an offset in memory and, for tiles spread over
threads, the position of the thread holding it.  It is written
`SW[p, b, a] * S[(e0, e1, ...) : (s0, s1@axis, ...)] + R[...] + O[...]`:

- the *shard* iterators `extent:stride@axis` split the flat element index
  into digits, outermost first; digit k adds `digit * stride` on its axis
  (`m` when none is written).  A buffer of logical shape (16, 8) *groups* the
  iterators by that shape (see `tilec.compiler.layout_shape`);
- *replica* iterators `R[...]` broadcast the whole tile: every element is
  also at each replica position (tensor memory's `R[4:32@TLane]`);
- per-axis *offsets* `O[...]` are added to every element; the thread
  axes a layout names, with an offset of 0 too, are its *scope*, the
  threads that own it (docs/layout.md);
- an optional XOR *swizzle* is applied to the `m` offset last.

Layouts are immutable and every operation is a pure function returning a new
one.  Errors are `LayoutError`s that say why, so the caller can locate them.
This module holds the value, its metrics and the shape-free rewrites;
`layout_shape` the operations that need a logical shape; `shared_layouts` the
hardware shared-memory layouts.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from math import prod
from typing import Optional, Sequence, Union

from tilec.compiler import records
from tilec.compiler.layout_axes import (
    AXES,
    AXIS_ORDER,
    BASE_AXES,
    LayoutError,
    axis as lookup_axis,
    in_hierarchy,
    is_thread,
    place_value,
    scope_axis,
    split_iter,
    split_value,
)
from tilec.compiler.swizzle import Swizzle

__all__ = [
    "Iter", "TileLayout", "LayoutError", "make", "row_major", "apply", "size", "span",
    "cosize", "canonicalize", "join_thread_axes", "split_thread_axes", "storage", "storage_size", "pack",
    "unpack",
]


@records.frozen
class Iter:
    """One iterator `extent:stride@axis`."""

    extent: int
    stride: int
    axis: str = "m"

    def __str__(self) -> str:
        return f"{self.extent}:{_stride_str(self.stride, self.axis)}"


def _stride_str(stride: int, axis: str) -> str:
    return str(stride) if axis == "m" else f"{stride}@{axis}"


def _offsets(value) -> tuple[tuple[str, int], ...]:
    """Offsets as (axis, value) pairs in axis order, from a mapping or pairs."""
    if not value:
        return ()  # most layouts: nothing to check or sort
    items = list(value.items() if isinstance(value, Mapping) else value)
    for name, _ in items:
        lookup_axis(name)
    if len({name for name, _ in items}) != len(items):
        raise LayoutError(f"an offset names an axis twice: {items}")
    return tuple(sorted(((n, v) for n, v in items), key=lambda kv: AXIS_ORDER[kv[0]]))


def _check_int(value, what: str, minimum: int) -> None:
    if type(value) is not int or value < minimum:
        raise LayoutError(f"{what} must be an integer >= {minimum}, got {value!r}")


def _iters(items) -> tuple:
    """The converter of the iterator fields: `tuple`, as a Python function
    (attrs reads a converter's signature when the class is made, and the
    signature of a builtin costs a tokenizer start in every process)."""
    return tuple(items)


@records.frozen
class TileLayout:
    """`swizzle * S[shard] + R[replica] + O[offset]`; see the module docstring.

    `offset` is a tuple of (axis, value) pairs in axis order (a mapping is
    accepted).  Construction checks that extents are positive, strides and
    offsets non-negative, axes known, and that no thread axis is sent past its
    extent (a lane above 31)."""

    shard: tuple[Iter, ...] = records.field(converter=_iters)
    replica: tuple[Iter, ...] = records.field(default=(), converter=_iters)
    offset: tuple[tuple[str, int], ...] = records.field(default=(), converter=_offsets)
    swizzle: Optional[Swizzle] = None

    def __post_init__(self):
        if not self.shard:
            raise LayoutError("a layout needs at least one shard iterator (S[1 : 1] for one element)")
        for kind, iters in (("shard", self.shard), ("replica", self.replica)):
            for it in iters:
                if not isinstance(it, Iter):
                    raise LayoutError(f"{kind} iterators must be Iter values, got {it!r}")
                if it.axis not in AXES:
                    lookup_axis(it.axis)
                if type(it.extent) is not int or it.extent < 1:
                    raise LayoutError(f"the extent of {kind} iterator {it} must be an integer >= 1")
                if type(it.stride) is not int or it.stride < 0:
                    raise LayoutError(f"the stride of {kind} iterator {it} must be an integer >= 0")
        for name, value in self.offset:
            if type(value) is not int or value < 0:
                raise LayoutError(f"the offset on {name} must be an integer >= 0, got {value!r}")
        if self.swizzle is not None and not isinstance(self.swizzle, Swizzle):
            raise LayoutError(f"a layout's swizzle must be a Swizzle, got {self.swizzle!r}")
        _check_thread_ranges(self)

    @functools.cached_property
    def canonical(self) -> "TileLayout":
        """`canonicalize(self)`, worked out once per layout object: the TMA
        planner and the layout comparisons ask it of the same buffer's
        layout at every copy."""
        return _canonical(self)

    def __str__(self) -> str:
        text = _iters_str("S", self.shard)
        if self.swizzle is not None:
            text = f"{self.swizzle} * {text}"
        if self.replica:
            text += " + " + _iters_str("R", self.replica)
        if self.offset:
            text += " + O[" + ", ".join(_stride_str(v, n) for n, v in self.offset) + "]"
        return text


def _iters_str(head: str, iters: Sequence[Iter]) -> str:
    if len(iters) == 1:
        return f"{head}[{iters[0]}]".replace(":", " : ", 1)
    extents = ", ".join(str(it.extent) for it in iters)
    strides = ", ".join(_stride_str(it.stride, it.axis) for it in iters)
    return f"{head}[({extents}) : ({strides})]"


def _max_by_axis(layout: TileLayout) -> dict[str, int]:
    """The largest value each axis reaches (before the swizzle)."""
    top: dict[str, int] = {}
    for it in layout.shard + layout.replica:
        top[it.axis] = top.get(it.axis, 0) + (it.extent - 1) * it.stride
    for name, value in layout.offset:
        top[name] = top.get(name, 0) + value
    return top


def _check_thread_ranges(layout: TileLayout) -> None:
    top = _max_by_axis(layout)
    for name, value in top.items():
        extent = AXES[name].extent
        if is_thread(name) and extent is not None and value >= extent:
            raise LayoutError(f"layout {layout} reaches {name} {value}, but {name} < {extent}")
    scope = scope_axis(top)
    extent = AXES[scope].extent if scope else None
    if extent is not None:
        total = sum(v * place_value(n, scope) for n, v in top.items() if in_hierarchy(n))
        if total >= extent:
            raise LayoutError(f"layout {layout} reaches {scope} {total}, but {scope} < {extent}")


StrideSpec = Union[int, tuple[int, str]]


def make(
    extents: Sequence[int],
    strides: Optional[Sequence[StrideSpec]] = None,
    *,
    replica: Sequence[tuple[int, int, str]] = (),
    offset: Union[Mapping[str, int], Sequence[tuple[str, int]]] = (),
    swizzle: Optional[Swizzle] = None,
) -> TileLayout:
    """Build a layout the way it is written: `make((2, 8), (2, (4, "laneid")))`
    is `S[(2, 8) : (2, 4@laneid)]`.  A stride is an int (on `m`) or a
    (stride, axis) pair; no strides means row-major on `m`.  Replicas are
    (extent, stride, axis) triples."""
    extents = tuple(extents)
    if strides is None:
        return records.evolve(row_major(extents), replica=_replicas(replica), offset=offset, swizzle=swizzle)
    if len(strides) != len(extents):
        raise LayoutError(f"{len(extents)} extents but {len(strides)} strides")
    shard = []
    for e, s in zip(extents, strides):
        stride, name = (s, "m") if isinstance(s, int) else s
        shard.append(Iter(e, stride, name))
    return TileLayout(shard, _replicas(replica), offset, swizzle)


def _replicas(specs) -> tuple[Iter, ...]:
    return tuple(s if isinstance(s, Iter) else Iter(*s) for s in specs)


def row_major(shape: Sequence[int]) -> TileLayout:
    """`S[shape]`: the elements one after another on `m`, last dim fastest."""
    shard, stride = [], 1
    for e in reversed(tuple(shape)):
        shard.append(Iter(e, stride))
        stride *= e
    return TileLayout(shard[::-1] or [Iter(1, 1)])


# --------------------------------------------------------------------------
# Evaluation and metrics
# --------------------------------------------------------------------------


def size(layout: TileLayout, axis: Optional[str] = None) -> int:
    """The number of elements (no axis), or the product of the extents of the
    shard iterators on `axis` as written (D_FRAG: 32 on laneid, 4 on m)."""
    return prod(it.extent for it in layout.shard if axis is None or it.axis == axis)


def span(layout: TileLayout, axis: str = "m") -> int:
    """1 + the largest offset the shard iterators reach on `axis`: the extent
    one copy of the tile covers there, before offsets, replicas and swizzle.
    Tiling steps the outer layout in units of the inner layout's span."""
    return 1 + sum((it.extent - 1) * it.stride for it in layout.shard if it.axis == axis)


def cosize(layout: TileLayout, axis: str = "m") -> int:
    """How many positions of `axis` the layout occupies from 0: 1 + its largest
    offset counting replicas and offsets.  On a swizzled `m` it is rounded up
    to the swizzle's block (`Swizzle.block`), the aligned run the swizzle maps
    onto itself, so it is an allocation size; it is exact for layouts made of
    whole swizzle atoms, as the shared layouts are."""
    top = 1 + _max_by_axis(layout).get(axis, 0)
    if axis == "m" and layout.swizzle is not None:
        block = layout.swizzle.block
        top = -(-top // block) * block
    return top


def _flat_index(layout: TileLayout, coord, shape) -> int:
    total = size(layout)
    if isinstance(coord, int):
        if shape is not None:
            raise LayoutError("a flat index takes no shape")
        flat = coord
    else:
        coord = tuple(coord)
        if shape is None:
            raise LayoutError(f"coordinate {coord} needs the shape it indexes")
        shape = tuple(shape)
        if len(coord) != len(shape):
            raise LayoutError(f"coordinate {coord} has {len(coord)} dims but shape {shape} has {len(shape)}")
        if prod(shape) != total:
            raise LayoutError(f"shape {shape} has {prod(shape)} elements but layout {layout} has {total}")
        flat = 0
        for c, e in zip(coord, shape):
            if not 0 <= c < e:
                raise LayoutError(f"coordinate {coord} is outside shape {shape}")
            flat = flat * e + c
    if not 0 <= flat < total:
        raise LayoutError(f"index {flat} is outside layout {layout} of {total} elements")
    return flat


def apply(layout: TileLayout, coord, shape: Optional[Sequence[int]] = None) -> dict[str, int]:
    """Where element `coord` lives: {axis: offset}.

    `coord` is a flat index (row-major over the shard), or a per-dim tuple
    with the logical `shape` it indexes.  The result always has `m` and every
    other axis the layout names, except that the CTA thread axes are summed
    and reported on the one-level axes of the layout's scope (a tid_in_wg
    layout gives laneid and wid_in_wg), so differently written but equal
    layouts give equal answers.  An axis missing from the result is at 0.
    Replicas are not expanded: this is the copy at replica position 0."""
    flat = _flat_index(layout, coord, shape)
    sums = {"m": 0}
    for it in reversed(layout.shard):
        flat, digit = divmod(flat, it.extent)
        sums[it.axis] = sums.get(it.axis, 0) + digit * it.stride
    for it in layout.replica:
        sums.setdefault(it.axis, 0)
    for name, value in layout.offset:
        sums[name] = sums.get(name, 0) + value
    hierarchy = [n for n in sums if in_hierarchy(n)]
    if hierarchy:
        lo, hi = AXES[scope_axis(hierarchy)].levels
        total = sum(sums.pop(n) * place_value(n, "tx") for n in hierarchy)
        sums.update(split_value(total, "tx")[lo:hi + 1])
    if layout.swizzle is not None:
        sums["m"] = layout.swizzle(sums["m"])
    return sums


# --------------------------------------------------------------------------
# Canonical form and thread-axis rewriting
# --------------------------------------------------------------------------


def _names(layout: TileLayout) -> set[str]:
    return {it.axis for it in layout.shard + layout.replica} | {n for n, _ in layout.offset}


def _to_scope(layout: TileLayout) -> tuple[list[Iter], list[Iter], dict[str, int]]:
    """Shard, replicas and offsets with every CTA thread axis rewritten on the
    layout's scope axis (an exact change: the scope axis is the sum)."""
    scope = scope_axis(_names(layout))

    def conv(it: Iter) -> Iter:
        if scope is None or not in_hierarchy(it.axis) or it.axis == scope:
            return it
        return Iter(it.extent, it.stride * place_value(it.axis, scope), scope)

    offset: dict[str, int] = {}
    for name, value in layout.offset:
        if scope is not None and in_hierarchy(name):
            value, name = value * place_value(name, scope), scope
        offset[name] = offset.get(name, 0) + value
    return [conv(it) for it in layout.shard], [conv(it) for it in layout.replica], offset


def fuse_contiguous(iters: Sequence[Iter]) -> list[Iter]:
    """Adjacent iterators on one axis where the outer steps exactly over the
    inner (outer stride = inner stride * inner extent) become one; a unit
    iterator merges into a neighbour on its axis."""
    out: list[Iter] = []
    for it in iters:
        if out and out[-1].axis == it.axis:
            prev = out[-1]
            if prev.extent == 1 or prev.stride == it.stride * it.extent:
                out[-1] = Iter(prev.extent * it.extent, it.stride, it.axis)
                continue
            if it.extent == 1:
                continue
        out.append(it)
    return out


def _canonical_replicas(replica: list[Iter]) -> tuple[Iter, ...]:
    """Replicas form a set of positions, so their order is free: sort by axis
    and falling stride, fuse, and repeat until nothing changes.  A replica
    that adds no position (extent 1 or stride 0) goes; the axis it named
    stays in the scope (`_keep_scope`)."""
    iters = [it for it in replica if it.extent != 1 and it.stride != 0]
    while True:
        iters.sort(key=lambda it: (AXIS_ORDER[it.axis], -it.stride, -it.extent))
        fused = fuse_contiguous(iters)
        if fused == iters:
            return tuple(iters)
        iters = fused


def _thread_names(shard, replica, offset) -> set[str]:
    return {it.axis for it in list(shard) + list(replica) if is_thread(it.axis)} | {n for n in offset if is_thread(n)}


def _keep_scope(offset: dict[str, int], threads: set[str], shard, replica) -> dict[str, int]:
    """`offset` with a zero offset on each thread axis of `threads` that no
    iterator or offset names any more: naming a thread axis is what makes it
    part of the layout's scope, so `S[4 : 1] + O[0@laneid]` (lane 0 of each
    warp) must not lose it and become `S[4 : 1]` (every thread)."""
    named = {it.axis for it in list(shard) + list(replica)} | set(offset)
    return {**offset, **{n: 0 for n in threads - named}}


def canonicalize(layout: TileLayout) -> TileLayout:
    """`layout.canonical`: see `_canonical`."""
    return layout.canonical


def _canonical(layout: TileLayout) -> TileLayout:
    """The canonical form: thread axes on the layout's scope axis, unit
    iterators and zero offsets dropped, a stride-0 iterator on `m` (its axis
    adds nothing but the scope), contiguous iterators fused, replicas sorted
    and fused, an identity swizzle dropped -- and a zero offset on a thread
    axis that only a dropped part named, so the scope stays what it was.
    `S[(4, 32) : (1@wid_in_wg, 1@laneid)]` becomes `S[128 : 1@tid_in_wg]`,
    `S[16 : 1@laneid] + O[0@wgid]` becomes `S[16 : 1@tx]` (threads 0-15 of
    the CTA), `S[(4, 1) : (1, 1@laneid)]` becomes `S[4 : 1] + O[0@laneid]`.
    Preserves `apply` at every index (every axis it reports, thread axes at 0
    too) and the replica positions, is idempotent, and gives equal layouts
    for any two spellings of one layout (docs/layout.md, "Canonical form")."""
    shard, replica, offset = _to_scope(layout)
    threads = _thread_names(shard, replica, offset)
    shard = [Iter(it.extent, 0) if it.stride == 0 else it for it in shard if it.extent != 1]
    shard = fuse_contiguous(shard) or [Iter(1, 1)]
    replica = _canonical_replicas(replica)
    offset = _keep_scope({n: v for n, v in offset.items() if v}, threads, shard, replica)
    swizzle = layout.swizzle if layout.swizzle and layout.swizzle.swizzle_bits else None
    return TileLayout(shard, replica, offset, swizzle)


def join_thread_axes(layout: TileLayout) -> TileLayout:
    """Every CTA thread iterator and offset rewritten on the layout's scope
    axis, nothing fused: `S[2 : 2@wid_in_wg] + O[0@wgid]` becomes
    `S[2 : 2@warpid]`.  A zero offset on the scope axis goes when an
    iterator names that axis (it says nothing more) and stays when none
    does (`S[2 : 1] + O[0@laneid, 0@wid_in_wg]` becomes `S[2 : 1] +
    O[0@tid_in_wg]`); the inverse of `split_thread_axes` on the layouts
    that gives."""
    shard, replica, offset = _to_scope(layout)
    threads = {n for n in _thread_names(shard, replica, offset) if in_hierarchy(n)}
    kept = {n: v for n, v in offset.items() if v or not in_hierarchy(n)}
    return TileLayout(shard, replica, _keep_scope(kept, threads, shard, replica), layout.swizzle)


def split_thread_axes(layout: TileLayout) -> TileLayout:
    """Every CTA thread iterator and offset rewritten on the one-level axes
    (laneid, wid_in_wg, wgid): `S[128 : 1@tid_in_wg]` becomes
    `S[(4, 32) : (1@wid_in_wg, 1@laneid)]`.  The inverse of the fusion in
    `canonicalize`; an error when a level boundary falls inside a step.  A
    level the layout spans but no iterator reaches gets a zero offset, so
    the scope survives: `S[16 : 1@tid_in_wg]` becomes
    `S[16 : 1@laneid] + O[0@wid_in_wg]`, lanes 0-15 of the warpgroup's warp 0."""

    def split(iters: Sequence[Iter]) -> list[Iter]:
        out = []
        for it in iters:
            if not in_hierarchy(it.axis):
                out.append(it)
                continue
            pieces = split_iter(it.extent, it.stride, it.axis)
            if pieces is None:
                raise LayoutError(
                    f"iterator {it} of {layout} cannot be split into lane, warp and "
                    "warpgroup iterators: a level boundary falls inside one step"
                )
            out.extend(Iter(*p) for p in pieces)
        return out

    offset: dict[str, int] = {}
    for name, value in layout.offset:
        parts = split_value(value, name) if in_hierarchy(name) else [(name, value)]
        for part, v in parts:
            offset[part] = offset.get(part, 0) + v
    shard, replica = split(layout.shard), split(layout.replica)
    scope = scope_axis(_names(layout))
    if scope is not None:
        named = {it.axis for it in shard + replica} | set(offset)
        lo, hi = AXES[scope].levels
        for base in BASE_AXES[lo:hi + 1]:
            if base not in named:
                offset[base] = 0
    return TileLayout(shard, replica, offset, layout.swizzle)


# --------------------------------------------------------------------------
# Per-thread storage and packing
# --------------------------------------------------------------------------


def storage(layout: TileLayout) -> TileLayout:
    """What one thread holds: the layout with its thread axes dropped.
    `storage(D_FRAG)` is `S[(2, 2) : (2, 1)]`, four registers per lane."""
    keep = [it for it in layout.shard if not is_thread(it.axis)] or [Iter(1, 1)]
    return TileLayout(
        keep,
        [it for it in layout.replica if not is_thread(it.axis)],
        [(n, v) for n, v in layout.offset if not is_thread(n)],
        layout.swizzle,
    )


def storage_size(layout: TileLayout) -> int:
    """The elements (registers, for a local buffer) each thread allocates:
    the `m` cosize of its storage.  D_FRAG: 4; A_FRAG: 8."""
    return cosize(storage(layout), "m")


def pack(layout: TileLayout, n: int) -> TileLayout:
    """The layout of `n`-element units (two f16 in one 32-bit register): the
    innermost iterator must be `k:1` on `m` with n dividing k (it becomes
    `k/n:1`, or goes when k is n), and every other `m` stride, replica and
    offset a multiple of n.  A swizzle needs n
    a power of two no larger than its 16-byte chunk."""
    _check_int(n, "the pack factor", 1)
    last = layout.shard[-1]
    if last.axis != "m" or last.stride != 1 or last.extent % n:
        raise LayoutError(
            f"cannot pack {n} elements of {layout}: the innermost iterator must be "
            f"k:1 on m with k a multiple of {n}, got {last}"
        )
    bad = [it for it in layout.shard[:-1] + layout.replica if it.axis == "m" and it.stride % n]
    off = dict(layout.offset).get("m", 0)
    if bad or off % n:
        what = f"iterator {bad[0]}" if bad else f"offset {off}"
        raise LayoutError(f"cannot pack {n} elements of {layout}: {what} is not a multiple of {n} on m")

    def div(it: Iter) -> Iter:
        return Iter(it.extent, it.stride // n, "m") if it.axis == "m" else it

    shard = [div(it) for it in layout.shard[:-1]]
    if last.extent > n or not shard:
        shard.append(Iter(last.extent // n, 1))
    offset = [(name, v // n if name == "m" else v) for name, v in layout.offset]
    swizzle = layout.swizzle
    if swizzle is not None:
        bits = n.bit_length() - 1
        if n != 1 << bits or bits > swizzle.per_element:
            raise LayoutError(
                f"cannot pack {n} elements of swizzled {layout}: the pack factor must be a "
                f"power of two at most {1 << swizzle.per_element}"
            )
        swizzle = Swizzle(swizzle.per_element - bits, swizzle.swizzle_bits, swizzle.atom_bits)
    return TileLayout(shard, [div(it) for it in layout.replica], offset, swizzle)


def unpack(layout: TileLayout, n: int) -> TileLayout:
    """The inverse of `pack`: each element becomes `n` consecutive ones, a new
    innermost `n:1` iterator on `m`; `m` strides, replicas and offsets scale
    by n.  A swizzle needs n a power of two."""
    _check_int(n, "the unpack factor", 1)

    def mul(it: Iter) -> Iter:
        return Iter(it.extent, it.stride * n, "m") if it.axis == "m" else it

    swizzle = layout.swizzle
    if swizzle is not None:
        bits = n.bit_length() - 1
        if n != 1 << bits:
            raise LayoutError(f"cannot unpack swizzled {layout} by {n}: not a power of two")
        swizzle = Swizzle(swizzle.per_element + bits, swizzle.swizzle_bits, swizzle.atom_bits)
    return TileLayout(
        [mul(it) for it in layout.shard] + [Iter(n, 1)],
        [mul(it) for it in layout.replica],
        [(name, v * n if name == "m" else v) for name, v in layout.offset],
        swizzle,
    )

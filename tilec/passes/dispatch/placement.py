"""A region located on its buffer's layout: per element, the offset on each
layout axis (memory `m`, tensor-memory lanes and columns).

The tensor-core variants (wgmma, tcgen05.mma, tcgen05.cp / ld) check their
operands element by element against what the hardware reads, so they all
start from the same question: where does the layout put element x of this
region?  `place` answers it once, as one table per region dim (the offsets
are a sum over dims, because a layout's iterators split each dim on its
own), plus the part that depends on run-time starts.

The tables are plain lists, and the checks built on them go by line: an
offset being a sum over dims, a rule of the form "element (i, j) sits at f(i)
plus g(j)" holds on every element when it holds along the first row and the
first column, so a variant checks M + N offsets, not M x N.  No compile
imports numpy (tests/test_compile_speed.py).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import TileLayout, fuse_contiguous
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import const
from tilec.passes.dispatch.vectors import Divisors


def _digits(iters, xs) -> Dict[str, List[int]]:
    """Per axis, the offset the iterators give each index in `xs`.  An
    iterator's digit of x is x // inner % extent, `inner` the extents of
    the iterators after it: one list per iterator, not a loop over the
    iterators per index (a wgmma operand places hundreds of rows)."""
    out: Dict[str, List[int]] = {}
    if not xs:
        return out
    inner = 1
    for it in reversed(iters):
        extent, stride = it.extent, it.stride
        column = [x // inner % extent * stride for x in xs]
        before = out.get(it.axis)
        out[it.axis] = column if before is None else [a + b for a, b in zip(before, column)]
        inner *= extent
    return out


@records.frozen(eq=False)
class Placed:
    """A region located on its buffer's layout (the replica-0 copy).

    `dims` are the buffer dims the region extends over (extent > 1), and
    `tables[i][axis]` the offset on `axis` that local index x along dims[i]
    adds.  The region's first element is at `base[axis]` -- the layout's
    offset and the compile-time starts -- plus, for each run-time start,
    start * stride: `dynamic[axis]` lists those (expression, stride) pairs."""

    region: Region
    layout: TileLayout
    dims: tuple
    base: Dict[str, int]
    tables: tuple
    dynamic: Dict[str, tuple]

    @property
    def shape(self) -> tuple:
        return tuple(self.region.extents[d] for d in self.dims)

    def line(self, i: int, axis: str) -> List[int]:
        """The offsets along local dim i on `axis` (zeros when it does not move it)."""
        return list(self.tables[i].get(axis, [0] * self.shape[i]))

    def offset(self, axis: str, index: Sequence[int]) -> int:
        """The compile-time offset on `axis` of the element at `index` (one
        local index per dim of `dims`)."""
        out = self.base.get(axis, 0)
        for t, x in zip(self.tables, index):
            if axis in t:
                out += t[axis][x]
        return out

    def bounds(self, axis: str) -> tuple:
        """The least and the greatest compile-time offset on `axis` of any
        element: the base plus each dim's least (greatest) offset."""
        lo = hi = self.base.get(axis, 0)
        for t in self.tables:
            if axis in t:
                lo, hi = lo + min(t[axis]), hi + max(t[axis])
        return lo, hi

    def flat(self, axis: str) -> List[int]:
        """The compile-time offset on `axis` of every element, in row-major
        order over the region's shape (for a check that pairs elements up
        one by one)."""
        out = [self.base.get(axis, 0)]
        for t, n in zip(self.tables, self.shape):
            line = t.get(axis)
            out = [o for o in out for _ in range(n)] if line is None else [o + x for o in out for x in line]
        return out


def place(r: Region, axes: Sequence[str], what: str, divisors: Optional[Divisors] = None) -> Placed:
    """`r` on its layout; a located error when the layout uses an axis other
    than `axes` or a run-time start cannot be followed.

    A run-time start is followed when its dim is laid out with one stride,
    or -- given `divisors` -- when every start the expression can take (the
    in-bounds multiples of what is known to divide it) moves the region by
    start * stride and leaves its local offsets as they are: a tile
    `Asmem[c * 64 : c * 64 + 64, :]` of a swizzled layout whose 8-row
    groups are 64 rows apart."""
    buf = r.buffer
    layout = buf.tile_layout
    name = f"{what} '{buf.name}'"
    for it in layout.shard:
        if it.axis not in axes and it.extent > 1:
            raise TilecError(
                f"the layout of {name} places elements on {it.axis}; it needs {' and '.join(axes)} ({layout})"
            )
    grouped = buf.grouped
    base = {a: v for a, v in layout.offset if a in axes}
    dims, tables, dynamic = [], [], {}
    for d, (start, extent) in enumerate(zip(r.starts, r.extents)):
        iters = grouped.dim(d)
        s = const(start)
        if s is None:
            strides = _runtime_strides(iters, start, extent, buf.shape[d], divisors, name, d)
            for axis, stride in strides.items():
                dynamic.setdefault(axis, []).append((start, stride))
            local = {a: [x - v[0] for x in v] for a, v in _digits(iters, range(extent)).items()}
        else:
            origin = {a: v[0] for a, v in _digits(iters, [s]).items()}
            for a, v in origin.items():
                base[a] = base.get(a, 0) + v
            local = {a: [x - origin[a] for x in v] for a, v in _digits(iters, range(s, s + extent)).items()}
        if extent > 1:
            dims.append(d)
            tables.append(local)
    return Placed(r, layout, tuple(dims), base, tuple(tables), {a: tuple(v) for a, v in dynamic.items()})


def matrix(r: Region, what: str) -> tuple:
    """The (rows, columns) extents of a 2-D operand: a region with exactly
    two dims of extent above 1."""
    shape = r.shape
    if len(shape) != 2:
        raise TilecError(
            f"{what} '{print_expr(r.expr)}' must be a 2-D tile (every other dim indexed by one value), "
            f"got extents {r.extents}"
        )
    return shape


def _runtime_strides(iters, start, extent: int, size: int, divisors: Optional[Divisors], name: str,
                     d: int) -> Dict[str, int]:
    """Per axis, the stride a run-time start of dim d moves the region by;
    a located error when the region's place does not follow the start
    linearly."""
    lin = fuse_contiguous(iters)
    if len(lin) == 1:
        return {lin[0].axis: lin[0].stride}
    step = (divisors.of(start) or 1) if divisors is not None else None
    starts = list(range(0, size - extent + 1, step)) if step else []
    if len(starts) == 1:
        return {}  # the only start in bounds is 0
    differs = ""
    if len(starts) > 1:
        at = _digits(iters, starts)
        inner = _digits(iters, range(extent))
        strides = {a: (v[1] - v[0]) // step for a, v in at.items()}
        linear = all(v[n] == s * strides[a] for a, v in at.items() for n, s in enumerate(starts))
        if linear and all(_same_tile(_digits(iters, range(s, s + extent)), at, n, inner, extent)
                          for n, s in enumerate(starts)):
            return {a: s for a, s in strides.items() if s}
        differs = (f" or the same layout at every start it can take (the tile at index {int(starts[1])} is laid "
                   f"out differently from the one at 0)")
    raise TilecError(
        f"{name}: the run-time start '{print_expr(start)}' of dim {d} needs that dim laid out "
        f"with one stride, not {', '.join(str(it) for it in iters) or 'none'}{differs}"
    )


def _same_tile(moved: Dict[str, List[int]], at: Dict[str, List[int]], n: int, inner: Dict[str, List[int]],
               extent: int) -> bool:
    """Whether the tile at the n-th start is the one at 0, moved."""
    return all(moved.get(a, [0] * extent) == [at[a][n] + x for x in inner.get(a, [0] * extent)]
               for a in set(at) | set(moved))

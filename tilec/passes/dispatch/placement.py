"""A region located on its buffer's layout: for each dim the region spans,
the offset every local index adds on each axis (`m` for shared memory,
`TLane`/`TCol` for tensor memory), the compile-time origin, and the
run-time starts with their strides.  The tensor-core lowerings (tcgen05
mma, cp, ld) read their operands this way so that shared-matrix
descriptors and tensor-memory addresses come from the layout itself.

numpy is imported where it is used: dispatch loads every variant module,
and a compile that never reads such an operand should not pay for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Sequence

import attrs

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import TileLayout, fuse_contiguous
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.layout_shape import group
from tilec.compiler.printer import print_expr
from tilec.passes.dispatch.operands import Region, const

if TYPE_CHECKING:
    import numpy as np


def _digits(iters, xs) -> Dict[str, np.ndarray]:
    """Per axis, the offset the iterators give each index in `xs`."""
    import numpy as np
    x = np.asarray(xs, dtype=np.int64)
    out: Dict[str, np.ndarray] = {}
    for it in reversed(iters):
        x, digit = np.divmod(x, it.extent)
        out[it.axis] = out.get(it.axis, 0) + digit * it.stride
    return out


@attrs.frozen(eq=False)
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

    def grid(self, axis: str) -> np.ndarray:
        """The compile-time offset on `axis` of every element, over the
        region's shape."""
        import numpy as np
        out = np.full(self.shape, self.base.get(axis, 0), dtype=np.int64)
        for i, t in enumerate(self.tables):
            if axis in t:
                view = [1] * len(self.shape)
                view[i] = -1
                out = out + np.reshape(t[axis], view)
        return out

    def line(self, i: int, axis: str) -> np.ndarray:
        """The offsets along local dim i on `axis` (zeros when it does not move it)."""
        import numpy as np
        return np.asarray(self.tables[i].get(axis, np.zeros(self.shape[i], dtype=np.int64)))


def place(r: Region, axes: Sequence[str], what: str) -> Placed:
    """`r` on its layout; a located error when the layout uses an axis other
    than `axes` or a run-time start cannot be followed."""
    import numpy as np
    buf = r.buffer
    layout = buf.tile_layout
    name = f"{what} '{buf.name}'"
    for it in layout.shard:
        if it.axis not in axes and it.extent > 1:
            raise TilecError(
                f"the layout of {name} places elements on {it.axis}; it needs {' and '.join(axes)} ({layout})"
            )
    try:
        grouped = group(attrs.evolve(layout, swizzle=None, replica=(), offset=()), buf.shape)
    except LayoutError as err:
        raise TilecError(f"{name}: {err.message}") from None
    base = {a: v for a, v in layout.offset if a in axes}
    dims, tables, dynamic = [], [], {}
    for d, (start, extent) in enumerate(zip(r.starts, r.extents)):
        iters = grouped.dim(d)
        s = const(start)
        if s is None:
            lin = fuse_contiguous(iters)
            if len(lin) != 1:
                raise TilecError(
                    f"{name}: the run-time start '{print_expr(start)}' of dim {d} needs that dim laid out "
                    f"with one stride, not {', '.join(str(it) for it in iters) or 'none'}"
                )
            dynamic.setdefault(lin[0].axis, []).append((start, lin[0].stride))
            local = {lin[0].axis: np.arange(extent, dtype=np.int64) * lin[0].stride}
        else:
            origin = _digits(iters, [s])
            for a, v in origin.items():
                base[a] = base.get(a, 0) + int(v[0])
            local = {a: v - origin[a][0] for a, v in _digits(iters, s + np.arange(extent)).items()}
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

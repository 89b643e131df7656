"""The shared-memory layouts the tensor core and TMA read and write.

Both engines see a shared tile as a grid of *atoms*: 8 rows of W bytes, W =
16, 32, 64 or 128 for swizzle mode 0 (none), 1 (32B), 2 (64B) and 3 (128B),
the rows of a swizzled atom permuted by the mode's XOR (`swizzle.py`).  For a
tile of shape (..., R, C) the last dim is cut into atom-width chunks of w =
W / element-size elements; within each (R, C) block the chunks are outermost
(chunk k starts at k * R * w), rows stride one atom row (w), and leading
dims are outermost, row-major.  So f16 mode 3 on (8, 256) is
`SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)]`, which a TMA fills with one
rank-3 box (64, 8, 4), and a (128, 64) operand is one column of 16 atoms,
the K-major canonical layout the matrix descriptors name.

TMA and the tensor core use the same atoms, so `tma_shared_layout` is the
same layout: a tile loaded by TMA feeds the MMA as it lands.
"""
from __future__ import annotations

from typing import Sequence, Union

from tilec.compiler.dtypes import DType, dtype as lookup_dtype
from tilec.compiler.layout import Iter, TileLayout, canonicalize
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.swizzle import ATOM_BYTES, MODE_NAMES, hardware_swizzle

ATOM_ROWS = 8


def _dtype(dt: Union[str, DType]) -> DType:
    return dt if isinstance(dt, DType) else lookup_dtype(dt)


def atom_shape(dt: Union[str, DType], mode: int) -> tuple[int, int]:
    """(rows, elements per row) of one atom of swizzle `mode` on `dt`."""
    dt = _dtype(dt)
    hardware_swizzle(dt, mode)  # checks the mode
    return ATOM_ROWS, ATOM_BYTES[mode] * 8 // dt.bits


def mma_shared_layout(dt: Union[str, DType], mode: int, shape: Sequence[int]) -> TileLayout:
    """The canonical layout of a shared tile of `shape` in swizzle `mode`
    (see the module docstring).  The last dim must be whole atom rows and,
    when swizzled, the second-to-last whole atoms (8 rows)."""
    dt = _dtype(dt)
    rows_per_atom, width = atom_shape(dt, mode)
    shape = tuple(shape)
    if len(shape) < 2 or not all(type(e) is int and e >= 1 for e in shape):
        raise LayoutError(f"a shared layout needs a shape of two or more positive dims, got {shape}")
    *lead, rows, cols = shape
    if cols % width:
        raise LayoutError(
            f"the last dim ({cols}) of a {MODE_NAMES[mode]}-swizzled {dt.name} tile must be a "
            f"multiple of the {ATOM_BYTES[mode]}-byte atom row, {width} elements"
        )
    if mode and rows % rows_per_atom:
        raise LayoutError(
            f"the second-to-last dim ({rows}) of a swizzled tile must be a multiple of "
            f"{rows_per_atom}, the rows of one atom"
        )
    block = rows * cols
    shard = [Iter(rows, width), Iter(cols // width, rows * width), Iter(width, 1)]
    for extent in reversed(lead):
        shard.insert(0, Iter(extent, block))
        block *= extent
    return canonicalize(TileLayout(shard, swizzle=hardware_swizzle(dt, mode)))


tma_shared_layout = mma_shared_layout

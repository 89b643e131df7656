"""The axes a layout maps onto: memory axes and the thread hierarchy.

A layout sends each element of a tile to a point on several named axes at
once: an offset in memory (`m`, or a tensor-memory lane and column) and, for
a tile spread over threads, the position of the thread that holds it.

The CTA's thread axes overlap: `tid_in_wg` is `wid_in_wg * 32 + laneid`, and
`tx` is `wgid * 128 + tid_in_wg`.  Rather than a rule per pair, each such axis
is a contiguous run of *levels* -- lane in warp (32), warp in warpgroup (4),
warpgroup in CTA (as many as launched) -- so converting a stride from one axis
to another, fusing neighbouring iterators and splitting one again are all
arithmetic on place values.  The CTA and cluster ids (`bx`, `cbx`, ...) are
thread axes of their own with no levels: nothing fuses with them.
"""
from __future__ import annotations

from typing import Iterable, Optional


from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError


class LayoutError(TilecError):
    """A layout operation that cannot be done, with the reason in the message."""


@records.frozen
class Axis:
    name: str
    kind: str  # "memory" or "thread"
    extent: Optional[int]  # how many positions it has; None when the launch decides
    levels: Optional[tuple[int, int]]  # first and last level it spans (thread hierarchy only)
    doc: str


LEVEL_SIZES = (32, 4, None)
"""Lanes per warp, warps per warpgroup, warpgroups per CTA (set by the launch)."""

_AXES = (
    Axis("m", "memory", None, None, "element offset in the buffer's storage"),
    Axis("TLane", "memory", None, None, "tensor-memory lane (row)"),
    Axis("TCol", "memory", None, None, "tensor-memory column"),
    Axis("laneid", "thread", 32, (0, 0), "lane in its warp"),
    Axis("wid_in_wg", "thread", 4, (1, 1), "warp in its warpgroup"),
    Axis("wgid", "thread", None, (2, 2), "warpgroup in the CTA"),
    Axis("tid_in_wg", "thread", 128, (0, 1), "thread in its warpgroup"),
    Axis("warpid", "thread", None, (1, 2), "warp in the CTA"),
    Axis("tx", "thread", None, (0, 2), "thread in the CTA"),
    Axis("cbx", "thread", None, None, "CTA in its cluster, x"),
    Axis("cby", "thread", None, None, "CTA in its cluster, y"),
    Axis("cbz", "thread", None, None, "CTA in its cluster, z"),
    Axis("bx", "thread", None, None, "CTA in the grid, x"),
    Axis("by", "thread", None, None, "CTA in the grid, y"),
    Axis("bz", "thread", None, None, "CTA in the grid, z"),
)

AXES = {a.name: a for a in _AXES}
"""Every axis a layout may name, in printing order."""

AXIS_ORDER = {a.name: i for i, a in enumerate(_AXES)}

_BY_LEVELS = {a.levels: a.name for a in _AXES if a.levels is not None}
BASE_AXES = tuple(_BY_LEVELS[(i, i)] for i in range(len(LEVEL_SIZES)))
"""The one-level axes every thread-hierarchy axis splits into, finest first."""


def axis(name: str) -> Axis:
    """The axis called `name`, or an error naming the valid ones."""
    try:
        return AXES[name]
    except KeyError:
        raise LayoutError(
            f"unknown layout axis '{name}' (expected one of {', '.join(AXES)})"
        ) from None


def is_thread(name: str) -> bool:
    return AXES[name].kind == "thread"


def in_hierarchy(name: str) -> bool:
    """Whether `name` is one of the fusable CTA thread axes (laneid ... tx)."""
    return AXES[name].levels is not None


def scope_axis(names: Iterable[str]) -> Optional[str]:
    """The thread-hierarchy axis spanning every level that `names` touch: the
    coordinate system of a layout that uses them all (laneid and wid_in_wg
    together make tid_in_wg).  None when no name is in the hierarchy."""
    lo = hi = None
    for name in names:
        levels = AXES[name].levels
        if levels is not None:
            lo = levels[0] if lo is None else min(lo, levels[0])
            hi = levels[1] if hi is None else max(hi, levels[1])
    return None if lo is None else _BY_LEVELS[(lo, hi)]


def place_value(name: str, within: str) -> int:
    """How many units of `within` one unit of `name` is (wid_in_wg in
    tid_in_wg: 32).  `within` must span every level of `name`."""
    lo = AXES[name].levels[0]
    outer_lo = AXES[within].levels[0]
    value = 1
    for level in range(outer_lo, lo):
        value *= LEVEL_SIZES[level]
    return value


def split_iter(extent: int, stride: int, name: str) -> Optional[list[tuple[int, int, str]]]:
    """`extent:stride@name` as iterators on the one-level axes, outermost
    first, or None when a level boundary falls inside one step (3:16@tid_in_wg
    reaches lanes 0 and 16 and then lane 0 of the next warp: no product of a
    lane iterator and a warp iterator gives that)."""
    lo, hi = AXES[name].levels
    pieces = []  # innermost first
    for level in range(lo, hi + 1):
        size = LEVEL_SIZES[level]
        base = BASE_AXES[level]
        if extent == 1:
            break
        if level == hi or size is None:
            pieces.append((extent, stride, base))
            extent = 1
            break
        if stride == 0:
            pieces.append((extent, 0, base))
            extent = 1
            break
        if stride >= size:
            if stride % size:
                return None
            stride //= size
            continue
        if size % stride:
            return None
        inner = size // stride
        if extent <= inner:
            pieces.append((extent, stride, base))
            extent = 1
            break
        if extent % inner:
            return None
        pieces.append((inner, stride, base))
        extent //= inner
        stride = 1
    return pieces[::-1]


def split_value(value: int, name: str) -> list[tuple[str, int]]:
    """An offset on `name` as offsets on the one-level axes, finest first."""
    lo, hi = AXES[name].levels
    parts = []
    for level in range(lo, hi + 1):
        size = LEVEL_SIZES[level]
        if level == hi or size is None:
            parts.append((BASE_AXES[level], value))
            break
        value, rest = divmod(value, size)
        parts.append((BASE_AXES[level], rest))
    return parts

"""A shared-memory operand of tcgen05 as its 64-bit matrix descriptor
reads it: every element of every instruction tile is located by the
buffer's layout and by the hardware's canonical layout, and they must
agree, so a layout the tensor core cannot read is an error, not a wrong
result.  The tcgen05 mma and cp lowerings use it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Sequence

import attrs

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.mma_desc import SWIZZLE_NONE, SWIZZLE_WIDTH_BYTES, smem_desc_for_layout
from tilec.compiler.printer import print_expr
from tilec.compiler.swizzle import swizzle_mode
from tilec.compiler.symbols import ARENA_ALIGN, DYN_ARENA, Buffer
from tilec.passes.dispatch.operands import Divisors, add, mul
from tilec.passes.dispatch.placement import Placed

if TYPE_CHECKING:
    import numpy as np


def effective_align(buf: Buffer) -> int:
    """The alignment of the buffer's first byte: a dynamic-arena buffer's
    is what its offset in the 1024-aligned arena allows."""
    if buf.storage != DYN_ARENA:
        return buf.align
    align = ARENA_ALIGN
    while align > 1 and buf.byte_offset % align:
        align //= 2
    return align


def _canonical(major: str, width: int, s_mn: int, s_k: int, i: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Element offsets of the hardware's canonical layout [PTX "Shared Memory
    Layout and Swizzling"; CUTLASS make_umma_desc], `width` the elements in
    one atom row (16 bytes unswizzled) and s_mn / s_k the element distance
    between atoms along MN / K:

      K-major:  (i / 8) s_mn + (i % 8) width + (k / width) s_k + k % width
      MN-major: (i / width) s_mn + i % width + (k / 8) s_k + (k % 8) width
    """
    if major == "K":
        return (i // 8) * s_mn + (i % 8) * width + (k // width) * s_k + k % width
    return (i // width) * s_mn + i % width + (k // 8) * s_k + (k % 8) * width


@attrs.frozen
class SharedMatrix:
    """A shared operand as the tensor core reads it: the descriptor fields,
    and each instruction tile's start in 16-byte units from the buffer's
    first element (`starts`, keyed by the tile's (mn, k) origin) plus the
    run-time part `dynamic` (an expression, or None)."""

    buffer: Buffer
    major: str
    ldo: int
    sdo: int
    swizzle: int
    starts: Dict[tuple, int]
    dynamic: Optional[ir.Expr]

    def descriptor(self) -> ir.Expr:
        """The descriptor of the buffer's first element, moved by the
        region's run-time start."""
        zeros = ir.ListExpr(tuple(ir.Int(0) for _ in self.buffer.shape))
        base = ir.Method(ir.Name(self.buffer.name), "ptr_to", (zeros,))
        args = (base, ir.Int(self.ldo), ir.Int(self.sdo), ir.Int(self.swizzle))
        call = ir.Call("ptx.tcgen05.encode_matrix_descriptor", args)
        return call if self.dynamic is None else ir.Binary("+", call, self.dynamic)

    def operand(self, desc: str, tile: tuple) -> ir.Expr:
        """`desc` (holding `descriptor()`) moved to the tile at `tile`."""
        return add(ir.Name(desc), self.starts[tile])


def shared_matrix(
    p: Placed,
    base: int,
    mn: np.ndarray,
    k: np.ndarray,
    tiles: Sequence[tuple],
    tile_shape: tuple,
    divisors: Divisors,
    what: str,
    majors: Sequence[str] = ("K", "MN"),
) -> SharedMatrix:
    """Check that the tensor core can read the shared elements of placed
    region `p` whose pre-swizzle offsets from the buffer's first element are
    `base + mn[i] + k[j]` (compile-time part) as a matrix, in tiles of
    `tile_shape` (MN x K elements) at the (mn, k) origins `tiles`, and derive
    the descriptor."""
    import numpy as np
    buf = p.region.buffer
    dt = DTYPES[buf.dtype]
    name = f"{what} '{buf.name}'"
    layout = p.layout
    if layout.replica or any(a != "m" for a, _ in layout.offset):
        raise TilecError(f"the layout of shared {name} must map each element to one place in memory ({layout})")
    if dict(layout.offset).get("m", 0):
        raise TilecError(f"{name}: a shared operand's layout cannot have an offset ({layout})")
    try:
        mode = swizzle_mode(layout.swizzle, dt)
    except LayoutError as err:
        raise TilecError(f"{name}: {err.message}") from None
    repeat = 16 if mode == SWIZZLE_NONE else 1 << (7 + mode)  # bytes the swizzle pattern repeats over
    if effective_align(buf) % repeat:
        raise TilecError(
            f"{name} starts on a {effective_align(buf)}-byte boundary; its {SWIZZLE_WIDTH_BYTES[mode]}B-swizzled "
            f"atoms need {repeat}"
        )
    width = SWIZZLE_WIDTH_BYTES[mode] * 8 // dt.bits
    if len(mn) > 1 and mn[1] - mn[0] == 1 and "MN" in majors and not (len(k) > 1 and k[1] - k[0] == 1):
        major = "MN"
    elif len(k) > 1 and k[1] - k[0] == 1 and "K" in majors:
        major = "K"
    else:
        raise TilecError(
            f"{name} must be {' or '.join(m + '-major' for m in majors)} in shared memory (elements consecutive "
            f"along {' or '.join(majors)}), but its layout is {layout}"
        )
    group_mn, group_k = (8, width) if major == "K" else (width, 8)
    s_mn = int(mn[group_mn] - mn[0]) if len(mn) > group_mn else 0
    s_k = int(k[group_k] - k[0]) if len(k) > group_k else 0
    i = np.arange(tile_shape[0])[:, None]
    j = np.arange(tile_shape[1])[None, :]
    want = _canonical(major, width, s_mn, s_k, i, j)
    for m0, k0 in tiles:
        got = (mn[m0:m0 + tile_shape[0]] - mn[m0])[:, None] + (k[k0:k0 + tile_shape[1]] - k[k0])[None, :]
        bad = np.argwhere(got != want)
        if len(bad):
            a, b = bad[0]
            raise TilecError(
                f"{name} is not in a layout the tensor core reads ({major}-major, "
                f"{SWIZZLE_WIDTH_BYTES[mode]}B atoms): element ({m0 + a}, {k0 + b}) of the tile at ({m0}, {k0}) "
                f"is {got[a, b]} elements from its start, the descriptor reads it at {want[a, b]} ({layout})"
            )
    for stride, along in ((s_mn, "MN"), (s_k, "K")):
        if stride * dt.bits % 8:
            raise TilecError(f"{name}: its atoms along {along} are {stride} elements apart, not whole bytes")
    used_mn = tile_shape[0] > group_mn
    used_k = tile_shape[1] > group_k
    try:
        desc = smem_desc_for_layout(
            "tcgen05", buf.dtype, major, mode,
            mn_stride=s_mn * dt.bits // 8 if used_mn else None,
            k_stride=s_k * dt.bits // 8 if used_k and not (major == "K" and mode != SWIZZLE_NONE) else None,
        )
    except TilecError as err:
        raise TilecError(f"{name}: {err.message}") from None
    starts = {}
    for m0, k0 in tiles:
        bits = (base + int(mn[m0]) + int(k[k0])) * dt.bits
        if bits % 128:
            raise TilecError(f"{name}: the tile at ({m0}, {k0}) does not start on a 16-byte boundary")
        if mode != SWIZZLE_NONE and (bits // 8 >> 7) & ((1 << mode) - 1):
            raise TilecError(
                f"{name}: the tile at ({m0}, {k0}) starts {bits // 8} bytes into the buffer, inside a "
                f"{SWIZZLE_WIDTH_BYTES[mode]}B swizzle atom (not on one of its 8-row boundaries)"
            )
        starts[(m0, k0)] = bits // 128
    ldo, sdo, swizzle = desc.intrinsic_args()
    return SharedMatrix(buf, major, ldo, sdo, swizzle, starts, _dynamic_units(p, divisors, repeat, name))


def _dynamic_units(p: Placed, divisors: Divisors, repeat: int, name: str) -> Optional[ir.Expr]:
    """The run-time part of a shared region's start, in 16-byte units."""
    bits = DTYPES[p.region.dtype].bits
    out = None
    for start, stride in p.dynamic.get("m", ()):
        step = stride * bits
        if step % 128 or divisors.of(start) * step // 8 % repeat:
            raise TilecError(
                f"{name}: the run-time start '{print_expr(start)}' moves the tile by {step / 8:g} bytes a step, "
                f"which must keep it on a {repeat}-byte boundary"
            )
        term = mul(start, step // 128)
        out = term if out is None else add(out, term)
    return out

"""Shared-memory matrix operands of the tensor core, for both generations.

Hopper's wgmma and Blackwell's tcgen05 (mma and cp) read a shared operand
the same way: through a 64-bit matrix descriptor naming a grid of swizzle
atoms, K-major or MN-major, with a leading and a stride byte offset between
atoms.  Only the descriptor's bit positions differ, and those live in
`tilec.compiler.mma_desc`.  So one function here decides, for either family,
whether a region's layout is one the hardware reads and what the
descriptor's fields are; the variants differ only in the tiles they ask for.

The check is element by element: every element of every instruction tile is
located by the buffer's layout and by the hardware's canonical layout for
the candidate descriptor, and they must agree.  A layout the tensor core
cannot read is therefore a located error naming the rule it breaks, never a
wrong result.  The one alignment rule: the buffer's first byte (for a
dynamic-arena buffer, what its offset in the arena allows) is aligned to
the bytes the swizzle pattern repeats over, 16 without swizzle, and every
tile starts on a row-group boundary of its atoms.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.mma_desc import SWIZZLE_NONE, smem_desc_for_layout
from tilec.compiler.printer import print_expr
from tilec.compiler.swizzle import ATOM_BYTES, swizzle_mode
from tilec.compiler.symbols import ARENA_ALIGN, DYN_ARENA, Buffer
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import add, located, mul
from tilec.passes.dispatch.vectors import Divisors
from tilec.passes.dispatch.placement import Placed, place


def effective_align(buf: Buffer) -> int:
    """The alignment of the buffer's first byte: a dynamic-arena buffer's
    is what its offset in the 1024-aligned arena allows."""
    if buf.storage != DYN_ARENA:
        return buf.align
    align = ARENA_ALIGN
    while align > 1 and buf.byte_offset % align:
        align //= 2
    return align


def repeat_bytes(mode: int) -> int:
    """The bytes a swizzle mode's pattern repeats over (8 atom rows; 16
    unswizzled): what a descriptor's start address is aligned to."""
    return 16 if mode == SWIZZLE_NONE else 1 << (7 + mode)


def canonical(major: str, width: int, s_mn: int, s_k: int, i: int, k: int) -> int:
    """Element offsets of the hardware's canonical layout [PTX "Shared Memory
    Layout and Swizzling", "Canonical Layouts"; CUTLASS make_gmma_desc /
    make_umma_desc], `width` the elements in one atom row (16 bytes
    unswizzled) and s_mn / s_k the element distance between atoms along
    MN / K:

      K-major:  (i / 8) s_mn + (i % 8) width + (k / width) s_k + k % width
      MN-major: (i / width) s_mn + i % width + (k / 8) s_k + (k % 8) width
    """
    if major == "K":
        return (i // 8) * s_mn + (i % 8) * width + (k // width) * s_k + k % width
    return (i // width) * s_mn + i % width + (k // 8) * s_k + (k % 8) * width


@records.frozen
class SharedMatrix:
    """A shared operand as the tensor core reads it: the descriptor fields,
    and each instruction tile's start in 16-byte units from the buffer's
    first element (`starts`, keyed by the tile's (mn, k) origin) plus the
    run-time part `dynamic` (an expression, or None)."""

    family: str
    buffer: Buffer
    major: str
    ldo: int
    sdo: int
    swizzle: int
    starts: Dict[tuple, int]
    dynamic: Optional[ir.Expr]

    def descriptor(self, span: Optional[ir.Span] = None) -> ir.Expr:
        """The descriptor of the buffer's first element, moved by the
        region's run-time start; built at `span` when given, of parts
        placed there (`located` then keeps it as it is)."""
        zeros = ir.ListExpr(tuple(ir.Int(0, span=span) for _ in self.buffer.shape), span=span)
        base = ir.Method(ir.Name(self.buffer.name, span=span), "ptr_to", (zeros,), span=span)
        args = (base, ir.Int(self.ldo, span=span), ir.Int(self.sdo, span=span), ir.Int(self.swizzle, span=span))
        call = ir.Call(f"ptx.{self.family}.encode_matrix_descriptor", args, span=span)
        return call if self.dynamic is None else ir.Binary("+", call, located(self.dynamic, span), span=span)

    def operand(self, desc: str, tile: tuple, span: Optional[ir.Span] = None) -> ir.Expr:
        """`desc` (holding `descriptor()`) moved to the tile at `tile`: `desc
        + start`, built at `span` (a lowering passes its call's, and this
        node, one per instruction, is then not rebuilt to locate it).  `desc`
        is a fresh name, never a predefined constant, so nothing in it folds."""
        name = ir.Name(desc, span=span)
        start = self.starts[tile]
        return name if start == 0 else ir.Binary("+", name, ir.Int(start, span=span), span=span)


def operand_matrix(
    family: str,
    r: Region,
    transposed: bool,
    tiles: Sequence[tuple],
    tile_shape: tuple,
    divisors: Divisors,
    what: str,
    majors: Sequence[str] = ("K", "MN"),
) -> SharedMatrix:
    """A GEMM operand: region `r` is MN x K (K x MN when `transposed`), read
    in tiles of `tile_shape` (MN x K elements) at the (mn, k) origins
    `tiles`.  Whether it is K- or MN-major comes from its layout."""
    p = place(r, ("m",), what, divisors)
    if len(p.dims) != 2:
        raise TilecError(f"{what} '{r.name}' must be a 2-D tile in shared memory, got extents {r.extents}")
    mn, k = (1, 0) if transposed else (0, 1)
    return shared_matrix(family, p, p.base.get("m", 0), p.line(mn, "m"), p.line(k, "m"), tiles, tile_shape,
                         divisors, what, majors)


def shared_matrix(
    family: str,
    p: Placed,
    base: int,
    mn: Sequence[int],
    k: Sequence[int],
    tiles: Sequence[tuple],
    tile_shape: tuple,
    divisors: Divisors,
    what: str,
    majors: Sequence[str] = ("K", "MN"),
) -> SharedMatrix:
    """Check that the `family` tensor core ("wgmma" or "tcgen05") can read
    the shared elements of placed region `p` whose pre-swizzle offsets from
    the buffer's first element are `base + mn[i] + k[j]` (compile-time part)
    as a matrix, in tiles of `tile_shape` (MN x K elements) at the (mn, k)
    origins `tiles`, and derive the descriptor."""
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
    repeat = repeat_bytes(mode)
    if effective_align(buf) % repeat:
        raise TilecError(
            f"{name} starts on a {effective_align(buf)}-byte boundary; its {ATOM_BYTES[mode]}B-swizzled "
            f"atoms need {repeat}"
        )
    width = ATOM_BYTES[mode] * 8 // dt.bits
    hint = _suggestion(buf.dtype, mode, majors)
    if len(mn) > 1 and mn[1] - mn[0] == 1 and "MN" in majors and not (len(k) > 1 and k[1] - k[0] == 1):
        major = "MN"
    elif len(k) > 1 and k[1] - k[0] == 1 and "K" in majors:
        major = "K"
    else:
        raise TilecError(
            f"{name} must be {' or '.join(m + '-major' for m in majors)} in shared memory (elements consecutive "
            f"along {' or '.join(majors)}), but its layout is {layout}; {hint}"
        )
    group_mn, group_k = (8, width) if major == "K" else (width, 8)
    s_mn = mn[group_mn] - mn[0] if len(mn) > group_mn else 0
    s_k = k[group_k] - k[0] if len(k) > group_k else 0
    # Both the layout's offsets and the canonical layout are a row part plus
    # a column part, zero at the tile's origin, so they agree on every
    # element exactly when they agree along the tile's first row and column.
    want_mn = [canonical(major, width, s_mn, s_k, i, 0) for i in range(tile_shape[0])]
    want_k = [canonical(major, width, s_mn, s_k, 0, j) for j in range(tile_shape[1])]
    lines: dict = {}  # (origin, mn or k) -> the offsets along the tile's first column or row, from its start
    for m0, k0 in tiles:
        got_mn, got_k = _from_start(mn, m0, tile_shape[0], lines, 0), _from_start(k, k0, tile_shape[1], lines, 1)
        if got_mn != want_mn or got_k != want_k:
            a, b = next(((i, 0) for i in range(tile_shape[0]) if got_mn[i] != want_mn[i]), None) or next(
                (0, j) for j in range(tile_shape[1]) if got_k[j] != want_k[j])
            got, want = got_mn[a] + got_k[b], want_mn[a] + want_k[b]
            raise TilecError(
                f"{name} is not in a layout the tensor core reads ({major}-major, "
                f"{ATOM_BYTES[mode]}B atoms of 8 {'rows' if major == 'K' else 'K rows'} of "
                f"{width} {'K' if major == 'K' else 'MN'} elements): element ({m0 + a}, {k0 + b}) of the tile at "
                f"({m0}, {k0}) is {got} elements from its start, the descriptor reads it at {want} "
                f"({layout}); {hint}"
            )
    for stride, along in ((s_mn, "MN"), (s_k, "K")):
        if stride * dt.bits % 8:
            raise TilecError(f"{name}: its atoms along {along} are {stride} elements apart, not whole bytes")
    used_mn = tile_shape[0] > group_mn
    used_k = tile_shape[1] > group_k
    try:
        desc = smem_desc_for_layout(
            family, buf.dtype, major, mode,
            mn_stride=s_mn * dt.bits // 8 if used_mn else None,
            k_stride=s_k * dt.bits // 8 if used_k and not (major == "K" and mode != SWIZZLE_NONE) else None,
        )
    except TilecError as err:
        raise TilecError(f"{name}: {err.message}") from None
    starts = {}
    for m0, k0 in tiles:
        bits = (base + mn[m0] + k[k0]) * dt.bits
        if bits % 128:
            raise TilecError(f"{name}: the tile at ({m0}, {k0}) does not start on a 16-byte boundary")
        if mode != SWIZZLE_NONE and (bits // 8 >> 7) & ((1 << mode) - 1):
            raise TilecError(
                f"{name}: the tile at ({m0}, {k0}) starts {bits // 8} bytes into the buffer, inside a "
                f"{ATOM_BYTES[mode]}B swizzle atom: it does not start on a {repeat}-byte boundary "
                f"(one of the atom's 8-row boundaries)"
            )
        starts[(m0, k0)] = bits // 128
    ldo, sdo, swizzle = desc.intrinsic_args()
    return SharedMatrix(family, buf, major, ldo, sdo, swizzle, starts, _dynamic_units(p, divisors, repeat, name))


def _from_start(line: Sequence[int], origin: int, n: int, lines: dict, which: int) -> list:
    """The n offsets of `line` from `origin` on, less the one at `origin`:
    worked out once per origin (`lines`), as the tiles of a row share their
    column origin and those of a column their row origin."""
    found = lines.get((origin, which))
    if found is None:
        first = line[origin]
        found = lines[(origin, which)] = [x - first for x in line[origin:origin + n]]
    return found


def _suggestion(dtype: str, mode: int, majors: Sequence[str]) -> str:
    """What to write instead: the TMA layouts of the majors allowed."""
    forms = {"K": f"tma_shared_layout({dtype}, {mode}, (MN, K)) for a K-major tile",
             "MN": f"tma_shared_layout({dtype}, {mode}, (K, MN)) for an MN-major one (transpose_A / transpose_B)"}
    return "use " + " or ".join(forms[m] for m in majors)


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

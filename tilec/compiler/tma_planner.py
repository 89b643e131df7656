"""TMA descriptor planning: the cuTensorMap and the issues that move a tile
between global and shared memory.

What the hardware does with one `cp.async.bulk.tensor`: for each descriptor
dim j (innermost first) it walks box[j] positions from coordinate c[j]; the
element at box position p is read from (written to) global memory at
sum((c[j] + p[j]) * stride[j]) and written densely to shared memory, the box
row-major with dim 0 fastest, from the address the instruction names; every
16-byte chunk's shared address is then XOR-swizzled by the descriptor's mode
(the same permutation as the layout algebra's hardware swizzles, applied to
absolute addresses, which is why swizzled tiles are aligned to the swizzle
period).  Planning finds descriptor dims, and a loop of issues when one box
cannot hold the copy, whose walk is exactly the copy the layouts describe.

L1  Both layouts are canonicalized; the shared swizzle is stripped and its
    hardware mode recorded; thread, tensor-memory, replica and (global)
    offset parts are refused.  The global layout is grouped by the buffer
    shape (one stride per dim) and the shared layout sliced to the region
    (a runtime start, or a constant one on a unit dim, on a dim of one
    iterator is an offset instead: `_shared_digits`).
L2  The copy's elements are split into *digits*: the sliced shared layout's
    iterators per copied dim, each with its shared stride and the global
    stride its step along the global dim gives.  The *chain* starts at the
    digit of shared stride 1 (which must be global stride 1: TMA cannot
    transpose) and follows the digit whose shared stride is the product of
    the extents so far.  A prefix of the chain becomes the box, cut into
    segments of at most 256 (the innermost one within the swizzle's atom
    row); every other digit is an *issue axis*, a loop of issues each with
    its coordinate step and shared offset.
L3  The segments, in chain order, are the descriptor dims (so the box's
    row-major order is the shared order); carriers (below) follow.  Adjacent
    dims merge when the inner one is fully boxed and the outer continues it
    in global memory, if a stride breaks the 16-byte rule or the rank is
    over 5; an innermost box over 256 promotes the element type (1 -> 2 ->
    4 -> 8 bytes).  The hardware rules are then checked; on a failure the
    chain is shortened (whole digits, then divisors of the last one) and the
    plan retried, and when every choice fails the error names the rule the
    last, smallest choice broke.

Coordinates.  One descriptor serves every copy of the same tile of a tensor
(each k step, each stage), so region starts go into coordinates, never into
the descriptor.  The hardware bounds each coordinate by its own dim, not by
the element's place in the tensor: a box position with c[j] + p[j] outside
[0, dims[j]) is clipped (a load fills it, a store skips it).  So the dims a
global dim of extent E is spread over must together say exactly 0 <= x < E,
also for a region that runs past the tensor's end (a ragged last tile).
Each global dim with a start or an issue axis has one *carrier* dim, whose
coordinate takes the start plus the issue's offset along the dim:

- a dim in one segment (the one holding its unit step) is carried by it,
  with extent E; a dim in no segment gets an added box-1 dim, its own stride;
- a dim split into segments (a 128-column f16 tile of 64-column 128B atom
  rows: 64 columns, then 2 at stride 64) is exact only when the inner
  segments tile one block (units 1, b0, b0*b1, ...) and each is exactly its
  box, so that coordinates 0..box-1 never clip, and the outermost counts
  whole blocks: extent E / block, coordinate start / block.  Start and E
  must be multiples of the block (`Affine.divisible_termwise`; the issue steps
  along the dim always are); the seed's 8x256 tile gives dims (64, 8, 4).
  Where that is not proven (N = 136, or a start not known to be a multiple
  of 64) the candidate is refused, and the shortening above makes the outer
  segments an issue loop: the inner segment carries the dim, with extent E,
  and each issue adds its offset (coordinates n and n + 64).

So a coordinate is affine in the starts (`bx * 128`, `k * 64`), divided only
by a block they are known multiples of, and the map spans exactly the tensor.
"""
from __future__ import annotations

import itertools
from math import prod
from typing import Iterator, Optional, Sequence, Union

from tilec.compiler import records
from tilec.compiler.affine import Affine
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DType, dtype as lookup_dtype
from tilec.compiler.layout import Iter, TileLayout, canonicalize, row_major
from tilec.compiler.layout_shape import group, slice_region
from tilec.compiler.swizzle import ATOM_BYTES, MODE_NAMES, swizzle_mode

__all__ = ["Affine", "LayoutMemo", "TmaIssue", "TmaPlan", "plan_tma", "MAX_RANK", "MAX_BOX"]

MAX_RANK = 5
MAX_BOX = 256
STRIDE_ALIGN = 16  # bytes: global strides, and the innermost box row
SMEM_ALIGN = 128  # bytes: the shared address of every issue
MAX_STRIDE = 1 << 40
MAX_DIM = 1 << 32
_UNSIGNED = {2: "u16", 4: "u32", 8: "u64"}


Start = Union[int, str, Affine]
Region = Sequence[tuple[Start, int]]


# --------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------


@records.frozen
class TmaIssue:
    """One `cp.async.bulk.tensor`: its coordinates (innermost first, in the
    descriptor's element type) and where its box starts in the shared buffer,
    in elements of the buffer's dtype before the swizzle."""

    coords: tuple[Affine, ...]
    smem_offset: Affine


@records.frozen
class TmaPlan:
    """A descriptor (the kernel.json fields; dims, box and elem_strides
    innermost first, strides in bytes without the innermost) and the issues
    of one copy.  `dtype` is the descriptor's element type, an unsigned
    integer of the promoted width when the innermost box was too long;
    `bytes` is what one copy moves (the mbarrier's expect_tx share)."""

    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    elem_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str
    direction: str
    issues: tuple[TmaIssue, ...]
    bytes: int

    @property
    def rank(self) -> int:
        return len(self.dims)

    def descriptor(self) -> dict:
        """The tensor map as kernel.json writes it, less its name and tensor."""
        return {
            "dtype": self.dtype,
            "rank": self.rank,
            "dims": list(self.dims),
            "strides": list(self.strides),
            "box": list(self.box),
            "elem_strides": list(self.elem_strides),
            "interleave": self.interleave,
            "swizzle": self.swizzle,
            "l2_promotion": self.l2_promotion,
            "oob_fill": self.oob_fill,
        }


def l2_promotion(row_bytes: int) -> str:
    """The L2 promotion for a box whose rows are `row_bytes` contiguous global
    bytes: the widest of 256/128/64 bytes that the row fills.  Promotion makes
    L2 fetch that many bytes per request; up to the row it saves requests,
    beyond it fetches bytes the box does not use.  A 128B-swizzled row is
    128 bytes, so it gets "128B", what CUTLASS uses for its swizzled tiles."""
    for size in (256, 128, 64):
        if row_bytes >= size:
            return f"{size}B"
    return "none"


# --------------------------------------------------------------------------
# L1: the two layouts
# --------------------------------------------------------------------------


class LayoutMemo:
    """The groupings and slices `plan_tma` works out from a layout, each
    once: they depend on the layout and a shape alone, and a kernel copies
    one buffer in many places (hgemm_v7's eight epilogue stores would group
    D's layout and Dsmem's, and slice Dsmem's, eight times each).  One
    memo serves the plans of one kernel (`tilec.passes.plan_tma`).
    Entries are keyed by the layout object's id and keep the object, so an
    id is not reused while its entry lives; an error is not kept (it is
    raised again at the next ask)."""

    def __init__(self):
        self._entries: dict = {}

    def _kept(self, what: str, layout: TileLayout, args: tuple, compute):
        key = (what, id(layout), args)
        hit = self._entries.get(key)
        if hit is None:
            hit = self._entries[key] = (layout, compute())
        return hit[1]

    def group(self, layout: TileLayout, shape: tuple):
        """`layout_shape.group(layout, shape)`."""
        return self._kept("group", layout, shape, lambda: group(layout, shape))

    def unswizzled(self, layout: TileLayout) -> TileLayout:
        """`layout` without its swizzle."""
        return self._kept("unswizzled", layout, (), lambda: records.evolve(layout, swizzle=None))

    def sliced(self, layout: TileLayout, shape: tuple, region: tuple, copy_shape: tuple):
        """The memory offset of the sub-tile `region` ((start, extent) per
        dim, `layout_shape.slice_region`) and its layout grouped by the
        copy's shape."""

        def compute():
            sliced = slice_region(layout, shape, region)
            shard = [it for it in sliced.shard if it.extent > 1] or [Iter(1, 1)]
            return dict(sliced.offset).get("m", 0), group(TileLayout(shard), copy_shape)

        return self._kept("sliced", layout, (shape, region, copy_shape), compute)


@records.frozen
class _GlobalDim:
    extent: int
    stride: int  # elements
    start: Affine
    count: int  # the region's extent


@records.frozen
class _Digit:
    """`extent` steps of the copy that advance `sstride` elements in shared
    memory and `gstride` in global, `unit` along global dim `gdim`."""

    extent: int
    sstride: int
    gstride: int
    gdim: int
    unit: int

    def inner(self, n: int) -> "_Digit":
        return _Digit(n, self.sstride, self.gstride, self.gdim, self.unit)

    def outer(self, n: int) -> "_Digit":
        """What is left after the inner `n` steps."""
        return _Digit(self.extent // n, self.sstride * n, self.gstride * n, self.gdim, self.unit * n)


def _memory_only(layout: TileLayout, side: str) -> None:
    for it in layout.shard + layout.replica:
        if it.axis != "m":
            raise TilecError(
                f"TMA moves memory tiles: the {side} layout {layout} places elements on "
                f"axis '{it.axis}' (only memory offsets are allowed)"
            )
    if layout.replica:
        raise TilecError(f"TMA cannot copy the replicated {side} layout {layout}")
    for name, _ in layout.offset:
        if name != "m":
            raise TilecError(f"TMA moves memory tiles: the {side} layout {layout} has an offset on '{name}'")


def _check_region(region: Region, shape: tuple[int, ...], side: str) -> list[tuple[Affine, int]]:
    """The region's (start, extent) per dim.  A global region may run past
    the tensor's end (the hardware fills or skips what lies outside, see
    Coordinates), so its start is kept even when its extent is the whole
    dim: `A[r : r + 64]` of 64 rows is rows r.. of the tensor, clipped, not
    rows 0..63.  A shared region must lie in its buffer, so one as long as
    its dim starts at 0 whatever start it names."""
    if len(region) != len(shape):
        raise TilecError(f"the {side} region has {len(region)} dims but the buffer has {len(shape)}")
    out = []
    for d, (start, count) in enumerate(region):
        start = Affine.of(start)
        if type(count) is not int or count < 1:
            raise TilecError(f"the {side} region's extent on dim {d} must be a positive integer, got {count!r}")
        last = shape[d] - 1 if side == "global" else shape[d] - count
        if count > shape[d] or (start.is_const and not 0 <= start.const <= last):
            raise TilecError(
                f"the {side} region [{start} : {start} + {count}] is outside dim {d} (extent {shape[d]})"
            )
        out.append((Affine() if side == "shared" and count == shape[d] else start, count))
    return out


def _global_dims(layout: TileLayout, shape, region, memo: LayoutMemo) -> list[_GlobalDim]:
    if layout.swizzle is not None:
        raise TilecError(f"TMA cannot read the swizzled global layout {layout}")
    if layout.offset:
        raise TilecError(f"TMA cannot address the global layout {layout}: it has an offset")
    grouped = memo.group(layout, shape)
    dims = []
    for d, (start, count) in enumerate(region):
        iters = [it for it in grouped.dim(d) if it.extent > 1]
        if len(iters) > 1:
            raise TilecError(
                f"TMA needs one stride per global dim, but dim {d} of {layout} over {shape} "
                f"has strides {tuple(str(it) for it in iters)}"
            )
        dims.append(_GlobalDim(shape[d], iters[0].stride if iters else _unit_stride(grouped.layout), start, count))
    return dims


def _unit_stride(layout: TileLayout) -> int:
    """A stride for a global dim of extent 1, which only a run-time start
    puts in the descriptor (to clip every start but 0): any legal stride
    does, so the one a dim outside the whole tensor would have, in whole
    16-element steps (16 bytes or more for every element size)."""
    span = max((it.extent * it.stride for it in layout.shard), default=1)
    return -(-span // 16) * 16


def _shared_digits(layout: TileLayout, shape, region, copy_shape, gdims,
                   memo: LayoutMemo) -> tuple[Affine, list[_Digit]]:
    """The shared start offset (elements, before the swizzle) and the digits.

    A start on a dim of one iterator moves the tile by start * stride: a
    runtime start must be read so (it cannot be sliced at), and a constant
    one on a unit dim is, so that the copies of one stage or buffer of
    another (`Dsmem[c, b, :, :]`) are one slice of the layout."""
    grouped = memo.group(layout, shape)
    offset = Affine()
    concrete = []
    for d, (start, count) in enumerate(region):
        iters = [it for it in grouped.dim(d) if it.extent > 1]
        if start.is_const and (count > 1 or len(iters) != 1):
            concrete.append((start.const, count))
            continue
        if len(iters) != 1:
            raise TilecError(
                f"a runtime start ({start}) on dim {d} of the shared buffer needs one stride on that dim, "
                f"but {layout} over {shape} has strides {tuple(str(it) for it in iters)}"
            )
        offset = offset + start * iters[0].stride
        concrete.append((0, count))
    m, per_dim = memo.sliced(layout, shape, tuple(concrete), copy_shape)
    offset = offset + Affine(m)
    copied = [d for d, g in enumerate(gdims) if g.count > 1]
    digits = []
    for k, d in enumerate(copied):
        unit = 1
        for it in reversed(per_dim.dim(k)):
            digits.append(_Digit(it.extent, it.stride, gdims[d].stride * unit, d, unit))
            unit *= it.extent
    return offset, digits


def _chain(digits: list[_Digit], dt: DType) -> list[_Digit]:
    """The maximal run of digits contiguous in shared memory from stride 1."""
    first = [g for g in digits if g.sstride == 1]
    if not first:
        raise TilecError("no element of the shared tile is at stride 1, so no TMA box row can land in it")
    if first[0].gstride != 1:
        raise TilecError(
            f"TMA needs the innermost descriptor dim at global stride 1, but the elements contiguous "
            f"in shared memory are {first[0].gstride * dt.bytes} bytes apart in global memory "
            "(TMA cannot transpose)"
        )
    chain, need, rest = [first[0]], first[0].extent, [g for g in digits if g is not first[0]]
    while True:
        nxt = next((g for g in rest if g.sstride == need), None)
        if nxt is None:
            return chain
        chain.append(nxt)
        rest.remove(nxt)
        need *= nxt.extent


# --------------------------------------------------------------------------
# L3: one choice of box, as a descriptor
# --------------------------------------------------------------------------


class _Broken(Exception):
    """A hardware rule a candidate descriptor breaks (the message says which)."""


@records.frozen
class _Dim:
    extent: int
    box: int
    stride: int  # elements of the copy's dtype
    base: Affine  # coordinate of the first issue
    steps: tuple[int, ...]  # coordinate step per issue axis


def _divisors_desc(n: int) -> Iterator[int]:
    """The divisors of `n`, largest first, each found when asked for (the
    first usually serves)."""
    return (a for a in range(n, 0, -1) if n % a == 0)


def _cut(pieces: list[_Digit], first_limit: int) -> list[_Digit]:
    """Each box piece cut into segments of at most 256 (the first at most
    `first_limit`), innermost first."""
    out = []
    for piece in pieces:
        while piece.extent > 1:
            limit = first_limit if not out else MAX_BOX
            size = next(a for a in range(min(piece.extent, limit), 0, -1) if piece.extent % a == 0)
            if size == 1:
                raise _Broken(f"a box run of {piece.extent} elements cannot be cut into segments of at most {limit}")
            out.append(piece.inner(size))
            piece = piece.outer(size)
    return out


def _descriptor(segments, axes, gdims) -> list[_Dim]:
    """Segments then carriers as descriptor dims, with coordinates."""
    pieces: dict[int, list[_Digit]] = {}
    for s in segments:
        pieces.setdefault(s.gdim, []).append(s)
    carriers = {d: _carrier(d, ps, gdims[d]) for d, ps in pieces.items()}
    needed = {a.gdim for a in axes} | {d for d, g in enumerate(gdims) if g.start != Affine()}
    extra = sorted(needed - carriers.keys(), key=lambda d: gdims[d].stride)
    dims = []
    for s in segments:
        if carriers[s.gdim] is s:
            dims.append(_carried(gdims[s.gdim], s.gdim, s.unit, s.extent, s.gstride, axes))
        else:
            dims.append(_Dim(s.extent, s.extent, s.gstride, Affine(), (0,) * len(axes)))
    dims += [_carried(gdims[d], d, 1, 1, gdims[d].stride, axes) for d in extra]
    return dims


def _carrier(d: int, pieces: list[_Digit], g: _GlobalDim) -> _Digit:
    """The segment of global dim `d` that carries its start and issue steps
    (see Coordinates): the dim's only segment, or the outermost of segments
    that nest from its unit step and count whole blocks of it.  The dim's
    other digits then step by multiples of the block too."""
    pieces = sorted(pieces, key=lambda s: s.unit)
    if pieces[0].unit != 1:
        raise _Broken(f"global dim {d}'s unit step is an issue axis while a coarser step of it is in the box")
    for inner, outer in zip(pieces, pieces[1:]):
        if outer.unit != inner.unit * inner.extent:
            raise _Broken(f"the box pieces of global dim {d} (steps {inner.unit} and {outer.unit}) do not nest")
    block = pieces[-1].unit
    if not (g.start.divisible_termwise(block) and g.extent % block == 0):
        raise _Broken(
            f"global dim {d} split into blocks of {block} elements is clipped at its end only if its start "
            f"({g.start}) and extent ({g.extent}) are multiples of {block}"
        )
    return pieces[-1]


def _carried(g: _GlobalDim, d: int, unit: int, box: int, stride: int, axes) -> _Dim:
    """The carrier dim of global dim `d`, counting `unit` elements of it."""
    steps = tuple(a.unit // unit if a.gdim == d else 0 for a in axes)
    return _Dim(g.extent // unit, box, stride, g.start.exact_div(unit), steps)


def _merge(dims: list[_Dim], elem: int) -> list[_Dim]:
    """Merge a fully boxed dim into the next when the next continues it in
    global memory and its stride breaks the 16-byte rule or the rank is over 5."""
    dims = list(dims)
    j = 0
    while j + 1 < len(dims):
        a, b = dims[j], dims[j + 1]
        # Only a dim whose box never clips merges: a start or issue step
        # on it would run into the next row of the merged dim, not clip.
        whole = a.box == a.extent and a.base == Affine() and not any(a.steps)
        contiguous = whole and b.stride == a.stride * a.extent
        if contiguous and ((b.stride * elem) % STRIDE_ALIGN or len(dims) > MAX_RANK):
            dims[j : j + 2] = [
                _Dim(
                    a.extent * b.extent,
                    a.box * b.box,
                    a.stride,
                    a.base + b.base * a.extent,
                    tuple(x + y * a.extent for x, y in zip(a.steps, b.steps)),
                )
            ]
        else:
            j += 1
    return dims


def _promote(dims: list[_Dim], elem: int, oob_fill: str) -> tuple[list[_Dim], int]:
    """Widen the element type until the innermost box is at most 256."""
    inner = dims[0]
    if inner.box <= MAX_BOX:
        return dims, elem
    if oob_fill == "nan":
        raise _Broken(
            f"the innermost box is {inner.box} elements, over {MAX_BOX}, and a NaN fill forbids "
            "reading it as wider integers"
        )
    for factor in (2, 4, 8):
        if elem * factor > 8:
            break
        if (
            inner.box % factor
            or inner.extent % factor
            or not inner.base.divisible_termwise(factor)
            or any(s % factor for s in inner.steps)
        ):
            break
        if inner.box // factor <= MAX_BOX:
            widened = _Dim(
                inner.extent // factor,
                inner.box // factor,
                1,
                inner.base.exact_div(factor),
                tuple(s // factor for s in inner.steps),
            )
            return [widened] + dims[1:], elem * factor
    raise _Broken(
        f"the innermost box is {inner.box} elements, over {MAX_BOX}, and cannot be read as "
        "wider elements (up to 8 bytes) to shorten it"
    )


def _validate(dims: list[_Dim], elem: int, copy_elem: int, mode: int) -> None:
    if len(dims) > MAX_RANK:
        raise _Broken(f"the descriptor needs rank {len(dims)}, over TMA's {MAX_RANK}")
    row = dims[0].box * elem
    if row % STRIDE_ALIGN:
        raise _Broken(f"the innermost box row is {row} bytes, not a multiple of {STRIDE_ALIGN}")
    if mode and row > ATOM_BYTES[mode]:
        raise _Broken(
            f"the innermost box row is {row} bytes, wider than the {MODE_NAMES[mode]} "
            f"swizzle's {ATOM_BYTES[mode]}-byte span"
        )
    for j, d in enumerate(dims):
        if d.box > MAX_BOX:
            raise _Broken(f"box dim {j} is {d.box} elements, over TMA's {MAX_BOX}")
        if d.extent > MAX_DIM:
            raise _Broken(f"descriptor dim {j} has {d.extent} elements, over 2^32")
    for j, d in enumerate(dims[1:], 1):
        stride = d.stride * copy_elem
        if stride <= 0 or stride % STRIDE_ALIGN:
            raise _Broken(f"the global stride of descriptor dim {j} is {stride} bytes, not a positive multiple of 16")
        if stride >= MAX_STRIDE:
            raise _Broken(f"the global stride of descriptor dim {j} is {stride} bytes, not below 2^40")


def _moved(a: Affine, k: int) -> Affine:
    """`a + k`; `a` itself where an issue does not move it (the first issue
    moves nothing)."""
    return a + k if k else a


def _issues(dims: list[_Dim], axes: list[_Digit], base: Affine, elem: int) -> tuple[TmaIssue, ...]:
    """Every issue, the issue axes row-major (the last axis fastest)."""
    issues = []
    for index in itertools.product(*(range(a.extent) for a in axes)):
        coords = tuple(_moved(d.base, sum(s * k for s, k in zip(d.steps, index))) for d in dims)
        offset = _moved(base, sum(a.sstride * k for a, k in zip(axes, index)))
        if not (offset * elem).divisible_by(SMEM_ALIGN):
            raise _Broken(
                f"issue {len(issues)} starts {offset} elements into the shared buffer, which is not "
                f"a multiple of {SMEM_ALIGN} bytes"
            )
        issues.append(TmaIssue(coords, offset))
    return tuple(issues)


# --------------------------------------------------------------------------
# The planner
# --------------------------------------------------------------------------


def plan_tma(
    global_layout: Optional[TileLayout],
    global_shape: Sequence[int],
    shared_layout: Optional[TileLayout],
    shared_shape: Sequence[int],
    region: tuple[Region, Region],
    dtype: Union[str, DType],
    direction: str,
    oob_fill: str = "zero",
    memo: Optional[LayoutMemo] = None,
) -> TmaPlan:
    """The TMA plan of a copy between `global_layout` over `global_shape`
    and `shared_layout` over `shared_shape` (None: row-major).  `region` is
    (global region, shared region), each a (start, extent) per dim; a start
    is an int, a symbol name or an `Affine` of symbols, and the issues'
    coordinates and offsets are affine in them.  The two regions' non-unit
    extents must be equal, in order.  `direction` is "g2s" or "s2g";
    `oob_fill` "zero" or "nan" (what a load past the tensor's edge reads).
    A copy no descriptor can express raises a `TilecError` naming the rule.
    `memo` keeps what is worked out from the layouts for the next plan over
    the same layout objects (see `LayoutMemo`)."""
    dt = dtype if isinstance(dtype, DType) else lookup_dtype(dtype)
    if direction not in ("g2s", "s2g"):
        raise ValueError(f"direction must be 'g2s' or 's2g', not {direction!r}")
    if oob_fill not in ("zero", "nan"):
        raise TilecError(f"oob fill must be \"zero\" or \"nan\", not {oob_fill!r}")
    if oob_fill == "nan" and not dt.is_float:
        raise TilecError(f"a NaN out-of-bounds fill needs a float dtype, not {dt.name}")
    gshape, sshape = tuple(global_shape), tuple(shared_shape)
    glayout = canonicalize(global_layout or row_major(gshape))
    slayout = canonicalize(shared_layout or row_major(sshape))
    _memory_only(glayout, "global")
    _memory_only(slayout, "shared")
    mode = swizzle_mode(slayout.swizzle, dt)
    memo = memo if memo is not None else LayoutMemo()
    slayout = memo.unswizzled(slayout)

    g_region = _check_region(region[0], gshape, "global")
    s_region = _check_region(region[1], sshape, "shared")
    copy_shape = tuple(n for _, n in g_region if n > 1)
    if copy_shape != tuple(n for _, n in s_region if n > 1):
        raise TilecError(
            f"the global region's extents {tuple(n for _, n in g_region)} and the shared region's "
            f"{tuple(n for _, n in s_region)} differ once unit dims are dropped"
        )
    if not copy_shape:
        raise TilecError(f"TMA moves boxes of at least {STRIDE_ALIGN} bytes; this region is one element")
    gdims = _global_dims(glayout, gshape, g_region, memo)
    s_base, digits = _shared_digits(slayout, sshape, s_region, copy_shape, gdims, memo)
    chain = _chain(digits, dt)

    first_limit = ATOM_BYTES[mode] // dt.bytes if mode else MAX_BOX
    reason = ""
    for length in range(len(chain), 0, -1):
        last = chain[length - 1]
        for size in _divisors_desc(last.extent):
            if length > 1 and size == 1:
                continue
            if length == 1 and size < last.extent and (size * dt.bytes) % STRIDE_ALIGN:
                continue
            pieces = chain[: length - 1] + [last.inner(size)]
            axes = ([last.outer(size)] if size < last.extent else []) + chain[length:]
            axes += [g for g in digits if g not in chain]
            axes.sort(key=lambda g: -g.sstride)
            try:
                dims = _descriptor(_cut(pieces, min(first_limit, MAX_BOX)), axes, gdims)
                dims = _merge(dims, dt.bytes)
                dims, elem = _promote(dims, dt.bytes, oob_fill)
                _validate(dims, elem, dt.bytes, mode)
                issues = _issues(dims, axes, s_base, dt.bytes)
            except _Broken as broken:
                reason = str(broken)
                continue
            return TmaPlan(
                dtype=dt.name if elem == dt.bytes else _UNSIGNED[elem],
                dims=tuple(d.extent for d in dims),
                strides=tuple(d.stride * dt.bytes for d in dims[1:]),
                box=tuple(d.box for d in dims),
                elem_strides=(1,) * len(dims),
                interleave="none",
                swizzle=MODE_NAMES[mode],
                l2_promotion=l2_promotion(dims[0].box * elem),
                oob_fill=oob_fill,
                direction=direction,
                issues=issues,
                bytes=prod(copy_shape) * dt.bytes,
            )
    raise TilecError(f"no TMA descriptor can express this copy: {reason}")

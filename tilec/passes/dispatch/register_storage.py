"""Register storage: a register buffer's elements from one thread's point
of view.

`Storage` inverts a register buffer's layout: for each of a thread's
storage slots (registers), the element it holds as a formula of the
thread's position.  That is what lets a lowering name registers with
constant indices (`register_element`: the element thread 0 holds there)
while the memory side is indexed by the thread's position.
`held_elements`, `follows` and `register_pairs` match such views against a
region and against each other.
"""
from __future__ import annotations

import itertools
from typing import Callable, Dict, Optional, Sequence

from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.layout import split_thread_axes, storage_size
from tilec.compiler.layout_axes import BASE_AXES, LayoutError, in_hierarchy, is_thread
from tilec.compiler.layout_shape import group
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.compiler.symbols import Buffer
from tilec.compiler.value_types import FLOAT_TYPES, FP8_TYPES, INT_TYPES, value_type_of_dtype
from tilec.passes.dispatch.build import add, built_at, conj, floordiv, mod, mul
from tilec.passes.dispatch.per_kernel import kernel_memo
from tilec.passes.dispatch.registry import Decline
from tilec.passes.dispatch.threads import LEVEL_OF_AXIS, SCOPE_OF_LEVEL, Threads


MAX_REGISTER_SLOTS = 4096
"""More storage slots per thread than any register array has (a thread has
at most 255 registers); a layout that spans more is refused, not enumerated."""


@records.frozen
class Term:
    """One thread iterator of a register layout: its digit of the thread's
    position on `axis`, times `inner`, adds to the element's index in `dim`."""

    axis: str
    stride: int
    extent: int
    dim: int
    inner: int


@records.frozen
class Storage:
    """A register buffer's elements from one thread's point of view.

    `slots[s]` is the coordinate (per buffer dim) of the element storage
    slot s holds in the thread at position 0 on every axis, or None for a
    slot no element uses; a thread at another position holds, in the same
    slot, that coordinate plus its `terms`.  `used[axis]` is how many
    positions of each base thread axis hold elements (the others hold none);
    `scope` the scope whose threads share the buffer ("thread" when the
    layout names no thread axis); `copies` the replica iterators on thread
    axes (`storage(..., replicated=True)`): threads that differ only in
    those digits hold the same elements.

    `answers` keeps what has been worked out from the storage (`slot_of`,
    `held_slots`, `register_pairs`' thread check and pairs, the wgmma
    fragment check and coordinates): a kernel has one
    `Storage` per buffer (`storage`), asked again by every call naming the
    buffer.  An answer about this storage and another one is keyed by the
    other's `serial`, not kept with the other: two storages that answer
    about each other would be a reference cycle, left with all they hold
    to the cyclic collector."""

    buffer: Buffer
    slots: tuple
    terms: tuple
    used: tuple  # (axis, positions) pairs
    scope: str
    copies: tuple = ()  # of Term (dim -1)
    answers: dict = records.field(factory=dict, eq=False, repr=False)
    serial: int = records.field(factory=itertools.count().__next__, eq=False, repr=False, init=False)

    @property
    def size(self) -> int:
        return len(self.slots)

    def slot_of(self) -> dict:
        """Coordinate (in thread 0) -> the storage slot holding it."""
        found = self.answers.get("slot_of")
        if found is None:
            found = self.answers["slot_of"] = {c: s for s, c in enumerate(self.slots) if c is not None}
        return found

    def thread_offset(self, positions: Dict[str, int]) -> tuple:
        """The coordinate shift of the thread at `positions` (Python ints)."""
        shift = [0] * len(self.buffer.shape)
        for t in self.terms:
            shift[t.dim] += (positions.get(t.axis, 0) // t.stride % t.extent) * t.inner
        return tuple(shift)

    def coordinate(self, slot: int, positions: Dict[str, int]) -> tuple:
        return tuple(c + s for c, s in zip(self.slots[slot], self.thread_offset(positions)))

    def positions(self):
        """Every thread position (a dict per thread) that holds elements."""
        axes = [a for a, _ in self.used]
        for combo in itertools.product(*(range(n) for _, n in self.used)):
            yield dict(zip(axes, combo))

    def axis_steps(self):
        """Thread 0, then every position that holds elements and differs
        from thread 0 on one axis only.  A thread's coordinate shift is a
        sum of one part per axis (each term reads one axis), every part
        nonnegative and 0 at position 0; so two such shifts related by a
        linear map on these positions are related on every position."""
        yield {}
        for axis, n in self.used:
            for v in range(1, n):
                yield {axis: v}

    def offset_exprs(self, axis_exprs: Dict[str, ir.Expr]) -> tuple:
        """The coordinate shift of the running thread, per dim, as expressions
        of its positions `axis_exprs`."""
        used = dict(self.used)
        shift = [ir.Int(0) for _ in self.buffer.shape]
        for t in self.terms:
            digit = floordiv(axis_exprs[t.axis], t.stride)
            if t.stride * t.extent < used[t.axis]:
                digit = mod(digit, t.extent)
            shift[t.dim] = add(shift[t.dim], mul(digit, t.inner))
        return tuple(shift)

    def first_copy(self, axis_exprs: Dict[str, ir.Expr]) -> Optional[ir.Expr]:
        """The condition under which the running thread holds the first copy
        of its elements (every replica digit 0), or None without replicas:
        the one thread of each group of copies that writes them out."""
        return conj([
            ir.Binary("==", mod(floordiv(axis_exprs[c.axis], c.stride), c.extent), ir.Int(0)) for c in self.copies
        ])

    def guard(self, threads: "Threads", axis_exprs: Dict[str, ir.Expr]) -> Optional[ir.Expr]:
        """The condition under which the running thread holds elements, or
        None when every thread of the scope does."""
        conds = []
        for axis, n in self.used:
            if n < threads.level_size(axis):
                e = axis_exprs[axis]
                conds.append(ir.Binary("==", e, ir.Int(0)) if n == 1 else ir.Binary("<", e, ir.Int(n)))
        return conj(conds)


def storage(buf: Buffer, threads: Threads, replicated: bool = False) -> Storage:
    """`_storage`, computed once per buffer of a kernel: a register buffer
    is read by every predicate and lowering of every call naming it (an
    accumulator by each of its casts, copies and gemms).  A `Decline` is
    not kept (it is raised again at the next ask)."""
    return _STORAGES(threads.syms, buf, replicated, lambda: _storage(buf, threads, replicated))


_STORAGES = kernel_memo()  # (buffer, replicated) -> its Storage, per kernel


def _storage(buf: Buffer, threads: Threads, replicated: bool) -> Storage:
    """The thread's view of register buffer `buf`; `Decline` when its layout
    is not one a synchronous lowering can address (replicas, threads that
    share an element, thread positions that do not decode).  `replicated`
    admits replicas on thread axes (`reduce_layout`'s row values, held by
    every lane of a quad): those threads hold the same elements, and only
    reading operations (or a reduction, which leaves them all equal) may
    accept such a buffer."""
    layout = buf.tile_layout
    if layout.replica and not (replicated and all(in_hierarchy(it.axis) for it in layout.replica)):
        raise Decline(f"register buffer '{buf.name}' has replica axes ({layout})")
    try:
        split = split_thread_axes(layout)
    except LayoutError as err:
        raise Decline(f"the layout of '{buf.name}' cannot be split into lanes and warps: {err.message}") from None
    for it in split.shard:
        if is_thread(it.axis) and not in_hierarchy(it.axis):
            raise Decline(f"the layout of register buffer '{buf.name}' places elements on {it.axis}")
    if any(v for n, v in split.offset if is_thread(n)):
        raise Decline(f"the layout of '{buf.name}' is offset on a thread axis ({layout})")
    grouped = group(split, buf.shape)
    terms, mem = [], []  # mem: (stride, extent, dim, inner)
    for d in range(len(buf.shape)):
        inner = 1
        for it in reversed(grouped.dim(d)):
            if it.extent > 1:
                if is_thread(it.axis):
                    terms.append(Term(it.axis, it.stride, it.extent, d, inner))
                else:
                    mem.append((it.stride, it.extent, d, inner))
            inner *= it.extent
    copies = [Term(it.axis, it.stride, it.extent, -1, 0) for it in split.replica if it.extent > 1]
    used, axes = [], sorted({t.axis for t in terms + copies}, key=LEVEL_OF_AXIS.__getitem__)
    for axis in axes:
        its = sorted((t for t in terms + copies if t.axis == axis), key=lambda t: t.stride)
        unit = 1
        for t in its:
            if t.stride != unit:
                raise Decline(
                    f"the thread positions of '{buf.name}' on {axis} do not decode "
                    f"(strides {[x.stride for x in its]}, extents {[x.extent for x in its]}); "
                    "each thread must hold a distinct set of elements"
                )
            unit *= t.extent
        used.append((axis, unit))
    levels = [LEVEL_OF_AXIS[a] for a in axes]
    scope = "thread" if not levels else SCOPE_OF_LEVEL[max(levels)]
    if levels:
        # levels below the highest that no iterator reaches: only position 0 holds elements
        present = dict(used)
        used = [(a, present.get(a, 1)) for a in BASE_AXES[: max(levels) + 1]]
    for axis, n in used:
        if n > threads.level_size(axis):
            raise Decline(
                f"the layout of '{buf.name}' uses {n} positions of {axis} but the launch has "
                f"{threads.level_size(axis)}"
            )
    offset_m = dict(layout.offset).get("m", 0)
    size = storage_size(layout)
    if size > MAX_REGISTER_SLOTS:
        raise Decline(f"register buffer '{buf.name}' spans {size} storage slots per thread ({layout})")
    # each element of thread 0, the memory iterators' digits in product order (the last fastest): its
    # offset on m and its coordinate, built one iterator at a time rather than summed per element
    ms, coords = [offset_m], [(0,) * len(buf.shape)]
    for stride, extent, d, inner in mem:
        ms = [m + k * stride for m in ms for k in range(extent)]
        coords = [c[:d] + (c[d] + k * inner,) + c[d + 1:] for c in coords for k in range(extent)]
    if layout.swizzle is not None:
        ms = [layout.swizzle(m) for m in ms]
    slots = [None] * size
    for m, coord in zip(ms, coords):
        if slots[m] is not None:
            raise Decline(f"register buffer '{buf.name}' keeps two elements in one register ({layout})")
        slots[m] = coord
    return Storage(buf, tuple(slots), tuple(terms), tuple(used), scope, tuple(copies))


def axis_exprs(st: Storage, threads: Threads) -> Dict[str, ir.Expr]:
    """The running thread's position on each axis `st` uses."""
    out = {}
    for axis, _ in st.used:
        out[axis] = threads.require(threads.axis(axis), f"the thread's position on {axis}")
    return out


def scalar_elements(dtype: str) -> bool:
    """Whether a register array of `dtype` holds its elements as scalar
    values, one per register (e4m3 and e5m2 in a 16-bit register each; fp4,
    ue8m0 and tf32 elements are not values)."""
    return value_type_of_dtype(dtype) in FLOAT_TYPES + INT_TYPES + FP8_TYPES


def register_element(buf: Buffer, coord: Sequence[int], span: Optional[ir.Span] = None) -> ir.Index:
    """The register holding element `coord` in thread 0, which names the
    same register (the same storage slot) in every thread: the emitter
    locates a register-array element by the `m` part of its layout alone.

    A lowering passes its call's `span`: dispatch places every node a
    lowering builds at the call (`build.located`), and these element
    names, by the hundred in a GEMM's casts and copies, then need no
    rebuilding there (`register_elements`)."""
    if span is None:
        return ir.Index(ir.Name(buf.name), tuple([ir.Int(c) for c in coord]))
    return register_elements(buf, span)(coord)


def register_elements(buf: Buffer, span: Optional[ir.Span]) -> Callable[[Sequence[int]], ir.Index]:
    """`register_element(buf, coord, span)` as a function of `coord`, for
    a lowering that names many elements of one buffer (a cast, a
    fragment).  Located elements are built once per span in a kernel
    (`build.built_at`), and their leaves (the buffer's name, each index) are
    shared: the IR is immutable, a cast of 64 elements names two buffers
    and a few distinct indices, and the calls of one inlined helper (an
    epilogue's cast and store of each column block) share their span and
    most of the registers they name."""
    if span is None:
        return lambda coord: register_element(buf, coord)
    made = built_at(span).made
    found = made.get(buf.name)
    if found is None:
        found = made[buf.name] = (ir.Name(buf.name, span=span), {})
    name, elements = found  # the buffer's name at span, its elements there by coordinate
    known = elements.get

    def element(coord: Sequence[int]) -> ir.Index:
        if type(coord) is not tuple:
            coord = tuple(coord)
        elem = known(coord)
        if elem is None:
            indices = []
            for c in coord:
                i = made.get(c)
                if i is None:
                    i = made[c] = ir.Int(c, span=span)
                indices.append(i)
            elem = elements[coord] = ir.Index(name, tuple(indices), span=span)
        return elem

    return element


def check_scope(st: Storage, scope: str, threads: Threads, what: str) -> None:
    """A register buffer spread over threads is copied by exactly the
    threads that share it."""
    if st.scope != "thread" and threads.size(st.scope) != threads.size(scope):
        raise Decline(
            f"the layout of {what} '{st.buffer.name}' spreads it over a {st.scope}, "
            f"but the call is at {scope} scope"
        )


@records.frozen
class Held:
    """A register-region element a thread holds: in storage slot `slot`,
    named by `register_element(buf, coord)`, at region index `index`
    (expressions of the thread's position, one per region dim), which is
    `base` in thread 0."""

    slot: int
    coord: tuple
    index: tuple
    base: tuple  # the region index in thread 0 (ints)


def held_elements(reg: Region, st: Storage, axes: Dict[str, ir.Expr]) -> list:
    """The elements of register region `reg` each thread holds, by slot,
    its position on each axis given by `axes`.  `Decline` when whether a
    slot's element is in the region depends on the thread (a region that
    cuts through the thread pattern).  Kept with `st` per region bounds
    and positions (the index expressions unplaced: each call places them
    at itself)."""
    held = held_slots(reg, st)
    # the same for every call naming the region with the same thread positions (an accumulator's
    # copies, maps and casts in each K step or epilogue): kept with the storage, as `held` is
    key = ("held elements", id(held), tuple(axes.items()))  # (`held` is kept in st.answers: its id stays its)
    found = st.answers.get(key)
    if found is None:
        index = region_index(reg, st, axes)
        found = st.answers[key] = tuple(Held(s, c, index(base), base) for s, c, base in held)
    return found


def region_index(reg: Region, st: Storage, axes: Dict[str, ir.Expr]) -> Callable[[tuple], tuple]:
    """The region index (expressions of the running thread's position
    `axes`, one per region dim) of the element a slot holds, as a function
    of its index in thread 0 (`held_slots`' base): `held_elements`'
    indices, for a lowering that needs only some of them."""
    shift = st.offset_exprs(axes)
    dims = reg.dims
    made: dict = {}  # (base, dim) -> base + the thread's shift: a few values per dim, shared by many slots

    def index(base: tuple) -> tuple:
        parts = []
        for b, d in zip(base, dims):
            e = made.get((b, d))
            if e is None:
                e = made[(b, d)] = add(ir.Int(b), shift[d])
            parts.append(e)
        return tuple(parts)

    return index


def held_slots(reg: Region, st: Storage) -> tuple:
    """`held_elements` as (slot, coord, base) triples, without the index
    expressions (which `register_pairs` and a register fill, naming
    thread-0 registers, never read: building them was most of their time);
    kept with `st` per region bounds (a `Decline` is not kept)."""
    starts = reg.const_starts()
    if starts is None:
        raise Decline(f"the region of register buffer '{reg.name}' must have compile-time bounds")
    key = ("held", starts, reg.extents, reg.dims)
    found = st.answers.get(key)
    if found is None:
        found = st.answers[key] = _find_held_slots(reg, st, starts)
    return found


def _find_held_slots(reg: Region, st: Storage, starts: tuple) -> tuple:
    reach = [0] * len(reg.extents)
    for t in st.terms:
        reach[t.dim] += (t.extent - 1) * t.inner
    out = []
    extents, dims = reg.extents, reg.dims
    # the dims the region cuts (a whole dim holds every element along it, in every thread)
    bounds = [(d, r, a, e) for d, (r, a, e, n) in enumerate(zip(reach, starts, extents, reg.buffer.shape))
              if (a, e) != (0, n)]
    for s, c in enumerate(st.slots):
        if c is None:
            continue
        inside = True  # in every thread, each dim of the slot's element lies in the region
        for d, r, a, e in bounds:
            lo = c[d]
            if lo + r < a or lo >= a + e:
                break  # outside the region in every thread: not held
            if not (a <= lo and lo + r < a + e):
                inside = False
        else:
            if not inside:
                raise Decline(
                    f"region '{print_expr(reg.expr)}' splits the elements of register slot {s} "
                    "between threads; copy whole fragments"
                )
            out.append((s, c, tuple(c[d] - starts[d] for d in dims)))
    return tuple(out)


def follows(follower: Storage, leader: Storage, source: tuple) -> bool:
    """Whether every thread holding elements of `leader` holds, in
    `follower`, the elements it needs, moved as its leader elements move:
    for each thread position, `follower`'s shift along its dim d is
    `leader`'s shift along dim `source[d]` (0 where `source[d]` is None: a
    dim the leader's moves do not reach).  With thread 0's correspondence
    (checked by the caller, slot by slot) that makes one register name
    right in every thread.

    The answer, a walk over every thread position, is kept with `leader`
    (`Storage.answers`, keyed by the follower's serial and `source`, which
    is the projection itself) for every call that asks it again of the same
    buffers."""
    memo = ("follows", follower.serial, source)
    found = leader.answers.get(memo)
    if found is None:
        found = leader.answers[memo] = _follows(follower, leader, source)
    return found


def _follows(follower: Storage, leader: Storage, source: tuple) -> bool:
    for p in leader.positions():
        if not all(p.get(axis, 0) < n for axis, n in follower.used):
            return False
        shift = leader.thread_offset(p)
        if follower.thread_offset(p) != tuple(0 if s is None else shift[s] for s in source):
            return False
    return True


def register_pairs(dst: Region, src: Region, threads: Threads, scope: str):
    """For a register-to-register operation: (((dst coord, src coord), ...),
    storage of src) where each pair names, by thread-0 coordinates, the
    registers that correspond in every thread.  They do when both layouts
    move a thread's elements by the same shift (then thread 0's
    correspondence holds in every thread); `Decline` otherwise, since that
    would need a shuffle between threads."""
    sd, ss = storage(dst.buffer, threads), storage(src.buffer, threads)
    check_scope(sd, scope, threads, "destination")
    check_scope(ss, scope, threads, "source")
    dstarts = dst.const_starts()
    if dstarts is None:
        raise Decline(f"the region of register buffer '{dst.name}' must have compile-time bounds")
    key = ("moves like", sd.serial, src.dims, dst.dims)
    moves_like = ss.answers.get(key)
    if moves_like is None:
        moves_like = ss.answers[key] = sd.used == ss.used and all(
            _moved(ss.thread_offset(p), src, dst) == sd.thread_offset(p) for p in ss.axis_steps()
        )
    if not moves_like:
        raise Decline(
            f"'{dst.name}' and '{src.name}' spread their elements over different threads; "
            "a register copy cannot move elements between threads"
        )
    axis_exprs(ss, threads)  # `Decline` where the kernel declares no id that gives a position ss uses
    held = held_slots(src, ss)
    key = ("pairs", sd.serial, dstarts, dst.dims, id(held))  # (`held` is kept in ss.answers: its id stays its)
    pairs = ss.answers.get(key)
    if pairs is None:
        pairs = ss.answers[key] = _pairs(dst, src, sd, dstarts, held)
    return pairs, ss


def _pairs(dst: Region, src: Region, sd: Storage, dstarts: tuple, held: tuple) -> tuple:
    """`register_pairs`' pairs, or `Decline`: the same for every call
    between the same regions of the same buffers (an epilogue's cast of
    each column block), so kept with the source's storage."""
    slot_of = sd.slot_of()
    pairs = []
    dims = dst.dims
    for _, coord, base in held:
        cd = list(dstarts)
        for d, b in zip(dims, base):
            cd[d] += b
        if tuple(cd) not in slot_of:
            raise Decline(f"thread 0 holds {src.name}{list(coord)} but not {dst.name}{cd}; the layouts do not match")
        pairs.append((tuple(cd), coord))
    return tuple(pairs)


def _moved(shift: tuple, src: Region, dst: Region) -> tuple:
    """A shift of `src` coordinates as a shift of `dst` coordinates (region
    dims correspond in order; a shift along a dim outside the region has no
    counterpart, so it cannot match)."""
    out = [0] * len(dst.extents)
    for d, s in zip(dst.dims, src.dims):
        out[d] = shift[s]
    if any(shift[s] for s in range(len(shift)) if s not in src.dims):
        return (None,)
    return tuple(out)

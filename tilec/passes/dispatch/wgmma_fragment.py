"""The wgmma register fragments: which element of a 64 x n tile each
thread of a warpgroup holds in each register (PTX ISA, "Register Fragments
and Shared Memory Matrix Layouts" of wgmma), and the predicate that a call
runs in one whole warpgroup.  The wgmma lowering reads its accumulator and
register A operand with them; the `wgmma_frag` copy stores a fragment with
stmatrix by the same map.
"""
from __future__ import annotations

from typing import Optional

from tilec.compiler import ir
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import built_at
from tilec.passes.dispatch.register_storage import Storage, register_elements, storage
from tilec.passes.dispatch.threads import Threads, narrowing_guard
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp, predicate

MMA_M = 64
"""Rows of every wgmma instruction tile."""
WARPGROUP = 128


def whole_warpgroup(op: TileOp, ctx: DispatchContext):
    """Predicate: the call runs in all 128 threads of a warpgroup (wg scope,
    or cta scope when the block is one warpgroup) under no condition that
    can differ between them -- what a warpgroup-collective instruction
    (wgmma) needs, and what the wgmma fragment layouts are defined over."""
    block = ctx.symbols.launch.threads
    if not (op.scope == "wg" or (op.scope == "cta" and block == WARPGROUP)):
        where = f"cta scope with {block} threads" if op.scope == "cta" else f"{op.scope or 'unscoped'} scope"
        return False, f"the call must be made by one whole warpgroup (wg scope), not at {where}"
    g = narrowing_guard(op, ctx, "wg")
    if g is not None:
        return False, f"the call runs under '{print_expr(g)}', which not every thread of the warpgroup takes"
    return True


WHOLE_WARPGROUP = predicate("whole_warpgroup", whole_warpgroup)
"""`whole_warpgroup` as every warpgroup-collective variant lists it."""


def fragment_coord(t: int, i: int, per: int = 2) -> tuple:
    """(row, col) in a 64 x n tile of value i held by thread t of the
    warpgroup, for the wgmma D fragment (and the A fragment with n = K), with
    `per` values to a 32-bit register: 2 for D and 16-bit A, 4 for 8-bit A
    (m64nNk32: rows l/4 and l/4 + 8, four adjacent columns each, then the
    same 16 columns on).  It is a thread part plus a value part:
    fragment_coord(t, i) = fragment_coord(t, 0) + fragment_coord(0, i)."""
    w, lane = t // 32, t % 32
    return (16 * w + lane // 4 + 8 * ((i // per) % 2),
            4 * per * (i // (2 * per)) + per * (lane % 4) + i % per)


def fragment_elements(r: Region, threads: Threads, tiles, n: int, what: str, span: Optional[ir.Span],
                      per: int = 2, packed: bool = False) -> tuple:
    """Per 64 x n tile (its (row, col) origin in the region), the n/2 elements
    of `r`'s register buffer that are the fragment's values 0..n/2-1, as
    constant-indexed elements (the coordinates thread 0 holds; the register
    is the same in every thread).  `Decline` unless every thread holds every
    element where the hardware puts it.  `packed` (an f16 accumulator, which
    wgmma writes as f16x2 pairs): values 2i and 2i + 1 must also be in
    consecutive storage slots from an even one, the halves of one packed
    register.  The elements are built at `span`, the call's
    (`register_element`), once per span and fragment in a kernel
    (`build.built_at`): an epilogue's stores of each column block name the
    same fragment, from one inlined helper."""
    starts = r.const_starts()
    if starts is None:
        raise Decline(f"{what} '{r.name}' must be indexed at compile-time positions")
    try:
        st = storage(r.buffer, threads)
    except LayoutError as err:
        raise Decline(f"the layout of {what} '{r.name}' cannot be read: {err.message}") from None
    layout = r.buffer.tile_layout
    if st.scope != "wg" or dict(st.used) != {"laneid": 32, "wid_in_wg": 4}:
        raise Decline(
            f"{what} '{r.name}' must be spread over the 128 threads of a warpgroup in the wgmma fragment "
            f"layout (e.g. S[(4, 2, 8, N/8, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]), "
            f"got {layout}"
        )
    key = ("fragment", starts, tuple(tiles), n, per, packed)
    coords = st.answers.get(key)
    if coords is None:
        coords = st.answers[key] = _fragment_coords(r, st, starts, tiles, n, what, per, packed)
    if span is None:
        return _elements(coords, register_elements(r.buffer, span))
    made = built_at(span).made
    key = ("fragment", id(coords))  # (the entry keeps `coords`, so that its id stays its)
    found = made.get(key)
    if found is None:
        found = made[key] = (coords, _elements(coords, register_elements(r.buffer, span)))
    return found[1]


def _elements(coords: tuple, element) -> tuple:
    return tuple(tuple([element(c) for c in tile]) for tile in coords)


def _fragment_coords(r: Region, st: Storage, starts: tuple, tiles, n: int, what: str, per: int,
                     packed: bool) -> tuple:
    """`fragment_elements` as the thread-0 coordinates of the elements, or
    `Decline`: a property of the region and the buffer's layout, the same
    for every call naming them (an accumulator's wgmma at each K step of a
    loop, its stmatrix copies), so kept with the storage
    (`Storage.answers`; a `Decline` is not kept)."""
    layout = r.buffer.tile_layout
    slot_of = st.slot_of()
    # Thread t holds in each register thread 0's element moved by shift[t];
    # the hardware puts each value of thread t at thread 0's moved by
    # fragment_coord(t, 0) (no move in the leading dims).  So every value is
    # in place or none is, and the first thread that differs is the same for all.
    lead = tuple(starts[:-2])
    zero = (0,) * len(lead)
    bad = _misplacing_thread(st, per)
    out = []
    for row0, col0 in tiles:
        elems = []
        for i in range(n // 2):
            row, col = fragment_coord(0, i, per)
            first = lead + (starts[-2] + row0 + row, starts[-1] + col0 + col)
            slot = slot_of.get(first)
            if slot is None:
                raise Decline(f"{what} '{r.name}': no register holds element {first} in thread 0 ({layout})")
            if packed and (slot % 2 != i % 2 or i % 2 and slot != prev + 1):
                raise Decline(
                    f"{what} '{r.name}' is f16, which wgmma writes two to a 32-bit register (f16x2): each "
                    f"thread's values {i - i % 2} and {i - i % 2 + 1} (columns 2 (l % 4) and 2 (l % 4) + 1 of a "
                    f"row) must be consecutive registers from an even one, the layout {layout} puts value {i} "
                    f"in register {slot}")
            prev = slot
            if bad is not None:
                shift = st.thread_offset({"laneid": bad % 32, "wid_in_wg": bad // 32})
                want = tuple(a + b for a, b in zip(first, zero + fragment_coord(bad, 0, per)))
                got = tuple(a + b for a, b in zip(first, shift))
                raise Decline(
                    f"{what} '{r.name}' is not in the wgmma fragment layout: thread {bad} must hold "
                    f"element {want} in its register {slot}, the layout {layout} puts {got} there"
                )
            elems.append(first)
        out.append(tuple(elems))
    return tuple(out)


def _misplacing_thread(st: Storage, per: int) -> Optional[int]:
    """The first thread of the warpgroup whose registers of `st` do not
    hold what the fragment puts there, or None: a property of the buffer's
    layout, asked by every wgmma and fragment copy naming the buffer, so
    kept with the storage (`Storage.answers`)."""
    key = ("misplacing", per)
    if key not in st.answers:
        zero = (0,) * (len(st.buffer.shape) - 2)

        def misplaced(t: int) -> bool:
            return st.thread_offset({"laneid": t % 32, "wid_in_wg": t // 32}) != zero + fragment_coord(t, 0, per)

        # A thread's shift is its lane's plus its warp's (each term of a layout reads one axis), and so
        # is where the fragment puts its values (`fragment_coord`), both 0 at lane 0 of warp 0: when the
        # lanes of warp 0 and lane 0 of each warp are in place, every thread is.
        if not any(map(misplaced, range(32))) and not any(misplaced(32 * w) for w in range(1, 4)):
            st.answers[key] = None
        else:
            st.answers[key] = next(t for t in range(WARPGROUP) if misplaced(t))
    return st.answers[key]

"""copy_async tensor memory -> registers ("tcgen05_ld"): tcgen05.ld.32x32b
(Blackwell, sm_100a), the tutorial's epilogue.

    Dreg_wg = Dreg.view(128, BLK_N, layout=S[(128, BLK_N) : (1@tid_in_wg, 1)])
    wg.copy_async(Dreg_wg[:, :], tmem[:, :BLK_N])
    ptx.tcgen05.wait.ld()

A warp reads the 32 lanes of its own quarter of tensor memory (warp w of a
warpgroup: lanes 32w .. 32w + 31), lane l into thread l, `num` consecutive
32-bit columns into `num` registers (shape 32x32b).  So the call runs at
warp or warpgroup scope, unguarded within it, and the register buffer's
layout must give each thread exactly the elements of its lane: at warpgroup
scope thread t holds lane t; at warp scope lane l holds lane q * 32 + l of
one quarter q, or of the calling warp's own quarter when the tile is
replicated into every quarter (`R[4 : 32@TLane]`, as tcgen05.cp.warpx4
writes it).  Each register holds one element; a 32-bit column holds 32 /
bits of them (lowest bits first), and a thread's columns are loaded in runs
of consecutive columns, as few instructions as powers of two up to x128
allow.

The load is asynchronous and this lowering does not wait for 32-bit
elements: the caller's `ptx.tcgen05.wait.ld()` does, before the registers
are read.  Narrower elements are unpacked from the loaded words, which the
intrinsic waits for itself.
"""
from __future__ import annotations

from typing import Dict, List

from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.intrinsics import TCGEN05_LD_DTYPES
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.passes.dispatch.copy_async.operands import operand_pair
from tilec.passes.dispatch.build import add, mul
from tilec.passes.dispatch.operands import same_shape
from tilec.passes.dispatch.register_storage import Storage, register_element, storage
from tilec.passes.dispatch.threads import Threads, narrowing_guard
from tilec.passes.dispatch.placement import Placed, place
from tilec.passes.dispatch.registry import DispatchContext, TileOp, predicate, register
from tilec.passes.dispatch.tmem import routed, tmem_address, tmem_base, tmem_columns

SIGNATURE = Signature.parse("dst: expr, src: expr")

MAX_NUM = 128
"""Columns one tcgen05.ld.32x32b reads at most (.x128)."""

_THREADS = {"warp": {"laneid": 32}, "wg": {"laneid": 32, "wid_in_wg": 4}}


def _scope(op: TileOp, ctx: DispatchContext) -> str:
    """The call's scope, a CTA of one warpgroup counting as the warpgroup."""
    scope = op.scope or "cta"
    return "wg" if scope == "cta" and ctx.symbols.launch.threads == 128 else scope


def _tmem_to_registers(op: TileOp, ctx: DispatchContext):
    try:
        dst, src = operand_pair(op, ctx)
    except TilecError as err:
        return False, err.message
    if not (src.scope == "tmem" and dst.scope == "local"):
        return False, f"copies tensor memory to registers, not {src.scope} to {dst.scope}"
    return True


def _warp_or_warpgroup(op: TileOp, ctx: DispatchContext):
    if _scope(op, ctx) in _THREADS:
        return True
    return False, f"tcgen05.ld is read by whole warps: warp or warpgroup scope, not {op.scope or 'cta'}"


@register(
    "copy_async",
    families=("blackwell",),
    name="tcgen05_ld",
    priority=10,
    when=[
        predicate("tmem_to_registers", _tmem_to_registers),
        predicate("warp_or_warpgroup", _warp_or_warpgroup),
    ],
)
def lower(op: TileOp, ctx: DispatchContext) -> List[ir.Stmt]:
    op.bind(SIGNATURE)
    dst, src = operand_pair(op, ctx)
    if dst.dtype != src.dtype:
        raise TilecError(f"copy_async: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}")
    same_shape(dst, src, "copy_async", op.span)
    if src.dtype not in TCGEN05_LD_DTYPES:
        raise TilecError(f"tcgen05.ld reads {', '.join(TCGEN05_LD_DTYPES)} elements into registers, not {src.dtype}")
    scope = _scope(op, ctx)
    guard = narrowing_guard(op, ctx, scope)
    if guard is not None:
        raise TilecError(
            f"tcgen05.ld is collective over the {'warpgroup' if scope == 'wg' else 'warp'}, but this call runs "
            f"under '{print_expr(guard)}', which leaves some of its threads out"
        )
    threads = Threads(ctx.symbols)
    st = storage(dst.buffer, threads)
    regs_name = f"the registers '{dst.name}'"
    if dict(st.used) != _THREADS[scope]:
        raise TilecError(
            f"{regs_name} must be spread over the {32 if scope == 'warp' else 128} threads of the "
            f"{'warp' if scope == 'warp' else 'warpgroup'}, each holding its tensor-memory lane (e.g. "
            f"S[(128, N) : (1@tid_in_wg, 1)]), got {dst.buffer.tile_layout}"
        )
    starts = dst.const_starts()
    if starts is None:
        raise TilecError(f"{regs_name}: the register region must have compile-time bounds")
    what = "the tensor-memory source"
    t = place(src, ("TLane", "TCol"), what)
    name = f"{what} '{src.name}'"
    replicated = routed(t.layout)
    if t.layout.replica and not replicated:
        raise TilecError(f"{name}: a replicated tile is read from R[4:32@TLane] only, got {t.layout}")
    column, held0, quarter = _lanes_and_columns(st, dst, starts, t, scope, replicated, regs_name)
    if scope == "warp" and not replicated and len(quarter) != 1:
        raise TilecError(
            f"{name}: one warp reads one 32-lane quarter, the tile spans lanes of quarters {sorted(quarter)}"
        )
    bits = DTYPES[src.dtype].bits
    per = 32 // bits
    words: Dict[int, dict] = {}
    for s in held0:
        word, part = divmod(column[s], per)
        words.setdefault(word, {})[part] = s
    for word, parts in words.items():
        if len(parts) != per:
            raise TilecError(
                f"{regs_name}: a thread must hold all {per} {src.dtype} elements of each 32-bit column it reads; "
                f"column {word} has {len(parts)}"
            )
    base = ctx.fresh("tcgen05_tmem")
    stmts: List[ir.Stmt] = [ir.Assign((ir.Name(base),), tmem_base(src.buffer))]
    dyn = tmem_columns(t, what)
    if scope == "wg" or replicated:
        wid = threads.require(threads.axis("wid_in_wg"), "the warp's position in its warpgroup")
        quarter_base = mul(wid, 32 << 16)  # the calling warp's lanes
        lane0, dyn = 0, quarter_base if dyn is None else add(dyn, quarter_base)
    else:
        lane0 = 32 * quarter.pop()
    order = sorted(words)
    i = 0
    while i < len(order):
        run = 1
        while i + run < len(order) and order[i + run] == order[i] + run:
            run += 1
        num = 1 << (min(run, MAX_NUM).bit_length() - 1)
        elems = [register_element(dst.buffer, st.slots[words[c][p]], op.span)
                 for c in order[i:i + num] for p in range(per)]
        kw = (ir.Keyword("num", ir.Int(num)), ir.Keyword("dtype", ir.DTypeLit(src.dtype)))
        taddr = tmem_address(ir.Name(base), lane0, order[i], dyn)
        stmts.append(ir.ExprStmt(ir.Call("ptx.tcgen05.ld", (ir.TupleExpr(tuple(elems)), taddr), kw)))
        i += num
    return stmts


def _lanes_and_columns(st: Storage, dst: Region, starts: tuple, t: Placed, scope: str, replicated: bool,
                       regs_name: str) -> tuple:
    """Check that every thread holds the elements of its own tensor-memory
    lane, each register the same column in every thread, and every thread
    the same registers; return (the column of each register held, those
    registers, the lane quarters the threads read).

    A thread holds in register s the element `st.slots[s]` moved by its
    shift, which is nonzero on the dims `st.terms` name only, and an
    element's lane and column are a sum of one offset per region dim.  So
    the registers fall into classes by their coordinate on those moved dims:
    in a class, an element's lane is a part of the register plus a part of
    the thread, and whether a thread holds it depends on the register's
    other dims and the thread's.  The walk goes thread by thread and, per
    thread, class by class (not register by register: a 128 x 128 tile is
    16,384 elements, and the 128 registers of one class hold the same
    row), and raises at the first thread, and in it the first register,
    that an element-by-element walk would."""
    moved = sorted({term.dim for term in st.terms})
    local = {d: i for i, d in enumerate(dst.dims)}  # buffer dim -> dim of the placement
    lane_lines = [t.line(i, "TLane") for i in range(len(dst.dims))]
    col_lines = [t.line(i, "TCol") for i in range(len(dst.dims))]
    ends = [a + e for a, e in zip(starts, dst.extents)]
    still = [d for d in range(len(starts)) if d not in moved]
    exact = replicated or scope == "wg"  # a lane is its thread's own, not only in the quarter

    classes: Dict[tuple, list] = {}  # coordinate on the moved dims -> [(slot, lane part, column part)]
    for s, c in enumerate(st.slots):
        if c is None or not all(starts[d] <= c[d] < ends[d] for d in still):
            continue
        lane, col = t.base.get("TLane", 0), t.base.get("TCol", 0)
        for d in still:
            if d in local:
                lane += lane_lines[local[d]][c[d] - starts[d]]
                col += col_lines[local[d]][c[d] - starts[d]]
        classes.setdefault(tuple(c[d] for d in moved), []).append((s, lane, col))
    # per class, the first register whose lane part differs from the class's first (in a quarter, unless exact):
    # in a thread holding the class, that is the first register of its own lane, if the first is
    odd = {key: next((e for e in entries if (e[1] != entries[0][1] if exact else (e[1] - entries[0][1]) % 32)),
                     None) for key, entries in classes.items()}
    lane_parts = {key: {e[1] for e in entries} for key, entries in classes.items()}

    def not_own(s: int, pos: dict, lane: int) -> str:
        return (f"{regs_name}: thread {32 * pos.get('wid_in_wg', 0) + pos['laneid']} holds element "
                f"{st.coordinate(s, pos)}, which is in tensor-memory lane {lane}; tcgen05.ld gives lane l of a "
                f"warp's quarter to its thread l ({t.layout})")

    first_col: Dict[tuple, int] = {}  # class -> the column part its first holder adds
    quarter = set()
    held0 = None
    for pos in st.positions():
        l, w = pos["laneid"], pos.get("wid_in_wg", 0)
        want = l if replicated else 32 * w + l
        shift = st.thread_offset(pos)
        held = []
        fail = None  # (slot, message) at the first register that breaks a rule
        for key, entries in classes.items():
            coord = [x + shift[d] for d, x in zip(moved, key)]
            if not all(starts[d] <= x < ends[d] for d, x in zip(moved, coord)):
                continue
            lane, col = 0, 0
            for d, x in zip(moved, coord):
                if d in local:
                    lane += lane_lines[local[d]][x - starts[d]]
                    col += col_lines[local[d]][x - starts[d]]
            s, a, c = entries[0]
            if (a + lane != want) if exact else (a + lane) % 32 != l:
                found = s, not_own(s, pos, a + lane)
            elif first_col.setdefault(key, col) != col:
                found = s, (f"{regs_name}: register {s} holds column {c + first_col[key]} in one thread and "
                            f"{c + col} in another; one load fills a register from the same column in every lane")
            elif odd[key] is not None:
                found = odd[key][0], not_own(odd[key][0], pos, odd[key][1] + lane)
            else:
                found = None
            if found is not None and (fail is None or found[0] < fail[0]):
                fail = found
            quarter |= {(a + lane) // 32 for a in lane_parts[key]}
            held.append(key)
        if fail is not None:
            raise TilecError(fail[1])
        if held0 is None:
            held0 = held
        elif held != held0:
            raise TilecError(f"{regs_name}: the threads hold different registers of the region; copy whole rows")
    column = {s: c + first_col[key] for key in held0 or () for s, _, c in classes[key]}
    # a set filled in register order, as the element walk filled it: `lower` reads it in the set's order
    return column, set(sorted(column)), quarter

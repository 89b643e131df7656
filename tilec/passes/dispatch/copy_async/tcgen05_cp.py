"""copy_async shared -> tensor memory ("tcgen05_cp"): tcgen05.cp.32x128b.warpx4
(Blackwell, sm_100a).

    tmem = decl_buffer((32, 16), u8, scope="tmem", allocated_addr=tmem_addr[0],
                       layout=S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane])
    if tid == 0:
        copy_async(tmem[0:32, 0:16], A_smem[0:32, 0:16], cta_group=1)
        ptx.tcgen05.commit(cp_mbar.ptr_to([0]), cta_group=1)

One thread issues the copy.  Its unit, the atom, is 32 tensor-memory lanes
x 128 bits (four 32-bit columns): 32 rows of 16 bytes of shared memory that
a matrix descriptor names, which `warpx4` writes into the same 32 lanes of
every warp's quarter.  That broadcast is the destination layout's
`R[4 : 32@TLane]` replica -- the router: without exactly that replica the
call is not this variant's.  Every element of the region lies in lanes
0-31 of the replica-0 copy; the elements are grouped into atoms by their
32-bit column, four columns each from the region's first, and every atom
must be whole.  Each atom's rows are read from shared memory at
`start + (row / 8) SBO + (row % 8) W` (W: the swizzle's row width, 16 bytes
unswizzled), the 16 bytes of a row contiguous: the layout must agree element
by element, and SBO must be the same for every atom.  The swizzle mode is the
shared layout's.

The descriptor is encoded once, from the shared buffer's first element
(moved by a run-time start of the region), and each atom's copy adds its
16-byte offset and its tensor-memory column -- one tcgen05.cp for one atom,
one per atom for more (the unrolled loop over the middle tiles).  Like every
copy_async variant it does not complete the copy: the caller commits it to an
mbarrier (`ptx.tcgen05.commit`) and waits there.
"""
from __future__ import annotations

from typing import List

from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.passes.dispatch.copy_async.operands import operand_pair
from tilec.passes.dispatch.operands import same_shape
from tilec.passes.dispatch.vectors import Divisors
from tilec.passes.dispatch.placement import place
from tilec.passes.dispatch.registry import DispatchContext, TileOp, predicate, register
from tilec.passes.dispatch.smem_matrix import shared_matrix
from tilec.passes.dispatch.tmem import (
    check_cta_pair,
    column_bits,
    routed,
    router_error,
    tmem_address,
    tmem_base,
    tmem_columns,
)

SIGNATURE = Signature.parse("dst: expr, src: expr, *, cta_group: int(1|2) = 1")

ATOM_LANES = 32
ATOM_BITS = 128


def _is_valid_smem_tmem_copy(op: TileOp, ctx: DispatchContext):
    try:
        dst, src = operand_pair(op, ctx)
    except TilecError as err:
        return False, err.message
    if not (src.buffer.is_shared and dst.scope == "tmem"):
        return False, f"copies shared memory to tensor memory, not {src.scope} to {dst.scope}"
    layout = dst.buffer.tile_layout
    if not routed(layout):
        return False, router_error(layout)
    return True


def _single_thread(op: TileOp, ctx: DispatchContext):
    if op.scope == "thread":
        return True
    return False, f"tcgen05.cp is issued by one thread, not at {op.scope or 'cta'} scope (guard it: if tid == 0:)"


@register(
    "copy_async",
    families=("blackwell",),
    name="tcgen05_cp",
    priority=10,
    when=[
        predicate("validate_smem_tmem_copy", _is_valid_smem_tmem_copy),
        predicate("exec_scope", _single_thread),
    ],
)
def lower(op: TileOp, ctx: DispatchContext) -> List[ir.Stmt]:
    bound = op.bind(SIGNATURE)
    cta_group = SIGNATURE.literals(op.call.func, bound, op.span)["cta_group"]
    check_cta_pair(cta_group, ctx, "copy_async (tcgen05.cp)")
    dst, src = operand_pair(op, ctx)
    if dst.dtype != src.dtype:
        raise TilecError(f"copy_async: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}")
    same_shape(dst, src, "copy_async", op.span)
    what = "the tensor-memory destination"
    t = place(dst, ("TLane", "TCol"), what)
    s = place(src, ("m",), "the shared source")
    name = f"{what} '{dst.name}'"
    bits = DTYPES[dst.dtype].bits
    per_row = ATOM_BITS // bits  # elements in one 16-byte row of an atom
    low, high = t.bounds("TLane")
    if low < 0 or high >= ATOM_LANES:
        raise TilecError(
            f"{name}: tcgen05.cp.32x128b.warpx4 writes lanes 0-31 of each warp's quarter, but the tile reaches "
            f"lane {high} ({t.layout})"
        )
    first, last = t.bounds("TCol")
    col0 = column_bits(first, dst.dtype, name)
    count = (last - first) // per_row + 1
    lanes, cols = t.flat("TLane"), t.flat("TCol")
    # slot[(atom * 32 + lane) * per_row + e]: the element (row-major index) at element e of an atom's lane
    whole = len(lanes) == count * ATOM_LANES * per_row  # known before a slot table of a huge span is made
    if whole:
        slot = [-1] * len(lanes)
        for n, (lane, col) in enumerate(zip(lanes, cols)):
            atom, within = divmod(col - first, per_row)
            slot[(atom * ATOM_LANES + lane) * per_row + within] = n
    if not whole or -1 in slot:
        raise TilecError(
            f"{name}: the tile must fill whole 32-lane x 128-bit atoms (lanes 0-31, {per_row} {dst.dtype} per "
            f"lane from column {first}), got {len(lanes)} elements over {count} atom(s) ({t.layout})"
        )
    # every atom is 32 rows (MN) x 16 bytes (K) of shared memory with atom 0's row pattern;
    # side by side along K they form the matrix the descriptor and its offsets name
    smem = s.flat("m")
    offsets = [smem[n] for n in slot]  # atom, row, element
    origin = offsets[0]
    mn = [offsets[r * per_row] - origin for r in range(ATOM_LANES)]
    for a in range(count):
        at = a * ATOM_LANES * per_row
        for r in range(ATOM_LANES):
            for e in range(per_row):
                got = offsets[at + r * per_row + e] - offsets[at]
                if got != mn[r] + e:
                    raise TilecError(
                        f"the shared source '{src.name}' is not 32 rows of 16 contiguous bytes per atom with one "
                        f"row pattern: element {e} of row {r} of atom {a} is {got} elements from the atom's first, "
                        f"atom 0's pattern puts it at {mn[r] + e} ({s.layout})"
                    )
    k = [offsets[a * ATOM_LANES * per_row + e] - origin for a in range(count) for e in range(per_row)]
    tiles = [(0, a * per_row) for a in range(count)]
    sm = shared_matrix("tcgen05", s, origin, mn, k, tiles, (ATOM_LANES, per_row),
                       Divisors(ctx.symbols), "the shared source", majors=("K",))
    desc = ctx.fresh("tcgen05_cp_desc")
    base = ctx.fresh("tcgen05_tmem")
    dyn = tmem_columns(t, what)
    stmts: List[ir.Stmt] = [
        ir.Assign((ir.Name(base),), tmem_base(dst.buffer)),
        ir.Assign((ir.Name(desc),), sm.descriptor()),
    ]
    kw = (ir.Keyword("shape", ir.Str("32x128b")), ir.Keyword("multicast", ir.Str("warpx4")),
          ir.Keyword("cta_group", ir.Int(cta_group)))
    for a in range(count):
        taddr = tmem_address(ir.Name(base), 0, col0 + a * ATOM_BITS // 32, dyn)
        stmts.append(ir.ExprStmt(ir.Call("ptx.tcgen05.cp", (taddr, sm.operand(desc, tiles[a])), kw)))
    return stmts

"""What the `reduce` variants share: which threads hold which pieces of each
row, and the three stages that combine them.

    reduce(m[:, :], S[:, :], op="max", axes=(1,))

folds dims `axes` of the register buffer `S` into `m`, a register buffer
of the reduced shape (those dims gone or kept with extent 1).  The
source's layout alone says where the pieces of one result element are:

1. in one thread (its registers for the reduced dims): folded there, as a
   balanced tree so the additions do not wait on each other;
2. in lanes of one warp (the reduced dims' `laneid` iterators): combined by
   a butterfly of `shfl.sync.bfly`, one round per lane bit, after which
   every lane of the group holds the result;
3. in several warps (the reduced dims' `wid_in_wg` / `wgid` iterators):
   each warp's partial goes to a shared `scratch` buffer, the CTA
   synchronises, and every thread folds the partials of its rows.

The variants (`reduce/fold.py`, `reduce/shfl.py`, `reduce/smem.py`) differ
in the stages they may use, so dispatch picks the cheapest one the layout
allows.  The destination must hold, in every thread, the results of the
rows that thread reduced: that is `reduce_layout(L, shape, axes)`
(`layout_shape.reduce_dims`), where the threads that shared a row are
replicas.  With `accum=True` the result is combined with what the
destination held (a running max).
"""
from __future__ import annotations

from math import prod
from typing import List, Optional


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.compiler.symbols import assignable, value_type_of_dtype
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import add, conj, floordiv, mod, mul
from tilec.passes.dispatch.operands import SIGNATURES, bind, region, shape_text
from tilec.passes.dispatch.per_kernel import last_call
from tilec.passes.dispatch.register_storage import (
    Storage,
    axis_exprs,
    follows,
    held_slots,
    region_index,
    register_elements,
    scalar_elements,
    storage,
)
from tilec.passes.dispatch.roll import roll
from tilec.passes.dispatch.threads import Threads, narrowing_guard
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp


@records.frozen
class Row:
    """One result element as the running thread sees it: `dst` names its
    register (thread-0 coordinates), `index` its index in the destination
    region (expressions of the thread's position), `parts` the source
    registers this thread folds into it."""

    dst: ir.Index
    index: tuple
    parts: tuple


@records.frozen
class Reduction:
    op: str  # "sum", "max" or "min"
    accum: bool
    dst: Region
    src: Region
    dtype: str  # the type the reduction computes in: the destination's
    rows: tuple  # of Row
    lanes: tuple  # xor masks on laneid, one butterfly round each
    warps: tuple  # register_storage.Term on wid_in_wg / wgid along the reduced dims
    lane_terms: tuple  # register_storage.Term on laneid along the reduced dims
    src_storage: Storage
    scratch: Optional[ir.Expr]
    span: Optional[ir.Span]  # the call's, where the lowering builds

    @property
    def partials(self) -> int:
        """Warps whose partials meet in shared memory, per result element."""
        return prod(t.extent for t in self.warps)


@last_call
def operands(op: TileOp, ctx: DispatchContext):
    """(dst, src, values): the regions and the compile-time arguments, read
    once per call (`last_call`) for every variant's predicates and `plan`."""
    args = bind(op)
    values = SIGNATURES["reduce"].literals(op.call.func, args, op.span)
    dst = region(args["dst"], ctx.symbols, "the destination of reduce")
    src = region(args["src"], ctx.symbols, "the source of reduce")
    axes = values["axes"]
    rank = len(src.extents)
    if not axes or len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        raise TilecError(f"reduce: axes={axes} must be distinct dims of '{src.name}' (0..{rank - 1})", op.span)
    kept = tuple(src.extents[d] for d in src.dims if d not in axes)
    if kept != dst.shape:
        raise TilecError(
            f"reduce: reducing dims {axes} of '{print_expr(src.expr)}' ({shape_text(src.shape)}) leaves "
            f"{shape_text(kept)}, but '{print_expr(dst.expr)}' is {shape_text(dst.shape)} (extents of 1 aside)",
            op.span,
        )
    return dst, src, values


def registers(op: TileOp, ctx: DispatchContext):
    """Predicate: both operands are register buffers of scalar values."""
    dst, src, _ = operands(op, ctx)
    for r in (dst, src):
        if not r.is_local:
            return False, f"reduce works on register (local) buffers; '{r.name}' is in {r.scope} (copy it to registers)"
        if not scalar_elements(r.dtype):
            return False, f"'{r.name}' has {r.dtype} elements, which are not scalar values"
    return True


@last_call
def plan(op: TileOp, ctx: DispatchContext) -> Reduction:
    """The reduction's rows and cross-thread stages; `Decline` when the
    layouts do not fit together (see the module docstring).  Planned once
    per call (`last_call`), however many variants' predicates ask."""
    dst, src, values = operands(op, ctx)
    axes = values["axes"]
    threads = Threads(ctx.symbols)
    ss = storage(src.buffer, threads)
    sd = storage(dst.buffer, threads, replicated=True)
    dstarts = dst.const_starts()
    if dstarts is None:
        raise Decline(f"the region of register buffer '{dst.name}' must have compile-time bounds")
    kept = [d for d in src.dims if d not in axes]
    hint = (
        f"give '{dst.name}' the layout reduce_layout(<layout of {src.name}>, {tuple(src.buffer.shape)}, {tuple(axes)})"
    )
    # a move of the source's rows as a move of the destination: each destination dim's source dim
    source = [None] * len(dst.extents)
    for d, s in zip(dst.dims, kept):
        source[d] = s
    if not follows(sd, ss, tuple(source)):
        raise Decline(f"'{dst.name}' does not hold, in every thread, the results of the rows that thread reduces; {hint}")
    slot_of = sd.slot_of()
    index = region_index(src, ss, axis_exprs(ss, threads))
    src_element, dst_element = register_elements(src.buffer, op.span), register_elements(dst.buffer, op.span)
    groups: dict = {}  # a row's index in thread 0 -> (its first element's, its elements)
    for _, coord, base in held_slots(src, ss):
        key = tuple(b for b, d in zip(base, src.dims) if d not in axes)
        groups.setdefault(key, (base, []))[1].append(src_element(coord))
    rows = []
    for key, (first, parts) in groups.items():
        coord = list(dstarts)
        for d, b in zip(dst.dims, key):
            coord[d] += b
        if tuple(coord) not in slot_of:
            raise Decline(f"thread 0 reduces into {dst.name}{coord}, which it does not hold; {hint}")
        at = tuple(i for i, d in zip(index(first), src.dims) if d not in axes)
        rows.append(Row(dst_element(coord), at, tuple(parts)))
    lanes, lane_terms, warps = [], [], []
    for t in ss.terms:
        if t.dim not in axes:
            continue
        if t.axis != "laneid":
            warps.append(t)
            continue
        if t.extent & (t.extent - 1) or t.stride & (t.stride - 1):
            raise Decline(
                f"the lanes sharing a row of '{src.name}' are not a power-of-two group "
                f"({t.extent} lanes {t.stride} apart), which a shfl.bfly butterfly needs"
            )
        lane_terms.append(t)
        lanes.extend(t.stride << i for i in range(t.extent.bit_length() - 1))
    return Reduction(
        values["op"],
        values["accum"],
        dst,
        src,
        value_type_of_dtype(dst.dtype),
        tuple(rows),
        tuple(sorted(lanes)),
        tuple(warps),
        tuple(lane_terms),
        ss,
        bind(op)["scratch"],
        op.span,
    )


# --------------------------------------------------------------------------
# Predicates the variants combine
# --------------------------------------------------------------------------


def stages(op: TileOp, ctx: DispatchContext) -> tuple:
    """(lanes, warps): whether the reduction crosses lanes, and warps."""
    r = plan(op, ctx)
    return bool(r.lanes), bool(r.warps)


def within_warp(op: TileOp, ctx: DispatchContext):
    """Predicate: the pieces of each row are in one warp (no warp or
    warpgroup iterator along the reduced dims)."""
    _, warps = stages(op, ctx)
    if warps:
        return False, "the rows of the source are spread over several warps"
    return True


def lanes_run_together(op: TileOp, ctx: DispatchContext):
    """Predicate: no condition around the call leaves out lanes of a warp
    (shfl.sync needs every lane the mask names)."""
    if ctx.symbols.launch.threads < 32:
        return False, f"the block has {ctx.symbols.launch.threads} threads; shfl.sync needs all 32 lanes of a warp"
    g = narrowing_guard(op, ctx, "warp")
    if g is not None:
        return False, f"the call runs under '{print_expr(g)}', which not every lane of the warp takes"
    return True


# --------------------------------------------------------------------------
# The lowering
# --------------------------------------------------------------------------


# The lowering builds at the call's span (`r.span`) what it builds of located parts (the
# registers, the temporaries), so that dispatch need not build it again to place it there
# (`build.located`); the shared-memory stage's addresses are left to dispatch to place.


def combine(op: str, a: ir.Expr, b: ir.Expr, span: Optional[ir.Span] = None) -> ir.Expr:
    if op == "sum":
        return ir.Binary("+", a, b, span=span)
    return ir.Call(op, (a, b), span=span)


def _tree(op: str, values: List[ir.Expr], span: Optional[ir.Span] = None) -> ir.Expr:
    """A balanced fold: the two halves do not depend on each other."""
    if len(values) == 1:
        return values[0]
    half = (len(values) + 1) // 2
    return combine(op, _tree(op, values[:half], span), _tree(op, values[half:], span), span)


def shuffle_xor(value: ir.Expr, mask: int, span: Optional[ir.Span] = None) -> ir.Expr:
    """The value `value` has in lane (this lane ^ mask), every lane taking part."""
    return ir.Call("ptx.shfl.sync.bfly", (value, ir.Int(mask, span=span)), span=span)


def butterfly(r: Reduction, temps: list, ctx: DispatchContext) -> List[ir.Stmt]:
    """The lane stage as shuffles: one xor round per lane bit of the reduced
    dims, every row's round interleaved so the shuffles overlap."""
    at = r.span
    return [ir.Assign((t,), combine(r.op, t, shuffle_xor(t, mask, at), at), span=at) for mask in r.lanes for t in temps]


def lower(r: Reduction, ctx: DispatchContext, lanes=butterfly) -> List[ir.Stmt]:
    """The statements: fold, the lane stage (`lanes(r, temps, ctx)`, the
    butterfly unless a variant combines lanes another way), shared-memory
    exchange, in that order, each only when the plan needs it."""
    syms, at = ctx.symbols, r.span
    as_dtype = _converter(r, syms)
    values = [_tree(r.op, [as_dtype(p) for p in row.parts], at) for row in r.rows]
    # each result assigns its register, named by thread-0 coordinates (`roll`'s anchors)
    dst_registers = [tuple(i.value for i in row.dst.indices) for row in r.rows]
    if not (r.lanes or r.warps or r.accum):
        return roll(ctx, [ir.Assign((row.dst,), value, span=at) for row, value in zip(r.rows, values)], at,
                    anchors=dst_registers)
    temps = []
    stmts: List[ir.Stmt] = []
    for value in values:
        name = ir.Name(ctx.fresh("part"), span=at)
        stmts.append(ir.Assign((name,), value, type=r.dtype, span=at))
        temps.append(name)
    if r.lanes:
        stmts.extend(lanes(r, temps, ctx))
    if r.warps:
        stmts.extend(_exchange(r, temps, ctx))
    # Only the assignments to the destination can roll: before them each statement sets a
    # temporary of its own, or (a butterfly of one row) one temporary with masks that are
    # distinct powers of two, never three in a progression; `roll` would leave them as
    # they are, and keying them was most of its time.
    ends = [ir.Assign((row.dst,), combine(r.op, row.dst, t, at) if r.accum else t, span=at)
            for row, t in zip(r.rows, temps)]
    return stmts + roll(ctx, ends, at, anchors=dst_registers)


def _converter(r: Reduction, syms):
    """A source register as the reduction computes it: itself, or
    converted to its type (at the call) -- the same for every register,
    each of the source's dtype, so decided once."""
    first = next((p for row in r.rows for p in row.parts), None)
    if first is None or assignable(syms.type_of(first), r.dtype, first):
        return lambda part: part
    dtype, at = r.dtype, r.span
    return lambda part: ir.Call("convert", (part, ir.DTypeLit(dtype, span=at)), span=at)


def _exchange(r: Reduction, temps: list, ctx: DispatchContext) -> List[ir.Stmt]:
    """Each warp's partials through `scratch`: element e of the destination
    region owns `partials` consecutive slots, one per warp position along
    the reduced dims; one lane of each butterfly group writes, the CTA
    synchronises, every thread folds its rows' slots, and a second barrier
    lets the next use of `scratch` overwrite it."""
    scratch = region(r.scratch, ctx.symbols, "the scratch buffer of reduce")
    threads = Threads(ctx.symbols)
    axes = axis_exprs(r.src_storage, threads)
    n = r.partials
    slot, place = ir.Int(0), 1
    for t in reversed(r.warps):
        digit = mod(floordiv(axes[t.axis], t.stride), t.extent)
        slot = add(slot, mul(digit, place))
        place *= t.extent
    writer = conj([
        ir.Binary("==", mod(floordiv(axes["laneid"], t.stride), t.extent), ir.Int(0)) for t in r.lane_terms
    ])
    writes, reads = [], []
    for row, t in zip(r.rows, temps):
        flat = ir.Int(0)
        for i, e in zip(row.index, r.dst.shape):
            flat = add(mul(flat, e), i)
        base = mul(flat, n)
        writes.append(ir.Assign((_flat_element(scratch, add(base, slot)),), t))
        parts = [_flat_element(scratch, add(base, ir.Int(k))) for k in range(n)]
        reads.append(ir.Assign((t,), _tree(r.op, parts)))
    guard = r.src_storage.guard(threads, axes)
    cond = conj([c for c in (guard, writer) if c is not None])
    sync = ir.ExprStmt(ir.Call("cuda.cta_sync", ()))
    out = [ir.If(cond, tuple(writes))] if cond is not None else writes
    return out + [sync] + reads + [sync]


def _flat_element(r: Region, flat: ir.Expr) -> ir.Index:
    """Element `flat` (row-major) of region `r`."""
    index = []
    for e in reversed(r.shape[1:]):
        index.append(mod(flat, e))
        flat = floordiv(flat, e)
    index.append(flat)  # the slot count was checked, so the outermost digit needs no wrap
    return r.element(tuple(reversed(index)))


def scratch_fits(op: TileOp, ctx: DispatchContext):
    """Predicate: `scratch=` names a shared buffer of the reduction's type
    with a slot for every partial."""
    r = plan(op, ctx)
    if r.scratch is None:
        return False, (
            f"the rows of '{r.src.name}' are spread over warps; pass scratch=<a shared {r.dst.dtype} buffer of "
            f"{prod(r.dst.shape) * r.partials} elements> to combine them through shared memory"
        )
    s = region(r.scratch, ctx.symbols, "the scratch buffer of reduce")
    need = prod(r.dst.shape) * r.partials
    if not s.buffer.is_shared or s.dtype != r.dst.dtype or prod(s.shape) < need:
        return False, (
            f"scratch '{print_expr(s.expr)}' must be a shared {r.dst.dtype} region of at least {need} elements "
            f"(one per destination element and warp), not {s.scope} {s.dtype} with {prod(s.shape)}"
        )
    return True


def whole_cta(op: TileOp, ctx: DispatchContext):
    """Predicate: every thread of the CTA runs the call (it synchronises the
    CTA), and the source is one buffer over the CTA, not a copy per warp or
    warpgroup (those would share scratch slots)."""
    g = narrowing_guard(op, ctx, "cta")
    if g is not None:
        return False, f"the call synchronises the CTA but runs under '{print_expr(g)}', which not every thread takes"
    r = plan(op, ctx)
    threads = Threads(ctx.symbols)
    if threads.size(r.src_storage.scope) != threads.block:
        return False, (
            f"'{r.src.name}' is spread over a {r.src_storage.scope} but the CTA has {threads.block} threads; "
            "each copy would need its own scratch and barrier"
        )
    return True

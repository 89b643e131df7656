"""copy -> plain loads and stores ("ldst"), at any scope, in any direction
between global memory, shared memory and registers.

Memory to memory, the threads of the scope share the work: the region is
cut into runs along its last dim -- as long as both layouts keep a run
contiguous and aligned, up to 16 bytes, so a run is one vector access
(`copy_vec`) -- and consecutive threads take consecutive runs, which
coalesces global accesses.  A swizzled shared layout permutes whole 16-byte
chunks, so a run never leaves its chunk and the emitter's per-access XOR is
all the swizzle needs.

With registers on one side, the register layout decides who moves what:
each thread moves exactly the elements it holds, its registers named by
constant indices (`register_storage.register_element`) and the memory side indexed
by its thread position.  Registers that hold consecutive elements of a
contiguous memory run move as one vector.  Register to register, both
layouts must give each thread the same elements.

`oob="zero"` (a global source loaded into registers): the source region may
run past its tensor's end, as the last tile of a ragged M or N does.  Every
access reads inside the tensor -- a coordinate past the end is read as 0
instead -- and the registers it filled are then selected to zero where it
lies outside, so nothing outside is read and what lies outside reads as 0.
No branch: with a guarded block of loads (and an else of zeros) ptxas no
longer interleaved the epilogue's GELU across elements (hgemm_v7's SASS
issued its tanh one element at a time, and with bias, GELU and residual
the kernel ran 3% slower than before the guards: bench/RESULTS.md);
loads and register selects are one straight-line block.  A dim whose region start
and tensor extent are both multiples of the region's extent there (a
64-row slice at a multiple of 64 in a tensor of 4096 rows) is wholly
inside or wholly outside, so one test of its start serves every access;
only the other dims (the ragged ones) test each access.  Where the last
dim is tested per access, a vector never straddles the edge: its width
also divides the tensor's last extent (a runtime extent: the multiple its
`assume`s state).

`oob="any"`: the same reads, without the selects: what lies outside reads
as some element of the tensor, unspecified.  For values that are never
used -- a GEMM epilogue's rows and columns past M and N, which its TMA
store clips -- it costs nothing but the moved coordinates (one test per
copy where the slices are whole tiles), where the selects of "zero" cost an
instruction per element.
"""
from __future__ import annotations

from tilec.compiler.dtypes import DTYPES
from tilec.compiler.value_types import value_type_of_dtype
from tilec.passes.dispatch import FAMILIES, Decline, predicate, register
from tilec.compiler import ir, records
from tilec.compiler.fold import fold_expr
from tilec.passes.dispatch.copy.operands import copy_operands, oob_fill
from tilec.compiler.region import Region, extent_expr
from tilec.passes.dispatch.build import assign, conj, copy_vec, guarded, located_elements
from tilec.passes.dispatch.register_storage import (
    axis_exprs,
    check_scope,
    held_elements,
    register_element,
    register_elements,
    register_pairs,
    scalar_elements,
    storage,
)
from tilec.passes.dispatch.roll import roll
from tilec.passes.dispatch.threads import Threads, scope_of, whole_scope
from tilec.passes.dispatch.vectors import Divisors, spread, vector_ok, widths


def _no_tensor_memory(op, ctx):
    dst, src = copy_operands(op, ctx)
    for r in (dst, src):
        if r.scope == "tmem":
            return False, f"'{r.name}' is in tensor memory, which copy_async (tcgen05) reads and writes"
    return True


@register(
    "copy",
    families=FAMILIES,
    name="ldst",
    priority=10,
    when=[predicate("no_tensor_memory", _no_tensor_memory), predicate("whole_scope", whole_scope)],
)
def lower(op, ctx):
    dst, src = copy_operands(op, ctx)
    if DTYPES[dst.dtype].bits < 8:
        raise Decline(f"{dst.dtype} elements are packed; copy them as bytes (u8)")
    if dst.is_local and src.is_local:
        return registers_to_registers(op, ctx, dst, src)
    if dst.is_local or src.is_local:
        return registers_and_memory(op, ctx, dst, src, oob_fill(op))
    return memory_to_memory(op, ctx, dst, src)


def memory_to_memory(op, ctx, dst: Region, src: Region) -> list:
    threads = Threads(ctx.symbols)
    scope = scope_of(op)
    tid = threads.require(threads.index(scope), f"each thread's position in its {scope}")
    divisors = Divisors(ctx.symbols)
    v = next(v for v in widths(DTYPES[dst.dtype].bytes) if vector_ok(dst, v, divisors) and vector_ok(src, v, divisors))
    return spread(
        ctx, threads.size(scope), tid, dst.shape, v,
        lambda index: [copy_vec(dst.element(index), src.element(index), v)],
    )


def registers_and_memory(op, ctx, dst: Region, src: Region, oob: str | None = None) -> list:
    """`oob` ("zero" or "any"): src (global) may run past its tensor's end."""
    to_registers = dst.is_local
    reg, mem = (dst, src) if to_registers else (src, dst)
    if not scalar_elements(reg.dtype):
        raise Decline(f"'{reg.name}' has {reg.dtype} elements, which registers do not hold one by one")
    scope = scope_of(op)
    threads = Threads(ctx.symbols)
    st = storage(reg.buffer, threads, replicated=True)  # replicas load alike; one of them stores
    check_scope(st, scope, threads, "register buffer")
    if st.scope == "thread" and not to_registers and threads.size(scope) > 1:
        raise Decline(
            f"every thread of the {scope} holds its own '{reg.name}' and would write the same "
            f"memory; copy per thread (thread.copy)"
        )
    axes = axis_exprs(st, threads)
    held = held_elements(reg, st, axes)
    divisors = Divisors(ctx.symbols)
    eb = DTYPES[reg.dtype].bytes
    # registers move as vectors only when each holds exactly one element (not i8/i16, widened to 32 bits)
    vectors = eb >= 2 and value_type_of_dtype(reg.dtype) == reg.dtype
    by_slot = {h.slot: h for h in held}
    uniform, ragged = _edge_tests(mem, divisors) if oob else ({}, {})
    # a vector must not straddle an edge tested per access
    last = ragged.get(len(mem.buffer.shape) - 1, ir.Int(0))
    # where the region lies past a uniform dim's end, it is read from 0 there instead
    clamped = records.evolve(mem, starts=tuple(
        ir.Select(uniform[d], s, ir.Int(0)) if d in uniform else s for d, s in enumerate(mem.starts)))
    allowed: dict = {}  # width -> whether the region (its layout, start and edge) allows it, for every register
    mem_element, reg_element = located_elements(mem, op.span), register_elements(reg.buffer, op.span)
    done, stmts, registers = set(), [], []  # registers: the coordinate of the register each statement names
    for h in held:
        if h.slot in done:
            continue
        index = h.index
        mem_elem = mem_element(index)
        v = 1
        for w in widths(eb) if vectors else ():
            if w > 1 and _register_run(by_slot, h, w, done) and _allowed(allowed, w, mem, divisors, last) \
                    and divisors.of(mem_elem.indices[-1]) % w == 0:
                v = w
                break
        reg_elem = reg_element(h.coord)
        done.update(range(h.slot, h.slot + v))
        inside = conj(list(uniform.values()) + [ir.Binary("<", mem_elem.indices[d], n) for d, n in ragged.items()])
        if inside is not None:
            # read inside the tensor (a ragged coordinate past its end: 0), then zero what lies outside
            mem_elem = ir.Index(mem_elem.base, tuple(
                ir.Select(ir.Binary("<", c, ragged[d]), c, ir.Int(0)) if d in ragged else c
                for d, c in enumerate(clamped.element(index).indices)))
        at = op.span if inside is None else None  # both elements placed at the call (a clamped one is not)
        if v > 1:
            stmts.append(copy_vec(reg_elem, mem_elem, v, at) if to_registers else copy_vec(mem_elem, reg_elem, v, at))
        else:
            stmts.append(assign(reg_elem, mem_elem, at) if to_registers else assign(mem_elem, reg_elem, at))
        registers.append(h.coord)
        if inside is not None and oob == "zero":
            stmts += _zeroed(reg.buffer, h, v, by_slot, inside)
            registers += [by_slot[h.slot + k].coord for k in range(v)]
    writer = None if to_registers else st.first_copy(axes)
    stmts = roll(ctx, stmts, op.span, anchors=registers)  # each statement names one register, at one place per kind
    return guarded(conj([c for c in (st.guard(threads, axes), writer) if c is not None]), stmts)


def _allowed(allowed: dict, w: int, mem: Region, divisors: Divisors, last: ir.Expr) -> bool:
    """Whether `mem` moves in vectors of `w` wherever a thread's registers
    hold a run of them (the start of the run aside), worked out on the
    first such run and kept in `allowed` for the copy's others."""
    ok = allowed.get(w)
    if ok is None:
        ok = allowed[w] = vector_ok(mem, w, divisors) and divisors.of(last) % w == 0
    return ok


def _edge_tests(mem: Region, divisors: Divisors):
    """({dim: test}, {dim: extent}) of a region that may run past its
    tensor's end: `start < extent` for each dim the region lies wholly
    inside or wholly outside of (start and the tensor's extent multiples
    of the region's extent, or a single index), one test for the whole
    copy; the extent for the others, which each access tests."""
    uniform, ragged = {}, {}
    for d, n in enumerate(mem.buffer.shape):
        start, extent, bound = mem.starts[d], mem.extents[d], extent_expr(n)
        if extent == 1 or divisors.of(start) % extent == 0 and divisors.of(bound) % extent == 0:
            test = fold_expr(ir.Binary("<", start, bound))
            if not (isinstance(test, ir.Bool) and test.value):
                uniform[d] = test
        else:
            ragged[d] = bound
    return uniform, ragged


def _zeroed(buf, first, v: int, by_slot, inside: ir.Expr) -> list:
    """`reg = reg if inside else 0` for the v registers a load from `first`
    on filled (from a clamped address when the element lies outside): a
    select of registers, no branch, so the loads stay one straight-line
    block that ptxas schedules with the arithmetic after them."""
    zero = ir.Float(0.0) if DTYPES[buf.dtype].is_float else ir.Int(0)
    out = []
    for k in range(v):
        r = register_element(buf, by_slot[first.slot + k].coord)
        out.append(assign(r, ir.Select(inside, r, zero)))
    return out


def _register_run(by_slot, first, w: int, done) -> bool:
    """Whether slots first.slot .. first.slot + w - 1 hold the region
    elements first, first + 1, ... along its last dim, in every thread (the
    thread's shift is the same for all its slots), none moved yet."""
    if not first.base:
        return False
    for k in range(1, w):
        h = by_slot.get(first.slot + k)
        if h is None or h.slot in done or h.base != first.base[:-1] + (first.base[-1] + k,):
            return False
    return True


def registers_to_registers(op, ctx, dst: Region, src: Region) -> list:
    threads = Threads(ctx.symbols)
    pairs, st = register_pairs(dst, src, threads, scope_of(op))
    dst_element, src_element = register_elements(dst.buffer, op.span), register_elements(src.buffer, op.span)
    stmts = [assign(dst_element(cd), src_element(cs)) for cd, cs in pairs]
    return guarded(st.guard(threads, axis_exprs(st, threads)), roll(ctx, stmts, op.span))

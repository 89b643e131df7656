"""What the synchronous variants (gemm, copy, cast, fill) need to know about
a call's operands, computed once here instead of in every variant.

- `bind` matches a call against its primitive's signature.
- `region` reads an operand `buf` / `buf[a:b, i, :]`: the buffer, the start
  of each dim (a run-time expression is fine) and its extent (which must be a
  compile-time integer, `k * 64 + 64` minus `k * 64` included).
- `Threads` finds, among the launch ids a kernel declares, an expression for
  each thread position a lowering needs (the lane, the warp in its
  warpgroup...), and `narrowing_guard` whether the call runs under a
  condition that leaves some threads of its scope out.
- `Storage` inverts a register buffer's layout: for each of a thread's
  storage slots (registers), the element it holds as a formula of the
  thread's position.  That is what lets a lowering name registers with
  constant indices (`register_element`: the element thread 0 holds there)
  while the memory side is indexed by the thread's position.
- `vector_ok` / `spread` cut memory regions into aligned vector runs shared
  by the threads of a scope; `roll` writes repetitive output as loops.

Expressions are built with `add`/`mul`/`floordiv`/`mod`, which fold what
they can, so the lowered IR reads like what an author would write.  Other
dispatch variants (tma, wgmma, tcgen05) use these helpers too.
"""
from __future__ import annotations

import itertools
from math import gcd, prod
from typing import Dict, Optional, Sequence

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.affine import linear
from tilec.compiler.builtins import LAUNCH_AXES, Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import fuse_contiguous, split_thread_axes, storage_size
from tilec.compiler.layout_axes import BASE_AXES, LayoutError, in_hierarchy, is_thread
from tilec.compiler.layout_shape import group
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region, plus as add
from tilec.compiler.symbols import Buffer, KernelSymbols
from tilec.compiler.value_types import FLOAT_TYPES, FP8_TYPES, INT_TYPES, value_type_of_dtype
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp, predicate
from tilec.compiler.divisors import known_divisor
from tilec.compiler.fold import fold_expr

# --------------------------------------------------------------------------
# Signatures
# --------------------------------------------------------------------------

SIGNATURES = {
    "copy": Signature.parse("dst: expr, src: expr"),
    "cast": Signature.parse("dst: expr, src: expr"),
    "fill": Signature.parse("dst: expr, value: expr"),
    "gemm": Signature.parse(
        "D: expr, A: expr, B: expr, C: expr = None, *, transpose_A: bool = False, "
        "transpose_B: bool = False, alpha: expr = None, beta: expr = None"
    ),
    "reduce": Signature.parse(
        "dst: expr, src: expr, *, op: str(sum|max|min), axes: shape, accum: bool = False, scratch: expr = None"
    ),
    "map": Signature.parse("dst: expr, value: expr"),
}


def bind(op: TileOp) -> Dict:
    """The call's arguments by parameter name (a located error for a call
    that does not fit the primitive's signature)."""
    return op.bind(SIGNATURES[op.name])


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


def const(e: ir.Expr) -> Optional[int]:
    e = fold_expr(e)
    return e.value if isinstance(e, ir.Int) else None


def mul(a: ir.Expr, k: int) -> ir.Expr:
    if k == 0:
        return ir.Int(0)
    return a if k == 1 else fold_expr(ir.Binary("*", a, ir.Int(k)))


def _by_literal(a: ir.Expr, op: str):
    """(x, k) when `a` is `x op k` for a literal k."""
    if isinstance(a, ir.Binary) and a.op == op and isinstance(a.rhs, ir.Int):
        return a.lhs, a.rhs.value
    return None


def floordiv(a: ir.Expr, k: int) -> ir.Expr:
    if k == 1:
        return a
    scaled, divided, wrapped = _by_literal(a, "*"), _by_literal(a, "//"), _by_literal(a, "%")
    if scaled is not None and scaled[1] % k == 0:
        return mul(scaled[0], scaled[1] // k)
    if divided is not None and divided[1] > 0:
        return floordiv(divided[0], divided[1] * k)
    if wrapped is not None and 0 < wrapped[1] <= k:  # x % a is in [0, a)
        return ir.Int(0)
    return fold_expr(ir.Binary("//", a, ir.Int(k)))


def mod(a: ir.Expr, k: int) -> ir.Expr:
    scaled, wrapped = _by_literal(a, "*"), _by_literal(a, "%")
    if k == 1 or scaled is not None and scaled[1] % k == 0:
        return ir.Int(0)
    if wrapped is not None and wrapped[1] % k == 0:
        return mod(wrapped[0], k)
    divided = _by_literal(a, "//")
    inner = divided and _by_literal(divided[0], "%")
    if inner and divided[1] > 0 and -(-inner[1] // divided[1]) <= k:  # (x % a) // b < ceil(a / b)
        return a
    return fold_expr(ir.Binary("%", a, ir.Int(k)))


def conj(conds: Sequence[ir.Expr]) -> Optional[ir.Expr]:
    out = None
    for c in conds:
        out = c if out is None else ir.Binary("and", out, c)
    return out


def difference(stop: ir.Expr, start: ir.Expr) -> Optional[int]:
    """`stop - start` when it is a compile-time integer."""
    d = linear(fold_expr(ir.Binary("-", stop, start)))
    return d.const if d.is_const else None


# --------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------


def region(expr: ir.Expr, syms: KernelSymbols, what: str, past_end: bool = False) -> Region:
    """The region an operand names (`tilec.compiler.region`); a located
    error when it is not one, when an extent is not a compile-time integer,
    or when it leaves its buffer (`past_end`: see `Region.check_bounds`)."""
    base = expr.base if isinstance(expr, ir.Index) else expr
    if not isinstance(base, ir.Name):
        raise TilecError(f"{what} must be a buffer or a region of one (buf[a:b, ...])", expr.span)
    r = Region.read(expr, syms.buffer(base.id, base.span))
    r.check_extents()
    r.check_bounds(past_end)
    return r


# --------------------------------------------------------------------------
# What is known to divide a value
# --------------------------------------------------------------------------


def _last_kernel(fn):
    """Memoize `fn(obj)` for the last `obj` it saw: dispatch asks the same
    question of one kernel for every call in it."""
    last = [None, None]

    def memo(obj):
        if last[0] is not obj:
            last[0], last[1] = obj, fn(obj)
        return last[1]

    return memo


@_last_kernel
def _assignments(kernel: ir.Kernel) -> Dict[str, list]:
    """name -> [(expression, loop step or None)]: every value bound to it."""
    sources: Dict[str, list] = {}
    for node in visit.walk(kernel):
        if isinstance(node, ir.Assign) and node.type is None:
            values = node.value.items if isinstance(node.value, ir.TupleExpr) and len(node.targets) > 1 else (node.value,)
            for t, v in zip(node.targets, values):
                if isinstance(t, ir.Name):
                    sources.setdefault(t.id, []).append((v, None))
        elif isinstance(node, ir.For) and node.kind == "range" and isinstance(node.step, ir.Int):
            sources.setdefault(node.var, []).append((node.start, node.step.value))
    return sources


class Divisors:
    """`of(expr)`: a number known to divide `expr`, the way the emitter
    proves vector alignment (`tilec.compiler.divisors`) -- names bound to
    a value are as divisible as every expression assigned to them, range
    loop variables as their start and step -- so that a vector width chosen
    here is one the emitter accepts."""

    def __init__(self, kernel: ir.Kernel):
        self.sources = _assignments(kernel)
        self.cache: Dict[str, int] = {}

    def name(self, name: str) -> int:
        if name in self.cache:
            return self.cache[name]
        self.cache[name] = 1  # a cycle proves nothing
        sources = self.sources.get(name)
        if not sources:
            return 1
        d = 0
        for value, step in sources:
            d = gcd(d, self.of(value))
            if step is not None:
                d = gcd(d, step)
        self.cache[name] = d or 1
        return self.cache[name]

    def of(self, e: ir.Expr) -> int:
        return known_divisor(e, self.name)


# --------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------

SCOPE_STRIDE = {"thread": 1, "warp": 32, "wg": 128}
"""Threads of a scope, when the block has that many (a CTA is the block)."""

LEVEL_OF_AXIS = {"laneid": 0, "wid_in_wg": 1, "wgid": 2}
SCOPE_OF_LEVEL = {0: "warp", 1: "wg", 2: "cta"}


class Threads:
    """Expressions for thread positions, from the launch ids a kernel
    declares (`lane = lane_id([32])`, `tid = thread_id([128])`...).  None
    where the declared ids cannot give one."""

    def __init__(self, syms: KernelSymbols):
        self.block = syms.launch.threads
        self.ids = {}
        for i in syms.launch.ids:
            if LAUNCH_AXES[i.builtin].stride is not None and not i.name.startswith("<"):
                self.ids[i.builtin] = ir.Name(i.name)

    def size(self, scope: str) -> int:
        """Threads taking part in a call at `scope` (the block may be smaller)."""
        return min(SCOPE_STRIDE.get(scope, self.block), self.block)

    def level_size(self, axis: str) -> int:
        """Positions of a base axis (laneid, wid_in_wg, wgid) the block has."""
        if axis == "laneid":
            return min(32, self.block)
        if axis == "wid_in_wg":
            return max(1, min(4, self.block // 32))
        return max(1, self.block // 128)

    def axis(self, name: str) -> Optional[ir.Expr]:
        """The thread's position on `laneid`, `wid_in_wg`, `wgid`,
        `tid_in_wg` or `tx`."""
        ids, b = self.ids, self.block
        if name == "laneid":
            if b == 1:
                return ir.Int(0)
            for builtin in ("lane_id", "thread_id", "thread_id_in_wg"):
                if builtin in ids:
                    return ids[builtin] if builtin == "lane_id" or b <= 32 else mod(ids[builtin], 32)
            return None
        if name == "wid_in_wg":
            if b <= 32:
                return ir.Int(0)
            if "warp_id_in_wg" in ids:
                return ids["warp_id_in_wg"]
            if "warp_id" in ids:
                return ids["warp_id"] if b <= 128 else mod(ids["warp_id"], 4)
            if "thread_id_in_wg" in ids:
                return floordiv(ids["thread_id_in_wg"], 32)
            if "thread_id" in ids:
                return floordiv(ids["thread_id"], 32) if b <= 128 else mod(floordiv(ids["thread_id"], 32), 4)
            return None
        if name == "wgid":
            if b <= 128:
                return ir.Int(0)
            for builtin, k in (("warpgroup_id", 1), ("warp_id", 4), ("thread_id", 128)):
                if builtin in ids:
                    return floordiv(ids[builtin], k)
            return None
        if name == "tid_in_wg":
            if "thread_id_in_wg" in ids:
                return ids["thread_id_in_wg"]
            if "thread_id" in ids:
                return ids["thread_id"] if b <= 128 else mod(ids["thread_id"], 128)
            return self._combine(["laneid", "wid_in_wg"])
        if name == "tx":
            if "thread_id" in ids:
                return ids["thread_id"]
            return self._combine(["laneid", "wid_in_wg", "wgid"])
        raise ValueError(name)

    def _combine(self, axes) -> Optional[ir.Expr]:
        parts = [self.axis(a) for a in axes]
        if any(p is None for p in parts):
            return None
        out, unit = ir.Int(0), 1
        for a, p in zip(axes, parts):
            out = add(out, mul(p, unit))
            unit *= {"laneid": 32, "wid_in_wg": 4}.get(a, 1)
        return out

    def index(self, scope: str) -> Optional[ir.Expr]:
        """The thread's position among the `size(scope)` threads of its scope."""
        if self.size(scope) == 1:
            return ir.Int(0)
        return self.axis({"warp": "laneid", "wg": "tid_in_wg", "cta": "tx"}[scope])

    def require(self, expr: Optional[ir.Expr], what: str) -> ir.Expr:
        if expr is None:
            raise Decline(
                f"the kernel declares no launch id that gives {what} "
                "(declare thread_id, or lane_id with warp_id)"
            )
        return expr


@_last_kernel
def _id_strides(syms: KernelSymbols) -> Dict[str, int]:
    """The finest thread stride each name depends on: launch ids, and the
    names assigned from them."""
    strides = {
        i.name: LAUNCH_AXES[i.builtin].stride
        for i in syms.launch.ids
        if LAUNCH_AXES[i.builtin].stride is not None
    }
    assigns = [n for n in visit.walk(syms.kernel) if isinstance(n, (ir.Assign, ir.AugAssign))]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            s = expr_stride(a.value, strides)
            if s is None:
                continue
            targets = a.targets if isinstance(a, ir.Assign) else (a.target,)
            for t in targets:
                for item in (t.items if isinstance(t, ir.TupleExpr) else (t,)):
                    if isinstance(item, ir.Name) and s < strides.get(item.id, 1 << 30):
                        strides[item.id] = s
                        changed = True
    return strides


def expr_stride(e: ir.Expr, strides: Dict[str, int]) -> Optional[int]:
    found = [strides[n.id] for n in visit.walk(e) if isinstance(n, ir.Name) and n.id in strides]
    if any(isinstance(n, ir.Call) and n.func == "ptx.elect_sync" for n in visit.walk(e)):
        found.append(1)
    return min(found) if found else None


def narrowing_guard(op: TileOp, ctx: DispatchContext, scope: str) -> Optional[ir.Expr]:
    """The first condition around the call that can differ between the
    threads of `scope` (it depends on a finer thread id), or None when all
    of them run the call together."""
    if scope == "thread":
        return None
    limit = SCOPE_STRIDE.get(scope, 1 << 30)
    strides = _id_strides(ctx.symbols)
    for g in ctx.guards:
        s = expr_stride(g, strides)
        if s is not None and s < limit:
            return g
    return None


def whole_scope(op: TileOp, ctx: DispatchContext):
    """Predicate: every thread of the call's scope runs it (the lowering
    divides the work among all of them)."""
    scope = scope_of(op)
    g = narrowing_guard(op, ctx, scope)
    if g is not None:
        return False, (
            f"the {op.name} is at {scope} scope but runs under '{print_expr(g)}', which not every "
            f"thread of the {scope} takes; write thread.{op.name} under a one-thread condition, or drop the condition"
        )
    return True


def full_warp(op: TileOp, ctx: DispatchContext):
    """Predicate: the call is warp-collective and every lane of the warp
    runs it (warp scope, a block of 32 threads or more, no condition that
    can differ between lanes)."""
    if op.scope != "warp":
        return False, f"the instruction is warp-collective: the call must be at warp scope, not {op.scope or 'unscoped'}"
    block = ctx.symbols.launch.threads
    if block < 32:
        return False, f"the block has {block} threads; a warp-collective instruction needs all 32 lanes of a warp"
    g = narrowing_guard(op, ctx, "warp")
    if g is not None:
        return False, f"the call runs under '{print_expr(g)}', which not every lane of the warp takes"
    return True


WARP_COLLECTIVE = predicate("warp_collective", full_warp)
"""`full_warp` as every warp-collective variant lists it, under one name."""


# --------------------------------------------------------------------------
# Register storage
# --------------------------------------------------------------------------


MAX_REGISTER_SLOTS = 4096
"""More storage slots per thread than any register array has (a thread has
at most 255 registers); a layout that spans more is refused, not enumerated."""


@attrs.frozen
class Term:
    """One thread iterator of a register layout: its digit of the thread's
    position on `axis`, times `inner`, adds to the element's index in `dim`."""

    axis: str
    stride: int
    extent: int
    dim: int
    inner: int


@attrs.frozen
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
    those digits hold the same elements."""

    buffer: Buffer
    slots: tuple
    terms: tuple
    used: tuple  # (axis, positions) pairs
    scope: str
    copies: tuple = ()  # of Term (dim -1)

    @property
    def size(self) -> int:
        return len(self.slots)

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
    slots = [None] * size
    for digits in itertools.product(*(range(e) for _, e, _, _ in mem)):
        m = offset_m + sum(dg * st for dg, (st, _, _, _) in zip(digits, mem))
        if layout.swizzle is not None:
            m = layout.swizzle(m)
        coord = [0] * len(buf.shape)
        for dg, (_, _, d, inner) in zip(digits, mem):
            coord[d] += dg * inner
        if slots[m] is not None:
            raise Decline(f"register buffer '{buf.name}' keeps two elements in one register ({layout})")
        slots[m] = tuple(coord)
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


def scope_of(op: TileOp) -> str:
    """The call's scope; dispatch runs after infer-scope, which gives every
    primitive one, so an unprefixed call (a test calling `select`) is a CTA's."""
    return op.scope or "cta"


def register_element(buf: Buffer, coord: Sequence[int]) -> ir.Index:
    """The register holding element `coord` in thread 0, which names the
    same register (the same storage slot) in every thread: the emitter
    locates a register-array element by the `m` part of its layout alone."""
    return ir.Index(ir.Name(buf.name), tuple(ir.Int(c) for c in coord))


def check_scope(st: Storage, scope: str, threads: Threads, what: str) -> None:
    """A register buffer spread over threads is copied by exactly the
    threads that share it."""
    if st.scope != "thread" and threads.size(st.scope) != threads.size(scope):
        raise Decline(
            f"the layout of {what} '{st.buffer.name}' spreads it over a {st.scope}, "
            f"but the call is at {scope} scope"
        )


@attrs.frozen
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
    """The elements of register region `reg` each thread holds, by slot.
    `Decline` when whether a slot's element is in the region depends on the
    thread (a region that cuts through the thread pattern)."""
    starts = reg.const_starts()
    if starts is None:
        raise Decline(f"the region of register buffer '{reg.name}' must have compile-time bounds")
    reach = [0] * len(reg.extents)
    for t in st.terms:
        reach[t.dim] += (t.extent - 1) * t.inner
    shift = st.offset_exprs(axes)
    out = []
    for s, c in enumerate(st.slots):
        if c is None:
            continue
        inside = [a <= lo and lo + r < a + e for lo, r, a, e in zip(c, reach, starts, reg.extents)]
        outside = [lo + r < a or lo >= a + e for lo, r, a, e in zip(c, reach, starts, reg.extents)]
        if any(outside):
            continue
        if not all(inside):
            raise Decline(
                f"region '{print_expr(reg.expr)}' splits the elements of register slot {s} "
                "between threads; copy whole fragments"
            )
        base = tuple(c[d] - starts[d] for d in reg.dims)
        index = tuple(add(ir.Int(b), shift[d]) for b, d in zip(base, reg.dims))
        out.append(Held(s, c, index, base))
    return out


def follows(follower: Storage, leader: Storage, project) -> bool:
    """Whether every thread holding elements of `leader` holds, in
    `follower`, the elements it needs, moved as its leader elements move:
    for each thread position, `follower`'s shift is `project(leader's
    shift)`.  With thread 0's correspondence (checked by the caller, slot
    by slot) that makes one register name right in every thread."""
    for p in leader.positions():
        if not all(p.get(axis, 0) < n for axis, n in follower.used):
            return False
        if follower.thread_offset(p) != tuple(project(leader.thread_offset(p))):
            return False
    return True


def register_pairs(dst: Region, src: Region, threads: Threads, scope: str):
    """For a register-to-register operation: ([(dst coord, src coord)],
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
    if sd.used != ss.used or any(
        _moved(ss.thread_offset(p), src, dst) != sd.thread_offset(p) for p in ss.positions()
    ):
        raise Decline(
            f"'{dst.name}' and '{src.name}' spread their elements over different threads; "
            "a register copy cannot move elements between threads"
        )
    slot_of = {c: s for s, c in enumerate(sd.slots) if c is not None}
    pairs = []
    for h in held_elements(src, ss, axis_exprs(ss, threads)):
        cd = list(dstarts)
        for d, b in zip(dst.dims, h.base):
            cd[d] += b
        if tuple(cd) not in slot_of:
            raise Decline(f"thread 0 holds {src.name}{list(h.coord)} but not {dst.name}{cd}; the layouts do not match")
        pairs.append((tuple(cd), h.coord))
    return pairs, ss


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


# --------------------------------------------------------------------------
# Memory regions: vector widths and spreading over threads
# --------------------------------------------------------------------------


def vector_ok(r: Region, v: int, divisors: Divisors) -> bool:
    """Whether the elements of memory region `r` move in runs of v along its
    last dim with one aligned access each: the conditions under which the
    emitter's `copy_vec` proves the same (contiguous run, strides and offset
    multiples of v, the run within one swizzle chunk, the start aligned)."""
    if v == 1:
        return True
    buf = r.buffer
    last = len(buf.shape) - 1
    if not r.dims or r.dims[-1] != last or r.extents[last] % v:
        return False
    layout = buf.tile_layout
    g = group(layout, buf.shape)
    dims = [fuse_contiguous(g.dim(d)) for d in range(len(buf.shape))]
    inner = dims[last][-1] if dims[last] else None
    if inner is None or inner.axis != "m" or inner.stride != 1 or inner.extent % v:
        return False
    if any(it.axis == "m" and it.stride % v for its in dims for it in its if it is not inner):
        return False
    if dict(layout.offset).get("m", 0) % v:
        return False
    if layout.swizzle is not None and v > 1 << layout.swizzle.per_element:
        return False
    if buf.align % (v * buf.elem_bytes):
        return False
    return divisors.of(r.starts[last]) % v == 0


def widths(elem_bytes: int) -> list:
    """Vector widths to try, widest first: up to 16 bytes."""
    out, v = [], max(1, 16 // elem_bytes)
    while v >= 1:
        out.append(v)
        v //= 2
    return out


def spread(ctx: DispatchContext, count: int, tid: ir.Expr, shape: Sequence[int], v: int, make) -> list:
    """Statements that let `count` threads (the running one at `tid`) visit
    every element of a region of `shape`, in runs of `v` along the last dim:
    consecutive threads take consecutive runs, each thread every count-th.
    `make(index)` gives the statements for the run starting at region index
    `index` (expressions)."""
    vshape = tuple(shape[:-1]) + (shape[-1] // v,) if shape else ()
    total = prod(vshape)
    rounds = -(-total // count)
    var = ctx.fresh("i") if rounds > 1 else None
    it = ir.Name(var) if var else ir.Int(0)
    run = add(mul(it, count), tid)
    index, inner = [], 1
    for k in reversed(range(len(vshape))):
        index.append(_digit(it, count, tid, inner, vshape[k] if k > 0 else None))
        inner *= vshape[k]
    index.reverse()
    if index:
        index[-1] = mul(index[-1], v)
    body = list(make(tuple(index)))
    if total % count:
        body = [ir.If(ir.Binary("<", run, ir.Int(total)), tuple(body))]
    if var is None:
        return body
    return [ir.For(var, "unroll", ir.Int(0), ir.Int(rounds), ir.Int(1), tuple(body))]


def _digit(it: ir.Expr, count: int, tid: ir.Expr, inner: int, n: Optional[int]) -> ir.Expr:
    """(it * count + tid) // inner % n (no `% n` when n is None), with the
    loop index split off where inner divides count."""
    if count % inner:
        digit = floordiv(add(mul(it, count), tid), inner)
        return digit if n is None else mod(digit, n)
    q = count // inner
    if n is not None and q % n == 0:
        return mod(floordiv(tid, inner), n)
    digit = add(mul(it, q), floordiv(tid, inner))
    return digit if n is None else mod(digit, n)


def copy_vec(dst: ir.Index, src: ir.Index, v: int) -> ir.Stmt:
    return ir.ExprStmt(ir.Call("copy_vec", (dst, src, ir.Int(v))))


def assign(dst: ir.Expr, value: ir.Expr) -> ir.Stmt:
    return ir.Assign((dst,), value)


def guarded(cond: Optional[ir.Expr], stmts: list) -> list:
    if cond is None or not stmts:
        return stmts
    return [ir.If(cond, tuple(stmts))]


def same_shape(a: Region, b: Region, verb: str, span=None) -> None:
    if a.shape != b.shape:
        raise TilecError(
            f"{verb}: '{print_expr(a.expr)}' is {shape_text(a.shape)} but '{print_expr(b.expr)}' is "
            f"{shape_text(b.shape)} (extents of 1 aside)",
            span,
        )


def shape_text(shape) -> str:
    return "x".join(map(str, shape)) if shape else "one element"


# --------------------------------------------------------------------------
# Readable output
# --------------------------------------------------------------------------


def _blank_ints(node: ir.Node) -> ir.Node:
    return visit.transform(node, lambda n: ir.Int(0) if isinstance(n, ir.Int) else n)


def _ints(node: ir.Node) -> list:
    return [n.value for n in visit.walk(node) if isinstance(n, ir.Int)]


def _template(stmt: ir.Stmt, var: ir.Name, first: list, step: list) -> ir.Stmt:
    """`stmt` (the first of a run) with every integer that changes along the
    run written as `first + var * step`."""
    values = iter(zip(first, step))

    def fn(n):
        if not isinstance(n, ir.Int):
            return n
        v, d = next(values)
        return n if d == 0 else add(mul(var, d), v)

    return _rewrite_preorder(stmt, fn)


def _rewrite_preorder(node: ir.Node, fn) -> ir.Node:
    """`fn` on every Int in walk (pre-)order, the order `_ints` lists them."""
    if isinstance(node, ir.Int):
        return fn(node)
    return visit.map_children(node, lambda child: _rewrite_preorder(child, fn))


def roll(ctx: DispatchContext, stmts: list, shortest: int = 3) -> list:
    """`stmts` with every run of `shortest` or more statements that differ
    only in integers, each changing by a fixed step, written as one `unroll`
    loop -- what an author would write; the unroll pass expands it again."""
    shapes = [_blank_ints(s) for s in stmts]
    ints = [_ints(s) for s in stmts]
    out, i = [], 0
    while i < len(stmts):
        shape = shapes[i]
        first = ints[i]
        j = i + 1
        step = None
        while j < len(stmts) and shapes[j] == shape:
            values = ints[j]
            d = [b - a for a, b in zip(first, values)]
            if step is None:
                step = d
            elif any(v != a + (j - i) * s for a, v, s in zip(first, values, step)):
                break
            j += 1
        if j - i >= shortest:
            var = ctx.fresh("j")
            body = _template(stmts[i], ir.Name(var), first, step)
            out.append(ir.For(var, "unroll", ir.Int(0), ir.Int(j - i), ir.Int(1), (body,)))
            i = j
        else:
            out.append(stmts[i])
            i += 1
    return out

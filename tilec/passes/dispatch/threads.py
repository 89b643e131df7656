"""Thread scopes: which thread a lowering runs in, and which threads run it.

`Threads` finds, among the launch ids a kernel declares, an expression for
each thread position a lowering needs (the lane, the warp in its
warpgroup...); `narrowing_guard` tells whether the call runs under a
condition that leaves some threads of its scope out, which the
`whole_scope` and `WARP_COLLECTIVE` predicates refuse.
"""
from __future__ import annotations

from typing import Dict, Optional

from tilec.compiler import ir, visit
from tilec.compiler.builtins import LAUNCH_AXES
from tilec.compiler.printer import print_expr
from tilec.compiler.symbols import KernelSymbols
from tilec.passes.dispatch.build import add, floordiv, mod, mul
from tilec.passes.dispatch.per_kernel import last_kernel, statements
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp, predicate


SCOPE_STRIDE = {"thread": 1, "warp": 32, "wg": 128}
"""Threads of a scope, when the block has that many (a CTA is the block)."""

LEVEL_OF_AXIS = {"laneid": 0, "wid_in_wg": 1, "wgid": 2}
SCOPE_OF_LEVEL = {0: "warp", 1: "wg", 2: "cta"}


class Threads:
    """Expressions for thread positions, from the launch ids a kernel
    declares (`lane = lane_id([32])`, `tid = thread_id([128])`...).  None
    where the declared ids cannot give one."""

    def __init__(self, syms: KernelSymbols):
        self.syms = syms  # whose tables (`per_kernel`) what is read through this object goes to
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


class _Strides:
    """The finest thread stride each name depends on -- launch ids, and the
    names assigned from them -- worked out for the names a guard reads
    when one first asks (`settle`): a kernel's guards read a few names
    (its launch ids, a flag or two), and reading every assignment's value
    to find every name's stride was most of what a small kernel's calls
    cost here.

    A name's stride is the least over the assignments that set it of the
    least stride their value reads (or 1 where it calls ptx.elect_sync),
    which depends only on the names those values read, and on theirs in
    turn: `settle` collects those, then finds their strides by rounds
    until nothing changes (strides only fall), as for the whole kernel.  A
    settled name's stride is final; an assignment that also sets another
    name may lower it meanwhile, to a stride that name really reaches, so
    it settles to the same least stride later."""

    def __init__(self, syms: KernelSymbols):
        self.strides = {
            i.name: LAUNCH_AXES[i.builtin].stride
            for i in syms.launch.ids
            if LAUNCH_AXES[i.builtin].stride is not None
        }
        self.settled: set = set()
        self.guards: Dict[int, tuple] = {}  # id(guard) -> (the guard, kept so that its id stays its; its stride)
        self.setters: Dict[str, list] = {}  # name -> [(assignment, the names it sets)]
        for a in statements(syms.kernel):
            if isinstance(a, (ir.Assign, ir.AugAssign)):
                targets = a.targets if isinstance(a, ir.Assign) else (a.target,)
                set_ = [item.id for t in targets for item in (t.items if isinstance(t, ir.TupleExpr) else (t,))
                        if isinstance(item, ir.Name)]
                for name in set_:
                    self.setters.setdefault(name, []).append((a, set_))

    def settle(self, names: list) -> None:
        """Find the strides of `names` (those not settled yet)."""
        needed = {n for n in names if n not in self.settled}
        todo, flows, seen = list(needed), [], set()
        while todo:
            for a, set_ in self.setters.get(todo.pop(), ()):
                if id(a) in seen:
                    continue
                seen.add(id(a))
                reads, elected = _reads(a.value)
                if not (reads or elected):
                    continue
                flows.append((reads, elected, set_))
                for n in reads:
                    if n not in needed and n not in self.settled:
                        needed.add(n)
                        todo.append(n)
        strides = self.strides
        changed = True
        while changed:
            changed = False
            for reads, elected, set_ in flows:
                s = _stride(reads, elected, strides)
                if s is None:
                    continue
                for name in set_:
                    if s < strides.get(name, 1 << 30):
                        strides[name] = s
                        changed = True
        self.settled |= needed

    def of_guard(self, g: ir.Expr) -> Optional[int]:
        """The finest thread stride guard `g` depends on, or None: its
        names settled, so final.  Kept per guard node: the conditions
        around a block are asked by every call in it, for every candidate
        variant."""
        found = self.guards.get(id(g))
        if found is None:
            names, elected = _reads(g)
            self.settle(names)
            found = self.guards[id(g)] = (g, _stride(names, elected, self.strides))
        return found[1]


_STRIDES = last_kernel(_Strides)
"""The kernel's `_Strides`, settled as its calls' guards ask."""


def _reads(e: ir.Expr) -> tuple:
    """(the names `e` reads, in walk order, whether it calls ptx.elect_sync):
    what a stride is found from."""
    names, elected = [], False
    for n in visit.walk(e):
        if isinstance(n, ir.Name):
            names.append(n.id)
        elif isinstance(n, ir.Call) and n.func == "ptx.elect_sync":
            elected = True
    return names, elected


def _stride(names: list, elected: bool, strides: Dict[str, int]) -> Optional[int]:
    found = [strides[n] for n in names if n in strides]
    if elected:
        found.append(1)  # one elected lane
    return min(found) if found else None


def narrowing_guard(op: TileOp, ctx: DispatchContext, scope: str) -> Optional[ir.Expr]:
    """The first condition around the call that can differ between the
    threads of `scope` (it depends on a finer thread id), or None when all
    of them run the call together."""
    if scope == "thread":
        return None
    limit = SCOPE_STRIDE.get(scope, 1 << 30)
    strides = _STRIDES(ctx.symbols)
    for g in ctx.guards:
        s = strides.of_guard(g)
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


def scope_of(op: TileOp) -> str:
    """The call's scope; dispatch runs after infer-scope, which gives every
    primitive one, so an unprefixed call (a test calling `select`) is a CTA's."""
    return op.scope or "cta"

"""The `infer-scope` pass: give every tile primitive an explicit scope prefix.

A primitive's scope says which threads cooperate in it, and dispatch picks its
variant by it (`thread.copy_async` can be a TMA issue, `warp.gemm` an
`mma.sync` nest).  Authors usually leave it implicit and write the guard
instead, so it is read off the code:

1. the guard around the call: a condition `id == value` fixes the launch ids
   it mentions (also through a sum like `warp * 32 + lane`, and in either
   operand of `and`), and the finest id fixed decides -- a lane, thread or
   `ptx.elect_sync()` gives `thread.`, a warp id `warp.`, a warpgroup id
   `wg.`;
2. the operands: a register (`local`) buffer belongs to one thread unless
   its layout names thread axes, its scope (`@laneid`: a warp's, also
   `O[0@laneid]`, lane 0 of each warp; `@tid_in_wg`: a warpgroup's; see
   docs/layout.md), and a region indexed by a launch id is the thread's own
   (`Dsmem[warp * 32 + lane, :]`); this is how an unguarded
   `cast(Dreg_f16[:], Dreg[:])` is a per-thread cast, as in the seeds;
3. otherwise the whole CTA: `cta.`, also when the CTA is a single
   warpgroup (dispatch treats the two alike there; `wg.` is only inferred
   from a warpgroup guard or layout, and can always be written).

The finest of the guard's and the operands' scopes wins.  An explicit prefix
is never changed.  The result shows in IR dumps as the prefix.
"""
from __future__ import annotations

from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.builtins import LAUNCH_AXES, tile_primitive
from tilec.compiler.layout_axes import AXES
from tilec.compiler.passmanager import Pass, PassContext

_ORDER = ("thread", "warp", "wg", "cta")
"""Scopes from the fewest threads to the most."""

_BY_STRIDE = {1: "thread", 32: "warp", 128: "wg"}
"""The scope a guard gives when it fixes a launch id of this thread stride."""

_BY_LEVEL = {0: "warp", 1: "wg", 2: "cta"}
"""The scope of a register buffer spread over thread levels up to this one
(0 lanes, 1 warps in a warpgroup, 2 warpgroups)."""


class InferScope(Pass):
    name = "infer-scope"
    requires = frozenset({"folded"})
    provides = frozenset({"scoped"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        kernels = []
        for k in module.kernels:
            scoped = attrs.evolve(k, body=_Kernel(ctx.symbols(k, module)).block(k.body, "cta"))
            ctx.analyses.carry(k, scoped, module, ctx.target)  # a scope prefix changes no name
            kernels.append(scoped)
        return attrs.evolve(module, kernels=tuple(kernels))


def _finest(*scopes: str) -> str:
    return min(scopes, key=_ORDER.index)


class _Kernel:
    """What the inference needs to know about a kernel's names (from
    `tilec.compiler.symbols`): the thread stride of each launch id, and the
    layout of each register buffer."""

    def __init__(self, syms):
        self.id_stride = {
            i.name: LAUNCH_AXES[i.builtin].stride
            for i in syms.launch.ids
            if LAUNCH_AXES[i.builtin].stride is not None
        }
        self.local = {name: b.layout for name, b in syms.buffers.items() if b.scope == "local"}

    # -- statements --------------------------------------------------------

    def block(self, stmts, guard: str) -> tuple:
        """The statements scoped; `stmts` itself when none changed (a block
        without tile primitives is not rebuilt)."""
        new = tuple(self.stmt(s, guard) for s in stmts)
        return stmts if all(a is b for a, b in zip(new, stmts)) else new

    def stmt(self, s: ir.Stmt, guard: str) -> ir.Stmt:
        if isinstance(s, ir.If):
            inner = self.guard_scope(s.cond)
            then, orelse = self.block(s.then, _finest(guard, inner)), self.block(s.orelse, guard)
            return visit.keep(s, then=then, orelse=orelse)
        if isinstance(s, (ir.For, ir.While)):
            body = self.block(s.body, guard)
            return visit.keep(s, body=body)
        if isinstance(s, ir.ExprStmt) and isinstance(s.expr, ir.Call):
            call = s.expr
            if tile_primitive(call.func) == call.func:
                scope = _finest(guard, self.operand_scope(call))
                return visit.evolve(s, expr=visit.evolve(call, func=f"{scope}.{call.func}"))
        return s

    # -- guards ------------------------------------------------------------

    def guard_scope(self, cond: ir.Expr) -> str:
        strides = self._fixed(cond)
        return _finest("cta", *(_BY_STRIDE[s] for s in strides if s in _BY_STRIDE))

    def _fixed(self, cond: ir.Expr) -> set:
        """The thread strides of the launch ids `cond` fixes to one value."""
        if isinstance(cond, ir.Binary) and cond.op == "and":
            return self._fixed(cond.lhs) | self._fixed(cond.rhs)
        if isinstance(cond, ir.Call) and cond.func == "ptx.elect_sync":
            return {1}
        if isinstance(cond, ir.Binary) and cond.op == "==":
            for ids, other in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
                fixed = self._id_sum(ids)
                if fixed and not self._mentions_id(other):
                    return {self.id_stride[n] for n in fixed}
        return set()

    def _id_sum(self, e: ir.Expr) -> Optional[set]:
        """The launch ids in `e` when it is a sum of ids scaled by constants
        (`warp * 32 + lane`), an expression that is one value for one thread
        only; None for anything else."""
        if isinstance(e, ir.Name):
            return {e.id} if e.id in self.id_stride else None
        if isinstance(e, ir.Int):
            return set()
        if isinstance(e, ir.Binary) and e.op == "+":
            a, b = self._id_sum(e.lhs), self._id_sum(e.rhs)
            return None if a is None or b is None else a | b
        if isinstance(e, ir.Binary) and e.op == "*":
            for x, c in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if isinstance(c, ir.Int) and c.value != 0:
                    return self._id_sum(x)
        return None

    def _mentions_id(self, e: ir.Node) -> bool:
        kind = type(e)  # (a name or a literal, as most indices are, without a walk)
        if kind is ir.Name:
            return e.id in self.id_stride
        if kind in ir.LITERALS:
            return False
        return any(n.id in self.id_stride for n in visit.find_all(e, ir.NAMES))

    # -- operands ----------------------------------------------------------

    def operand_scope(self, call: ir.Call) -> str:
        scopes = ["cta"]
        for arg in call.args:
            base = arg.base if isinstance(arg, ir.Index) else arg
            if isinstance(base, ir.Name) and base.id in self.local:
                scopes.append(_layout_scope(self.local[base.id]))
            if isinstance(arg, ir.Index) and any(self._mentions_id(i) for i in arg.indices):
                scopes.append("thread")
        return _finest(*scopes)


def _layout_scope(layout: Optional[ir.Expr]) -> str:
    """The scope of a register buffer with this layout: the highest thread
    level it names, the top of its scope (which canonicalization keeps, so
    the written and the canonical literal agree)."""
    levels = [
        AXES[it.axis].levels[1]
        for it in _layout_iters(layout)
        if it.axis in AXES and AXES[it.axis].levels is not None
    ]
    return _BY_LEVEL[max(levels)] if levels else "thread"


def _layout_iters(layout: Optional[ir.Expr]):
    if isinstance(layout, ir.LayoutLit):
        return layout.shard + layout.replica + layout.offset
    return ()


"""The `dispatch` pass: every tile-primitive call (`copy`, `copy_async`,
`gemm`, `gemm_async`, `cast`, `fill`, with the scope prefix infer-scope gave
it) becomes the statements of the variant the registry selects for it.

The lowered statements are ordinary IR (element loads and stores,
`copy_vec`, intrinsic calls, `unroll` loops), so the result prints and
parses like any program.  Each variant sees the kernel's symbols and the
conditions the call runs under (a warp-collective instruction needs every
lane of the warp).  Errors are located at the call, and so are the nodes a
variant builds, so that a later complaint about them (from the emitter, say)
points at the primitive that produced them.
"""
from __future__ import annotations

from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.builtins import tile_primitive
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.symbols import Analyses, KernelSymbols
from tilec.compiler.targets import Target
from tilec.passes.dispatch import DispatchContext, NameGen, TileOp, select
from tilec.passes.dispatch.build import located, sharing_built


class Dispatch(Pass):
    name = "dispatch"
    requires = frozenset({"scoped", "smem-planned", "tma-planned"})
    provides = frozenset({"dispatched"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return dispatch_module(module, ctx.target, ctx.analyses)


def dispatch_module(module: ir.Module, target: Target, analyses: Optional[Analyses] = None) -> ir.Module:
    """Every kernel of `module` lowered.  What lowerings build at a call's
    span is shared between the calls of a kernel, and forgotten after it
    (`build.sharing_built`)."""
    kernels = []
    for k in module.kernels:
        syms = (analyses or Analyses()).of(k, module, target)  # the compile's, kept by plan-tma
        lowering = _Kernel(target, syms, NameGen(syms.names_in_use(module)))  # (no walk of the kernel)
        with sharing_built():
            kernels.append(attrs.evolve(k, body=lowering.block(k.body, ())))
    return attrs.evolve(module, kernels=tuple(kernels))


class _Kernel:
    def __init__(self, target: Target, syms: KernelSymbols, names: NameGen):
        self.target = target
        self.syms = syms
        self.names = names

    def block(self, stmts, guards: tuple) -> tuple:
        out = []
        for s in stmts:
            out.extend(self.stmt(s, guards))
        return tuple(out)

    def body(self, stmts, guards: tuple, keep_empty: bool = False) -> tuple:
        """A lowered block; one that lowered to nothing becomes `pass` so the
        IR still prints and parses."""
        block = self.block(stmts, guards)
        if not block and stmts and not keep_empty:
            return (ir.Pass(span=stmts[0].span),)
        return block

    def stmt(self, s: ir.Stmt, guards: tuple) -> list:
        """`s` lowered: a statement holding no tile-primitive call is kept
        as it is (most of a kernel's blocks hold none)."""
        if isinstance(s, ir.ExprStmt) and isinstance(s.expr, ir.Call) and tile_primitive(s.expr.func):
            return self.lower(s.expr, guards)
        if isinstance(s, ir.If):
            negated = ir.Unary("not", s.cond, span=s.cond.span)
            then = self.body(s.then, guards + (s.cond,))
            orelse = self.body(s.orelse, guards + (negated,), keep_empty=True)
            return [visit.keep(s, then=then, orelse=orelse)]
        if isinstance(s, ir.While):
            body = self.body(s.body, guards + (s.cond,))
            return [visit.keep(s, body=body)]
        if isinstance(s, ir.For):
            # a thread-dependent trip count leaves threads out of the body too
            trips = ir.Binary("<", s.start, s.stop, span=s.span)
            body = self.body(s.body, guards + (trips,))
            return [visit.keep(s, body=body)]
        return [s]

    def lower(self, call: ir.Call, guards: tuple) -> list:
        op = TileOp.from_call(call)
        ctx = DispatchContext(self.target, self.syms, self.names, guards)
        try:
            selection = select(op, ctx)
        except TilecError as err:
            raise err.with_span(op.span)
        return [located(s, op.span) for s in selection.stmts]

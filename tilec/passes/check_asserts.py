"""The `check-asserts` pass: `assert_const(cond, "message")` statements.

A kernel is usually written for a family of sizes (`-D M=8192`), and some
members are not supported: a tile that does not divide the problem, a row
stride TMA cannot describe.  Such a kernel states its limits as

    assert_const(N % 8 == 0, "N must be a multiple of 8 (16-byte rows for TMA)")

and a size outside them is a compile-time error at that line instead of a
wrong result at run time.  The condition must fold to a constant once consts
and metas are substituted; the statement then disappears.  The pass runs
right after expand-inline (an assertion inside an `if` whose condition is a
constant counts only on the branch taken), so every later pass sees the
sizes it accepted; the verifier runs the same check before any lowering.
"""
from __future__ import annotations

from tilec.compiler import ir, visit
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.fold import fold_expr

NAME = "assert_const"
SIGNATURE = Signature.parse("cond: expr, message: str")


class CheckAsserts(Pass):
    name = "check-asserts"
    requires = frozenset({"expanded"})
    provides = frozenset({"asserts-checked"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return check_asserts(module)


def check_asserts(module: ir.Module) -> ir.Module:
    """`module` without its assert_const statements; a located error for the
    first one whose condition is False or not a compile-time bool."""
    kernels = tuple(visit.evolve(k, body=_block(k.body)) for k in module.kernels)
    return visit.evolve(module, kernels=kernels)


def _block(stmts) -> tuple:
    """The statements without their assertions (each checked); a statement
    with no assertion inside is kept as it is, not rebuilt."""
    out = []
    for s in stmts:
        cls = type(s)
        if cls is ir.ExprStmt and type(s.expr) is ir.Call and s.expr.func == NAME:
            _check(s.expr)
            continue
        fields = visit.block_fields(cls)
        if not fields:  # (most statements: no block inside)
            out.append(s)
            continue
        if cls is ir.If:
            cond = fold_expr(s.cond)
            if isinstance(cond, ir.Bool):  # fold-constants keeps only the branch taken
                fields = ("then",) if cond.value else ("orelse",)
        out.append(visit.map_blocks(s, _block, fields))
    return tuple(out)


def _check(call: ir.Call) -> None:
    bound = SIGNATURE.bind(NAME, call.args, call.kwargs, call.span)
    message = SIGNATURE.literals(NAME, bound, call.span)["message"]
    cond = fold_expr(bound["cond"])
    if not isinstance(cond, ir.Bool):
        raise TilecError(f"{NAME}: the condition must be a compile-time bool (consts and literals only)",
                         cond.span or call.span)
    if not cond.value:
        raise TilecError(f"assertion failed: {message}", call.span)

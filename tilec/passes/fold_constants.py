"""The `fold-constants` pass: every constant expression of the module
folded, constant `if`s resolved, layout constructors made literals
(`tilec.compiler.fold` says what folding means), and conditional kernel
parameters decided.

It runs once the module is expanded (consts, metas and inline helpers
substituted), so that the verifier and every later pass see extents,
offsets and layouts as literals.  The branches expand-inline decided and
left as written (not expanded) are dropped first, never folded.

A parameter written `bias: f16[N] if HAS_BIAS` is present when its
condition folds to True (it becomes an ordinary parameter) and absent when
it folds to False: it is dropped, so kernel.json, the PTX entry and the
launch see only the present ones.  Its name may still appear where a
condition folded away removes it (`if HAS_BIAS: ...`); any use left once
constant `if`s are resolved is an error at the use.
"""
from __future__ import annotations

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.fold import fold, prune
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.printer import print_expr


class FoldConstants(Pass):
    name = "fold-constants"
    requires = frozenset({"expanded"})
    provides = frozenset({"folded"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        # the names the module mentions, when a kernel has a parameter that may be absent
        mentioned = set() if any(p.cond is not None for k in module.kernels for p in k.params) else None
        module = fold(prune(module), mentioned)  # first the branches expand-inline left unexpanded, never folded
        return attrs.evolve(module, kernels=tuple(_decide_params(k, mentioned) for k in module.kernels))


def _decide_params(kernel: ir.Kernel, mentioned: set) -> ir.Kernel:
    """`kernel` with its conditional parameters present or gone.
    `mentioned` holds every name the module mentions (when a kernel has a
    conditional parameter): the kernel is searched for a use of an absent
    parameter only when one is there."""
    if all(p.cond is None for p in kernel.params):
        return kernel
    params, absent = [], {}
    for p in kernel.params:
        if p.cond is None:
            params.append(p)
        elif isinstance(p.cond, ir.Bool):
            if p.cond.value:
                params.append(attrs.evolve(p, cond=None))
            else:
                absent[p.name] = p
        else:
            raise TilecError(_not_constant(p), p.cond.span or p.span)
    kernel = attrs.evolve(kernel, params=tuple(params))
    for p in params:  # `n: i32 if X, n: u32 if not X`: one name, one present declaration
        absent.pop(p.name, None)
    if mentioned.isdisjoint(absent):
        return kernel
    for node in visit.find_all(kernel, ir.NAMES):
        if node.id in absent:
            p = absent[node.id]
            where = f" (at {p.cond.span})" if p.cond.span else ""
            raise TilecError(
                f"parameter '{p.name}' is absent: its condition{where} is False; use it only where "
                "that condition holds (under an 'if' on it)",
                node.span,
            )
    return kernel


def _not_constant(p: ir.Param) -> str:
    names = sorted({n.id for n in visit.find_all(p.cond, ir.NAMES)})
    if names:
        return (
            f"the condition of parameter '{p.name}' must be known at compile time: "
            f"{', '.join(repr(n) for n in names)} {'is' if len(names) == 1 else 'are'} not a const"
        )
    return (
        f"the condition of parameter '{p.name}' must fold to True or False, "
        f"got {print_expr(p.cond)}"
    )

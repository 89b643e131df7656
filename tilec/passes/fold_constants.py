"""The `fold-constants` pass: every constant expression of the module
folded, constant `if`s resolved, layout constructors made literals
(`tilec.compiler.fold` says what folding means).

It runs once the module is expanded (consts, metas and inline helpers
substituted), so that the verifier and every later pass see extents,
offsets and layouts as literals.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.fold import fold
from tilec.compiler.passmanager import Pass, PassContext


class FoldConstants(Pass):
    name = "fold-constants"
    requires = frozenset({"expanded"})
    provides = frozenset({"folded"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return fold(module)

"""The `parse` pass: source text to IR, and the compilation target.

The target is resolved here because the file may name it: `--target` wins,
then the module's `target` line, then sm_90a."""
from __future__ import annotations

from tilec.compiler import ir, targets
from tilec.compiler.passmanager import Pass, PassContext
from tilec.grammar.parser import parse


class Parse(Pass):
    name = "parse"
    provides = frozenset({"parsed"})

    def apply(self, module, ctx: PassContext) -> ir.Module:
        module = parse(ctx.source, ctx.filename)
        if ctx.target is None:
            ctx.target = targets.target(module.target or targets.DEFAULT_TARGET, module.span)
        return module

"""The default pipeline and `compile_source`, the one entry point the driver,
the tests and the runtime use to compile.

The passes are listed in the order they were designed to run; the pass
manager re-derives that order from their requires/provides, so this list is
a registry, not a schedule.
"""
from __future__ import annotations

from typing import Optional, Union

from tilec.compiler.passmanager import Options, PassContext, PassManager, gc_paused

# Loading the compiler (every pass, from here) creates some hundred thousand
# objects and no garbage: the collector is paused meanwhile (`gc_paused`).
# The driver has it off for its whole run; this is for a program that
# imports tilec, and the tests.
with gc_paused():
    from tilec.compiler import records
    from tilec.compiler import ir, targets
    from tilec.compiler.verifier import verify
    from tilec.grammar.parser import check_printable
    from tilec.passes.check_asserts import CheckAsserts
    from tilec.passes.check_protocol import CheckProtocol
    from tilec.passes.canonicalize_layouts import CanonicalizeLayouts
    from tilec.passes.dispatch.lower_calls import Dispatch
    from tilec.passes.emit_ptx import EmitPTX
    from tilec.passes.expand_inline import ExpandInline
    from tilec.passes.fold_constants import FoldConstants
    from tilec.passes.infer_scope import InferScope
    from tilec.passes.lower_scheduler import LowerScheduler
    from tilec.passes.parse import Parse
    from tilec.passes.plan_smem import PlanSmem
    from tilec.passes.plan_tma import PlanTma
    from tilec.passes.unroll import Unroll


def default_passes() -> list:
    return [
        Parse(),
        ExpandInline(),
        CheckAsserts(),
        LowerScheduler(),
        FoldConstants(),
        CanonicalizeLayouts(),
        CheckProtocol(),
        InferScope(),
        PlanSmem(),
        PlanTma(),
        Dispatch(),
        Unroll(),
        EmitPTX(),
    ]


def pass_manager() -> PassManager:
    """The default pipeline.  The verifier reads the module as it will be
    compiled (expanded, asserts checked, schedulers lowered, folded), so it
    runs after `fold-constants`, before any lowering, and with
    `Options.verify_each` after every later pass.  Its product is the PTX."""
    return PassManager(
        default_passes(),
        verify=lambda module, ctx: (verify(module, ctx.target, ctx.analyses), check_printable(module)),
        verify_after=("fold-constants",),
        verify_requires=("expanded", "asserts-checked", "scheduler-lowered", "folded"),
        products=("ptx",),
    )


@records.frozen
class CompileResult:
    module: ir.Module  # the IR after the last pass run
    ptx: Optional[str]  # None when the pipeline stopped before emit-ptx
    meta: Optional[dict]  # the kernel.json contents, likewise
    timings: dict  # pass name -> wall seconds


def compile_source(
    text: str,
    filename: str = "<string>",
    target: Union[str, targets.Target, None] = None,
    defines: Optional[dict] = None,
    options: Optional[Options] = None,
) -> CompileResult:
    """Compile .tile source.  The target is `target` when given, else the
    file's `target` line, else sm_90a.  `defines` overrides consts like `-D`
    (values are ints, floats, or their text)."""
    if isinstance(target, str):
        target = targets.target(target)
    ctx = PassContext(
        target=target,
        filename=filename,
        source=text,
        defines=dict(defines or {}),
        options=options or Options(),
    )
    # The passes run with the cyclic garbage collector paused (`gc_paused`):
    # a compile allocates IR nodes by the hundred thousand and leaves no
    # reference cycle (tests/test_compile_speed.py), so reference counting
    # frees all of it but the result.  The result is made before the
    # collector is back: made after, it was the first allocation with the
    # collector on, which ran a collection over the whole compile, still
    # alive, with nothing to free (~1.5 ms a v7 compile).
    with gc_paused():
        module = pass_manager().run(None, ctx)
        return CompileResult(module, ctx.artifacts.get("ptx"), ctx.artifacts.get("meta"), dict(ctx.timings))

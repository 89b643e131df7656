"""reduce -> in-thread folding ("fold"): every piece of each result element
is in the registers of one thread (no thread iterator along the reduced
dims), so each thread folds its own registers and nothing moves between
threads.  See tilec/passes/dispatch/reduce/stages.py."""
from __future__ import annotations

from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.reduce.stages import lower as lower_reduction
from tilec.passes.dispatch.reduce.stages import plan, registers, stages


def _in_thread(op, ctx):
    lanes, warps = stages(op, ctx)
    if lanes or warps:
        return False, "the rows of the source are spread over threads"
    return True


@register(
    "reduce",
    families=FAMILIES,
    name="fold",
    priority=30,
    when=[predicate("registers", registers), predicate("in_thread", _in_thread)],
)
def lower(op, ctx):
    return lower_reduction(plan(op, ctx), ctx)

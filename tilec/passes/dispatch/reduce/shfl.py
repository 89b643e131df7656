"""reduce -> folding, then a shfl.sync.bfly butterfly ("shfl"): the pieces of
each result element are in the registers of lanes of one warp (the reduced
dims' thread iterators are all on laneid: a quad of a wgmma accumulator
row, a warp holding a whole row).  Each lane folds its registers, then one
butterfly round per lane bit leaves the result in every lane of the group.
See tilec/passes/dispatch/reduce/stages.py."""
from __future__ import annotations

from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.reduce.stages import lanes_run_together, lower as lower_reduction
from tilec.passes.dispatch.reduce.stages import plan, registers, within_warp


@register(
    "reduce",
    families=FAMILIES,
    name="shfl",
    priority=20,
    when=[
        predicate("registers", registers),
        predicate("within_warp", within_warp),
        predicate("lanes_run_together", lanes_run_together),
    ],
)
def lower(op, ctx):
    return lower_reduction(plan(op, ctx), ctx)

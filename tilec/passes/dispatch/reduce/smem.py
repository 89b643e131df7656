"""reduce -> folding, a lane butterfly, then shared memory across warps
("smem"): the pieces of each result element are in several warps.  Each
warp's partial goes to the `scratch=` shared buffer, the CTA synchronises,
and every thread folds the partials of its rows.  See
tilec/passes/dispatch/reduce/stages.py."""
from __future__ import annotations

from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.reduce.stages import lanes_run_together, lower as lower_reduction
from tilec.passes.dispatch.reduce.stages import plan, registers, scratch_fits, whole_cta


@register(
    "reduce",
    families=FAMILIES,
    name="smem",
    priority=10,
    when=[
        predicate("registers", registers),
        predicate("whole_cta", whole_cta),
        predicate("lanes_run_together", lanes_run_together),
        predicate("scratch", scratch_fits),
    ],
)
def lower(op, ctx):
    return lower_reduction(plan(op, ctx), ctx)

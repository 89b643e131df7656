"""reduce -> folding, then one redux.sync per row ("redux"): integer sums,
minima and maxima whose rows are in lanes of one warp.

redux.sync (sm_80) combines a 32-bit integer over the lanes its mask names
in one instruction, where the butterfly (`shfl`) spends a shuffle and an
operation per lane bit.  The lanes that share a row differ exactly in the
reduced dims' lane bits R (read from the layout, as for the butterfly), so
each group names its own lanes: the pattern of lanes whose bits lie in R,
shifted to the group's first lane (lane & ~R); with R = all five bits that
is the full warp.  f32 is the butterfly's (PTX's f32 redux is min/max on
sm_100a only).  See tilec/passes/dispatch/reduce/stages.py.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.threads import Threads
from tilec.passes.dispatch.reduce.stages import lanes_run_together, lower as lower_reduction
from tilec.passes.dispatch.reduce.stages import plan, registers, stages, within_warp

_OPS = {"sum": "add", "min": "min", "max": "max"}


def _integers(op, ctx):
    r = plan(op, ctx)
    if r.dtype not in ("i32", "u32"):
        return False, f"redux.sync combines i32 and u32 values; this reduction computes in {r.dtype}"
    return True


def _across_lanes(op, ctx):
    lanes, _ = stages(op, ctx)
    if not lanes:
        return False, "no row is spread over lanes"
    return True


def _lane_groups(r, temps, ctx):
    bits = 0
    for m in r.lanes:
        bits |= m
    pattern = sum(1 << lane for lane in range(32) if lane & ~bits == 0)
    if pattern == 0xFFFFFFFF:
        mask = ir.Int(pattern)
    else:
        lane = Threads(ctx.symbols).require(Threads(ctx.symbols).axis("laneid"), "the lane")
        mask = ir.Binary("<<", ir.Int(pattern), ir.Binary("&", lane, ir.Int(31 & ~bits)))
    kwargs = (ir.Keyword("op", ir.Str(_OPS[r.op])), ir.Keyword("mask", mask))
    return [ir.Assign((t,), ir.Call("ptx.redux.sync", (t,), kwargs)) for t in temps]


@register(
    "reduce",
    families=FAMILIES,
    name="redux",
    priority=25,
    when=[
        predicate("registers", registers),
        predicate("integers", _integers),
        predicate("across_lanes", _across_lanes),
        predicate("within_warp", within_warp),
        predicate("lanes_run_together", lanes_run_together),
    ],
)
def lower(op, ctx):
    return lower_reduction(plan(op, ctx), ctx, lanes=_lane_groups)

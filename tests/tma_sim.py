"""A brute-force model of TMA copies, for checking plans element by element.

`simulate` plays the hardware: for each issue and each box position it
computes the global byte the descriptor reads and the shared byte the box
lands on (dense, row-major with dim 0 fastest, then the mode's XOR on the
byte address).  Like the hardware, it bounds each descriptor coordinate by
its own dim, not the element's place in the tensor: a position with any
coordinate outside [0, dim) is clipped (a load fills its shared bytes with
the OOB value, a store skips it), whatever global byte the strides would
give.  `intended` reads the same copy off the two layouts: the region's
elements inside the tensor are moved, those past its edge are clipped.  A
plan is right when the two agree, which at a ragged edge (a region that
runs past the tensor) says that every in-range element is transferred and
nothing out of range is read or written."""
from __future__ import annotations

import itertools

from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import apply, row_major
from tilec.compiler.tma_planner import Affine

MODES = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def hw_swizzle(addr: int, mode: int) -> int:
    """The hardware swizzle: bits 4.. of the byte address XOR bits 7.."""
    if not mode:
        return addr
    return addr ^ (((addr >> 7) & ((1 << mode) - 1)) << 4)


def simulate(plan, elem: int, env=None) -> tuple[dict, set]:
    """({global byte: shared byte} for every `elem`-byte element the plan
    moves, {shared bytes of the clipped positions}); fails on an element
    moved twice or a shared byte landed on twice."""
    env = env or {}
    pe = DTYPES[plan.dtype].bytes
    strides = (pe,) + tuple(plan.strides)
    mode = MODES[plan.swizzle]
    moved, clipped, landed = {}, set(), set()
    for issue in plan.issues:
        coords = [c.evaluate(env) for c in issue.coords]
        base = issue.smem_offset.evaluate(env) * elem
        assert base % 128 == 0, f"shared offset {base} is not 128-byte aligned"
        positions = itertools.product(*(range(b) for b in reversed(plan.box)))
        for pos, p in enumerate(positions):
            at = [c + q for c, q in zip(coords, reversed(p))]
            inside = all(0 <= x < d for x, d in zip(at, plan.dims))
            g = sum(x * s for x, s in zip(at, strides))
            for sub in range(0, pe, elem):
                s = hw_swizzle(base + pos * pe + sub, mode)
                assert s not in landed, f"shared byte {s} is written twice"
                landed.add(s)
                if not inside:
                    clipped.add(s)
                    continue
                assert g + sub not in moved, f"global byte {g + sub} is moved twice"
                moved[g + sub] = s
    return moved, clipped


def intended(glayout, gshape, slayout, sshape, g_region, s_region, elem: int, env=None) -> tuple[dict, set]:
    """({global byte: shared byte} of the region's elements inside the
    tensor, {shared bytes of those past its edge}) of the copy the layouts
    describe."""
    env = env or {}
    glayout = glayout or row_major(gshape)
    slayout = slayout or row_major(sshape)
    gstart = [Affine.of(s).evaluate(env) for s, _ in g_region]
    sstart = [Affine.of(s).evaluate(env) for s, _ in s_region]
    gcopied = [d for d, (_, n) in enumerate(g_region) if n > 1]
    scopied = [d for d, (_, n) in enumerate(s_region) if n > 1]
    shape = [g_region[d][1] for d in gcopied]
    moved, clipped = {}, set()
    for x in itertools.product(*(range(n) for n in shape)):
        gc, sc = list(gstart), list(sstart)
        for k, v in enumerate(x):
            gc[gcopied[k]] += v
            sc[scopied[k]] += v
        s = apply(slayout, tuple(sc), sshape)["m"] * elem
        if all(0 <= c < n for c, n in zip(gc, gshape)):
            moved[apply(glayout, tuple(gc), gshape)["m"] * elem] = s
        else:
            clipped.add(s)
    return moved, clipped

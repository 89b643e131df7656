"""A brute-force model of TMA copies, for checking plans element by element.

`simulate` plays the hardware: for each issue and each box position it
computes the global byte the descriptor reads and the shared byte the box
lands on (dense, row-major with dim 0 fastest, then the mode's XOR on the
byte address).  `intended` reads the same copy off the two layouts.  A plan
is right when the two maps are equal."""
from __future__ import annotations

import itertools

from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import apply, row_major
from tilec.compiler.tma_plan import Affine

MODES = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def hw_swizzle(addr: int, mode: int) -> int:
    """The hardware swizzle: bits 4.. of the byte address XOR bits 7.."""
    if not mode:
        return addr
    return addr ^ (((addr >> 7) & ((1 << mode) - 1)) << 4)


def simulate(plan, elem: int, env=None) -> dict:
    """{global byte: shared byte} for every `elem`-byte element the plan moves;
    fails on an out-of-bounds coordinate or an element moved twice."""
    env = env or {}
    pe = DTYPES[plan.dtype].bytes
    strides = (pe,) + tuple(plan.strides)
    mode = MODES[plan.swizzle]
    moved = {}
    for issue in plan.issues:
        coords = [c.evaluate(env) for c in issue.coords]
        base = issue.smem_offset.evaluate(env) * elem
        assert base % 128 == 0, f"shared offset {base} is not 128-byte aligned"
        for c, b, d in zip(coords, plan.box, plan.dims):
            assert 0 <= c and c + b <= d, f"coordinates {coords} leave dims {plan.dims} with box {plan.box}"
        positions = itertools.product(*(range(b) for b in reversed(plan.box)))
        for pos, p in enumerate(positions):
            g = sum((c + q) * s for c, q, s in zip(coords, reversed(p), strides))
            for sub in range(0, pe, elem):
                assert g + sub not in moved, f"global byte {g + sub} is moved twice"
                moved[g + sub] = hw_swizzle(base + pos * pe + sub, mode)
    return moved


def intended(glayout, gshape, slayout, sshape, g_region, s_region, elem: int, env=None) -> dict:
    """{global byte: shared byte} of the copy the layouts describe."""
    env = env or {}
    glayout = glayout or row_major(gshape)
    slayout = slayout or row_major(sshape)
    gstart = [Affine.of(s).evaluate(env) for s, _ in g_region]
    sstart = [Affine.of(s).evaluate(env) for s, _ in s_region]
    gcopied = [d for d, (_, n) in enumerate(g_region) if n > 1]
    scopied = [d for d, (_, n) in enumerate(s_region) if n > 1]
    shape = [g_region[d][1] for d in gcopied]
    out = {}
    for x in itertools.product(*(range(n) for n in shape)):
        gc, sc = list(gstart), list(sstart)
        for k, v in enumerate(x):
            gc[gcopied[k]] += v
            sc[scopied[k]] += v
        out[apply(glayout, tuple(gc), gshape)["m"] * elem] = apply(slayout, tuple(sc), sshape)["m"] * elem
    return out

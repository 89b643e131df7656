"""Timing of the layout operations passes call most: canonicalize, group and
slice on 6-iterator layouts.  Dispatch tries several variants per tile
primitive and each try regroups and slices its operands, so these must stay
cheap (target: under 50 us each).  A benchmark, not a test: it prints a table.

    python3 bench/layout.py        (tilec installed; else PYTHONPATH=. from the repo root)
"""
from __future__ import annotations

import timeit

from tilec.compiler.layout import canonicalize, make
from tilec.compiler.layout_shape import group, slice_region
from tilec.compiler.swizzle import Swizzle

TARGET_US = 50.0

CASES = {
    # A_FRAG tiled over a warpgroup's four warps and two k-steps
    "fragment x warps": (
        make((4, 2, 8, 2, 4, 2), ((1, "wid_in_wg"), 2, (4, "laneid"), 4, (1, "laneid"), 1)),
        (64, 16),
        [(16, 16), (0, 8)],
    ),
    # a 3-stage 128B-swizzled f16 ring of (128, 64) tiles, written unfused
    "swizzled smem ring": (
        make((3, 16, 8, 1, 8, 8), (8192, 512, 64, 512, 8, 1), swizzle=Swizzle(3, 3, 3)),
        (3, 128, 64),
        [(1, 1), (64, 64), (0, 64)],
    ),
    # tensor memory with the warpx4 router and a column offset
    "tmem + router": (
        make((2, 16, 4, 8, 2, 2), ((16, "TLane"), (1, "TLane"), (64, "TCol"), (8, "TCol"), (2, "TCol"), (1, "TCol")),
             replica=[(4, 32, "TLane")], offset={"TCol": 128}),
        (32, 128),
        [(0, 32), (64, 64)],
    ),
}


def _us(fn, number=2000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def main() -> None:
    print(f"{'layout':<20} {'canonicalize':>13} {'group':>9} {'slice':>9}   (us; target < {TARGET_US:.0f})")
    worst = 0.0
    for name, (layout, shape, region) in CASES.items():
        times = (
            _us(lambda layout=layout: canonicalize(layout)),
            _us(lambda layout=layout, shape=shape: group(layout, shape)),
            _us(lambda layout=layout, shape=shape, region=region: slice_region(layout, shape, region)),
        )
        worst = max(worst, *times)
        print(f"{name:<20} {times[0]:>13.1f} {times[1]:>9.1f} {times[2]:>9.1f}")
    print(f"slowest: {worst:.1f} us ({'within' if worst < TARGET_US else 'OVER'} target)")


if __name__ == "__main__":
    main()

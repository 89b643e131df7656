"""persistent_scheduler_2d and its lowering to scalars (lower-scheduler):
the tiles each CTA visits, simulated from the emitted PTX, against the
L2-grouped order written out by hand; and the mistakes it reports."""
import re

import numpy as np
import pytest

from ptx_sim import Kernel
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.runtime.assemble import assemble

# Each CTA records, in order, the (m, n) of every tile the scheduler gives it.
WALK = """
target sm_90a
const NM = 5
const NN = 3
const G = 2
const P = 4
const MAX_TILES = (NM * NN + P - 1) // P

kernel walk(T: i32[P, MAX_TILES, 2]):
    bx = cta_id([P])
    thread_id([1])
    ts = persistent_scheduler_2d(num_m_tiles=NM, num_n_tiles=NN, l2_group_size=G, num_clusters=P)
    ts.init(bx)
    i: i32 = 0
    while ts.valid():
        T[bx, i, 0] = ts.m_idx
        T[bx, i, 1] = ts.n_idx
        i += 1
        ts.next_tile()
"""

# 5 x 3 tiles in groups of 2 M-tiles (the last group has one), M fastest in a group:
ORDER_5x3_G2 = [
    (0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2),
    (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2),
    (4, 0), (4, 1), (4, 2),
]


def walk(**defines):
    r = compile_source(WALK, "walk.tile", defines=defines)
    assemble(r.ptx, "sm_90a")
    entry = r.meta["kernels"][0]
    p, max_tiles = entry["grid"][0], -(-defines.get("NM", 5) * defines.get("NN", 3) // entry["grid"][0])
    T = np.full((p, max_tiles, 2), -1, np.int32)
    Kernel(r.ptx, "walk").run({"T": T}, grid=entry["grid"])
    return [[tuple(int(v) for v in t) for t in cta if t[0] >= 0] for cta in T]


def test_grouped_order_from_the_emitted_code():
    visits = walk()
    assert visits == [ORDER_5x3_G2[c::4] for c in range(4)]


@pytest.mark.parametrize("nm, nn, g, p", [(8, 8, 8, 7), (10, 3, 4, 3), (3, 5, 8, 16), (1, 1, 1, 1)])
def test_every_tile_once(nm, nn, g, p):
    visits = walk(NM=nm, NN=nn, G=g, P=p)
    tiles = [t for cta in visits for t in cta]
    assert sorted(tiles) == [(m, n) for m in range(nm) for n in range(nn)]
    # linear tile t is CTA t % p's (t // p)-th; within a group of g rows the M index runs fastest
    order = [visits[t % p][t // p] for t in range(nm * nn)]
    assert order[: min(g, nm)] == [(m, 0) for m in range(min(g, nm))]


def test_lowered_to_scalars():
    module = compile_source(WALK, "walk.tile", options=Options(stop_after="lower-scheduler")).module
    text = print_module(module)
    assert "persistent_scheduler_2d" not in text and "ts." not in text
    for line in ("ts_tile: i32 = 0", "ts_tile = bx", "while ts_tile < 15:", "ts_tile += 4",
                 "T[bx, i, 0] = ts_m_idx", "T[bx, i, 1] = ts_n_idx"):
        assert line in text, line
    # 5 rows in groups of 2: the last group is shorter, so the group height is min(.., 2)
    assert "min(5 - ts_tile // 6 * 2, 2)" in text


@pytest.mark.parametrize("old, new, message", [
    ("l2_group_size=G", "l2_group_size=0", "'l2_group_size' must be at least 1, got 0"),
    ("num_m_tiles=NM", "num_m_tiles=bx", "'num_m_tiles' must be a compile-time int"),
    ("num_clusters=P)", "num_clusters=P, order=1)", "has no parameter 'order'"),
    ("ts.init(bx)", "ts.init(bx, 1)", r"ts.init\(\) takes the linear CTA"),
    ("ts.init(bx)", "ts.valid()", r"ts.valid\(\) is a value"),
    ("ts.init(bx)", "ts.reset()", "a tile scheduler has no method 'reset'"),
    ("= ts.m_idx", "= ts.k_idx", "a tile scheduler has no attribute 'k_idx'"),
    ("= ts.m_idx", "= ts", "tile scheduler 'ts' is used as a value"),
    ("i += 1", "i += ts.next_tile()", r"ts.next_tile\(\) is a statement"),
    ("ts.init(bx)", "ts.init(bx)\n    ts = persistent_scheduler_2d(num_m_tiles=1, num_n_tiles=1, num_clusters=1)",
     "scheduler 'ts' is declared twice"),
    ("ts.init(bx)", "ts.init(bx)\n    persistent_scheduler_2d(num_m_tiles=1, num_n_tiles=1, num_clusters=1)",
     r"persistent_scheduler_2d\(...\) must be assigned to a name"),
    # a bare call before a malformed declaration: the declaration is reported
    ("ts.init(bx)", "ts.init(bx)\n    persistent_scheduler_2d(num_m_tiles=1, num_n_tiles=1, num_clusters=1)"
     "\n    u, v = persistent_scheduler_2d(num_m_tiles=1, num_n_tiles=1, num_clusters=1)",
     "must be assigned to one plain name"),
])
def test_mistakes(old, new, message):
    assert old in WALK
    with pytest.raises(TilecError, match=message) as err:
        compile_source(WALK.replace(old, new, 1), "walk.tile", options=Options(stop_after="lower-scheduler"))
    assert err.value.span is not None


# The same walk with runtime tile counts: M and N are extents of the unused
# buffer S.  A buffer with runtime extents has fewer than 2**31 elements, so
# with M >= 1 assumed, N < 2**31 / 16 and G * max(N, 1) (the tiles per
# group) is provably an i32: a uniform divisor.
WALK_RUNTIME = """
target sm_90a
const G = 2
const P = 4

kernel walk(T: i32[P, R, 2], S: i32[M, N, 16]):
    assume(M >= 1)
    bx = cta_id([P])
    thread_id([1])
    ts = persistent_scheduler_2d(num_m_tiles=M, num_n_tiles=N, l2_group_size=G, num_clusters=P)
    ts.init(bx)
    i: i32 = 0
    while ts.valid():
        T[bx, i, 0] = ts.m_idx
        T[bx, i, 1] = ts.n_idx
        i += 1
        ts.next_tile()
"""


def walk_runtime(result, nm, nn, p):
    from tilec.runtime import dims as runtime_dims

    entry = result.meta["kernels"][0]
    r = -(-nm * nn // p)
    T = np.full((p, max(r, 1), 2), -1, np.int32)
    env = {"M": nm, "N": nn, "R": max(r, 1)}
    hidden = runtime_dims.device_values(entry["params"], env)
    S = np.zeros((nm, nn, 16), np.int32)
    Kernel(result.ptx, "walk").run({"T": T, "S": S, **env, **hidden}, grid=(p, 1, 1))
    return [[tuple(int(v) for v in t) for t in cta if t[0] >= 0] for cta in T]


@pytest.mark.parametrize("g", [2, 3])
def test_runtime_tile_counts_walk_as_the_constant_ones(g):
    """One compile per group size, every shape: the same tiles in the same
    order as a compile with those counts as constants; the decode divides
    with magic numbers (no div.s32 or rem.s32 by a register)."""
    result = compile_source(WALK_RUNTIME.replace("const G = 2", f"const G = {g}"), "walk.tile")
    assemble(result.ptx, "sm_90a")
    assert not re.search(r"(?:div|rem)\.s32 %r\d+, %r\d+, %r\d+;", result.ptx)
    assert [p["value"][0] for p in result.meta["kernels"][0]["params"] if p["kind"] == "device"] == [
        "magic_mul", "magic_shift", "magic_mul", "magic_shift",
    ]
    for nm, nn in ((5, 3), (1, 1), (2, 7), (4, 4), (7, 2), (3, 1), (9, 5)):
        assert walk_runtime(result, nm, nn, 4) == walk(NM=nm, NN=nn, G=g, P=4), (nm, nn)
    assert walk_runtime(result, 3, 0, 4) == [[]] * 4  # no N-tiles: no tile (the divisor is max(N, 1))


def test_runtime_counts_are_computed_once():
    module = compile_source(WALK_RUNTIME, "walk.tile", options=Options(stop_after="lower-scheduler")).module
    text = print_module(module)
    for line in ("ts_num_tiles = M * N", "ts_per_group = 2 * max(N, 1)", "ts_num_m_tiles = M",
                 "while ts_tile < ts_num_tiles:", "ts_group = ts_tile // (2 * max(N, 1))",
                 "ts_within = ts_tile - ts_group * ts_per_group",
                 "ts_n_idx = ts_within // 2 if ts_rows == 2 else ts_within // ((M - 1) % 2 + 1)"):
        assert line in text, line

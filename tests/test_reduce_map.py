"""reduce (variants fold, shfl, smem) and map (variant registers): the
layouts they accept, the IR they write, what the PTX computes in the
simulator (tests/ptx_sim.py, with shfl.sync modelled below), and the
failure tables of calls they refuse."""
import numpy as np
import pytest

from ptx_sim import YIELD, Kernel
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import Iter, TileLayout
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.layout_shape import reduce_dims
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.runtime.assemble import assemble

WGMMA_64x64 = TileLayout([Iter(4, 32, "tid_in_wg"), Iter(2, 2), Iter(8, 4, "tid_in_wg"), Iter(8, 4),
                          Iter(4, 1, "tid_in_wg"), Iter(2, 1)])


def build(text, target="sm_90a"):
    r = compile_source(text, "k.tile", target=target)
    assemble(r.ptx, target)
    return r


def dispatched(text, target="sm_90a"):
    return print_module(compile_source(text, "k.tile", target=target, options=Options(stop_after="dispatch")).module)


class Shuffles:
    """shfl.sync.bfly and redux.sync for the simulator: each lane deposits
    its operand and ends its turn; the last lane of the warp to arrive gives
    every lane the value of its partner (lane ^ mask), or the reduction over
    the lanes of its membermask."""

    def __init__(self):
        self.pending = {}

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        if op.startswith("redux.sync."):
            return self._redux(op, ops, regs, special)
        if not op.startswith("shfl.sync.bfly"):
            return False
        dst, src, mask = ops[0], ops[1], int(ops[2], 0)
        value = regs[src] if src.startswith("%") else int(src, 0)
        warp = special["%tid.x"] // 32
        group = self.pending.setdefault(warp, {})
        assert special["%laneid"] not in group, "a lane reached two shuffles before its warp finished the first"
        group[special["%laneid"]] = (regs, dst, value, mask)
        if len(group) == 32:
            for lane, (r, d, _, m) in group.items():
                assert m == mask, "the lanes of a warp disagree on the shuffle mask"
                r[d] = group[lane ^ m][2]
            del self.pending[warp]
        return YIELD


    def _redux(self, op, ops, regs, special):
        kind, typ = op.split(".")[2], op.split(".")[3]
        dst, src, mask = ops
        value = regs[src]
        members = int(mask, 0) if not mask.startswith("%") else regs[mask]
        warp = ("redux", special["%tid.x"] // 32)
        group = self.pending.setdefault(warp, {})
        group[special["%laneid"]] = (regs, dst, value, members & 0xFFFFFFFF)
        if len(group) == 32:
            for lane, (r, d, _, m) in group.items():
                assert m >> lane & 1, "a lane outside its own membermask"
                values = [group[k][2] for k in range(32) if m >> k & 1]
                assert all(group[k][3] == m for k in range(32) if m >> k & 1), "members disagree on the mask"
                signed = [v - (1 << 32) if typ == "s32" and v >> 31 else v for v in (x & 0xFFFFFFFF for x in values)]
                out = {"add": sum, "min": min, "max": max}[kind](signed)
                r[d] = out & 0xFFFFFFFF
            del self.pending[warp]
        return YIELD


def simulate(r, args):
    entry = r.meta["kernels"][0]
    model = Shuffles()
    Kernel(r.ptx, entry["name"], extension=model).run(args, grid=entry["grid"], dynamic_smem=entry["dynamic_smem"])
    assert not model.pending, "a shuffle some lanes never reached"


# --------------------------------------------------------------------------
# reduce_layout
# --------------------------------------------------------------------------


def test_reduce_layout_of_a_wgmma_accumulator_keeps_two_rows_per_thread_replicated_over_the_quad():
    rows = reduce_dims(WGMMA_64x64, (64, 64), (1,))
    assert str(rows) == "S[(4, 2, 8) : (32@tid_in_wg, 1, 4@tid_in_wg)] + R[4 : 1@tid_in_wg]"
    cols = reduce_dims(WGMMA_64x64, (64, 64), (0,))
    assert str(cols) == "S[(8, 4, 2) : (2, 1@tid_in_wg, 1)] + R[(4, 8) : (32@tid_in_wg, 4@tid_in_wg)]"


def test_reduce_layout_refuses_bad_axes_and_swizzles():
    with pytest.raises(LayoutError, match="distinct dims"):
        reduce_dims(WGMMA_64x64, (64, 64), (2,))
    with pytest.raises(LayoutError, match="no swizzle"):
        reduce_dims(TileLayout([Iter(8, 64), Iter(64, 1)], swizzle=__import__(
            "tilec.compiler.swizzle", fromlist=["Swizzle"]).Swizzle(3, 3, 3)), (8, 64), (1,))


# --------------------------------------------------------------------------
# fold: rows in one thread
# --------------------------------------------------------------------------

FOLD = """
const L = S[(4, 8) : (8, 1)]
kernel k(A: f32[4, 8], W: f32[8], B: f16[4, 8], M: f32[4]):
    cta_id([1])
    tid = thread_id([1])
    x = alloc_local((4, 8), f32, layout=L)
    y = alloc_local((4, 8), f16, layout=L)
    m = alloc_local((4, 1), f32, layout=reduce_layout(L, (4, 8), (1,)))
    copy(x, A)
    reduce(m, x, op="{op}", axes=(1,))
    map(y, (x - m) * W)
    for i in unroll(4):
        M[i] = m[i, 0]
    copy(B, y)
"""


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_fold_reduces_each_threads_rows_and_map_broadcasts_rows_and_columns(op):
    text = FOLD.replace("{op}", op)
    assert "reduce" not in dispatched(text).split("copy_vec")[-1]
    r = build(text)
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    b, m = np.full((4, 8), np.nan, np.float16), np.full(4, np.nan, np.float32)
    simulate(r, {"A": a, "W": w, "B": b, "M": m})
    want = {"sum": a.sum(1), "max": a.max(1), "min": a.min(1)}[op]
    np.testing.assert_allclose(m, want, rtol=1e-6)
    np.testing.assert_allclose(b, ((a - want[:, None]) * w).astype(np.float16), rtol=1e-3, atol=1e-3)


# --------------------------------------------------------------------------
# smem: rows across warps
# --------------------------------------------------------------------------

ACROSS_WARPS = """
const L = S[(32, 2, 3) : (1@laneid, 1@wid_in_wg, 1)]
kernel k(A: f32[32, 6], B: f32[32, 2]):
    cta_id([1])
    lane = lane_id([32])
    w = warp_id([2])
    x = alloc_local((32, 6), f32, layout=L)
    m = alloc_local((32, 1), f32, layout=reduce_layout(L, (32, 6), (1,)))
    scratch = alloc_shared((64,), f32)
    copy(x, A)
    fill(m, 1.0)
    reduce(m, x, op="max", axes=(1,), scratch=scratch, accum=True)
    B[lane, w] = m[0, 0]
"""


def test_smem_combines_the_partials_of_warps_and_every_warp_gets_the_row():
    after = dispatched(ACROSS_WARPS)
    assert after.count("cuda.cta_sync()") == 2 and "scratch[lane * 2 + w % 2] = part" in after
    r = build(ACROSS_WARPS)
    a = np.random.default_rng(3).standard_normal((32, 6)).astype(np.float32)
    b = np.full((32, 2), np.nan, np.float32)
    simulate(r, {"A": a, "B": b})
    want = np.maximum(a.max(1), 1.0)
    np.testing.assert_array_equal(b, np.stack([want, want], 1))


def test_rows_across_warps_without_scratch_is_a_table_of_every_variant():
    text = ACROSS_WARPS.replace(", scratch=scratch", "")
    with pytest.raises(TilecError) as err:
        build(text)
    msg = str(err.value)
    assert "no variant of 'reduce' accepts this call" in msg
    assert "fold" in msg and "rejected by in_thread" in msg
    assert "shfl" in msg and "rejected by within_warp: the rows of the source are spread over several warps" in msg
    assert "smem" in msg and "rejected by scratch" in msg and "64 elements" in msg


def test_reduce_under_a_condition_of_some_threads_cannot_synchronise_the_cta():
    text = ACROSS_WARPS.replace("    reduce(", "    if lane < 16:\n        reduce(")
    with pytest.raises(TilecError, match="rejected by whole_cta: the call synchronises the CTA but runs under 'lane < 16'"):
        build(text)


def test_a_destination_without_the_reduced_layout_is_declined_with_the_layout_to_use():
    text = ACROSS_WARPS.replace("layout=reduce_layout(L, (32, 6), (1,))", "layout=S[32 : 1]")
    with pytest.raises(TilecError, match=r"reduce_layout\(<layout of x>, \(32, 6\), \(1,\)\)"):
        build(text)


def test_shapes_that_do_not_reduce_to_the_destination_are_an_error():
    text = ACROSS_WARPS.replace("axes=(1,)", "axes=(0,)")
    with pytest.raises(TilecError, match=r"reducing dims \(0,\) of 'x' \(32x6\) leaves 6, but 'm' is 32"):
        build(text)


# --------------------------------------------------------------------------
# shfl: rows across the lanes of a warp (a wgmma accumulator's quads)
# --------------------------------------------------------------------------

ATTENTION_TILE = """
const ACC = S[(4, 2, 8, 8, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
const ROW = reduce_layout(ACC, (64, 64), (1,))
kernel k(A: f32[64, 64], P: f32[64, 64], M: f32[64], L: f32[64]):
    cta_id([1])
    tid = thread_id([128])
    acc = alloc_local((64, 64), f32, layout=ACC)
    m = alloc_local((64, 1), f32, layout=ROW)
    l = alloc_local((64, 1), f32, layout=ROW)
    copy(acc, A)
    reduce(m, acc, op="max", axes=(1,))
    map(acc, exp2(acc - m, approx=True))
    reduce(l, acc, op="sum", axes=(1,))
    map(acc, acc * rcp(l))
    copy(P, acc)
    copy(M, m)
    copy(L, l)
"""


def test_row_max_and_sum_of_a_wgmma_accumulator_shuffle_across_the_quad():
    after = dispatched(ATTENTION_TILE)
    assert "ptx.shfl.sync.bfly(part, 1)" in after and "ptx.shfl.sync.bfly(part, 2)" in after
    assert "ptx.shfl.sync.bfly(part, 4)" not in after and "cta_sync" not in after
    # the row values are in all four lanes of a quad; the first of them stores them
    assert "if tid % 4 == 0:\n        M[" in after
    r = build(ATTENTION_TILE)
    a = np.random.default_rng(4).standard_normal((64, 64)).astype(np.float32)
    p, m, l = np.full((64, 64), np.nan, np.float32), np.full(64, np.nan, np.float32), np.full(64, np.nan, np.float32)
    simulate(r, {"A": a, "P": p, "M": m, "L": l})
    e = np.exp2(a - a.max(1, keepdims=True))
    np.testing.assert_array_equal(m, a.max(1))
    np.testing.assert_allclose(l, e.sum(1), rtol=1e-5)
    np.testing.assert_allclose(p, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_forcing_fold_on_rows_across_lanes_says_why():
    text = ATTENTION_TILE.replace('op="max", axes=(1,))', 'op="max", axes=(1,), dispatch="fold")')
    with pytest.raises(TilecError, match="variant 'fold' of 'reduce' does not accept this call on sm_90a\n(.|\n)*"
                                         "rejected by in_thread: the rows of the source are spread over threads"):
        build(text)


def test_integer_sums_fold_in_the_destinations_type():
    text = """
kernel k(A: i16[4, 8], B: i32[4]):
    cta_id([1])
    tid = thread_id([1])
    x = alloc_local((4, 8), i16)
    s = alloc_local((4,), i32)
    copy(x, A)
    reduce(s, x, op="sum", axes=(1,))
    copy(B, s)
"""
    r = build(text)
    a = np.random.default_rng(7).integers(-30000, 30000, (4, 8)).astype(np.int16)
    b = np.zeros(4, np.int32)
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, a.astype(np.int32).sum(1))


MAP = """
kernel k(A: f32[32, 8], C: f32[8], B: f32[32, 8]):
    cta_id([1])
    lane = lane_id([32])
    x = alloc_local((32, 8), f32, layout=S[(32, 8) : (1@laneid, 1)])
    c = alloc_shared((8,), f32)
    copy(x, A)
    if lane < 8:
        c[lane] = C[lane]
    cuda.cta_sync()
    map(x, {value})
    copy(B, x)
"""


def test_map_reads_a_shared_operand_at_each_elements_index_and_a_scalar():
    r = build(MAP.replace("{value}", "max(x, c) + convert(lane, f32)"))
    rng = np.random.default_rng(8)
    a, c = rng.standard_normal((32, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    b = np.full((32, 8), np.nan, np.float32)
    simulate(r, {"A": a, "C": c, "B": b})
    np.testing.assert_array_equal(b, np.maximum(a, c) + np.arange(32, dtype=np.float32)[:, None])


@pytest.mark.parametrize("value,error", [
    ("x + A[:, 0:4]", r"'A\[:, 0:4\]' \(extents \(32, 4\)\) does not broadcast to 'x' \(extents \(32, 8\)\)"),
    ("x[0:16, :] * 2.0", r"'x\[0:16, :\]' \(extents \(16, 8\)\) does not broadcast"),
])
def test_map_operands_that_do_not_broadcast_are_located_errors(value, error):
    with pytest.raises(TilecError, match=error):
        build(MAP.replace("{value}", value))


def test_map_refuses_a_register_operand_whose_elements_sit_elsewhere_in_each_thread():
    text = MAP.replace("{value}", "x * y").replace(
        "    c = alloc_shared", "    y = alloc_local((32, 8), f32)\n    fill(y, 2.0)\n    c = alloc_shared")
    with pytest.raises(TilecError, match=r"rejected by|declined: 'y' is not held where 'x' is"):
        build(text)


def test_reduce_layout_with_axes_outside_the_shape_is_a_located_error():
    text = FOLD.replace("reduce_layout(L, (4, 8), (1,))", "reduce_layout(L, (4, 8), (2,))").replace("{op}", "sum")
    with pytest.raises(TilecError, match=r"k.tile:\d+:\d+: error: .*the reduced axes \(2,\) must be distinct dims"):
        build(text)


def test_map_into_memory_is_refused_with_the_table():
    with pytest.raises(TilecError, match="rejected by registers: map computes register \\(local\\) tiles; 'B' is in global"):
        build(MAP.replace("map(x, {value})", "map(B, x * 2.0)"))


LANE_SUMS = """
const L = {layout}
kernel k(A: i32[{rows}, {cols}], B: i32[{rows}]):
    cta_id([1])
    lane = lane_id([32])
    x = alloc_local(({rows}, {cols}), i32, layout=L)
    s = alloc_local(({rows}, 1), i32, layout=reduce_layout(L, ({rows}, {cols}), (1,)))
    copy(x, A)
    reduce(s, x, op="{op}", axes=(1,))
    copy(B, s)
"""


@pytest.mark.parametrize("layout,rows,cols,mask", [
    ("S[(8, 4, 4) : (4@laneid, 1@laneid, 1)]", 8, 16, "15 << (lane & 28)"),
    ("S[(32, 4) : (1@laneid, 1)]", 1, 128, "4294967295"),
])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_integer_rows_across_lanes_take_one_redux_per_row(layout, rows, cols, mask, op):
    text = LANE_SUMS.format(layout=layout, rows=rows, cols=cols, op=op)
    after = dispatched(text)
    assert "ptx.shfl" not in after
    ptx_op = {"sum": "add"}.get(op, op)
    assert f'ptx.redux.sync(part, op="{ptx_op}", mask={mask})' in after
    r = build(text)
    a = np.random.default_rng(9).integers(-1000, 1000, (rows, cols)).astype(np.int32)
    b = np.zeros(rows, np.int32)
    simulate(r, {"A": a, "B": b})
    np.testing.assert_array_equal(b, {"sum": a.sum(1), "max": a.max(1), "min": a.min(1)}[op])

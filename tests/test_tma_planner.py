"""TMA descriptor planning (tilec.compiler.tma_planner), checked against a
brute-force model of the hardware (tests/tma_sim.py): every plan must move
exactly the elements the two layouts describe, inside the descriptor's
bounds, and pass the runtime's tensor-map rules."""

import pytest
from hypothesis import given, settings, strategies as st

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import Iter, TileLayout, cosize, make, row_major
from tilec.compiler.layout_shape import permute_dims
from tilec.compiler.shared_layouts import mma_shared_layout
from tilec.compiler.swizzle import hardware_swizzle
from tilec.compiler.tma_planner import Affine, LayoutMemo, l2_promotion, plan_tma
from tilec.runtime.tensormap import check_tensormap
from tma_sim import intended, simulate


def full(shape):
    return [(0, n) for n in shape]


def check(glayout, gshape, slayout, sshape, g_region, s_region, dtype, envs=({},), direction="g2s", **kw):
    """Plan the copy, then check it against the model at each `envs` binding."""
    plan = plan_tma(glayout, gshape, slayout, sshape, (g_region, s_region), dtype, direction, **kw)
    check_tensormap({"name": "t", **plan.descriptor()}, None)
    elem = DTYPES[dtype].bytes
    reach = plan.dims[0] * DTYPES[plan.dtype].bytes + sum((d - 1) * s for d, s in zip(plan.dims[1:], plan.strides))
    assert reach <= cosize(glayout or row_major(gshape)) * elem, "the map reaches past the tensor"
    for env in envs:
        assert simulate(plan, elem, env) == intended(glayout, gshape, slayout, sshape, g_region, s_region, elem, env)
    moved, clipped = intended(glayout, gshape, slayout, sshape, g_region, s_region, elem, envs[0])
    assert plan.bytes == elem * (len(moved) + len(clipped))  # a clipped position still counts its bytes
    assert plan.elem_strides == (1,) * plan.rank and plan.interleave == "none"
    return plan


def zero(plan):
    return [[c.evaluate({}) for c in issue.coords] for issue in plan.issues]


# --------------------------------------------------------------------------
# The seeds
# --------------------------------------------------------------------------


def test_seed_demo_is_one_rank3_box():
    layout = mma_shared_layout("f16", 3, (8, 256))
    plan = check(None, (8, 256), layout, (8, 256), full((8, 256)), full((8, 256)), "f16")
    assert (plan.rank, plan.dims, plan.strides, plan.box) == (3, (64, 8, 4), (512, 128), (64, 8, 4))
    assert (plan.swizzle, plan.l2_promotion, plan.oob_fill, plan.dtype) == ("128B", "128B", "zero", "f16")
    assert zero(plan) == [[0, 0, 0]] and plan.issues[0].smem_offset == Affine()
    assert plan.bytes == 8 * 256 * 2


def test_gemm_operand_load_with_stages():
    layout = mma_shared_layout("f16", 3, (2, 128, 64))
    g_region = [("m_st", 128), (Affine(0, (("k", 64),)), 64)]
    s_region = [("stage", 1), (0, 128), (0, 64)]
    envs = [{"m_st": 128 * i, "k": j, "stage": s} for i, j, s in [(0, 0, 0), (3, 5, 1), (31, 63, 1)]]
    plan = check(None, (4096, 4096), layout, (2, 128, 64), g_region, s_region, "f16", envs)
    assert (plan.rank, plan.dims, plan.strides, plan.box) == (2, (4096, 4096), (8192,), (64, 128))
    (issue,) = plan.issues
    assert issue.coords == (Affine(0, (("k", 64),)), Affine.of("m_st"))
    assert issue.smem_offset == Affine(0, (("stage", 128 * 64),))
    assert plan.bytes == 128 * 64 * 2


def test_gemm_epilogue_store_spans_two_atoms_in_one_issue():
    """The tile's start is a known multiple of the atom row (64 columns) and
    the tensor whole atom rows, so its two atom columns are one box."""
    layout = mma_shared_layout("f16", 3, (128, 128))
    envs = [{"bm": 0, "bn": 0}, {"bm": 31, "bn": 31}, {"bm": 1, "bn": 2}]
    g_region = [(Affine(0, (("bm", 128),)), 128), (Affine(0, (("bn", 128),)), 128)]
    plan = check(None, (4096, 4096), layout, (128, 128), g_region, full((128, 128)), "f16", envs, direction="s2g")
    assert plan.direction == "s2g"
    assert (plan.rank, plan.dims, plan.box, plan.strides) == (3, (64, 4096, 64), (64, 128, 2), (8192, 128))
    (issue,) = plan.issues
    assert issue.coords == (Affine(), Affine(0, (("bm", 128),)), Affine(0, (("bn", 2),)))


def test_descriptor_does_not_depend_on_the_start():
    layout = mma_shared_layout("f16", 3, (128, 64))
    plans = [
        plan_tma(None, (512, 512), layout, (128, 64), ([(m, 128), (k, 64)], full((128, 64))), "f16", "g2s")
        for m, k in [(0, 0), (128, 64), ("m", "k")]
    ]
    assert len({str(p.descriptor()) for p in plans}) == 1


# --------------------------------------------------------------------------
# The grid: swizzle modes x element sizes x regions
# --------------------------------------------------------------------------

DTYPE_NAMES = ["u8", "f16", "f32"]


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("atoms", [(1, 1), (2, 1), (1, 2), (2, 3)])
def test_swizzled_tiles_load_in_one_issue(mode, dtype, atoms):
    """Column starts that are whole atom rows, in a tensor of whole atom rows."""
    per_atom = (16 << mode) // DTYPES[dtype].bytes
    rows, width = 8 * atoms[0], per_atom * atoms[1]
    layout = mma_shared_layout(dtype, mode, (rows, width))
    gshape = (3 * rows, 2 * width + per_atom)
    g_region = [("r", rows), (Affine(0, (("c", per_atom),)), width)]
    envs = [{"r": 0, "c": 0}, {"r": rows + 3, "c": 1}, {"r": 2 * rows, "c": atoms[1] + 1}]
    plan = check(None, gshape, layout, (rows, width), g_region, full((rows, width)), dtype, envs)
    assert len(plan.issues) == 1
    assert plan.box[0] * DTYPES[plan.dtype].bytes <= {0: 256, 1: 32, 2: 64, 3: 128}[mode]


# --------------------------------------------------------------------------
# Ragged edges: tensors whose extents are not multiples of the tile, the
# starts runtime multiples of the tile, sampled up to the last (partial) tile
# --------------------------------------------------------------------------


def tiles(name, n):
    """The start `name * n` of tile `name`: a runtime value, a known multiple of n."""
    return Affine(0, ((name, n),))


def up_to_last_tile(names, extents, tile):
    """Bindings of the tile indices: the first tile, the last tile of each
    dim (partly past the edge) with the others first, and all last together."""
    last = {x: -(-e // n) - 1 for x, e, n in zip(names, extents, tile)}
    envs = [dict.fromkeys(names, 0), last]
    envs += [{**dict.fromkeys(names, 0), x: last[x]} for x in names]
    return envs


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("atoms", [(1, 1), (2, 2), (1, 4)])
@pytest.mark.parametrize("past", ["16B", "atom"])
def test_ragged_2d_tiles(mode, dtype, atoms, past):
    """The tensor ends 16 bytes, or one atom row, into its last tile.  A tile
    wider than an atom row splits its columns into atom-row pieces in one box
    only when the tensor's width is whole atom rows; otherwise each atom column
    is an issue of its own."""
    elem = DTYPES[dtype].bytes
    per_atom = (16 << mode) // elem
    rows, width = 8 * atoms[0], per_atom * atoms[1]
    extra = 16 // elem if past == "16B" else per_atom
    gshape = (2 * rows + 3, 2 * width + extra)
    layout = mma_shared_layout(dtype, mode, (rows, width))
    g_region = [(tiles("bm", rows), rows), (tiles("bn", width), width)]
    envs = up_to_last_tile(["bm", "bn"], gshape, (rows, width))
    for direction in ("g2s", "s2g"):
        plan = check(None, gshape, layout, (rows, width), g_region, full((rows, width)), dtype, envs,
                     direction=direction)
        exact = atoms[1] == 1 or gshape[1] % per_atom == 0
        assert len(plan.issues) == (1 if exact else atoms[1])
        assert plan.dims[0] == (per_atom if atoms[1] > 1 and exact else gshape[1])


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_ragged_3d_tiles(mode, dtype):
    elem = DTYPES[dtype].bytes
    per_atom = (16 << mode) // elem
    tile = (2, 8, 2 * per_atom)
    gshape = (5, 21, 4 * per_atom + 16 // elem)
    layout = mma_shared_layout(dtype, mode, tile)
    g_region = [(tiles(x, n), n) for x, n in zip(("a", "b", "c"), tile)]
    envs = up_to_last_tile(["a", "b", "c"], gshape, tile)
    plan = check(None, gshape, layout, tile, g_region, full(tile), dtype, envs)
    if mode == 0:  # 16 bytes is the atom row: the width is whole atom rows and the split exact
        assert plan.dims == (per_atom, 21, gshape[2] // per_atom, 5) and len(plan.issues) == 1
    else:  # two atom columns, and the outer dim is behind them in shared memory
        assert plan.dims == (gshape[2], 21, 5) and plan.box == (per_atom, 8, 1) and len(plan.issues) == 4


def test_ragged_unit_dim_and_bare_symbol_starts():
    """A start that is not a known multiple of the atom row (a bare runtime
    value) cannot carry a split either, even in a tensor of whole atom rows."""
    layout = mma_shared_layout("f16", 3, (16, 128))
    g_region = [("p", 1), ("r", 16), ("c", 128)]
    envs = [{"p": 0, "r": 0, "c": 0}, {"p": 2, "r": 30, "c": 130}, {"p": 1, "r": 7, "c": 250}]
    plan = check(None, (3, 40, 256), layout, (16, 128), g_region, full((16, 128)), "f16", envs)
    assert len(plan.issues) == 2 and plan.dims == (256, 40, 3)


@pytest.mark.parametrize("mode", [0, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_constant_partial_regions(mode, dtype):
    width = (16 << mode) // DTYPES[dtype].bytes
    layout = mma_shared_layout(dtype, mode, (16, 2 * width))
    region = [(5, 16), (width, 2 * width)]
    plan = check(None, (40, 4 * width), layout, (16, 2 * width), region, full((16, 2 * width)), dtype)
    assert len(plan.issues) == 1


def test_shared_region_slice_is_an_offset():
    layout = mma_shared_layout("f16", 3, (4, 64, 64))
    s_region = [(2, 1), (32, 32), (0, 64)]
    plan = check(None, (256, 256), layout, (4, 64, 64), [("r", 32), (64, 64)], s_region, "f16",
                 [{"r": 0}, {"r": 100}])
    assert plan.issues[0].smem_offset == Affine(2 * 64 * 64 + 32 * 64)
    # a stage dim of two iterators (stage 2a + b at a * 1024 + b * 2048) is sliced at the start
    layout = make((2, 2, 16, 64), (1024, 2048, 64, 1))
    for stage in range(4):
        plan = check(None, (256, 256), layout, (4, 16, 64), [("r", 16), (64, 64)], [(stage, 1), (0, 16), (0, 64)],
                     "f16", [{"r": 0}, {"r": 100}])
        assert plan.issues[0].smem_offset == Affine(stage // 2 * 1024 + stage % 2 * 2048)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_higher_rank_globals(rank):
    gshape = (3, 5, 4, 24, 128)[-rank:]
    tile = (2, 3, 2, 16, 64)[-rank:]
    starts = [("a", 1), ("b", 2), (1, 1), ("r", 8), ("c", 64)][-rank:]
    g_region = [(s, n) for (s, _), n in zip(starts, tile)]
    layout = mma_shared_layout("f16", 3, tile)
    env = {"a": 1, "b": 2, "r": 8, "c": 64}
    plan = check(None, gshape, layout, tile, g_region, full(tile), "f16", [env, dict.fromkeys(env, 0)])
    assert plan.rank <= 5


def test_unit_dims_between_copied_dims():
    layout = mma_shared_layout("f32", 2, (16, 32))
    g_region = [(1, 1), ("r", 16), (3, 1), (0, 32)]
    s_region = full((16, 32))
    for slayout in (None, layout):
        plan = check(None, (2, 64, 4, 32), slayout, (16, 32), g_region, s_region, "f32", [{"r": 7}, {"r": 48}])
        assert len(plan.issues) == 1 and plan.rank == (4 if slayout is None else 5)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_column_major_tiles_keep_the_contiguous_dim_innermost(mode, dtype):
    width = (16 << mode) // DTYPES[dtype].bytes  # one atom row of m
    tile = (2 * width, 16)  # (m, k), m contiguous in both memories
    glayout = make((4 * width, 64), (1, 4 * width))
    slayout = permute_dims(mma_shared_layout(dtype, mode, (16, 2 * width)), (16, 2 * width), (1, 0))
    g_region = [(Affine(0, (("m", width),)), 2 * width), ("k", 16)]  # m starts on whole atom rows
    plan = check(glayout, (4 * width, 64), slayout, tile, g_region, full(tile), dtype,
                 [{"m": 0, "k": 0}, {"m": 2, "k": 48}, {"m": 1, "k": 5}, {"m": 3, "k": 60}])
    assert len(plan.issues) == 1 and plan.strides[0] == 4 * width * DTYPES[dtype].bytes


def test_transposing_copy_is_refused():
    with pytest.raises(TilecError, match="cannot transpose"):
        plan_tma(make((256, 128), (1, 256)), (256, 128), mma_shared_layout("f16", 3, (64, 64)), (64, 64),
                 (full((64, 64)), full((64, 64))), "f16", "g2s")


# --------------------------------------------------------------------------
# Issue loops, merging, promotion
# --------------------------------------------------------------------------


def test_padded_shared_rows_need_one_issue_per_row():
    slayout = make((4, 64), (128, 1))  # 64 f16 per row, rows 256 bytes apart
    plan = check(None, (64, 128), slayout, (4, 64), [("r", 4), ("c", 64)], full((4, 64)), "f16",
                 [{"r": 0, "c": 0}, {"r": 60, "c": 64}])
    assert len(plan.issues) == 4 and plan.box == (64, 1)
    assert [i.smem_offset.const for i in plan.issues] == [0, 128, 256, 384]


def test_gap_between_atom_columns_becomes_an_issue_axis():
    slayout = TileLayout([Iter(16, 64), Iter(2, 2048), Iter(64, 1)], swizzle=hardware_swizzle(DTYPES["f16"], 3))
    plan = check(None, (64, 256), slayout, (16, 128), [(16, 16), (64, 128)], full((16, 128)), "f16")
    assert len(plan.issues) == 2 and plan.box == (64, 16)


def test_rank_overflow_shortens_the_chain():
    tile = (2, 2, 2, 8, 128)
    plan = check(None, (4, 4, 4, 8, 256), mma_shared_layout("f16", 3, tile), tile, full(tile)[:3] + [(0, 8), (0, 128)],
                 full(tile), "f16")
    assert plan.rank == 5 and len(plan.issues) == 16


def test_long_rows_without_swizzle_are_cut_at_256():
    plan = check(None, (4, 1024), None, (4, 1024), full((4, 1024)), full((4, 1024)), "f16")
    assert plan.box == (256, 4, 4) and len(plan.issues) == 1


def test_narrow_global_rows_merge_and_promote():
    plan = check(None, (64, 8), None, (64, 8), full((64, 8)), full((64, 8)), "u8")
    assert (plan.dtype, plan.dims, plan.box, plan.strides) == ("u16", (256,), (256,), ())
    rows = check(None, (256, 8), None, (64, 8), [("r", 64), (0, 8)], full((64, 8)), "u8",
                 [{"r": 0}, {"r": 192}, {"r": 2}])
    assert rows.dtype == "u16" and rows.issues[0].coords == (Affine(0, (("r", 4),)),)


def test_nan_fill_keeps_the_float_type_and_shortens_the_box_instead():
    args = (None, (256, 2), None, (256, 2), (full((256, 2)), full((256, 2))), "f32", "g2s")
    wide = check(*args[:4], *args[4], "f32")
    assert (wide.dtype, wide.box, len(wide.issues)) == ("u64", (256,), 1)
    nan = check(*args[:4], *args[4], "f32", oob_fill="nan")
    assert (nan.dtype, nan.box, nan.oob_fill, len(nan.issues)) == ("f32", (256,), "nan", 2)


def test_l2_promotion_follows_the_row():
    assert [l2_promotion(b) for b in (16, 32, 64, 128, 192, 256, 512)] == [
        "none", "none", "64B", "128B", "128B", "256B", "256B"]


# --------------------------------------------------------------------------
# Errors: each rule
# --------------------------------------------------------------------------


def plan_error(*args, **kw):
    with pytest.raises(TilecError) as info:
        plan_tma(*args, **kw)
    return str(info.value)


def test_thread_axes_are_refused():
    lanes = make((32, 8), ((1, "laneid"), 1))
    assert "axis 'laneid'" in plan_error(None, (32, 8), lanes, (32, 8), (full((32, 8)), full((32, 8))), "f16", "g2s")


def test_rank_over_five_is_refused():
    shape = (3,) * 5 + (32,)
    region = [(0, 2)] * 5 + [(0, 16)]
    msg = plan_error(None, shape, None, (2,) * 5 + (16,), (region, full((2,) * 5 + (16,))), "f16", "g2s")
    assert "rank 6" in msg


def test_short_inner_row_is_refused():
    msg = plan_error(None, (64, 64), None, (64, 4), ([(0, 64), (0, 4)], full((64, 4))), "f16", "g2s")
    assert "8 bytes, not a multiple of 16" in msg


def test_global_stride_off_16_bytes_is_refused():
    msg = plan_error(None, (64, 20), None, (8, 16), ([(0, 8), (0, 16)], full((8, 16))), "f16", "g2s")
    assert "40 bytes" in msg


def test_misaligned_shared_issue_is_refused():
    msg = plan_error(None, (64, 16), make((8, 16), (48, 1)), (8, 16), ([(0, 8), (0, 16)], full((8, 16))), "u8", "g2s")
    assert "not a multiple of 128 bytes" in msg


def test_other_user_errors():
    sw = mma_shared_layout("f16", 3, (8, 64))
    cases = [
        ((None, (8, 64), sw, (8, 64), ([(0, 8), (0, 64)], [(0, 8), (0, 32)]), "f16", "g2s"), "differ"),
        ((None, (8, 64), sw, (8, 64), (full((8, 64)), full((8, 64))), "i32", "g2s", "nan"), "float"),
        ((None, (8, 64), None, (8, 64), ([(0, 1), (0, 1)], [(0, 1), (0, 1)]), "f16", "g2s"), "one element"),
        ((None, (8, 64), None, (8, 64), ([(8, 8), (0, 64)], full((8, 64))), "f16", "g2s"), "outside"),
        ((None, (8, 64), None, (8, 64), (full((8, 64)), [(4, 8), (0, 64)]), "f16", "g2s"), "outside"),
        ((make((8, 32), (128, 1)), (8, 64), None, (8, 64), (full((8, 64)), full((8, 64))), "f16", "g2s"),
         "elements"),
        ((make((2, 4, 64), (64, 512, 1)), (8, 64), None, (8, 64), (full((8, 64)), full((8, 64))), "f16", "g2s"),
         "one stride per global dim"),
        ((None, (8, 256), mma_shared_layout("f16", 3, (8, 256)), (8, 256),
          (full((8, 256)), [(0, 8), ("c", 256)]), "f16", "g2s"), None),
        ((None, (8, 512), mma_shared_layout("f16", 3, (8, 512)), (8, 512),
          ([(0, 8), (0, 256)], [(0, 8), ("c", 256)]), "f16", "g2s"), "runtime start"),
        ((None, (8, 64), TileLayout([Iter(512, 1)], swizzle=hardware_swizzle(DTYPES["f32"], 3)), (8, 64),
          (full((8, 64)), full((8, 64))), "f16", "g2s"), "not a hardware swizzle"),
    ]
    for args, needle in cases:
        if needle is None:
            plan_tma(*args)  # a full-length region may name its start: it can only be 0
            continue
        assert needle in plan_error(*args), needle


def test_plans_sharing_a_layout_memo_are_the_plans_made_alone():
    """The plans of one kernel share a `LayoutMemo` over the same layout
    objects: each plan (or error, raised again, not kept) is the one a plan
    with no memo gives."""
    glayout, bad_global = row_major((512, 512)), make((8, 32), (128, 1))
    slayout = mma_shared_layout("f16", 3, (2, 128, 64))
    k = Affine(0, (("k", 64),))
    copies = [
        (glayout, (512, 512), [("m", 128), (k, 64)], [("stage", 1), (0, 128), (0, 64)]),
        (glayout, (512, 512), [("m", 64), (k, 64)], [(1, 1), (64, 64), (0, 64)]),
        (glayout, (512, 512), [("m", 64), (k, 64)], [(0, 1), (64, 64), (0, 64)]),
        (glayout, (512, 512), [("m", 64), (k, 32)], [(1, 1), (0, 64), ("c", 32)]),  # refused: off 128 bytes
        (bad_global, (8, 64), [(0, 1), (0, 64)], [(0, 1), (0, 1), (0, 64)]),  # refused: by the grouping
        (glayout, (512, 512), [("m", 128), (k, 64)], [("stage", 1), (0, 128), (0, 64)]),
    ]

    def outcome(g, gshape, g_region, s_region, **memo):
        try:
            return plan_tma(g, gshape, slayout, (2, 128, 64), (g_region, s_region), "f16", "g2s", **memo)
        except TilecError as err:
            return str(err)

    memo = LayoutMemo()
    for _ in range(2):
        for copy in copies:
            assert outcome(*copy, memo=memo) == outcome(*copy)
    assert [isinstance(outcome(*c), str) for c in copies] == [False, False, False, True, True, False]


# --------------------------------------------------------------------------
# Random layouts: a plan, when there is one, is the copy
# --------------------------------------------------------------------------


@st.composite
def copies(draw):
    """A copy of a random region between a row-major global tensor and a
    shared tile whose digits are permuted, with optional gaps and swizzle."""
    dtype = draw(st.sampled_from(DTYPE_NAMES))
    elem = DTYPES[dtype].bytes
    ndim = draw(st.integers(1, 3))
    inner = draw(st.sampled_from([16, 32, 64, 128])) // elem
    tile = [draw(st.sampled_from([1, 2, 4, 8])) for _ in range(ndim - 1)] + [inner * draw(st.sampled_from([1, 2, 4]))]
    digits = []  # (dim, extent, unit)
    for d, n in enumerate(tile):
        cut = draw(st.sampled_from([k for k in (1, 2, 4, 8, 16, 32, 64, 128) if n % k == 0 and k <= n]))
        pieces = [(n // cut, cut), (cut, 1)] if 1 < cut < n else [(n, 1)]
        digits += [(d, e, u) for e, u in pieces if e > 1]
    plain = draw(st.booleans())  # row-major digits, no gaps, no swizzle: a plan must exist
    order = sorted(digits, key=lambda g: (g[0], -g[2]), reverse=True) if plain else draw(st.permutations(digits))
    if not plain and draw(st.booleans()):  # keep the digit holding the innermost unit first in memory
        lead = max((g for g in digits if g[0] == ndim - 1 and g[2] == 1), key=lambda g: g[1])
        order = [lead] + [g for g in order if g != lead]
    stride, strides = 1, {}
    for g in order:
        strides[g] = stride
        stride *= g[1] * (1 if plain else draw(st.sampled_from([1, 1, 1, 2])))
    shard = [Iter(e, strides[(d, e, u)]) for d, e, u in sorted(digits, key=lambda g: (g[0], -g[2]))]
    mode = 0 if plain else draw(st.sampled_from([0, 1, 2, 3]))
    slayout = TileLayout(shard or [Iter(1, 1)], swizzle=hardware_swizzle(DTYPES[dtype], mode))
    gshape = [n + draw(st.sampled_from([0, 0, 16 // elem, 64])) for n in tile]
    g_region, inside, ragged = [], {}, {}  # two bindings: the region in the tensor, and past its edge
    for d, (g, n) in enumerate(zip(gshape, tile)):
        kind, name = draw(st.sampled_from(["const", "symbol", "tiles"])), f"s{d}"
        if kind == "const":
            g_region.append((draw(st.integers(0, g - n)), n))
        elif kind == "symbol":  # any start
            g_region.append((name, n))
            inside[name], ragged[name] = draw(st.integers(0, g - n)), draw(st.integers(0, g - 1))
        else:  # a tile index: the start a known multiple of the tile, the last tile partial
            g_region.append((tiles(name, n), n))
            inside[name], ragged[name] = draw(st.integers(0, g // n - 1)), -(-g // n) - 1
    return dtype, tuple(gshape), slayout, tuple(tile), g_region, [inside, ragged], plain


@settings(max_examples=150, deadline=None)
@given(copies())
def test_random_plans_are_exact(copy):
    dtype, gshape, slayout, tile, g_region, envs, plain = copy
    try:
        check(None, gshape, slayout, tile, g_region, full(tile), dtype, envs)
    except TilecError:
        assert not plain


# --------------------------------------------------------------------------
# Run-time starts on regions as long as their dim (issue 18, item 1)
# --------------------------------------------------------------------------

EDGES = [0, 1, 7, 8, 31, 32, 63]


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_full_length_region_keeps_its_run_time_start(direction):
    """A region as long as its global dim may still start anywhere: what
    lies past the edge is filled (load) or skipped (store).  Dropping the
    start read rows 0..63 for A[r : r + 64] of a 64-row tensor."""
    layout = mma_shared_layout("f16", 3, (64, 64))
    rows = check(None, (64, 64), layout, (64, 64), [("r", 64), (0, 64)], full((64, 64)), "f16",
                 [{"r": r} for r in EDGES], direction=direction)
    assert rows.issues[0].coords == (Affine(), Affine.of("r"))
    cols = check(None, (64, 64), None, (64, 64), [(0, 64), ("c", 64)], full((64, 64)), "f16",
                 [{"c": c} for c in EDGES], direction=direction)
    assert cols.issues[0].coords[0] == Affine.of("c")


def test_unit_dim_run_time_start_is_bounded_by_its_dim():
    """A[b, :, :] of a tensor with one b: b = 0 is the tile, any other b is
    past the edge and filled; the unit dim gets a descriptor dim to say so."""
    layout = mma_shared_layout("f16", 3, (8, 64))
    plan = check(None, (1, 8, 64), layout, (8, 64), [("b", 1), (0, 8), (0, 64)], full((8, 64)), "f16",
                 [{"b": 0}, {"b": 1}, {"b": 5}])
    assert plan.dims[-1] == 1 and plan.issues[0].coords[-1] == Affine.of("b")


def test_a_clipped_dim_is_never_merged_into_the_next():
    """Rows of 8 bytes merge into one long dim when they are whole; a row
    with a run-time start would spill into the next row after the merge
    instead of being clipped, so it stays a dim of its own (or is refused)."""
    envs = [{"r": 0, "c": 0}, {"r": 3, "c": 1}, {"r": 60, "c": 7}]
    try:
        check(None, (64, 8), None, (64, 8), [("r", 64), ("c", 8)], full((64, 8)), "u8", envs)
    except TilecError as err:
        assert "16" in err.message  # an 8-byte row stride has no descriptor


# --------------------------------------------------------------------------
# Constant regions past the tensor's edge (issue 18, item 2)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
@pytest.mark.parametrize("start", [120, 127, 64])
def test_constant_region_past_the_edge_is_clipped(direction, start):
    """A[120:136, 0:64] of 128 rows moves rows 120..127 and fills (load) or
    skips (store) the other 8, exactly as the same region with a run-time
    start does."""
    layout = mma_shared_layout("f16", 3, (16, 64))
    plan = check(None, (128, 64), layout, (16, 64), [(start, 16), (0, 64)], full((16, 64)), "f16",
                 direction=direction)
    assert plan.issues[0].coords == (Affine(), Affine(start))

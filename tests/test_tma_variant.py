"""copy_async -> tma on the CPU: the lowered IR, the PTX for sm_90a and
sm_100a (every module assembled; a ptxas warning fails), the user errors,
and what the kernels compute, run in the PTX simulator with its TMA model
(tests/tma_ptx_sim.py) -- including every kernel of the GPU acceptance
grid (tests/tma_kernels.py), so the GPU tests' expectations are checked
here first."""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tma_kernels
import tma_ptx_sim
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse
from tilec.runtime.assemble import assemble
from tilec.runtime.tensormap import check_tensormap

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGETS = ("sm_90a", "sm_100a")
LOAD_3D = "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
LOAD_2D = LOAD_3D.replace(".3d.", ".2d.")


def build(text: str, target: str = "sm_90a", defines=None):
    """(ptx, kernel.json) of `text`, assembled for `target`."""
    r = compile_source(text, "test.tile", target=target, defines=defines)
    assemble(r.ptx, target)
    return r.ptx, r.meta


def lowered(text: str, target: str = "sm_90a") -> str:
    """The kernel after dispatch, as text (which must parse back unchanged)."""
    r = compile_source(text, "test.tile", target=target, options=Options(stop_after="dispatch"))
    out = print_module(r.module)
    assert parse(out, "round-trip.tile") == r.module
    return out


def tma_lines(ptx: str) -> list:
    return [line.strip() for line in ptx.splitlines() if "bulk.tensor" in line]


# --------------------------------------------------------------------------
# The seed's demonstration (examples/tma_copy.tile)
# --------------------------------------------------------------------------

DEMO = (EXAMPLES / "tma_copy.tile").read_text()


@pytest.mark.parametrize("target", TARGETS)
def test_demo_issues_one_rank_3_load(target):
    ptx, meta = build(DEMO, target)
    (line,) = tma_lines(ptx)
    group = ".cta_group::1" if target == "sm_100a" else ""
    assert re.fullmatch(
        re.escape(LOAD_3D + group) + r" \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+, %r\d+\}\], \[%r\d+\];", line
    ), line
    assert ".param .align 64 .b8 A_tmap0[128]" in ptx
    assert re.search(r"cvta\.param\.u64 %rd\d+, %rd\d+;", ptx)
    (tmap,) = meta["kernels"][0]["tensormaps"]
    assert (tmap["rank"], tmap["dims"], tmap["strides"], tmap["box"], tmap["swizzle"]) == (
        3, [64, 8, 4], [512, 128], [64, 8, 4], "128B")
    assert {"name": "A_tmap0", "kind": "tensormap", "tensor": "A"} in meta["kernels"][0]["params"]


def test_demo_cta_group_only_on_blackwell():
    hopper, _ = build(DEMO, "sm_90a")
    blackwell, _ = build(DEMO, "sm_100a")
    assert "cta_group" not in hopper
    assert ".cta_group::1 " in tma_lines(blackwell)[0]


def test_demo_lowers_to_one_intrinsic_and_no_completion():
    text = lowered(DEMO, "sm_100a")
    calls = [line.strip() for line in text.splitlines() if "ptx.cp_async" in line]
    assert calls == [
        "ptx.cp_async.bulk.tensor.g2s(address_of(A_smem), mbarrier.ptr_to([0]), address_of(A_tmap0), "
        "(0, 0, 0), cta_group=1)"
    ]
    # the caller's expect_tx and try_wait are the only mbarrier operations besides init
    assert text.count("ptx.mbarrier.") == 3
    assert "cta_group" not in lowered(DEMO, "sm_90a")


@pytest.mark.parametrize("target", TARGETS)
def test_demo_copies_the_tile_in_the_simulator(target):
    ptx, meta = build(DEMO, target)
    a = np.random.default_rng(4).standard_normal((8, 256)).astype(np.float16)
    b = np.zeros_like(a)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    np.testing.assert_array_equal(a, b)


def test_simulator_sees_a_wrong_swizzle():
    """The check above can fail: read back with the wrong swizzle mode in
    the tensor map, the tile comes out permuted."""
    ptx, meta = build(DEMO)
    meta["kernels"][0]["tensormaps"][0]["swizzle"] = "64B"
    a = np.arange(8 * 256, dtype=np.float16).reshape(8, 256)
    b = np.zeros_like(a)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    assert not np.array_equal(a, b)


def test_simulator_waits_for_the_announced_bytes():
    """Without the expect_tx arrival the load's phase never completes, and
    the waiting threads spin until the simulator gives up."""
    ptx, meta = build(DEMO.replace("        ptx.mbarrier.arrive.expect_tx(mbarrier.ptr_to([0]), SMEM_BYTES)\n", ""))
    a = np.zeros((8, 256), np.float16)
    with pytest.raises(RuntimeError, match="did not finish"):
        tma_ptx_sim.run(ptx, meta, {"A": a, "B": a.copy()}, max_steps=20_000)


# --------------------------------------------------------------------------
# Stores, reductions, multicast, cache hints, issue loops
# --------------------------------------------------------------------------

KERNEL = """
const L = tma_shared_layout(f16, 3, (32, 64))
kernel k(A: f16[64, 128], B: f16[64, 128]{params}):
    {launch}
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    tile = pool.alloc((32, 64), f16, layout=L, align=1024)
    pool.commit()
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.mbarrier_init()
    cuda.cta_sync()
    if tid == 0:
        {call}
"""


def kernel(call: str, params: str = "", launch: str = "bx = cta_id([2])") -> str:
    return KERNEL.format(call=call, params=params, launch=launch)


LOAD = 'copy_async(tile[:, :], A[bx * 32 : bx * 32 + 32, 0:64], dispatch="tma", mbar=bar.ptr_to([0]){}); ' \
       "ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 4096)"
STORE = 'copy_async(B[bx * 32 : bx * 32 + 32, 64:128], tile[:, :], dispatch="tma"{}); ' \
        "ptx.cp_async.bulk.commit_group(); ptx.cp_async.bulk.wait_group(0)"


@pytest.mark.parametrize("target", TARGETS)
def test_store_is_a_bulk_group_copy_from_shared(target):
    ptx, _ = build(kernel(STORE.format("")), target)
    (line,) = tma_lines(ptx)
    assert re.fullmatch(
        r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group \[%rd\d+, \{%r\d+, %r\d+\}\], \[%r\d+\];",
        line,
    ), line
    assert "mbarrier::complete_tx" not in ptx


@pytest.mark.parametrize("target", TARGETS)
def test_reduce_add_store(target):
    ptx, _ = build(kernel(STORE.format(', reduce="add"')), target)
    (line,) = tma_lines(ptx)
    assert line.startswith("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [")


@pytest.mark.parametrize("target", TARGETS)
def test_multicast_with_a_runtime_mask(target):
    text = kernel(LOAD.format(", multicast=mask"), params=", mask: u32",
                  launch="bx = cta_id([2]); rank = cta_id_in_cluster([2])")
    ptx, meta = build(text, target)
    (line,) = tma_lines(ptx)
    group = ".cta_group::1" if target == "sm_100a" else ""
    assert re.fullmatch(
        re.escape(LOAD_2D + ".multicast::cluster" + group) + r" \[%r\d+\], \[%rd\d+, \{.*\}\], \[%r\d+\], (%rs\d+);",
        line,
    ), line
    mask = line.rsplit(", ", 1)[1].rstrip(";")
    assert re.search(rf"cvt\.u16\.u32 {re.escape(mask)}, %r\d+;", ptx)
    assert meta["kernels"][0]["cluster"] == [2, 1, 1]


def test_multicast_with_an_immediate_mask():
    ptx, _ = build(kernel(LOAD.format(", multicast=3"), launch="bx = cta_id([2]); rank = cta_id_in_cluster([2])"))
    assert tma_lines(ptx)[0].endswith("], 3;")


@pytest.mark.parametrize("target", TARGETS)
def test_cache_hint_follows_the_mask(target):
    text = kernel(LOAD.format(", multicast=3, cache_hint=policy"), params=", policy: u64",
                  launch="bx = cta_id([2]); rank = cta_id_in_cluster([2])")
    ptx, _ = build(text, target)
    (line,) = tma_lines(ptx)
    assert ".multicast::cluster" in line and line.split(" ")[0].endswith(".L2::cache_hint")
    assert re.search(r"\], 3, %rd\d+;$", line), line


def test_cache_hint_on_a_store():
    ptx, _ = build(kernel(STORE.format(", cache_hint=policy"), params=", policy: u64"))
    (line,) = tma_lines(ptx)
    assert line.startswith("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [")
    assert re.search(r"\], \[%r\d+\], %rd\d+;$", line), line


def test_cta_pair_on_blackwell():
    ptx, _ = build(kernel(LOAD.format(", cta_group=2")), "sm_100a")
    assert ".mbarrier::complete_tx::bytes.cta_group::2 [" in tma_lines(ptx)[0]


def test_explicit_cta_group_1_is_dropped_on_hopper():
    ptx, _ = build(kernel(LOAD.format(", cta_group=1")), "sm_90a")
    assert "cta_group" not in ptx


PADDED = """
kernel k(A: f16[64, 256], B: f16[64, 256]):
    bx = cta_id([4])
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    rows = pool.alloc((2, 16, 64), f16, align=1024)
    pool.commit()
    stage = bx % 2
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.mbarrier_init()
    cuda.cta_sync()
    if tid == 0:
        copy_async(rows[stage, :, 0:16], A[bx * 16 : bx * 16 + 16, 32:48], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 512)
        ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
        copy_async(B[bx * 16 : bx * 16 + 16, 32:48], rows[stage, :, 0:16], dispatch="tma")
        ptx.cp_async.bulk.commit_group()
        ptx.cp_async.bulk.wait_group(0)
"""


def test_issue_loop_is_unrolled_one_instruction_per_row():
    """Rows of 64 elements holding 16: every row is its own box, at its own
    shared offset and row coordinate."""
    text = lowered(PADDED)
    loads = [line.strip() for line in text.splitlines() if "tensor.g2s" in line]
    assert len(loads) == 16
    assert loads[0] == ("ptx.cp_async.bulk.tensor.g2s(address_of(rows) + stage * 2048, bar.ptr_to([0]), "
                        "address_of(A_tmap0), (32, bx * 16))")
    assert loads[5] == ("ptx.cp_async.bulk.tensor.g2s(address_of(rows) + stage * 2048 + 640, bar.ptr_to([0]), "
                        "address_of(A_tmap0), (32, bx * 16 + 5))")
    ptx, meta = build(PADDED)
    assert len(tma_lines(ptx)) == 32
    a = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float16)
    b = np.zeros_like(a)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    np.testing.assert_array_equal(b[:, 32:48], a[:, 32:48])
    assert not b[:, :32].any() and not b[:, 48:].any()


OFFSET = """
kernel k(A: f16[64, 256], B: f16[64, 256]):
    bx = cta_id([4])
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    rows = pool.alloc((16, 64), f16, layout={layout}, align=1024)
    spare = pool.alloc((16, 64), f16, align=1024)
    pool.commit()
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.mbarrier_init()
    cuda.cta_sync()
    if tid == 0:
        copy_async(rows[:, :], A[bx * 16 : bx * 16 + 16, 64:128], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 2048)
        ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
        copy_async(B[bx * 16 : bx * 16 + 16, 64:128], rows[:, :], dispatch="tma")
        ptx.cp_async.bulk.commit_group()
        ptx.cp_async.bulk.wait_group(0)
"""


def test_layout_offset_counts_from_the_first_element():
    text = OFFSET.format(layout="S[(16, 64) : (64, 1)] + O[1024]")
    calls = [line.strip() for line in lowered(text).splitlines() if "bulk.tensor" in line]
    assert [c.split(",")[0] for c in calls] == ["ptx.cp_async.bulk.tensor.g2s(address_of(rows)",
                                                "ptx.cp_async.bulk.tensor.s2g(address_of(rows)"]
    ptx, meta = build(text)
    a = np.random.default_rng(6).standard_normal((64, 256)).astype(np.float16)
    b = np.zeros_like(a)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    np.testing.assert_array_equal(b[:, 64:128], a[:, 64:128])


def test_layout_offset_the_swizzle_moves_is_refused():
    text = OFFSET.format(layout="SW[3, 3, 3] * S[(16, 64) : (64, 1)] + O[64]")
    assert "puts the first element where the swizzle moves it" in error(text)


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def error(text: str, target: str = "sm_90a", defines=None) -> str:
    with pytest.raises(TilecError) as info:
        build(text, target, defines)
    return info.value.message


def test_load_needs_an_mbarrier():
    text = kernel('copy_async(tile[:, :], A[0:32, 0:64], dispatch="tma")')
    assert "a TMA load completes on an mbarrier: pass mbar=" in error(text)


def test_store_takes_no_mbarrier_and_does_not_multicast():
    text = kernel('copy_async(B[0:32, 0:64], tile[:, :], dispatch="tma", mbar=bar.ptr_to([0]))')
    assert "mbar= has no meaning for a TMA store" in error(text)
    text = kernel('copy_async(B[0:32, 0:64], tile[:, :], dispatch="tma", multicast=3)')
    assert "multicast= has no meaning for a TMA store" in error(text)


def test_a_load_cannot_reduce():
    assert "a load cannot reduce" in error(kernel(LOAD.format(', reduce="add"')))


def test_only_add_reduces():
    assert "'reduce' must be one of 'add'" in error(kernel(STORE.format(', reduce="max"')))


def test_cta_pair_needs_blackwell():
    message = error(kernel(LOAD.format(", cta_group=2")), "sm_90a")
    assert "cta_group=2 (a CTA pair) needs sm_100a" in message


def test_reduce_needs_a_supported_element_type():
    text = kernel(STORE.format(', reduce="add"')).replace("f16", "u8").replace("4096", "2048")
    text = text.replace("tma_shared_layout(u8, 3, (32, 64))", "tma_shared_layout(u8, 2, (32, 64))")
    message = error(text)
    assert 'reduce="add" on a TMA store needs f16, bf16, f32, i32, u32, u64 elements, got u8' in message


def test_reduce_refuses_a_widened_tensor_map():
    text = """
kernel k(B: f16[8, 264]):
    cta_id([1])
    tid = thread_id([32])
    row = alloc((8, 264), f16, scope="shared", align=1024)
    if tid == 0:
        copy_async(B[:, :], row[:, :], dispatch="tma", reduce="add")
"""
    message = error(text)
    assert "reads them as u32 to fit an innermost box row of over 256 elements" in message


def test_nan_fill_needs_floats():
    text = kernel(LOAD.format(', oob="nan"')).replace("f16", "i16")
    assert "a NaN out-of-bounds fill needs a float dtype, not i16" in error(text)


def test_nan_fill_needs_a_float_tensor_map():
    text = kernel(LOAD.format(', oob="nan"')).replace("f16", "e4m3").replace("e4m3, 3,", "e4m3, 2,")
    text = text.replace("bar.ptr_to([0]), 4096)", "bar.ptr_to([0]), 2048)")  # 32 x 64 one-byte elements
    assert 'oob="nan" fills with the NaN of a float tensor map' in error(text)
    assert "TMA reads e4m3 as plain bytes" in error(text)


def test_tma_needs_one_thread():
    text = kernel("pass").replace(
        "    if tid == 0:\n        pass",
        '    cta.copy_async(tile[:, :], A[0:32, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))',
    )
    message = error(text)
    assert "variant 'tma' of 'copy_async' does not accept this call" in message
    assert "rejected by single_thread: TMA is issued by one thread, but this call is at cta scope" in message


def test_shapes_must_match():
    text = kernel('copy_async(tile[0:16, :], A[0:32, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))')
    message = error(text)
    assert "(16, 64)" in message and "(32, 64)" in message


def test_tma_needs_hopper():
    text = """
kernel k(A: f16[64, 128]):
    cta_id([1])
    tid = thread_id([32])
    tile = alloc((32, 64), f16, scope="shared", align=1024)
    bar = alloc((1,), u64, scope="shared", align=8)
    if tid == 0:
        copy_async(tile[:, :], A[0:32, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
"""
    assert "TMA needs sm_90a or newer (target is sm_80)" in error(text, "sm_80")


def test_mask_immediate_has_16_bits():
    text = kernel(LOAD.format(", multicast=65536"), launch="bx = cta_id([2]); rank = cta_id_in_cluster([2])")
    assert "the multicast CTA mask has 16 bits" in error(text)


EXPLICIT = """
kernel k(A: f16[64, 128]):
    tensormap A_map = tensormap(A, f16, dims=(64, 128), strides=(256,), box=(64, 32), elem_strides=(1, 1), interleave="none", swizzle="128B", l2_promotion="128B", oob_fill="zero")
    cta_id([1])
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    tile = pool.alloc((32, 64), f16, align=1024)
    pool.commit()
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
        {call}
"""


def test_intrinsics_written_by_hand():
    load = "ptx.cp_async.bulk.tensor.g2s(address_of(tile), bar.ptr_to([0]), address_of(A_map), (0, 32), cta_group=1)"
    ptx, meta = build(EXPLICIT.replace("{call}", load), "sm_100a")
    assert tma_lines(ptx)[0].startswith("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                        ".cta_group::1 [")
    assert meta["kernels"][0]["tensormaps"][0]["name"] == "A_map"
    assert "cta_group on a TMA load needs sm_100a (target is sm_90a)" in error(EXPLICIT.replace("{call}", load))


def test_intrinsic_rank_is_one_to_five():
    store = "ptx.cp_async.bulk.tensor.s2g(address_of(tile), address_of(A_map), (0, 0, 0, 0, 0, 0))"
    assert "a TMA copy takes 1 to 5 coordinates, got 6" in error(EXPLICIT.replace("{call}", store))


# --------------------------------------------------------------------------
# The GPU acceptance kernels, run in the simulator
# --------------------------------------------------------------------------


def run_case(case: tma_kernels.Case, target: str = "sm_90a"):
    ptx, meta = build(case.source(), target)
    for desc in meta["kernels"][0]["tensormaps"]:
        check_tensormap(desc, None)  # what the runtime checks before encoding it on the GPU
    args = case.inputs()
    want = case.expected(args["A"], args["B"])
    tma_ptx_sim.run(ptx, meta, args)
    return args["B"], want


@pytest.mark.parametrize("case", tma_kernels.grid_cases(), ids=lambda c: c.name)
def test_gpu_grid_case_in_the_simulator(case):
    got, want = run_case(case)
    assert tma_kernels.same_bits(got, want)
    assert tma_kernels.same_bits(want, want) and not tma_kernels.same_bits(case.poisoned(), want)


@pytest.mark.parametrize("case", tma_kernels.grid_cases()[::7], ids=lambda c: c.name)
def test_gpu_grid_case_assembles_for_blackwell(case):
    ptx, _ = build(case.source(), "sm_100a")
    assert all(".cta_group::1" in line for line in tma_lines(ptx) if "shared::cluster" in line)


@settings(max_examples=12, deadline=None)
@given(
    dtype=st.sampled_from(["u8", "f16", "f32"]),
    mode=st.sampled_from([None, 0, 1, 2, 3]),
    rows=st.sampled_from([8, 16, 24]),
    atoms=st.integers(1, 2),
    grid=st.tuples(st.integers(1, 3), st.integers(1, 2)),
    offset=st.tuples(st.integers(0, 5), st.integers(0, 2)),
    direction=st.sampled_from(["load", "store", "both"]),
    stages=st.integers(1, 3),
)
def test_random_tiles_round_trip_in_the_simulator(dtype, mode, rows, atoms, grid, offset, direction, stages):
    eb = {"u8": 1, "f16": 2, "f32": 4}[dtype]
    width = {None: 16, 0: 16, 1: 32, 2: 64, 3: 128}[mode] // eb
    cols = atoms * width
    tile = (rows, cols)
    start = (offset[0], offset[1] * width)  # column starts on whole atoms keep boxes 16-byte aligned
    shape = (start[0] + grid[0] * rows + 3, start[1] + grid[1] * cols + width)
    case = tma_kernels.Case("random", dtype, shape, shape, tile, grid, start, direction, mode, stages=stages)
    got, want = run_case(case)
    assert tma_kernels.same_bits(got, want)


# --------------------------------------------------------------------------
# The streaming copy (examples/tma_stream_copy.tile, bench/tma_copy.py)
# --------------------------------------------------------------------------

STREAM = (EXAMPLES / "tma_stream_copy.tile").read_text()


@pytest.mark.parametrize("target", TARGETS)
def test_stream_copy_assembles_at_bench_sizes(target):
    for rows in (32768, 131072):
        ptx, meta = build(STREAM, target, {"M": rows, "N": 4096, "NUM_CTAS": 132})
        (k,) = meta["kernels"]
        assert k["grid"] == [132, 1, 1] and k["dynamic_smem"] >= 4 * 128 * 128 * 2
        assert [t["box"] for t in k["tensormaps"]] == [[128, 128], [128, 128]]
        assert len(tma_lines(ptx)) == 2


@pytest.mark.parametrize("ctas, stages, ahead", [(3, 4, 2), (40, 3, 1), (5, 2, 0)])
def test_stream_copy_in_the_simulator(ctas, stages, ahead):
    """More CTAs than tiles, fewer, and tile counts that do not divide."""
    defines = {"M": 512, "N": 512, "BM": 64, "BN": 128, "NUM_CTAS": ctas, "STAGES": stages, "AHEAD": ahead}
    ptx, meta = build(STREAM, defines=defines)
    rng = np.random.default_rng(ctas)
    a = rng.standard_normal((512, 512)).astype(np.float16)
    b = np.full_like(a, np.nan)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------
# Run-time starts at the tensor's edge (issue 18, item 1)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", tma_kernels.edge_cases(), ids=lambda c: c.name)
def test_run_time_starts_at_the_edge_in_the_simulator(case):
    """The issue's kernel and its relatives: a run-time start on a tile as
    long as its dim moves the tile from there (clipped), it is not dropped.
    A few starts per case here (the GPU test takes them all)."""
    ptx, meta = build(case.source())
    starts = case.starts()
    for r, c in [starts[1], starts[len(starts) // 2], starts[-1]]:
        args = case.inputs(seed=r + c)
        want_g, want_t = case.expected(args["G"], args["T"], r, c)
        tma_ptx_sim.run(ptx, meta, {**args, "r": r, "c": c})
        assert tma_kernels.same_bits(args["G"], want_g) and tma_kernels.same_bits(args["T"], want_t), (r, c)


def test_constant_region_past_the_edge_through_a_const():
    """A[120:136, 0:64] of 128 rows (here through a const): TMA fills the 8
    rows past the edge on a load and skips them on a store."""
    text = """
const ROW = 120
kernel k(A: f16[128, 64], B: f16[16, 64]):
    cta_id([1]); tid = thread_id([32])
    dyn = alloc([2056], u8, scope="shared.dyn")
    sm = decl_buffer((16, 64), f16, data=dyn, elem_offset=0, layout=tma_shared_layout(f16, 3, (16, 64)))
    bar = decl_buffer([1], u64, data=dyn, elem_offset=256)
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.proxy_async("shared::cta"); cuda.cta_sync()
    if tid == 0:
        copy_async(sm[0:16, 0:64], A[ROW : ROW + 16, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 2048)
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
    cuda.cta_sync()
    cta.copy(B[:, :], sm[:, :])
"""
    ptx, meta = build(text)
    a = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float16)
    b = np.full((16, 64), np.nan, np.float16)
    tma_ptx_sim.run(ptx, meta, {"A": a, "B": b})
    np.testing.assert_array_equal(b[:8], a[120:])
    assert not b[8:].any()


def test_region_past_the_edge_is_refused_where_memory_would_be_touched():
    """The same region through a plain copy really reads past the tensor."""
    text = """
kernel k(A: f16[128, 64], B: f16[16, 64]):
    cta_id([1]); tid = thread_id([32])
    cta.copy(B[:, :], A[120:136, 0:64])
"""
    with pytest.raises(TilecError, match="slice 120:136 is out of bounds for dimension 0 of 'A'"):
        build(text)

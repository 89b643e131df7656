"""emit-ptx on whole kernels: the examples, arithmetic, control flow, casts,
register arrays, swizzled shared memory and vector accesses.  Every PTX is
assembled (warnings fail) and, where it matters what it computes, run in
the PTX simulator."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from emit_util import build, lower, run, zeros
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import apply
from tilec.compiler.layout_ir import to_layout
from tilec.compiler.passmanager import PassContext
from tilec.compiler.targets import TARGETS
from tilec.grammar.parser import parse
from tilec.passes.emit_ptx import EmitPTX

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()


# --------------------------------------------------------------------------
# The examples
# --------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
def test_elementwise_add_assembles_for_every_target(target):
    ptx, meta = build(example("elementwise_add.tile"), target)
    assert f".target {target}" in ptx
    assert meta["target"] == target


def test_elementwise_add_computes_the_sum():
    a = np.arange(1024, dtype=np.float32) * 0.25
    b = np.full(1024, -3.5, np.float32)
    c = np.zeros(1024, np.float32)
    run(example("elementwise_add.tile"), {"A": a, "B": b, "C": c}, defines={"N": 1024})
    np.testing.assert_array_equal(c, a + b)


def test_elementwise_add_metadata():
    _, meta = build(example("elementwise_add.tile"), defines={"N": 2048})
    (k,) = meta["kernels"]
    assert meta["tilec_version"] and meta["target"] == "sm_90a"
    assert k["name"] == k["entry"] == "elementwise_add"
    assert k["params"] == [
        {"name": n, "kind": "buffer", "dtype": "f32", "shape": [2048]} for n in "ABC"
    ]
    assert (k["grid"], k["block"], k["cluster"]) == ([8, 1, 1], [256, 1, 1], [1, 1, 1])
    assert k["dynamic_smem"] == 0 and k["tensormaps"] == []


def test_tile_copy_round_trips_through_swizzled_shared_memory():
    a = np.random.default_rng(1).standard_normal((128, 192)).astype(np.float16)
    b = np.zeros_like(a)
    ptx = run(example("tile_copy_sync.tile"), {"A": a, "B": b}, defines={"M": 128, "N": 192})
    np.testing.assert_array_equal(a, b)
    assert "ld.global.v4.b32" in ptx and "st.shared.v4.b32" in ptx
    assert "ld.shared.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert "bar.sync 0;" in ptx


def test_tile_copy_is_wrong_without_its_barrier():
    """The simulator honours barriers: without cta_sync a thread reads
    chunks that others have not stored yet."""
    text = example("tile_copy_sync.tile").replace("    cuda.cta_sync()\n", "")
    a = np.ones((64, 64), np.float16)
    b = np.zeros_like(a)
    run(text, {"A": a, "B": b}, defines={"M": 64, "N": 64})
    assert not np.array_equal(a, b)


# --------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------

ARITH = """
kernel arith(D: i32[16], U: u32[4], L: i64[2], a: i32, b: i32, u: u32):
    cta_id([1])
    thread_id([1])
    D[0] = a // b
    D[1] = a % b
    D[2] = a // 8
    D[3] = a % 8
    D[4] = a // -3
    D[5] = a % -3
    D[6] = (a << 3) >> 2
    D[7] = a & b | a ^ 5
    D[8] = min(a, b) - max(a, 7)
    D[9] = -a if a < b else ~b
    D[10] = 1 if a == b or a >= 3 else 0
    D[11] = 1 if not (a != b) and b > 0 else 0
    D[12] = a * b + 123456
    U[0] = u * 3 + 5
    U[1] = u // 10
    U[2] = u >> 4
    U[3] = u % 7
    big: i64 = a
    L[0] = big * 100000 + b
    L[1] = big // 1000
"""


def _c(v, bits, signed=True):
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


@settings(max_examples=40, deadline=None)
@given(
    a=st.integers(-(2**20), 2**20),
    b=st.integers(-1000, 1000).filter(lambda x: x != 0),
    u=st.integers(0, 2**32 - 1),
)
def test_integer_arithmetic_follows_python(a, b, u):
    d, us, ls = zeros(16), np.zeros(4, np.uint32), np.zeros(2, np.int64)
    run(ARITH, {"D": d, "U": us, "L": ls, "a": a, "b": b, "u": u})
    expect = [
        a // b, a % b, a // 8, a % 8, a // -3, a % -3, _c(a << 3, 32) >> 2, (a & b) | (a ^ 5),
        min(a, b) - max(a, 7), -a if a < b else ~b, int(a == b or a >= 3),
        int(a == b and b > 0), _c(a * b + 123456, 32),
    ]
    assert list(d[:13]) == expect
    assert list(us) == [(u * 3 + 5) % 2**32, u // 10, u >> 4, u % 7]
    assert list(ls) == [a * 100000 + b, a // 1000]


def test_narrow_integers_widen_when_read_and_truncate_when_stored():
    d, b = zeros(4), np.array([-100, 7, 0, 0], np.int8)
    run("""
kernel narrow(D: i32[4], B: i8[4], c: i8, h: f16):
    thread_id([1])
    D[0] = c * 1000
    D[1] = B[0] * B[1]
    B[2] = B[0] * 3
    D[2] = convert(h * 2.0, i32)
""", {"D": d, "B": b, "c": -3, "h": 1.25})
    assert list(d[:3]) == [-3000, -700, 2]
    assert b[2] == np.int8(-300 % 256 - 256)


def test_literal_takes_the_other_operands_type():
    ptx, _ = build("""
kernel k(U: u64[1], x: u64):
    U[0] = x * 3 + 4294967296
""")
    assert "mul.lo.u64" in ptx and "4294967296" in ptx


# --------------------------------------------------------------------------
# Control flow
# --------------------------------------------------------------------------

FLOW = """
kernel flow(D: i32[8], A: f32[4], n: i32):
    cta_id([1])
    thread_id([1])
    total: i32 = 0
    for i in range(2, n, 3):
        total += i
    D[0] = total
    down: i32 = 0
    for i in range(n, 0, -2):
        down = down * 2 + i
    D[1] = down
    k: i32 = 0
    while k < 4 and A[k] > 0.0:
        k += 1
    D[2] = k
    if n < 5:
        D[3] = 1
    elif n < 10:
        D[3] = 2
    else:
        D[3] = 3
    a: i32 = n
    b: i32 = 7
    a, b = b, a
    D[4] = a * 100 + b
    steps: i32 = 0
    x: i32 = n
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    D[5] = steps
"""


def _collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


@pytest.mark.parametrize("n", [1, 4, 7, 12, 27])
def test_loops_branches_and_tuple_assignment(n):
    d = zeros(8)
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)  # all positive: the guard must stop k at 4
    run(FLOW, {"D": d, "A": a, "n": n})
    down = 0
    for i in range(n, 0, -2):
        down = down * 2 + i
    assert list(d[:6]) == [sum(range(2, n, 3)), down, 4, 1 if n < 5 else 2 if n < 10 else 3, 700 + n, _collatz(n)]


def test_range_loop_needs_a_constant_step():
    with pytest.raises(TilecError) as err:
        build("""
kernel k(D: i32[1], s: i32):
    for i in range(0, 10, s):
        D[0] = i
""")
    assert err.value.span.line == 3


# --------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------

CASTS = """
kernel casts(H: f16[4], HB: bf16[2], I: i32[8], F: f32[4], P: u32[2], x: f32, y: f32):
    cta_id([1])
    thread_id([1])
    H[0] = convert(x, f16)
    H[1] = convert(x, f16, rounding="rz")
    H[2] = convert(x, f16, rounding="rm")
    H[3] = convert(x, f16, rounding="rp")
    HB[0] = convert(x, bf16)
    HB[1] = convert(x, bf16, rounding="rz")
    I[0] = convert(y, i32)
    I[1] = convert(y, i32, rounding="rn")
    I[2] = convert(y, i32, rounding="rm")
    I[3] = convert(y, i32, rounding="rp")
    h = convert(x, f16)
    F[0] = h
    F[1] = convert(I[2], f32) + h
    F[2] = convert(convert(x, bf16), f32)
    P[0] = pack_f16x2(x, y)
    P[1] = pack_bf16x2(x, y, rounding="rz")
"""

ULP = 2.0**-10  # f16 spacing just above 1


def _bits(v, dtype):
    return int(np.array(v, dtype).view(np.uint16))


UP, ONE = 1 + ULP, 1.0
ROUNDINGS = [  # x, then f32 -> f16 with rn, rz, rm, rp
    (1 + 0.7 * ULP, UP, ONE, ONE, UP),
    (-(1 + 0.7 * ULP), -UP, -ONE, -UP, -ONE),
    (1 + 0.25 * ULP, ONE, ONE, ONE, UP),
    (3.0, 3.0, 3.0, 3.0, 3.0),
]


@pytest.mark.parametrize("x, rn, rz, rm, rp", ROUNDINGS)
def test_float_conversions_round_as_asked(x, rn, rz, rm, rp):
    h, hb, i = np.zeros(4, np.float16), np.zeros(2, np.uint16), zeros(8)
    f, p = np.zeros(4, np.float32), np.zeros(2, np.uint32)
    run(CASTS, {"H": h, "HB": hb, "I": i, "F": f, "P": p, "x": x, "y": -2.5})
    assert list(h) == [rn, rz, rm, rp]
    assert list(i[:4]) == [-2, -2, -3, -2]  # -2.5 with rz (default), rn, rm, rp
    assert f[0] == rn and f[1] == np.float32(-3.0) + np.float32(rn)
    x32 = int(np.float32(x).view(np.uint32))
    assert hb[1] == x32 >> 16  # bf16 toward zero truncates
    assert p[0] == _bits(np.float16(-2.5), np.float16) << 16 | _bits(np.float16(rn), np.float16)
    assert p[1] == 0xC020 << 16 | x32 >> 16  # pack_bf16x2(x, -2.5) toward zero


def test_exact_conversion_takes_no_rounding():
    with pytest.raises(TilecError, match="exact"):
        build("""
kernel k(D: f32[1], x: f16):
    D[0] = convert(x, f32, rounding="rz")
""")


def test_narrowing_store_needs_convert():
    with pytest.raises(TilecError, match="convert") as err:
        build("""
kernel k(D: f16[1], x: f32):
    D[0] = x
""")
    assert err.value.span.line == 3


# --------------------------------------------------------------------------
# Register arrays
# --------------------------------------------------------------------------


def test_register_array_with_constant_indices_stays_in_registers():
    ptx = run("""
kernel regs(D: f32[4], A: f32[4]):
    cta_id([1])
    thread_id([1])
    acc = alloc_local((2, 2), f32)
    acc[0, 0] = A[0]
    acc[0, 1] = A[1]
    acc[1, 0] = acc[0, 0] * acc[0, 1]
    acc[1, 1] = acc[1, 0] + A[3]
    D[0] = acc[1, 1]
    D[1] = acc[1, 0]
""", {"D": (d := np.zeros(4, np.float32)), "A": np.array([2, 3, 5, 7], np.float32)})
    assert list(d[:2]) == [13.0, 6.0]
    assert ".local" not in ptx and "ld.local" not in ptx


def test_register_array_indexed_at_run_time_lives_in_local_memory():
    ptx = run("""
kernel regs(D: i32[8], n: i32):
    cta_id([1])
    thread_id([1])
    buf = alloc_local((8,), i32)
    for i in range(8):
        buf[i] = i * n
    D[0] = buf[3] + buf[7]
""", {"D": (d := zeros(8)), "n": 5})
    assert d[0] == 50
    assert ".local .align" in ptx and "st.local.s32" in ptx


FRAGMENT = """
kernel frag(OUT: i32[32, 4]):
    cta_id([1])
    warp_id([1])
    lane = lane_id([32])
    D_f = alloc_local((16, 8), i32, layout=S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)])
    D_reg = D_f.local(4)
    D_reg[0] = 0
    D_reg[1] = 1
    D_reg[2] = 2
    D_reg[3] = 3
    for s in range(4):
        OUT[lane, s] = D_f[lane // 4 + 8 * (s // 2), 2 * (lane % 4) + s % 2]
"""


def test_fragment_elements_map_to_the_lanes_registers():
    """Seed 001's accumulator fragment: lane l holds rows l/4 and l/4 + 8,
    columns 2(l%4) and 2(l%4)+1, in registers 0-3 (rM major)."""
    out = np.full((32, 4), -1, np.int32)
    run(FRAGMENT, {"OUT": out})
    assert (out == np.arange(4)).all()


def test_local_view_must_fit_the_storage():
    with pytest.raises(TilecError, match="storage elements"):
        build("""
kernel k(D: f32[1]):
    r = alloc_local((4,), f32)
    v = r.view(8, layout=S[8 : 1])
    D[0] = v[0]
""")


# --------------------------------------------------------------------------
# Shared memory and swizzles
# --------------------------------------------------------------------------

SWZ_LAYOUT = "SW[3, 3, 3] * S[(8, 64) : (64, 1)]"

SWIZZLED = f"""
kernel swz(OUT: u16[512]):
    cta_id([1])
    tx = thread_id([128])
    tile = alloc((8, 64), u16, scope="shared", layout={SWZ_LAYOUT}, align=1024)
    raw = decl_buffer((512,), u16, data=tile)
    for k in range(4):
        e = k * 128 + tx
        tile[e // 64, e % 64] = e
    cuda.cta_sync()
    for k in range(4):
        OUT[k * 128 + tx] = raw[k * 128 + tx]
"""


def test_swizzled_shared_layout_places_elements_by_the_xor():
    out = np.zeros(512, np.uint16)
    run(SWIZZLED, {"OUT": out})
    layout = to_layout(lower(SWIZZLED).kernels[0].body[2].value.kwargs[1].value)
    expect = np.zeros(512, np.uint16)
    for r in range(8):
        for c in range(64):
            expect[apply(layout, (r, c), (8, 64))["m"]] = r * 64 + c
    np.testing.assert_array_equal(out, expect)
    assert not np.array_equal(out, np.arange(512))  # the swizzle moved something


@settings(max_examples=10, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 63)), min_size=1, max_size=6, unique=True))
def test_constant_swizzled_indices_fold_to_the_layouts_offset(cells):
    stores = "\n".join(f"    tile[{r}, {c}] = {i + 1}" for i, (r, c) in enumerate(cells))
    text = f"""
kernel swz(OUT: u16[512]):
    cta_id([1])
    thread_id([1])
    tile = alloc((8, 64), u16, scope="shared", layout={SWZ_LAYOUT}, align=1024)
    raw = decl_buffer((512,), u16, data=tile)
{stores}
    for i in range(512):
        OUT[i] = raw[i]
"""
    out = np.zeros(512, np.uint16)
    ptx = run(text, {"OUT": out})
    layout = to_layout(lower(text).kernels[0].body[2].value.kwargs[1].value)
    for i, (r, c) in enumerate(cells):
        assert out[apply(layout, (r, c), (8, 64))["m"]] == i + 1
    assert "xor.b32" not in ptx.split("$L")[0]  # constant addresses: no run-time swizzle before the loop


def test_dynamic_shared_pool_addresses():
    text = """
kernel pool(D: i32[4]):
    cta_id([1])
    thread_id([1])
    pool = smem_pool()
    a = pool.alloc((1,), u32)
    bar = pool.alloc((2,), u64, align=8)
    pool.move_base_to(1024)
    b = pool.alloc((64,), f16)
    pool.commit()
    b[3] = convert(2.5, f16)
    D[0] = address_of(b[3]) - address_of(a)
    D[1] = bar.ptr_to([1]) - address_of(a)
    D[2] = convert(b[3], i32)
"""
    d = zeros(4)
    ptx = run(text, {"D": d})
    assert list(d[:3]) == [1030, 16, 2]
    assert build(text)[1]["kernels"][0]["dynamic_smem"] == 1024 + 128
    assert ".extern .shared .align 1024 .b8 $dynamic_smem[];" in ptx


# --------------------------------------------------------------------------
# Vector accesses
# --------------------------------------------------------------------------


def test_vector_copy_between_global_and_registers():
    ptx = run("""
kernel vec(A: f16[64], B: f16[64]):
    cta_id([1])
    tx = thread_id([8])
    r = alloc_local((8,), f16)
    copy_vec(r[0], A[tx * 8], 8)
    r[7] = convert(convert(r[7], f32) + 1.0, f16)
    copy_vec(B[tx * 8], r[0], 8)
""", {"A": (a := np.arange(64).astype(np.float16)), "B": (b := np.zeros(64, np.float16))})
    expect = a.copy()
    expect[7::8] += 1
    np.testing.assert_array_equal(b, expect)
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx and ".local" not in ptx


@pytest.mark.parametrize("index, why", [
    ("tx * 4", "not provably a multiple of 8"),
    ("tx * 8 + 2", "not provably a multiple of 8"),
])
def test_vector_copy_needs_provable_alignment(index, why):
    with pytest.raises(TilecError, match=why) as err:
        build(f"""
kernel vec(A: f16[64], B: f16[64]):
    tx = thread_id([8])
    copy_vec(B[{index}], A[tx * 8], 8)
""")
    assert err.value.span.line == 4


def test_vector_copy_needs_contiguous_elements():
    with pytest.raises(TilecError, match="contiguous"):
        build("""
kernel vec(A: f32[8, 8] layout S[(8, 8) : (1, 8)], B: f32[8, 8]):
    tx = thread_id([8])
    copy_vec(B[tx, 0], A[tx, 0], 4)
""")


# --------------------------------------------------------------------------
# Parameters, metadata, the pass
# --------------------------------------------------------------------------

TMAP = """
kernel tm(A: f16[64, 64], D: u64[1], n: i32, s: f16):
    tensormap A_tmap0 = tensormap(A, f16, dims=(64, 64), strides=(128,), box=(64, 8), elem_strides=(1, 1), interleave="none", swizzle="128B", l2_promotion="128B", oob_fill="zero")
    cta_id([1])
    thread_id([1])
    p: u64 = address_of(A_tmap0)
    D[0] = p
"""


def test_tensor_map_parameter_and_metadata():
    ptx, meta = build(TMAP)
    assert ".param .align 64 .b8 A_tmap0[128]" in ptx and "cvta.param.u64" in ptx
    (k,) = meta["kernels"]
    assert [p["name"] for p in k["params"]] == ["A", "D", "n", "s", "A_tmap0"]
    assert k["params"][4] == {"name": "A_tmap0", "kind": "tensormap", "tensor": "A"}
    assert k["params"][3] == {"name": "s", "kind": "scalar", "dtype": "f16"}
    (entry,) = k["tensormaps"]
    assert entry == {
        "name": "A_tmap0", "tensor": "A", "dtype": "f16", "rank": 2, "dims": [64, 64], "strides": [128],
        "box": [64, 8], "elem_strides": [1, 1], "interleave": "none", "swizzle": "128B",
        "l2_promotion": "128B", "oob_fill": "zero",
    }
    params = ptx[ptx.index("(") : ptx.index(")")]
    assert params.index("A_tmap0") > params.index(".param .b16 s")


def test_cluster_launch_metadata_and_directive():
    ptx, meta = build("""
kernel cl(D: i32[16]):
    bx = cta_id([8])
    cx = cta_id_in_cluster([2])
    grp = warpgroup_id([2])
    lane = lane_id([32])
    wid = warp_id_in_wg([4])
    D[bx * 2 + cx] = grp * 1000 + wid * 32 + lane
""")
    k = meta["kernels"][0]
    assert (k["grid"], k["block"], k["cluster"]) == ([8, 1, 1], [256, 1, 1], [2, 1, 1])
    assert ".reqnctapercluster 2, 1, 1" in ptx and "%cluster_ctarank" in ptx and ".reqntid 256, 1, 1" in ptx


def test_thread_ids_derive_from_tid():
    out = np.zeros((256, 4), np.int32)
    run("""
kernel ids(OUT: i32[256, 4]):
    cta_id([1])
    grp = warpgroup_id([2])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    t = grp * 128 + wid * 32 + lane
    OUT[t, 0] = grp
    OUT[t, 1] = wid
    OUT[t, 2] = lane
""", {"OUT": out})
    t = np.arange(256)
    np.testing.assert_array_equal(out[:, :3], np.stack([t // 128, t // 32 % 4, t % 32], 1))


def test_two_kernels_share_one_module():
    ptx, meta = build("""
kernel first(D: f32[4]):
    b = alloc((4,), f32, scope="shared.dyn")
    D[0] = b[0]

kernel second(D: f32[4]):
    c = alloc((8,), f32, scope="shared.dyn")
    D[1] = c[1]
""")
    assert [k["name"] for k in meta["kernels"]] == ["first", "second"]
    assert [k["dynamic_smem"] for k in meta["kernels"]] == [16, 32]
    assert ptx.count(".extern .shared") == 1 and ptx.count(".entry") == 2


def test_pass_writes_artifacts_and_keeps_the_module():
    module = lower(example("elementwise_add.tile"))
    ctx = PassContext(target=TARGETS["sm_100a"])
    assert EmitPTX().apply(module, ctx) is module
    assert ".target sm_100a" in ctx.artifacts["ptx"]
    assert ctx.artifacts["meta"]["kernels"][0]["name"] == "elementwise_add"
    assert EmitPTX.name == "emit-ptx"


@pytest.mark.parametrize("body, message, line", [
    ("    copy(D[0:4], D[0:4])\n", "must be dispatched", 3),
    ("    for i in unroll(4):\n        D[i] = 0.0\n", "unroll loops", 3),
    ("    meta m = 3\n", "meta values", 3),
])
def test_unlowered_constructs_are_located_errors(body, message, line):
    module = parse("kernel k(D: f32[4]):\n    thread_id([4])\n" + body, "test.tile")
    with pytest.raises(TilecError, match=message) as err:
        EmitPTX().apply(module, PassContext(target=TARGETS["sm_90a"]))
    assert err.value.span.line == line


SELECTS = """
kernel k(A: f32[4], B: f32[4], n: i32):
    cta_id([1])
    t = thread_id([4])
    r = alloc_local((2,), f32)
    r[0] = A[t]
    r[1] = A[t] * 2.0
    B[t] = SELECT
"""


@pytest.mark.parametrize("select, branches", [
    ("r[0] if t < n else r[1]", False),    # registers: selp, no branch
    ("A[t] if t < n else 0.0", True),      # a load: only where the condition holds
])
def test_a_select_branches_only_around_what_may_fault(select, branches):
    """A select evaluates both sides when neither reads memory nor calls
    anything; a register array's element at a constant index is a
    register, which does neither.  A global element read stays behind a
    branch (it may lie outside the array where the condition is False)."""
    ptx, _ = build(SELECTS.replace("SELECT", select))
    assert (" bra " in ptx) == branches   # the kernel has no other branch
    assert ("selp.f32" in ptx) == (not branches)
    a, b = np.arange(4, dtype=np.float32) + 1, zeros(4, np.float32)
    run(SELECTS.replace("SELECT", select), {"A": a, "B": b, "n": 2})
    expected = np.where(np.arange(4) < 2, a, 2 * a if "r[1]" in select else 0)
    np.testing.assert_array_equal(b, expected)

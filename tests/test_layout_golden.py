"""Golden tests: the layouts of the seeds against the hardware's own tables.

The mma.sync fragments are checked element by element against the PTX ISA's
m16n8k16 / m16n8k8 fragment figures (groupID = lane >> 2, threadID_in_group =
lane % 4) and, register by register, against the order seed 001 stages them in; the shared layouts against a brute-force model of the swizzled
byte address written from the hardware's definition (bits 4.. of the byte
address XORed with bits 7..)."""
import itertools
from pathlib import Path

import numpy as np
import pytest

from tilec.compiler.dtypes import dtype
from tilec.compiler.layout import (
    LayoutError,
    apply,
    canonicalize,
    cosize,
    make,
    pack,
    size,
    span,
    split_thread_axes,
    storage,
    storage_size,
)
from tilec.compiler.layout_shape import group, permute_dims, slice_region, tile_to
from tilec.compiler.shared_layouts import atom_shape, mma_shared_layout, tma_shared_layout
from tilec.compiler.swizzle import Swizzle, hardware_swizzle, swizzle_mode

LANE = "laneid"
D_FRAG = make((2, 8, 4, 2), (2, (4, LANE), (1, LANE), 1))
A_FRAG_K8 = make((2, 8, 4, 2), (2, (4, LANE), (1, LANE), 1))
B_FRAG_K8 = make((4, 2, 8), ((1, LANE), 1, (4, LANE)))
A_FRAG = tile_to(A_FRAG_K8, (16, 16), (16, 8))
B_FRAG = tile_to(B_FRAG_K8, (16, 8), (8, 8))


def ptx_accumulator(lane, i):
    """m16n8k16 / m16n8k8 C and D: c0..c3 (row, col)."""
    g, t = lane >> 2, lane % 4
    return g + 8 * (i >= 2), t * 2 + (i & 1)


def ptx_a_k16(lane, i):
    """m16n8k16 A (16x16 f16): a0..a7."""
    g, t = lane >> 2, lane % 4
    return g + 8 * (i in (2, 3, 6, 7)), t * 2 + (i & 1) + 8 * (i >= 4)


def ptx_a_k8(lane, i):
    """m16n8k8 A (16x8 f16): a0..a3."""
    g, t = lane >> 2, lane % 4
    return g + 8 * (i >= 2), t * 2 + (i & 1)


def ptx_b_k16(lane, i):
    """m16n8k16 B (16x8 f16, k by n): b0..b3."""
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + 8 * (i >= 2), g


def ptx_b_k8(lane, i):
    """m16n8k8 B (8x8 f16): b0, b1."""
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1), g


def _staged(lane, s, operand):
    """The element seed 001's staging loops put in `local(n)[s]` of `lane`."""
    g, t = lane // 4, lane % 4
    if operand == "A":  # the port's order (kHi, rM, kp); the seed's text decodes (rM, kHi, kp)
        kp, r_m, k_hi = s % 2, (s // 2) % 2, s // 4
        return g + 8 * r_m, 2 * t + kp + 8 * k_hi
    if operand == "B":
        kp, k_hi = s % 2, s // 2
        return 2 * t + kp + 8 * k_hi, g
    r_n, r_m = s % 2, s // 2
    return g + 8 * r_m, 2 * t + r_n


def _held(layout, shape):
    """{(lane, register): (row, col)}, checking every element is held once."""
    held = {}
    for row, col in itertools.product(range(shape[0]), range(shape[1])):
        where = apply(layout, (row, col), shape)
        held[where["laneid"], where["m"]] = (row, col)
    assert len(held) == shape[0] * shape[1]
    return held


@pytest.mark.parametrize("layout, shape, regs, operand", [
    (A_FRAG, (16, 16), 8, "A"), (B_FRAG, (16, 8), 4, "B"), (D_FRAG, (16, 8), 4, "D"),
])
def test_fragments_hold_what_the_seed_stages(layout, shape, regs, operand):
    """The seed 001 port stages register s of every lane with `_staged(lane, s)` and verifies
    D == A @ B: the tiled fragments put exactly that element in register s (for A: kp, rM,
    kHi = s % 2, s // 2 % 2, s // 4, so registers 2-3 hold row group 1's first k-half;
    docs/layout.md says why the seed's text decodes A's s the other way)."""
    assert storage_size(layout) == regs
    held = _held(layout, shape)
    for lane, s in itertools.product(range(32), range(regs)):
        assert held[lane, s] == _staged(lane, s, operand), (lane, s)


@pytest.mark.parametrize("layout, shape, regs, figure", [
    (D_FRAG, (16, 8), 4, ptx_accumulator),
    (A_FRAG_K8, (16, 8), 4, ptx_a_k8),
    (B_FRAG_K8, (8, 8), 2, ptx_b_k8),
    (A_FRAG, (16, 16), 8, ptx_a_k16),
    (B_FRAG, (16, 8), 4, ptx_b_k16),
])
def test_mma_fragments_match_the_ptx_figures(layout, shape, regs, figure):
    """The PTX figure's register i of lane l is register i of lane l (tile_to by the
    reference's definition numbers A's k16 fragment as the figure does), and every
    element of the tile is held once."""
    assert storage_size(layout) == regs
    held = _held(layout, shape)
    for lane, i in itertools.product(range(32), range(regs)):
        assert held[lane, i] == figure(lane, i), (lane, i)


LOCAL_DOC = "`b.local(n)[s]` is the element in register `s`"

LOCAL_KERNEL = """
target sm_80
kernel k(IN: f32[32, 8], OUT: f32[16, 16]):
    cta_id([1])
    lane = lane_id([32])
    A_f = alloc((16, 16), f32, scope="local", layout=LAYOUT)
    A_reg = A_f.local(8)
    for s in unroll(8):
        A_reg[s] = IN[lane, s]
    warp.copy(OUT, A_f)
"""


def test_local_view_counts_registers_as_the_docs_say():
    """Issues 13 and 18: `b.local(n)[s]` is register s, the storage layout's offset s (the
    reference's meaning), and docs/layout.md says so.  Run in the PTX simulator: lane l
    writes its input row into A_FRAG's registers through `.local(8)`, and `warp.copy`
    (which places each register by the layout) shows where slot s went.  A_FRAG's shard
    order differs from its register order, so counting in shard order would fail here."""
    from ptx_sim import Kernel
    from tilec.compiler.layout_ir import to_lit
    from tilec.compiler.printer import print_expr
    from tilec.pipeline import compile_source

    docs = (Path(__file__).resolve().parent.parent / "docs" / "layout.md").read_text()
    assert LOCAL_DOC in " ".join(docs.split()), "docs/layout.md no longer says what .local(n)[s] is"
    local = storage(A_FRAG)
    assert [apply(local, s)["m"] for s in range(8)] != list(range(8))  # the two orders differ
    r = compile_source(LOCAL_KERNEL.replace("LAYOUT", print_expr(to_lit(A_FRAG))), "local.tile")
    tags = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    out = np.full((16, 16), np.nan, np.float32)
    Kernel(r.ptx, "k").run({"IN": tags, "OUT": out})
    for row, col in itertools.product(range(16), range(16)):
        where = apply(A_FRAG, (row, col), (16, 16))
        assert out[row, col] == tags[where["laneid"], where["m"]], (row, col)


def test_fragment_tilings_and_b32_registers():
    """tile_to numbers A's registers (kHi, rM, kp) and B's (kHi, kp): each repeat above the
    atom's registers, as the PTX figures number them.  Packed to
    b32 pairs along k (B, k by n, transposed first so k is innermost), the k16 operands are
    4 (A) and 2 (B) registers and the k8 ones 2 and 1."""
    assert A_FRAG == make((2, 8, 2, 4, 2), (2, (4, LANE), 4, (1, LANE), 1))
    assert B_FRAG == make((2, 4, 2, 8), (2, (1, LANE), 1, (4, LANE)))
    b_nk = permute_dims(B_FRAG, (16, 8), (1, 0))
    b_nk_k8 = permute_dims(B_FRAG_K8, (8, 8), (1, 0))
    assert [storage_size(pack(f, 2)) for f in (A_FRAG, b_nk, A_FRAG_K8, b_nk_k8)] == [4, 2, 2, 1]
    with pytest.raises(LayoutError, match="innermost"):
        pack(B_FRAG, 2)  # n is innermost in k-by-n order
    assert str(canonicalize(D_FRAG)) == "S[(2, 32, 2) : (2, 1@laneid, 1)]"


def test_tmem_accumulator_layout_of_seed_000():
    """S[(128, 512) : (1@TLane, 1@TCol)]: row r column c at lane r column c; the gemm's
    tmem[0:128, 256:384] slice starts at column 256."""
    tmem = make((128, 512), ((1, "TLane"), (1, "TCol")))
    assert apply(tmem, (77, 300), (128, 512)) == {"m": 0, "TLane": 77, "TCol": 300}
    sub = slice_region(tmem, (128, 512), [(0, 128), (256, 128)])
    assert apply(sub, (5, 3), (128, 128)) == {"m": 0, "TLane": 5, "TCol": 259}
    assert cosize(tmem, "TLane") == 128 and cosize(tmem, "TCol") == 512


def test_tmem_warpx4_router_of_seed_002():
    """S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]: 32 lanes x 16 columns, broadcast to
    the four warps' lane quarters (0, 32, 64, 96)."""
    layout = make((32, 16), ((1, "TLane"), (1, "TCol")), replica=[(4, 32, "TLane")])
    assert str(layout) == "S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]"
    assert size(layout) == 512 and span(layout, "TLane") == 32 and cosize(layout, "TLane") == 128
    (router,) = canonicalize(layout).replica
    assert (router.extent, router.stride, router.axis) == (4, 32, "TLane")
    base = apply(layout, (7, 9), (32, 16))
    copies = {base["TLane"] + q * router.stride for q in range(router.extent)}
    assert copies == {7, 39, 71, 103} and base["TCol"] == 9


def test_warpgroup_register_view_of_seed_003():
    """S[(128, N) : (1@tid_in_wg, 1)]: row r is thread r of the warpgroup (lane r % 32 of
    warp r // 32), holding N registers."""
    layout = make((128, 64), ((1, "tid_in_wg"), 1))
    assert storage_size(layout) == 64
    assert apply(layout, (77, 5), (128, 64)) == {"m": 5, "laneid": 13, "wid_in_wg": 2}
    assert split_thread_axes(layout) == make((4, 32, 64), ((1, "wid_in_wg"), (1, LANE), 1))


def test_shared_layouts_of_the_brief():
    assert str(mma_shared_layout("f16", 3, (8, 256))) == "SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)]"
    three = mma_shared_layout("f16", 3, (3, 128, 64))
    g = group(three, (3, 128, 64))
    assert [tuple((it.extent, it.stride) for it in g.dim(d)) for d in range(3)] == [
        ((3, 8192),), ((128, 64),), ((64, 1),)]
    assert three.swizzle == Swizzle(3, 3, 3)
    assert tma_shared_layout("f16", 3, (3, 128, 64)) == three


def test_tma_plan_of_seed_004():
    """The 8x256 f16 128B tile is one rank-3 TMA box: smem order (64, 8, 4), and the global
    byte strides of those dims in the row-major 8x256 tensor are (2, 512, 128)."""
    smem = group(mma_shared_layout("f16", 3, (8, 256)), (8, 256))
    glob = group(make((4, 64), (64, 1)), (4, 64))  # dim 1 of the global tensor, cut like the smem
    rows, (chunks, inner) = smem.dim(0), smem.dim(1)
    by_smem_stride = sorted([(inner, 1), (rows[0], 256), (chunks, glob.dim(0)[0].stride)],
                            key=lambda pair: pair[0].stride)
    assert [it.extent for it, _ in by_smem_stride] == [64, 8, 4]
    assert [2 * g for _, g in by_smem_stride] == [2, 512, 128]
    assert swizzle_mode(smem.layout.swizzle, dtype("f16")) == 3


def model_byte_address(coord, shape, elem_bytes, mode):
    """The hardware's placement: atoms of 8 rows x W bytes, chunks of the last dim outermost
    in each (rows, cols) block, then the XOR of bits [4, 4 + mode) with bits [7, 7 + mode)."""
    width = 16 << mode
    *lead, r, c = coord
    *lead_shape, rows, cols = shape
    block = 0
    for i, e in zip(lead, lead_shape):
        block = block * e + i
    per_row = width // elem_bytes
    addr = block * rows * cols * elem_bytes + (c // per_row) * rows * width + r * width + (c % per_row) * elem_bytes
    return addr ^ (((addr >> 7) & ((1 << mode) - 1)) << 4)


@pytest.mark.parametrize("name", ["u8", "f16", "f32"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_mma_shared_layout_matches_the_swizzled_byte_address(name, mode):
    """Every element of a 2-D and a 3-D tile, in every mode and element size."""
    dt = dtype(name)
    _, per_row = atom_shape(dt, mode)
    assert per_row * dt.bytes == 16 << mode
    for shape in [(8, per_row), (16, 2 * per_row), (2, 8, 3 * per_row)]:
        layout = mma_shared_layout(dt, mode, shape)
        assert swizzle_mode(layout.swizzle, dt) == mode
        assert cosize(layout) == size(layout)
        for coord in itertools.product(*map(range, shape)):
            got = apply(layout, coord, shape)["m"] * dt.bytes
            assert got == model_byte_address(coord, shape, dt.bytes, mode), (shape, coord)


@pytest.mark.parametrize("args, why", [
    (("f16", 3, (8, 32)), "multiple of the 128-byte atom row, 64 elements"),
    (("f16", 1, (4, 16)), "multiple of 8"),
    (("f16", 4, (8, 64)), "swizzle mode must be"),
    (("f16", 0, (64,)), "two or more"),
    (("f99", 0, (8, 8)), "unknown dtype"),
])
def test_shared_layout_errors(args, why):
    with pytest.raises(Exception, match=why) as info:
        mma_shared_layout(*args)
    assert isinstance(info.value, LayoutError) or "dtype" in why


def test_hardware_swizzles():
    assert hardware_swizzle(dtype("f16"), 3) == Swizzle(3, 3, 3)
    assert hardware_swizzle(dtype("u8"), 1) == Swizzle(4, 1, 3)
    assert hardware_swizzle(dtype("f32"), 0) is None
    with pytest.raises(LayoutError, match="not a hardware swizzle"):
        swizzle_mode(Swizzle(3, 3, 3), dtype("f32"))

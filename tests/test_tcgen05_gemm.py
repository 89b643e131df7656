"""gemm_async -> tcgen05.mma on sm_100a.

Every case compiles a kernel through the whole pipeline and assembles it
(no ptxas warning), then checks the PTX instruction forms, decodes each
instruction descriptor and matrix descriptor from the PTX, and replays the
hardware's reads (`tcgen05_model`): for sampled elements of every
instruction tile, the shared byte the descriptor makes the tensor core read,
the tensor-memory lane and column the data path writes, and the scale
factors it reads must be where the buffers' layouts put those elements.
"""
from __future__ import annotations

import numpy as np
import pytest

from tcgen05_model import (
    assignments,
    atom_width,
    buffer_layouts,
    calls,
    canonical_lit,
    compile_tile,
    hw_smem_bytes,
    immediates,
    kwargs,
    plus,
    ptx_lines,
)
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import apply
from tilec.compiler.mma_desc import SmemDescriptor, Tcgen05InstrDesc
from tilec.compiler.printer import print_expr

MMA_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "e2m1": 64}
KIND = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4"}
SCALED_KIND = {"e4m3": "mxf8f6f4", "e5m2": "mxf8f6f4", "e2m1": "mxf4"}


def c_layout(M: int, N: int, cg: int) -> str:
    """The accumulator layout of the instruction's data path (PTX ISA layouts D/A, F, B)."""
    if cg == 1 and M == 64:
        return f"S[(4, 16, {N}) : (32@TLane, 1@TLane, 1@TCol)]"
    if cg == 2 and M == 64:
        return f"S[(64, 2, {N // 2}) : (1@TLane, 64@TLane, 1@TCol)]"
    return f"S[({M}, {N}) : (1@TLane, 1@TCol)]"


def sf_layout(rows: int, per: int, steps: int, packed: bool) -> str:
    """Scale factors rows x (per * steps): row r in lane r % 32 of every
    quarter, column r / 32; a step's `per` factors in consecutive bytes, and
    the steps either in the next bytes of the same column (`packed`) or in
    the next columns."""
    row_its = [(rows, "1@TLane")] if rows <= 32 else [(rows // 32, "4@TCol"), (32, "1@TLane")]
    cols = 4 * max(1, rows // 32)
    step = f"{per}@TCol" if packed else f"{cols}@TCol"
    its = row_its + [(steps, step), (per, "1@TCol")]
    its = [it for it in its if it[0] > 1]
    return f"S[({', '.join(str(e) for e, _ in its)}) : ({', '.join(s for _, s in its)})] + R[4 : 32@TLane]"


def auto_mode(dtype: str, major: str, mn: int, k: int) -> int:
    """The widest swizzle whose atom row fits the operand's contiguous extent."""
    extent = k if major == "K" else mn
    return next(m for m in (3, 2, 1, 0) if extent % atom_width(dtype, m) == 0)


def gemm_case(dtype="f16", M=128, N=128, K=64, cg=1, a_major="K", b_major="K", trans_a=False, trans_b=False,
              mode_a=None, mode_b=None, scaled=False, sf_packed=False, sf_shared=False, a_tmem=False, scope="thread",
              accum="k != 0", extra=""):
    """A kernel issuing one gemm_async (in a loop over k, accumulating
    from the second iteration) with the given operands."""
    bn = N // cg
    mode_a = auto_mode(dtype, a_major, M, K) if mode_a is None else mode_a
    mode_b = auto_mode(dtype, b_major, bn, K) if mode_b is None else mode_b
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (K, bn) if trans_b else (bn, K)
    lines = [
        "target sm_100a",
        "kernel g(out: f32[4]):",
        f"    cta_id([{cg}])",
    ]
    if cg == 2:
        lines.append("    cta_id_in_cluster([2])")
    lines += [
        "    wid = warp_id_in_wg([4])",
        "    lane = lane_id([32])",
        f"    B_smem = alloc({b_shape}, {dtype}, scope=\"shared\", "
        f"layout={canonical_lit(dtype, mode_b, bn, K, b_major, not trans_b)}, align=1024)",
        "    tmem_addr = alloc_shared([1], u32)",
        "    bar = alloc_shared([1], u64)",
        "    if wid == 0:",
        f"        ptx.tcgen05.alloc(address_of(tmem_addr), n_cols=512, cta_group={cg})",
        "    cuda.cta_sync()",
        f"    acc = decl_buffer(({M}, {N}), f32, scope=\"tmem\", allocated_addr=tmem_addr[0], "
        f"layout={c_layout(M, N, cg)})",
    ]
    if a_tmem:
        lines.append(f"    A_t = decl_buffer(({M}, {K}), {dtype}, scope=\"tmem\", allocated_addr=tmem_addr[0] + 256, "
                     f"layout=S[({M}, {K}) : (1@TLane, 1@TCol)])")
    else:
        lines.append(f"    A_smem = alloc({a_shape}, {dtype}, scope=\"shared\", "
                     f"layout={canonical_lit(dtype, mode_a, M, K, a_major, not trans_a)}, align=1024)")
    opts = f", cta_group={cg}"
    if trans_a:
        opts += ", transpose_A=True"
    if trans_b:
        opts += ", transpose_B=True"
    per = max(1, MMA_K[dtype] // 32)
    steps = max(1, K // MMA_K[dtype])
    sf_cols = 1 if sf_shared else steps
    if scaled:
        for n, rows, col in (("SFA", M, 384), ("SFB", bn, 448)):
            lines.append(f"    {n} = decl_buffer(({rows}, {per * sf_cols}), ue8m0, scope=\"tmem\", "
                         f"allocated_addr=tmem_addr[0] + {col}, layout={sf_layout(rows, per, sf_cols, sf_packed)})")
        opts += ", SFA=SFA[:, :], SFB=SFB[:, :]"
    a_arg = "A_t[:, :]" if a_tmem else "A_smem[:, :]"
    guard = {"thread": "wid == 0 and lane == 0", "warp": "wid == 0"}[scope]
    lines += [
        "    for k in range(2):",
        f"        if {guard}:",
        f"            gemm_async(acc[:, :], {a_arg}, B_smem[:, :], accum={accum}{opts}{extra})",
        "        if wid == 0 and lane == 0:",
        f"            ptx.tcgen05.commit(bar.ptr_to([0]), cta_group={cg})",
        "    cuda.cta_sync()",
        "    if wid == 0:",
        f"        ptx.tcgen05.dealloc(tmem_addr[0], n_cols=512, cta_group={cg})",
    ]
    return "\n".join(lines) + "\n"


RNG = np.random.default_rng(5)


def sample(shape, n=160):
    """Corners plus random elements of a 2-D tile."""
    pts = {(0, 0), (shape[0] - 1, shape[1] - 1), (shape[0] - 1, 0), (0, shape[1] - 1)}
    pts |= {(int(a), int(b)) for a, b in zip(RNG.integers(0, shape[0], n), RNG.integers(0, shape[1], n))}
    return sorted(pts)


def check_gemm(text: str, dtype="f16", M=128, N=128, K=64, cg=1, a_major="K", b_major="K", trans_a=False,
               trans_b=False, scaled=False, sf_shared=False, a_tmem=False, scope="thread", accum="k != 0", **_):
    module, ptx = compile_tile(text)
    layouts = buffer_layouts(text)
    bits = DTYPES[dtype].bits
    kind = (SCALED_KIND if scaled else KIND)[dtype]
    func = "ptx.tcgen05.mma.block_scale" if scaled else "ptx.tcgen05.mma"
    mmas = calls(module, func)
    step = 8 * cg
    n_mma = N if N <= 256 else next(w for w in range(256, step - 1, -step) if N % w == 0)
    k_steps = K // MMA_K[dtype]
    assert len(mmas) == (N // n_mma) * k_steps
    head = f"tcgen05.mma.cta_group::{cg}.kind::{kind}" + (".block_scale" if scaled else "") + " ["
    lines = ptx_lines(ptx, head)
    assert len(lines) == len(mmas)
    if scope == "warp":
        assert "elect.sync" in ptx
    # the descriptors, decoded from the PTX constants and from the IR arguments
    values = assignments(module)
    consts = [immediates(l)[0] for l in ptx_lines(ptx, "or.b64") if immediates(l)]
    descs = {}
    for name, v in values.items():
        if isinstance(v, ir.Call) and v.func == "ptx.tcgen05.encode_matrix_descriptor":
            ldo, sdo, swz = (a.value for a in v.args[1:])
            descs[name] = SmemDescriptor.from_intrinsic_args("tcgen05", ldo, sdo, swz)
            assert descs[name].encode() in consts
    for idx, (call, line) in enumerate(zip(mmas, lines)):
        nb, kk = divmod(idx, k_steps)
        n0, k0 = nb * n_mma, kk * MMA_K[dtype]
        kw = kwargs(call)
        idesc = Tcgen05InstrDesc.decode(kind, immediates(line)[0], cta_group=cg)
        assert (idesc.m, idesc.n, idesc.a_dtype, idesc.b_dtype) == (M * cg, n_mma, dtype, dtype)
        assert (idesc.a_major, idesc.b_major) == (a_major, b_major)
        if scaled:
            assert (idesc.sfa_id, idesc.sfb_id) == (kw.get("sfa_id", 0), kw.get("sfb_id", 0))
        enable = call.args[5 if scaled else 3]
        if kk:
            assert enable == ir.Bool(True)
        else:  # the caller's flag: a literal, or the bound `k != 0`
            assert enable == ir.Bool(accum == "True") if accum in ("True", "False") else \
                values[enable.id] == ir.Binary("!=", ir.Name("k"), ir.Int(0))
        # A and B: the bytes the tensor core reads are the tile's elements
        operands = [("B_smem", call.args[2], b_major, trans_b, (n0 // cg, k0), n_mma // cg)]
        if not a_tmem:
            operands.append(("A_smem", call.args[1], a_major, trans_a, (0, k0), M))
        for buf, arg, major, trans, (m0, kq), rows in operands:
            name, units = plus(arg)
            layout, shape = layouts[buf]
            for i, k in sample((rows, MMA_K[dtype])):
                coord = (kq + k, m0 + i) if trans else (m0 + i, kq + k)
                want = apply(layout, coord, shape)["m"] * bits // 8
                assert hw_smem_bytes(descs[name], units * 16, major, dtype, i, k) == want, (buf, idx, i, k)
        # D: where the data path writes row r, column c of the block
        d_units = plus(call.args[0])[1]
        lane0, col0 = d_units >> 16, d_units & 0xFFFF
        c_lay, c_shape = layouts["acc"]
        for r, c in sample((M, n_mma)):
            if cg == 1 and M == 64:
                lane, col = 32 * (r // 16) + r % 16, c
            elif cg == 2 and M == 64:
                lane, col = r + 64 * (c // (n_mma // 2)), c % (n_mma // 2)
            else:
                lane, col = r, c
            at = apply(c_lay, (r, n0 + c), c_shape)
            assert (at.get("TLane", 0), at.get("TCol", 0)) == (lane0 + lane, col0 + col), (idx, r, c)
        if a_tmem:
            a_units = plus(call.args[1])[1]
            a_lay, a_shape = layouts["A_t"]
            for r, k in sample((M, MMA_K[dtype])):
                at = apply(a_lay, (r, k0 + k), a_shape)
                assert at["TLane"] == (a_units >> 16) + r
                assert at["TCol"] * bits // 32 == (a_units & 0xFFFF) + k * bits // 32
        if scaled:
            per = MMA_K[dtype] // 32
            for buf, arg, sf_id, rows, row0 in (("SFA", call.args[3], kw.get("sfa_id", 0), M, 0),
                                                ("SFB", call.args[4], kw.get("sfb_id", 0), N // cg, n0 // cg)):
                units = plus(arg)[1]
                assert units >> 16 == 0
                lay, shape = layouts[buf]
                kc = 0 if sf_shared else kk * per
                for r in range(0, n_mma // cg if buf == "SFB" else rows, 7):
                    for j in range(per):
                        at = apply(lay, (row0 + r, kc + j), shape)
                        assert at["TLane"] == r % 32
                        assert at["TCol"] == 4 * ((units & 0xFFFF) + r // 32) + sf_id + j
    return module, ptx


# --------------------------------------------------------------------------
# The seed's program
# --------------------------------------------------------------------------


def test_seed_example_compiles_with_the_seed_descriptors():
    text = open("examples/gemm_async_tcgen05.tile").read()
    module, ptx = compile_tile(text)
    lines = ptx_lines(ptx, "tcgen05.mma.cta_group::1.kind::f16 [")
    assert len(lines) == 4  # K = 64 in steps of 16
    for line in lines:
        want = Tcgen05InstrDesc("f16", "f16", "f16", "f32", 128, 128)
        assert Tcgen05InstrDesc.decode("f16", immediates(line)[0]) == want
    encodes = calls(module, "ptx.tcgen05.encode_matrix_descriptor")
    assert [tuple(a.value for a in e.args[1:]) for e in encodes] == [(64, 64, 3), (64, 64, 3)]  # seed 000
    assert [e.args[0].obj.id for e in encodes] == ["A_smem", "B_smem"]
    expected = SmemDescriptor.from_intrinsic_args("tcgen05", 64, 64, 3).encode()
    assert [immediates(l)[0] for l in ptx_lines(ptx, "or.b64")].count(expected) == 2
    mmas = calls(module, "ptx.tcgen05.mma")
    # A is stage 1 (16 KiB in), B stage 2; each K step moves 32 bytes; D starts at column 256
    assert [plus(m.args[1])[1] for m in mmas] == [1024, 1026, 1028, 1030]
    assert [plus(m.args[2])[1] for m in mmas] == [2048, 2050, 2052, 2054]
    assert {plus(m.args[0])[1] for m in mmas} == {256}
    assert [m.args[3] for m in mmas] == [ir.Bool(False)] + [ir.Bool(True)] * 3


@pytest.mark.parametrize("name", ["hgemm_v4", "hgemm_v5", "hgemm_v6"])
def test_tutorial_kernels_assemble(name):
    module, ptx = compile_tile(open(f"examples/{name}.tile").read())
    assert len(ptx_lines(ptx, "tcgen05.mma.cta_group::1.kind::f16 [")) == 4
    assert len(ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x128.b32")) == 1
    # the accumulate flag of the first K step is the loop's `k != 0`, a predicate register
    first = [l for l in ptx_lines(ptx, "tcgen05.mma.") if not l.endswith(", 1;")]
    assert len(first) == 1 and first[0].split(", ")[-1].startswith("%p")


# --------------------------------------------------------------------------
# The grid: shapes, kinds, majors, swizzles, cta_group
# --------------------------------------------------------------------------

GRID = [
    # cta_group 1, f16/bf16, every N class, M 64 and 128
    dict(dtype="f16", M=128, N=8, K=16),
    dict(dtype="f16", M=128, N=24, K=32),
    dict(dtype="bf16", M=128, N=136, K=64),
    dict(dtype="f16", M=128, N=256, K=128),
    dict(dtype="f16", M=128, N=384, K=16),  # two 192-column instructions
    dict(dtype="bf16", M=64, N=64, K=64),
    dict(dtype="f16", M=64, N=256, K=32),
    dict(dtype="f16", M=64, N=40, K=16, mode_a=0, mode_b=0),
    # swizzle modes 0-3 on each operand
    dict(dtype="f16", M=128, N=64, K=64, mode_a=0, mode_b=1),
    dict(dtype="f16", M=128, N=64, K=64, mode_a=1, mode_b=2),
    dict(dtype="bf16", M=128, N=64, K=64, mode_a=2, mode_b=0),
    dict(dtype="f16", M=128, N=128, K=128, mode_a=3, mode_b=3),
    # MN-major operands, transposed and not
    dict(dtype="f16", M=128, N=128, K=64, a_major="MN", trans_a=True, b_major="MN", trans_b=True),
    dict(dtype="bf16", M=128, N=64, K=32, a_major="MN", b_major="MN"),
    dict(dtype="f16", M=64, N=128, K=64, a_major="K", trans_a=True, b_major="K", trans_b=True),
    dict(dtype="f16", M=128, N=256, K=32, a_major="MN", mode_a=2, b_major="MN", mode_b=1, trans_b=True),
    dict(dtype="f16", M=128, N=64, K=32, a_major="MN", mode_a=0, b_major="MN", mode_b=0),
    dict(dtype="e4m3", M=128, N=64, K=64, a_major="MN", b_major="MN", trans_a=True, trans_b=True),
    # tf32 and fp8 (kind::tf32, kind::f8f6f4)
    dict(dtype="tf32", M=128, N=64, K=32),
    dict(dtype="tf32", M=64, N=16, K=16, mode_a=0, mode_b=1),
    dict(dtype="e4m3", M=128, N=128, K=128),
    dict(dtype="e5m2", M=64, N=32, K=64, mode_a=2, mode_b=2),
    dict(dtype="e4m3", M=128, N=248, K=32, mode_a=0, mode_b=0),
    # block-scaled fp8 and fp4 (kind::mxf8f6f4, kind::mxf4)
    dict(dtype="e4m3", M=128, N=128, K=64, scaled=True),
    dict(dtype="e5m2", M=128, N=64, K=128, scaled=True, sf_packed=True),
    dict(dtype="e4m3", M=128, N=256, K=32, scaled=True, sf_shared=True),
    dict(dtype="e2m1", M=128, N=128, K=128, scaled=True),
    dict(dtype="e2m1", M=128, N=64, K=128, scaled=True, sf_packed=True, mode_a=2, mode_b=1),
    dict(dtype="e2m1", M=128, N=32, K=256, scaled=True, sf_shared=True, mode_a=0, mode_b=3),
    # cta_group 2: the pair's M 256 (layout A) and 128 (layout B)
    dict(dtype="f16", M=128, N=256, K=64, cg=2),
    dict(dtype="bf16", M=128, N=16, K=32, cg=2),
    dict(dtype="f16", M=64, N=128, K=32, cg=2),
    dict(dtype="f16", M=64, N=32, K=64, cg=2, mode_a=1, mode_b=0, b_major="MN", trans_b=True),
    dict(dtype="e4m3", M=128, N=512, K=32, cg=2),
    dict(dtype="tf32", M=128, N=48, K=16, cg=2),
    dict(dtype="e4m3", M=128, N=128, K=64, cg=2, scaled=True),
    dict(dtype="e2m1", M=64, N=256, K=64, cg=2, scaled=True),
    # A in tensor memory, warp scope, literal accumulate flags
    dict(dtype="f16", M=128, N=128, K=64, a_tmem=True),
    dict(dtype="bf16", M=128, N=64, K=32, a_tmem=True, cg=2),
    dict(dtype="f16", M=128, N=64, K=32, scope="warp"),
    dict(dtype="f16", M=128, N=64, K=32, accum="True"),
    dict(dtype="e4m3", M=128, N=32, K=64, accum="False"),
]


@pytest.mark.parametrize("case", GRID, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_grid(case):
    check_gemm(gemm_case(**case), **case)


def test_runtime_region_start_moves_the_descriptor():
    one = 'B_smem = alloc((128, 64), f16, scope="shared", layout=SW[3, 3, 3] * S[(128, 64) : (64, 1)], align=1024)'
    two = ('B_smem = alloc((2, 128, 64), f16, scope="shared", layout=SW[3, 3, 3] * S[(2, 128, 64) : (8192, 64, 1)], '
           'align=1024)')
    text = gemm_case(M=128, N=128, K=64)
    assert one in text
    module, ptx = compile_tile(text.replace(one, two).replace("B_smem[:, :]", "B_smem[k % 2, :, :]"))
    values = assignments(module)
    (desc_b,) = [v for v in values.values() if isinstance(v, ir.Binary) and isinstance(v.lhs, ir.Call)]
    # 128 x 64 f16 per stage = 16 KiB = 1024 units of 16 bytes, added once to the encoded descriptor
    assert desc_b.lhs.func == "ptx.tcgen05.encode_matrix_descriptor"
    assert print_expr(desc_b.rhs) == "k % 2 * 1024"
    assert len(ptx_lines(ptx, "tcgen05.mma.cta_group::1.kind::f16 [")) == 4


def test_runtime_start_needs_one_stride():
    text = gemm_case(M=128, N=128, K=64)
    with pytest.raises(TilecError, match="run-time start 'k % 2 \\* 32' of dim 1 needs that dim laid out with one"):
        compile_tile(text.replace("B_smem[:, :]", "B_smem[:, k % 2 * 32 : k % 2 * 32 + 64]").replace(
            "B_smem = alloc((128, 64)", "B_smem = alloc((128, 128)").replace(
            "S[(128, 64) : (64, 1)], align=1024)\n    tmem", "S[(128, 2, 64) : (64, 8192, 1)], align=1024)\n    tmem"))


# --------------------------------------------------------------------------
# Rejections: one per rule
# --------------------------------------------------------------------------

REJECT = [
    (dict(), lambda t: t.replace("if wid == 0 and lane == 0:\n            gemm_async",
                                 "if True:\n            gemm_async"), "unsupported exec_scope"),
    (dict(), lambda t: t.replace("acc[:, :], A_smem", "B_smem[:, :], A_smem"), "must be in tensor memory"),
    (dict(dtype="f16"), lambda t: t.replace("f32, scope=\"tmem\"", "f16, scope=\"tmem\""), "must be f32"),
    (dict(dtype="bf16"), lambda t: t.replace("B_smem = alloc((128, 64), bf16", "B_smem = alloc((128, 64), f16"),
     "kind::f16 needs A and B of one type"),
    (dict(dtype="f16", K=64), lambda t: t.replace("A_smem = alloc((128, 64), f16", "A_smem = alloc((128, 64), i8"),
     "one type family"),
    (dict(dtype="e2m1", K=128), None, "need block scale factors"),
    (dict(dtype="f16", scaled=True, K=32), None, "block scale factors apply to"),
    (dict(dtype="e4m3", scaled=True), lambda t: t.replace(", SFB=SFB[:, :]", ""), "needs both SFA= and SFB="),
    (dict(M=128, N=12, K=16), None, "multiple of 8"),
    (dict(M=128, N=24, K=16, cg=2), None, "multiple of 16 for cta_group 2"),
    (dict(M=128, N=64, K=64), lambda t: t.replace("acc[:, :], A_smem[:, :]", "acc[:, :], A_smem[:, 0:24]"),
     "shapes do not fit"),
    (dict(M=128, N=64, K=24, mode_a=0, mode_b=0), None, "must be a multiple of 16, the K of one kind::f16"),
    (dict(M=128, N=64, K=64, cg=2), lambda t: t.replace("    cta_id_in_cluster([2])\n", ""), "pair of CTAs"),
    (dict(M=128, N=64, K=64), lambda t: t.replace("S[(128, 64) : (1@TLane, 1@TCol)]",
                                                  "S[(128, 64) : (1@TLane, 2@TCol)]"), "not laid out as the M=128"),
    (dict(M=64, N=64, K=64), lambda t: t.replace("S[(4, 16, 64) : (32@TLane, 1@TLane, 1@TCol)]",
                                                 "S[(64, 64) : (1@TLane, 1@TCol)]"), "data path writes it"),
    (dict(M=128, N=64, K=64), lambda t: t.replace("SW[3, 3, 3] * S[(128, 64) : (64, 1)]", "S[(128, 64) : (64, 1)]"),
     "not in a layout the tensor core reads"),
    (dict(M=128, N=64, K=64), lambda t: t.replace("A_smem = alloc((128, 64)", "A_smem = alloc((136, 64)").replace(
        "(128, 64) : (64, 1)]", "(136, 64) : (64, 1)]", 1).replace("A_smem[:, :]", "A_smem[4:132, :]"),
     "inside a 128B swizzle atom"),
    (dict(dtype="e4m3", M=64, N=64, K=64, scaled=True), None, "needs M in {128}"),
    (dict(dtype="e2m1", M=128, N=64, K=128, scaled=True, b_major="MN", trans_b=True), None, "e2m1 B only K-major"),
    (dict(dtype="tf32", M=128, N=64, K=32, a_major="MN", trans_a=True), None, "kind::tf32 reads an MN-major"),
    (dict(dtype="e4m3", M=128, N=64, K=64, scaled=True), lambda t: t.replace(" + R[4 : 32@TLane]", "", 1),
     "requires R[4:32@TLane] on tmem"),
    (dict(dtype="e4m3", M=128, N=64, K=64, scaled=True), lambda t: t.replace("ue8m0", "u8", 1), "ue8m0"),
    (dict(dtype="e4m3", M=128, N=64, K=64, scaled=True), lambda t: t.replace("SFA=SFA[:, :]", "SFA=SFA[0:64, :]"),
     "SFA 'SFA' must be 128 x"),
    (dict(dtype="e4m3", M=128, N=64, K=32, scaled=True), lambda t: t.replace(
        "S[(4, 32) : (4@TCol, 1@TLane)]", "S[(4, 32) : (1@TCol, 1@TLane)]", 1), "the scale factor of row 32"),
    (dict(M=128, N=64, K=128, a_tmem=True, extra=", transpose_A=True"), None, "transpose_A=False"),
    (dict(M=64, N=64, K=32, a_tmem=True), None, "A in tensor memory needs 128 rows"),
]


@pytest.mark.parametrize("case, edit, message", REJECT, ids=lambda x: x if isinstance(x, str) else "")
def test_rejections(case, edit, message):
    text = gemm_case(**case)
    if edit is not None:
        edited = edit(text)
        assert edited != text
        text = edited
    with pytest.raises(TilecError, match=message.replace("[", r"\[").replace("{", r"\{").replace("(", r"\(")):
        compile_tile(text)


# The element named is the first a layout misplaces in row-major order (for
# the scale factors: factor by factor, row by row), though the checks go by
# line: along an instruction tile's first row, then its first column.
FIRST_MISPLACED = [
    (dict(M=128, N=64, K=64), "S[(128, 64) : (1@TLane, 1@TCol)]", "S[(64, 2, 64) : (1@TLane, 64@TLane, 1@TCol)]",
     "gemm_async's accumulator C 'acc' is not laid out as the M=128 data path writes it: element (1, 0) must be 1 "
     "lanes and 0 columns from the block's first, the layout puts it 64 lanes and 0 columns away "
     "(S[(64, 2, 64) : (1@TLane, 64@TLane, 1@TCol)])"),
    (dict(M=128, N=64, K=64), "S[(128, 64) : (1@TLane, 1@TCol)]", "S[(128, 2, 32) : (1@TLane, 1@TCol, 2@TCol)]",
     "gemm_async's accumulator C 'acc' is not laid out as the M=128 data path writes it: element (0, 1) must be 0 "
     "lanes and 1 columns from the block's first, the layout puts it 0 lanes and 2 columns away "
     "(S[(128, 2, 32) : (1@TLane, 1@TCol, 2@TCol)])"),
    (dict(M=64, N=64, K=64), "S[(4, 16, 64) : (32@TLane, 1@TLane, 1@TCol)]", "S[(16, 4, 64) : (1@TLane, 32@TLane, 1@TCol)]",
     "gemm_async's accumulator C 'acc' is not laid out as the M=64 data path writes it: element (1, 0) must be 1 "
     "lanes and 0 columns from the block's first, the layout puts it 32 lanes and 0 columns away "
     "(S[(16, 4, 64) : (1@TLane, 32@TLane, 1@TCol)])"),
    (dict(dtype="e2m1", M=128, N=64, K=128, scaled=True), "(4@TCol, 1@TLane, 16@TCol, 1@TCol)",
     "(4@TCol, 1@TLane, 16@TCol, 2@TCol)",
     "gemm_async's SFA 'SFA': the scale factor of row 0, K step 0 must be in lane 0, byte 1 from the step's first; "
     "the layout puts it in lane 0, byte 2 (S[(4, 32, 2, 2) : (4@TCol, 1@TLane, 16@TCol, 2@TCol)] + R[4 : 32@TLane])"),
    (dict(M=128, N=64, K=32, a_tmem=True), "S[(128, 32) : (1@TLane, 1@TCol)])", "S[(128, 32) : (1@TLane, 2@TCol)])",
     "gemm_async's A 'A_t' must have row r in lane r and K along the columns (S[(128, 32) : (1@TLane, 2@TCol)])"),
]


@pytest.mark.parametrize("case, old, new, message", FIRST_MISPLACED)
def test_first_misplaced_element(case, old, new, message):
    text = gemm_case(**case)
    assert old in text
    with pytest.raises(TilecError) as info:
        compile_tile(text.replace(old, new, 1))
    assert info.value.message == message


def test_hopper_target_has_no_tcgen05():
    text = """target sm_90a
kernel g(out: f32[4]):
    cta_id([1])
    tid = thread_id([128])
    A_smem = alloc((128, 64), f16, scope="shared", layout=mma_shared_layout(f16, 3, (128, 64)), align=1024)
    tmem_addr = alloc_shared([1], u32)
    acc = decl_buffer((128, 128), f32, scope="tmem", allocated_addr=tmem_addr[0],
                      layout=S[(128, 128) : (1@TLane, 1@TCol)])
    if tid == 0:
        gemm_async(acc[:, :], A_smem[:, :], A_smem[:, :], dispatch="tcgen05")
"""
    with pytest.raises(TilecError, match="variant 'tcgen05' of 'gemm_async' is not available on sm_90a"):
        compile_tile(text, target="sm_90a")

"""Warp collectives (shfl, redux, vote, match, activemask) and atomics
(atom, red): type- and target-specific forms, located errors, and on the GPU
every intrinsic's result checked against a model of the warp.  (The PTX
simulator runs threads one at a time and has no warps, so results are
checked on the device; tests/test_emit_intrinsics.py assembles every row
on every target.)"""
import numpy as np
import pytest

from emit_util import build
from tilec.compiler.diagnostics import TilecError

HEAD = """kernel k(X: u32[64], H: f16[64], B: bf16[64], L: u64[64], F: f32[64], A: u32[8]):
    cta_id([1])
    t = thread_id([64])
    s = alloc_shared((4,), u32)
"""
LINE = HEAD.count("\n") + 1


@pytest.mark.parametrize("stmt, target, opcode", [
    ("H[t] = ptx.shfl.sync.bfly(H[t], 1)", "sm_80", "shfl.sync.bfly.b32"),
    ("L[t] = ptx.shfl.sync.down(L[t], 1)", "sm_80", "mov.b64 {"),
    ("F[t] = ptx.redux.sync(F[t], op=\"max\")", "sm_100a", "redux.sync.max.f32"),
    ("ptx.red.add(B.ptr_to([0]), B[t])", "sm_90a", "red.global.add.noftz.bf16 "),
    ("ptx.red.add(A.ptr_to([0]), X[t], packed=\"bf16x2\")", "sm_90a", "red.global.add.noftz.bf16x2 "),
    ("ptx.red.add(H.ptr_to([0]), H[t])", "sm_80", "red.global.add.noftz.f16 "),
    ("L[t] = ptx.atom.cas(L.ptr_to([0]), 0, L[t])", "sm_80", "atom.global.cas.b64 "),
    ("F[t] = ptx.atom.exch(F.ptr_to([0]), F[t])", "sm_80", "atom.global.exch.b32 "),
    ("X[t] = ptx.redux.sync(X[t], op=\"and\")", "sm_80", "redux.sync.and.b32 "),
])
def test_type_specific_forms_assemble(stmt, target, opcode):
    ptx, _ = build(HEAD + "    " + stmt + "\n", target)
    assert opcode in ptx


@pytest.mark.parametrize("stmt, target, message", [
    ("ptx.red.add(B.ptr_to([0]), B[t])", "sm_80", r"atomic .add on bf16 needs sm_90a or newer \(target is sm_80\)"),
    ("ptx.red.add(A.ptr_to([0]), X[t], packed=\"bf16x2\")", "sm_80", "atomic .add on bf16x2 needs sm_90a"),
    ("F[t] = ptx.redux.sync(F[t], op=\"max\")", "sm_90a", r"redux.sync on f32 needs sm_100a"),
    ("F[t] = ptx.redux.sync(F[t], op=\"add\")", "sm_100a", "redux.sync on f32 does min and max only"),
    ("X[t] = ptx.shfl.sync.idx(X[t], 0, width=3)", "sm_80", r"'width' must be a power of two in \[1, 32\]"),
    ("ptx.red.min(F.ptr_to([0]), F[t])", "sm_80", "atom/red .min takes i32, u32, i64, u64 values, got a f32"),
    ("ptx.red.add(X[0], X[t])", "sm_80", "must be the address of a shared or global element"),
    ("ptx.red.add(A.ptr_to([0]), F[t], packed=\"f16x2\")", "sm_80", "a packed f16x2 operand is a u32"),
    ("X[t] = ptx.match.sync.any(H[t])", "sm_80", "match.sync compares 32- or 64-bit values, got a f16"),
])
def test_bad_collective_calls_are_located(stmt, target, message):
    with pytest.raises(TilecError, match=message) as err:
        build(HEAD + "    " + stmt + "\n", target)
    assert err.value.span.line == LINE


# --------------------------------------------------------------------------
# On the GPU: two warps, every result against a model
# --------------------------------------------------------------------------

GPU_KERNEL = """kernel coll(X: u32[64], F: f32[64], L: u64[64], H: f16[64], Res: u32[64, 18], FO: f32[64],
            LO: u64[64], HO: f16[64], A: u32[8], AF: f32[1], AL: u64[1], AH: u32[1]):
    cta_id([1])
    t = thread_id([64])
    s = alloc_shared((2,), u32)
    if t < 2:
        s[t] = 0
    cuda.cta_sync()
    x = X[t]
    Res[t, 0] = ptx.shfl.sync.bfly(x, 5)
    Res[t, 1] = ptx.shfl.sync.up(x, 3)
    Res[t, 2] = ptx.shfl.sync.down(x, 3, width=8)
    Res[t, 3] = ptx.shfl.sync.idx(x, 7)
    Res[t, 4] = ptx.redux.sync(x, op="add")
    Res[t, 5] = ptx.redux.sync(x, op="min")
    Res[t, 6] = ptx.redux.sync(x, op="xor")
    Res[t, 7] = ptx.vote.sync.ballot(x % 3 == 0)
    Res[t, 8] = 1 if ptx.vote.sync.all(x < 1000) else 0
    Res[t, 9] = 1 if ptx.vote.sync.any(x == 17) else 0
    Res[t, 10] = 1 if ptx.vote.sync.uni(x > 500) else 0
    Res[t, 11] = ptx.match.sync.any(x % 4)
    Res[t, 12] = ptx.match.sync.all(t // 32)
    Res[t, 13] = ptx.activemask()
    Res[t, 14] = ptx.atom.add(A.ptr_to([0]), 1)
    ptx.red.add(A.ptr_to([1]), x)
    ptx.red.min(A.ptr_to([2]), x)
    ptx.red.max(A.ptr_to([3]), x)
    Res[t, 15] = ptx.atom.cas(A.ptr_to([4]), 0, t + 100)
    Res[t, 16] = ptx.atom.exch(s.ptr_to([0]), x)
    Res[t, 17] = ptx.atom.max(s.ptr_to([1]), x)
    FO[t] = ptx.shfl.sync.bfly(F[t], 1)
    ptx.red.add(AF.ptr_to([0]), F[t])
    LO[t] = ptx.shfl.sync.idx(L[t], 2)
    ptx.red.add(AL.ptr_to([0]), L[t])
    HO[t] = ptx.shfl.sync.down(H[t], 1)
    ptx.red.add(AH.ptr_to([0]), pack_f16x2(1.0, 2.0), packed="f16x2")
    cuda.cta_sync()
    if t == 0:
        A[5] = s[0]
        A[6] = s[1]
"""


def _warp_model(x):
    """The per-thread results of O's columns 0-13, warp by warp."""
    out = np.zeros((64, 14), np.uint64)
    for w in range(2):
        v = x[32 * w:32 * w + 32].astype(np.int64)
        lanes = np.arange(32)
        down = np.where(lanes % 8 + 3 < 8, v[np.minimum(lanes + 3, 31)], v)
        ballot = sum(1 << i for i in range(32) if v[i] % 3 == 0)
        cols = [
            v[lanes ^ 5], np.where(lanes >= 3, v[np.maximum(lanes - 3, 0)], v), down,
            np.full(32, v[7]), np.full(32, v.sum() & 0xFFFFFFFF), np.full(32, v.min()),
            np.full(32, np.bitwise_xor.reduce(v)), np.full(32, ballot),
            np.full(32, int((v < 1000).all())), np.full(32, int((v == 17).any())),
            np.full(32, int(len(set(v > 500)) == 1)),
            [sum(1 << j for j in range(32) if v[j] % 4 == v[i] % 4) for i in range(32)],
            np.full(32, 0xFFFFFFFF), np.full(32, 0xFFFFFFFF),
        ]
        out[32 * w:32 * w + 32] = np.array(cols, dtype=np.uint64).T
    return out


@pytest.mark.gpu
def test_collectives_and_atomics_on_the_device():
    from tilec.runtime.module import CompiledModule

    rng = np.random.default_rng(5)
    x = rng.integers(0, 600, 64).astype(np.uint32)
    x[3] = 17
    f = rng.integers(-50, 50, 64).astype(np.float32)
    lv = rng.integers(0, 2**40, 64).astype(np.uint64)
    h = rng.standard_normal(64).astype(np.float16)
    o = np.full((64, 18), 0xDEADBEEF, np.uint32)
    fo, lo, ho = np.full(64, np.nan, np.float32), np.zeros(64, np.uint64), np.full(64, np.nan, np.float16)
    a = np.array([0, 0, 0xFFFFFFFF, 0, 0, 0, 0, 0], np.uint32)
    af, al, ah = np.zeros(1, np.float32), np.zeros(1, np.uint64), np.zeros(1, np.uint32)
    ptx, meta = build(GPU_KERNEL, "sm_80")
    CompiledModule(ptx, meta, "sm_80").kernel("coll")(x, f, lv, h, o, fo, lo, ho, a, af, al, ah)

    np.testing.assert_array_equal(o[:, :14].astype(np.uint64), _warp_model(x))
    assert sorted(o[:, 14]) == list(range(64)) and a[0] == 64
    assert a[1] == x.sum() and a[2] == x.min() and a[3] == x.max()
    winner = a[4] - 100
    assert 0 <= winner < 64 and o[winner, 15] == 0 and (np.delete(o[:, 15], winner) == a[4]).all()
    assert sorted(list(o[:, 16]) + [a[5]]) == sorted([0] + list(x))  # each exchange saw the previous value
    assert a[6] == x.max() and o[:, 17].max() <= x.max()
    np.testing.assert_array_equal(fo, f[np.arange(64) ^ 1])
    assert af[0] == f.sum()  # integers: exact in any order
    np.testing.assert_array_equal(lo, np.repeat(lv[[2, 34]], 32))
    assert al[0] == lv.sum()
    want_h = np.where(np.arange(64) % 32 < 31, h[np.minimum(np.arange(64) + 1, 63)], h)
    np.testing.assert_array_equal(ho, want_h)
    assert ah[0] == (int(np.float16(128.0).view(np.uint16)) << 16 | int(np.float16(64.0).view(np.uint16)))

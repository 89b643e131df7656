"""cast (variant cvt) and fill (variant store): PTX, results in the PTX
simulator (and the GPU), and rejections."""
import numpy as np
import pytest

from ptx_sim import Kernel
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.runtime.assemble import assemble

FRAG = "S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]"


def build(text, target="sm_90a"):
    r = compile_source(text, "k.tile", target=target)
    assemble(r.ptx, target)
    return r


def simulate(r, args):
    entry = r.meta["kernels"][0]
    Kernel(r.ptx, entry["name"]).run(args, grid=entry["grid"], dynamic_smem=entry["dynamic_smem"])


def bf16_bits(x):
    """f32 values rounded to bf16 (nearest even), as bit patterns."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


CAST = """
kernel k(A: f32[16, 8], B: {dt}[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={frag})
    H_f = alloc((16, 8), {dt}, scope="local", layout={frag})
    warp.copy(D_f, A)
    cast(H_f, D_f)
    warp.copy(B, H_f)
"""


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_f32_to_half_fragments_pair_their_conversions(dt):
    text = CAST.format(dt=dt, frag=FRAG)
    after = print_module(compile_source(text, "k.tile", options=Options(stop_after="dispatch")).module)
    assert f"ptx.cvt.{dt}x2.f32(H_f[0, 0], H_f[0, 1], D_f[0, 0], D_f[0, 1])" in after
    r = build(text)
    assert r.ptx.count(f"cvt.rn.{dt}x2.f32") == 2
    a = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    if dt == "f16":
        b = np.full((16, 8), np.nan, np.float16)
        simulate(r, {"A": a, "B": b})
        np.testing.assert_array_equal(b, a.astype(np.float16))
    else:
        b = np.zeros((16, 8), np.uint16)
        simulate(r, {"A": a, "B": b})
        np.testing.assert_array_equal(b, bf16_bits(a))


def test_other_conversions_are_one_cvt_per_element():
    text = """
kernel k(A: f16[8], B: i32[8], C: f32[8]):
    cta_id([1])
    tid = thread_id([1])
    h = alloc_local((8,), f16)
    i = alloc_local((8,), i32)
    f = alloc_local((8,), f32)
    copy(h, A)
    cast(i, h)
    cast(f, h)
    copy(B, i)
    copy(C, f)
"""
    r = build(text)
    assert r.ptx.count("cvt.rzi.s32.f16") == 8 and r.ptx.count("cvt.f32.f16") == 8
    a = (np.arange(8) * 1.75 - 6).astype(np.float16)
    b, c = np.zeros(8, np.int32), np.full(8, np.nan, np.float32)
    simulate(r, {"A": a, "B": b, "C": c})
    np.testing.assert_array_equal(b, np.trunc(a.astype(np.float32)).astype(np.int32))
    np.testing.assert_array_equal(c, a.astype(np.float32))


@pytest.mark.parametrize(
    "call, message",
    [
        ("cast(H_f, S1)", "rejected by registers: cast converts register (local) buffers; 'S1' is in shared (copy it to registers first)"),
        ("cast(H_f, T_f)", "declined: 'H_f' and 'T_f' spread their elements over different threads; a register copy cannot move elements between threads"),
        ("cast(E_f, D_f)", "rejected by scalar_dtypes: cvt converts floating-point and integer registers; 'E_f' is tf32"),
    ],
)
def test_cast_rejections(call, message):
    text = f"""
kernel k(A: f32[16, 8]):
    cta_id([1])
    lane = lane_id([32])
    S1 = alloc((16, 8), f32, scope="shared")
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG})
    T_f = alloc((16, 8), f32, scope="local", layout=S[(16, 8) : (1@laneid, 1)] + O[0@laneid])
    H_f = alloc((16, 8), f16, scope="local", layout={FRAG})
    E_f = alloc((16, 8), tf32, scope="local", layout={FRAG})
    {call}
"""
    with pytest.raises(TilecError) as err:
        compile_source(text, "k.tile")
    (row,) = [l for l in err.value.message.splitlines() if l.strip().startswith("cvt ")]
    assert row.split(None, 2)[2] == message


# --------------------------------------------------------------------------
# fill
# --------------------------------------------------------------------------


def test_fill_registers_and_memory():
    text = f"""
kernel k(A: f32[16, 8], B: f16[32, 40], x: f32):
    cta_id([1])
    lane = lane_id([32])
    D_f = alloc((16, 8), f32, scope="local", layout={FRAG})
    Sm = alloc((32, 40), f16, scope="shared")
    fill(D_f[0:8, :], x)
    fill(D_f[8:16, :], -2.5)
    warp.copy(A, D_f)
    fill(Sm, 0.0)
    cuda.cta_sync()
    fill(Sm[3:30, 8:16], x)
    cuda.cta_sync()
    warp.copy(B, Sm)
"""
    after = print_module(compile_source(text, "k.tile", options=Options(stop_after="dispatch")).module)
    assert "D_f[0, 0] = x" in after and "D_f[8, 0] = -2.5" in after
    assert "Sm[(i * 32 + lane) // 40, (i * 32 + lane) % 40] = 0.0" in after
    r = build(text)
    a, b = np.full((16, 8), np.nan, np.float32), np.full((32, 40), np.nan, np.float16)
    simulate(r, {"A": a, "B": b, "x": 1.5})
    np.testing.assert_array_equal(a[:8], 1.5)
    np.testing.assert_array_equal(a[8:], -2.5)
    want = np.zeros((32, 40), np.float16)
    want[3:30, 8:16] = 1.5
    np.testing.assert_array_equal(b, want)


def test_fill_converts_a_value_of_another_type():
    text = """
kernel k(B: f16[4], x: f32):
    cta_id([1])
    tid = thread_id([1])
    h = alloc_local((4,), f16)
    fill(h, x * 2.0)
    copy(B, h)
"""
    after = print_module(compile_source(text, "k.tile", options=Options(stop_after="dispatch")).module)
    assert "h[j] = convert(x * 2.0, f16)" in after
    r = build(text)
    b = np.full(4, np.nan, np.float16)
    simulate(r, {"B": b, "x": 0.75})
    np.testing.assert_array_equal(b, 1.5)


def test_fill_rejections():
    text = """
kernel k(B: i32[4]):
    cta_id([1])
    tid = thread_id([64])
    i = alloc_local((4,), i32)
    CALL
"""
    with pytest.raises(TilecError) as err:
        compile_source(text.replace("CALL", "fill(i, 0.5)"), "k.tile")
    assert err.value.message == "fill: 0.5 cannot be stored in i32 elements"
    assert (err.value.span.line, err.value.span.col) == (6, 13)
    with pytest.raises(TilecError) as err:
        compile_source(text.replace("CALL", "if tid < 8:\n        cta.fill(B, 1)"), "k.tile")
    assert "rejected by whole_scope: the fill is at cta scope but runs under 'tid < 8'" in err.value.message


# --------------------------------------------------------------------------
# On a GPU
# --------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_gpu_cast_fragments(dt):
    from tilec.runtime.module import CompiledModule

    r = compile_source(CAST.format(dt=dt, frag=FRAG), "k.tile", target="sm_80")
    a = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    b = np.full((16, 8), np.nan, np.float16) if dt == "f16" else np.zeros((16, 8), np.uint16)
    CompiledModule(r.ptx, r.meta, "sm_80").kernel()(a, b)
    np.testing.assert_array_equal(b, a.astype(np.float16) if dt == "f16" else bf16_bits(a))

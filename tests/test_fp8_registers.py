"""8-bit floats (e4m3, e5m2) as register values: read, written, converted
to and from f16 / bf16 / f32 (`convert`, and `cast` of whole register
fragments), and nothing else.  The PTX assembles for sm_90a without a
warning; on an H100 the conversions match torch's."""
import numpy as np
import pytest

from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

# A warpgroup converts a 64 x 32 f32 fragment to e4m3 and back, to f16 and
# on to e5m2, plus one scalar round trip per thread.
KERNEL = """
target sm_90a
const FRAG = S[(4, 2, 8, 4, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]

kernel k(X: f32[64, 32], Q: e4m3[64, 32], Y: f32[64, 32], H: f16[64, 32], E: e5m2[64, 32], W: e5m2[128],
         Z: bf16[128]):
    cta_id([1])
    tid = thread_id([128])
    x = alloc_local((64, 32), f32, layout=FRAG)
    q = alloc_local((64, 32), e4m3, layout=FRAG)
    y = alloc_local((64, 32), f32, layout=FRAG)
    h = alloc_local((64, 32), f16, layout=FRAG)
    e = alloc_local((64, 32), e5m2, layout=FRAG)
    copy(x[:, :], X[:, :])
    cast(q[:, :], x[:, :])
    copy(Q[:, :], q[:, :])
    cast(y[:, :], q[:, :])
    copy(Y[:, :], y[:, :])
    cast(h[:, :], q[:, :])
    cast(e[:, :], h[:, :])
    copy(H[:, :], h[:, :])
    copy(E[:, :], e[:, :])
    v: e4m3 = Q[tid % 64, tid // 64]
    W[tid] = convert(convert(v, f32) * 2.0, e5m2)
    Z[tid] = convert(v, bf16)
"""


def build(text, target=None):
    return compile_source(text, "t.tile", target=target)


def test_conversions_assemble_without_warnings():
    ptx = build(KERNEL).ptx
    assemble(ptx, "sm_90a")
    assert ptx.count("cvt.rn.satfinite.e4m3x2.f32") == 16  # the thread's 16 registers of the fragment
    assert ptx.count("cvt.rn.satfinite.e5m2x2.f16x2") == 16
    assert "cvt.rn.f16x2.e4m3x2" in ptx
    assert "ld.global.b8" in ptx and "st.global.b8" in ptx


@pytest.mark.parametrize("line, message", [
    ("    W[tid] = v", r"cannot store a e4m3 into e5m2 buffer .W. \(use convert\)"),
    ("    Z[tid] = convert(v + v, bf16)", "e4m3 values take no arithmetic: convert them to f16 or f32 first"),
    ("    Z[tid] = convert(-v, bf16)", "e4m3 values take no arithmetic"),
    ("    W[tid] = convert(tid, e5m2)", "convert: e5m2 converts only to and from f16, bf16, f32"),
    ("    u: e4m3 = 1.0", "cannot initialise e4m3 'u' with a"),
])
def test_what_8_bit_floats_refuse(line, message):
    text = KERNEL.replace("    Z[tid] = convert(v, bf16)", line)
    with pytest.raises(TilecError, match=message):
        build(text)


def test_8_bit_conversions_need_sm_89():
    text = KERNEL.replace("target sm_90a", "target sm_80")
    with pytest.raises(TilecError, match="needs sm_89 or newer"):
        build(text)


def test_no_8_bit_float_scalar_parameters():
    with pytest.raises(TilecError, match="scalar parameter 's' cannot have dtype e4m3"):
        build("kernel k(s: e4m3, D: f32[1]):\n    cta_id([1])\n    thread_id([32])\n")


@pytest.mark.gpu
def test_conversions_match_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs a GPU with 8-bit float conversions (sm_89 or newer)")
    from tilec.runtime.module import CompiledModule

    r = build(KERNEL)
    g = torch.Generator(device="cuda").manual_seed(0)
    X = (torch.rand((64, 32), device="cuda", generator=g) - 0.5) * 800  # within e4m3's +-448, and beyond
    X[0, :8] = torch.tensor([0.0, -0.0, 1e-9, 448.0, 449.0, 1e4, -1e4, 3.14159])
    out = {name: torch.zeros(shape, dtype=torch.uint8, device="cuda")
           for name, shape in (("Q", (64, 32)), ("E", (64, 32)), ("W", (128,)))}
    Y = torch.full((64, 32), float("nan"), device="cuda")
    H = torch.zeros((64, 32), dtype=torch.float16, device="cuda")
    Z = torch.zeros(128, dtype=torch.bfloat16, device="cuda")
    CompiledModule(r.ptx, r.meta, "sm_90a").kernel()(X, out["Q"], Y, H, out["E"], out["W"], Z)
    torch.cuda.synchronize()
    # satfinite: beyond the largest finite value the result is that value
    want_q = X.clamp(-448, 448).to(torch.float8_e4m3fn)
    assert torch.equal(out["Q"], want_q.view(torch.uint8))
    q = out["Q"].view(torch.float8_e4m3fn)
    assert torch.equal(Y, q.float())
    assert torch.equal(H, q.half())
    assert torch.equal(out["E"], H.to(torch.float8_e5m2).view(torch.uint8))
    v = torch.stack([q[t % 64, t // 64] for t in range(128)])
    assert torch.equal(out["W"], (v.float() * 2).to(torch.float8_e5m2).view(torch.uint8))
    assert torch.equal(Z, v.to(torch.bfloat16))
    assert np.isfinite(Y.cpu().numpy()).all()


# 8- and 16-bit integers as scalars: convert / reinterpret to i8, u8, i16,
# u16 give the i32 / u32 value an element of that dtype reads as.
NARROW = """
target sm_90a
kernel k(X: f32[8], H: f16[8], Q: e4m3[8], V: i64[8], A: u32[8], B: i32[8], C: u32[8], D: i32[8], E: u32[8]):
    cta_id([1])
    t = thread_id([8])
    A[t] = convert(X[t], u16)
    B[t] = convert(X[t], i8, rounding="rn")
    C[t] = reinterpret(H[t], u16)
    D[t] = convert(V[t], i16)
    E[t] = reinterpret(Q[t], u8) + convert(reinterpret(Q[t], i8), u32) * 0
"""


def narrow_case():
    X = np.array([1.7, -1.7, 70000.0, -5.0, 127.6, -200.0, 65535.0, 0.4], np.float32)
    H = np.array([1.0, -2.0, 0.5, 65504.0, 0.0, -0.0, 3.0, 1e-3], np.float16)
    Q = np.arange(8, dtype=np.uint8) * 37
    V = np.array([2**40 + 5, -1, 32768, -32769, 65535, 7, -7, 2**15 - 1], np.int64)
    out = {n: np.zeros(8, np.uint32 if n in "ACE" else np.int32) for n in "ABCDE"}
    return dict(X=X, H=H, Q=Q, V=V, **out)


def check_narrow(args):
    out, H, Q, V = args, args["H"], args["Q"], args["V"]
    assert out["A"].tolist() == [1, 0, 65535, 0, 127, 0, 65535, 0]  # toward zero, saturated
    assert out["B"].tolist() == [2, -2, 127, -5, 127, -128, 127, 0]  # to nearest, saturated
    assert out["C"].tolist() == H.view(np.uint16).tolist()
    assert out["D"].tolist() == V.astype(np.int16).tolist()  # the low 16 bits, sign-extended
    assert out["E"].tolist() == Q.tolist()


def test_narrow_integers_in_the_simulator():
    from emit_util import run

    args = narrow_case()
    run(NARROW, args)
    check_narrow(args)


@pytest.mark.gpu
def test_narrow_integers_on_the_gpu():
    from tilec.runtime.module import CompiledModule

    r = build(NARROW)
    args = narrow_case()
    CompiledModule(r.ptx, r.meta, "sm_90a").kernel()(*args.values())
    check_narrow(args)


def test_narrow_integer_refusals():
    with pytest.raises(TilecError, match="reinterpret: f32 and u16 differ in width"):
        build(NARROW.replace("convert(X[t], u16)", "reinterpret(X[t], u16)"))
    with pytest.raises(TilecError, match="converting i64 to i16 is exact and takes no rounding"):
        build(NARROW.replace("convert(V[t], i16)", 'convert(V[t], i16, rounding="rz")'))

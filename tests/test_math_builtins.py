"""The scalar math builtins (exp2, exp, log2, log, sqrt, rsqrt, rcp, tanh,
sin, cos, abs, fma, copysign): each form assembles on every target, picks
the instruction docs/language.md names, computes the right value (in the
PTX simulator, which models approximate instructions as exact, so the
composed precise forms are checked as formulas; on the GPU, the hardware's
accuracy), and bad operands are located errors."""
import re

import numpy as np
import pytest

from emit_util import build, run
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.math_fns import MATH
from tilec.compiler.targets import TARGETS

UNARY = ["exp2", "exp", "log2", "log", "sqrt", "rsqrt", "rcp", "tanh", "sin", "cos", "abs"]
REFERENCE = {
    "exp2": np.exp2, "exp": np.exp, "log2": np.log2, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "rcp": lambda x: 1 / x, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "abs": np.abs,
}
N = 64


def _inputs(f: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if f in ("log2", "log", "sqrt", "rsqrt"):
        x = rng.uniform(1e-3, 1e4, N)
    elif f in ("exp2", "exp"):
        x = rng.uniform(-80, 80, N)
    elif f == "tanh":  # both sides of the polynomial/ex2 switch at 0.55
        x = np.concatenate([rng.uniform(-0.6, 0.6, N // 2), rng.uniform(-12, 12, N // 2)])
    elif f in ("sin", "cos"):
        x = rng.uniform(-2000, 2000, N)
    else:
        x = rng.uniform(-100, 100, N)
    return x.astype(np.float32)


def _unary_kernel(f: str, dtype: str = "f32", approx: bool = False) -> str:
    flag = ", approx=True" if approx else ""
    return (f"kernel k(X: {dtype}[{N}], Y: {dtype}[{N}]):\n"
            f"    cta_id([1])\n    t = thread_id([{N}])\n    Y[t] = {f}(X[t]{flag})\n")


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    want32 = want.astype(np.float32)
    spacing = np.abs(np.spacing(want32)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - want) / spacing))


@pytest.mark.parametrize("f", UNARY)
def test_precise_form_computes_the_function(f):
    x = _inputs(f)
    y = np.zeros(N, np.float32)
    run(_unary_kernel(f), {"X": x, "Y": y})
    want = REFERENCE[f](x.astype(np.float64))
    if f in ("sin", "cos"):  # the reduction's error is absolute, relative to 2*pi * |k| * 2**-24 * 2**-24
        assert np.max(np.abs(y - want)) < 2e-6
    else:
        assert _ulps(y, want) <= 2.0, (x, y, want)


@pytest.mark.parametrize("f", ["fma", "copysign"])
def test_binary_and_ternary_functions(f):
    rng = np.random.default_rng(3)
    a, b, c = (rng.uniform(-10, 10, N).astype(np.float32) for _ in range(3))
    y = np.zeros(N, np.float32)
    call = "fma(A[t], B[t], C[t])" if f == "fma" else "copysign(A[t], B[t])"
    run(f"kernel k(A: f32[{N}], B: f32[{N}], C: f32[{N}], Y: f32[{N}]):\n"
        f"    cta_id([1])\n    t = thread_id([{N}])\n    Y[t] = {call}\n", {"A": a, "B": b, "C": c, "Y": y})
    if f == "fma":
        want = (a.astype(np.float64) * b + c).astype(np.float32)
    else:
        want = np.copysign(a, b)
    np.testing.assert_array_equal(y, want)


def test_tanh_saturates_and_keeps_its_sign():
    x = np.array([0.0, -0.0, 1e-30, -1e-20, 30.0, -30.0, np.inf, -np.inf] * 8, np.float32)
    y = np.zeros(N, np.float32)
    run(_unary_kernel("tanh"), {"X": x, "Y": y})
    np.testing.assert_array_equal(y, np.tanh(x))
    assert np.array_equal(np.signbit(y), np.signbit(x))


def test_exp_of_infinities_and_overflow():
    x = np.array([np.inf, -np.inf, 100.0, -110.0] * 16, np.float32)
    y = np.zeros(N, np.float32)
    run(_unary_kernel("exp"), {"X": x, "Y": y})
    np.testing.assert_array_equal(y, np.array([np.inf, 0.0, np.inf, 0.0] * 16, np.float32))


# (function, approx) -> the instruction it must emit for f32
F32_FORMS = {
    ("exp2", False): "ex2.approx.f32", ("exp2", True): "ex2.approx.ftz.f32",
    ("exp", False): "ex2.approx.f32", ("exp", True): "ex2.approx.ftz.f32",
    ("log2", False): "lg2.approx.f32", ("log2", True): "lg2.approx.ftz.f32",
    ("log", False): "lg2.approx.f32", ("log", True): "lg2.approx.ftz.f32",
    ("sqrt", False): "sqrt.rn.f32", ("sqrt", True): "sqrt.approx.ftz.f32",
    ("rsqrt", False): "sqrt.rn.f32", ("rsqrt", True): "rsqrt.approx.ftz.f32",
    ("rcp", False): "rcp.rn.f32", ("rcp", True): "rcp.approx.ftz.f32",
    ("tanh", False): "ex2.approx.f32", ("tanh", True): "tanh.approx.f32",
    ("sin", False): "cvt.rni.f32.f32", ("sin", True): "sin.approx.ftz.f32",
    ("cos", False): "cvt.rni.f32.f32", ("cos", True): "cos.approx.ftz.f32",
    ("abs", False): "abs.f32",
}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("f, approx", sorted(F32_FORMS))
def test_each_form_assembles_with_its_instruction(f, approx, target):
    ptx, _ = build(_unary_kernel(f, approx=approx), target)
    assert F32_FORMS[f, approx] in ptx


@pytest.mark.parametrize("dtype, f, target, opcode", [
    ("f16", "exp2", "sm_80", "ex2.approx.f16 "),
    ("f16", "tanh", "sm_90a", "tanh.approx.f16 "),
    ("bf16", "exp2", "sm_90a", "ex2.approx.ftz.bf16 "),
    ("bf16", "exp2", "sm_80", "ex2.approx.ftz.f32 "),  # no bf16 ex2 before sm_90: f32, rounded once
    ("bf16", "tanh", "sm_100a", "tanh.approx.bf16 "),
])
def test_half_precision_uses_the_native_approx_instruction(dtype, f, target, opcode):
    ptx, _ = build(_unary_kernel(f, dtype, approx=True), target)
    assert opcode in ptx


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_precision_precise_forms_round_once(dtype):
    x = np.linspace(-4, 4, N).astype(np.float16)
    y = np.zeros(N, np.float16)
    if dtype == "f16":
        run(_unary_kernel("exp", "f16"), {"X": x, "Y": y})
        np.testing.assert_array_equal(y, np.exp(x.astype(np.float64)).astype(np.float16))
    else:
        ptx, _ = build(_unary_kernel("exp", "bf16"), "sm_80")
        assert re.search(r"cvt\.rn\.bf16\.f32", ptx)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_precision_fma_and_abs_are_native(dtype):
    src = (f"kernel k(X: {dtype}[{N}], Y: {dtype}[{N}]):\n    cta_id([1])\n    t = thread_id([{N}])\n"
           f"    Y[t] = fma(X[t], X[t], abs(X[t]))\n")
    for target in TARGETS:
        ptx, _ = build(src, target)
        assert f"fma.rn.{dtype} " in ptx and f"abs.{dtype} " in ptx


def test_integer_abs_and_fma():
    src = (f"kernel k(X: i32[{N}], Y: i32[{N}]):\n    cta_id([1])\n    t = thread_id([{N}])\n"
           f"    Y[t] = abs(X[t]) + fma(X[t], 3, 1)\n")
    x = np.arange(-32, 32, dtype=np.int32)
    y = np.zeros(N, np.int32)
    run(src, {"X": x, "Y": y})
    np.testing.assert_array_equal(y, np.abs(x) + 3 * x + 1)


def test_f64_forms():
    src = ("kernel k(X: f64[4], Y: f64[4]):\n    cta_id([1])\n    t = thread_id([4])\n"
           "    Y[t] = sqrt(X[t]) + rcp(X[t]) + rsqrt(X[t]) + fma(X[t], X[t], 1) + abs(X[t]) + copysign(X[t], -1.0)\n")
    x = np.array([1.0, 2.0, 9.0, 0.25])
    y = np.zeros(4)
    run(src, {"X": x, "Y": y})
    want = np.sqrt(x) + 1 / x + 1 / np.sqrt(x) + (x * x + 1) + np.abs(x) - np.abs(x)
    np.testing.assert_allclose(y, want, rtol=1e-15)


@pytest.mark.parametrize("call, message", [
    ("exp2(I[t])", r"exp2 takes floating-point operands \(f16, bf16, f32\), got i32: use convert\(x, f32\)"),
    ("exp(D[0])", "exp has no f64 form in PTX; convert the operand to f32"),
    ("abs(X[t], approx=True)", "abs has no parameter 'approx'"),
    ("fma(X[t], X[t])", "fma is missing argument 'c'"),
    ("sin(X[t], approx=1)", "'approx' must be True or False"),
])
def test_bad_math_calls_are_located(call, message):
    src = (f"kernel k(X: f32[{N}], Y: f32[{N}], I: i32[{N}], D: f64[2]):\n    cta_id([1])\n"
           f"    t = thread_id([{N}])\n    Y[t] = {call}\n")
    with pytest.raises(TilecError, match=message) as err:
        build(src)
    assert err.value.span.line == 4


@pytest.mark.parametrize("call, target, opcode", [
    ('exp2(x, approx=True, packed="f16x2")', "sm_80", "ex2.approx.f16x2 "),
    ('exp2(x, approx=True, packed="bf16x2")', "sm_90a", "ex2.approx.ftz.bf16x2 "),
    ('tanh(x, approx=True, packed="f16x2")', "sm_80", "tanh.approx.f16x2 "),
    ('tanh(x, approx=True, packed="bf16x2")', "sm_100a", "tanh.approx.bf16x2 "),
    ('fma(x, x, x, packed="f16x2")', "sm_80", "fma.rn.f16x2 "),
    ('fma(x, x, 0, packed="bf16x2")', "sm_80", "fma.rn.bf16x2 "),
    ('abs(x, packed="bf16x2")', "sm_80", "abs.bf16x2 "),
])
def test_packed_half_pairs(call, target, opcode):
    src = f"kernel k(X: u32[{N}], Y: u32[{N}]):\n    cta_id([1])\n    t = thread_id([{N}])\n    x = X[t]\n    Y[t] = {call}\n"
    ptx, _ = build(src, target)
    assert opcode in ptx


@pytest.mark.parametrize("call, target, message", [
    ('exp2(x, packed="f16x2")', "sm_80", r"f16x2 exp2 exists only as ex2.approx.f16x2: write approx=True"),
    ('exp2(x, approx=True, packed="bf16x2")', "sm_80", r"ex2.approx.ftz.bf16x2 needs sm_90a or newer"),
    ('fma(f, f, f, packed="f16x2")', "sm_80", r"takes u32 words of two halves \(pack_f16x2\), got a f32"),
    ('sin(x, packed="f16x2")', "sm_80", "sin has no parameter 'packed'"),
])
def test_bad_packed_calls_are_located(call, target, message):
    src = (f"kernel k(X: u32[{N}], Y: u32[{N}], F: f32[{N}]):\n    cta_id([1])\n    t = thread_id([{N}])\n"
           f"    x = X[t]\n    f = F[t]\n    Y[t] = {call}\n")
    with pytest.raises(TilecError, match=message) as err:
        build(src, target)
    assert err.value.span.line == 6


def test_every_math_function_is_documented():
    doc = open("docs/language.md").read()
    for f in MATH:
        assert f"`{f}(" in doc, f


# --------------------------------------------------------------------------
# On the GPU: the hardware's accuracy, within what docs/language.md states
# --------------------------------------------------------------------------

# (function, approx) -> bound: ulps, or ("abs", bound) for an absolute error
GPU_BOUNDS = {
    ("exp2", False): 2, ("exp2", True): 2, ("exp", False): 3, ("exp", True): ("rel", 1e-5),
    ("log2", False): ("abs", 2e-6), ("log", False): ("abs", 2e-6), ("sqrt", False): 0.5,
    ("sqrt", True): 1, ("rsqrt", False): 2, ("rsqrt", True): 2, ("rcp", False): 0.5, ("rcp", True): 1,
    ("tanh", False): 4, ("tanh", True): ("rel", 2e-3), ("sin", False): ("abs", 2e-6),
    ("cos", False): ("abs", 2e-6), ("abs", False): 0,
}


@pytest.mark.gpu
@pytest.mark.parametrize("f, approx", sorted(GPU_BOUNDS))
def test_accuracy_on_the_device(f, approx):
    from tilec.runtime.module import CompiledModule

    n = 1 << 16
    rng = np.random.default_rng(11)
    src = _unary_kernel(f, approx=approx).replace(
        f"cta_id([1])\n    t = thread_id([{N}])", f"b = cta_id([{n // 256}])\n    tx = thread_id([256])\n    t = b * 256 + tx"
    ).replace(f"[{N}]", f"[{n}]")
    ptx, meta = build(src, "sm_80")
    x = np.concatenate([_inputs(f)] * (n // N))
    x = (x * rng.uniform(0.5, 1.5, n)).astype(np.float32)
    x = np.clip(x, -85, 85) if f == "exp" else np.clip(x, -2000, 2000) if f in ("sin", "cos") else x
    y = np.full(n, np.nan, np.float32)
    CompiledModule(ptx, meta, "sm_80").kernel("k")(x, y)
    want = REFERENCE[f](x.astype(np.float64))
    bound = GPU_BOUNDS[f, approx]
    if isinstance(bound, tuple) and bound[0] == "abs":
        assert np.max(np.abs(y - want)) <= bound[1]
    elif isinstance(bound, tuple):
        assert np.max(np.abs(y - want) / np.abs(want)) <= bound[1]
    else:
        assert _ulps(y, want) <= bound

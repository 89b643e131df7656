"""Division by uniform divisors (issue 15): `x // d` and `x % d` where d is
arithmetic on runtime extents and sm_count() become a multiply-high by
magic numbers the launch computes (tilec/compiler/runtime_dims.py `magic`
and `uniform_divisors`); a positive constant divisor, by the same numbers
as immediates (issue 17: ptxas divides by an immediate with a float
reciprocal).

The magic numbers are checked against Python's `//`: by the critical-point
argument of `magic`'s docstring (one numerator per divisor decides every
numerator below 2**31) for every divisor up to 2**16, around every power
of two and below 2**31, and at random; and directly, on the 32-bit
instruction sequences the emitter writes, with signed and unsigned numerators.  The
interval analysis that decides which divisors qualify is checked against
evaluation on random extents; the emitted PTX runs on the PTX simulator."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptx_sim import Kernel as Sim
from tilec.compiler import ir
from emit_util import build, run
from tilec.compiler.runtime_dims import I32_MAX, bound_facts, bounds, magic
from tilec.compiler.symbols import analyze_kernel
from tilec.compiler.targets import TARGETS
from tilec.pipeline import compile_source
from tilec.runtime import dims as runtime_dims
from tilec.runtime.assemble import assemble
from tilec.runtime.launch import LaunchError, check_args

U32 = np.uint64(0xFFFFFFFF)


def _magic_arrays(d: np.ndarray):
    """`magic` for an array of divisors, in uint64 (the same formula)."""
    d = d.astype(np.uint64)
    shift = np.zeros_like(d)
    x = d - np.uint64(1)
    while x.any():  # ceil(log2(d)) = bit_length(d - 1)
        shift += (x > 0).astype(np.uint64)
        x >>= np.uint64(1)
    mul = ((np.uint64(1) << (np.uint64(32) + shift)) - (d << np.uint64(32))) // d + np.uint64(1)
    return mul, shift


def _proves(d: np.ndarray) -> np.ndarray:
    """Per divisor: whether the magic quotient is right at the largest
    numerator below 2**31 of remainder d - 1, which (magic's docstring)
    makes it right for every numerator below 2**31."""
    mul, shift = _magic_arrays(d)
    assert (mul <= U32).all()
    d = d.astype(np.uint64)
    u = (np.uint64(2**31) // d) * d - np.uint64(1)
    hi = (u * mul) >> np.uint64(32)  # < 2**63: no overflow
    assert (hi + u <= U32).all()  # the 32-bit add does not wrap
    return ((hi + u) >> shift) == u // d


def _divisors():
    powers = [1 << k for k in range(1, 32)]
    near = {p + i for p in powers for i in range(-300, 301) if 1 <= p + i <= I32_MAX}
    rng = np.random.default_rng(15)
    rand = rng.integers(1, I32_MAX + 1, 200_000, dtype=np.int64)
    return np.unique(np.concatenate([
        np.arange(1, 1 << 16), np.arange(I32_MAX - (1 << 16), I32_MAX + 1), np.array(sorted(near)), rand,
    ]))  # fmt: skip


def test_magic_numbers_divide_every_numerator_below_2_31():
    d = _divisors()
    ok = _proves(d)
    assert ok.all(), d[~ok][:10]
    for v in (1, 2, 3, 7, 641, 1 << 20, (1 << 30) + 1, I32_MAX):  # the vectorised formula is magic()'s
        mul, shift = _magic_arrays(np.array([v]))
        assert magic(v) == (int(mul[0]), int(shift[0]))


def test_the_critical_point_argument_holds_where_it_can_be_checked_exhaustively():
    """For small divisors, every numerator near the top of the range (and
    at the bottom) agrees too, so the one-point check is not a weaker test."""
    u = np.concatenate([np.arange(0, 1 << 16), np.arange(2**31 - (1 << 16), 2**31)]).astype(np.uint64)
    for d in list(range(1, 200)) + [641, 65535, 65537, 1 << 20, I32_MAX]:
        mul, shift = magic(d)
        q = (((u * np.uint64(mul)) >> np.uint64(32)) + u) >> np.uint64(shift)
        assert (q == u // np.uint64(d)).all(), d


def _emitted(n: int, d: int) -> tuple[int, int]:
    """The emitter's instruction sequence (Expressions.uniform_divmod) in
    32-bit arithmetic: (n // d, n % d) for an i32 n."""
    mul, shift = magic(d)
    bits = n & 0xFFFFFFFF
    sign = 0xFFFFFFFF if n < 0 else 0  # shr.s32 n, 31
    u = bits ^ sign  # xor.b32
    hi = (u * mul) >> 32  # mul.hi.u32
    s = (hi + u) & 0xFFFFFFFF  # add.u32
    assert s == hi + u
    q = ((s >> shift) ^ sign) & 0xFFFFFFFF  # shr.u32, xor.b32
    q = q - (1 << 32) if q >> 31 else q
    r = (n - q * d) & 0xFFFFFFFF  # mul.lo.s32, sub.s32
    return q, r - (1 << 32) if r >> 31 else r


@settings(max_examples=3000)
@given(st.integers(-(2**31), 2**31 - 1), st.one_of(st.integers(1, 300), st.integers(1, I32_MAX)))
def test_the_signed_sequence_is_python_floor_division(n, d):
    assert _emitted(n, d) == (n // d, n % d)


def test_the_signed_sequence_at_the_edges():
    for d in (1, 2, 3, 5, 7, 128, 1000, 2**30, 2**30 + 1, I32_MAX):
        for n in (0, 1, -1, d - 1, d, -d, -d - 1, -d + 1, 2**31 - 1, -(2**31), -(2**31) + 1, 2**31 - d):
            if -(2**31) <= n < 2**31:
                assert _emitted(n, d) == (n // d, n % d), (n, d)


def _emitted_unsigned(n: int, d: int) -> tuple[int, int]:
    """The emitter's sequence for a u32 n and a constant d
    (Expressions.magic_divmod): (n // d, n % d) in 32-bit arithmetic."""
    mul, shift = magic(d)
    hi = (n * mul) >> 32  # mul.hi.u32
    half = ((n - hi) & 0xFFFFFFFF) >> 1  # sub.u32, shr.u32 1
    s = (hi + half) & 0xFFFFFFFF  # add.u32
    assert s == hi + half
    q = s >> (shift - 1)  # shr.u32
    return q, (n - q * d) & 0xFFFFFFFF  # mul.lo.u32, sub.u32


@settings(max_examples=3000)
@given(st.integers(0, 2**32 - 1), st.one_of(st.integers(2, 300), st.integers(2, I32_MAX)))
def test_the_unsigned_sequence_divides_every_u32(n, d):
    assert _emitted_unsigned(n, d) == (n // d, n % d)


def test_the_unsigned_sequence_at_the_edges():
    for d in (2, 3, 5, 7, 12, 13, 132, 641, 1000, 2**30 + 1, I32_MAX):
        top = (2**32 // d) * d
        for n in (0, 1, d - 1, d, d + 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32 - d, top - 1, top % 2**32):
            assert _emitted_unsigned(n % 2**32, d) == (n % 2**32 // d, n % 2**32 % d), (n, d)


CONSTANT_DIVISORS = (3, 5, 7, 12, 13, 132, 641, 1000, 2**30 + 1, I32_MAX)
_ND = len(CONSTANT_DIVISORS)
CONSTS = f"""
kernel consts(X: i32[32], Y: u32[32], Q: i32[32, {_ND + 1}], R: i32[32, {_ND + 1}],
              UQ: u32[32, {_ND}], UR: u32[32, {_ND}]):
    cta_id([1])
    t = thread_id([32])
    x = X[t]
    y = Y[t]
""" + "".join(
    f"    Q[t, {i}] = x // {d}\n    R[t, {i}] = x % {d}\n    UQ[t, {i}] = y // {d}\n    UR[t, {i}] = y % {d}\n"
    for i, d in enumerate(CONSTANT_DIVISORS)
) + f"    Q[t, {_ND}] = x // -3\n    R[t, {_ND}] = x % -3\n"

_DIV_OR_REM = r"(?:div|rem)\.[su]32 %r\d+, %r\d+, (-?\d+);"


def test_constant_divisors_are_a_multiply_high_by_immediates():
    """`x // 12` and `x % 12` are a multiply-high by magic(12)'s multiplier
    as an immediate, for i32 and u32: no div or rem, which ptxas would
    turn into a float-reciprocal division (I2F, MUFU.RCP, F2I) at every
    use.  A negative divisor keeps the corrected div.s32 and rem.s32."""
    ptx, _ = build(CONSTS)
    for d in CONSTANT_DIVISORS:
        assert re.search(rf"mul\.hi\.u32 %r\d+, %r\d+, {magic(d)[0]};", ptx), d
    assert re.findall(_DIV_OR_REM, ptx) == ["-3"] * 3  # `//`: a div and the rem that corrects it; `%`: a rem


def test_constant_divisions_run_on_the_simulator():
    """Signed numerators over the whole i32 range (floor semantics for the
    negative ones) and unsigned ones over the whole u32 range."""
    rng = np.random.default_rng(17)
    x = rng.integers(-(2**31), 2**31, 32, dtype=np.int64)
    x[:8] = [-(2**31), 2**31 - 1, -1, 0, 1, -12, -13, 2**31 - 2]
    y = rng.integers(0, 2**32, 32, dtype=np.int64)
    y[:6] = [0, 2**32 - 1, 2**31, 2**31 - 1, 2**32 - 2, 12 * 13]
    out = {k: np.zeros((32, _ND + 1), np.int32) for k in ("Q", "R")}
    out.update({k: np.zeros((32, _ND), np.uint32) for k in ("UQ", "UR")})
    run(CONSTS, {"X": x.astype(np.int32), "Y": y.astype(np.uint32), **out})
    ds = CONSTANT_DIVISORS + (-3,)
    assert out["Q"].tolist() == [[int(v) // d for d in ds] for v in x]
    assert out["R"].tolist() == [[int(v) % d for d in ds] for v in x]
    assert out["UQ"].tolist() == [[int(v) // d for d in CONSTANT_DIVISORS] for v in y]
    assert out["UR"].tolist() == [[int(v) % d for d in CONSTANT_DIVISORS] for v in y]


def test_the_evaluator_ops():
    env = {"N": 1000}
    d = ["*", 8, ["//", ["+", "N", 255], 256]]  # 32
    assert runtime_dims.evaluate(["magic_mul", d], env) == magic(32)[0]
    assert runtime_dims.evaluate(["magic_shift", d], env) == 5
    for bad in ({"N": -300}, {"N": 2**31 * 32}):
        with pytest.raises(runtime_dims.DimError, match="outside"):
            runtime_dims.evaluate(["magic_mul", d], bad)
    with pytest.raises(runtime_dims.DimError, match="not an expression"):
        runtime_dims.evaluate(["magic_mul", d, 1], env)
    with pytest.raises(ValueError):
        magic(0)


# ---- which divisors qualify: the interval analysis ---------------------------


def _expr(tree):
    if isinstance(tree, int):
        return ir.Int(tree)
    if isinstance(tree, str):
        return ir.Call("sm_count") if tree == "sm" else ir.Name(tree)
    op, *args = tree
    if op in ("min", "max"):
        return ir.Call(op, tuple(_expr(a) for a in args))
    if op == "neg":
        return ir.Unary("-", _expr(args[0]))
    return ir.Binary(op, _expr(args[0]), _expr(args[1]))


def _value(tree, env):
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return env[tree]
    op, *args = tree
    v = [_value(a, env) for a in args]
    if op == "neg":
        return -v[0]
    return {"+": lambda: v[0] + v[1], "-": lambda: v[0] - v[1], "*": lambda: v[0] * v[1],
            "//": lambda: v[0] // v[1], "%": lambda: v[0] % v[1], "min": lambda: min(v), "max": lambda: max(v)}[op]()


trees = st.recursive(
    st.one_of(st.integers(-300, 300), st.sampled_from(["M", "N", "sm"])),
    lambda sub: st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*", "//", "%", "min", "max"]), sub, sub).map(list),
        st.tuples(st.just("neg"), sub).map(list),
    ),
    max_leaves=6,
)


@settings(max_examples=400)
@given(trees, st.integers(0, 5000), st.integers(0, 5000), st.integers(1, 200))
def test_bounds_hold_every_value(tree, lo_m, lo_n, sm):
    """Whenever `bounds` gives an interval, every launch the facts allow
    (here: the extents at, near and far above their lower bounds) evaluates
    inside it, with no division by zero."""
    facts = bound_facts([_expr([">=", "M", lo_m]), _expr(["<=", lo_n, "N"])], [("M", "N", 4)])
    b = bounds(_expr(tree), {"M", "N"}, facts)
    if b is None:
        return
    hi_m, hi_n = facts["M"][1], facts["N"][1]
    for m in {lo_m, lo_m + 1, lo_m + 977, hi_m}:
        for n in {lo_n, lo_n + 3, lo_n + 10_000, hi_n}:
            if m <= hi_m and n <= hi_n:
                assert b[0] <= _value(tree, {"M": m, "N": n, "sm": sm}) <= b[1]


def test_facts_from_assumptions_and_buffer_sizes():
    facts = bound_facts([_expr(["and", [">=", "M", 128], ["<", 63, "K"]])], [("M", "K"), ("N", "K"), ("L", 8)])
    assert facts["M"] == (128, (2**31 - 1) // 64)
    assert facts["K"] == (64, (2**31 - 1) // 128)
    assert facts["N"] == (0, (2**31 - 1) // 64)
    assert facts["L"] == (0, (2**31 - 1) // 8)
    assert bound_facts([_expr(["or", [">=", "M", 1], [">=", "N", 1]])]) == {}  # a disjunction states neither


def _divisors_of(text):
    result = compile_source(text, "div.tile", "sm_90a", options=None)
    k = result.module.kernels[0]
    syms = analyze_kernel(k, result.module, TARGETS["sm_90a"])
    return sorted(syms.divisors), result


DIVS = """
kernel divs(X: i32[n], Q: i32[n], R: i32[n], T: i32[n], U: i32[n]):
    assume(n >= 3)
    bx = cta_id([1])
    tx = thread_id([32])
    i: i32 = tx
    while i < n:
        Q[i] = X[i] // (n - 2)
        R[i] = X[i] % (n - 2)
        T[i] = X[i] // n + X[i] % sm_count()
        v: i32 = X[i]
        v //= max(n - 5, 1)
        U[i] = v + X[i] % (n - 3) - 7 // n
        i += 32
"""


def test_the_divisors_that_qualify():
    found, result = _divisors_of(DIVS)
    # n - 3 may be 0; 7 // n has a constant numerator (still a uniform divisor)
    assert found == ["max(n - 5, 1)", "n", "n - 2", "sm_count()"]
    params = [p for p in result.meta["kernels"][0]["params"] if p["kind"] == "device"]
    assert params[0] == {"name": "__sm_count", "kind": "device", "dtype": "i32", "value": ["sm_count"]}
    assert params[1:3] == [
        {"name": "__div0_mul", "kind": "device", "dtype": "u32", "value": ["magic_mul", ["-", "n", 2]]},
        {"name": "__div0_shift", "kind": "device", "dtype": "u32", "value": ["magic_shift", ["-", "n", 2]]},
    ]
    assert len(params) == 9
    without = DIVS.replace("assume(n >= 3)", "assume(n >= 0)")
    assert _divisors_of(without)[0] == ["max(n - 5, 1)", "sm_count()"]  # n and n - 2 may be 0


def test_divisions_by_uniform_divisors_run_on_the_simulator():
    """Signed numerators over the whole i32 range, one compile, several n;
    no div.s32 or rem.s32 by a register but the rem.s32 by n - 3 (which may be 0)."""
    _, result = _divisors_of(DIVS)
    assemble(result.ptx, "sm_90a")  # no ptxas error or warning
    by_register = re.findall(r"(?:div|rem)\.s32 %r\d+, %r\d+, %r\d+;", result.ptx)
    assert len(by_register) == 1
    assert "mul.hi.u32" in result.ptx
    entry = result.meta["kernels"][0]
    sim = Sim(result.ptx, "divs")
    rng = np.random.default_rng(2)
    for n, sm in ((4, 132), (5, 1), (6, 7), (37, 3), (70, 2)):  # n = 3 would divide by n - 3 = 0
        x = rng.integers(-(2**31), 2**31, n, dtype=np.int64)
        x[:3] = [-(2**31), 2**31 - 1, -1]
        outs = {k: np.zeros(n, np.int32) for k in "QRTU"}
        env = {"n": n, runtime_dims.SM_COUNT: sm}
        hidden = runtime_dims.device_values(entry["params"], env)
        sim.run({"X": x.astype(np.int32), **outs, "n": n, **hidden}, grid=(1, 1, 1))
        xs = [int(v) for v in x]

        def wrap(v):
            return (v + 2**31) % 2**32 - 2**31

        assert outs["Q"].tolist() == [v // (n - 2) for v in xs]
        assert outs["R"].tolist() == [v % (n - 2) for v in xs]
        assert outs["T"].tolist() == [wrap(v // n + v % sm) for v in xs]
        assert outs["U"].tolist() == [wrap(v // max(n - 5, 1) + v % (n - 3) - 7 // n) for v in xs]


def test_the_launch_computes_the_magic_numbers():
    _, result = _divisors_of(DIVS)
    entry = result.meta["kernels"][0]
    x = np.zeros(40, np.int32)
    bound = check_args(entry["params"], [x] * 5, assumes=entry["assumes"], sm_count=132)
    assert bound["__sm_count"].value == 132
    assert (bound["__div0_mul"].value, bound["__div0_shift"].value) == magic(38)
    assert bound["__div0_mul"].data == magic(38)[0].to_bytes(4, "little")
    tampered = [dict(p, value=["magic_mul", ["-", "n", 40]]) if p["name"] == "__div0_mul" else p
                for p in entry["params"]]
    with pytest.raises(LaunchError, match=r"hidden parameter cannot be computed: the divisor \(n - 40\) is 0"):
        check_args(tampered, [x] * 5, assumes=entry["assumes"], sm_count=132)


def test_divisions_the_host_evaluates_take_no_parameters():
    """A divisor in the grid or an assumption is evaluated at launch, not on
    the GPU: no magic numbers for it; the same divisor in the body has them."""
    text = """
kernel k(X: i32[M, N]):
    assume(N >= 1 and M % N == 0)
    bx = cta_id([M // N])
    tx = thread_id([32])
    X[bx, tx] = 1
"""
    assert _divisors_of(text)[0] == []
    assert _divisors_of(text.replace("= 1\n", "= bx // N\n"))[0] == ["N"]

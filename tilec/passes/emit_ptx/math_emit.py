"""The scalar math builtins to PTX (`tilec.compiler.math_fns` has the table).

Each function has a precise form (the default) and, where PTX has a fast
approximate instruction, an `approx=True` form that uses it with `.ftz`.
PTX has only approximate ex2, lg2, sin and cos, so their precise forms use
the non-ftz instruction plus what keeps the error small over the whole
range: `exp` splits x*log2(e) into two floats so the rounding of the
product is not amplified; `sin`/`cos` reduce the argument modulo 2*pi (a
three-part Cody-Waite constant) into the range where sin.approx is
accurate; `tanh` has no precise instruction at all and is computed from
ex2 (large |x|) or its odd Taylor polynomial (small |x|, where the
ex2 formula cancels).  f16/bf16 use a native instruction where PTX has one
(fma, abs, and approx ex2/tanh), otherwise compute in f32 and round once.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.builtins import BUILTINS
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.math_fns import MATH, PACKED
from tilec.passes.emit_ptx.registers import Operand, immediate

_LOG2E = "0f3FB8AA3B"
_LOG2E_LO = "0f32A57060"  # log2(e) - f32(log2(e))
_LN2 = "0f3F317218"
_INV_2PI = "0f3E22F983"
_TWO_PI = ("0f40C90FDB", "0fB43BBD2E", "0fA7F72CED")  # 2*pi = sum of the three, each an f32
_TANH_SMALL = "0f3F0CCCCD"  # 0.55: below it the Taylor polynomial, above the ex2 formula
_TANH_TAYLOR = (  # coefficients of x, x^3, ..., x^15 (truncation < 1 ulp below 0.55)
    1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075, -929569 / 638512875,
)
_HALF = ("f16", "bf16")

# native 16-bit instructions: (function, dtype, approx) -> (opcode, minimum target)
_NATIVE_16 = {
    ("exp2", "f16", True): ("ex2.approx.f16", "sm_80"),
    ("exp2", "bf16", True): ("ex2.approx.ftz.bf16", "sm_90a"),
    ("tanh", "f16", True): ("tanh.approx.f16", "sm_80"),
    ("tanh", "bf16", True): ("tanh.approx.bf16", "sm_90a"),
    ("abs", "f16", False): ("abs.f16", "sm_80"),
    ("abs", "bf16", False): ("abs.bf16", "sm_80"),
}


class MathCalls:
    """Mixed into `KernelEmitter`; uses `value`, `convert`, `reg`, `line`,
    `regs`, `syms`, `target`."""

    def math_call(self, e: ir.Call, t: str) -> Operand:
        fn = MATH[e.func]
        row = BUILTINS[e.func]
        bound = self.syms.bound(e)
        lits = row.signature.literals(e.func, bound, e.span)
        approx = lits.get("approx", False)
        ops = [self.reg(self.value(bound[p.name], t)) for p in row.signature.params if p.kind == "expr"]
        if lits.get("packed") is not None:
            return self._packed(fn.name, lits["packed"], approx, ops, e.span)
        if t in _HALF:
            native = _NATIVE_16.get((fn.name, t, approx))
            if native is not None and self.target.at_least(native[1]):
                return self._op(native[0], t, *ops)
            if fn.name == "fma":
                return self._op(f"fma.rn.{t}", t, *ops)
            wide = [self.convert(o, "f32") for o in ops]
            return self.convert(self._math32(fn.name, wide, approx, e), t, "rn")
        if t == "f64":
            return self._math64(fn.name, ops, approx)
        if t != "f32":
            return self._math_int(fn.name, ops, t)
        return self._math32(fn.name, ops, approx, e)

    # ---- f32 -------------------------------------------------------------

    def _math32(self, f: str, ops, approx: bool, e: ir.Call) -> Operand:
        x = ops[0]
        ftz = ".ftz" if approx else ""
        if f == "exp2":
            return self._op(f"ex2.approx{ftz}.f32", "f32", x)
        if f == "exp":
            return self._exp32(x, approx)
        if f in ("log2", "log"):
            r = self._op(f"lg2.approx{ftz}.f32", "f32", x)
            return r if f == "log2" else self._op("mul.rn.f32", "f32", r, _LN2)
        if f == "sqrt":
            return self._op("sqrt.approx.ftz.f32" if approx else "sqrt.rn.f32", "f32", x)
        if f == "rsqrt":
            if approx:
                return self._op("rsqrt.approx.ftz.f32", "f32", x)
            return self._op("rcp.rn.f32", "f32", self._op("sqrt.rn.f32", "f32", x))
        if f == "rcp":
            return self._op("rcp.approx.ftz.f32" if approx else "rcp.rn.f32", "f32", x)
        if f == "tanh":
            return self._op("tanh.approx.f32", "f32", x) if approx else self._tanh32(x)
        if f in ("sin", "cos"):
            if not approx:
                x = self._reduce_2pi(x)
            return self._op(f"{f}.approx{ftz}.f32", "f32", x)
        if f == "abs":
            return self._op("abs.f32", "f32", x)
        if f == "fma":
            return self._op("fma.rn.f32", "f32", *ops)
        if f == "copysign":  # PTX's operand order: copysign d, sign, magnitude
            return self._op("copysign.f32", "f32", ops[1], ops[0])
        raise TilecError(f"{f} has no f32 lowering", e.span)

    def _exp32(self, x: Operand, approx: bool) -> Operand:
        if approx:
            return self._op("ex2.approx.ftz.f32", "f32", self._op("mul.f32", "f32", x, _LOG2E))
        hi = self._op("mul.rn.f32", "f32", x, _LOG2E)
        lo = self._op("fma.rn.f32", "f32", x, _LOG2E, self._op("neg.f32", "f32", hi))
        lo = self._op("fma.rn.f32", "f32", x, _LOG2E_LO, lo)
        finite = self.regs.temp("bool")
        self.line(f"testp.finite.f32 {finite}, {lo};")  # x = +-inf: 2**hi is already exact
        self.line(f"selp.f32 {lo}, {lo}, 0f00000000, {finite};")
        scale = self._op("fma.rn.f32", "f32", lo, _LN2, "0f3F800000")  # 2**lo ~ 1 + lo*ln2
        return self._op("mul.rn.f32", "f32", self._op("ex2.approx.f32", "f32", hi), scale)

    def _reduce_2pi(self, x: Operand) -> Operand:
        """x - k*2pi with k the nearest integer to x/(2pi), in three fma steps
        so the subtraction is exact for |k| up to about 2**11."""
        k = self._op("cvt.rni.f32.f32", "f32", self._op("mul.rn.f32", "f32", x, _INV_2PI))
        neg_k = self._op("neg.f32", "f32", k)
        r = x
        for part in _TWO_PI:
            r = self._op("fma.rn.f32", "f32", neg_k, part, r)
        return r

    def _tanh32(self, x: Operand) -> Operand:
        a = self._op("abs.f32", "f32", x)
        # large |x|: 1 - 2/(2**(2|x|log2 e) + 1), which saturates to 1 cleanly
        e = self._op("ex2.approx.f32", "f32", self._op("mul.rn.f32", "f32", a, "0f4038AA3B"))
        q = self._op("rcp.rn.f32", "f32", self._op("add.rn.f32", "f32", e, "0f3F800000"))
        big = self._op("fma.rn.f32", "f32", q, "0fC0000000", "0f3F800000")
        # small |x|: x * P(x^2), Horner in fma
        x2 = self._op("mul.rn.f32", "f32", a, a)
        p = self._imm32(_TANH_TAYLOR[-1])
        for c in reversed(_TANH_TAYLOR[:-1]):
            p = self._op("fma.rn.f32", "f32", p, x2, self._imm32(c))
        small = self._op("mul.rn.f32", "f32", p, a)
        is_small = self.regs.temp("bool")
        self.line(f"setp.lt.f32 {is_small}, {a}, {_TANH_SMALL};")
        mag = self.regs.temp("f32")
        self.line(f"selp.f32 {mag}, {small}, {big}, {is_small};")
        return self._op("copysign.f32", "f32", x, mag)

    def _packed(self, f: str, kind: str, approx: bool, ops, span) -> Operand:
        opcode, oldest, approx_only = PACKED[f, kind]  # the signatures offer `packed` only where it exists
        if approx_only and not approx:
            raise TilecError(f"{kind} {f} exists only as {opcode}: write approx=True", span)
        if not self.target.at_least(oldest):
            raise TilecError(f"{opcode} needs {oldest} or newer (target is {self.target.name})", span)
        return self._op(opcode, "u32", *ops)

    # ---- f64 and integers -------------------------------------------------

    def _math64(self, f: str, ops, approx: bool) -> Operand:
        x = ops[0]
        if f == "sqrt":
            return self._op("sqrt.rn.f64", "f64", x)
        if f == "rcp":
            return self._op("rcp.approx.ftz.f64" if approx else "rcp.rn.f64", "f64", x)
        if f == "rsqrt":
            if approx:
                return self._op("rsqrt.approx.f64", "f64", x)
            return self._op("rcp.rn.f64", "f64", self._op("sqrt.rn.f64", "f64", x))
        if f == "abs":
            return self._op("abs.f64", "f64", x)
        if f == "fma":
            return self._op("fma.rn.f64", "f64", *ops)
        if f == "copysign":
            return self._op("copysign.f64", "f64", ops[1], ops[0])
        raise AssertionError(f)  # math_fns refuses the rest for f64

    def _math_int(self, f: str, ops, t: str) -> Operand:
        signed = t[0] == "i"
        bits = t[1:]
        if f == "abs":
            return self._op(f"abs.s{bits}", t, ops[0]) if signed else ops[0]
        if f == "fma":
            return self._op(f"mad.lo.{'s' if signed else 'u'}{bits}", t, *ops)
        raise AssertionError(f)  # math_fns refuses the rest for integers

    # ---- helpers ------------------------------------------------------------

    def _imm32(self, v: float) -> str:
        return immediate(v, "f32").text

    def _op(self, opcode: str, t: str, *srcs) -> Operand:
        d = self.regs.temp(t)
        self.line(f"{opcode} {d}, {', '.join([str(s) for s in srcs])};")
        return d

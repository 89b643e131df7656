"""Expressions to PTX: values in typed virtual registers.

Types come from `KernelSymbols.type_of`, so the emitter and the verifier
agree on what `a + 1` is.  Arithmetic folds when both operands are
immediates, which is what keeps address arithmetic on constant indices free.
Integer `//` and `%` have Python's floor semantics (shifts and masks for
powers of two, a multiply-high by magic numbers for an i32 or u32 divided by
a positive constant and for an i32 divided by a uniform divisor
(`runtime_dims.uniform_divisors`: launch-time numbers), a corrected div/rem
otherwise).  f16/bf16 arithmetic is done
in f32 and rounded back once, which gives the correctly rounded result for
+ - * / and needs no sm_90-only bf16 instructions.  Float + - * use `.rn`
so ptxas cannot contract them into an fma and change results.
"""
from __future__ import annotations

import struct
from typing import Optional

from tilec.compiler.runtime_dims import I32_MAX, SM_COUNT, SM_COUNT_PARAM, UniformDivisor, divisor_key, magic
from tilec.compiler import intrinsics, ir, visit
from tilec.compiler.builtins import BUILTINS
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.math_fns import MATH
from tilec.compiler.value_types import (FLOAT_TYPES, FP8_TYPES, NARROW_INT_TYPES, POINTER_TYPES, is_float, is_int,
                                       is_signed)
from tilec.passes.emit_ptx.registers import Operand, bit_type, immediate, ptx_type, width
from tilec.passes.emit_ptx.replay import REPLAYED

_SETP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_INT_OPS = {"+": "add", "-": "sub", "*": "mul.lo", "&": "and", "|": "or", "^": "xor"}
_FLOAT_OPS = {"+": "add.rn", "-": "sub.rn", "*": "mul.rn", "/": "div.rn"}
_ROUND_INT = {"rn": "rni", "rz": "rzi", "rm": "rmi", "rp": "rpi"}
_HALF = ("f16", "bf16")


def _compound(e: ir.Expr) -> bool:
    """Whether `e` (of a `REPLAYED` class) has an operand of one: an
    operation on leaves emits one instruction or two, which a replay would
    not make cheaper (`a + b`, and every `acc += x` of an unrolled loop)."""
    kind = type(e)
    if kind is ir.Binary:
        return type(e.lhs) in REPLAYED or type(e.rhs) in REPLAYED
    if kind is ir.Unary:
        return type(e.operand) in REPLAYED
    return True


def _is_int_like(t: str) -> bool:
    return is_int(t) or t in POINTER_TYPES


def wrap(v: int, t: str) -> int:
    bits = width(t)
    v &= (1 << bits) - 1
    if is_signed(t) and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def imm_value(op: Operand):
    """The Python value of an immediate operand."""
    t = op.type
    if t == "f32":
        return struct.unpack("<f", struct.pack("<I", int(op.text[2:], 16)))[0]
    if t == "f64":
        return struct.unpack("<d", struct.pack("<Q", int(op.text[2:], 16)))[0]
    if t in _HALF:
        bits = int(op.text, 16)
        if t == "f16":
            return struct.unpack("<e", struct.pack("<H", bits))[0]
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    if t == "bool":
        return op.text == "1"
    return int(op.text)


def _pow2(v) -> Optional[int]:
    if isinstance(v, int) and v > 0 and v & (v - 1) == 0:
        return v.bit_length() - 1
    return None


def _fold(op: str, a, b, t: str):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "<<":
        return a << b
    if op == ">>":
        return a >> b
    raise AssertionError(op)


class Expressions:
    """Mixed into `KernelEmitter`; uses its `line`, `regs`, `syms`,
    `binding`, `load`, `address_of_expr`, `ptr_to` and `call_intrinsic`."""

    # ---- operands -------------------------------------------------------

    def imm(self, value, t: str, span=None) -> Operand:
        """`value` as an immediate of type `t`; those of integers are kept
        per kernel (address arithmetic on constant indices asks for the same
        few thousand times), and those of non-zero floats (an unrolled loop
        names its constants again in every copy; 0.0 and -0.0 are equal
        keys of different immediates)."""
        kind = type(value)
        if kind is int or kind is float and value:
            kept = self.int_immediates if kind is int else self.float_immediates
            key = (value, t)
            op = kept.get(key)
            if op is None:
                op = kept[key] = self._immediate(value, t, span)
            return op
        return self._immediate(value, t, span)

    def _immediate(self, value, t: str, span) -> Operand:
        try:
            return immediate(value, t)
        except (OverflowError, ValueError):
            raise TilecError(f"{value!r} does not fit in {t}", span) from None

    def reg(self, op: Operand) -> Operand:
        """`op` in a register (immediates are moved into a fresh one)."""
        if op.is_reg:
            return op
        d = self.regs.temp(op.type)
        if op.type == "bool":
            self.line(f"setp.ne.u32 {d}, {op.text}, 0;")
        else:
            self.line(f"mov.{bit_type(op.type)} {d}, {op.text};")
        return d

    # ---- expressions ----------------------------------------------------

    def value(self, e: ir.Expr, want: Optional[str] = None, replay: bool = True) -> Operand:
        """Evaluate `e`; with `want`, implicitly converted to that type (the
        conversion is one `value_types.assignable` allows, checked by callers).
        An expression of operands and arithmetic is replayed when its shape
        was emitted before (`replay.py`); `replay=False` emits it (what a
        recording records)."""
        kind = type(e)
        how = self.value_functions.get(kind)  # node classes have no subclasses: one look, not a chain of isinstance
        if how is None:
            return self.literal(e, want)
        if replay and kind in REPLAYED and _compound(e):
            sid = self.shape(e)
            if sid is not None:
                key, params = self.value_key(sid, want)
                if key is not None:
                    return self.replayed(key, params, lambda: (self.value(e, want, False),))[0]
        op = how(self, e)
        if want is not None and op.type != want:
            op = self.convert(op, want, None, e.span)
        return op

    def literal(self, e: ir.Expr, want: Optional[str]) -> Operand:
        """A literal as an immediate of type `want` (or its own); a located
        error for any other expression that is not a value."""
        kind = type(e)
        if kind not in (ir.Int, ir.Float, ir.Bool):
            self.syms.type_of(e)  # raises the located error for non-values
            raise TilecError(f"cannot emit {kind.__name__}", e.span)
        t = want or self.syms.type_of(e)
        if kind is ir.Bool and t != "bool":
            raise TilecError(f"expected a {t}, found a bool", e.span)
        if kind is not ir.Bool and t == "bool":
            raise TilecError("expected a bool", e.span)
        if kind is ir.Float and _is_int_like(t):
            raise TilecError(f"a float literal is not a {t}", e.span)
        return self.imm(e.value, t, e.span)

    def method_value(self, e: ir.Method) -> Operand:
        self.syms.type_of(e)
        return self.ptr_to(e)

    def binary(self, e: ir.Binary) -> Operand:
        op = e.op
        if op in ("and", "or"):
            return self.logic(e)
        if op in ("<<", ">>"):
            t = self.syms.type_of(e)
            return self.arith(op, self.value(e.lhs, t), self.value(e.rhs, "u32"), t)
        t = self.syms.operand_type(e)
        if op in ("//", "%") and t == "i32" and self.syms.divisors:  # (the key is the divisor's text)
            div = self.syms.divisors.get(divisor_key(e.rhs))
            if div is not None:
                return self.uniform_divmod(op, self.value(e.lhs, t), e.rhs, div)
        a, b = self.value(e.lhs, t), self.value(e.rhs, t)
        if op in _SETP:
            return self.compare(op, a, b)
        r = self.arith(op, a, b, t)
        result = self.syms.type_of(e)
        return r if r.type == result else self.reinterpret(r, result)  # address - address

    def logic(self, e: ir.Binary) -> Operand:
        """`and`/`or` on predicates.  Short-circuits (with a branch) when the
        right side reads memory or calls something, so `i < n and A[i] > 0`
        never loads out of bounds."""
        self.syms.type_of(e)
        a = self.value(e.lhs, "bool")
        if not _has_effects(e.rhs):
            b = self.value(e.rhs, "bool")
            return self.arith("&" if e.op == "and" else "|", a, b, "bool")
        d = self.regs.temp("bool")
        self.line(f"mov.pred {d}, {self.reg(a)};")
        skip = self.regs.label("sc")
        self.line(f"@{'!' if e.op == 'and' else ''}{d} bra {skip};")
        b = self.reg(self.value(e.rhs, "bool"))
        self.line(f"mov.pred {d}, {b};")
        self.line(f"{skip}:")
        return d

    def arith(self, op: str, a: Operand, b: Operand, t: str) -> Operand:
        """`a op b` on operands already of type `t` (the shift amount `b` is u32)."""
        floating = t in FLOAT_TYPES
        if not a.is_reg and not b.is_reg and t != "bool" and not floating:
            x, y = imm_value(a), imm_value(b)
            if not (op in ("//", "%") and y == 0):
                return self.imm(wrap(_fold(op, x, y, t), t), t)
        if t == "bool":
            return self._binop(f"{ {'&': 'and', '|': 'or', '^': 'xor'}[op]}.pred", a, b, t)
        if t in _HALF:
            r = self.arith(op, self.convert(a, "f32"), self.convert(b, "f32"), "f32")
            return self.convert(r, t, "rn")
        if floating:
            if op == "//":
                q = self._binop(f"div.rn.{t}", a, b, t)
                return self._unop(f"cvt.rmi.{t}.{t}", q, t)
            return self._binop(f"{_FLOAT_OPS[op]}.{t}", a, b, t)
        return self.int_arith(op, a, b, t)

    def int_arith(self, op: str, a: Operand, b: Operand, t: str) -> Operand:
        pt, bt = ptx_type(t), bit_type(t)
        bv = None if b.is_reg else imm_value(b)
        av = None if a.is_reg else imm_value(a)
        # identities that keep index arithmetic short
        if op in ("+", "-", "|", "^", "<<", ">>") and bv == 0:
            return a
        if op == "+" and av == 0:
            return b
        if op == "*" and (bv == 0 or av == 0):
            return self.imm(0, t)
        if op in ("*", "//") and bv == 1:
            return a
        if op == "*" and av == 1:
            return b
        if op == "%" and bv == 1:
            return self.imm(0, t)
        if op in ("*", "//", "%"):  # powers of two: shifts and masks
            shift = _pow2(bv)
            if shift is not None:
                if op == "*":
                    return self._binop(f"shl.{bt}", a, self.imm(shift, "u32"), t)
                if op == "//":
                    return self._binop(f"shr.{pt}", a, self.imm(shift, "u32"), t)
                return self._binop(f"and.{bt}", a, self.imm(bv - 1, t), t)
            shift = _pow2(av) if op == "*" else None
            if shift is not None:
                return self._binop(f"shl.{bt}", b, self.imm(shift, "u32"), t)
        if op in ("//", "%") and t in ("i32", "u32") and bv is not None and 3 <= bv <= I32_MAX:
            return self.constant_divmod(op, a, bv, t)
        if op in _INT_OPS:
            name = _INT_OPS[op]
            suffix = bt if name in ("and", "or", "xor") else pt
            return self._binop(f"{name}.{suffix}", a, b, t)
        if op == "<<":
            return self._binop(f"shl.{bt}", a, b, t)
        if op == ">>":
            return self._binop(f"shr.{pt}", a, b, t)
        if op in ("//", "%"):
            return self.floor_divmod(op, a, b, t)
        raise AssertionError(op)

    def uniform_divmod(self, op: str, a: Operand, divisor: ir.Expr, div: UniformDivisor) -> Operand:
        """Python's `a // d` or `a % d` for an i32 `a` and a divisor `d` the
        launch knows to be in [1, 2**31 - 1], by the magic numbers the
        launch passes (`magic_divmod`; d is evaluated only for `%`)."""
        mul = self.binding(ir.Name(div.mul_param))
        shift = self.binding(ir.Name(div.shift_param))
        return self.magic_divmod(op, a, mul, shift, lambda: self.value(divisor, "i32"), "i32")

    def magic_divmod(self, op: str, a: Operand, mul: Operand, shift: Operand, d, t: str) -> Operand:
        """Python's `a // d` or `a % d` for an i32 or u32 `a` and a divisor
        in [1, 2**31 - 1] with magic numbers `mul` and `shift`
        (`runtime_dims.magic`); `d()` gives the divisor, asked for only by
        `%` (r = a - q * d).  An i32: with u = a ^ (a >> 31) (a, or ~a when
        negative: below 2**31 either way), u // d is (umulhi(u, mul) + u) >>
        shift, and xor-ing the sign back gives the floor.  A u32 may reach
        2**32 - 1: (t + ((u - t) >> 1)) >> (shift - 1) with t = umulhi(u,
        mul), for a shift of at least 1 (a divisor of at least 2)."""
        if t == "u32":
            hi = self._binop("mul.hi.u32", a, mul, t)
            half = self._binop("shr.u32", self._binop("sub.u32", a, hi, t), self.imm(1, "u32"), t)
            shift = self.imm(imm_value(shift) - 1, "u32")
            q = self._binop("shr.u32", self._binop("add.u32", hi, half, t), shift, t)
            if op == "//":
                return q
            return self._binop("sub.u32", a, self._binop("mul.lo.u32", q, d(), t), t)
        if a.is_reg:
            sign = self._binop("shr.s32", a, self.imm(31, "u32"), "i32")
            u = self.reinterpret(self._binop("xor.b32", a, sign, "i32"), "u32")
        else:  # a constant numerator: u and the sign are known
            v = imm_value(a)
            sign = None if v >= 0 else self.imm(-1, "i32")
            u = self.imm(v if v >= 0 else ~v, "u32")
        hi = self._binop("mul.hi.u32", u, mul, "u32")
        q = self.reinterpret(self._binop("shr.u32", self._binop("add.u32", hi, u, "u32"), shift, "u32"), "i32")
        if sign is not None:
            q = self._binop("xor.b32", q, sign, "i32")
        if op == "//":
            return q
        return self._binop("sub.s32", a, self._binop("mul.lo.s32", q, d(), "i32"), "i32")

    def constant_divmod(self, op: str, a: Operand, d: int, t: str) -> Operand:
        """Python's `a // d` or `a % d` for a constant divisor d in [3, 2**31
        - 1], not a power of two: a multiply-high by immediate magic
        numbers.  ptxas does not do this itself: it divides by an
        immediate as by a register, with a float reciprocal (I2F, MUFU.RCP,
        F2I) and some fifteen more instructions, at every use."""
        mul, shift = magic(d)
        return self.magic_divmod(op, a, self.imm(mul, "u32"), self.imm(shift, "u32"), lambda: self.imm(d, t), t)

    def floor_divmod(self, op: str, a: Operand, b: Operand, t: str) -> Operand:
        """Python's `//` or `%`: PTX div/rem truncate, so a signed result is
        corrected when the remainder is non-zero and its sign differs from
        the divisor's."""
        pt = ptx_type(t)
        q = self._binop(f"div.{pt}", a, b, t) if op == "//" else None
        r = self._binop(f"rem.{pt}", a, b, t)
        if not is_signed(t):
            return q if op == "//" else r
        fix = self.compare("!=", r, self.imm(0, t))
        x = self._binop(f"xor.{bit_type(t)}", r, b, t)
        neg = self.compare("<", x, self.imm(0, t))
        self.line(f"and.pred {fix}, {fix}, {neg};")
        if op == "//":
            self.line(f"@{fix} sub.{pt} {q}, {q}, 1;")
            return q
        self.line(f"@{fix} add.{pt} {r}, {r}, {b};")
        return r

    def compare(self, op: str, a: Operand, b: Operand) -> Operand:
        t = a.type
        if not a.is_reg and not b.is_reg and not is_float(t):
            x, y = imm_value(a), imm_value(b)
            result = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
            return immediate(result, "bool")
        if t == "bool":
            d = self._binop("xor.pred", a, b, t)
            if op == "==":
                self.line(f"not.pred {d}, {d};")
            return d
        if t in _HALF:
            return self.compare(op, self.convert(a, "f32"), self.convert(b, "f32"))
        cmp = _SETP[op]
        if is_float(t) and op == "!=":
            cmp = "neu"  # true for NaN, like Python
        d = self.regs.temp("bool")
        self.line(f"setp.{cmp}.{ptx_type(t)} {d.text}, {a.text}, {b.text};")
        return d

    def unary(self, e: ir.Unary) -> Operand:
        t = self.syms.type_of(e)
        a = self.value(e.operand, t)
        if not a.is_reg and t not in _HALF:
            v = imm_value(a)
            if e.op == "not":
                return immediate(not v, "bool")
            if e.op == "-" and is_float(t):
                return self.imm(-v, t)
            return self.imm(wrap(-v if e.op == "-" else ~v, t), t)
        if e.op == "not":
            return self._unop("not.pred", a, t)
        if e.op == "~":
            return self._unop(f"not.{bit_type(t)}", a, t)
        if t in _HALF:
            return self._binop("xor.b16", a, self.imm(0x8000, "u32"), t)
        return self._unop(f"neg.{ptx_type(t) if is_float(t) else 's' + str(width(t))}", a, t)

    def _register_read(self, index: ir.Index) -> bool:
        """Whether `index` names a register: an element of a local buffer at
        constant indices, never indexed at run time (so not in local memory).
        A select of registers needs no branch (`x = inside ? x : 0.0`)."""
        buf = self.syms.buffers.get(index.base.id) if isinstance(index.base, ir.Name) else None
        return (buf is not None and buf.scope == "local" and buf.storage not in self.syms.runtime_indexed
                and all(isinstance(i, ir.Int) for i in index.indices))

    def select(self, e: ir.Select) -> Operand:
        t = self.syms.type_of(e)
        c = self.value(e.cond, "bool")
        if _has_effects(e.then, self._register_read) or _has_effects(e.orelse, self._register_read):
            d = self.regs.temp(t)
            other, done = self.regs.label("else"), self.regs.label("endsel")
            self.line(f"@!{self.reg(c)} bra {other};")
            self.assign_reg(d, self.value(e.then, t))
            self.line(f"bra.uni {done};")
            self.line(f"{other}:")
            self.assign_reg(d, self.value(e.orelse, t))
            self.line(f"{done}:")
            return d
        a, b = self.value(e.then, t), self.value(e.orelse, t)
        if not c.is_reg:
            return a if imm_value(c) else b
        d = self.regs.temp(t)
        if t == "bool":
            self.line(f"@{c} mov.pred {d}, {self.reg(a)};")
            self.line(f"@!{c} mov.pred {d}, {self.reg(b)};")
        else:
            kind = bit_type(t) if t in _HALF else ptx_type(t)
            self.line(f"selp.{kind} {d}, {a}, {b}, {c};")
        return d

    def assign_reg(self, dst: Operand, src: Operand) -> None:
        """`dst = src` for a register `dst` of the same type."""
        if dst.type == "bool":
            if src.is_reg:
                self.line(f"mov.pred {dst.text}, {src.text};")
            else:
                self.line(f"setp.ne.u32 {dst.text}, {src.text}, 0;")
        else:
            self.line(f"mov.{bit_type(dst.type)} {dst.text}, {src.text};")

    # ---- calls ----------------------------------------------------------

    def call_value(self, e: ir.Call) -> Operand:
        f = e.func
        t = self.syms.type_of(e)  # validates the call as a value
        if f in MATH:  # (no math function is in an intrinsic namespace)
            return self.math_call(e, t)
        if intrinsics.is_intrinsic_name(f):
            return self.call_intrinsic(e)
        if f == SM_COUNT:
            return self.binding(ir.Name(SM_COUNT_PARAM, span=e.span))
        row = BUILTINS[f]
        bound = self.syms.bound(e)
        if f in ("min", "max"):
            a, b = self.value(bound["a"], t), self.value(bound["b"], t)
            if not a.is_reg and not b.is_reg and not is_float(t):
                x, y = imm_value(a), imm_value(b)
                return self.imm(min(x, y) if f == "min" else max(x, y), t)
            if t in _HALF:
                r = self._binop(f"{f}.f32", self.convert(a, "f32"), self.convert(b, "f32"), "f32")
                return self.convert(r, t, "rn")
            return self._binop(f"{f}.{ptx_type(t)}", a, b, t)
        if f in ("convert", "reinterpret"):
            lits = row.signature.literals(f, bound, e.span)
            narrow = lits["dtype"] if lits["dtype"] in NARROW_INT_TYPES else None
            x = self.value(bound["x"])
            if narrow is not None:
                return self._narrow(x, narrow, lits.get("rounding"), f == "reinterpret", e.span)
            if f == "convert":
                return self.convert(x, t, lits["rounding"], e.span, explicit=True)
            return self.reinterpret(x, t)
        if f in ("pack_f16x2", "pack_bf16x2"):
            lits = row.signature.literals(f, bound, e.span)
            lo, hi = self.value(bound["lo"], "f32"), self.value(bound["hi"], "f32")
            d = self.regs.temp("u32")
            kind = "f16x2" if f == "pack_f16x2" else "bf16x2"
            self.line(f"cvt.{lits['rounding']}.{kind}.f32 {d}, {self.reg(hi)}, {self.reg(lo)};")
            return d
        if f == "address_of":
            return self.address_of_expr(bound["x"], e.span)
        raise AssertionError(f)

    # ---- conversions ----------------------------------------------------

    def _narrow(self, a: Operand, dtype: str, rounding: Optional[str], bits_of: bool, span) -> Operand:
        """An 8- or 16-bit integer value, widened to i32 / u32 as elements of
        that dtype read: a float rounds (toward zero by default) and
        saturates to the dtype's range (`cvt.rzi.u16.f32`), an integer
        keeps its low bits, sign- or zero-extended (`bfe`); with `bits_of`
        (reinterpret) a 16- or 8-bit float's own bits."""
        signed = dtype.startswith("i")
        bits = 8 if dtype.endswith("8") else 16
        wide = "i32" if signed else "u32"
        a = self.reg(a)
        d = self.regs.temp(wide)
        kind = f"{'s' if signed else 'u'}{bits}"
        if bits_of:  # a 16-bit register holding the float's bits
            self.line(f"cvt.u32.u16 {d}, {a};")
            self.line(f"bfe.{'s' if signed else 'u'}32 {d}, {d}, 0, {bits};")
        elif is_float(a.type) or a.type in FP8_TYPES:
            src = a if is_float(a.type) else self.convert(a, "f32", None, span)
            h = self.regs.temp("f16")  # a 16-bit register
            self.line(f"cvt.{_ROUND_INT[rounding or 'rz']}.{kind}.{ptx_type(src.type)} {h}, {src};")
            self.line(f"cvt.{'s' if signed else 'u'}32.{kind} {d}, {h};")
        else:
            if rounding is not None:
                raise TilecError(f"converting {a.type} to {dtype} is exact and takes no rounding", span)
            self.line(f"bfe.{'s' if signed else 'u'}32 {d}, {self.reg(self.convert(a, wide, None, span))}, 0, {bits};")
        return d

    def reinterpret(self, a: Operand, t: str) -> Operand:
        if _reg_class(a.type) == _reg_class(t):
            return Operand(a.text, t, a.is_reg, a.temp)
        d = self.regs.temp(t)
        self.line(f"mov.{bit_type(t)} {d}, {a};")
        return d

    def convert(self, a: Operand, t: str, rounding: Optional[str] = None, span=None,
                explicit: bool = False) -> Operand:
        """`a` as a `t`.  `rounding` (rn, rz, rm, rp) applies to conversions
        that round; giving one to an exact conversion is an error."""
        s = a.type
        if s == t:
            if rounding is not None and explicit:
                raise TilecError(f"converting {s} to {t} is exact and takes no rounding", span)
            return a
        if s == "bool" or t == "bool":
            raise TilecError(f"cannot convert {s} to {t}", span)
        if s in FP8_TYPES or t in FP8_TYPES:
            return self._convert_fp8(a, s, t, rounding, span)
        rounds = _rounds(s, t)
        if rounding is not None and not rounds:
            raise TilecError(f"converting {s} to {t} is exact and takes no rounding", span)
        if not a.is_reg and not (is_float(s) and _is_int_like(t)) and not rounding:
            v = imm_value(a)
            if _is_int_like(t):
                return self.imm(wrap(v, t), t, span)
            if t in _HALF or (is_float(s) and width(t) < width(s)):
                return self.convert(self.reg(a), t, rounding, span)
            return self.imm(float(v), t, span)
        a = self.reg(a)
        if _is_int_like(s) and _is_int_like(t):
            if width(s) == width(t):
                return Operand(a.text, t, True, a.temp)
            return self._unop(f"cvt.{_int_ptx(t)}.{_int_ptx(s)}", a, t)
        if s == "bf16" and t != "f32" or t == "bf16" and s != "f32":
            # bf16 converts directly only to and from f32 on every target
            return self.convert(self.convert(a, "f32", rounding if t == "f32" else None, span), t,
                                rounding if t == "bf16" else None, span)
        if _is_int_like(s):  # int -> float
            return self._unop(f"cvt.{rounding or 'rn'}.{ptx_type(t)}.{_int_ptx(s)}", a, t)
        if _is_int_like(t):  # float -> int
            return self._unop(f"cvt.{_ROUND_INT[rounding or 'rz']}.{_int_ptx(t)}.{ptx_type(s)}", a, t)
        if width(t) > width(s):
            return self._unop(f"cvt.{ptx_type(t)}.{ptx_type(s)}", a, t)
        return self._unop(f"cvt.{rounding or 'rn'}.{ptx_type(t)}.{ptx_type(s)}", a, t)

    # ---- instruction helpers ---------------------------------------------

    def _binop(self, opcode: str, a: Operand, b: Operand, t: str) -> Operand:
        d = self.regs.temp(t)
        if not a.is_reg and not b.is_reg:
            a = self.reg(a)
        self.line(f"{opcode} {d.text}, {a.text}, {b.text};")
        return d

    def _convert_fp8(self, a: Operand, s: str, t: str, rounding: Optional[str], span) -> Operand:
        """To and from an 8-bit float, through the paired conversions of
        sm_89 and later [PTX 9.7.9.21 cvt]: `cvt.rn.f16x2.e4m3x2` widens the
        low byte of a 16-bit register (with the high byte as the second
        value, unused here); `cvt.rn.satfinite.e4m3x2.f32` / `.f16x2` narrow
        two values into one (the second given as 0, so the byte lands low,
        its neighbour zero).  Narrowing rounds to nearest and saturates to
        the largest finite value (448 for e4m3, 57344 for e5m2); NaN stays
        NaN.  bf16 goes through f32, another 8-bit float through f16."""
        if self.target.sm < 89:
            raise TilecError(f"converting {s} to {t} needs sm_89 or newer (cvt .{(s if s in FP8_TYPES else t)}x2); "
                             f"the target is {self.target}", span)
        if rounding not in (None, "rn") and t in FP8_TYPES:
            raise TilecError(f"converting {s} to {t} rounds to nearest (rn) only, got {rounding}", span)
        a = self.reg(a)
        if s in FP8_TYPES:
            pair = self.regs.temp("u32")
            self.line(f"cvt.rn.f16x2.{s}x2 {pair}, {a};")
            half, unused = self.regs.temp("f16"), self.regs.temp("f16")
            self.line(f"mov.b32 {{{half}, {unused}}}, {pair};")
            return half if t == "f16" else self.convert(half, t, rounding, span)
        d = self.regs.temp(t)
        if s == "f32":
            self.line(f"cvt.rn.satfinite.{t}x2.f32 {d}, 0f00000000, {a};")
        elif s == "f16":
            pair = self.regs.temp("u32")
            self.line(f"mov.b32 {pair}, {{{a}, 0}};")
            self.line(f"cvt.rn.satfinite.{t}x2.f16x2 {d}, {pair};")
        else:  # bf16: exactly to f32 first
            return self.convert(self.convert(a, "f32", None, span), t, None, span)
        return d

    def _unop(self, opcode: str, a: Operand, t: str) -> Operand:
        d = self.regs.temp(t)
        self.line(f"{opcode} {d.text}, {self.reg(a).text};")
        return d


VALUE_OF = {
    ir.Name: "binding",
    ir.Binary: "binary",
    ir.Unary: "unary",
    ir.Select: "select",
    ir.Index: "load",
    ir.Method: "method_value",
    ir.Call: "call_value",
}
"""The method of `Expressions.value` for each class of expression node but literals."""


def _int_ptx(t: str) -> str:
    if t in POINTER_TYPES:
        return f"u{width(t)}"
    return ptx_type(t)


def _reg_class(t: str) -> str:
    if is_float(t) and t not in _HALF:
        return t
    return bit_type(t)


def _rounds(s: str, t: str) -> bool:
    """Whether converting s to t can round (and so takes a rounding mode)."""
    if _is_int_like(s) and _is_int_like(t):
        return False
    if _is_int_like(s) or _is_int_like(t):
        return True
    return width(t) < width(s) or {s, t} == {"f16", "bf16"}


_PURE_CALLS = ("min", "max", "convert", "reinterpret", "pack_f16x2", "pack_bf16x2", "address_of", SM_COUNT) + tuple(MATH)


def _has_effects(e: ir.Expr, register=lambda index: False) -> bool:
    """Whether evaluating `e` may fault or act (a load, an intrinsic call).
    `register(index)`: whether an element read is a register's (which
    neither faults nor acts)."""
    return any(
        isinstance(n, ir.Index) and not register(n) or (isinstance(n, ir.Call) and n.func not in _PURE_CALLS)
        for n in visit.walk(e)
    )

"""The scalar math builtins: which value types each takes and what it
returns.  The symbol analysis (types), the verifier and the emitter
(`tilec.passes.emit_ptx.math_emit`) all read this one table, so a new
function is one row here, one in `builtins`, and its lowering.

Every function returns the type of its (promoted) operands.  Floating-point
functions take f16, bf16 and f32 (and, where PTX has an f64 instruction,
f64); an integer literal operand is an f32.  `abs`, `min`, `max` and `fma`
also take integers.  `approx=True` picks PTX's fast approximate instruction
(flushing subnormals) where the function has one; docs/language.md lists
the instruction each form becomes and its accuracy.
"""
from __future__ import annotations

from typing import Dict, FrozenSet


from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError


@records.frozen
class MathFn:
    name: str
    arity: int
    approx: bool  # whether `approx=True` selects a different (faster) form
    ints: bool  # whether integer operands are allowed
    f64: bool  # whether PTX has an f64 form


_ROWS = [
    MathFn("exp2", 1, True, False, False),
    MathFn("exp", 1, True, False, False),
    MathFn("log2", 1, True, False, False),
    MathFn("log", 1, True, False, False),
    MathFn("sqrt", 1, True, False, True),
    MathFn("rsqrt", 1, True, False, True),
    MathFn("rcp", 1, True, False, True),
    MathFn("tanh", 1, True, False, False),
    MathFn("sin", 1, True, False, False),
    MathFn("cos", 1, True, False, False),
    MathFn("abs", 1, False, True, True),
    MathFn("fma", 3, False, True, True),
    MathFn("copysign", 2, False, False, True),
]

MATH: Dict[str, MathFn] = {r.name: r for r in _ROWS}

FLOATS: FrozenSet[str] = frozenset({"f16", "bf16", "f32", "f64"})

PACKED = {
    ("exp2", "f16x2"): ("ex2.approx.f16x2", "sm_80", True),
    ("exp2", "bf16x2"): ("ex2.approx.ftz.bf16x2", "sm_90a", True),
    ("tanh", "f16x2"): ("tanh.approx.f16x2", "sm_80", True),
    ("tanh", "bf16x2"): ("tanh.approx.bf16x2", "sm_90a", True),
    ("fma", "f16x2"): ("fma.rn.f16x2", "sm_80", False),
    ("fma", "bf16x2"): ("fma.rn.bf16x2", "sm_80", False),
    ("abs", "f16x2"): ("abs.f16x2", "sm_80", False),
    ("abs", "bf16x2"): ("abs.bf16x2", "sm_80", False),
}
"""`packed="f16x2"|"bf16x2"`: (the instruction, the oldest target that has
it, whether it exists only as an approximation).  The operands and result
are u32 words of two halves (`pack_f16x2`), low half first; PTX has no
other packed math, so these forms do not fall back."""


def result_type(fn: MathFn, operand_type: str, span) -> str:
    """The type `fn` computes in for operands promoted to `operand_type`, or
    a located error saying what to do instead."""
    t = operand_type
    if t in FLOATS:
        if t == "f64" and not fn.f64:
            raise TilecError(f"{fn.name} has no f64 form in PTX; convert the operand to f32", span)
        return t
    if fn.ints and t in ("i32", "u32", "i64", "u64"):
        return t
    if t in ("i32", "u32", "i64", "u64", "i16", "u16", "i8", "u8"):
        raise TilecError(
            f"{fn.name} takes floating-point operands (f16, bf16, f32), got {t}: use convert(x, f32)", span
        )
    raise TilecError(f"{fn.name} cannot take a {t}", span)


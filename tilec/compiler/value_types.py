"""The types of scalar values: dtype names (sub-32-bit integers are widened
to i32/u32 when read, as in C), "bool", and the address types "shared_ptr"
(a 32-bit shared-window address), "global_ptr" and "generic_ptr" (64-bit);
their widths, C's usual promotions, and which conversions are implicit.
The kernel analysis (`symbols`), dispatch and the emitter share them.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES

POINTER_TYPES = {"shared_ptr": 32, "global_ptr": 64, "generic_ptr": 64}
INT_TYPES = ("i32", "u32", "i64", "u64")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
FP8_TYPES = ("e4m3", "e5m2")
"""8-bit floats as values: a register holds one (in a 16-bit register), and
they are read, written, assigned and converted (`convert`, to and from f16,
bf16 and f32), but take no arithmetic: the hardware has none for them
outside the tensor core."""
VALUE_TYPES = frozenset(INT_TYPES + FLOAT_TYPES + FP8_TYPES + ("bool",) + tuple(POINTER_TYPES))
NARROW_INT_TYPES = ("i8", "u8", "i16", "u16")
"""Integers narrower than a register: elements of these dtypes are read as
i32 / u32 (C's promotion), and `convert(x, u16)` / `reinterpret(h, u16)`
produce an i32 / u32 holding exactly the 8- or 16-bit value."""


def type_bits(t: str) -> int:
    if t in POINTER_TYPES:
        return POINTER_TYPES[t]
    if t == "bool":
        return 1
    return DTYPES[t].bits


def is_int(t: str) -> bool:
    return t in INT_TYPES


def is_float(t: str) -> bool:
    return t in FLOAT_TYPES


def is_signed(t: str) -> bool:
    return t.startswith("i") or is_float(t)


def value_type_of_dtype(name: str) -> str:
    """The type a buffer element of dtype `name` has once read: i8/i16 widen
    to i32 and u8/u16 to u32; fp8/fp4/tf32 elements are not scalar values."""
    d = DTYPES[name]
    if d.kind in ("int", "uint") and d.bits < 32:
        return "i32" if d.kind == "int" else "u32"
    return name


def literal_type(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "f32"
    return "i32" if -(2**31) <= value < 2**31 else "i64"


def fits(value: int, t: str) -> bool:
    if t == "bool":
        return False
    if is_float(t):
        return True
    bits = type_bits(t)
    if is_signed(t):
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return 0 <= value < 2**bits


def no_arithmetic(t: str, span) -> None:
    """8-bit floats are moved and converted, never computed with."""
    if t in FP8_TYPES:
        raise TilecError(f"{t} values take no arithmetic: convert them to f16 or f32 first", span)


def promote(a: str, b: str, span=None) -> str:
    """The common type of two operand types (C's usual conversions, without
    the detour through int for narrow types, which never reach here)."""
    if a == b:
        return a
    if "bool" in (a, b):
        raise TilecError(f"cannot mix bool and {b if a == 'bool' else a} in arithmetic", span)
    if a in POINTER_TYPES or b in POINTER_TYPES:
        ptr, other = (a, b) if a in POINTER_TYPES else (b, a)
        if other in POINTER_TYPES or is_float(other):
            raise TilecError(f"cannot combine {a} and {b}", span)
        return ptr
    if is_float(a) or is_float(b):
        if is_float(a) and is_float(b):
            if {a, b} == {"f16", "bf16"}:
                return "f32"
            return a if type_bits(a) > type_bits(b) else b
        return a if is_float(a) else b
    bits = max(type_bits(a), type_bits(b))
    signed = is_signed(a) and is_signed(b)
    if type_bits(a) != type_bits(b):
        signed = is_signed(a if type_bits(a) > type_bits(b) else b)
    return ("i" if signed else "u") + str(bits)


def assignable(src: str, dst: str, expr: ir.Expr) -> bool:
    """Whether a value of type `src` converts implicitly to `dst`: integers
    to integers, literals to anything numeric, and floats only to wider
    floats; narrowing or int/float changes need `convert` (with a rounding)."""
    if src == dst:
        return True
    if src in FP8_TYPES or dst in FP8_TYPES:
        return False  # only through convert, which rounds (and saturates)
    if isinstance(expr, ir.Int) and dst != "bool":
        return is_float(dst) or fits(expr.value, dst) or dst in POINTER_TYPES
    if isinstance(expr, ir.Float):
        return is_float(dst)
    if is_int(src) and (is_int(dst) or dst in POINTER_TYPES):
        return True
    if src in POINTER_TYPES and is_int(dst):
        return type_bits(dst) >= type_bits(src)
    if is_float(src) and is_float(dst):
        return type_bits(dst) > type_bits(src) and not (src == "bf16" and dst == "f16")
    return False

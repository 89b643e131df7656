"""Typed virtual registers, immediates and labels of one PTX entry.

Every value type of `tilec.compiler.symbols` maps to one register class;
ptxas does the real allocation, so the emitter never reuses a register and
simply declares, per class, as many as it handed out.  Classes are by width
(`.b32` holds i32, u32 and shared addresses alike) because PTX lets an
instruction of any same-width type read a bit-typed register, which keeps
casts between same-width integers free."""
from __future__ import annotations

import struct
from typing import Dict, List


from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.value_types import POINTER_TYPES

_CLASS = {
    "bool": ("pred", "%p"),
    "f16": ("b16", "%rs"),
    "bf16": ("b16", "%rs"),
    "e4m3": ("b16", "%rs"),  # the value in the low byte (what cvt .e4m3x2 reads and writes)
    "e5m2": ("b16", "%rs"),
    "i32": ("b32", "%r"),
    "u32": ("b32", "%r"),
    "shared_ptr": ("b32", "%r"),
    "f32": ("f32", "%f"),
    "i64": ("b64", "%rd"),
    "u64": ("b64", "%rd"),
    "global_ptr": ("b64", "%rd"),
    "generic_ptr": ("b64", "%rd"),
    "f64": ("f64", "%fd"),
}

_ORDER = ("%p", "%rs", "%r", "%rd", "%f", "%fd")

_PTX_TYPE = {
    "bool": "pred",
    "f16": "f16",
    "bf16": "bf16",
    "e4m3": "b16",
    "e5m2": "b16",
    "i32": "s32",
    "u32": "u32",
    "shared_ptr": "u32",
    "f32": "f32",
    "i64": "s64",
    "u64": "u64",
    "global_ptr": "u64",
    "generic_ptr": "u64",
    "f64": "f64",
}


_WIDTH = {"bool": 1, "f16": 16, "bf16": 16, "e4m3": 16, "e5m2": 16, "i32": 32, "u32": 32, "f32": 32,
          "i64": 64, "u64": 64, "f64": 64, **POINTER_TYPES}
_BIT_TYPE = {t: "pred" if t == "bool" else f"b{bits}" for t, bits in _WIDTH.items()}

# The three lookups below are the tables' own `__getitem__` (a call into C,
# no Python frame): the emitter asks them for nearly every instruction.
ptx_type = _PTX_TYPE.__getitem__
"""ptx_type(t): the instruction type suffix for a value type (`s32` for i32)."""
bit_type = _BIT_TYPE.__getitem__
"""bit_type(t): the untyped suffix of the same width (`b32`)."""
width = _WIDTH.__getitem__
"""width(t): the bits of a value type (1 for bool)."""


@records.frozen
class Operand:
    """A PTX operand: a register or an immediate, with its value type.

    `temp` is True for a register no name owns (the result of an
    instruction), which a binding may adopt without copying; registers of
    mutable scalars and register arrays are not temporaries.  `divisor` is a
    number known to divide the value (for a name bound to it), which lets
    vector accesses prove their alignment."""

    text: str
    type: str
    is_reg: bool = True
    temp: bool = False
    divisor: int = 1

    def __str__(self) -> str:
        return self.text


class Registers:
    def __init__(self):
        self.counts: Dict[str, int] = {prefix: 0 for prefix in _ORDER}
        self.labels = 0

    def new(self, t: str) -> str:
        _, prefix = _CLASS[t]
        self.counts[prefix] += 1
        return f"{prefix}{self.counts[prefix]}"

    def temp(self, t: str) -> Operand:
        return Operand(self.new(t), t, True, True)

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"$L{self.labels}_{stem}"

    def declarations(self) -> List[str]:
        lines = []
        kinds = {prefix: cls for cls, prefix in _CLASS.values()}
        for prefix in _ORDER:
            n = self.counts[prefix]
            if n:
                lines.append(f".reg .{kinds[prefix]} {prefix}<{n + 1}>;")
        return lines


def immediate(value, t: str) -> Operand:
    """A literal as a PTX immediate of type `t` (f16/bf16 and bool have no
    immediate form in most instructions; callers materialise those)."""
    if t in ("f32",):
        return Operand("0f%08X" % struct.unpack("<I", struct.pack("<f", float(value)))[0], t, False)
    if t == "f64":
        return Operand("0d%016X" % struct.unpack("<Q", struct.pack("<d", float(value)))[0], t, False)
    if t in ("f16", "bf16"):
        return Operand("0x%04X" % half_bits(float(value), t), t, False)
    if t == "bool":
        return Operand("1" if value else "0", t, False)
    bits = width(t)
    v = int(value)
    if not -(1 << (bits - 1)) <= v < (1 << bits):
        # ptxas would truncate it silently, or stop at "Constant overflow"
        raise TilecError(f"the constant {v} does not fit in a {bits}-bit operand ({t})")
    if v < 0 and not t.startswith("i"):
        v &= (1 << bits) - 1
    return Operand(str(v), t, False)


def half_bits(value: float, t: str) -> int:
    """The 16 bits of `value` as f16, or as bf16 (round to nearest even)."""
    if t == "f16":
        return struct.unpack("<H", struct.pack("<e", value))[0]
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return 0x7FC0
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF

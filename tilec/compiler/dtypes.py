"""The dtype table: one row per dtype the language names.

Every part of the compiler that needs a size, a PTX spelling or a float/int
distinction reads it here, so a new dtype is one row."""
from __future__ import annotations


from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError


@records.frozen
class DType:
    name: str
    bits: int
    kind: str  # "float", "int", "uint"
    ptx: str  # the PTX type of one element in a register or memory access
    numpy: str | None  # numpy dtype name, when numpy has one

    @property
    def bytes(self) -> int:
        """Bytes per element; sub-byte types (e2m1) report 1 and are packed by the user."""
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")


_TABLE = [
    DType("f16", 16, "float", "f16", "float16"),
    DType("bf16", 16, "float", "bf16", None),
    DType("tf32", 32, "float", "tf32", None),
    DType("f32", 32, "float", "f32", "float32"),
    DType("f64", 64, "float", "f64", "float64"),
    DType("i8", 8, "int", "s8", "int8"),
    DType("u8", 8, "uint", "u8", "uint8"),
    DType("i16", 16, "int", "s16", "int16"),
    DType("u16", 16, "uint", "u16", "uint16"),
    DType("i32", 32, "int", "s32", "int32"),
    DType("u32", 32, "uint", "u32", "uint32"),
    DType("i64", 64, "int", "s64", "int64"),
    DType("u64", 64, "uint", "u64", "uint64"),
    DType("e4m3", 8, "float", "e4m3", None),
    DType("e5m2", 8, "float", "e5m2", None),
    DType("e2m1", 4, "float", "e2m1", None),
    DType("ue8m0", 8, "float", "ue8m0", None),
    DType("bool", 1, "uint", "pred", "bool"),
]

DTYPES = {d.name: d for d in _TABLE if d.name != "bool"}
"""The dtypes a program may name."""

BOOL = _TABLE[-1]


def dtype(name: str, span=None) -> DType:
    """The dtype called `name`, or a located error naming the valid ones."""
    try:
        return DTYPES[name]
    except KeyError:
        raise TilecError(
            f"unknown dtype '{name}' (expected one of {', '.join(DTYPES)})", span
        ) from None

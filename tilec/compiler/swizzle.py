"""XOR swizzles of shared-memory offsets.

Threads of a warp reading one column of a row-major tile all hit the same
shared-memory bank.  The tensor core and TMA therefore store tiles with the
16-byte chunks of each 128-byte row permuted by an XOR with the row number, so
a column spreads over all banks.  `SW[p, b, a]` is that permutation on
element offsets:

    o ^ (((o >> (p + a)) & ((1 << b) - 1)) << p)

`p` is log2 of the elements per 16-byte chunk, `b` the number of chunk-index
bits XORed, `a` how far above the chunk bits the XOR source sits.  The
hardware's 32B, 64B and 128B modes are b = 1, 2, 3 with a = 3: the source is
always bits 7.. of the byte address, the 128-byte line index.
"""
from __future__ import annotations

from typing import Optional


from tilec.compiler import records
from tilec.compiler.dtypes import DType
from tilec.compiler.layout_axes import LayoutError

MODE_NAMES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}
ATOM_BYTES = {0: 16, 1: 32, 2: 64, 3: 128}
"""The width of one atom row per swizzle mode; an atom is 8 such rows."""


@records.frozen
class Swizzle:
    per_element: int  # p
    swizzle_bits: int  # b
    atom_bits: int  # a

    def __post_init__(self):
        for name in ("per_element", "swizzle_bits", "atom_bits"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise LayoutError(f"swizzle {name} must be a non-negative integer, got {value!r}")
        if self.swizzle_bits and not self.atom_bits:
            raise LayoutError(
                f"{self} XORs bits with themselves (atom_bits is 0), which is not a permutation"
            )

    def __call__(self, offset: int) -> int:
        p, b, a = self.per_element, self.swizzle_bits, self.atom_bits
        return offset ^ (((offset >> (p + a)) & ((1 << b) - 1)) << p)

    @property
    def period(self) -> int:
        """Elements in one atom: the swizzle reads and writes only bits below
        this, so adding a multiple of it commutes with the swizzle."""
        return 1 << (self.per_element + self.atom_bits + self.swizzle_bits)

    @property
    def block(self) -> int:
        """Elements in the smallest aligned block the swizzle maps onto itself:
        it changes no bit at or above log2(block)."""
        return 1 << (self.per_element + self.swizzle_bits)

    def __str__(self) -> str:
        return f"SW[{self.per_element}, {self.swizzle_bits}, {self.atom_bits}]"


def _per_element(dt: DType) -> int:
    """log2 of the elements in 16 bytes."""
    return (128 // dt.bits).bit_length() - 1


def hardware_swizzle(dt: DType, mode: int) -> Optional[Swizzle]:
    """The swizzle of hardware mode 0-3 (none, 32B, 64B, 128B) on `dt`
    elements; None for mode 0."""
    if mode not in MODE_NAMES:
        raise LayoutError(
            f"swizzle mode must be 0 (none), 1 (32B), 2 (64B) or 3 (128B), got {mode!r}"
        )
    return Swizzle(_per_element(dt), mode, 3) if mode else None


def swizzle_mode(swizzle: Optional[Swizzle], dt: DType) -> int:
    """The hardware mode (0-3) that `swizzle` is on `dt` elements, for a TMA or
    matrix descriptor; an error when it is not one the hardware implements."""
    if swizzle is None or swizzle.swizzle_bits == 0:
        return 0
    if swizzle.atom_bits != 3 or swizzle.per_element != _per_element(dt) or swizzle.swizzle_bits > 3:
        raise LayoutError(
            f"{swizzle} is not a hardware swizzle for {dt.name}: those are "
            f"SW[{_per_element(dt)}, b, 3] with b = 1 (32B), 2 (64B) or 3 (128B)"
        )
    return swizzle.swizzle_bits

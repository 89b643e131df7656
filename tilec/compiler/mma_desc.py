"""Bit-exact encoders for the tensor-core descriptors.

tcgen05 (sm_100a) and wgmma (sm_90a) read their shared-memory operands through
64-bit *matrix descriptors*, and tcgen05.mma takes its shape and types from a
32-bit *instruction descriptor*.  A wrong bit in either is not a compile error
anywhere: the GPU silently reads the wrong bytes.  So every field position
lives in exactly one table below, each cited against the PTX ISA and an
independent open-source encoder, and every value is checked before it is
packed; user-reachable mistakes raise `TilecError` naming the ISA rule.

Sources (cited per table as [PTX], [CUTLASS], [TVM]):
  [PTX]     PTX ISA 9.x, 9.7.16.4.1 "Shared memory descriptor", 9.7.16.4.2
            "Instruction descriptor" (Tables "Instruction descriptor format for
            .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8", "... for
            .kind::mxf8f6f4", "... for .kind::mxf4 and .kind::mxf4nvf4"),
            9.7.16.2.1 "Matrix Shape" (Table "Various combinations of .kind and
            shapes"), 9.7.15.5.1.2 "Matrix Descriptor Format" and "Canonical
            Layouts" (wgmma), 9.7.15.5.1 wgmma shapes and types.
  [CUTLASS] include/cute/arch/mma_sm100_desc.hpp (UMMA::SmemDescriptor,
            UMMA::LayoutType, UMMA::InstrDescriptor,
            UMMA::InstrDescriptorBlockScaled), include/cute/arch/mma_sm90_desc.hpp
            (GmmaDescriptor, GMMA::LayoutType), the canonical-layout comments of
            make_umma_desc / make_gmma_desc.
  [TVM]     TIRx gemm_async/tcgen05.py (`_SWIZZLE_TO_LAYOUT`, `_uniform_desc`),
            copy_async tcgen05_cp; the seeds 000 and 002 show its output.

Units: byte quantities (addresses, LBO, SBO) are bytes in the Python API; the
`ptx.tcgen05.encode_matrix_descriptor` / `ptx.wgmma.encode_matrix_descriptor`
intrinsics take LBO and SBO in 16-byte units and the swizzle as a tilec
`SWIZZLE_*` mode (TIRx's convention, so seed 000's `(..., 64, 64, 3)` means
LBO = SBO = 1024 bytes, 128-byte swizzle).
"""
from __future__ import annotations

from typing import Optional

from tilec.compiler import records
from tilec.compiler.builtins import PREDEFINED
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import dtype as lookup_dtype
from tilec.compiler.swizzle import ATOM_BYTES, MODE_NAMES

# --------------------------------------------------------------------------
# Swizzle modes (the values of the language's SWIZZLE_* names)
# --------------------------------------------------------------------------

SWIZZLE_NONE = PREDEFINED["SWIZZLE_NONE"]
SWIZZLE_32B_ATOM = PREDEFINED["SWIZZLE_32B_ATOM"]
SWIZZLE_64B_ATOM = PREDEFINED["SWIZZLE_64B_ATOM"]
SWIZZLE_128B_ATOM = PREDEFINED["SWIZZLE_128B_ATOM"]
SWIZZLE_128B_BASE32B = 4
"""128-byte swizzle with 32-byte atomicity: tcgen05 only, MN-major only [PTX]."""

SWIZZLE_NAMES = {**MODE_NAMES, SWIZZLE_128B_BASE32B: "128B with 32B atom"}
"""The modes of `tilec.compiler.swizzle` (the layouts' swizzles) plus the
descriptor-only 128B-base-32B mode."""

SWIZZLE_WIDTH_BYTES = {**ATOM_BYTES, SWIZZLE_128B_BASE32B: 128}
"""Bytes of one row of the swizzle atom (its contiguous extent)."""

# The hardware's swizzle field differs between the two families.
# tcgen05, bits 61-63: 0 none, 1 128B-base32B, 2 128B, 4 64B, 6 32B; 3, 5, 7
# invalid.  [PTX] 9.7.16.4.1; [CUTLASS] UMMA::LayoutType; [TVM]
# _SWIZZLE_TO_LAYOUT = {0: 0, 1: 6, 2: 4, 3: 2, 4: 1}.
_TCGEN05_SWIZZLE_FIELD = {
    SWIZZLE_NONE: 0,
    SWIZZLE_128B_BASE32B: 1,
    SWIZZLE_128B_ATOM: 2,
    SWIZZLE_64B_ATOM: 4,
    SWIZZLE_32B_ATOM: 6,
}
# wgmma, bits 62-63: 0 none (interleave), 1 128B, 2 64B, 3 32B.
# [PTX] 9.7.15.5.1.2 "Matrix Descriptor Format"; [CUTLASS] GMMA::LayoutType
# {INTERLEAVE = 0, B128 = 1, B64 = 2, B32 = 3}.
_WGMMA_SWIZZLE_FIELD = {
    SWIZZLE_NONE: 0,
    SWIZZLE_128B_ATOM: 1,
    SWIZZLE_64B_ATOM: 2,
    SWIZZLE_32B_ATOM: 3,
}

FAMILIES = ("tcgen05", "wgmma")

# --------------------------------------------------------------------------
# Bit fields
# --------------------------------------------------------------------------


@records.frozen
class Field:
    """`width` bits starting at bit `lo`."""

    name: str
    lo: int
    width: int

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def put(self, value: int) -> int:
        if not 0 <= value <= self.mask:
            raise ValueError(f"{self.name}={value} does not fit in {self.width} bits")
        return value << self.lo

    def get(self, word: int) -> int:
        return (word >> self.lo) & self.mask


def _pack(fields, values: dict) -> int:
    word = 0
    for f in fields:
        word |= f.put(values.get(f.name, 0))
    return word


def _unpack(fields, word: int) -> dict:
    return {f.name: f.get(word) for f in fields}


def _check_no_stray_bits(fields, word: int, what: str) -> None:
    covered = 0
    for f in fields:
        covered |= f.mask << f.lo
    if word < 0 or word & ~covered:
        raise ValueError(f"{what} 0x{word:x} sets reserved bits 0x{word & ~covered:x}")


# Shared memory descriptor, tcgen05.  [PTX] 9.7.16.4.1; [CUTLASS]
# UMMA::SmemDescriptor (start_address_ [0,14), leading_byte_offset_ [16,30),
# stride_byte_offset_ [32,46), version_ [46,48) = 1, base_offset_ [49,52),
# lbo_mode_ [52,53), layout_type_ [61,64)); [TVM] _uniform_desc puts
# `1 << 14` in the high word, i.e. bit 46.
_TCGEN05_SMEM_FIELDS = (
    Field("start", 0, 14),
    Field("lbo", 16, 14),
    Field("sbo", 32, 14),
    Field("fixed", 46, 3),  # "fixed constant value of 0b001"
    Field("base_offset", 49, 3),
    Field("lbo_mode", 52, 1),
    Field("swizzle", 61, 3),
)
_TCGEN05_FIXED = 0b001

# Shared memory (matrix) descriptor, wgmma.  [PTX] 9.7.15.5.1.2; [CUTLASS]
# GmmaDescriptor (start_address_ [0,14), leading_byte_offset_ [16,30),
# stride_byte_offset_ [32,46), base_offset_ [49,52), layout_type_ [62,64)).
# There is no fixed constant.
_WGMMA_SMEM_FIELDS = (
    Field("start", 0, 14),
    Field("lbo", 16, 14),
    Field("sbo", 32, 14),
    Field("base_offset", 49, 3),
    Field("swizzle", 62, 2),
)

_SMEM_WINDOW = 1 << 18
"""matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4 [PTX]: 18-bit byte values."""


def _encode_16b(what: str, value: int) -> int:
    if not 0 <= value < _SMEM_WINDOW:
        raise TilecError(f"matrix descriptor {what} {value} B is outside [0, {_SMEM_WINDOW})")
    if value % 16:
        raise TilecError(f"matrix descriptor {what} {value} B is not a multiple of 16 bytes")
    return value >> 4


# --------------------------------------------------------------------------
# Shared memory descriptors
# --------------------------------------------------------------------------


@records.frozen
class SmemDescriptor:
    """A shared-memory matrix descriptor of one family ("tcgen05" or "wgmma").

    Byte fields are plain bytes; `encode` applies the ISA's >> 4.  The
    constructor checks every rule the hardware relies on, so a descriptor that
    exists can always be encoded."""

    family: str
    start_addr: int  # shared-window byte address of the operand tile
    lbo: int  # leading-dimension byte offset
    sbo: int  # stride-dimension byte offset
    swizzle: int  # a SWIZZLE_* mode
    base_offset: int = 0  # swizzle-pattern phase when the tile is not pattern-aligned
    lbo_mode: int = 0  # tcgen05 only: 0 LBO is relative, 1 it is an absolute address

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"unknown descriptor family {self.family!r}")
        table = _swizzle_table(self.family)
        if self.swizzle not in table:
            allowed = ", ".join(f"{m} ({SWIZZLE_NAMES[m]})" for m in table)
            raise TilecError(
                f"{self.family} matrix descriptors take swizzle modes {allowed}, got {self.swizzle}"
            )
        for what in ("start_addr", "lbo", "sbo"):
            _encode_16b(what.replace("_", " "), getattr(self, what))
        if not 0 <= self.base_offset <= 7:
            raise TilecError(f"matrix descriptor base offset must be in [0, 7], got {self.base_offset}")
        if self.lbo_mode not in (0, 1) or (self.family == "wgmma" and self.lbo_mode):
            raise TilecError(
                f"{self.family} matrix descriptor leading-dimension mode must be "
                f"{'0 or 1' if self.family == 'tcgen05' else '0'}, got {self.lbo_mode}"
            )

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        values = {
            "start": self.start_addr >> 4,
            "lbo": self.lbo >> 4,
            "sbo": self.sbo >> 4,
            "base_offset": self.base_offset,
            "swizzle": _swizzle_table(self.family)[self.swizzle],
        }
        if self.family == "tcgen05":
            values["fixed"] = _TCGEN05_FIXED
            values["lbo_mode"] = self.lbo_mode
        return _pack(_smem_fields(self.family), values)

    def encode_parts(self) -> tuple[int, int]:
        """`(hi, lo)`: the upper and lower 32-bit halves (PTX `mov.b64 d, {lo, hi}`).

        With `start_addr=0` these are the compile-time constants a lowering ORs
        the runtime `(addr >> 4) & 0x3FFF` into (it lands in `lo`)."""
        value = self.encode()
        return value >> 32, value & 0xFFFFFFFF

    @classmethod
    def decode(cls, family: str, value: int) -> "SmemDescriptor":
        """The descriptor `value` encodes; ValueError on a value no encoder makes."""
        fields = _smem_fields(family)
        _check_no_stray_bits(fields, value, f"{family} matrix descriptor")
        v = _unpack(fields, value)
        if family == "tcgen05" and v["fixed"] != _TCGEN05_FIXED:
            raise ValueError(f"tcgen05 matrix descriptor 0x{value:x} lacks the fixed 0b001 at bits 46-48")
        modes = {bits: mode for mode, bits in _swizzle_table(family).items()}
        if v["swizzle"] not in modes:
            raise ValueError(f"{family} matrix descriptor 0x{value:x} has invalid swizzle field {v['swizzle']}")
        return cls(
            family,
            v["start"] << 4,
            v["lbo"] << 4,
            v["sbo"] << 4,
            modes[v["swizzle"]],
            v["base_offset"],
            v.get("lbo_mode", 0),
        )

    def intrinsic_args(self) -> tuple[int, int, int]:
        """`(ldo, sdo, swizzle)` as `ptx.<family>.encode_matrix_descriptor` takes
        them: LBO and SBO in 16-byte units, the swizzle as a SWIZZLE_* mode."""
        return self.lbo >> 4, self.sbo >> 4, self.swizzle

    @classmethod
    def from_intrinsic_args(
        cls, family: str, ldo: int, sdo: int, swizzle: int, start_addr: int = 0
    ) -> "SmemDescriptor":
        """Inverse of `intrinsic_args`: what an encode_matrix_descriptor call builds."""
        return cls(family, start_addr, ldo * 16, sdo * 16, swizzle)


def _smem_fields(family: str):
    if family == "tcgen05":
        return _TCGEN05_SMEM_FIELDS
    if family == "wgmma":
        return _WGMMA_SMEM_FIELDS
    raise ValueError(f"unknown descriptor family {family!r}")


def _swizzle_table(family: str) -> dict:
    return _TCGEN05_SWIZZLE_FIELD if family == "tcgen05" else _WGMMA_SWIZZLE_FIELD


def smem_desc_for_layout(
    family: str,
    dtype: str,
    major: str,
    swizzle: int,
    *,
    mn_stride: Optional[int] = None,
    k_stride: Optional[int] = None,
) -> SmemDescriptor:
    """The descriptor (start address 0) of a shared operand in a canonical layout.

    A canonical layout is a grid of swizzle atoms [PTX "Canonical Layouts";
    CUTLASS make_umma_desc / make_gmma_desc].  With W = the atom row width
    (16 B unswizzled, else the swizzle width):

      K-major:  an atom is 8 MN-rows of W bytes along K.
      MN-major: an atom is W bytes along MN times 8 K-rows.

    `mn_stride` / `k_stride` are the byte distances between neighbouring atoms
    along MN / K; None means the operand has one atom that way, so the
    hardware never steps it.  The descriptor fields are then

      K-major, no swizzle:  SBO = mn_stride, LBO = k_stride
      K-major, swizzled:    SBO = mn_stride, LBO unused (K steps move the start address)
      MN-major, no swizzle: SBO = mn_stride, LBO = k_stride
      MN-major, swizzled:   LBO = mn_stride, SBO = k_stride

    A field the hardware does not read is filled with the number of elements
    in one atom row (as a 16-byte-unit count), which is what TIRx emits: seed
    000's 128x64 f16 K-major 128B-swizzled tile encodes as (64, 64, 3) and
    seed 002's 32x16 u8 unswizzled tile as (16, 8, 0)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown descriptor family {family!r}")
    if major not in ("K", "MN"):
        raise ValueError(f"operand major must be 'K' or 'MN', got {major!r}")
    if swizzle not in SWIZZLE_WIDTH_BYTES or swizzle == SWIZZLE_128B_BASE32B:
        raise TilecError(
            f"shared operand layouts take swizzle modes 0-3 (none, 32B, 64B, 128B), got {swizzle}"
        )
    for what, stride in (("MN", mn_stride), ("K", k_stride)):
        if stride is not None and (stride <= 0 or stride % 16):
            raise TilecError(
                f"shared operand atoms along {what} are {stride} B apart; the tensor core "
                "needs a positive multiple of 16 bytes"
            )
    dt = lookup_dtype(dtype)
    width = SWIZZLE_WIDTH_BYTES[swizzle]
    unused = width * 8 // dt.bits * 16
    swizzled = swizzle != SWIZZLE_NONE
    if major == "MN" and swizzled:
        lbo, sbo = mn_stride, k_stride
    else:
        sbo = mn_stride
        lbo = None if (major == "K" and swizzled) else k_stride
    return SmemDescriptor(
        family,
        0,
        unused if lbo is None else lbo,
        unused if sbo is None else sbo,
        swizzle,
    )


# --------------------------------------------------------------------------
# tcgen05 instruction descriptor
# --------------------------------------------------------------------------

KINDS = ("f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4")
BLOCK_SCALED_KINDS = ("mxf8f6f4", "mxf4")

# Dense MMA K per kind (sparse doubles it).  [PTX] 9.7.16.2.1 Table "Various
# combinations of .kind and shapes".
_DENSE_K = {"tf32": 8, "f16": 16, "f8f6f4": 32, "i8": 32, "mxf8f6f4": 32, "mxf4": 64}

# A/B type codes per kind, keyed by tilec dtype name.  [PTX] instruction
# descriptor tables (atype/btype rows); [CUTLASS] F16F32Format, S8Format,
# MXF8F6F4Format, MXF4Format.  tilec has no e2m3 / e3m2 dtypes.
_F8F6F4_CODES = {"e4m3": 0, "e5m2": 1, "e2m1": 5}
_AB_CODES = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": _F8F6F4_CODES,
    "i8": {"u8": 0, "i8": 1},
    "mxf8f6f4": _F8F6F4_CODES,
    "mxf4": {"e2m1": 1},
}
# D type codes (bits 4-5; block-scaled kinds have no D field and accumulate in
# f32).  [PTX]; [CUTLASS] CFormat {F16 = 0, F32 = 1, S32 = 2}.
_D_CODES = {
    "f16": {"f16": 0, "f32": 1},
    "tf32": {"f32": 1},
    "f8f6f4": {"f16": 0, "f32": 1},
    "i8": {"i32": 2},
    "mxf8f6f4": {"f32": None},
    "mxf4": {"f32": None},
}
# Scale-factor type (bit 23, block-scaled only): UE8M0 = 1.  [PTX];
# [CUTLASS] ScaleFormat.  (UE4M3 = 0 exists only for kind::mxf4nvf4.)
_SCALE_CODES = {"ue8m0": 1}

# Table "Instruction descriptor format for .kind::tf32, .kind::f16,
# .kind::f8f6f4 and .kind::i8" [PTX]; [CUTLASS] UMMA::InstrDescriptor.
_DENSE_IDESC_FIELDS = (
    Field("sparse_selector", 0, 2),
    Field("sparse", 2, 1),
    Field("saturate", 3, 1),
    Field("d_format", 4, 2),
    Field("a_format", 7, 3),
    Field("b_format", 10, 3),
    Field("negate_a", 13, 1),
    Field("negate_b", 14, 1),
    Field("a_mn_major", 15, 1),  # "Transpose A": 0 K-major, 1 MN-major
    Field("b_mn_major", 16, 1),
    Field("n", 17, 6),  # N >> 3
    Field("m", 24, 5),  # M >> 4
    Field("max_shift", 30, 2),  # .ws B reuse: 0 none, 1 8, 2 16, 3 32
)
# Tables for .kind::mxf8f6f4 and .kind::mxf4 [PTX]; [CUTLASS]
# UMMA::InstrDescriptorBlockScaled.  [PTX] gives M >> 7 in bits 27-28 with
# 24-26 reserved; CUTLASS writes M >> 4 into bits 24-28, the same bits for the
# only legal M (128, 256).  kind::mxf4's btype is 2 bits (bit 12 reserved) and
# bit 31 selects dense K = 96.
_MXF8F6F4_IDESC_FIELDS = (
    Field("sparse", 2, 1),
    Field("sfb_id", 4, 2),
    Field("a_format", 7, 3),
    Field("b_format", 10, 3),
    Field("negate_a", 13, 1),
    Field("negate_b", 14, 1),
    Field("a_mn_major", 15, 1),
    Field("b_mn_major", 16, 1),
    Field("n", 17, 6),  # N >> 3
    Field("scale_format", 23, 1),
    Field("m", 27, 2),  # M >> 7
    Field("sfa_id", 29, 2),
)
_MXF4_IDESC_FIELDS = (
    Field("sparse", 2, 1),
    Field("sfb_id", 4, 2),
    Field("a_format", 7, 3),
    Field("b_format", 10, 2),
    Field("negate_a", 13, 1),
    Field("negate_b", 14, 1),
    Field("a_mn_major", 15, 1),
    Field("b_mn_major", 16, 1),
    Field("n", 17, 6),
    Field("scale_format", 23, 1),
    Field("m", 27, 2),
    Field("sfa_id", 29, 2),
    Field("k96", 31, 1),
)


def _idesc_fields(kind: str):
    if kind == "mxf8f6f4":
        return _MXF8F6F4_IDESC_FIELDS
    if kind == "mxf4":
        return _MXF4_IDESC_FIELDS
    return _DENSE_IDESC_FIELDS


def tcgen05_mma_k(kind: str, sparse: bool = False) -> int:
    """The K of one tcgen05.mma of `kind` (the kind fixes it; it is not encoded
    except for kind::mxf4's K = 96)."""
    _check_kind(kind)
    return _DENSE_K[kind] * (2 if sparse else 1)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise TilecError(f"unknown tcgen05 MMA kind '{kind}' (expected one of {', '.join(KINDS)})")


def _fmt_set(values) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def _default_k(self) -> int:
    return tcgen05_mma_k(self.kind, self.sparse)


@records.frozen
class Tcgen05InstrDesc:
    """The 32-bit instruction descriptor of one tcgen05.mma.

    `m` and `n` are the instruction's M and N (for cta_group 2, the pair's M:
    128 or 256).  `a_major` / `b_major` are "K" or "MN" (the ISA's "No
    Transpose" / "Transpose").  `cta_group` and `ws` are instruction
    qualifiers, not descriptor bits, but decide which shapes are legal."""

    kind: str
    a_dtype: str
    b_dtype: str
    d_dtype: str
    m: int
    n: int
    a_major: str = "K"
    b_major: str = "K"
    cta_group: int = 1
    ws: bool = False
    sparse: bool = False
    sparse_selector: int = 0
    negate_a: bool = False
    negate_b: bool = False
    saturate: bool = False
    max_shift: int = 0
    scale_dtype: Optional[str] = None
    sfa_id: int = 0
    sfb_id: int = 0
    k: int = records.field(factory=_default_k, takes_self=True)

    def __post_init__(self):
        _check_kind(self.kind)
        kind = f"tcgen05 kind::{self.kind}"
        codes = _AB_CODES[self.kind]
        for name, dt in (("A", self.a_dtype), ("B", self.b_dtype)):
            if dt not in codes:
                raise TilecError(f"{kind} needs {name} in {_fmt_set(codes)}, got {name}={dt}")
        if self.kind == "f16" and self.a_dtype != self.b_dtype:
            raise TilecError(f"{kind} needs A and B of one type, got A={self.a_dtype}, B={self.b_dtype}")
        if self.d_dtype not in _D_CODES[self.kind]:
            raise TilecError(f"{kind} needs D in {_fmt_set(_D_CODES[self.kind])}, got D={self.d_dtype}")
        if self.kind == "f16" and self.d_dtype == "f16" and self.a_dtype != "f16":
            raise TilecError(f"{kind} with {self.a_dtype} inputs needs D f32, got D=f16")
        for name, major, dt in (("A", self.a_major, self.a_dtype), ("B", self.b_major, self.b_dtype)):
            if major not in ("K", "MN"):
                raise ValueError(f"operand major must be 'K' or 'MN', got {major!r}")
            # [CUTLASS] a_major_/b_major_: "Major value of 1 is only valid for
            # E4M3, E5M2, INT8, F16, BF16 and TF32"; [PTX] mxf4: No Transpose only.
            if major == "MN" and dt == "e2m1":
                raise TilecError(f"{kind} reads e2m1 {name} only K-major, got MN-major")
        if self.cta_group not in (1, 2):
            raise TilecError(f"{kind} needs cta_group 1 or 2, got {self.cta_group}")
        self._check_flags(kind)
        self._check_shape(kind)

    def _check_flags(self, kind: str) -> None:
        scaled = self.kind in BLOCK_SCALED_KINDS
        if self.ws and (scaled or self.cta_group != 1):
            raise TilecError(f"{kind} has no .ws form" + ("" if scaled else " for cta_group 2"))
        if self.max_shift and not self.ws:
            raise TilecError(f"{kind} takes a B-reuse max shift only with .ws, got {self.max_shift}")
        if not 0 <= self.max_shift <= 3:
            raise TilecError(f"{kind} max shift code must be in [0, 3] (none, 8, 16, 32), got {self.max_shift}")
        if self.saturate and self.kind != "i8":
            raise TilecError(f"{kind} has no saturate; only kind::i8 saturates")
        if (self.negate_a or self.negate_b) and self.kind == "i8":
            raise TilecError(f"{kind} cannot negate A or B")
        if self.sparse_selector and (not self.sparse or scaled):
            raise TilecError(
                f"{kind} takes a sparsity selector only for sparse "
                f"{'non-block-scaled ' if scaled else ''}MMAs, got {self.sparse_selector}"
            )
        if not 0 <= self.sparse_selector <= 3:
            raise TilecError(f"{kind} sparsity selector must be in [0, 3], got {self.sparse_selector}")
        if scaled:
            if self.scale_dtype not in _SCALE_CODES:
                raise TilecError(
                    f"{kind} needs scale factors of type {_fmt_set(_SCALE_CODES)}, got {self.scale_dtype}"
                )
            ids = (0, 2) if self.kind == "mxf4" else (0, 1, 2, 3)
            for name, sf_id in (("SFA", self.sfa_id), ("SFB", self.sfb_id)):
                if sf_id not in ids:
                    raise TilecError(f"{kind} needs the {name} scale factor id in {_fmt_set(ids)}, got {sf_id}")
        else:
            if self.scale_dtype is not None or self.sfa_id or self.sfb_id:
                raise TilecError(f"{kind} is not block-scaled: it takes no scale factors")

    def _check_shape(self, kind: str) -> None:
        cg, scaled = self.cta_group, self.kind in BLOCK_SCALED_KINDS
        where = "for " + ("sparse " if self.sparse else "") + (".ws" if self.ws else f"cta_group {cg}")
        # [PTX] 9.7.16.2.1 Table "Various combinations of .kind and shapes".
        if self.ws:
            ms, ns = (32, 64, 128), (64, 128) if self.sparse else (64, 128, 256)
            n_rule, n_ok = f"N in {_fmt_set(ns)}", self.n in ns
        else:
            if scaled:
                ms = (128,) if cg == 1 else ((256,) if self.sparse else (128, 256))
            else:
                ms = (64, 128) if cg == 1 else (128, 256)
            if self.kind == "i8" and cg == 1:
                n_rule = "N in {8, 16, 24} or a multiple of 16 in [32, 256]"
                n_ok = self.n in (8, 16, 24) or (self.n % 16 == 0 and 32 <= self.n <= 256)
            else:
                step = 8 if cg == 1 else (32 if self.kind == "i8" else 16)
                n_rule = f"N a multiple of {step} in [{step}, 256]"
                n_ok = self.n % step == 0 and step <= self.n <= 256
        if self.m not in ms:
            raise TilecError(f"{kind} needs M in {_fmt_set(ms)} {where}, got {self.m}")
        if not n_ok:
            raise TilecError(f"{kind} needs {n_rule} {where}, got {self.n}")
        ks = [tcgen05_mma_k(self.kind, self.sparse)]
        if self.kind == "mxf4" and not self.sparse and cg == 2 and self.m == 256:
            ks.append(96)  # [PTX] "256xNxK1, K1 = 96"; [CUTLASS] k_size_
        if self.k not in ks:
            raise TilecError(f"{kind} needs K in {_fmt_set(ks)} {where}, M={self.m}, got {self.k}")

    def encode(self) -> int:
        """The 32-bit descriptor value."""
        codes = _AB_CODES[self.kind]
        values = {
            "sparse": int(self.sparse),
            "a_format": codes[self.a_dtype],
            "b_format": codes[self.b_dtype],
            "negate_a": int(self.negate_a),
            "negate_b": int(self.negate_b),
            "a_mn_major": int(self.a_major == "MN"),
            "b_mn_major": int(self.b_major == "MN"),
            "n": self.n >> 3,
        }
        if self.kind in BLOCK_SCALED_KINDS:
            values.update(
                sfa_id=self.sfa_id,
                sfb_id=self.sfb_id,
                scale_format=_SCALE_CODES[self.scale_dtype],
                m=self.m >> 7,
                k96=int(self.k == 96),
            )
        else:
            values.update(
                sparse_selector=self.sparse_selector,
                saturate=int(self.saturate),
                d_format=_D_CODES[self.kind][self.d_dtype],
                m=self.m >> 4,
                max_shift=self.max_shift,
            )
        return _pack(_idesc_fields(self.kind), values)

    @classmethod
    def decode(cls, kind: str, value: int, *, cta_group: int = 1, ws: bool = False) -> "Tcgen05InstrDesc":
        """The descriptor `value` encodes.  `cta_group` and `ws` are instruction
        qualifiers the value does not carry.  ValueError on a value no encoder
        makes (reserved bits, unknown codes)."""
        _check_kind(kind)
        fields = _idesc_fields(kind)
        _check_no_stray_bits(fields, value, f"tcgen05 kind::{kind} instruction descriptor")
        v = _unpack(fields, value)

        def from_code(table, code, what):
            for name, c in table.items():
                if c == code:
                    return name
            raise ValueError(f"tcgen05 kind::{kind} instruction descriptor has unknown {what} code {code}")

        sparse = bool(v["sparse"])
        common = dict(
            kind=kind,
            a_dtype=from_code(_AB_CODES[kind], v["a_format"], "A type"),
            b_dtype=from_code(_AB_CODES[kind], v["b_format"], "B type"),
            n=v["n"] << 3,
            a_major="MN" if v["a_mn_major"] else "K",
            b_major="MN" if v["b_mn_major"] else "K",
            cta_group=cta_group,
            ws=ws,
            sparse=sparse,
            negate_a=bool(v["negate_a"]),
            negate_b=bool(v["negate_b"]),
        )
        if kind in BLOCK_SCALED_KINDS:
            return cls(
                d_dtype="f32",
                m=v["m"] << 7,
                scale_dtype=from_code(_SCALE_CODES, v["scale_format"], "scale type"),
                sfa_id=v["sfa_id"],
                sfb_id=v["sfb_id"],
                k=96 if v.get("k96") else tcgen05_mma_k(kind, sparse),
                **common,
            )
        return cls(
            d_dtype=from_code(_D_CODES[kind], v["d_format"], "D type"),
            m=v["m"] << 4,
            sparse_selector=v["sparse_selector"],
            saturate=bool(v["saturate"]),
            max_shift=v["max_shift"],
            **common,
        )


def tcgen05_instr_desc(kind: str, a_dtype: str, b_dtype: str, d_dtype: str, m: int, n: int, **options) -> int:
    """`Tcgen05InstrDesc(kind, a_dtype, b_dtype, d_dtype, m, n, **options).encode()`."""
    return Tcgen05InstrDesc(kind, a_dtype, b_dtype, d_dtype, m, n, **options).encode()


def tcgen05_check_operand_swizzle(kind: str, major: str, swizzle: int) -> None:
    """The cross-descriptor rule of [PTX] 9.7.16.4.2: kind::tf32 reads an
    MN-major operand only with the 128B-with-32B-atom swizzle, and every other
    kind never uses that swizzle for MN-major operands."""
    _check_kind(kind)
    if major != "MN":
        return
    if kind == "tf32" and swizzle != SWIZZLE_128B_BASE32B:
        raise TilecError(
            "tcgen05 kind::tf32 reads an MN-major operand only with the 128B swizzle "
            f"with 32B atomicity, got {SWIZZLE_NAMES.get(swizzle, swizzle)}"
        )
    if kind != "tf32" and swizzle == SWIZZLE_128B_BASE32B:
        raise TilecError(
            f"tcgen05 kind::{kind} cannot read an MN-major operand with the 128B swizzle with 32B atomicity"
        )


# --------------------------------------------------------------------------
# wgmma
# --------------------------------------------------------------------------

# wgmma.mma_async type combinations and K.  [PTX] 9.7.15.5 (wgmma.mma_async
# syntax: .f16 -> D f16/f32, .bf16 -> D f32, .tf32 -> D f32, .e4m3/.e5m2 -> D
# f16/f32, .s8/.u8 -> D s32, A and B of one family in any mix).  tilec does
# not lower the .b1 forms.
_WGMMA_TYPES = (
    (("f16",), ("f16", "f32"), 16),
    (("bf16",), ("f32",), 16),
    (("tf32",), ("f32",), 8),
    (("e4m3", "e5m2"), ("f16", "f32"), 32),
    (("i8", "u8"), ("i32",), 32),
)
_WGMMA_INT_N = (8, 16, 24) + tuple(range(32, 257, 16))
"""N of the integer forms: m64n8/16/24k32, then multiples of 16 [PTX]; ptxas
refuses m64n40k32 for s8 x u8."""


def wgmma_accumulators(a_dtype: str) -> tuple:
    """The accumulator (D) types wgmma has for A of `a_dtype` (none for a
    type it does not multiply)."""
    return next((ds for ab, ds, _ in _WGMMA_TYPES if a_dtype in ab), ())


def wgmma_mma_k(a_dtype: str, b_dtype: str, d_dtype: str, n: int, *, a_major: str = "K", b_major: str = "K") -> int:
    """Check one wgmma.mma_async.m64nNkK and return its K (M is always 64).

    N is a multiple of 8 in [8, 256]; MN-major ("transposed") operands exist
    only for f16 / bf16 [PTX]."""
    for ab, ds, k in _WGMMA_TYPES:
        if a_dtype in ab:
            break
    else:
        allowed = ", ".join(t for ab, _, _ in _WGMMA_TYPES for t in ab)
        raise TilecError(f"wgmma needs A in {{{allowed}}}, got A={a_dtype}")
    if b_dtype not in ab:
        raise TilecError(f"wgmma with A={a_dtype} needs B in {_fmt_set(ab)}, got B={b_dtype}")
    if d_dtype not in ds:
        raise TilecError(f"wgmma with {a_dtype} inputs needs D in {_fmt_set(ds)}, got D={d_dtype}")
    if ab == ("i8", "u8"):
        if n not in _WGMMA_INT_N:
            raise TilecError(f"wgmma with {a_dtype} inputs needs N in {{8, 16, 24}} or a multiple of 16 in "
                             f"[32, 256], got {n}")
    elif n % 8 or not 8 <= n <= 256:
        raise TilecError(f"wgmma m64nNk{k} needs N a multiple of 8 in [8, 256], got {n}")
    for name, major in (("A", a_major), ("B", b_major)):
        if major not in ("K", "MN"):
            raise ValueError(f"operand major must be 'K' or 'MN', got {major!r}")
        if major == "MN" and a_dtype not in ("f16", "bf16"):
            raise TilecError(f"wgmma reads {a_dtype} {name} only K-major, got MN-major")
    return k

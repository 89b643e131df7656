"""TMA tensor maps: the hardware rules, and encoding through the driver.

A kernel.json tensormap entry (see docs/internals.md) becomes the 128-byte
CUtensorMap a kernel takes by value.  cuTensorMapEncodeTiled answers a bad
descriptor with a bare CUDA_ERROR_INVALID_VALUE, so `check_tensormap` tests
every documented rule first and names the one broken; it is a pure function,
testable without a GPU.  `dims`, `box` and `elem_strides` are innermost
first; `strides` are bytes and leave out the innermost dimension.
"""
from __future__ import annotations

import ctypes

from cuda.bindings import driver as cu

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.runtime import driver

TENSORMAP_BYTES = 128
TENSORMAP_ALIGN = 64  # a CUtensorMap parameter is `.param .align 64 .b8 [128]`


class TensorMapError(TilecError):
    """A tensor map description breaks a TMA hardware rule."""


_DT = cu.CUtensorMapDataType
# TMA moves bytes: the integer and 8-bit float types travel as unsigned
# integers of their width; only the float types change OOB fill and rounding.
_DTYPE = {
    "u8": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "i8": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "e4m3": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "e5m2": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "ue8m0": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "e2m1": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    "u16": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "i16": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    "u32": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT32,
    "i32": _DT.CU_TENSOR_MAP_DATA_TYPE_INT32,
    "u64": _DT.CU_TENSOR_MAP_DATA_TYPE_UINT64,
    "i64": _DT.CU_TENSOR_MAP_DATA_TYPE_INT64,
    "f16": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    "bf16": _DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    "f32": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    "tf32": _DT.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    "f64": _DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
}
_FLOAT_DTYPES = {"f16", "bf16", "f32", "tf32", "f64"}

_SWIZZLE = {
    "none": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
    "32B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
    "64B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
    "128B": cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
}
_SWIZZLE_SPAN = {"32B": 32, "64B": 64, "128B": 128}
_INTERLEAVE = {
    "none": cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
    "16B": cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B,
    "32B": cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_32B,
}
_L2_PROMOTION = {
    "none": cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
    "64B": cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    "128B": cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    "256B": cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
}
_OOB_FILL = {
    "zero": cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    "nan": cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
}


def _choice(desc: dict, key: str, table: dict, where: str):
    value = desc.get(key)
    if value not in table:
        raise TensorMapError(
            f"{where}: {key} {value!r} is not one of {', '.join(map(repr, table))}"
        )
    return table[value]


def element_bytes(desc: dict) -> int:
    """Bytes of one element of the map's dtype."""
    where = f"tensor map '{desc.get('name', '?')}'"
    _choice(desc, "dtype", _DTYPE, where)
    return DTYPES[desc["dtype"]].bytes


def check_tensormap_base(desc: dict, base_ptr: int) -> None:
    """Raise `TensorMapError` when `base_ptr` breaks TMA's alignment rule
    for `desc` (the one rule that depends on the address, so a launch can
    check it alone for a map whose other rules it has checked)."""
    align = 32 if desc.get("interleave") == "32B" else 16
    if base_ptr % align:
        raise TensorMapError(
            f"tensor map '{desc.get('name', '?')}': base address {base_ptr:#x} is not {align}-byte aligned"
            + (" (32B interleave)" if align == 32 else "")
        )


def check_tensormap(desc: dict, base_ptr: int | None) -> None:
    """Raise `TensorMapError`, naming the rule, when `desc` over a tensor at
    `base_ptr` breaks a TMA rule of cuTensorMapEncodeTiled.  `base_ptr` None
    checks everything but the address (not known before allocation)."""
    where = f"tensor map '{desc.get('name', '?')}'"
    elem = element_bytes(desc)
    interleave = desc.get("interleave")
    swizzle = desc.get("swizzle")
    _choice(desc, "interleave", _INTERLEAVE, where)
    _choice(desc, "swizzle", _SWIZZLE, where)
    _choice(desc, "l2_promotion", _L2_PROMOTION, where)
    _choice(desc, "oob_fill", _OOB_FILL, where)

    rank = desc.get("rank")
    if not isinstance(rank, int) or not 1 <= rank <= 5:
        raise TensorMapError(f"{where}: rank {rank!r} is not within 1..5")
    if interleave != "none" and rank < 3:
        raise TensorMapError(f"{where}: an interleaved map needs rank >= 3, not {rank}")
    for key, length in (("dims", rank), ("strides", rank - 1), ("box", rank), ("elem_strides", rank)):
        values = desc.get(key)
        if not isinstance(values, (list, tuple)) or len(values) != length:
            raise TensorMapError(
                f"{where}: {key} must list {length} integers for rank {rank}, got {values!r}"
            )
        if not all(isinstance(v, int) for v in values):
            raise TensorMapError(f"{where}: {key} must be integers, got {values!r}")

    if base_ptr is not None:
        check_tensormap_base(desc, base_ptr)
    for i, d in enumerate(desc["dims"]):
        if not 1 <= d <= 1 << 32:
            raise TensorMapError(f"{where}: dims[{i}] = {d} is not within 1..2^32")
    stride_align = 32 if interleave == "32B" else 16
    for i, s in enumerate(desc["strides"]):
        if s <= 0 or s % stride_align:
            raise TensorMapError(
                f"{where}: strides[{i}] = {s} bytes is not a positive multiple of {stride_align}"
            )
        if s >= 1 << 40:
            raise TensorMapError(f"{where}: strides[{i}] = {s} bytes is not below 2^40")
    for i, b in enumerate(desc["box"]):
        if not 1 <= b <= 256:
            raise TensorMapError(f"{where}: box[{i}] = {b} is not within 1..256")
    for i, e in enumerate(desc["elem_strides"]):
        if not 1 <= e <= 8:
            raise TensorMapError(f"{where}: elem_strides[{i}] = {e} is not within 1..8")
    inner = desc["box"][0] * elem
    if interleave == "none":
        if inner % 16:
            raise TensorMapError(
                f"{where}: the inner box row box[0] * {elem} B = {inner} B is not a multiple of 16 bytes"
            )
        if swizzle != "none" and inner > _SWIZZLE_SPAN[swizzle]:
            raise TensorMapError(
                f"{where}: the inner box row box[0] * {elem} B = {inner} B exceeds the "
                f"{swizzle} swizzle span"
            )
    if interleave == "32B" and swizzle != "32B":
        raise TensorMapError(f"{where}: 32B interleave needs swizzle '32B', not {swizzle!r}")
    if desc["oob_fill"] == "nan" and desc["dtype"] not in _FLOAT_DTYPES:
        raise TensorMapError(f"{where}: NaN out-of-bounds fill needs a float dtype, not {desc['dtype']}")


# cuTensorMapEncodeTiled is called through ctypes rather than cuda-bindings:
# the driver wants the descriptor it writes 64-byte aligned (128 since CUDA
# 13), and cuda-bindings' CUtensorMap output lives inside a Python object,
# which CPython aligns to 16 bytes only.  Here the output buffer is aligned
# by hand.
_OUT_ALIGN = 128
_ENCODE_ARGTYPES = [
    ctypes.c_void_p,  # CUtensorMap *tensorMap
    ctypes.c_int,  # CUtensorMapDataType
    ctypes.c_uint32,  # tensorRank
    ctypes.c_void_p,  # globalAddress
    ctypes.POINTER(ctypes.c_uint64),  # globalDim
    ctypes.POINTER(ctypes.c_uint64),  # globalStrides
    ctypes.POINTER(ctypes.c_uint32),  # boxDim
    ctypes.POINTER(ctypes.c_uint32),  # elementStrides
    ctypes.c_int,  # CUtensorMapInterleave
    ctypes.c_int,  # CUtensorMapSwizzle
    ctypes.c_int,  # CUtensorMapL2promotion
    ctypes.c_int,  # CUtensorMapFloatOOBfill
]
_encode = None


def _encode_function():
    """libcuda's cuTensorMapEncodeTiled (the library cuda-bindings loaded)."""
    global _encode
    if _encode is None:
        fn = driver.libcuda().cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = _ENCODE_ARGTYPES
        _encode = fn
    return _encode


def encode_tiled(desc: dict, base_ptr: int) -> bytes:
    """The 128-byte CUtensorMap for `desc` over the tensor at `base_ptr`."""
    check_tensormap(desc, base_ptr)
    driver.device()
    out = ctypes.create_string_buffer(TENSORMAP_BYTES + _OUT_ALIGN)
    address = ctypes.addressof(out) + (-ctypes.addressof(out) % _OUT_ALIGN)

    def array(ctype, values):
        return (ctype * len(values))(*values)

    status = _encode_function()(
        address,
        int(_DTYPE[desc["dtype"]]),
        desc["rank"],
        base_ptr,
        array(ctypes.c_uint64, desc["dims"]),
        array(ctypes.c_uint64, desc["strides"]),
        array(ctypes.c_uint32, desc["box"]),
        array(ctypes.c_uint32, desc["elem_strides"]),
        int(_INTERLEAVE[desc["interleave"]]),
        int(_SWIZZLE[desc["swizzle"]]),
        int(_L2_PROMOTION[desc["l2_promotion"]]),
        int(_OOB_FILL[desc["oob_fill"]]),
    )
    driver.check_status("cuTensorMapEncodeTiled", status)
    return ctypes.string_at(address, TENSORMAP_BYTES)

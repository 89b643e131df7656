"""Launching a kernel: the caller's arguments checked against its kernel.json
signature, host arrays staged on the device, tensor maps encoded, parameters
packed, then cuLaunchKernelEx.  That is the slow path; a repeated launch
with the same signature is replayed by the kernel's `Launcher`
(launcher.py) without any of it, and a launch with a known argument layout
(the same dtypes, shapes and strides) repeats only the address checks.

The checks are pure functions (`check_args`/`bind_args`, `launch_grid`, `check_smem`,
`pack_params`) so they are tested without a GPU; `Kernel` only adds the
driver calls.

What a caller passes, per parameter kind:
- buffer: a numpy array (copied to a fresh device buffer before the launch
  and back after it), or a device array used in place: a torch CUDA tensor
  (read directly: data_ptr, shape, stride, dtype), or anything with DLPack
  (``__dlpack__``/``__dlpack_device__``: cupy, jax) or
  ``__cuda_array_interface__`` (numba, cupy).  dtype and shape must
  match exactly and the data be C-contiguous.  numpy has no bf16, tf32 or
  8-bit float, so for those the bit patterns in an unsigned array of the
  same width are accepted (and f32 for tf32).
- scalar: a Python or numpy number that fits the dtype.
- tensormap: nothing; it is encoded from the buffer it names and passed by
  value, 128 bytes aligned to 64.
- dim (a runtime extent): nothing; it is read from the buffer axis that
  names it (every axis naming it must agree), checked against the kernel's
  `assume(...)` conditions, and passed as an i32.  The grid is computed
  from the dims (`tilec.runtime.dims`).
"""
from __future__ import annotations

import ctypes
import functools
import math
import struct
import sys

import numpy as np

from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.runtime import dims as runtime_dims, driver
from tilec.runtime.launcher import BUFFER, SCALAR, SCALAR_CODES, Launcher, programmatic_launch
from tilec.runtime.tensormap import (
    TENSORMAP_ALIGN,
    TensorMapError,
    check_tensormap,
    check_tensormap_base,
    element_bytes,
    encode_tiled,
)


class LaunchError(TilecError):
    """The arguments, grid, device or module do not fit the kernel."""


@records.frozen
class HostArray:
    """A numpy array, staged through a device buffer around the launch."""

    array: np.ndarray = records.field(eq=False)


@records.frozen
class DeviceArray:
    """Device memory used in place.  `owner` (the caller's object) keeps it
    alive; `stream` is the producer's stream from a CUDA array interface,
    waited for before the launch (None: nothing to wait for)."""

    ptr: int
    owner: object = records.field(eq=False, repr=False)
    stream: int | None = None


@records.frozen
class Scalar:
    """A scalar parameter's bytes, as the PTX parameter holds them."""

    data: bytes


@records.frozen
class DimValue:
    """A hidden 32-bit parameter's value: a runtime extent bound from the
    arguments' shapes, or a `device` value (the SM count, a divisor's
    magic numbers) computed at launch."""

    value: int

    @property
    def data(self) -> bytes:
        return struct.pack("<I", self.value & 0xFFFFFFFF)  # an i32 or u32 (magic multipliers reach 2**32 - 1)


CALLER_KINDS = ("buffer", "scalar")  # the parameters a caller passes; tensor maps and dims are derived


def caller_params(params: list[dict]) -> list[dict]:
    return [p for p in params if p["kind"] in CALLER_KINDS]


_NUMPY_NAMES = {np.dtype(d.numpy): d.name for d in DTYPES.values() if d.numpy}
_DLPACK_NAMES = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64",
    (4, 16): "bf16",
    (10, 8): "e4m3",  # kDLFloat8_e4m3fn
    (12, 8): "e5m2",
    (14, 8): "ue8m0",  # kDLFloat8_e8m0fnu
}  # fmt: skip
_ALSO_ACCEPTS = {
    "bf16": ("u16",),
    "tf32": ("f32", "u32"),
    "e4m3": ("u8",),
    "e5m2": ("u8",),
    "ue8m0": ("u8",),
    "e2m1": ("u8",),
}
_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13
LEGACY_STREAM = 1  # the legacy default stream's handle in DLPack and CUDA_ARRAY_INTERFACE
_MAX_GRID = (2**31 - 1, 65535, 65535)


@records.frozen
class _Array:
    view: HostArray | DeviceArray
    dtype: str | None  # the tilec dtype it holds, None when tilec has none
    dtype_text: str  # how the caller's library names it, for messages
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # bytes; None when C-contiguous by construction
    itemsize: int


def check_args(
    params: list[dict],
    args,
    tensormaps=(),
    *,
    dlpack_stream: int = LEGACY_STREAM,
    assumes=(),
    sm_count: int | None = None,
) -> dict[str, HostArray | DeviceArray | Scalar | DimValue]:
    """Match the caller's `args` to kernel.json `params` (tensor maps and
    runtime extents are not passed by the caller) and return, per
    non-tensormap parameter name, what it passes (a `DimValue` per runtime
    extent).  `tensormaps` are the kernel's tensormap entries; the base of
    each named device buffer is checked against the TMA rules.  `assumes`
    are kernel.json's assumptions on the runtime extents; `sm_count` the
    device's SM count, for a kernel that reads `sm_count()` (its `device`
    parameter gets a `DimValue` too).
    `dlpack_stream` is the consumer stream handed to ``__dlpack__``.
    Raises `LaunchError` naming the parameter."""
    bound, _layout = bind_args(
        params, args, tensormaps, dlpack_stream=dlpack_stream, assumes=assumes, sm_count=sm_count
    )
    return bound


@records.frozen
class Layout:
    """What the checks of one argument layout (per buffer: its kind, dtype,
    shape and strides) established, so that another launch with the same
    layout repeats only the checks of the addresses.  `values`: the runtime
    extents bound from the shapes (and the SM count); `dims`: the DimValue
    of each dim and device parameter; `tensormaps`: each map's entry
    evaluated for `values`; `aligned`: (buffer, element bytes) and
    `bases`: (buffer, map) of each tensor map, the address rules; `grid`:
    kernel.json's grid for `values` when `bind_args` was given it."""

    values: dict = records.field(eq=False)
    dims: dict = records.field(eq=False)
    tensormaps: dict = records.field(eq=False)
    aligned: tuple
    bases: tuple
    grid: tuple | None


def bind_args(
    params: list[dict],
    args,
    tensormaps=(),
    *,
    dlpack_stream: int = LEGACY_STREAM,
    assumes=(),
    sm_count: int | None = None,
    grid=None,
    layouts: dict | None = None,
) -> tuple[dict, Layout]:
    """`check_args`, also returning the argument `Layout` (with `grid`,
    kernel.json's grid, evaluated for its runtime extents).  With `layouts`
    (a kernel's cache: layout key -> Layout), a layout already there skips
    every check that depends on the layout alone -- dtypes, shapes,
    strides, assumptions, the tensor maps' rules and reach -- and a new one
    is added; the addresses are checked on every call."""
    caller = caller_params(params)
    if len(args) != len(caller):
        names = ", ".join(p["name"] for p in caller)
        raise LaunchError(f"the kernel takes {len(caller)} arguments ({names}), got {len(args)}")
    bound: dict[str, HostArray | DeviceArray | Scalar | DimValue] = {}
    arrays: dict[str, _Array] = {}
    for param, arg in zip(caller, args):
        if param["kind"] == "buffer":
            arrays[param["name"]] = info = _read_buffer(param, arg, dlpack_stream)
            bound[param["name"]] = info.view
        elif param["kind"] == "scalar":
            bound[param["name"]] = _check_scalar(param, arg)
        else:
            raise ValueError(
                f"kernel.json: parameter '{param['name']}' has unknown kind {param['kind']!r}"
            )
    key = tuple(
        (isinstance(a.view, DeviceArray), a.dtype, a.dtype_text, a.shape, a.strides, a.itemsize)
        for a in arrays.values()
    )
    layout = layouts.get(key) if layouts is not None else None
    if layout is None:
        layout = _check_layout(params, caller, arrays, tensormaps, assumes, sm_count, grid)
        if layouts is not None:
            if len(layouts) >= _LAYOUTS_KEPT:
                del layouts[next(iter(layouts))]
            layouts[key] = layout
    _check_addresses(layout, arrays)
    bound.update(layout.dims)
    return bound, layout


_LAYOUTS_KEPT = 64  # argument layouts a kernel remembers as checked


def _check_layout(params, caller, arrays: dict, tensormaps, assumes, sm_count, grid) -> Layout:
    """Every check that depends on the arguments' layout alone, in
    parameter order; the `Layout` they establish."""
    env: dict[str, tuple[int, str]] = {}  # dim -> (value, the buffer it was read from)
    for param in caller:
        if param["kind"] == "buffer":
            _check_buffer(param, arrays[param["name"]], env)
    values = {name: value for name, (value, _) in env.items()}
    if sm_count is not None:
        values[runtime_dims.SM_COUNT] = sm_count
    _check_assumes(assumes, values)
    try:
        device = runtime_dims.device_values(params, values)
    except runtime_dims.DimError as e:
        raise LaunchError(f"kernel.json: a hidden parameter cannot be computed: {e} ({_dims_text(values)})") from None
    dims = {}
    for param in params:
        if param["kind"] == "dim":
            dims[param["name"]] = DimValue(values[param["name"]])
        elif param["kind"] == "device":
            dims[param["name"]] = DimValue(device[param["name"]])
    descs = {t["name"]: t for t in tensormaps}
    buffers = {p["name"]: p for p in caller if p["kind"] == "buffer"}
    evaluated, bases = {}, []
    for param in params:
        if param["kind"] == "tensormap":
            evaluated[param["name"]] = _check_tensormap_param(param, descs, buffers, arrays, values)
            bases.append((param["tensor"], param["name"]))
    aligned = tuple(
        (name, DTYPES[buffers[name]["dtype"]].bytes)
        for name, info in arrays.items()
        if isinstance(info.view, DeviceArray)
    )
    return Layout(
        values, dims, evaluated, aligned, tuple(bases), None if grid is None else kernel_grid(grid, values)
    )


def _check_addresses(layout: Layout, arrays: dict) -> None:
    """The checks that depend on the device addresses: each buffer aligned
    to its elements, each tensor map's base to TMA's rule."""
    for name, size in layout.aligned:
        ptr = arrays[name].view.ptr
        if ptr % size:
            raise LaunchError(
                f"parameter '{name}': device address {ptr:#x} is not aligned to its "
                f"{size}-byte elements"
            )
    for tensor, name in layout.bases:
        view = arrays[tensor].view
        if isinstance(view, DeviceArray):
            try:
                check_tensormap_base(layout.tensormaps[name], view.ptr)
            except TensorMapError as e:
                raise LaunchError(f"parameter '{tensor}' (tensor map '{name}'): {e.message}") from None


def _shape_text(dtype: str, shape) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


def _dims_text(values: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in values.items())


def _check_assumes(assumes, values: dict) -> None:
    try:
        failed = runtime_dims.failed_assumption(assumes, values)
    except runtime_dims.DimError as e:
        raise LaunchError(f"kernel.json: an assumption cannot be evaluated: {e}") from None
    if failed is not None:
        raise LaunchError(f"the arguments break the kernel's assumption '{failed['message']}' ({_dims_text(values)})")


def _bind_shape(name: str, want: str, declared: tuple, actual: tuple, env: dict) -> None:
    """Match `actual` against a declared shape with runtime extents, binding
    each extent at its first axis (`env`: dim -> (value, buffer))."""
    shown = _shape_text(want, declared)
    if len(actual) != len(declared):
        raise LaunchError(f"parameter '{name}': shape {list(actual)} does not match {shown}")
    for axis, (d, n) in enumerate(zip(declared, actual)):
        if isinstance(d, int):
            if d != n:
                raise LaunchError(f"parameter '{name}': shape {list(actual)} does not match {shown}")
        elif d in env:
            if env[d][0] != n:
                value, source = env[d]
                raise LaunchError(
                    f"parameter '{name}': shape {list(actual)} does not match {shown} with "
                    f"{d} = {value} (from '{source}')"
                )
        elif n > runtime_dims.MAX_DIM:
            raise LaunchError(
                f"parameter '{name}': runtime extent {d} = {n} is more than a kernel's 32-bit "
                f"extent holds ({runtime_dims.MAX_DIM})"
            )
        else:
            env[d] = (int(n), name)
    if math.prod(actual) >= runtime_dims.MAX_ELEMENTS:
        raise LaunchError(
            f"parameter '{name}': {math.prod(actual)} elements; a buffer with runtime extents is "
            f"indexed in 32 bits (fewer than 2**31 elements)"
        )


def _read_buffer(param: dict, arg, dlpack_stream: int) -> _Array:
    """`arg` as an array, or a LaunchError saying what it is instead."""
    info = _as_array(param["name"], arg, dlpack_stream)
    if info is None:
        raise LaunchError(
            f"parameter '{param['name']}' is a buffer {_shape_text(param['dtype'], tuple(param['shape']))}: "
            f"expected a numpy array or a device array (DLPack or __cuda_array_interface__), got "
            f"{type(arg).__name__}"
        )
    return info


def _check_buffer(param: dict, info: _Array, env: dict) -> None:
    """dtype, shape (binding runtime extents into `env`) and contiguity."""
    name, want, shape = param["name"], param["dtype"], tuple(param["shape"])
    if info.dtype != want and info.dtype not in _ALSO_ACCEPTS.get(want, ()):
        raise LaunchError(f"parameter '{name}': dtype {info.dtype_text} does not match {want}")
    if any(isinstance(d, str) for d in shape):
        _bind_shape(name, want, shape, tuple(info.shape), env)
    elif info.shape != shape:
        raise LaunchError(
            f"parameter '{name}': shape {list(info.shape)} does not match {_shape_text(want, shape)}"
        )
    if info.strides is not None and not _c_contiguous(info.shape, info.strides, info.itemsize):
        raise LaunchError(
            f"parameter '{name}': the array is not C-contiguous (byte strides {list(info.strides)})"
        )


def _c_contiguous(shape, strides, itemsize: int) -> bool:
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _as_array(name: str, arg, dlpack_stream: int) -> _Array | None:
    """What `arg` is as an array, or None when it is not one.  Foreign
    protocols can fail in their own ways; those become a LaunchError."""
    if isinstance(arg, np.ndarray):
        return _host_array(name, arg)
    tensor_type = torch_tensor_type()
    if tensor_type is not None and isinstance(arg, tensor_type) and arg.is_cuda:
        return _torch_array(name, arg)
    try:
        if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
            device_type, device_id = arg.__dlpack_device__()
            if device_type == _DL_CPU:
                return _host_array(name, np.from_dlpack(arg))
            if device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
                if device_id != driver.ORDINAL:
                    raise LaunchError(
                        f"parameter '{name}': the array is on CUDA device {device_id}, tilec launches "
                        f"on device {driver.ORDINAL} (choose it with CUDA_VISIBLE_DEVICES)"
                    )
                return _dlpack_array(name, arg, arg.__dlpack__(stream=dlpack_stream))
            raise LaunchError(
                f"parameter '{name}': the array is on DLPack device type {int(device_type)}, not CUDA"
            )
        try:
            interface = arg.__cuda_array_interface__
        except AttributeError:
            return None
        return _interface_array(name, arg, interface)
    except LaunchError:
        raise
    except Exception as e:  # the caller's array library refused
        raise LaunchError(
            f"parameter '{name}': cannot read the array ({type(e).__name__}: {e})"
        ) from e


def torch_tensor_type():
    """torch.Tensor when torch is imported (a caller cannot hold a tensor
    otherwise), else None; tilec never imports torch itself."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def torch_stream_function():
    """torch's raw current-stream query (device index -> CUstream handle),
    or None without torch."""
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)


_TORCH_NAMES = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float8_e8m0fnu": "ue8m0",
}  # fmt: skip


def _torch_array(name: str, tensor) -> _Array:
    """A torch CUDA tensor, read through its own accessors: DLPack export
    costs a device and stream look-up per call, and this is all tilec
    needs."""
    index = tensor.device.index
    if index is not None and index != driver.ORDINAL:
        raise LaunchError(
            f"parameter '{name}': the tensor is on cuda:{index}, tilec launches on device "
            f"{driver.ORDINAL} (choose it with CUDA_VISIBLE_DEVICES)"
        )
    itemsize = tensor.element_size()
    text = str(tensor.dtype)
    return _Array(
        DeviceArray(_device_pointer(name, tensor.data_ptr()), tensor),
        _TORCH_NAMES.get(text.removeprefix("torch.")),
        text,
        tuple(tensor.shape),
        tuple(s * itemsize for s in tensor.stride()),
        itemsize,
    )


def _device_pointer(name: str, ptr) -> int:
    """`ptr` as a device address: a non-NULL integer a 64-bit pointer can
    hold."""
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
        raise LaunchError(f"parameter '{name}': the device pointer {ptr!r} is not an integer")
    if not 0 < int(ptr) < 2**64:
        what = "NULL" if ptr == 0 else f"{int(ptr):#x}, outside 0..2**64"
        raise LaunchError(f"parameter '{name}': the device pointer is {what}")
    return int(ptr)


def _host_array(name: str, array: np.ndarray) -> _Array:
    if isinstance(array, np.ma.MaskedArray):
        raise LaunchError(f"parameter '{name}': masked arrays are not supported (pass x.filled())")
    if not array.flags.c_contiguous:
        raise LaunchError(
            f"parameter '{name}': the numpy array is not C-contiguous (pass np.ascontiguousarray(x))"
        )
    dtype = _NUMPY_NAMES.get(array.dtype)
    return _Array(HostArray(array), dtype, str(array.dtype), array.shape, None, array.itemsize)


def _interface_array(name: str, owner, interface: dict) -> _Array:
    if interface.get("mask") is not None:
        raise LaunchError(f"parameter '{name}': masked arrays are not supported")
    ptr, _readonly = interface["data"]
    dtype = np.dtype(interface["typestr"])
    strides = interface.get("strides")
    stream = interface.get("stream")
    if stream is not None:
        stream = _stream_value(f"parameter '{name}': the array's producer stream", stream)
    return _Array(
        DeviceArray(_device_pointer(name, ptr), owner, stream),
        _NUMPY_NAMES.get(dtype),
        interface["typestr"],
        tuple(interface["shape"]),
        None if strides is None else tuple(strides),
        dtype.itemsize,
    )


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# A private prototype, so the shared ctypes.pythonapi entry is left as it is.
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


_MAX_DLPACK_NDIM = 64  # far above any real tensor; a bound before reading shape[i]


def _dlpack_array(name: str, owner, capsule) -> _Array:
    """Read a legacy "dltensor" capsule (a DLManagedTensor starts with its
    DLTensor).  The capsule is not consumed: dropping it calls the
    producer's deleter, while `owner` keeps the memory alive.  ndim is
    bounded before shape and strides are read: they are raw C arrays."""
    tensor = ctypes.cast(_capsule_pointer(capsule, b"dltensor"), ctypes.POINTER(_DLTensor)).contents
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if not 0 <= tensor.ndim <= _MAX_DLPACK_NDIM:
        raise LaunchError(f"parameter '{name}': the DLPack tensor claims {tensor.ndim} dimensions")
    if tensor.ndim and not tensor.shape:
        raise LaunchError(f"parameter '{name}': the DLPack tensor has no shape array")
    itemsize = (bits * lanes + 7) // 8
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    strides = None
    if tensor.strides:
        strides = tuple(tensor.strides[i] * itemsize for i in range(tensor.ndim))
    return _Array(
        DeviceArray(_device_pointer(name, (tensor.data or 0) + tensor.byte_offset), owner),
        _DLPACK_NAMES.get((code, bits)) if lanes == 1 else None,
        f"DLPack(code={code}, bits={bits}, lanes={lanes})",
        shape,
        strides,
        itemsize,
    )


def _check_scalar(param: dict, arg) -> Scalar:
    name, dt = param["name"], DTYPES[param["dtype"]]
    if dt.numpy is None:
        raise LaunchError(f"parameter '{name}': a scalar {dt.name} cannot be passed from Python")
    np_dtype = np.dtype(dt.numpy)
    if isinstance(arg, (bool, np.bool_, int, np.integer)):
        value = int(arg)
        if dt.kind != "float":
            limits = np.iinfo(np_dtype)
            if not limits.min <= value <= limits.max:
                raise LaunchError(f"parameter '{name}': {value} does not fit {dt.name}")
            return Scalar(np.array(value, dtype=np_dtype).tobytes())
        try:
            arg = float(value)
        except OverflowError:
            raise LaunchError(f"parameter '{name}': the integer does not fit {dt.name}") from None
    if isinstance(arg, (float, np.floating)):
        if dt.kind != "float":
            raise LaunchError(f"parameter '{name}' is {dt.name}: got the float {arg!r}")
        with np.errstate(over="ignore"):
            value = np.array(arg, dtype=np_dtype)
        if np.isinf(value) and np.isfinite(arg):
            raise LaunchError(f"parameter '{name}': {arg!r} overflows {dt.name}")
        return Scalar(value.tobytes())
    raise LaunchError(
        f"parameter '{name}' is a scalar {dt.name}: expected a number, got {type(arg).__name__}"
    )


def _check_tensormap_param(param: dict, descs: dict, buffers: dict, arrays: dict, values: dict) -> dict:
    """The map's entry evaluated for `values`, checked against the TMA rules
    but for its base address (`_check_addresses`) and against the buffer's
    size."""
    name, tensor = param["name"], param["tensor"]
    if name not in descs:
        raise ValueError(f"kernel.json: tensor map parameter '{name}' has no tensormaps entry")
    if tensor not in buffers:
        raise ValueError(
            f"kernel.json: tensor map '{name}' names '{tensor}', which is not a buffer parameter"
        )
    info = arrays[tensor]
    try:
        desc = runtime_dims.tensormap_for(descs[name], values)
    except runtime_dims.DimError as e:
        raise LaunchError(f"tensor map '{name}' cannot be computed for {_dims_text(values)}: {e}") from None
    try:
        check_tensormap(desc, None)
    except TensorMapError as e:
        raise LaunchError(f"parameter '{tensor}' (tensor map '{name}'): {e.message}") from None
    buffer = buffers[tensor]
    size = math.prod(info.shape) * DTYPES[buffer["dtype"]].bytes
    reach = desc["dims"][0] * element_bytes(desc) + sum(
        (d - 1) * s for d, s in zip(desc["dims"][1:], desc["strides"])
    )
    if reach > size:
        raise LaunchError(
            f"tensor map '{name}' spans {reach} bytes of '{tensor}', which holds only {size}"
        )
    return desc


def kernel_grid(entry_grid, values: dict) -> tuple:
    """kernel.json's grid for the runtime extents `values`: a LaunchError
    when an extent comes out below 1 (an empty launch) or cannot be
    computed."""
    try:
        dims = runtime_dims.grid(entry_grid, values)
    except runtime_dims.DimError as e:
        raise LaunchError(f"the grid cannot be computed for {_dims_text(values)}: {e}") from None
    if values and not all(d >= 1 for d in dims):
        raise LaunchError(f"the grid {list(dims)} computed for {_dims_text(values)} is empty")
    return dims


def launch_grid(grid, default, cluster) -> tuple[int, int, int]:
    """The grid to launch: `grid` (an int or 1 to 3 ints) or the kernel's
    `default`, padded to three dimensions, each a whole number of clusters."""
    if grid is None:
        dims = default
    elif isinstance(grid, (int, np.integer)):
        dims = (grid,)
    elif isinstance(grid, (tuple, list)):
        dims = tuple(grid)
    else:
        dims = ()
    if not 1 <= len(dims) <= 3 or not all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1 for d in dims
    ):
        shown = grid if grid is not None else default
        raise LaunchError(f"grid {shown!r} is not 1 to 3 positive integers")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    for axis, (extent, limit) in enumerate(zip(dims, _MAX_GRID)):
        if extent > limit:
            raise LaunchError(f"grid {list(dims)}: the {'xyz'[axis]} extent exceeds {limit}")
    for axis, (extent, size) in enumerate(zip(dims, cluster)):
        if extent % size:
            raise LaunchError(
                f"grid {list(dims)} is not a whole number of clusters {list(cluster)} "
                f"along {'xyz'[axis]}"
            )
    return dims


def check_smem(kernel: str, dynamic: int, static: int, limit: int) -> None:
    """Refuse a kernel whose static plus dynamic shared memory exceeds the
    device's per-block limit (the opt-in maximum)."""
    if dynamic + static > limit:
        raise LaunchError(
            f"kernel '{kernel}' needs {dynamic} bytes of dynamic shared memory"
            + (f" plus {static} static" if static else "")
            + f", more than the {limit} bytes a block may use on this device"
        )


@records.frozen
class PackedParams:
    """The void* array cuLaunchKernelEx reads, and the storage it points to."""

    storage: object = records.field(repr=False)
    pointers: object = records.field(repr=False)

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers)


def pack_params(blobs: list[bytes]) -> PackedParams:
    """Each parameter's bytes in one buffer, every one at a 64-byte aligned
    offset (a tensor map must be), and the array of pointers to them."""
    slots = [-(-max(len(b), 1) // TENSORMAP_ALIGN) * TENSORMAP_ALIGN for b in blobs]
    storage = ctypes.create_string_buffer(sum(slots) + TENSORMAP_ALIGN)
    offset = -ctypes.addressof(storage) % TENSORMAP_ALIGN
    pointers = (ctypes.c_void_p * len(blobs))()
    for i, (blob, slot) in enumerate(zip(blobs, slots)):
        address = ctypes.addressof(storage) + offset
        ctypes.memmove(address, blob, len(blob))
        pointers[i] = address
        offset += slot
    return PackedParams(storage, pointers)


def stream_handle(stream) -> int:
    """The CUstream handle for `stream`: None (the legacy default stream,
    0), an int handle, an object with ``__cuda_stream__`` (CUDA stream
    protocol), or a torch.cuda.Stream (``cuda_stream``)."""
    if stream is None:
        return 0
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        return _stream_value(f"stream {stream!r}", stream)
    protocol = getattr(stream, "__cuda_stream__", None)
    if callable(protocol):
        try:
            version, handle = protocol()
        except Exception as e:  # the caller's stream object refused
            raise LaunchError(
                f"stream {stream!r}: __cuda_stream__() did not give (version, handle) "
                f"({type(e).__name__}: {e})"
            ) from None
        return _stream_value(f"stream {stream!r}: __cuda_stream__()", handle)
    handle = getattr(stream, "cuda_stream", None)
    if isinstance(handle, int):
        return _stream_value(f"stream {stream!r}", handle)
    raise LaunchError(
        f"stream {stream!r} is not a CUDA stream (an int handle, __cuda_stream__, or torch.cuda.Stream)"
    )


def _stream_value(what: str, handle) -> int:
    """A CUstream handle: an integer a 64-bit pointer can hold."""
    if isinstance(handle, bool) or not isinstance(handle, (int, np.integer)) or not 0 <= handle < 2**64:
        raise LaunchError(f"{what} gave the handle {handle!r}, not an integer in 0..2**64")
    return int(handle)


def _same_stream(a: int, b: int) -> bool:
    """Handles 0 and 1 both name the legacy default stream."""
    return (a or LEGACY_STREAM) == (b or LEGACY_STREAM)


class _Staging:
    """Device copies of the host arrays of one launch, freed on exit (quietly
    when the launch already failed, so its error is the one reported)."""

    def __init__(self):
        self.uploads: dict[int, tuple[np.ndarray, int]] = {}

    def __enter__(self):
        return self

    def upload(self, array: np.ndarray) -> int:
        """The device copy of `array`; one per array object, so two
        parameters given the same array see the same memory."""
        if id(array) not in self.uploads:
            ptr = driver.mem_alloc(array.nbytes)
            self.uploads[id(array)] = (array, ptr)
            driver.copy_to_device(ptr, array.ctypes.data, array.nbytes)
        return self.uploads[id(array)][1]

    def download(self) -> None:
        """Copy every writeable host array back from its device copy."""
        for array, ptr in self.uploads.values():
            if array.flags.writeable:
                driver.copy_to_host(array.ctypes.data, ptr, array.nbytes)

    def __exit__(self, exc_type, exc, tb):
        for _array, ptr in self.uploads.values():
            try:
                driver.mem_free(ptr)
            except driver.CudaError:
                if exc_type is None:
                    raise
        return False


class _KernelBody:
    """One kernel of a loaded module; calling it launches it.

    ``kernel(*args, grid=None, stream=None, pdl=None)``: `args` follow the
    kernel's non-tensormap parameters; `grid` overrides kernel.json's;
    `stream` is where to launch.  Without one, the launch goes to torch's
    current stream when any argument is a torch CUDA tensor, else to the
    legacy default stream.  The call returns once the kernel is queued,
    except that numpy arrays are copied back, which waits for the kernel.
    `pdl`: a kernel that waits on its grid dependency (kernel.json
    `grid_dependency_wait`) is launched with programmatic stream
    serialization unless `pdl=False`; `pdl=True` on any other kernel is a
    LaunchError (`programmatic`).

    A kernel is a launcher (launcher.py; the compiled one where it is
    built): a launch whose arguments have the signature of one of the last
    few (the same tensors' pointers, shapes, strides and dtypes) is
    replayed by it with no checks repeated, in one C call; any other goes
    on to `_miss` here, the slow path, whose launch the launcher then
    remembers.  The slow path checks a known argument layout's addresses
    only (`bind_args`), and encoded tensor maps are kept per (map,
    address), so a change of pointers costs at most one encode per map."""

    _ENCODED_KEPT = 64  # encoded tensor maps kept per kernel

    def __init__(self, module, entry: dict, function, device: driver.Device):
        self.module = module  # keeps the CUmodule loaded while this kernel lives
        self.meta = entry
        self.name = entry["name"]
        self.params = entry["params"]
        self.tensormaps = {t["name"]: t for t in entry.get("tensormaps", [])}
        self.assumes = tuple(entry.get("assumes", ()))
        self.grid = tuple(entry["grid"])  # ints, or expressions of the runtime extents
        self.block = tuple(entry["block"])
        self.cluster = tuple(entry.get("cluster", (1, 1, 1)))
        self.dynamic_smem = int(entry.get("dynamic_smem", 0))
        self.waits_grid_dependency = entry.get("grid_dependency_wait", False)
        if not isinstance(self.waits_grid_dependency, bool):
            raise LaunchError(
                f"kernel.json: kernel '{self.name}': 'grid_dependency_wait' must be true or false, "
                f"got {self.waits_grid_dependency!r}"
            )
        self.sm_count = device.sm_count
        self._function = function
        self._configured = False  # the launcher's constants, set on the first launch it can remember
        self._encoded: dict[tuple, bytes] = {}
        self._layouts: dict[tuple, Layout] = {}  # argument layouts checked (bind_args)
        self._buffer_args = [i for i, p in enumerate(caller_params(self.params)) if p["kind"] == "buffer"]
        static = driver.function_attribute(function, "SHARED_SIZE_BYTES")
        check_smem(self.name, self.dynamic_smem, static, device.max_dynamic_smem)
        if self.dynamic_smem:
            driver.set_function_attribute(function, "MAX_DYNAMIC_SHARED_SIZE_BYTES", self.dynamic_smem)
        if math.prod(self.cluster) > 8:  # above the portable cluster size
            driver.set_function_attribute(function, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)

    def __repr__(self) -> str:
        return f"<tilec Kernel {self.name} grid={list(self.grid)} block={list(self.block)}>"

    def _miss(self, args, grid, stream, pdl, status: int) -> None:
        """What the launcher's call does when it did not launch (status -1)
        or the driver refused the replay (a CUresult)."""
        if status == _INVALID_CONTEXT:
            driver.device()  # a thread that never made the context current; the slow path retries
        elif status > 0:
            driver.check_status("cuLaunchKernelEx", status)
        self._launch_checked(args, grid, stream, pdl)

    def _launch_checked(self, args, grid, stream, pdl) -> None:
        """The slow path: the checks (those of a known argument layout
        skipped but for the addresses), staging, encodes, then the launch:
        remembered by the launcher when it can be replayed, and then
        launched by it."""
        programmatic = self.programmatic(pdl)
        tensor_type = torch_tensor_type()
        on_torch = tensor_type is not None and any(
            isinstance(a, tensor_type) and a.is_cuda for a in args
        )
        stream_fn = torch_stream_function() if on_torch else None
        if stream is not None:
            handle = stream_handle(stream)
        elif stream_fn is not None:
            handle = _stream_value("torch's current stream", stream_fn(driver.ORDINAL))
        else:
            handle = 0
        bound, layout = bind_args(
            self.params,
            args,
            self.tensormaps.values(),
            dlpack_stream=handle or LEGACY_STREAM,
            assumes=self.assumes,
            sm_count=self.sm_count,
            grid=self.grid,
            layouts=self._layouts,
        )
        dims = launch_grid(grid, layout.grid, self.cluster)
        driver.device()
        with _Staging() as staging:
            pointers = {}
            for name, value in bound.items():
                if isinstance(value, HostArray):
                    pointers[name] = staging.upload(value.array)
                elif isinstance(value, DeviceArray):
                    pointers[name] = value.ptr
                    if value.stream is not None and not _same_stream(value.stream, handle):
                        driver.stream_synchronize(value.stream)
            blobs = []
            for param in self.params:
                if param["kind"] == "buffer":
                    blobs.append(struct.pack("<Q", pointers[param["name"]]))
                elif param["kind"] in ("scalar", "dim", "device"):
                    blobs.append(bound[param["name"]].data)
                else:
                    blobs.append(self._encode(param["name"], pointers[param["tensor"]], layout))
            default = dims if grid is None else layout.grid
            if not staging.uploads and self._remember(args, blobs, default, tensor_type, stream_fn):
                status = self._replay(args, dims, handle, programmatic)  # what was just remembered
                if status >= 0:
                    driver.check_status("cuLaunchKernelEx", status)
                    return
            packed = pack_params(blobs)  # arguments the launcher does not remember: launched once by it
            self._configure_once(blobs)
            status = self._launch_params(dims, handle, packed.address if blobs else 0, programmatic)
            driver.check_status("cuLaunchKernelEx", status)
            if staging.uploads:
                driver.stream_synchronize(handle)
                staging.download()

    def programmatic(self, pdl) -> bool:
        """Whether a launch with the keyword `pdl` is programmatic: None
        (the default) for a kernel that waits on its grid dependency, never
        for one that does not; a LaunchError for pdl=True on such a kernel
        or a `pdl` that is not a bool (the rule is `programmatic_launch`'s,
        which the fast path follows too)."""
        decided = programmatic_launch(pdl, self.waits_grid_dependency)
        if decided is not None:
            return decided
        if not isinstance(pdl, bool):
            raise LaunchError(f"pdl={pdl!r}: expected True, False or None")
        raise LaunchError(
            f"pdl=True: kernel '{self.name}' never executes ptx.griddepcontrol.wait, so a programmatic "
            f"launch could let it read what the kernel before it has not yet written"
        )

    def _encode(self, name: str, base: int, layout: Layout) -> bytes:
        """The encoded map `name` over `base`, kept per (map, address, its
        dims and strides for this layout's runtime extents)."""
        desc = layout.tensormaps[name]
        key = (name, base, tuple(desc["dims"]), tuple(desc["strides"]))
        if key not in self._encoded:
            if len(self._encoded) >= self._ENCODED_KEPT:
                del self._encoded[next(iter(self._encoded))]
            self._encoded[key] = encode_tiled(desc, base)
        return self._encoded[key]

    def _configure_once(self, blobs: list[bytes]) -> None:
        """Give the launcher the kernel's launch constants (the function,
        cuLaunchKernelEx, block, cluster, shared memory, each parameter's
        size, which arguments are buffers or scalars, and whether the
        kernel waits on its grid dependency), on the first launch."""
        if self._configured:
            return
        caller = caller_params(self.params)
        slots = {p["name"]: i for i, p in enumerate(self.params)}
        specs = [
            (BUFFER, slots[p["name"]], 0)
            if p["kind"] == "buffer"
            else (SCALAR, slots[p["name"]], SCALAR_CODES.get(p["dtype"], 0))
            for p in caller
        ]
        self._configure(
            driver.function_address(self._function),
            driver.launch_kernel_ex_address(),
            self.block,
            self.cluster,
            self.dynamic_smem,
            [len(b) for b in blobs],
            specs,
            self.waits_grid_dependency,
        )
        self._configured = True

    def _remember(self, args, blobs: list[bytes], default, tensor_type, stream_fn) -> bool:
        """Hand a launch whose arrays are all torch tensors to the launcher
        to replay (it recognises no other array); whether it took it.
        `default` is the grid for these arguments' runtime extents (the
        signature fixes them)."""
        if self._buffer_args and (
            tensor_type is None or not all(isinstance(args[i], tensor_type) for i in self._buffer_args)
        ):
            return False
        self._configure_once(blobs)
        default = launch_grid(None, default, self.cluster)  # padded, and checked when grid= overrode it
        return self._commit(tuple(args), blobs, default, tensor_type or object, stream_fn)


_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT


@functools.cache
def kernel_type(launcher: type) -> type:
    """The kernel class over `launcher`, a launcher implementation: `Kernel`
    over the one in use, or one over the other (the pure-Python launcher,
    so tests and benchmarks compare both in one process)."""
    return type("Kernel", (_KernelBody, launcher), {"__doc__": _KernelBody.__doc__, "__module__": __name__})


Kernel = kernel_type(Launcher)

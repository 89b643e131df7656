"""The fast launch path: a kernel's last validated launch, replayed.

A `Kernel` (launch.py) is a launcher: calling it, ``kernel(*args,
grid=None, stream=None, pdl=None)``, is the launcher's call.  The launcher remembers
the signatures of the last few (4) launches the slow path validated -- per
buffer argument the tensor's data pointer, shape, strides and dtype --
each with the packed parameter bytes that went with it (buffer pointers,
encoded tensor maps, bound extents).  Arguments with a remembered
signature need none of the slow path's work: the launcher writes the
scalar parameters into that signature's preallocated buffer, picks the
stream and calls cuLaunchKernelEx; with the compiled launcher that is one
C call from the caller to the driver.  Anything it cannot prove identical
is a miss (status -1), nothing launched, and the call goes on to the
kernel's ``_miss(args, grid, stream, pdl, status)``: the slow path, which
checks, encodes and commits the new signature in place of the least
recently used one (so code that rotates among a few sets of tensors stays
on the fast path), then launches it with ``_replay``.

A kernel whose kernel.json says `grid_dependency_wait` (it executes
griddepcontrol.wait) is launched with the programmatic stream serialization
attribute (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), so it may
start while the kernel before it on the stream finishes; ``pdl=False``
launches it plainly.  A kernel that never waits is never launched so
(``pdl=True`` on one is a miss, which the slow path refuses): its first
instruction could read what its predecessor has not yet written.

Only tensors of one type (torch.Tensor) take this path: their pointer,
shape, strides and dtype are read directly, and a pointer identifies its
device (CUDA's unified addressing), so an unchanged signature is an
unchanged validation.  The compiled launcher reads them through the
type's DLPack C exchange API when it has one (torch 2.10+), with no Python
call per tensor, and takes torch's current stream from the same API.

Two implementations with one behaviour: `_launcher.c`, compiled when tilec
is installed (setup.py; optional, so an install without a C compiler still
works), and `PyLauncher` here.  `TILEC_LAUNCHER=python` forces the latter.
"""
from __future__ import annotations

import ctypes
import math
import os
import struct
import threading
from collections import OrderedDict

BUFFER, SCALAR = 0, 1
ENTRIES = 4  # signatures remembered per kernel (as _launcher.c's ENTRIES)
# scalar dtype -> the code both implementations use; other dtypes (f16,
# bf16...) always miss and are packed by the slow path
SCALAR_CODES = {
    "i8": 1, "i16": 2, "i32": 3, "i64": 4, "u8": 5, "u16": 6, "u32": 7, "u64": 8, "f32": 9, "f64": 10,
}  # fmt: skip
_STRUCT_FORMAT = {1: "<b", 2: "<h", 3: "<i", 4: "<q", 5: "<B", 6: "<H", 7: "<I", 8: "<Q", 9: "<f", 10: "<d"}
_MAX_GRID = (2**31 - 1, 65535, 65535)
_ALIGN = 64  # a tensor map parameter is .align 64
_CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
_PROGRAMMATIC = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _Value(ctypes.Union):  # CUlaunchAttributeValue
    _fields_ = [("pad", ctypes.c_char * 64), ("cluster", _Dim3), ("programmatic", ctypes.c_int)]


class _Attribute(ctypes.Structure):  # CUlaunchAttribute
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _Value)]


class _Config(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared_bytes", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_Attribute)),
        ("num_attrs", ctypes.c_uint),
    ]


_LAUNCH_PROTOTYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(_Config), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)


class _Entry:
    """One remembered signature's parameter buffer (each slot 64-byte
    aligned) and default grid."""

    def __init__(self, sizes: list[int]):
        slots = [-(-max(size, 1) // _ALIGN) * _ALIGN for size in sizes]
        self.storage = ctypes.create_string_buffer(sum(slots) + _ALIGN)
        base = ctypes.addressof(self.storage) + (-ctypes.addressof(self.storage) % _ALIGN)
        self.addresses = [base + sum(slots[:i]) for i in range(len(slots))]
        self.pointers = (ctypes.c_void_p * max(len(slots), 1))(*self.addresses)
        self.params = ctypes.addressof(self.pointers) if slots else None
        self.grid = (1, 1, 1)


class PyLauncher:
    """The pure-Python launcher; see the module docstring.  Same interface
    and behaviour as the compiled one, as the base of a kernel class that
    defines ``_miss``: ``kernel(*args, grid=None, stream=None, pdl=None)``;
    ``_configure(function, launch, block, cluster, shared_bytes,
    slot_sizes, specs, programmatic)`` once, then ``_commit(args, blobs,
    grid, tensor_type, stream_fn)`` and ``_replay(args, grid, stream, pdl)``
    -> -1 or the CUresult; the last `ENTRIES` signatures are remembered.
    ``_launch_params(grid, stream, params, programmatic)`` -> the CUresult
    launches parameters the slow path packed for arguments it does not
    remember."""

    _tensor_type = None  # until the first commit: every call is a miss
    _entries = ()  # until _configure gives the launcher its own

    def __call__(self, *args, grid=None, stream=None, pdl=None):
        status = self._replay(args, grid, stream, pdl)
        if status:
            return self._miss(args, grid, stream, pdl, status)
        return None

    def _configure(self, function, launch, block, cluster, shared_bytes, slot_sizes, specs, programmatic):
        if "_launch" in self.__dict__:
            raise TypeError("a launcher is configured once")
        self._lock = threading.Lock()
        self._launch = _LAUNCH_PROTOTYPE(launch)
        self._function_address = function
        self._cluster = tuple(cluster)
        self._sizes = list(slot_sizes)
        self._buffers = [i for i, (kind, _slot, _code) in enumerate(specs) if kind == BUFFER]
        self._scalars = [(i, slot, _STRUCT_FORMAT.get(code)) for i, (kind, slot, code) in enumerate(specs) if kind == SCALAR]
        self._nargs = len(specs)
        self._config = _Config()
        self._config.block[:] = tuple(block)
        self._config.shared_bytes = shared_bytes
        self._programmatic = bool(programmatic)
        # programmatic serialization, then the cluster shape (as _launcher.c)
        self._attributes = (_Attribute * 2)(_Attribute(id=_PROGRAMMATIC), _Attribute(id=_CLUSTER_DIMENSION))
        self._attributes[0].value.programmatic = 1
        self._attributes[1].value.cluster = _Dim3(*cluster)
        self._clustered = math.prod(self._cluster) != 1
        self._attribute_lists = (ctypes.pointer(self._attributes[0]), ctypes.pointer(self._attributes[1]))
        self._entries = OrderedDict()  # least recently used first
        self._stream_fn = None

    @property
    def _remembered(self) -> int:
        return len(self._entries)

    @property
    def _reads(self) -> str | None:
        """How tensors are read ('methods'; the compiled launcher may say
        'dlpack-exchange'), None before a commit."""
        return "methods" if self._entries else None

    def _key(self, args, tensor_type):
        for i in self._buffers:
            if not isinstance(args[i], tensor_type):
                return None
        return tuple(_signature(args[i]) for i in self._buffers)

    def _commit(self, args, blobs, grid, tensor_type, stream_fn) -> bool:
        if "_launch" not in self.__dict__:
            raise TypeError("commit: the launcher is not configured")
        if len(args) != self._nargs or [len(b) for b in blobs] != self._sizes:
            raise ValueError("commit: argument or blob count does not match")
        with self._lock:
            if tensor_type is not self._tensor_type or stream_fn is not self._stream_fn:
                self._entries.clear()  # another tensor type or stream rule: start afresh
                self._tensor_type, self._stream_fn = tensor_type, stream_fn
            key = self._key(args, tensor_type)
            if key is None:
                return False
            entry = self._entries.pop(key, None)
            if entry is None:
                entry = _Entry(self._sizes)
                if len(self._entries) >= ENTRIES:
                    self._entries.popitem(last=False)
            for blob, address in zip(blobs, entry.addresses):
                ctypes.memmove(address, blob, len(blob))
            entry.grid = tuple(grid)
            self._entries[key] = entry
        return True

    def _set_attributes(self, programmatic: bool) -> None:
        """The config's attribute list: programmatic serialization when
        `programmatic`, the cluster shape when not 1 x 1 x 1."""
        config = self._config
        config.num_attrs = int(programmatic) + int(self._clustered)
        config.attrs = self._attribute_lists[0 if programmatic else 1] if config.num_attrs else None

    def _replay(self, args, grid, stream, pdl) -> int:
        tensor_type = self._tensor_type
        if tensor_type is None or len(args) != self._nargs:
            return -1
        programmatic = programmatic_launch(pdl, self._programmatic)
        if programmatic is None:
            return -1
        key = self._key(args, tensor_type)
        with self._lock:
            entry = self._entries.get(key) if key is not None else None
            if entry is None:
                return -1
            dims = entry.grid if grid is None else _grid(grid, self._cluster)
            handle = _stream(stream, self._stream_fn)
            if dims is None or handle is None:
                return -1
            for i, slot, fmt in self._scalars:
                if fmt is None or not _pack_into(fmt, entry.addresses[slot], args[i]):
                    return -1
            self._entries.move_to_end(key)
            config = self._config
            config.grid[:] = dims
            config.stream = handle
            self._set_attributes(programmatic)
            return self._launch(ctypes.byref(config), self._function_address, entry.params, None)

    def _launch_params(self, grid, stream, params, programmatic) -> int:
        if "_launch" not in self.__dict__:
            raise TypeError("launch: the launcher is not configured")
        if programmatic and not self._programmatic:
            raise ValueError("launch: a kernel that never waits is not launched programmatically")
        with self._lock:
            config = self._config
            config.grid[:] = grid
            config.stream = stream
            self._set_attributes(bool(programmatic))
            return self._launch(ctypes.byref(config), self._function_address, params or None, None)


def programmatic_launch(pdl, waits: bool) -> bool | None:
    """Whether a launch with the keyword `pdl` is programmatic, for a kernel
    that waits on its grid dependency (`waits`) or not (as _launcher.c's
    read_pdl): pdl=None is the kernel's default, False never, True only for
    a kernel that waits; None for anything else (a miss on the fast path;
    the slow path, `_KernelBody.programmatic` in launch.py, says why)."""
    if pdl is None:
        return waits
    if pdl is False:
        return False
    if pdl is True and waits:
        return True
    return None


def _signature(tensor) -> tuple:
    return (tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype)


def _pack_into(fmt: str, address: int, value) -> bool:
    if not isinstance(value, (int, float)):
        return False
    if fmt[1] in "fd" and not isinstance(value, float):
        try:
            value = float(value)
        except OverflowError:
            return False
    try:
        data = struct.pack(fmt, value)
    except (struct.error, OverflowError):
        return False
    ctypes.memmove(address, data, len(data))
    return True


def _grid(grid, cluster) -> tuple[int, int, int] | None:
    dims = (grid,) if type(grid) is int else grid
    if type(dims) not in (tuple, list) or not 1 <= len(dims) <= 3:
        return None
    dims = tuple(dims) + (1,) * (3 - len(dims))
    for extent, limit, size in zip(dims, _MAX_GRID, cluster):
        if type(extent) is not int or not 1 <= extent <= limit or extent % size:
            return None
    return dims


def _stream(stream, stream_fn) -> int | None:
    if stream is None:
        handle = stream_fn(0) if stream_fn is not None else 0
    elif type(stream) is int:
        handle = stream
    else:
        handle = getattr(stream, "cuda_stream", None)
    if type(handle) is not int or not 0 <= handle < 2**64:
        return None
    return handle


def _compiled():
    """The compiled Launcher type, or None (not built, or not wanted)."""
    if os.environ.get("TILEC_LAUNCHER") == "python":
        return None
    try:
        from tilec.runtime import _launcher
    except ImportError:
        return None
    return _launcher.Launcher


Launcher = _compiled() or PyLauncher  # the base of launch.Kernel
IMPLEMENTATION = "C" if Launcher is not PyLauncher else "python"

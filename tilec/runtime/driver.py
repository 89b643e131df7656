"""Checked access to the CUDA driver API (cuda.bindings.driver).

Every call goes through `call`, which turns a failing CUresult into a
`CudaError` naming the call and the driver's error string, so no status is
ever dropped.  Nothing runs at import: the driver library is first loaded by
`device()`, so importing tilec works on machines without a GPU.

tilec uses device 0 (choose another with CUDA_VISIBLE_DEVICES) and its
primary context, the one PyTorch and CuPy use, so their device pointers are
valid in tilec launches and the other way round.
"""
from __future__ import annotations

import ctypes
import threading
import time

from cuda.bindings import driver as cu

from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError


class CudaError(TilecError):
    """A CUDA driver call failed (no driver, no device, a launch fault...)."""

    def __init__(self, call_name: str, detail: str, log: str = ""):
        message = f"{call_name} failed: {detail}" + (f"\n{log}" if log else "")
        super().__init__(message)
        self.call_name = call_name
        self.detail = detail
        self.log = log


def call(fn, *args):
    """`fn(*args)`, checked: the values after the status (one value bare,
    none as None), or a `CudaError` naming `fn`."""
    status, *values = fn(*args)
    check_status(fn.__name__, status)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def check_status(call_name: str, status) -> None:
    """Raise a `CudaError` naming `call_name` unless `status` (a CUresult,
    or its int from a direct C call) is CUDA_SUCCESS."""
    status = cu.CUresult(status)
    if status != cu.CUresult.CUDA_SUCCESS:
        raise CudaError(call_name, _error_text(status))


def _error_text(status) -> str:
    """'CUDA_ERROR_X (the driver's description)'; the name alone when the
    driver cannot describe it."""
    name = getattr(status, "name", str(status))
    try:
        err, text = cu.cuGetErrorString(status)
    except RuntimeError:  # the driver library itself is missing
        return name
    if err != cu.CUresult.CUDA_SUCCESS or not text:
        return name
    return f"{name} ({text.decode(errors='replace')})"


@records.frozen
class Device:
    ordinal: int
    handle: object  # CUdevice
    context: object  # CUcontext: the device's primary context
    name: str
    compute_capability: tuple[int, int]
    max_dynamic_smem: int  # per block, with the opt-in attribute set
    sm_count: int


ORDINAL = 0  # the device tilec uses
_device: Device | None = None
_lock = threading.Lock()


def device() -> Device:
    """Device `ORDINAL` with its primary context current on this thread;
    the driver is initialised on the first call.  Raises `CudaError` when
    there is no driver or no device."""
    global _device
    with _lock:
        if _device is None:
            _device = _open(ORDINAL)
    call(cu.cuCtxSetCurrent, _device.context)
    return _device


def _open(ordinal: int) -> Device:
    try:
        status, = cu.cuInit(0)
    except RuntimeError as e:  # cuda-bindings cannot load libcuda at all
        raise CudaError("cuInit", f"no NVIDIA driver library ({e})") from None
    check_status("cuInit", status)
    handle = call(cu.cuDeviceGet, ordinal)
    context = call(cu.cuDevicePrimaryCtxRetain, handle)
    call(cu.cuCtxSetCurrent, context)
    attr = cu.CUdevice_attribute

    def attribute(which) -> int:
        return call(cu.cuDeviceGetAttribute, which, handle)

    name = call(cu.cuDeviceGetName, 256, handle)
    return Device(
        ordinal=ordinal,
        handle=handle,
        context=context,
        name=name.split(b"\0", 1)[0].decode(errors="replace"),
        compute_capability=(
            attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ),
        max_dynamic_smem=attribute(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        sm_count=attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    )


_LOG_BYTES = 1 << 16


def load_module(image: bytes):
    """Load a cubin (or NUL-terminated PTX, which the driver JIT-compiles)
    into the primary context.  The JIT error and info logs are captured, so
    a refused image reports what the loader said."""
    module, _ = _load(image, verbose=False)
    return module


def jit_info_log(ptx: str) -> str:
    """The driver JIT's verbose log for `ptx` (registers, spills, ptxas'
    performance advisories per entry, as `assemble.parse_usage` reads
    them): the resources of the code that actually runs, which the
    runtime loads this way (`module.CompiledModule`).  A comment naming
    this call makes the text new to the driver's compute cache, which would
    otherwise hand back an earlier compile of the same PTX with no log."""
    module, info = _load(f"{ptx}\n// jit_info_log {time.time_ns()}\n".encode() + b"\0", verbose=True)
    unload_module(module)
    return info


def _load(image: bytes, verbose: bool):
    """cuModuleLoadDataEx with the JIT's logs captured: (module, info log)."""
    device()
    error_log = bytearray(_LOG_BYTES)
    info_log = bytearray(_LOG_BYTES)
    opt = cu.CUjit_option
    options = [
        opt.CU_JIT_ERROR_LOG_BUFFER,
        opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        opt.CU_JIT_INFO_LOG_BUFFER,
        opt.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    ] + ([opt.CU_JIT_LOG_VERBOSE] if verbose else [])
    values = [error_log, _LOG_BYTES, info_log, _LOG_BYTES] + ([1] if verbose else [])
    if b"\n\t.loc " in image:
        # PTX compiled with line info (`-g`): the JIT keeps its `.loc` lines
        # only when asked (ptxas' -lineinfo), and without them
        # compute-sanitizer, cuda-gdb and Nsight cannot name `.tile` lines.
        options.append(opt.CU_JIT_GENERATE_LINE_INFO)
        values.append(1)
    status, module = cu.cuModuleLoadDataEx(image, len(options), options, values)
    if status != cu.CUresult.CUDA_SUCCESS:
        log = "\n".join(
            text for text in (_c_string(error_log), _c_string(info_log)) if text
        )
        raise CudaError("cuModuleLoadDataEx", _error_text(status), log)
    return module, _c_string(info_log)


def _c_string(buf: bytearray) -> str:
    return bytes(buf).split(b"\0", 1)[0].decode(errors="replace").strip()


def unload_module(module) -> None:
    call(cu.cuModuleUnload, module)


def get_function(module, name: str):
    return call(cu.cuModuleGetFunction, module, name.encode())


def function_attribute(function, attribute: str) -> int:
    """`attribute` is the CUfunction_attribute name without its
    CU_FUNC_ATTRIBUTE_ prefix ("SHARED_SIZE_BYTES")."""
    return call(cu.cuFuncGetAttribute, _function_attribute(attribute), function)


def set_function_attribute(function, attribute: str, value: int) -> None:
    call(cu.cuFuncSetAttribute, function, _function_attribute(attribute), value)


def _function_attribute(name: str):
    return getattr(cu.CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)


def mem_alloc(nbytes: int) -> int:
    """A device allocation of `nbytes` (at least one byte); the address is
    256-byte aligned."""
    return int(call(cu.cuMemAlloc, max(1, nbytes)))


def mem_free(ptr: int) -> None:
    call(cu.cuMemFree, cu.CUdeviceptr(ptr))


def copy_to_device(dst: int, src_host: int, nbytes: int) -> None:
    if nbytes:
        call(cu.cuMemcpyHtoD, cu.CUdeviceptr(dst), src_host, nbytes)


def copy_to_host(dst_host: int, src: int, nbytes: int) -> None:
    if nbytes:
        call(cu.cuMemcpyDtoH, dst_host, cu.CUdeviceptr(src), nbytes)


def stream_synchronize(stream: int) -> None:
    call(cu.cuStreamSynchronize, cu.CUstream(stream))


_libcuda = None


def libcuda():
    """libcuda itself (the library cuda-bindings loaded), for the calls
    tilec makes without cuda-bindings' wrappers; each caller says why."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    return _libcuda


def launch_kernel_ex_address() -> int:
    """The address of cuLaunchKernelEx, for the fast launch path
    (launcher.py), which calls it with no Python wrapper between."""
    return ctypes.cast(libcuda().cuLaunchKernelEx, ctypes.c_void_p).value


def function_address(function) -> int:
    """A CUfunction's handle as an integer."""
    return int(function)


def launch(
    function, grid, block, cluster, dynamic_smem: int, stream: int, params_address: int
) -> None:
    """cuLaunchKernelEx for a function that is not a tilec kernel (the
    autotuner's GPU sleep); tilec kernels launch through their launcher.
    `params_address` is the address of the void* parameter array (0 for
    none), and a cluster other than (1, 1, 1) becomes the cluster-dimension
    attribute."""
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = dynamic_smem
    config.hStream = cu.CUstream(stream)
    if tuple(cluster) != (1, 1, 1):
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        config.attrs = [attr]
        config.numAttrs = 1
    else:
        config.numAttrs = 0
    call(cu.cuLaunchKernelEx, config, function, params_address, 0)


def event_create() -> object:
    """A CUevent that records timing (for `event_elapsed_ms`)."""
    device()
    return call(cu.cuEventCreate, cu.CUevent_flags.CU_EVENT_DEFAULT)


def event_record(event, stream: int) -> None:
    call(cu.cuEventRecord, event, cu.CUstream(stream))


def event_elapsed_ms(start, end) -> float:
    """Milliseconds between two recorded events, waiting for `end`."""
    call(cu.cuEventSynchronize, end)
    return float(call(cu.cuEventElapsedTime, start, end))


def event_destroy(event) -> None:
    call(cu.cuEventDestroy, event)


def stream_create() -> int:
    """A new non-blocking stream's handle (for timing apart from others)."""
    device()
    return int(call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING))


def stream_destroy(stream: int) -> None:
    call(cu.cuStreamDestroy, cu.CUstream(stream))

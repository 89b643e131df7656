"""CompiledModule and Kernel.__call__ against a fake driver, without a GPU:
the fake keeps device memory in Python and runs a model of each test
kernel on the packed parameters, so parameter order, pointers, staging,
tensor-map encoding, stream handling and cleanup are all observed."""
import ctypes
import gc
import importlib.machinery
import importlib.util
import os
import shutil
import struct
import subprocess
import sysconfig

import numpy as np
import pytest

import runtime_kernels
from tilec.runtime import driver, launch as launch_py, launcher as launcher_py, module as module_py, tensormap
from tilec.runtime.driver import CudaError
from tilec.runtime.launch import LaunchError
from tilec.runtime.module import CompiledModule


class FakeGPU:
    def __init__(self, cc=(9, 0), smem_limit=232448):
        self.cc = cc
        self.smem_limit = smem_limit
        self.memory: dict[int, bytearray] = {}
        self.next_ptr = 0x7F0000000000
        self.log: list[tuple] = []
        self.fail_launch = False
        self.programmatic: list[bool] = []  # per launch: with programmatic stream serialization
        self.functions: dict[str, int] = {}  # kernel name -> the fake CUfunction address
        self.callback = _LAUNCH_EX(self.launch_ex)  # cuLaunchKernelEx, as the launcher calls it

    # driver API used by module.py, launch.py and tensormap.py
    def device(self):
        return driver.Device(0, None, None, "fake", self.cc, self.smem_limit, 132)

    def load_module(self, image):
        # the PTX itself, NUL-terminated, for the driver to compile whole
        # (module.py: a relocatable cubin would have lost setmaxnreg)
        assert image.endswith(b"\0") and b".entry" in image
        self.log.append(("load_module",))
        return "cumodule"

    def unload_module(self, module):
        self.log.append(("unload_module",))

    def get_function(self, module, name):
        return name

    def function_attribute(self, function, attribute):
        return 0

    def set_function_attribute(self, function, attribute, value):
        self.log.append(("set_attribute", function, attribute, value))

    def mem_alloc(self, nbytes):
        ptr = self.next_ptr
        self.next_ptr += -(-max(nbytes, 1) // 256) * 256
        self.memory[ptr] = bytearray(nbytes)
        self.log.append(("alloc", ptr, nbytes))
        return ptr

    def mem_free(self, ptr):
        del self.memory[ptr]
        self.log.append(("free", ptr))

    def copy_to_device(self, dst, src_host, nbytes):
        self.memory[dst][:nbytes] = ctypes.string_at(src_host, nbytes)

    def copy_to_host(self, dst_host, src, nbytes):
        ctypes.memmove(dst_host, bytes(self.memory[src][:nbytes]), nbytes)

    def stream_synchronize(self, stream):
        self.log.append(("sync", stream))

    def function_address(self, function):
        return self.functions.setdefault(function, 0x1000 + len(self.functions))

    def launch_kernel_ex_address(self):
        return ctypes.cast(self.callback, ctypes.c_void_p).value

    def launch_ex(self, config, function, params, extra):
        """cuLaunchKernelEx: logs ("launch", kernel, grid, block, cluster,
        dynamic smem, stream) and runs the kernel's model."""
        c = launcher_py._Config.from_address(config)
        name = {v: k for k, v in self.functions.items()}[function]
        cluster = launch_attributes(self, c)
        self.log.append(("launch", name, tuple(c.grid), tuple(c.block), cluster, c.shared_bytes, c.stream or 0))
        if self.fail_launch:
            return 719  # CUDA_ERROR_LAUNCH_FAILED
        getattr(self, "run_" + name)(tuple(c.grid), tuple(c.block), params)
        return 0

    # models of the test kernels
    def params(self, address, sizes):
        pointers = (ctypes.c_void_p * len(sizes)).from_address(address)
        for pointer in pointers:
            assert pointer % 64 == 0
        return [ctypes.string_at(p, size) for p, size in zip(pointers, sizes)]

    def array(self, ptr, dtype, count):
        return np.frombuffer(self.memory[ptr], dtype=dtype, count=count)

    def run_vadd(self, grid, block, address):
        a, b, c, n = self.params(address, [8, 8, 8, 4])
        (a,), (b,), (c,), (n,) = (struct.unpack("<Q", a), struct.unpack("<Q", b), struct.unpack("<Q", c), struct.unpack("<i", n))
        count = min(n, grid[0] * block[0])
        out = np.frombuffer(self.memory[c], dtype=np.float32)
        out[:count] = self.array(a, np.float32, count) + self.array(b, np.float32, count)

    def run_tma_rows(self, grid, block, address):
        a, b, tmap = self.params(address, [8, 8, 128])
        (base,) = struct.unpack("<Q", tmap[:8])  # FakeEncoder puts the base address first
        assert base == struct.unpack("<Q", a)[0]
        (b,) = struct.unpack("<Q", b)
        rows = self.array(base, np.float16, 16 * 64).reshape(16, 64)[8:]
        np.frombuffer(self.memory[b], dtype=np.float16)[:] = rows.reshape(-1)


def launch_attributes(gpu, c) -> tuple:
    """A CUlaunchConfig's attributes, as the driver reads them: the cluster
    shape it returns (1, 1, 1 without one); whether the launch is
    programmatic is appended to `gpu.programmatic`.  Any other attribute, or
    one given twice, fails the test."""
    seen = {}
    for i in range(c.num_attrs):
        attribute = c.attrs[i]
        assert attribute.id in (launcher_py._CLUSTER_DIMENSION, launcher_py._PROGRAMMATIC) and attribute.id not in seen
        seen[attribute.id] = attribute.value
    if launcher_py._PROGRAMMATIC in seen:
        assert seen[launcher_py._PROGRAMMATIC].programmatic == 1
    gpu.programmatic.append(launcher_py._PROGRAMMATIC in seen)
    d = seen.get(launcher_py._CLUSTER_DIMENSION)
    return (d.cluster.x, d.cluster.y, d.cluster.z) if d is not None else (1, 1, 1)


def fake_encode(out, dtype, rank, base, dims, strides, box, elem_strides, interleave, swizzle, l2, oob):
    ctypes.memmove(out, struct.pack("<Q", base) + bytes(120), 128)
    return 0


_C_FAKE_ENCODE = ctypes.CFUNCTYPE(ctypes.c_int, *tensormap._ENCODE_ARGTYPES)(fake_encode)


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGPU()
    for name in (
        "device", "load_module", "unload_module", "get_function", "function_attribute", "set_function_attribute",
        "mem_alloc", "mem_free", "copy_to_device", "copy_to_host", "stream_synchronize",
        "function_address", "launch_kernel_ex_address",
    ):  # fmt: skip
        monkeypatch.setattr(driver, name, getattr(fake, name))
    monkeypatch.setattr(tensormap, "_encode", _C_FAKE_ENCODE)
    yield fake
    gc.collect()  # unload this test's modules while the fake is in place


def build(built):
    ptx, meta = built
    return CompiledModule(ptx, meta, meta["target"])


def events(gpu, kind):
    return [e for e in gpu.log if e[0] == kind]


def test_numpy_arguments_round_trip(gpu):
    kernel = build(runtime_kernels.vadd(n=1000)).kernel("vadd")
    a, b = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, np.float32)
    c = np.zeros(1000, np.float32)
    kernel(a, b, c, 1000)
    np.testing.assert_array_equal(c, a + 0.5)
    assert events(gpu, "launch") == [("launch", "vadd", (8, 1, 1), (128, 1, 1), (1, 1, 1), 0, 0)]
    assert events(gpu, "sync") == [("sync", 0)]
    assert len(events(gpu, "alloc")) == 3 and len(events(gpu, "free")) == 3
    assert gpu.memory == {}


def test_grid_override_reaches_the_launch(gpu):
    kernel = build(runtime_kernels.vadd(n=1024)).kernel()
    a = np.ones(1024, np.float32)
    c = np.zeros(1024, np.float32)
    kernel(a, a, c, 1024, grid=4)
    assert c[:512].tolist() == [2.0] * 512 and not c[512:].any()
    assert events(gpu, "launch")[0][2] == (4, 1, 1)


class CaiArray:
    def __init__(self, ptr, stream=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False), "shape": (16,), "typestr": "<f4", "strides": None, "version": 3, "stream": stream,
        }  # fmt: skip


def test_device_arrays_are_passed_in_place(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    ptrs = []
    for values in (np.arange(16, dtype=np.float32), np.ones(16, np.float32), np.zeros(16, np.float32)):
        ptr = gpu.mem_alloc(64)
        gpu.copy_to_device(ptr, values.ctypes.data, 64)
        ptrs.append(ptr)
    arrays = [CaiArray(p) for p in ptrs]
    gpu.log.clear()
    kernel(*arrays, 16, stream=5)
    assert gpu.array(ptrs[2], np.float32, 16).tolist() == [i + 1.0 for i in range(16)]
    assert events(gpu, "alloc") == [] and events(gpu, "sync") == []  # queued on stream 5, nothing to copy back
    assert events(gpu, "launch")[0][-1] == 5


def test_producer_stream_is_waited_for(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    ptr = gpu.mem_alloc(64)
    gpu.log.clear()
    kernel(CaiArray(ptr, stream=7), CaiArray(ptr, stream=1), CaiArray(ptr), 16)
    # stream 7 is waited for before the launch; 1 is the legacy stream the launch uses
    assert [e for e in gpu.log if e[0] in ("sync", "launch")][:2] == [("sync", 7), events(gpu, "launch")[0]]
    assert events(gpu, "sync") == [("sync", 7)]  # device arrays: the call does not wait


def test_numpy_on_a_stream_still_waits_to_copy_back(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    c = np.zeros(16, np.float32)
    kernel(np.ones(16, np.float32), np.ones(16, np.float32), c, 16, stream=9)
    assert events(gpu, "sync") == [("sync", 9)]
    assert c.tolist() == [2.0] * 16


def test_read_only_arrays_are_not_written_back(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    c = np.zeros(16, np.float32)
    c.flags.writeable = False
    kernel(np.ones(16, np.float32), np.ones(16, np.float32), c, 16)
    assert not c.any()


def test_tensor_map_is_encoded_from_its_buffer(gpu):
    kernel = build(runtime_kernels.tma_rows()).kernel()
    a = np.arange(16 * 64, dtype=np.float16).reshape(16, 64)
    b = np.zeros((8, 64), np.float16)
    kernel(a, b)
    np.testing.assert_array_equal(b, a[8:])


def test_failed_launch_frees_and_reports_the_launch_error(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    gpu.fail_launch = True
    with pytest.raises(CudaError, match="cuLaunchKernelEx failed"):
        kernel(np.ones(16, np.float32), np.ones(16, np.float32), np.zeros(16, np.float32), 16)
    assert gpu.memory == {}


def test_free_failure_after_a_failed_launch_keeps_the_first_error(gpu, monkeypatch):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    gpu.fail_launch = True

    def broken_free(ptr):
        raise CudaError("cuMemFree", "CUDA_ERROR_LAUNCH_FAILED")

    monkeypatch.setattr(driver, "mem_free", broken_free)
    with pytest.raises(CudaError, match="cuLaunchKernelEx failed"):
        kernel(np.ones(16, np.float32), np.ones(16, np.float32), np.zeros(16, np.float32), 16)


def test_argument_errors_come_before_any_device_work(gpu):
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    gpu.log.clear()
    with pytest.raises(LaunchError, match="parameter 'n'"):
        kernel(np.ones(16, np.float32), np.ones(16, np.float32), np.zeros(16, np.float32), 2**40)
    assert gpu.log == []


def test_large_dynamic_smem_and_big_clusters_set_function_attributes(gpu):
    build(runtime_kernels.dsmem_swap()).kernel()
    assert ("set_attribute", "dsmem_swap", "MAX_DYNAMIC_SHARED_SIZE_BYTES", 197120) in gpu.log
    ptx, meta = runtime_kernels.cluster_ids(ctas=32, cluster=16)
    kernel = CompiledModule(ptx, meta, "sm_90a").kernel()
    assert ("set_attribute", "cluster_ids", "NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1) in gpu.log
    out = np.zeros((32, 2), np.uint32)
    gpu.run_cluster_ids = lambda grid, block, address: None
    kernel(out)
    assert events(gpu, "launch")[0][4] == (16, 1, 1)


def test_portable_cluster_sets_no_attribute(gpu):
    build(runtime_kernels.cluster_ids(ctas=8, cluster=2)).kernel()
    assert not events(gpu, "set_attribute")


def test_shared_memory_beyond_the_device_is_refused(gpu):
    gpu.smem_limit = 100 * 1024
    with pytest.raises(LaunchError, match="needs 197120 bytes of dynamic shared memory"):
        build(runtime_kernels.dsmem_swap()).kernel()


def test_wrong_device_is_refused_before_loading(gpu):
    gpu.cc = (8, 0)
    with pytest.raises(LaunchError, match="runs only on compute capability 9.0; this device is 8.0"):
        build(runtime_kernels.vadd()).kernel()
    assert not events(gpu, "load_module")


def test_portable_module_is_assembled_for_the_device(gpu, monkeypatch):
    archs = []
    real = module_py.assemble
    monkeypatch.setattr(module_py, "assemble", lambda ptx, arch: archs.append(arch) or real(ptx, arch))
    gpu.cc = (10, 0)
    build(runtime_kernels.vadd("sm_80")).kernel()
    assert archs == ["sm_100"]


def test_module_loads_once_and_caches_kernels(gpu):
    module = build(runtime_kernels.vadd())
    assert module.kernel() is module.kernel("vadd")
    assert len(events(gpu, "load_module")) == 1


def test_collected_module_is_unloaded(gpu):
    build(runtime_kernels.vadd()).kernel()
    gc.collect()
    assert events(gpu, "unload_module") == [("unload_module",)]


# --- the fast launch path, with fake torch tensors -------------------------


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


FLOAT32, FLOAT16 = FakeDtype("float32"), FakeDtype("float16")


class FakeDevice:
    type, index = "cuda", 0


class FakeTensor:
    """What tilec reads of a torch CUDA tensor, over the fake GPU's memory."""

    is_cuda = True
    device = FakeDevice()

    def __init__(self, ptr, shape, dtype=FLOAT32, stride=None):
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), dtype
        self._stride = stride or tuple(int(np.prod(self.shape[i + 1 :])) for i in range(len(self.shape)))

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self._stride

    def element_size(self):
        return 2 if self.dtype is FLOAT16 else 4


class _DLTensorView(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]  # fmt: skip


_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_DLTensorView))
_WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p),
        ("allocator", ctypes.c_void_p), ("managed_from_py", ctypes.c_void_p), ("managed_to_py", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", _FROM_PY), ("current_work_stream", _WORK_STREAM),
    ]  # fmt: skip


_DL_DTYPES = {"float32": (2, 32), "float16": (2, 16), "uint32": (1, 32)}
_CAPSULE_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)


def exchange_tensor_type(gpu):
    """A FakeTensor type with a DLPack C exchange API, as torch 2.10+ has."""

    def from_py(address, out):
        tensor = ctypes.cast(address, ctypes.py_object).value
        tensor._dl_shape = (ctypes.c_int64 * len(tensor.shape))(*tensor.shape)
        tensor._dl_strides = (ctypes.c_int64 * len(tensor.shape))(*tensor.stride())
        code, bits = _DL_DTYPES[tensor.dtype.name]
        out[0] = _DLTensorView(
            tensor.ptr, 2, 0, len(tensor.shape), code, bits, 1, tensor._dl_shape, tensor._dl_strides, 0
        )
        return 0

    def work_stream(device_type, device_id, out):
        assert (device_type, device_id) == (2, 0)
        out[0] = gpu.torch_stream
        return 0

    api = _ExchangeAPI(1, 2, None, None, None, None, _FROM_PY(from_py), _WORK_STREAM(work_stream))
    capsule = _new_capsule(ctypes.addressof(api), ctypes.addressof(_CAPSULE_NAME), None)
    return type("ExchangeTensor", (FakeTensor,), {"__dlpack_c_exchange_api__": capsule, "_api": api})


_LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _build_compiled_launcher(directory):
    """tilec/runtime/_launcher.c compiled as setup.py would, or None where
    there is no C compiler."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    source = os.path.join(os.path.dirname(launcher_py.__file__), "_launcher.c")
    target = os.path.join(directory, "_launcher" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-I", sysconfig.get_paths()["include"], source, "-o", target],
        check=True,
    )
    loader = importlib.machinery.ExtensionFileLoader("tilec.runtime._launcher", target)
    spec = importlib.util.spec_from_file_location("tilec.runtime._launcher", target, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.Launcher


@pytest.fixture(scope="module")
def compiled_launcher(tmp_path_factory):
    return _build_compiled_launcher(str(tmp_path_factory.mktemp("launcher")))


@pytest.fixture(params=["C", "C with the DLPack exchange API", "python"])
def torch_gpu(request, gpu, monkeypatch, compiled_launcher):
    """The fake GPU plus fake torch, with the fast path's driver entry
    points: cuLaunchKernelEx is a callback that decodes CUlaunchConfig and
    runs the fake kernel."""
    gpu.tensor_type = FakeTensor
    if request.param.startswith("C"):
        if compiled_launcher is None:
            pytest.skip("no C compiler")
        monkeypatch.setattr(module_py, "Kernel", launch_py.kernel_type(compiled_launcher))
        if "exchange" in request.param:
            gpu.tensor_type = exchange_tensor_type(gpu)
    else:
        monkeypatch.setattr(module_py, "Kernel", launch_py.kernel_type(launcher_py.PyLauncher))
    names = {}

    def function_address(function):
        return names.setdefault(function, 0x1000 + len(names))

    def launch_ex(config, function, params, extra):
        c = launcher_py._Config.from_address(config)
        name = {v: k for k, v in names.items()}[function]
        cluster = launch_attributes(gpu, c)
        gpu.log.append(("fast_launch", name, tuple(c.grid), tuple(c.block), cluster, c.shared_bytes, c.stream or 0))
        if gpu.launch_status:
            return gpu.launch_status
        getattr(gpu, "run_" + name)(tuple(c.grid), tuple(c.block), params)
        return 0

    callback = _LAUNCH_EX(launch_ex)
    gpu.torch_stream = 0x51
    gpu.launch_status = 0  # what cuLaunchKernelEx answers
    monkeypatch.setattr(driver, "function_address", function_address)
    monkeypatch.setattr(driver, "launch_kernel_ex_address", lambda: ctypes.cast(callback, ctypes.c_void_p).value)
    monkeypatch.setattr(launch_py, "torch_tensor_type", lambda: gpu.tensor_type)
    stream_function = lambda index: gpu.torch_stream  # noqa: E731 (one object, as torch's)
    bind_args = launch_py.bind_args

    def checked(*args, **kwargs):
        result = bind_args(*args, **kwargs)
        gpu.log.append(("checks",))  # passed: a launch follows
        return result

    monkeypatch.setattr(launch_py, "bind_args", checked)
    monkeypatch.setattr(launch_py, "torch_stream_function", lambda: stream_function)
    gpu.callback = callback
    return gpu


def device_tensor(gpu, values, dtype=FLOAT32):
    ptr = gpu.mem_alloc(values.nbytes)
    gpu.copy_to_device(ptr, values.ctypes.data, values.nbytes)
    return gpu.tensor_type(ptr, values.shape, dtype)


def launches(gpu):
    """Each launch: "launch" when it went through the slow path's checks
    (which then launch through the driver or, once remembered, the
    launcher), "fast_launch" when the launcher replayed it unchecked."""
    kinds, checked = [], False
    for event in gpu.log:
        if event[0] == "checks":
            checked = True
        elif event[0] in ("launch", "fast_launch"):
            kinds.append("launch" if checked or event[0] == "launch" else "fast_launch")
            checked = False
    return kinds


def test_a_repeated_signature_is_replayed_without_checks_on_any_stream(torch_gpu, monkeypatch):
    gpu = torch_gpu
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    a, b = device_tensor(gpu, np.arange(16, dtype=np.float32)), device_tensor(gpu, np.ones(16, np.float32))
    c = device_tensor(gpu, np.zeros(16, np.float32))
    kernel(a, b, c, 16)
    checks = []
    monkeypatch.setattr(launch_py, "bind_args", lambda *a, **k: checks.append(1))
    kernel(a, b, c, 8)  # a new scalar value is still the same signature
    kernel(a, b, c, 16, grid=(1,))
    assert launches(gpu) == ["launch", "fast_launch", "fast_launch"] and checks == []
    assert kernel._reads == ("dlpack-exchange" if hasattr(gpu.tensor_type, "_api") else "methods")
    assert gpu.array(c.ptr, np.float32, 16).tolist() == [i + 1.0 for i in range(16)]
    # no stream: torch's current stream, and no wait
    assert [e[-1] for e in gpu.log if "launch" in e[0]] == [0x51] * 3 and not events(gpu, "sync")
    assert [e[2] for e in gpu.log if "launch" in e[0]] == [(1, 1, 1)] * 3

    class TorchStream:
        cuda_stream = 0x99

    kernel(a, b, c, 16, stream=7)
    kernel(a, b, c, 16, stream=TorchStream())
    gpu.torch_stream = 0x52
    kernel(a, b, c, 16)
    assert [e[-1] for e in gpu.log if "launch" in e[0]][3:] == [7, 0x99, 0x52]
    assert launches(gpu) == ["launch"] + ["fast_launch"] * 5


CHANGES = [
    (lambda a: type(a)(a.ptr, (8, 2)), r"shape \[8, 2\] does not match f32\[16\]"),
    (lambda a: type(a)(a.ptr, (16,), FLOAT16), "dtype torch.float16 does not match f32"),
    (lambda a: type(a)(a.ptr, (16,), stride=(2,)), "not C-contiguous"),
    (lambda a: type(a)(a.ptr + 2, (16,)), "not aligned"),
    (lambda a: np.ones(3, np.float32), r"shape \[3\] does not match"),
]


def test_a_changed_signature_on_a_cached_kernel_is_checked_again(torch_gpu):
    gpu = torch_gpu
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    t = device_tensor(gpu, np.ones(16, np.float32))
    kernel(t, t, t, 16)
    kernel(t, t, t, 16)
    for change, message in CHANGES:
        with pytest.raises(LaunchError, match=message):
            kernel(t, change(t), t, 16)
        kernel(t, t, t, 16)  # the remembered signature still replays
    assert launches(gpu) == ["launch"] + ["fast_launch"] * 6


def test_bad_scalars_grids_and_streams_on_a_cached_kernel_are_refused(torch_gpu):
    gpu = torch_gpu
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    t = device_tensor(gpu, np.ones(16, np.float32))
    kernel(t, t, t, 16)
    for value, message in [(2**40, "does not fit i32"), (1.5, "got the float 1.5"), ("16", "expected a number")]:
        with pytest.raises(LaunchError, match=message):
            kernel(t, t, t, value)
    with pytest.raises(LaunchError, match="grid"):
        kernel(t, t, t, 16, grid=0)
    with pytest.raises(LaunchError, match="not a CUDA stream"):
        kernel(t, t, t, 16, stream="s")
    assert launches(gpu) == ["launch"]


def test_a_new_pointer_costs_one_encode_per_map(torch_gpu, monkeypatch):
    gpu = torch_gpu
    encodes = []
    real = tensormap._encode
    monkeypatch.setattr(tensormap, "_encode", None)
    monkeypatch.setattr(tensormap, "_encode_function", lambda: lambda *a: encodes.append(a[3]) or real(*a))
    kernel = build(runtime_kernels.tma_rows()).kernel()
    source = np.arange(16 * 64, dtype=np.float16).reshape(16, 64)
    a1, a2 = device_tensor(gpu, source, FLOAT16), device_tensor(gpu, source + 1, FLOAT16)
    b = device_tensor(gpu, np.zeros((8, 64), np.float16), FLOAT16)
    for a in (a1, a1, a2, a2, a1, a2):
        kernel(a, b)
    assert encodes == [a1.ptr, a2.ptr]  # each pointer encoded once
    assert launches(gpu) == ["launch", "fast_launch", "launch"] + ["fast_launch"] * 3  # both remembered
    np.testing.assert_array_equal(gpu.array(b.ptr, np.float16, 8 * 64).reshape(8, 64), source[8:] + 1)


def test_the_least_recently_used_signature_is_forgotten(torch_gpu):
    gpu = torch_gpu
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    x = device_tensor(gpu, np.ones(16, np.float32))
    outs = [device_tensor(gpu, np.zeros(16, np.float32)) for _ in range(5)]
    for out in outs[:4]:
        kernel(x, x, out, 16)
    kernel(x, x, outs[0], 16)  # remembered; outs[1] is now the least recently used
    kernel(x, x, outs[4], 16)  # a fifth signature replaces it
    assert kernel._remembered == 4
    gpu.log.clear()
    for out in (outs[0], outs[2], outs[3], outs[4], outs[1]):
        kernel(x, x, out, 16)
    assert launches(gpu) == ["fast_launch"] * 4 + ["launch"]
    for out in outs:
        assert gpu.array(out.ptr, np.float32, 16).tolist() == [2.0] * 16


def test_numpy_arrays_never_take_the_fast_path(torch_gpu):
    gpu = torch_gpu
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    c = np.zeros(16, np.float32)
    for _ in range(2):
        kernel(np.ones(16, np.float32), np.ones(16, np.float32), c, 16)
    assert launches(gpu) == ["launch", "launch"] and c.tolist() == [2.0] * 16
    assert [e[1] for e in events(gpu, "sync")] == [0, 0]  # staged: waits to copy back
    # each launched by the launcher's own cuLaunchKernelEx call (no cuda-bindings wrapper), not remembered
    assert [e[0] for e in gpu.log if "launch" in e[0]] == ["fast_launch"] * 2 and kernel._remembered == 0


def test_cluster_launches_replay_their_cluster(torch_gpu):
    gpu = torch_gpu
    ptx, meta = runtime_kernels.cluster_ids(ctas=32, cluster=16)
    kernel = CompiledModule(ptx, meta, "sm_90a").kernel()
    gpu.run_cluster_ids = lambda grid, block, address: None
    out = gpu.tensor_type(gpu.mem_alloc(32 * 2 * 4), (32, 2), FakeDtype("uint32"))
    kernel(out)
    kernel(out)
    assert [e[4] for e in gpu.log if "launch" in e[0]] == [(16, 1, 1), (16, 1, 1)]
    assert launches(gpu) == ["launch", "fast_launch"]


def test_a_known_layout_checks_only_the_new_addresses(torch_gpu, monkeypatch):
    gpu = torch_gpu
    layouts = []
    check_layout = launch_py._check_layout
    monkeypatch.setattr(launch_py, "_check_layout", lambda *a: layouts.append(1) or check_layout(*a))
    kernel = build(runtime_kernels.tma_rows()).kernel()
    source = np.arange(16 * 64, dtype=np.float16)
    a = [device_tensor(gpu, source.reshape(16, 64), FLOAT16) for _ in range(6)]
    b = device_tensor(gpu, np.zeros((8, 64), np.float16), FLOAT16)
    for t in a:  # six addresses, more than the launcher remembers: one layout
        kernel(t, b)
    assert layouts == [1] and launches(gpu) == ["launch"] * 6
    # the address rules still hold for a known layout, with the slow path's messages
    with pytest.raises(LaunchError, match=r"'A' \(tensor map 'A_tmap'\): .*base address 0x[0-9a-f]+ is not 16-byte aligned"):
        kernel(gpu.tensor_type(a[0].ptr + 2, (16, 64), FLOAT16), b)
    with pytest.raises(LaunchError, match="parameter 'B': device address 0x[0-9a-f]+ is not aligned to its 2-byte"):
        kernel(a[0], gpu.tensor_type(b.ptr + 1, (8, 64), FLOAT16))
    assert layouts == [1]
    with pytest.raises(LaunchError, match=r"shape \[8, 64\] does not match"):
        kernel(gpu.tensor_type(a[0].ptr, (8, 64), FLOAT16), b)  # a new layout is checked whole
    assert layouts == [1, 1]


def test_a_refused_replay_and_bad_keywords_are_errors(torch_gpu, monkeypatch):
    gpu = torch_gpu
    monkeypatch.setattr(driver, "_error_text", lambda status: f"CUDA_ERROR {status}")
    kernel = build(runtime_kernels.vadd(n=16)).kernel()
    t = device_tensor(gpu, np.ones(16, np.float32))
    kernel(t, t, t, 16)
    gpu.launch_status = 1  # CUDA_ERROR_INVALID_VALUE, from the driver on a replay
    with pytest.raises(CudaError, match="cuLaunchKernelEx"):
        kernel(t, t, t, 16)
    gpu.launch_status = 0
    with pytest.raises(TypeError, match="gird"):
        kernel(t, t, t, 16, gird=(1,))
    kernel(t, t, t, 16, grid=(1,), stream=3)
    assert launches(gpu) == ["launch", "fast_launch", "fast_launch"]


def test_a_kernel_that_waits_is_launched_programmatically_unless_told_not_to(torch_gpu):
    gpu = torch_gpu
    waits = build(runtime_kernels.vadd(n=16, waits=True)).kernel()
    plain = build(runtime_kernels.vadd(n=16)).kernel()
    t = device_tensor(gpu, np.ones(16, np.float32))
    for kernel in (waits, plain):
        kernel(t, t, t, 16)  # the slow path
        kernel(t, t, t, 16)  # replayed
        kernel(t, t, t, 16, pdl=False)  # replayed, plainly
        kernel(t, t, t, 16, pdl=None)
    waits(t, t, t, 16, pdl=True)
    assert gpu.programmatic == [True, True, False, True] + [False] * 4 + [True]
    assert launches(gpu) == ["launch"] + ["fast_launch"] * 3 + ["launch"] + ["fast_launch"] * 4
    # a kernel that never waits is never launched programmatically, cached or not
    with pytest.raises(LaunchError, match=r"pdl=True: kernel 'vadd' never executes ptx.griddepcontrol.wait"):
        plain(t, t, t, 16, pdl=True)
    for bad in ("yes", 1, np.bool_(True)):
        with pytest.raises(LaunchError, match=r"pdl=.*: expected True, False or None"):
            waits(t, t, t, 16, pdl=bad)
    assert len(gpu.programmatic) == 9


def test_programmatic_and_cluster_attributes_go_together(torch_gpu):
    gpu = torch_gpu
    ptx, meta = runtime_kernels.cluster_ids(ctas=32, cluster=16)
    ptx = ptx.replace("    mov.u32 %r1, %ctaid.x;", "    griddepcontrol.wait;\n    mov.u32 %r1, %ctaid.x;")
    meta["kernels"][0]["grid_dependency_wait"] = True
    kernel = CompiledModule(ptx, meta, "sm_90a").kernel()
    gpu.run_cluster_ids = lambda grid, block, address: None
    out = gpu.tensor_type(gpu.mem_alloc(32 * 2 * 4), (32, 2), FakeDtype("uint32"))
    kernel(out)
    kernel(out)
    kernel(out, pdl=False)
    assert [e[4] for e in gpu.log if "launch" in e[0]] == [(16, 1, 1)] * 3
    assert gpu.programmatic == [True, True, False]


def test_unremembered_arguments_are_launched_programmatically_too(gpu):
    kernel = build(runtime_kernels.vadd(n=16, waits=True)).kernel()
    c = np.zeros(16, np.float32)
    kernel(np.ones(16, np.float32), np.ones(16, np.float32), c, 16)
    kernel(np.ones(16, np.float32), np.ones(16, np.float32), c, 16, pdl=False)
    assert gpu.programmatic == [True, False] and c.tolist() == [2.0] * 16


def test_a_malformed_grid_dependency_flag_is_refused(gpu):
    ptx, meta = runtime_kernels.vadd(n=16, waits=True)
    meta["kernels"][0]["grid_dependency_wait"] = "yes"
    with pytest.raises(LaunchError, match=r"kernel 'vadd': 'grid_dependency_wait' must be true or false, got 'yes'"):
        CompiledModule(ptx, meta, "sm_90a").kernel()

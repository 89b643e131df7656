"""Argument checking and launch preparation, without a GPU: check_args over
fake signatures with numpy arrays, __cuda_array_interface__ objects and
DLPack producers; grids, shared memory, parameter packing, streams, and the
architecture rule."""
import ctypes
import struct

import numpy as np
import pytest

import runtime_kernels
from tilec.compiler.diagnostics import TilecError
from tilec.runtime.launch import (
    DeviceArray,
    HostArray,
    LaunchError,
    Scalar,
    check_args,
    check_smem,
    launch_grid,
    pack_params,
    stream_handle,
)
from tilec.runtime.module import CompiledModule, device_arch


def buf(name, dtype, shape):
    return {"name": name, "kind": "buffer", "dtype": dtype, "shape": list(shape)}


def scalar(name, dtype):
    return {"name": name, "kind": "scalar", "dtype": dtype}


class CudaArray:
    """Device memory as numba or cupy describe it (nothing is dereferenced)."""

    def __init__(self, ptr, shape, typestr, strides=None, stream=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": tuple(shape),
            "typestr": typestr,
            "strides": strides,
            "version": 3,
            "stream": stream,
        }


class FakeCudaDLPack:
    """A DLPack producer claiming a CUDA device, exporting a numpy array's
    capsule: the pointer read back must be that array's address."""

    def __init__(self, array, device_id=0):
        self.array = array
        self.device_id = device_id
        self.streams = []

    def __dlpack_device__(self):
        return (2, self.device_id)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.array.__dlpack__()


class HostDLPack:
    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


VADD = runtime_kernels.vadd(n=1000)[1]["kernels"][0]["params"]


def vadd_args(n=1000, dtype=np.float32):
    return [np.zeros(n, dtype), np.zeros(n, dtype), np.zeros(n, dtype), n]


def test_numpy_arrays_and_scalar_bind():
    a, b, c, n = vadd_args()
    bound = check_args(VADD, [a, b, c, n])
    assert list(bound) == ["a", "b", "c", "n"]
    assert bound["a"].array is a and isinstance(bound["c"], HostArray)
    assert bound["n"] == Scalar(struct.pack("<i", 1000))


def test_argument_count_is_checked():
    with pytest.raises(LaunchError, match=r"takes 4 arguments \(a, b, c, n\), got 3") as info:
        check_args(VADD, vadd_args()[:3])
    assert isinstance(info.value, TilecError)


def test_dtype_mismatch_names_the_parameter():
    args = vadd_args()
    args[1] = np.zeros(1000, np.float64)
    with pytest.raises(LaunchError, match="parameter 'b': dtype float64 does not match f32"):
        check_args(VADD, args)


def test_shape_mismatch_names_the_parameter():
    args = vadd_args()
    args[2] = np.zeros((10, 100), np.float32)
    with pytest.raises(LaunchError, match=r"parameter 'c': shape \[10, 100\] does not match f32\[1000\]"):
        check_args(VADD, args)


def test_host_array_must_be_contiguous():
    params = [buf("x", "f32", (4, 4))]
    with pytest.raises(LaunchError, match="parameter 'x': the numpy array is not C-contiguous"):
        check_args(params, [np.zeros((4, 4), np.float32).T])


def test_big_endian_host_array_is_a_dtype_mismatch():
    with pytest.raises(LaunchError, match="parameter 'x': dtype >f4 does not match f32"):
        check_args([buf("x", "f32", (4,))], [np.zeros(4, ">f4")])


def test_buffer_given_a_number():
    with pytest.raises(LaunchError, match="parameter 'a' is a buffer f32\\[1000\\]: expected .* got int"):
        check_args(VADD, [1, 2, 3, 4])


def test_scalar_given_an_array():
    args = vadd_args()
    args[3] = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match="parameter 'n' is a scalar i32: expected a number, got ndarray"):
        check_args(VADD, args)


@pytest.mark.parametrize(
    "dtype, value, expected",
    [
        ("i32", -(2**31), struct.pack("<i", -(2**31))),
        ("u32", 2**32 - 1, struct.pack("<I", 2**32 - 1)),
        ("i64", 2**40, struct.pack("<q", 2**40)),
        ("u8", True, b"\x01"),
        ("f32", 1.5, struct.pack("<f", 1.5)),
        ("f32", 3, struct.pack("<f", 3.0)),
        ("f64", np.float32(0.25), struct.pack("<d", 0.25)),
        ("f16", 1.0, np.float16(1.0).tobytes()),
        ("i16", np.int64(-5), struct.pack("<h", -5)),
    ],
)
def test_scalars_pack_as_their_ptx_type(dtype, value, expected):
    assert check_args([scalar("s", dtype)], [value])["s"].data == expected


@pytest.mark.parametrize(
    "dtype, value, message",
    [
        ("i32", 2**31, "2147483648 does not fit i32"),
        ("u32", -1, "-1 does not fit u32"),
        ("u8", 256, "256 does not fit u8"),
        ("i32", 1.5, "parameter 's' is i32: got the float 1.5"),
        ("bf16", 1.0, "a scalar bf16 cannot be passed from Python"),
        ("f32", "1.0", "expected a number, got str"),
    ],
)
def test_bad_scalars(dtype, value, message):
    with pytest.raises(LaunchError, match=message.replace("(", r"\(")):
        check_args([scalar("s", dtype)], [value])


def test_bit_patterns_for_types_numpy_lacks():
    params = [buf("w", "bf16", (8,)), buf("q", "e4m3", (8,)), buf("t", "tf32", (8,))]
    bound = check_args(params, [np.zeros(8, np.uint16), np.zeros(8, np.uint8), np.zeros(8, np.float32)])
    assert set(bound) == {"w", "q", "t"}
    with pytest.raises(LaunchError, match="parameter 'w': dtype float16 does not match bf16"):
        check_args(params, [np.zeros(8, np.float16), np.zeros(8, np.uint8), np.zeros(8, np.float32)])
    with pytest.raises(LaunchError, match="parameter 'q': dtype int8 does not match e4m3"):
        check_args(params, [np.zeros(8, np.uint16), np.zeros(8, np.int8), np.zeros(8, np.float32)])


def test_cuda_array_interface_is_used_in_place():
    a = CudaArray(0x7F0000000000, (1000,), "<f4")
    b = CudaArray(0x7F0000010000, (1000,), "<f4", strides=(4,), stream=7)
    bound = check_args(VADD, [a, b, np.zeros(1000, np.float32), 5])
    assert bound["a"] == DeviceArray(0x7F0000000000, a)
    assert bound["a"].owner is a
    assert bound["b"].stream == 7


@pytest.mark.parametrize(
    "array, message",
    [
        (CudaArray(0x1000, (1000,), "<f2"), "dtype <f2 does not match f32"),
        (CudaArray(0x1000, (999,), "<f4"), r"shape \[999\] does not match"),
        (CudaArray(0x1002, (1000,), "<f4"), "device address 0x1002 is not aligned to its 4-byte elements"),
        (CudaArray(0x1000, (1000,), "<f4", strides=(8,)), r"the array is not C-contiguous \(byte strides \[8\]\)"),
    ],
)
def test_cuda_array_interface_mismatches(array, message):
    with pytest.raises(LaunchError, match="parameter 'a': " + message):
        check_args(VADD, [array, *vadd_args()[1:]])


def test_unit_dimensions_ignore_strides():
    params = [buf("x", "f32", (1, 8))]
    check_args(params, [CudaArray(0x1000, (1, 8), "<f4", strides=(4096, 4))])


def test_masked_interface_is_refused():
    array = CudaArray(0x1000, (1000,), "<f4")
    array.__cuda_array_interface__["mask"] = object()
    with pytest.raises(LaunchError, match="masked arrays are not supported"):
        check_args(VADD, [array, *vadd_args()[1:]])


def test_broken_interface_becomes_a_launch_error():
    array = CudaArray(0x1000, (1000,), "not-a-dtype")
    with pytest.raises(LaunchError, match="parameter 'a': cannot read the array"):
        check_args(VADD, [array, *vadd_args()[1:]])


def test_dlpack_cuda_producer_is_read_in_place():
    host = np.arange(1000, dtype=np.float32)
    producer = FakeCudaDLPack(host)
    bound = check_args(VADD, [producer, *vadd_args()[1:]], dlpack_stream=42)
    assert bound["a"].ptr == host.ctypes.data
    assert bound["a"].owner is producer
    assert producer.streams == [42]


def test_dlpack_offsets_dtype_shape_and_strides():
    host = np.zeros((4, 8), np.int16)
    bound = check_args([buf("x", "i16", (8,))], [FakeCudaDLPack(host[2])])
    assert bound["x"].ptr == host.ctypes.data + 2 * 8 * 2
    with pytest.raises(LaunchError, match=r"dtype DLPack\(code=0, bits=16, lanes=1\) does not match u16"):
        check_args([buf("x", "u16", (8,))], [FakeCudaDLPack(host[2])])
    with pytest.raises(LaunchError, match=r"not C-contiguous \(byte strides \[16\]\)"):
        check_args([buf("x", "i16", (4,))], [FakeCudaDLPack(host[:, 1])])


def test_dlpack_on_another_device_is_refused():
    with pytest.raises(LaunchError, match="on CUDA device 1, tilec launches on device 0"):
        check_args(VADD, [FakeCudaDLPack(np.zeros(1000, np.float32), device_id=1), *vadd_args()[1:]])


def test_dlpack_on_the_host_is_staged():
    host = np.ones(1000, np.float32)
    bound = check_args(VADD, [HostDLPack(host), *vadd_args()[1:]])
    assert isinstance(bound["a"], HostArray)
    assert np.shares_memory(bound["a"].array, host)


TMA = runtime_kernels.tma_rows()[1]["kernels"][0]


def tma_args(a, b=None):
    return check_args(TMA["params"], [a, b if b is not None else np.zeros((8, 64), np.float16)], TMA["tensormaps"])


def test_tensor_maps_are_not_passed_by_the_caller():
    bound = tma_args(np.zeros((16, 64), np.float16))
    assert set(bound) == {"A", "B"}
    with pytest.raises(LaunchError, match=r"takes 2 arguments \(A, B\), got 3"):
        check_args(TMA["params"], [np.zeros((16, 64), np.float16)] * 3, TMA["tensormaps"])


def test_tensor_map_base_alignment_is_checked_on_device_arrays():
    tma_args(CudaArray(0x10000, (16, 64), "<f2"))
    with pytest.raises(
        LaunchError, match=r"parameter 'A' \(tensor map 'A_tmap'\): .*base address 0x10008 is not 16-byte aligned"
    ):
        tma_args(CudaArray(0x10008, (16, 64), "<f2"))


def test_tensor_map_rules_are_checked_before_staging():
    entry = {**TMA, "tensormaps": [{**runtime_kernels.TMA_ROWS_MAP, "box": [60, 8]}]}
    with pytest.raises(LaunchError, match="not a multiple of 16 bytes"):
        check_args(entry["params"], [np.zeros((16, 64), np.float16), np.zeros((8, 64), np.float16)], entry["tensormaps"])


def test_tensor_map_must_stay_inside_its_buffer():
    desc = {**runtime_kernels.TMA_ROWS_MAP, "dims": [64, 17]}
    with pytest.raises(LaunchError, match="tensor map 'A_tmap' spans 2176 bytes of 'A', which holds only 2048"):
        check_args(TMA["params"], [np.zeros((16, 64), np.float16), np.zeros((8, 64), np.float16)], [desc])
    seed = runtime_kernels.SEED_MAP
    params = [buf("A", "f16", (8, 256)), {"name": "A_tmap0", "kind": "tensormap", "tensor": "A"}]
    check_args(params, [np.zeros((8, 256), np.float16)], [seed])


def test_grid_defaults_and_overrides():
    assert launch_grid(None, (8, 1, 1), (1, 1, 1)) == (8, 1, 1)
    assert launch_grid(4, (8, 1, 1), (1, 1, 1)) == (4, 1, 1)
    assert launch_grid((4, 2), (8, 1, 1), (1, 1, 1)) == (4, 2, 1)
    assert launch_grid([np.int64(6), 1, 3], (8, 1, 1), (2, 1, 1)) == (6, 1, 3)


@pytest.mark.parametrize(
    "grid, cluster, message",
    [
        (0, (1, 1, 1), "grid 0 is not 1 to 3 positive integers"),
        ((1, 2, 3, 4), (1, 1, 1), "is not 1 to 3 positive integers"),
        ((2.0,), (1, 1, 1), "is not 1 to 3 positive integers"),
        ((True,), (1, 1, 1), "is not 1 to 3 positive integers"),
        ((1, 70000), (1, 1, 1), "the y extent exceeds 65535"),
        (6, (4, 1, 1), r"grid \[6, 1, 1\] is not a whole number of clusters \[4, 1, 1\] along x"),
        ((2, 3), (1, 2, 1), "along y"),
    ],
)
def test_bad_grids(grid, cluster, message):
    with pytest.raises(LaunchError, match=message):
        launch_grid(grid, (8, 1, 1), cluster)


def test_shared_memory_limit():
    check_smem("k", 227 * 1024, 0, 227 * 1024)
    with pytest.raises(LaunchError, match="kernel 'k' needs 232448 bytes of dynamic shared memory plus 1 static"):
        check_smem("k", 227 * 1024, 1, 227 * 1024)


def test_packed_params_are_64_byte_aligned_copies():
    blobs = [struct.pack("<Q", 0xDEADBEEF), b"\x07\x00\x00\x00", bytes(range(128))]
    packed = pack_params(blobs)
    pointers = (ctypes.c_void_p * 3).from_address(packed.address)
    for pointer, blob in zip(pointers, blobs):
        assert pointer % 64 == 0
        assert ctypes.string_at(pointer, len(blob)) == blob
    assert len(set(pointers)) == 3


def test_no_params_pack_to_an_empty_array():
    assert pack_params([]).address != 0


class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x1234)


class TorchLikeStream:
    cuda_stream = 0x5678


@pytest.mark.parametrize(
    "stream, handle", [(None, 0), (0, 0), (77, 77), (ProtocolStream(), 0x1234), (TorchLikeStream(), 0x5678)]
)
def test_stream_handles(stream, handle):
    assert stream_handle(stream) == handle


def test_bad_stream():
    with pytest.raises(LaunchError, match="is not a CUDA stream"):
        stream_handle("default")


@pytest.mark.parametrize(
    "target, cc, arch",
    [
        ("sm_90a", (9, 0), "sm_90a"),
        ("sm_100a", (10, 0), "sm_100a"),
        ("sm_80", (8, 0), "sm_80"),
        ("sm_80", (8, 6), "sm_86"),
        ("sm_80", (9, 0), "sm_90"),
        ("sm_80", (12, 0), "sm_120"),
    ],
)
def test_device_arch(target, cc, arch):
    assert device_arch(target, cc) == arch


@pytest.mark.parametrize(
    "target, cc, message",
    [
        ("sm_90a", (8, 0), r"compiled for sm_90a, which runs only on compute capability 9.0; this device is 8.0"),
        ("sm_90a", (10, 0), "this device is 10.0"),
        ("sm_100a", (9, 0), "runs only on compute capability 10.0"),
        ("sm_80", (7, 5), r"compiled for sm_80; this device \(compute capability 7.5\) is older"),
    ],
)
def test_device_arch_refusals(target, cc, message):
    with pytest.raises(LaunchError, match=message):
        device_arch(target, cc)


def test_compiled_module_needs_no_gpu_until_a_kernel_is_asked_for():
    ptx, meta = runtime_kernels.vadd()
    module = CompiledModule(ptx, meta, "sm_90a")
    assert module.ptx == ptx and module.meta is meta and module.target == "sm_90a"
    assert module.kernel_names == ["vadd"]
    with pytest.raises(LaunchError, match=r"no kernel 'gemm' in the module \(it has vadd\)"):
        module.kernel("gemm")


def test_compiled_module_refuses_mismatched_metadata():
    ptx, meta = runtime_kernels.vadd()
    with pytest.raises(ValueError, match="kernel.json is for sm_90a, the module for sm_100a"):
        CompiledModule(ptx, meta, "sm_100a")
    with pytest.raises(TilecError, match="unknown target 'sm_75'"):
        CompiledModule(ptx, meta, "sm_75")

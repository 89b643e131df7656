"""Launch arguments that once crashed the process, raised raw exceptions or
were accepted silently (issue 18.6): each is a LaunchError naming what is
wrong, before any device work."""
import ctypes

import numpy as np
import pytest

import runtime_kernels
from tilec.runtime.launch import LaunchError, check_args, launch_grid, stream_handle

VADD = runtime_kernels.vadd(n=8)[1]["kernels"][0]["params"]
SCALARS = [
    {"name": "x", "kind": "scalar", "dtype": "f32"},
    {"name": "h", "kind": "scalar", "dtype": "f16"},
]


def host(n=8):
    return np.zeros(n, np.float32)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
        ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64),
    ]  # fmt: skip


_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)


class HostileDLPack:
    """A CUDA DLPack producer whose DLTensor lies about its rank."""

    def __init__(self, ndim, shape=None):
        self.tensor = _DLTensor(data=0x10000, ndim=ndim, code=2, bits=32, lanes=1, shape=shape)

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return _new_capsule(ctypes.addressof(self.tensor), b"dltensor", None)


@pytest.mark.parametrize("ndim", [2**31 - 1, -5, 65])
def test_absurd_dlpack_rank_is_refused_without_reading_shape(ndim):
    with pytest.raises(LaunchError, match=f"parameter 'a': the DLPack tensor claims {ndim} dimensions"):
        check_args(VADD, [HostileDLPack(ndim), host(), host(), 8])


def test_dlpack_without_a_shape_array_is_refused():
    with pytest.raises(LaunchError, match="parameter 'a': the DLPack tensor has no shape array"):
        check_args(VADD, [HostileDLPack(1), host(), host(), 8])


@pytest.mark.parametrize(
    "args, message",
    [
        ([10**400, 1.0], "parameter 'x': the integer does not fit f32"),
        ([1e300, 1.0], r"parameter 'x': 1e\+300 overflows f32"),
        ([-1e39, 1.0], r"parameter 'x': -1e\+39 overflows f32"),
        ([1.0, 70000.0], "parameter 'h': 70000.0 overflows f16"),
        ([1.0, 70000], "parameter 'h': 70000.0 overflows f16"),
    ],
)
def test_floats_that_overflow_the_parameter_type(args, message):
    with pytest.raises(LaunchError, match=message):
        check_args(SCALARS, args)


def test_infinities_and_nans_are_still_floats():
    bound = check_args(SCALARS, [float("inf"), float("nan")])
    assert np.frombuffer(bound["x"].data, np.float32)[0] == np.inf


@pytest.mark.parametrize("grid", [1.5, np.array(3), np.float64(2.0), "8", b"\x01"])
def test_grid_of_the_wrong_type(grid):
    with pytest.raises(LaunchError, match="is not 1 to 3 positive integers"):
        launch_grid(grid, (8, 1, 1), (1, 1, 1))


class BadProtocol:
    def __init__(self, result):
        self.result = result

    def __cuda_stream__(self):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize(
    "result, message",
    [
        ("junk", r"__cuda_stream__\(\) did not give \(version, handle\)"),
        ((0,), r"did not give \(version, handle\)"),
        (RuntimeError("no"), r"RuntimeError: no"),
        ((0, -1), r"gave the handle -1, not an integer in 0..2\*\*64"),
        ((0, 2**64), "gave the handle 18446744073709551616"),
        ((0, "0x10"), "gave the handle '0x10'"),
    ],
)
def test_malformed_stream_handles(result, message):
    with pytest.raises(LaunchError, match=message):
        stream_handle(BadProtocol(result))


@pytest.mark.parametrize("handle", [-3, 2**64 + 1])
def test_integer_streams_out_of_range(handle):
    with pytest.raises(LaunchError, match="not an integer in 0..2"):
        stream_handle(handle)


class CudaArray:
    def __init__(self, ptr, stream=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False), "shape": (8,), "typestr": "<f4", "version": 3, "stream": stream,
        }  # fmt: skip


@pytest.mark.parametrize(
    "ptr, message",
    [
        (0, "the device pointer is NULL"),
        (None, "the device pointer is NULL"),
        (-4096, r"the device pointer is -0x1000, outside 0..2\*\*64"),
        (2**64 + 4096, "the device pointer is 0x10000000000001000, outside"),
        ("0x1000", "the device pointer '0x1000' is not an integer"),
    ],
)
def test_device_pointers_outside_the_address_space(ptr, message):
    with pytest.raises(LaunchError, match=f"parameter 'b': {message}"):
        check_args(VADD, [host(), CudaArray(ptr if ptr is not None else 0), host(), 8])


def test_malformed_producer_stream_is_refused():
    with pytest.raises(LaunchError, match="parameter 'a': the array's producer stream gave the handle -2"):
        check_args(VADD, [CudaArray(0x1000, stream=-2), host(), host(), 8])


def test_masked_numpy_arrays_are_refused():
    masked = np.ma.masked_array(host(), mask=[True] + [False] * 7)
    with pytest.raises(LaunchError, match="parameter 'c': masked arrays are not supported"):
        check_args(VADD, [host(), host(), masked, 8])


BIG = """
const N = {n}
kernel add(A: f32[{shape}], C: f32[{shape}]):
    bx = cta_id([N // 256])
    tx = thread_id([256])
    {body}
"""


def test_a_32_bit_index_into_a_dimension_of_2_31_elements_is_refused():
    from tilec.compiler.diagnostics import TilecError
    from tilec.pipeline import compile_source

    source = BIG.format(n=2**31, shape="N", body="i = bx * 256 + tx\n    C[i] = A[i]")
    with pytest.raises(TilecError, match="dimension 0 of 'A' has 2147483648 elements, more than a 32-bit"):
        compile_source(source, "big.tile", target="sm_90a")
    # the same buffer split in two dimensions is addressed in 64 bits
    split = BIG.format(n=2**31, shape="N // 256, 256", body="C[bx, tx] = A[bx, tx]")
    ptx = compile_source(split, "big.tile", target="sm_90a").ptx
    assert "shl.b64" in ptx and "mad.wide" not in ptx

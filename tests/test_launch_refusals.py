"""The runtime refuses a launch that cannot work, with an error that names
the problem, before any device work: kernels compiled by tilec itself (not
hand-written PTX) given the wrong number, dtype or shape of arguments, a
non-contiguous or misaligned array behind a TMA tensor map, more shared
memory than the device has, or a device of another architecture.

The CPU tests go through the pure checks (`check_args`, `check_smem`,
`device_arch`) and through `CompiledModule.kernel` with faked device
properties; the GPU tests make each refused call for real, then launch the
kernel correctly to show that the refusal left the CUDA context usable."""
import copy
import gc
from pathlib import Path

import numpy as np
import pytest

import tilec
from test_runtime_gpu import DeviceBuffer
from tilec.runtime import driver
from tilec.runtime.launch import LaunchError, check_args, check_smem
from tilec.runtime.module import CompiledModule, device_arch

ROOT = Path(__file__).resolve().parent.parent
TMA_COPY = ROOT / "examples" / "tma_copy.tile"  # A: f16[8, 256] read through a tensor map, B: f16[8, 256]

BIG_SMEM = """\
const SMEM = 1024
kernel big_smem(A: f32[128]):
    cta_id([1]); tid = thread_id([128])
    dyn = alloc([SMEM], u8, scope="shared.dyn")
    A[tid] = 1.0
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def tma_entry(target="sm_90a"):
    return tilec.compile(TMA_COPY, target=target).meta["kernels"][0]


def check(entry, args):
    return check_args(entry["params"], args, entry["tensormaps"])


def tile(dtype=np.float16, shape=(8, 256)):
    return np.arange(np.prod(shape)).reshape(shape).astype(dtype)


class CudaView:
    """Device memory as __cuda_array_interface__ describes it; nothing is
    dereferenced on the CPU."""

    def __init__(self, ptr, shape, typestr="<f2", strides=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False), "shape": tuple(shape), "typestr": typestr, "strides": strides, "version": 3,
        }  # fmt: skip


# ---- argument count, dtype, shape ----------------------------------------


def test_argument_count_names_the_parameters_and_leaves_out_tensor_maps():
    entry = tma_entry()
    assert [p["kind"] for p in entry["params"]] == ["buffer", "buffer", "tensormap"]
    with pytest.raises(LaunchError, match=r"the kernel takes 2 arguments \(A, B\), got 1"):
        check(entry, [tile()])
    with pytest.raises(LaunchError, match=r"the kernel takes 2 arguments \(A, B\), got 3"):
        check(entry, [tile(), tile(), tile()])


def test_dtype_and_shape_name_the_parameter():
    entry = tma_entry()
    with pytest.raises(LaunchError, match="parameter 'A': dtype float32 does not match f16"):
        check(entry, [tile(np.float32), tile()])
    with pytest.raises(LaunchError, match=r"parameter 'B': shape \[8, 128\] does not match f16\[8, 256\]"):
        check(entry, [tile(), tile(shape=(8, 128))])
    assert set(check(entry, [tile(), tile()])) == {"A", "B"}


# ---- arrays behind a tensor map --------------------------------------------


def test_non_contiguous_arrays_are_refused():
    entry = tma_entry()
    with pytest.raises(LaunchError, match="parameter 'A': the numpy array is not C-contiguous"):
        check(entry, [tile(shape=(8, 512))[:, ::2], tile()])
    strided = CudaView(0x10000, (8, 256), strides=(1024, 2 * 2))
    with pytest.raises(LaunchError, match=r"parameter 'A': the array is not C-contiguous \(byte strides \[1024, 4\]\)"):
        check(entry, [strided, tile()])


def test_tensor_map_base_must_be_16_byte_aligned():
    entry = tma_entry()
    check(entry, [CudaView(0x10010, (8, 256)), tile()])
    with pytest.raises(
        LaunchError, match=r"parameter 'A' \(tensor map 'A_tmap0'\): .*base address 0x10008 is not 16-byte aligned"
    ):
        check(entry, [CudaView(0x10008, (8, 256)), tile()])
    check(entry, [tile(), CudaView(0x10008, (8, 256))])  # B is not read through a tensor map


# ---- shared memory and architecture, against faked device properties --------


@pytest.fixture
def fake_device(monkeypatch):
    """`fake_device(compute_capability, max_dynamic_smem)`: device
    properties as `driver.device()` reports them, and a loader that accepts
    any image, so that `CompiledModule.kernel` runs its checks without a GPU
    (the PTX is still assembled for real)."""

    def install(compute_capability=(9, 0), max_dynamic_smem=232448):
        fake = driver.Device(0, None, None, "fake", compute_capability, max_dynamic_smem, 132)
        monkeypatch.setattr(driver, "device", lambda: fake)
        monkeypatch.setattr(driver, "load_module", lambda image: "module")
        monkeypatch.setattr(driver, "unload_module", lambda module: None)
        monkeypatch.setattr(driver, "get_function", lambda module, name: name)
        monkeypatch.setattr(driver, "function_attribute", lambda function, attribute: 0)
        monkeypatch.setattr(driver, "set_function_attribute", lambda function, attribute, value: None)

    yield install
    gc.collect()  # unload this test's modules while the fake is in place


def test_more_shared_memory_than_the_device_has(fake_device):
    fake_device(max_dynamic_smem=100 * 1024)
    module = tilec.compile(BIG_SMEM, defines={"SMEM": 100 * 1024 + 16})
    with pytest.raises(
        LaunchError, match=r"kernel 'big_smem' needs 102416 bytes of dynamic shared memory, more than the 102400"
    ):
        module.kernel()
    tilec.compile(BIG_SMEM, defines={"SMEM": 100 * 1024}).kernel()  # exactly the limit fits


def test_static_shared_memory_counts_too():
    check_smem("k", 100 * 1024, 0, 100 * 1024)
    with pytest.raises(LaunchError, match=r"needs 102400 bytes of dynamic shared memory plus 16 static"):
        check_smem("k", 100 * 1024, 16, 100 * 1024)


@pytest.mark.parametrize(
    "target, capability, message",
    [
        ("sm_90a", (10, 0), "compiled for sm_90a, which runs only on compute capability 9.0; this device is 10.0"),
        ("sm_100a", (9, 0), "compiled for sm_100a, which runs only on compute capability 10.0; this device is 9.0"),
        ("sm_90a", (8, 0), "compiled for sm_90a, which runs only on compute capability 9.0; this device is 8.0"),
    ],
)
def test_a_module_for_another_architecture_is_refused_before_loading(
    fake_device, monkeypatch, target, capability, message
):
    fake_device(compute_capability=capability)
    loads = []
    monkeypatch.setattr(driver, "load_module", lambda image: loads.append(image))
    with pytest.raises(LaunchError, match=message):
        tilec.compile(TMA_COPY, target=target).kernel()
    assert loads == []
    with pytest.raises(LaunchError, match=message):
        device_arch(target, capability)


# ---- the same refusals on a real device ------------------------------------


def run_correctly(kernel):
    """A correct launch after a refusal: the context must still work."""
    a = (np.arange(8 * 256) % 1000).astype(np.float16).reshape(8, 256)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_device_refuses_wrong_count_dtype_and_shape(hopper):
    kernel = tilec.compile(TMA_COPY).kernel()
    with pytest.raises(LaunchError, match=r"takes 2 arguments \(A, B\), got 1"):
        kernel(tile())
    with pytest.raises(LaunchError, match="parameter 'A': dtype float32 does not match f16"):
        kernel(tile(np.float32), tile())
    with pytest.raises(LaunchError, match=r"parameter 'B': shape \[8, 128\] does not match"):
        kernel(tile(), tile(shape=(8, 128)))
    run_correctly(kernel)


@pytest.mark.gpu
def test_device_refuses_non_contiguous_and_misaligned_tma_arrays(hopper):
    kernel = tilec.compile(TMA_COPY).kernel()
    wide = DeviceBuffer(tile(shape=(8, 512)))
    try:
        strided = CudaView(wide.ptr, (8, 256), strides=(1024, 4))
        with pytest.raises(LaunchError, match="parameter 'A': the array is not C-contiguous"):
            kernel(strided, tile())
        shifted = CudaView(wide.ptr + 8, (8, 256))
        with pytest.raises(LaunchError, match="base address 0x[0-9a-f]+ is not 16-byte aligned"):
            kernel(shifted, tile())
        b = np.zeros((8, 256), np.float16)
        kernel(CudaView(wide.ptr, (8, 256)), b)  # the aligned, contiguous start of the same memory works
        np.testing.assert_array_equal(b, wide.host.reshape(-1)[: 8 * 256].reshape(8, 256))
    finally:
        wide.free()
    run_correctly(kernel)


@pytest.mark.gpu
def test_device_refuses_more_shared_memory_than_it_has(hopper):
    """The compiler already refuses more than the target allows
    (tests/test_bad_inputs.py); the load still checks the device, for a
    kernel.json written elsewhere (a C++ host's, or one edited by hand)."""
    limit = driver.device().max_dynamic_smem
    fits = tilec.compile(BIG_SMEM, defines={"SMEM": 1024})
    meta = copy.deepcopy(fits.meta)
    meta["kernels"][0]["dynamic_smem"] = limit + 1024
    module = CompiledModule(fits.ptx, meta, fits.target)
    with pytest.raises(LaunchError, match=f"needs {limit + 1024} bytes of dynamic shared memory.*than the {limit}"):
        module.kernel()
    run_correctly(tilec.compile(TMA_COPY).kernel())


@pytest.mark.gpu
def test_device_refuses_a_module_for_another_architecture(hopper):
    with pytest.raises(LaunchError, match="compiled for sm_100a, which runs only on compute capability 10.0"):
        tilec.compile(TMA_COPY, target="sm_100a").kernel()
    run_correctly(tilec.compile(TMA_COPY).kernel())

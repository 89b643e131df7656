"""Launching hand-written PTX through CompiledModule on a real GPU: numpy,
__cuda_array_interface__ and torch arguments, grid override, clusters,
large dynamic shared memory, TMA tensor maps, and the refusals.  Skipped
without a CUDA device (tests/conftest.py); the sm_90a kernels need an H100
class device (compute capability 9.0)."""
import numpy as np
import pytest

import runtime_kernels
import tilec
from tilec.runtime import driver
from tilec.runtime.driver import CudaError
from tilec.runtime.launch import LaunchError
from tilec.runtime.module import CompiledModule

pytestmark = pytest.mark.gpu


def module(built):
    ptx, meta = built
    return CompiledModule(ptx, meta, meta["target"])


def inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def test_vadd_with_numpy(hopper):
    kernel = module(runtime_kernels.vadd(n=1000)).kernel("vadd")
    a, b = inputs(1000)
    c = np.zeros(1000, np.float32)
    kernel(a, b, c, 1000)
    np.testing.assert_array_equal(c, a + b)


def test_portable_target_runs_on_a_later_device():
    if driver.device().compute_capability < (8, 0):
        pytest.skip("sm_80 code needs compute capability 8.0")
    kernel = module(runtime_kernels.vadd("sm_80", n=1000)).kernel()
    a, b = inputs(1000, seed=1)
    c = np.zeros(1000, np.float32)
    kernel(a, b, c, 1000)
    np.testing.assert_array_equal(c, a + b)


def test_grid_override(hopper):
    kernel = module(runtime_kernels.vadd(n=1024)).kernel()
    a, b = inputs(1024, seed=2)
    c = np.zeros(1024, np.float32)
    kernel(a, b, c, 1024, grid=(4,))  # 4 x 128 threads cover half
    np.testing.assert_array_equal(c[:512], (a + b)[:512])
    assert not c[512:].any()


def test_same_array_twice_is_one_device_buffer(hopper):
    kernel = module(runtime_kernels.vadd(n=256)).kernel()
    a, _ = inputs(256, seed=3)
    expected = a + a
    kernel(a, a, a, 256)  # c aliases a: each element is read then written by one thread
    np.testing.assert_array_equal(a, expected)


class DeviceBuffer:
    """Device memory from tilec's own driver wrapper, described by the CUDA
    array interface, the way numba or cupy arrays present themselves."""

    def __init__(self, host: np.ndarray):
        self.host = np.ascontiguousarray(host)
        self.ptr = driver.mem_alloc(self.host.nbytes)
        driver.copy_to_device(self.ptr, self.host.ctypes.data, self.host.nbytes)
        self.__cuda_array_interface__ = {
            "data": (self.ptr, False),
            "shape": self.host.shape,
            "typestr": self.host.dtype.str,
            "strides": None,
            "version": 3,
        }

    def read(self) -> np.ndarray:
        out = np.empty_like(self.host)
        driver.copy_to_host(out.ctypes.data, self.ptr, out.nbytes)
        return out

    def free(self):
        driver.mem_free(self.ptr)


def test_vadd_with_cuda_array_interface(hopper):
    kernel = module(runtime_kernels.vadd(n=1000)).kernel()
    a, b = inputs(1000, seed=4)
    buffers = [DeviceBuffer(a), DeviceBuffer(b), DeviceBuffer(np.zeros(1000, np.float32))]
    try:
        kernel(*buffers, 1000)
        np.testing.assert_array_equal(buffers[2].read(), a + b)
    finally:
        for buffer in buffers:
            buffer.free()


def test_vadd_with_torch(hopper):
    torch = pytest.importorskip("torch")
    kernel = module(runtime_kernels.vadd(n=1000)).kernel()
    a = torch.randn(1000, device="cuda")
    b = torch.randn(1000, device="cuda")
    c = torch.zeros(1000, device="cuda")
    kernel(a, b, c, 1000)
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)

    stream = torch.cuda.Stream()
    d = torch.zeros(1000, device="cuda")
    with torch.cuda.stream(stream):
        kernel(a, b, d, 1000, stream=stream)
    stream.synchronize()
    torch.testing.assert_close(d, a + b, rtol=0, atol=0)

    with pytest.raises(LaunchError, match="parameter 'c': dtype"):
        kernel(a, b, c.double(), 1000)
    with pytest.raises(LaunchError, match="parameter 'c': the array is not C-contiguous"):
        kernel(a, b, torch.zeros(2000, device="cuda")[::2], 1000)


def test_cluster_launch(hopper):
    kernel = module(runtime_kernels.cluster_ids(ctas=8, cluster=2)).kernel()
    out = np.full((8, 2), 99, np.uint32)
    kernel(out)
    assert out[:, 0].tolist() == [0, 1] * 4
    assert out[:, 1].tolist() == [2] * 8


def test_cluster_must_tile_the_grid(hopper):
    kernel = module(runtime_kernels.cluster_ids(ctas=8, cluster=2)).kernel()
    with pytest.raises(LaunchError, match="not a whole number of clusters"):
        kernel(np.zeros((8, 2), np.uint32), grid=(7,))


def test_large_dynamic_shared_memory(hopper):
    kernel = module(runtime_kernels.dsmem_swap()).kernel()
    out = np.zeros(128, np.uint32)
    kernel(out)
    assert out.tolist() == [i ^ 1 for i in range(128)]


def test_too_much_dynamic_shared_memory_is_refused(hopper):
    limit = driver.device().max_dynamic_smem
    with pytest.raises(LaunchError, match=f"more than the {limit} bytes"):
        module(runtime_kernels.dsmem_swap(dynamic_smem=limit + 1024)).kernel()


def test_module_for_another_architecture_is_refused(hopper):
    with pytest.raises(LaunchError, match="compiled for sm_100a, which runs only on compute capability 10.0"):
        module(runtime_kernels.vadd("sm_100a")).kernel()


def test_tma_tensor_map_parameter(hopper):
    kernel = module(runtime_kernels.tma_rows()).kernel()
    a = np.arange(16 * 64, dtype=np.float16).reshape(16, 64)
    b = np.zeros((8, 64), np.float16)
    kernel(a, b)
    np.testing.assert_array_equal(b, a[8:])


def test_tma_tensor_map_over_device_memory(hopper):
    kernel = module(runtime_kernels.tma_rows()).kernel()
    a = DeviceBuffer((np.arange(16 * 64) % 2048).astype(np.float16).reshape(16, 64))
    try:
        b = np.zeros((8, 64), np.float16)
        kernel(a, b)
        np.testing.assert_array_equal(b, a.host[8:])
    finally:
        a.free()


def test_refused_image_reports_the_jit_log():
    """Broken PTX handed to the driver's own JIT: the error names the call
    and carries the JIT's error log."""
    broken = b".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n    stx;\n}\n\0"
    with pytest.raises(CudaError, match="cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX") as info:
        driver.load_module(broken)
    assert "stx" in info.value.log


def test_loaded_code_keeps_setmaxnreg(hopper):
    """The runtime loads PTX through the driver, which compiles the module
    whole: the warp-specialized v7 keeps its setmaxnreg (relocatable code,
    what nvJitLink makes, drops it), so its consumers get their registers
    and compile without spills or serialized wgmmas."""
    from pathlib import Path

    from tilec.pipeline import compile_source
    from tilec.runtime.assemble import parse_usage

    path = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "hgemm_v7.tile"
    ptx = compile_source(path.read_text(), str(path), target="sm_90a").ptx
    assert "setmaxnreg" in ptx
    log = driver.jit_info_log(ptx)
    assert "setmaxnreg' ignored" not in log, log
    usage = parse_usage(log)["hgemm_v7"]
    assert usage["spill_stores"] == 0 and not usage["performance_loss"], log


STATIC_227_KIB = """
target sm_90a
kernel big_static(out: u32[128]):
    cta_id([1])
    tx = thread_id([128])
    s = alloc((58112,), u32, scope="shared")
    s[58111 - tx] = convert(tx, u32) + 1000
    cuda.cta_sync()
    out[tx] = s[58111 - ((tx + 1) % 128)]
"""


def test_static_shared_memory_past_48_kib_launches(hopper):
    """Issue 18: tilec's static-shared limit on sm_90a is 227 KiB, not 48 KiB.
    A kernel whose only shared memory is a 232448-byte static `.shared`
    array (58112 u32, the last 128 of them used, each thread reading its
    neighbour's store) launches with no opt-in and reads back every value."""
    compiled = tilec.compile(STATIC_227_KIB)
    assert "\t.shared .align 16 .b8 $shared_s[232448];" in compiled.ptx.splitlines()
    assert compiled.meta["kernels"][0]["dynamic_smem"] == 0
    kernel = compiled.kernel("big_static")
    out = np.full(128, 0xFFFFFFFF, np.uint32)
    kernel(out)
    assert out.tolist() == [1000 + (i + 1) % 128 for i in range(128)]


@pytest.mark.parametrize("pdl", [None, False])
def test_a_chain_of_programmatic_launches_reads_each_result(hopper, pdl):
    """vadd that waits on its grid dependency, launched programmatically
    (the default) back to back, each reading the previous one's output:
    every link sees its predecessor's result, on the launcher's fast path
    and its slow path, and in a CUDA graph captured from such launches."""
    torch = pytest.importorskip("torch")
    n = 1 << 20
    kernel = module(runtime_kernels.vadd(n=n, waits=True)).kernel()
    ones = torch.ones(n, device="cuda")
    x = [torch.zeros(n, device="cuda"), torch.full((n,), float("nan"), device="cuda")]
    for i in range(200):  # x[(i + 1) % 2] = x[i % 2] + 1
        kernel(x[i % 2], ones, x[(i + 1) % 2], n, pdl=pdl)
    torch.testing.assert_close(x[0], torch.full_like(ones, 200.0), rtol=0, atol=0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(20):
            kernel(x[i % 2], ones, x[(i + 1) % 2], n, pdl=pdl)
    for _ in range(5):
        graph.replay()
    torch.testing.assert_close(x[0], torch.full_like(ones, 300.0), rtol=0, atol=0)

"""tilec kernels on torch tensors, on a real GPU: torch's current stream
with no implicit wait, the fast path (compiled and pure-Python launchers
alike), a changed signature caught, and `tilec.torch` operators inside
torch.compile(fullgraph=True) and CUDA graph capture."""
from pathlib import Path

import pytest

import tilec
from tilec.runtime import launch as launch_py, launcher as launcher_py, module as module_py
from tilec.runtime.launch import LaunchError
from tilec.runtime.module import CompiledModule

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent
N = 1 << 14


def add_kernel():
    module = tilec.compile(ROOT / "examples" / "elementwise_add.tile", defines={"N": N})
    return CompiledModule(module.ptx, module.meta, module.target).kernel()


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


@pytest.mark.parametrize("implementation", ["compiled", "python"])
def test_fast_path_replays_and_rechecks(hopper, monkeypatch, implementation):
    if implementation == "python":
        monkeypatch.setattr(module_py, "Kernel", launch_py.kernel_type(launcher_py.PyLauncher))
    elif launcher_py.IMPLEMENTATION != "C":
        pytest.skip("the compiled launcher is not built here")
    kernel = add_kernel()
    x, y = randn(N), randn(N)
    outs = [torch.full((N,), float("nan"), device="cuda") for _ in range(3)]
    for i in range(6):  # replays, and a new pointer every other call
        kernel(x, y, outs[i // 2])
    assert kernel._remembered > 0
    if implementation == "compiled" and hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        assert kernel._reads == "dlpack-exchange"
    for out in outs:
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    with pytest.raises(LaunchError, match=r"parameter 'B': shape \[8192\] does not match"):
        kernel(x, y[: N // 2], outs[0])
    with pytest.raises(LaunchError, match="parameter 'C': dtype torch.float16 does not match f32"):
        kernel(x, y, outs[0].half())


def test_no_stream_means_torchs_current_stream(hopper):
    kernel = add_kernel()
    x, y = randn(N), randn(N)
    out = torch.full((N,), float("nan"), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # The kernel queues behind this on `side`.  ~0.25 s of GPU time: the
        # assertion below needs the host to reach it first, and 50M cycles
        # (~25 ms) were once outrun on a loaded host.
        torch.cuda._sleep(500_000_000)
        kernel(x, y, out)
        kernel(x, y, out)
        done = torch.cuda.Event()
        done.record()
    assert not done.query()  # the call did not wait for the kernel
    side.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_custom_op_in_torch_compile_and_cuda_graphs(hopper):
    import tilec.torch

    kernel = add_kernel()
    op = tilec.torch.custom_op(kernel, mutates=("C",), name="add_rt_test")
    assert tilec.torch.custom_op(kernel, mutates=("C",), name="add_rt_test") is op

    def f(x, y, out):
        op(x, y, out)
        return out * 2

    compiled = torch.compile(f, fullgraph=True)
    x, y = randn(N), randn(N)
    out = torch.full((N,), float("nan"), device="cuda")
    torch.testing.assert_close(compiled(x, y, out), (x + y) * 2, rtol=0, atol=0)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)

    graph = torch.cuda.CUDAGraph()
    out.fill_(float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        op(x, y, out)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        op(x, y, out)
    x.copy_(randn(N))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_hgemm_v7_on_torch_tensors(hopper):
    shape = {"M": 256, "N": 512, "K": 128}
    module = tilec.compile(ROOT / "examples" / "hopper" / "hgemm_v7.tile", defines=shape)
    kernel = module.kernel()
    a = randn(shape["M"], shape["K"], dtype=torch.half)
    b = randn(shape["N"], shape["K"], dtype=torch.half)
    d = torch.full((shape["M"], shape["N"]), float("nan"), device="cuda", dtype=torch.half)
    for _ in range(3):
        kernel(a, b, d)
    torch.testing.assert_close(d.float(), a.float() @ b.float().T, atol=0.05, rtol=0.01)

"""Host time per launch: tilec against Triton and torch, in one run on the GPU.

    python3 bench/launch.py [--launches 3000] [--json out.json]

(tilec installed; else PYTHONPATH=. from the repo root, after
`python3 setup.py build_ext --inplace` for the compiled launcher.)

What is timed is the host, two ways, after a warm-up (so every tilec row is
a fast-path replay, except the row that rotates among more output tensors
than a kernel remembers signatures for, which takes the slow path every
time): "host us", the wall time of `--launches` back-to-back launches with
no synchronization between them, divided by their number; and "batch us",
the median over 30 batches of 100 launches, each batch timed right after a
synchronize.  The problems are small (elementwise add over 2**16 floats,
hgemm_v7 at its smallest shape 128 x 256 x 64), but where the GPU takes
longer per kernel than the host per launch (hgemm_v7: about 6 µs), the
driver's launch queue fills during a long run and then paces the host at
the GPU's rate; 100 launches fit in the queue, so the batch column is the
host's own cost.  Such rows are marked.  The GPU time per kernel (CUDA
events, median) is printed beside.

The driver's own cost is measured too: "driver floor" rows call
cuLaunchKernelEx (and cuLaunchKernel, the call without a launch
configuration) for the same kernel and parameters in a loop in C, compiled
here with the system C compiler, in the same batches.  What a tilec row
costs above its floor is tilec's.

Rows: tilec hgemm_v7 (3 tensor maps) with `stream=s` and with no stream
(torch's current stream); rotating among 2 outputs (both remembered) and
among more than a kernel remembers (the slow path, every encode kept);
tilec elementwise_add, with the compiled and the pure-Python launcher, and
with the stream's int handle given (no current-stream query), and on
device arrays that are not torch tensors (wrappers that expose only DLPack,
or only `__cuda_array_interface__`, as cupy or jax arrays would: the slow
path at every call);
Triton `add[grid](x, y, z, n)`; torch `torch.add(x, y, out=z)`.
Every output is poisoned with NaN and checked
once before timing.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import torch

import tilec
from tilec.runtime import driver, launch as launch_py, launcher as launcher_py, module as module_py
from tilec.runtime.module import CompiledModule

ROOT = Path(__file__).resolve().parent.parent
N_ADD = 1 << 16
BATCH, BATCHES = 100, 30  # 100 launches fit in the driver's launch queue: the host never waits
GEMM = {"M": 128, "N": 256, "K": 64}


def host_us(fn, launches: int) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / launches * 1e6


def batch_us(fn) -> float:
    """Median host time per launch over `BATCHES` batches of `BATCH`
    launches, each timed right after a synchronize."""
    for _ in range(200):
        fn()
    times = []
    for _ in range(BATCHES):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - start) / BATCH * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def gpu_us(fn, runs: int = 50) -> float:
    """Median GPU time of one launch; a GPU sleep first, so the launch is
    queued before the start event fires and host time stays out."""
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


_FLOOR_C = r"""
#include <time.h>
typedef int (*LaunchEx)(const void *, void *, void **, void **);
typedef int (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      void *, void **, void **);
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
/* seconds per call of n cuLaunchKernelEx calls; the first failure's status in *status */
double launch_ex_loop(LaunchEx launch, const void *config, void *f, void **params, int n, int *status) {
    double start = now();
    for (int i = 0; i < n; i++) {
        int s = launch(config, f, params, 0);
        if (s && !*status) *status = s;
    }
    return (now() - start) / n;
}
double launch_loop(Launch launch, void *f, const unsigned *dims, unsigned smem, void *stream, void **params,
                   int n, int *status) {
    double start = now();
    for (int i = 0; i < n; i++) {
        int s = launch(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], smem, stream, params, 0);
        if (s && !*status) *status = s;
    }
    return (now() - start) / n;
}
"""


def floor_library():
    """The C loops above, compiled (None without a C compiler)."""
    directory = Path(tempfile.mkdtemp())
    (directory / "floor.c").write_text(_FLOOR_C)
    target = directory / "floor.so"
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(directory / "floor.c"), "-o", str(target)],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    lib = ctypes.CDLL(str(target))
    for name in ("launch_ex_loop", "launch_loop"):
        getattr(lib, name).restype = ctypes.c_double
    return lib


def floor_rows(lib, k, blobs: list[bytes], stream: int) -> dict:
    """Host time per call of the driver's own launch calls for kernel `k`
    with the parameter bytes `blobs`, in C, in batches as `batch_us`."""
    packed = launch_py.pack_params(blobs)
    function = ctypes.c_void_p(driver.function_address(k._function))
    dims = tuple(launch_py.launch_grid(None, k.grid, k.cluster)) + tuple(k.block)
    config = launcher_py._Config()
    config.grid[:] = dims[:3]
    config.block[:] = dims[3:]
    config.shared_bytes = k.dynamic_smem
    config.stream = stream
    assert tuple(k.cluster) == (1, 1, 1), "the floor loops launch without a cluster"
    status = ctypes.c_int(0)
    params = ctypes.c_void_p(packed.address)
    launch_ex = ctypes.c_void_p(driver.launch_kernel_ex_address())
    launch = ctypes.cast(driver.libcuda().cuLaunchKernel, ctypes.c_void_p)
    c_dims = (ctypes.c_uint * 6)(*dims)
    calls = {
        "cuLaunchKernelEx": lambda n: lib.launch_ex_loop(
            launch_ex, ctypes.byref(config), function, params, n, ctypes.byref(status)),
        "cuLaunchKernel": lambda n: lib.launch_loop(
            launch, function, c_dims, ctypes.c_uint(k.dynamic_smem), ctypes.c_void_p(stream), params, n,
            ctypes.byref(status)),
    }
    out = {}
    for name, call in calls.items():
        call(200)
        times = []
        for _ in range(BATCHES):
            torch.cuda.synchronize()
            times.append(call(BATCH) * 1e6)
        torch.cuda.synchronize()
        if status.value:
            raise SystemExit(f"{name} failed with CUresult {status.value}")
        out[name] = statistics.median(times)
    return out


def kernel_blobs(k, args) -> list[bytes]:
    """kernel `k`'s parameter bytes for the device tensors `args` (no
    scalars), tensor maps as the kernel encoded them."""
    pointers = {p["name"]: a.data_ptr() for p, a in zip(launch_py.caller_params(k.params), args)}
    blobs = []
    for p in k.params:
        if p["kind"] == "buffer":
            blobs.append(struct.pack("<Q", pointers[p["name"]]))
        elif p["kind"] == "tensormap":
            base = pointers[p["tensor"]]
            blobs.append(next(v for key, v in k._encoded.items() if key[:2] == (p["name"], base)))
        else:
            raise SystemExit(f"kernel_blobs: parameter kind {p['kind']} is not covered")
    return blobs


def kernel(path: str, defines: dict, pure_python: bool = False):
    """A fresh Kernel (its own launcher) of the compiled example."""
    module = tilec.compile(ROOT / path, defines=defines)
    if pure_python:  # made as the kernel class over the pure-Python launcher
        saved = module_py.Kernel
        module_py.Kernel = launch_py.kernel_type(launcher_py.PyLauncher)
        try:
            return CompiledModule(module.ptx, module.meta, module.target).kernel()
        finally:
            module_py.Kernel = saved
    return CompiledModule(module.ptx, module.meta, module.target).kernel()


def triton_add():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None, None

    @triton.jit
    def add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(z_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

    return add, triton.__version__


class DLPackOnly:
    """A device array tilec sees only through DLPack (not a torch tensor)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


class InterfaceOnly:
    """A device array tilec sees only through `__cuda_array_interface__`."""

    def __init__(self, tensor):
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=3000)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    n = args.launches

    x, y = torch.randn(N_ADD, device="cuda"), torch.randn(N_ADD, device="cuda")
    z = torch.full((N_ADD,), float("nan"), device="cuda")
    add = kernel("examples/elementwise_add.tile", {"N": N_ADD})
    add_py = kernel("examples/elementwise_add.tile", {"N": N_ADD}, pure_python=True)
    v7 = kernel("examples/hopper/hgemm_v7.tile", GEMM)
    A = torch.randn(GEMM["M"], GEMM["K"], device="cuda", dtype=torch.half)
    B = torch.randn(GEMM["N"], GEMM["K"], device="cuda", dtype=torch.half)
    D = torch.full((GEMM["M"], GEMM["N"]), float("nan"), device="cuda", dtype=torch.half)
    # more output tensors than a kernel remembers signatures: rotating among them misses every time
    outputs = [D.clone() for _ in range(launcher_py.ENTRIES + 2)]
    stream = torch.cuda.current_stream()

    add(x, y, z)
    v7(A, B, D)
    torch.cuda.synchronize()
    assert torch.equal(z, x + y), "elementwise_add gave a wrong result"
    torch.testing.assert_close(D.float(), A.float() @ B.float().T, atol=0.05, rtol=0.01)

    rows = []

    def row(name, fn):
        host = host_us(fn, n)
        batch = batch_us(fn)
        device = gpu_us(fn)
        rows.append({"launch": name, "host_us": round(host, 2), "batch_us": round(batch, 2),
                     "gpu_us": round(device, 2)})

    row("tilec hgemm_v7 (3 tensor maps), kernel(A, B, D, stream=s)", lambda: v7(A, B, D, stream=stream))
    row("tilec hgemm_v7, kernel(A, B, D) (torch's current stream)", lambda: v7(A, B, D))
    turn = [0]

    def v7_rotating(count):
        def launch():
            turn[0] += 1
            v7(A, B, outputs[turn[0] % count])
        return launch

    row("tilec hgemm_v7, rotating among 2 outputs (both remembered)", v7_rotating(2))
    row(f"tilec hgemm_v7, rotating among {len(outputs)} outputs (slow path, maps kept)", v7_rotating(len(outputs)))
    row(f"tilec elementwise_add ({launcher_py.IMPLEMENTATION} launcher)", lambda: add(x, y, z))
    row("tilec elementwise_add (pure-Python launcher)", lambda: add_py(x, y, z))
    # what torch's current-stream query costs: the stream's handle given instead
    handle = stream.cuda_stream
    row("tilec elementwise_add, stream=handle (an int: no current-stream query)",
        lambda: add(x, y, z, stream=handle))
    for wrap, what in ((DLPackOnly, "DLPack"), (InterfaceOnly, "__cuda_array_interface__")):
        wx, wy, wz = wrap(x), wrap(y), wrap(z)
        z.fill_(float("nan"))
        add(wx, wy, wz, stream=handle)
        torch.cuda.synchronize()
        assert torch.equal(z, x + y), f"elementwise_add on {what} arrays gave a wrong result"
        row(f"tilec elementwise_add on {what}-only arrays, stream=handle (slow path)",
            lambda: add(wx, wy, wz, stream=handle))
    triton_kernel, triton_version = triton_add()
    if triton_kernel is not None:
        grid = ((N_ADD + 1023) // 1024,)
        z.fill_(float("nan"))
        triton_kernel[grid](x, y, z, N_ADD, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(z, x + y), "the Triton add gave a wrong result"
        row(f"Triton {triton_version} add[grid](x, y, z, n)", lambda: triton_kernel[grid](x, y, z, N_ADD, BLOCK=1024))
    row("torch torch.add(x, y, out=z)", lambda: torch.add(x, y, out=z))

    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"tilec launcher: {launcher_py.IMPLEMENTATION}; {n} launches per row; "
          f"batch: median of {BATCHES} x {BATCH} launches after a synchronize")
    print(f"{'launch':72} {'host us':>9} {'batch us':>9} {'GPU us':>8}")
    for r in rows:
        mark = "  (GPU-paced: the queue throttles the host)" if r["gpu_us"] >= 0.9 * r["host_us"] else ""
        print(f"{r['launch']:72} {r['host_us']:9.2f} {r['batch_us']:9.2f} {r['gpu_us']:8.2f}{mark}")
    lib = floor_library()
    if lib is None:
        print("no C compiler: no driver floor rows")
    else:
        for what, k, k_args in (("hgemm_v7", v7, (A, B, D)), ("elementwise_add", add, (x, y, z))):
            for call, us in floor_rows(lib, k, kernel_blobs(k, k_args), stream.cuda_stream).items():
                r = {"launch": f"driver floor: {call} in a C loop, {what}'s parameters", "batch_us": round(us, 2)}
                rows.append(r)
                print(f"{r['launch']:72} {'':9} {r['batch_us']:9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""Host time per launch: tilec against Triton and torch, in one run on the GPU.

    python3 bench/launch.py [--launches 3000] [--json out.json]

(tilec installed; else PYTHONPATH=. from the repo root, after
`python3 setup.py build_ext --inplace` for the compiled launcher.)

What is timed is the host: the wall time of `--launches` back-to-back
launches with no synchronization between them, divided by their number,
after a warm-up (so every tilec row is a fast-path replay, except the row
that rotates among more output tensors than a kernel remembers signatures
for, which takes the slow path every time).  The problems are small (elementwise add over 2**16
floats, hgemm_v7 at its smallest shape 128 x 256 x 64).  Where the GPU
takes longer per kernel than the host per launch, the driver's launch
queue fills and then paces the host at the GPU's rate: such rows are
marked, and a second column gives the mean over the first 500 launches
after a synchronize, which fit in the queue, so the host never waits there.
The GPU time per kernel (CUDA events, median) is printed beside.

Rows: tilec hgemm_v7 (3 tensor maps) with `stream=s` and with no stream
(torch's current stream); tilec elementwise_add, with the compiled and the
pure-Python launcher; Triton 3.6 `add[grid](x, y, z, n)`; torch
`torch.add(x, y, out=z)`.  Every output is poisoned with NaN and checked
once before timing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import tilec
from tilec.runtime import launch as launch_py, launcher as launcher_py
from tilec.runtime.module import CompiledModule

ROOT = Path(__file__).resolve().parent.parent
N_ADD = 1 << 16
QUEUE_SAFE = 500  # launches that fit in the driver's launch queue: the host never waits
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


def kernel(path: str, defines: dict, pure_python: bool = False):
    """A fresh Kernel (its own launcher) of the compiled example."""
    module = tilec.compile(ROOT / path, defines=defines)
    if pure_python:
        saved = launch_py.Launcher
        launch_py.Launcher = launcher_py.PyLauncher
        try:
            k = CompiledModule(module.ptx, module.meta, module.target).kernel()
            z = torch.empty(N_ADD, device="cuda")
            k(z, z, z)  # makes its launcher now, while the Python one is in place
        finally:
            launch_py.Launcher = saved
        return k
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
        short = host_us(fn, QUEUE_SAFE)
        device = gpu_us(fn)
        rows.append({"launch": name, "host_us": round(host, 2), f"host_us_{QUEUE_SAFE}": round(short, 2),
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
          f"tilec launcher: {launcher_py.IMPLEMENTATION}; {n} launches per row")
    print(f"{'launch':72} {'host us':>9} {'first ' + str(QUEUE_SAFE):>10} {'GPU us':>8}")
    for r in rows:
        mark = "  (GPU-bound: the queue throttles the host)" if r["gpu_us"] >= 0.9 * r["host_us"] else ""
        print(f"{r['launch']:72} {r['host_us']:9.2f} {r[f'host_us_{QUEUE_SAFE}']:10.2f} {r['gpu_us']:8.2f}{mark}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

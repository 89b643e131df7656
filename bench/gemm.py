"""Throughput of the Hopper GEMM kernels (examples/hopper/hgemm_v4 ... v7)
against cuBLAS, in one run on an H100.  A benchmark, not a test: it checks
every kernel once, then prints a table.

    python3 bench/gemm.py [--sizes 4096 8192] [--dtypes f16 bf16] [--versions 4 5 6 7] [--runs 50]

(tilec installed; else PYTHONPATH=. from the repo root.)  D = A @ B^T with A
row-major M x K and B row-major N x K, M = N = K = size; cuBLAS is
`torch.matmul(A, B.T)` on the same tensors.  The tilec kernels are compiled
with -D M=N=K=size (and SM_COUNT = the device's SMs for the persistent v6
and v7) and launched through tilec's runtime (`CompiledModule`) on torch
tensors.  The bf16 kernels are the same sources with their element type
replaced.  Before timing, each kernel writes a NaN-poisoned output from
random inputs, which must be within 1e-2 relative Frobenius error of an f32
reference.  Times are CUDA-event medians over the runs after a warm-up, each
launch queued behind a GPU sleep (see bench/tma_copy.py), so host-side launch
cost is not measured for either side.  The goal is v7 >= 85% of cuBLAS at
8192^3 f16.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import median_ms

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
MAX_ERROR = 1e-2
GOAL = (7, 8192, "f16", 0.85)  # version, size, dtype, fraction of cuBLAS


def kernel_source(version: int, dtype: str) -> str:
    text = (EXAMPLES / f"hgemm_v{version}.tile").read_text()
    return text if dtype == "f16" else re.sub(r"\bf16\b", dtype, text)


def build(version: int, dtype: str, size: int, sm_count: int):
    defines = {"M": size, "N": size, "K": size}
    if version in (6, 7):
        defines["SM_COUNT"] = sm_count
    path = EXAMPLES / f"hgemm_v{version}.tile"
    result = compile_source(kernel_source(version, dtype), str(path), target="sm_90a", defines=defines)
    return CompiledModule(result.ptx, result.meta, "sm_90a").kernel()


def relative_error(d: torch.Tensor, ref: torch.Tensor) -> float:
    d = d.float()
    if torch.isnan(d).any():
        return float("inf")
    return float(torch.linalg.norm(d - ref) / torch.linalg.norm(ref))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["f16", "bf16"])
    parser.add_argument("--versions", type=int, nargs="+", choices=(4, 5, 6, 7), default=[4, 5, 6, 7])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 50:
        parser.error("--runs must be at least 50")
    props = torch.cuda.get_device_properties(0)
    if (props.major, props.minor) != (9, 0):
        raise SystemExit(f"the sm_90a kernels need an H100-class GPU (9.0); this one is {props.major}.{props.minor}")
    torch.backends.cuda.matmul.allow_tf32 = False  # an f32 reference, not tf32
    stream = torch.cuda.current_stream()
    print(f"{torch.cuda.get_device_name(0)} ({props.multi_processor_count} SMs); D = A @ B^T, "
          f"M = N = K; median of {args.runs} runs; TFLOP/s = 2 M N K / time")
    print(f"{'dtype':<6}{'size':>6}  {'kernel':<8}{'ms':>9}{'TFLOP/s':>9}{'vs cuBLAS':>11}{'rel err':>10}")
    ratios = {}
    for dtype in args.dtypes:
        for size in args.sizes:
            A = torch.randn(size, size, dtype=DTYPES[dtype], device="cuda")
            B = torch.randn(size, size, dtype=DTYPES[dtype], device="cuda")
            ref = A.float() @ B.float().T
            flop = 2.0 * size**3
            cublas_ms = median_ms(lambda: torch.matmul(A, B.T), args.runs, args.warmup)
            err = relative_error(torch.matmul(A, B.T), ref)
            print(f"{dtype:<6}{size:>6}  {'cuBLAS':<8}{cublas_ms:>9.3f}{flop / cublas_ms / 1e9:>9.1f}"
                  f"{1.0:>11.3f}{err:>10.1e}")
            for version in args.versions:
                kernel = build(version, dtype, size, props.multi_processor_count)
                D = torch.full((size, size), float("nan"), dtype=DTYPES[dtype], device="cuda")
                kernel(A, B, D, stream=stream)
                torch.cuda.synchronize()
                err = relative_error(D, ref)
                name = f"v{version}"
                if err >= MAX_ERROR:
                    print(f"{dtype:<6}{size:>6}  {name:<8}{'WRONG':>9}{'':>9}{'':>11}{err:>10.1e}")
                    continue
                ms = median_ms(lambda: kernel(A, B, D, stream=stream), args.runs, args.warmup)
                ratios[version, size, dtype] = cublas_ms / ms
                print(f"{dtype:<6}{size:>6}  {name:<8}{ms:>9.3f}{flop / ms / 1e9:>9.1f}"
                      f"{cublas_ms / ms:>11.3f}{err:>10.1e}")
            del A, B, ref
            torch.cuda.empty_cache()
    version, size, dtype, goal = GOAL
    if (version, size, dtype) in ratios:
        got = ratios[version, size, dtype]
        verdict = "met" if got >= goal else "NOT met"
        print(f"goal: v{version} at {size}^3 {dtype} >= {goal:.0%} of cuBLAS: {got:.1%}, {verdict}")


if __name__ == "__main__":
    main()

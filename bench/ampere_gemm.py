"""The sm_80 multistage GEMM (examples/ampere/gemm_cp_async.tile: cp.async
ring, ldmatrix, mma.sync) against cuBLAS, in one run.  A reference point,
not a target: on an H100 cuBLAS uses wgmma, which mma.sync cannot match.

    python3 bench/ampere_gemm.py [--sizes 4096 8192 4000] [--runs 50]

(tilec installed; else PYTHONPATH=.:bench from the repo root.)  D = A @ B^T
with A row-major M x K and B row-major N x K, f16 in, M = N = K = size (a
size that is not a multiple of the 128 x 128 x 32 tile exercises the
zero-filled edges); tilec's kernel writes f32 (D), cuBLAS
`torch.matmul(A, B.T)` f16, so tilec moves 2 more bytes per output element.
Each kernel first writes a NaN-poisoned output from fresh random inputs,
checked against an f32 reference (relative Frobenius error < 1e-2); times
are CUDA-event medians after a warm-up, each launch queued behind a GPU
sleep (bench/tma_copy.py's `median_ms`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gemm import MAX_ERROR, relative_error
from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import median_ms

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "ampere" / "gemm_cp_async.tile"


def build(size: int):
    r = compile_source(SOURCE.read_text(), str(SOURCE), target="sm_80", defines={"M": size, "N": size, "K": size})
    return CompiledModule(r.ptx, r.meta, "sm_80").kernel("gemm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 4000])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 50:
        parser.error("--runs must be at least 50")
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream()
    print(f"{torch.cuda.get_device_name(0)}; D = A @ B^T f16 in, M = N = K; median of {args.runs} runs; "
          f"TFLOP/s = 2 M N K / time")
    print(f"{'size':>6}  {'kernel':<16}{'ms':>9}{'TFLOP/s':>9}{'vs cuBLAS':>11}{'rel err':>10}")
    for size in args.sizes:
        A = torch.randn(size, size, dtype=torch.float16, device="cuda")
        B = torch.randn(size, size, dtype=torch.float16, device="cuda")
        ref = A.float() @ B.float().T
        flop = 2.0 * size**3
        cublas_ms = median_ms(lambda: torch.matmul(A, B.T), args.runs, args.warmup)
        err = relative_error(torch.matmul(A, B.T), ref)
        print(f"{size:>6}  {'cuBLAS':<16}{cublas_ms:>9.3f}{flop / cublas_ms / 1e9:>9.1f}{1.0:>11.3f}{err:>10.1e}")
        kernel = build(size)
        D = torch.full((size, size), float("nan"), dtype=torch.float32, device="cuda")
        kernel(A, B, D, stream=stream)
        torch.cuda.synchronize()
        err = relative_error(D, ref)
        if err >= MAX_ERROR:
            print(f"{size:>6}  {'tilec sm_80':<16}{'WRONG':>9}{'':>9}{'':>11}{err:>10.1e}")
            continue
        ms = median_ms(lambda: kernel(A, B, D, stream=stream), args.runs, args.warmup)
        print(f"{size:>6}  {'tilec sm_80':<16}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{cublas_ms / ms:>11.3f}{err:>10.1e}")
        del A, B, ref, D
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

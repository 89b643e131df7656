"""One compile of hgemm_v7 with runtime extents against a compile per shape,
side by side with cuBLAS, in one run on an H100.  A benchmark, not a test.

    python3 bench/gemm_runtime.py [--runs 100] [--shapes 1000x1032x1064,768x3072x4096]

(tilec installed; else PYTHONPATH=. from the repo root.)  D = A @ B^T, A
row-major M x K, B row-major N x K.  `runtime` is
examples/hopper/hgemm_v7_runtime.tile compiled once (its persistent grid
is the device's SM count, read at launch) and launched at every shape; `per-shape` is
examples/hopper/hgemm_v7.tile compiled with -D M, N, K for each shape;
cuBLAS is `torch.matmul(A, B.T)`.  Each kernel first writes a NaN-poisoned
output from fresh random inputs, which must be within 1e-2 relative
Frobenius error of an f32 reference.  Times are CUDA-event medians after a
warm-up, each launch queued behind a GPU sleep (bench/tma_copy.py), so the
host launch cost is not in them; the two tilec kernels are timed in
alternating rounds and each keeps its best median, so clock drift does not
favour either.  The issue's target: runtime within 2% of per-shape.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import tilec
from gemm import MAX_ERROR, relative_error
from tma_copy import median_ms

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"
SHAPES = [
    (4096, 4096, 4096), (8192, 8192, 8192), (1000, 1032, 1064),
    (4096, 8192, 2048), (8192, 2048, 8192), (768, 3072, 4096),
]  # fmt: skip


def _shapes(text: str) -> list[tuple[int, int, int]]:
    try:
        shapes = [tuple(int(v) for v in item.split("x")) for item in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise argparse.ArgumentTypeError(f"shapes are MxNxK,MxNxK...; not '{text}'")
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shapes", type=_shapes, default=SHAPES, help="MxNxK,... (default: the sweep of bench/gemm.py)")
    args = parser.parse_args()
    if args.runs < 50:
        parser.error("--runs must be at least 50")
    props = torch.cuda.get_device_properties(0)
    if (props.major, props.minor) != (9, 0):
        raise SystemExit(f"hgemm_v7 needs an H100-class GPU (9.0); this one is {props.major}.{props.minor}")
    torch.backends.cuda.matmul.allow_tf32 = False
    sms = props.multi_processor_count
    stream = torch.cuda.current_stream()
    start = time.perf_counter()
    runtime = tilec.compile(EXAMPLES / "hgemm_v7_runtime.tile").kernel()
    print(f"{torch.cuda.get_device_name(0)} ({sms} SMs); f16 D = A @ B^T; median of {args.runs} runs, "
          f"best of {args.rounds} rounds; runtime-extent compile {time.perf_counter() - start:.2f} s (once)")
    print(f"{'M':>6}{'N':>6}{'K':>6}  {'cuBLAS ms':>10}{'per-shape ms':>13}{'runtime ms':>11}"
          f"{'runtime/per-shape':>18}{'TFLOP/s rt':>11}{'compile s':>10}")
    for m, n, k in args.shapes:
        a = torch.randn(m, k, dtype=torch.float16, device="cuda")
        b = torch.randn(n, k, dtype=torch.float16, device="cuda")
        ref = a.float() @ b.float().T
        start = time.perf_counter()
        static = tilec.compile(
            EXAMPLES / "hgemm_v7.tile", defines={"M": m, "N": n, "K": k, "SM_COUNT": sms}
        ).kernel()
        compile_s = time.perf_counter() - start
        outs = {}
        for name, kernel in (("per-shape", static), ("runtime", runtime)):
            d = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
            kernel(a, b, d, stream=stream)
            torch.cuda.synchronize()
            err = relative_error(d, ref)
            if err >= MAX_ERROR:
                raise SystemExit(f"{name} kernel WRONG at {m}x{n}x{k}: relative error {err:.1e}")
            outs[name] = (kernel, d)
        cublas = median_ms(lambda: torch.matmul(a, b.T), args.runs, args.warmup)
        best = {name: float("inf") for name in outs}
        for _ in range(args.rounds):
            for name, (kernel, d) in outs.items():
                ms = median_ms(lambda: kernel(a, b, d, stream=stream), args.runs, args.warmup)
                best[name] = min(best[name], ms)
        flop = 2.0 * m * n * k
        print(f"{m:>6}{n:>6}{k:>6}  {cublas:>10.3f}{best['per-shape']:>13.3f}{best['runtime']:>11.3f}"
              f"{best['runtime'] / best['per-shape']:>18.3f}{flop / best['runtime'] / 1e9:>11.1f}{compile_s:>10.2f}")


if __name__ == "__main__":
    main()

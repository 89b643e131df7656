"""The ping-pong GEMM (examples/hopper/hgemm_pingpong.tile) against the
cooperative one (hgemm_v7) and cuBLAS, at fixed configurations, side by
side in one run.  A benchmark, not a test.

    python3 bench/pingpong.py [--dtype f16] [--runs 50] [--repeats 2] [--groups 8 16]
                              [--tiles 128x192 128x128x2 ...] [--shapes 4096x4096x4096 ...]

For each shape every kernel (hgemm_v7 at the configurations the tuned
sweep picked for it, bench/RESULTS.md, unpaired and in 2-CTA clusters,
and hgemm_pingpong at the --tiles that fit it, each with the deepest ring
that fits and each of --groups) is compiled for this device's SM count, its
NaN-poisoned output checked against an f32 reference (relative Frobenius
error below 1e-2), then all of them and cuBLAS are timed launch by launch
in turn (`tma_copy.medians_ms`: CUDA events, warm-up, each launch behind a
GPU sleep) on three rotating random input sets.  Each repeat's median in
microseconds and the ratio cuBLAS / kernel are printed, and per shape the
two floors: FLOPs over the dense f16 tensor rate (989 TFLOP/s) and the
operand bytes (A, B read once, D written once) over 3.0 TB/s.
"""
from __future__ import annotations

import argparse

import torch

from gemm import DTYPES, against_cublas, kernel, source
from gemm_sweep import V7_SMEM, v7_stages

PEAK_TFLOPS = 989.0   # H100 SXM dense f16/bf16 tensor rate at boost
COPY_TBS = 3.0        # torch device-to-device copy, measured (bench/RESULTS.md)

# shape -> hgemm_v7's tuned configurations there (the f16 sweep of bench/RESULTS.md, 2026-11-27 night)
V7 = {
    (512, 4096, 4096): [(128, 128, 8)],
    (512, 4096, 14336): [(128, 128, 8)],
    (512, 10240, 8192): [(128, 160, 8)],
    (512, 28672, 4096): [(128, 176, 8)],
    (2048, 2048, 2048): [(128, 128, 8)],
    (2048, 4096, 4096): [(128, 256, 8)],
    (2048, 10240, 8192): [(128, 256, 8)],
    (4096, 4096, 4096): [(128, 256, 8)],
    (8192, 8192, 8192): [(128, 224, 8), (128, 256, 8)],
    (8192, 4096, 14336): [(128, 256, 16)],
}
# hgemm_pingpong's tile shapes, as --tiles names them: BLK_MxBLK_N, x2 for 2-CTA clusters
PINGPONG = ["128x192", "128x176", "128x160", "128x128", "128x128x2", "64x256", "64x256x2", "128x96", "64x192"]


def pingpong_stages(bm: int, bn: int) -> int:
    """The deepest ring a bm x bn tile of hgemm_pingpong fits in shared
    memory (its header): hgemm_v7's rule, but each of the two consumers
    stages a whole BLK_M-row tile, BLK_M x 512 bytes of staging tiles."""
    return (V7_SMEM - 1024 - bm * 512) // ((bm + bn) * 128)


def tile_shape(name: str) -> tuple:
    """(BLK_M, BLK_N, CLUSTER_M) of a PINGPONG name."""
    bm, bn, *pair = map(int, name.split("x"))
    return bm, bn, pair[0] if pair else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--groups", type=int, nargs="+", default=[8], help="GROUP values for the ping-pong kernels")
    parser.add_argument("--tiles", nargs="+", choices=PINGPONG, default=PINGPONG[:4], help="the ping-pong tile shapes")
    parser.add_argument("--shapes", nargs="+", help="MxNxK (default: every shape of V7)")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes] if args.shapes else list(V7)
    dtype = DTYPES[args.dtype]
    stream = torch.cuda.current_stream()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name(), f"({sms} SMs), {args.dtype}, median of {args.runs} per repeat, "
          "us (cuBLAS / kernel)")
    for m, n, k in shapes:
        v7 = V7.get((m, n, k), [(128, 256, 8)])
        cases = [("hgemm_v7", dict(BLK_M=bm, BLK_N=bn, STAGES=v7_stages(bm, bn), GROUP=g, CLUSTER_M=pair))
                 for pair in (1, 2) for bm, bn, g in v7[: 2 if pair == 1 else 1]]
        cases += [("hgemm_pingpong", dict(BLK_M=bm, BLK_N=bn, STAGES=pingpong_stages(bm, bn), GROUP=g, CLUSTER_M=pair))
                  for bm, bn, pair in map(tile_shape, args.tiles) if m >= bm * pair and n >= bn for g in args.groups]
        names, kernels = [], []
        for name, c in cases:
            names.append(f"{name[6:]} {c['BLK_M']}x{c['BLK_N']}/{c['STAGES']} g{c['GROUP']}"
                         + (" x2" if c["CLUSTER_M"] == 2 else ""))
            kernels.append(kernel(source(name, args.dtype), dict(M=m, N=n, K=k, SM_COUNT=sms, **c)))
        reps = against_cublas((m, n, k), dtype, names, kernels, args.runs, args.repeats, stream)
        flop_us = 2 * m * n * k / PEAK_TFLOPS / 1e6
        byte_us = 2 * (m * k + n * k + m * n) / COPY_TBS / 1e6
        print(f"{m}x{n}x{k}: floors compute {flop_us:.1f} us, memory {byte_us:.1f} us "
              f"({'compute' if flop_us > byte_us else 'memory'}-bound); cuBLAS "
              + " ".join(f"{r[0] * 1e3:.2f}" for r in reps))
        for i, name in enumerate(names, 1):
            print(f"  {name:<28}" + "  ".join(f"{r[i] * 1e3:8.2f} ({r[0] / r[i]:.3f})" for r in reps), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

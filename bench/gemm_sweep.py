"""GEMM at every shape: tilec's Hopper GEMMs with their configuration chosen
by `tilec.autotune`, against cuBLAS, over a sweep of square sizes and the
projection shapes of 8B- and 70B-parameter LLMs, in one run on an H100.
A benchmark, not a test.

    python3 bench/gemm_sweep.py [--sets square llm] [--dtypes f16 bf16] [--ms 16 64 128 512 2048 8192]
                                [--squares 512 1024] [--layers 8B:o 70B:qkv] [--kernels hgemm_v7 ...]

D = A @ B^T with A row-major M x K (activations) and B row-major N x K (a
torch Linear's weight); cuBLAS is `torch.matmul(A, B.T)` on the same
tensors.  For each shape tilec tunes each kernel that can run it (KERNELS)
on three rotating random input sets, and keeps the fastest:

- hgemm_v7 (M >= 128) over the tile shapes (BLK_M x BLK_N) that a wave
  count ranks best for the shape (`v7_space`), each with its stage counts
  and L2 group sizes;
- gemm_split_k, v7 with K split among SPLIT_K CTAs per tile, where the
  tiles of 128 x 256 are at most two per SM, over BLK_N x SPLIT_K;
- gemm_small_m (M <= 256) over STAGES x HINT, and narrower column slabs
  (ROWS) where N / 64 CTAs leave SMs idle (`small_m_space`);
- gemm_small_m_split_k where gemm_small_m has fewer CTAs than SMs, over
  SPLIT_K x STAGES;
- gemm_small_m_stream_k (M <= 256), the decode kernel's (64 columns, K
  tile) steps shared evenly by one CTA per SM, over STAGES;
- gemm_stream_k, v7's tiles with each row of M-tiles shared evenly by a
  lane of CTAs by K steps, where M > 256 and the tiles of 128 x 256 are at
  most three waves, over four tile shapes.

The split-K and stream-K kernels' f32 workspace and counters are made per
configuration (`tune(..., workspace=)`).
The winner writes a NaN-poisoned output that must be within 1e-2 relative
Frobenius error of an f32 reference before both are timed (CUDA-event
medians, cuBLAS and tilec taking turns launch by launch so a drift of the
clocks reaches both alike, each launch queued behind a GPU sleep so host
launch cost is not measured; cuBLAS writes into the same D).  Tuning and timing rotate over
the same three input sets (`--sets-per-shape`), so a weight smaller than
L2 is not read from L2 by either side.  For M <= 128 the table also gives the bandwidth each reached
over the bytes the operands need (A, B read once, D written once), as a
fraction of torch's device-to-device copy measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from tilec import autotune
from tilec.compiler.diagnostics import TilecError
from gemm import DTYPES, MAX_ERROR, output_error, source
from tma_copy import median_ms, medians_ms, taking_turns


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# hgemm_v7's shared memory (examples/hopper/hgemm_v7.tile's header): 1 KiB
# for the barriers, STAGES x (BLK_M + BLK_N) x 128 bytes of ring and BLK_M x
# 256 bytes of staging tiles, within the 227 KiB an sm_90a block may use.
V7_SMEM = 227 * 1024


def v7_stages(bm: int, bn: int) -> int:
    """The deepest ring a bm x bn tile of hgemm_v7 fits in shared memory."""
    return (V7_SMEM - 1024 - bm * 256) // ((bm + bn) * 128)


def v7_rate(bm: int, bn: int) -> float:
    """The fraction of a 128x256 tile's per-SM rate a bm x bn tile is assumed
    to reach when every SM is busy: a prior for ranking, not a measurement.
    It falls as the operand bytes per FLOP, 1/bm + 1/bn, rise (a 64-row tile
    has one consumer warpgroup and reads B once per 64 rows; a narrow tile
    pays its pipeline fill and epilogue over fewer FLOPs), as 1 / (1 + 42 x
    (1/bm + 1/bn)), the curve through the rates the sweep assumed for the
    first tile shapes (128x192 0.97, 128x128 0.9, 64x128 0.75)."""
    def speed(m, n):
        return 1 / (1 + 42 * (1 / m + 1 / n))
    return speed(bm, bn) / speed(128, 256)


def v7_space(m: int, n: int, k: int, sms: int, keep: int = 4, clustered: int = 1) -> list[dict]:
    """hgemm_v7's configurations for an M x N output on `sms` SMs.  A
    persistent CTA runs one tile at a time, so a tile shape's time goes as
    the waves it needs, ceil(tiles / sms), times its area over its rate
    (`v7_rate`): 512 x 10240 is 160 tiles of 128x256 (1.21 waves, so two)
    but 256 of 128x160 (two nearly full waves of smaller tiles).  Every
    BLK_M (64, 128) and BLK_N (a multiple of 16 from 64 to 256) that fits
    the output is ranked; the `keep` best (and the default 128x256) are
    timed, each with the deepest ring that fits (`v7_stages`), but no deeper
    than the K steps a CTA runs in all (at 512^3 the 64 tiles of 64x64 are one
    per CTA, 8 K steps: a 13-stage ring ran 7.1 us against 6.1 for 8 stages on
    the H100, bench/RESULTS.md), and GROUP 8
    and 16 (timed once where they give the same schedule: no more M tiles
    than the group); the `clustered` best of 128 rows also as 2-CTA
    clusters (CLUSTER_M=2: M-adjacent tiles share their B tile by TMA
    multicast), where M has two such tiles.  One, not more: on an H100 the
    pairs ran within 3% of the same tiles unpaired, either way
    (bench/RESULTS.md), so they are worth a timing, not several."""
    def cost(tile):
        bm, bn = tile
        return cdiv(cdiv(m, bm) * cdiv(n, bn), sms) * bm * bn / v7_rate(bm, bn)
    fits = [(bm, bn) for bm in (128, 64) for bn in range(256, 63, -16) if m >= bm and n >= bn]
    tiles = sorted(fits, key=cost)[:keep]
    if (128, 256) in fits and (128, 256) not in tiles:
        tiles.append((128, 256))
    def stages(tile):
        bm, bn = tile
        steps = cdiv(cdiv(m, bm) * cdiv(n, bn), sms) * cdiv(k, 64)
        return max(2, min(v7_stages(bm, bn), steps))
    space = []
    for bm, bn in tiles:
        for group in (8, 16):
            config = {"BLK_M": bm, "BLK_N": bn, "STAGES": stages((bm, bn)), "GROUP": min(group, max(8, cdiv(m, bm)))}
            if config not in space:
                space.append(config)
    for bm, bn in [t for t in tiles if t[0] == 128 and cdiv(m, 128) >= 2][:clustered]:
        space.append({"BLK_M": bm, "BLK_N": bn, "STAGES": stages((bm, bn)), "GROUP": 8, "CLUSTER_M": 2})
    return space


def small_m_space(m: int, n: int, k: int, sms: int) -> list[dict]:
    """gemm_small_m's configurations: STAGES, with B's loads evict_first
    or not (HINT), for 64 columns of D per CTA and, where N / 64 CTAs leave
    SMs idle, for each narrower slab (ROWS 32, 16) that gives at most one
    CTA per SM (N = 4096: 128 CTAs of 32 columns)."""
    rows = [64] + [r for r in (32, 16) if n // 64 < sms and n % r == 0 and n // r <= sms]
    return [{"ROWS": r, "STAGES": s, "HINT": h} for r in rows for s in (4, 8, 12, 16) for h in (0, 1)]


def split_k_workspace(m: int, n: int, sms: int):
    """gemm_split_k's W (f32 partials, whole tiles) and C (a zeroed counter
    per tile and consumer warpgroup) for a configuration."""
    def make(config):
        blk_n = config["BLK_N"]
        tiles_m, tiles_n = cdiv(m, 128), cdiv(n, blk_n)
        return (torch.empty(config["SPLIT_K"], tiles_m * 128, tiles_n * blk_n, device="cuda"),
                torch.zeros(tiles_m * tiles_n * 2, dtype=torch.int32, device="cuda"))
    return make


def small_m_split_k_workspace(m: int, n: int, sms: int):
    """gemm_small_m_split_k's W (f32 partials of D^T) and C (a zeroed
    counter per 64 columns of D) for a configuration."""
    def make(config):
        return (torch.empty(config["SPLIT_K"], n, m, device="cuda"),
                torch.zeros(n // 64, dtype=torch.int32, device="cuda"))
    return make


def small_m_stream_k_workspace(m: int, n: int, sms: int):
    """gemm_small_m_stream_k's W (each CTA's two partial segments, f32) and
    C (a zeroed counter per 64 columns of D)."""
    def make(config):
        return (torch.empty(sms, 2, 64, m, device="cuda"),
                torch.zeros(n // 64, dtype=torch.int32, device="cuda"))
    return make


def stream_k_workspace(m: int, n: int, sms: int):
    """gemm_stream_k's W (each CTA's two partial tiles, f32) and C (a
    zeroed counter per tile and consumer warpgroup) for a configuration."""
    def make(config):
        bm, bn = config["BLK_M"], config["BLK_N"]
        return (torch.empty(sms, 2, bm, bn, device="cuda"),
                torch.zeros(cdiv(m, bm) * cdiv(n, bn) * bm // 64, dtype=torch.int32, device="cuda"))
    return make


# kernel: (can it run (M, N, K) on `sms` SMs, the space to tune (or a
# callable (M, N, sms) -> space), the default (or None), the workspace maker
# taking (M, N, sms) or None)
KERNELS = {
    "hgemm_v7": (lambda m, n, k, sms: m >= 128 and n >= 128 and k >= 64,
                 v7_space, None, None),
    "gemm_split_k": (lambda m, n, k, sms: m >= 128 and n >= 128 and k >= 256
                     and cdiv(m, 128) * cdiv(n, 256) <= 2 * sms,
                     {"BLK_N": [128, 256], "SPLIT_K": [2, 3, 4]}, None, split_k_workspace),
    "gemm_small_m": (lambda m, n, k, sms: m <= 256 and m % 8 == 0 and n % 64 == 0 and k >= 64,
                     small_m_space, None, None),
    "gemm_small_m_split_k": (lambda m, n, k, sms: m <= 256 and m % 8 == 0 and n % 64 == 0 and k >= 128
                             and n // 64 < sms,
                             {"SPLIT_K": [2, 3, 4], "STAGES": [4, 8, 16]}, None, small_m_split_k_workspace),
    "gemm_small_m_stream_k": (lambda m, n, k, sms: m <= 256 and m % 8 == 0 and n % 64 == 0 and k >= 64,
                              {"STAGES": [4, 8, 16]}, None, small_m_stream_k_workspace),
    "gemm_stream_k": (lambda m, n, k, sms: m > 256 and n >= 256 and k >= 64
                      and cdiv(m, 128) * cdiv(n, 256) <= 3 * sms,
                      [{"BLK_M": 128, "BLK_N": 256, "STAGES": 4}, {"BLK_M": 128, "BLK_N": 192, "STAGES": 4},
                       {"BLK_M": 128, "BLK_N": 128, "STAGES": 6}, {"BLK_M": 64, "BLK_N": 256, "STAGES": 5}],
                      None, stream_k_workspace),
}
SQUARE = [512, 1024, 2048, 4096, 8192, 16384]
# (model, layer, N, K): fused QKV, attention output, fused gate+up, down
LLM = [
    ("8B", "qkv", 6144, 4096), ("8B", "o", 4096, 4096),
    ("8B", "gate_up", 28672, 4096), ("8B", "down", 4096, 14336),
    ("70B", "qkv", 10240, 8192), ("70B", "o", 8192, 8192),
    ("70B", "gate_up", 57344, 8192), ("70B", "down", 8192, 28672),
]


def shapes(sets, ms, squares=SQUARE, layers=None):
    """(label, M, N, K) of the sweep; `layers` (e.g. ["8B o"]) keeps only those."""
    if "square" in sets:
        for s in squares:
            yield f"square {s}", s, s, s
    if "llm" in sets:
        for model, layer, n, k in LLM:
            if layers and f"{model} {layer}" not in layers:
                continue
            for m in ms:
                yield f"{model} {layer}", m, n, k


def copy_gbps() -> float:
    """torch's device-to-device copy of 1 GiB, bytes read plus written."""
    src = torch.randn(1 << 29, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 20, 3)
    return 2 * src.numel() * 2 / ms / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=("square", "llm"), default=["square", "llm"])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["f16", "bf16"])
    parser.add_argument("--ms", type=int, nargs="+", default=[16, 64, 128, 512, 2048, 8192])
    parser.add_argument("--squares", type=int, nargs="+", default=SQUARE)
    parser.add_argument("--layers", nargs="+", metavar="MODEL:LAYER",
                        choices=[f"{m}:{l}" for m, l, _, _ in LLM], help="only these LLM layers (e.g. 8B:o)")
    parser.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=list(KERNELS),
                        help="only these kernels are tuned")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tune-runs", type=int, default=10)
    parser.add_argument("--sets-per-shape", type=int, default=3, help="input sets tuning and timing rotate over")
    parser.add_argument("--log", help="write every shape's tuning times here (JSON)")
    parser.add_argument("--verbose", action="store_true", help="print each kernel's best time under each row")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream()
    copy = copy_gbps()
    print(f"{torch.cuda.get_device_name(0)} ({props.multi_processor_count} SMs); D = A @ B^T; "
          f"median of {args.runs}; torch copy {copy:.0f} GB/s")
    print(f"{'dtype':<5} {'shape':<12}{'M':>6}{'N':>7}{'K':>7} {'cuBLAS TF/s':>11} {'tilec TF/s':>10} "
          f"{'ratio':>6} {'rel err':>8} {'tune s':>6}  {'BW cuBLAS/tilec':>15}  kernel, config")
    ratios, log, decode = [], [], []
    for dtype in args.dtypes:
        layers = args.layers and [name.replace(":", " ") for name in args.layers]
        for label, M, N, K in shapes(args.sets, args.ms, args.squares, layers):
            tdt = DTYPES[dtype]
            flop = 2.0 * M * N * K
            nbytes = 2 * (M * K + N * K + M * N)
            sets = [(torch.randn(M, K, dtype=tdt, device="cuda"), torch.randn(N, K, dtype=tdt, device="cuda"),
                     torch.empty(M, N, dtype=tdt, device="cuda")) for _ in range(args.sets_per_shape)]
            rotating = taking_turns(sets)  # `launch(A, B, D)` on the next input set at each call

            cublas = rotating(lambda A, B, D: torch.matmul(A, B.T, out=D))
            head = f"{dtype:<5} {label:<12}{M:>6}{N:>7}{K:>7}"

            start = time.perf_counter()
            best, notes, tried = None, [], {}
            for name, (fits, space, default, workspace) in KERNELS.items():
                if name not in args.kernels or not fits(M, N, K, props.multi_processor_count):
                    continue
                if callable(space):
                    space = space(M, N, K, props.multi_processor_count)
                defines = {"M": M, "N": N, "K": K}
                if name in ("hgemm_v7", "gemm_split_k", "gemm_small_m_stream_k", "gemm_stream_k"):
                    defines["SM_COUNT"] = props.multi_processor_count
                try:
                    tuned = autotune.tune(source(name, dtype), space, sets, defines=defines,
                                          target="sm_90a", default=default, runs=args.tune_runs,
                                          progress=False,
                                          workspace=workspace and workspace(M, N, props.multi_processor_count))
                except TilecError as e:
                    notes.append(f"{name}: {str(e).splitlines()[0]}")
                    continue
                fastest = tuned.times_ms[autotune.config_text(tuned.config)]
                tried[name] = {"config": tuned.config, "ms": fastest, "tuning_ms": tuned.times_ms,
                               "rejected": tuned.rejected}
                if best is None or fastest < best[2]:
                    best = (name, tuned, fastest)
            tune_s = time.perf_counter() - start
            if best is None:
                print(f"{head} {'-':>11} {'-':>10} {'-':>6} {'-':>8} {'-':>6}  {'-':>15}  no kernel: {'; '.join(notes)}")
                continue
            name, tuned, _ = best
            A, B, D = sets[0]
            err = output_error(lambda: tuned.kernel(A, B, D, *tuned.workspace, stream=stream), D, A.float() @ B.float().T)
            config = f"{name} {autotune.config_text(tuned.config)}"
            if err >= MAX_ERROR:
                print(f"{head} {'':>11} {'WRONG':>10} {'':>6} {err:>8.1e} {tune_s:>6.1f}  {'':>15}  {config}")
                continue
            cublas_ms, ms = medians_ms(
                [cublas, rotating(lambda A, B, D: tuned.kernel(A, B, D, *tuned.workspace, stream=stream))],
                args.runs, 5)
            head += f" {flop / cublas_ms / 1e9:>11.1f}"
            ratios.append(cublas_ms / ms)
            log.append({"dtype": dtype, "M": M, "N": N, "K": K, "cublas_ms": cublas_ms, "ms": ms,
                        "kernel": name, "config": tuned.config, "tuned": tried})
            bw = ""
            if M <= 128:
                bw = f"{nbytes / cublas_ms / 1e6 / copy:.0%}/{nbytes / ms / 1e6 / copy:.0%}"
                decode.append(nbytes / ms / 1e6 / copy)
            print(f"{head} {flop / ms / 1e9:>10.1f} {cublas_ms / ms:>6.3f} {err:>8.1e} {tune_s:>6.1f}  "
                  f"{bw:>15}  {config}")
            if args.verbose:
                print("      each kernel's best while tuning: " + "; ".join(
                    f"{k} {autotune.config_text(t['config'])} {t['ms'] * 1e3:.1f} us" for k, t in tried.items()))
            del A, B, D, sets, tuned
            torch.cuda.empty_cache()
    if args.log:
        Path(args.log).write_text(json.dumps(log, indent=1))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"tilec / cuBLAS over {len(ratios)} shapes: geometric mean {geo:.3f}, min {min(ratios):.3f}, "
              f"max {max(ratios):.3f} (targets: geomean >= 1.05, min >= 0.90)")
    if decode:
        print(f"M <= 128: {sum(f >= 0.9 for f in decode)} of {len(decode)} shapes at >= 90% of the copy "
              f"bandwidth (min {min(decode):.0%})")


if __name__ == "__main__":
    main()

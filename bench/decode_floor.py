"""The floor of a decode GEMM: how fast the GPU reads a weight and nothing
else, timed as bench/gemm_sweep.py times the GEMMs (three rotating input
sets, so L2 does not hold the weight from the last launch; each launch
queued behind a GPU sleep; CUDA-event medians), on an H100.  A benchmark,
not a test.

    python3 bench/decode_floor.py [--weights 8B:o 8B:qkv ...] [--runs 30]

For each weight (an N x K f16 matrix, the shapes of gemm_sweep's LLM
layers) it times a read-only TMA stream of the matrix (bench/decode_floor.tile)
in several configurations (CTAs, box rows, ring depth, an evict_first L2
policy), torch's f32 sum of the matrix, and the stream of a 64 x 64 matrix
(what a launch costs with no bytes to speak of).  Bandwidth is the bytes
read over the time, also as a fraction of torch's device-to-device copy in
the same run (the sweep's yardstick: a decode row meets the issue's target
at 90% of it).  Last, per configuration, a least-squares fit of time =
fixed + bytes / rate over the weights: a fixed cost no bandwidth removes.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gemm_sweep import LLM, copy_gbps
from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import hopper_properties, median_ms, taking_turns

SOURCE = Path(__file__).resolve().parent / "decode_floor.tile"


def configs(sms: int) -> dict:
    """Label: -D values of decode_floor.tile (NUM_CTAS, ROWS, STAGES, HINT)."""
    return {
        f"{sms} CTAs, 64-row boxes x16": {"NUM_CTAS": sms, "ROWS": 64, "STAGES": 16},
        f"{sms} CTAs, x16 evict_first": {"NUM_CTAS": sms, "ROWS": 64, "STAGES": 16, "HINT": 1},
        f"{sms} CTAs, 128-row boxes x8": {"NUM_CTAS": sms, "ROWS": 128, "STAGES": 8},
        f"{sms} CTAs, 64-row boxes x4": {"NUM_CTAS": sms, "ROWS": 64, "STAGES": 4},
        f"{2 * sms} CTAs, 64-row boxes x8": {"NUM_CTAS": 2 * sms, "ROWS": 64, "STAGES": 8},
        "64 CTAs, 64-row boxes x16": {"NUM_CTAS": 64, "ROWS": 64, "STAGES": 16},
        "128 CTAs, 32-row boxes x16": {"NUM_CTAS": 128, "ROWS": 32, "STAGES": 16},
    }


def build(n: int, k: int, defines: dict):
    result = compile_source(SOURCE.read_text(), str(SOURCE), target="sm_90a", defines={"N": n, "K": k, **defines})
    return CompiledModule(result.ptx, result.meta, "sm_90a").kernel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [f"{m}:{l}" for m, l, _, _ in LLM]
    parser.add_argument("--weights", nargs="+", choices=names, default=["8B:o", "8B:qkv", "8B:down", "70B:o", "70B:down"])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sets", type=int, default=3, help="input sets the timings rotate over")
    args = parser.parse_args()
    props = hopper_properties()
    sms = props.multi_processor_count
    stream = torch.cuda.current_stream()
    copy = copy_gbps()
    print(f"{torch.cuda.get_device_name(0)} ({sms} SMs, L2 {props.L2_cache_size >> 20} MiB); median of {args.runs}, "
          f"{args.sets} rotating sets; torch copy {copy:.0f} GB/s")
    empty = build(64, 64, {"NUM_CTAS": sms, "ROWS": 64, "STAGES": 16})
    tiny = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    print(f"stream of a 64 x 64 matrix on {sms} CTAs (a launch): "
          f"{median_ms(lambda: empty(tiny, stream=stream), args.runs, 5) * 1e3:.2f} us")
    print(f"{'weight':<9}{'N':>6}{'K':>7}{'MB':>6}  {'reader':<32}{'us':>7}{'GB/s':>6}{'of copy':>8}")
    fits = {}
    for name in args.weights:
        model, layer = name.split(":")
        (n, k), = [(n, k) for m, l, n, k in LLM if (m, l) == (model, layer)]
        nbytes = 2 * n * k
        sets = [torch.randn(n, k, dtype=torch.float16, device="cuda") for _ in range(args.sets)]
        rotating = taking_turns([(B,) for B in sets])

        readers = {"torch B.sum(dtype=f32)": lambda B: B.sum(dtype=torch.float32)}
        for label, defines in configs(sms).items():
            kernel = build(n, k, defines)
            readers[f"tilec {label}"] = lambda B, kernel=kernel: kernel(B, stream=stream)
        for label, launch in readers.items():
            ms = median_ms(rotating(launch), args.runs, 5)
            fits.setdefault(label, []).append((nbytes, ms * 1e3))
            gbs = nbytes / ms / 1e6
            print(f"{model + ' ' + layer:<9}{n:>6}{k:>7}{nbytes / 1e6:>6.0f}  {label:<32}{ms * 1e3:>7.2f}"
                  f"{gbs:>6.0f}{gbs / copy:>8.0%}")
        del sets
        torch.cuda.empty_cache()
    if len(args.weights) > 1:
        print("time = fixed + bytes / rate, least squares over the weights above:")
        for label, points in fits.items():
            xs, ys = [b / 1e6 for b, _ in points], [t for _, t in points]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            print(f"  {label:<38} fixed {my - slope * mx:5.2f} us, rate {1e3 / slope:5.0f} GB/s")


if __name__ == "__main__":
    main()

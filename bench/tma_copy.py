"""Bandwidth of the TMA streaming copy (examples/tma_stream_copy.tile)
against torch's device-to-device copy (`dst.copy_(src)`), in one run on the
GPU.  A benchmark, not a test: it checks the copy once, then prints a table.

    python3 bench/tma_copy.py [--sizes-mib 256 1024] [--runs 50] [--stages 4] [--ahead 2]

(tilec installed; else PYTHONPATH=. from the repo root.)  Each size is an
f16 matrix of N = 4096 columns.  Bandwidth counts the bytes read and the
bytes written.  Every timed launch is preceded by a GPU sleep, so the
launch is queued before its start event fires and host-side launch cost
(argument checks, tensor-map encoding) stays out of the measurement, for
both copies alike; the figure is the median over the runs after warm-up.
The target is at least 90% of torch's bandwidth.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path

import torch

from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "tma_stream_copy.tile"
TARGETS = {(9, 0): "sm_90a", (10, 0): "sm_100a"}
COLS = 4096
TARGET_RATIO = 0.90
SLEEP_CYCLES = 2_000_000  # about a millisecond: longer than a launch takes on the host


def parse_with_timing(parser: argparse.ArgumentParser):
    """The command line, with --runs (at least 50: a median of fewer is
    noise) and --warmup added."""
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 50:
        parser.error("--runs must be at least 50")
    return args


def hopper_properties():
    """The device's properties; exits unless it is an H100-class (9.0) GPU,
    which the sm_90a kernels need."""
    props = torch.cuda.get_device_properties(0)
    if (props.major, props.minor) != (9, 0):
        raise SystemExit(f"the sm_90a kernels need an H100-class GPU (9.0); this one is {props.major}.{props.minor}")
    return props


def build(rows: int, args) -> object:
    """The kernel for a rows x COLS f16 copy on this device."""
    props = torch.cuda.get_device_properties(0)
    target = TARGETS.get((props.major, props.minor))
    if target is None:
        raise SystemExit(f"TMA needs an sm_90a or sm_100a device; this one is {props.major}.{props.minor}")
    defines = {"M": rows, "N": COLS, "NUM_CTAS": props.multi_processor_count,
               "STAGES": args.stages, "AHEAD": args.ahead, "BM": args.bm, "BN": args.bn}
    result = compile_source(SOURCE.read_text(), str(SOURCE), target=target, defines=defines)
    return CompiledModule(result.ptx, result.meta, target).kernel()


def medians_ms(launches, runs: int, warmup: int, before=None) -> list:
    """The median time of each launch, the launches taking turns: run i of
    every launch comes before run i + 1 of any, so a drift of the clocks
    (a GPU heating up over a long run of large GEMMs) reaches all alike
    instead of whichever was timed last.  `before()`, if given, is queued
    ahead of each timed launch's sleep (bench/launch_fixed.py flushes L2
    there)."""
    for _ in range(warmup):
        for launch in launches:
            launch()
    events = [[] for _ in launches]
    for _ in range(runs):
        for launch, pairs in zip(launches, events):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if before is not None:
                before()
            torch.cuda._sleep(SLEEP_CYCLES)
            start.record()
            launch()
            end.record()
            pairs.append((start, end))
    torch.cuda.synchronize()
    return [statistics.median(s.elapsed_time(e) for s, e in pairs) for pairs in events]


def median_ms(launch, runs: int, warmup: int) -> float:
    return medians_ms([launch], runs, warmup)[0]


def taking_turns(sets):
    """`rotate(launch)`: a call of `launch(*s)` on the next input set `s` of
    `sets` at each call.  The launches wrapped by one `rotate` share its
    count, so launches timed in turn (`medians_ms`) walk the sets together
    and no launch finds its inputs left in L2 by the launch before it."""
    turn = itertools.count()

    def rotate(launch):
        return lambda: launch(*sets[next(turn) % len(sets)])

    return rotate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--ahead", type=int, default=2)
    parser.add_argument("--bm", type=int, default=128)
    parser.add_argument("--bn", type=int, default=128)
    args = parser.parse_args()
    if args.runs < 50:
        parser.error("--runs must be at least 50")
    stream = torch.cuda.current_stream()
    print(f"{torch.cuda.get_device_name(0)}; f16 [rows, {COLS}]; stages {args.stages}, ahead {args.ahead}, "
          f"tile {args.bm}x{args.bn}; median of {args.runs} runs; GB/s = (read + written) / time")
    print(f"{'size':>9} {'tilec TMA GB/s':>15} {'torch GB/s':>11} {'ratio':>7}")
    ratios = []
    for mib in args.sizes_mib:
        nbytes = mib << 20
        rows = nbytes // (COLS * 2)
        if rows % args.bm or COLS % args.bn:
            raise SystemExit(f"{mib} MiB is not a whole number of {args.bm}x{args.bn} tiles of {COLS} columns")
        kernel = build(rows, args)
        src = torch.randn(rows, COLS, dtype=torch.float16, device="cuda")
        dst = torch.full_like(src, float("nan"))
        kernel(src, dst, stream=stream)
        torch.cuda.synchronize()
        if not torch.equal(dst.view(torch.int16), src.view(torch.int16)):
            raise SystemExit(f"{mib} MiB: the TMA copy is wrong")
        ours = median_ms(lambda: kernel(src, dst, stream=stream), args.runs, args.warmup)
        theirs = median_ms(lambda: dst.copy_(src), args.runs, args.warmup)
        ours_gbs, theirs_gbs = 2 * nbytes / ours / 1e6, 2 * nbytes / theirs / 1e6
        ratios.append(ours_gbs / theirs_gbs)
        print(f"{mib:>5} MiB {ours_gbs:>15.0f} {theirs_gbs:>11.0f} {ratios[-1]:>7.3f}")
        del src, dst
        torch.cuda.empty_cache()
    verdict = "met" if min(ratios) >= TARGET_RATIO else "NOT met"
    print(f"target: at least {TARGET_RATIO:.0%} of torch's bandwidth at every size: {verdict}")


if __name__ == "__main__":
    main()

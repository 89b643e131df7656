"""Decode GEMMs timed as a decode step runs them: many launches back to
back, with and without programmatic dependent launch (PDL), against cuBLAS,
in one run on an H100.  A benchmark, not a test.

    python3 bench/decode_step.py [--ms 16 64 128] [--layers 8B:o 70B:qkv ...] [--chain 20]
                                 [--runs 15] [--space quick|full] [--kernels gemm_small_m hgemm_v7]
                                 [--tune launch|chain] [--no-graph]

The shapes are gemm_sweep.py's LLM projections (its `LLM` table) at the
decode rows M <= 128, D = A @ B^T in f16.  Per shape, `tilec.autotune`
tunes each kernel that can run it, on the kernel without PDL and one
launch at a time as the sweep does, and the fastest kernel's configuration
is then compiled with `-D PDL=1` (B's first loads before the grid
dependency wait):

- gemm_small_m (examples/hopper/gemm_small_m.tile) over gemm_sweep's
  `small_m_space` (`--space full`; the default `quick` keeps its HINT = 1,
  STAGES 8 and 16 entries, the ones the sweep picked on every decode row
  but one);
- hgemm_v7 (examples/hopper/hgemm_v7.tile, M >= 128) over gemm_sweep's
  `v7_space`, which the sweep picks on some M = 128 rows.

`--kernels gemm_small_m` restricts the choice to gemm_small_m, as this
script chose before hgemm_v7 took PDL = 1.  gemm_small_m_split_k and
_stream_k, which the sweep tunes too, have no PDL variant and are left
out.  `--tune chain` chooses instead by what the table measures: each
configuration's PDL = 1 kernel timed in chains of `--chain` programmatic
launches over four input sets (`tilec.autotune.tune(..., chain=)`), since
a kernel's cost in a chain is not its cost alone (its prologue overlaps
the kernel before).

What is timed, per shape, is a chain of `--chain` GEMMs launched back to
back on one stream between one pair of CUDA events (queued behind a GPU
sleep, so the host's launch cost is not in it), each GEMM on the next of
four input sets (A, B, D), so that the chain streams four distinct weights
as a decode step streams its layers' (four weights exceed the H100's 50 MB
L2 at every shape here); the time per GEMM is the chain's over its length,
the median of `--runs` chains, the variants taking turns chain by chain:

- cuBLAS: `torch.matmul(A, B.T, out=D)`;
- tilec: gemm_small_m as the sweep runs it (no PDL);
- PDL: the PDL = 1 kernel, launched programmatically (the runtime's
  default for a kernel that waits on its grid dependency): each GEMM may
  start while the one before finishes, loading its weights, and waits
  before touching A and D; it releases the next GEMM once it has issued
  its last load (TRIGGER = 1, the kernel's default);
- PDL early: the same with TRIGGER = 0, releasing the next GEMM right
  after its wait (gemm_small_m only: hgemm_v7 releases it after its last
  load, "-" in its rows);
- PDL=1 plain: the PDL kernel launched with pdl=False, which separates
  what the launch attribute gives from what the kernel's changed prologue
  costs.

Unless `--no-graph`, each chain is also captured in a CUDA graph (torch's
`torch.cuda.graph`; a programmatic launch is captured as a programmatic
edge) and the graph's replay is timed the same way.

This differs from gemm_sweep.py, which times one launch between an event
pair, behind a GPU sleep: that includes the boundary of a kernel starting
on an idle GPU and a lone event pair around it (~4 us, bench/RESULTS.md
"where a launch's fixed cost goes"), which back-to-back kernels (and
PDL's overlap) share out.  Before any timing every variant runs its chain
once into NaN-poisoned outputs, and every output must be within 1e-2
relative Frobenius error of an f32 reference.  Bandwidth is the bytes the
operands need (A, B read once, D written once) over the time per GEMM, as
a fraction of torch's device-to-device copy measured in the same run;
"ratio" is cuBLAS's time over tilec PDL's (above 1: tilec is faster).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from tilec import autotune
from tilec.api import read_source
from gemm import MAX_ERROR, relative_error, source
from gemm_sweep import KERNELS as SWEEP_KERNELS, LLM, copy_gbps, shapes, small_m_space
from tma_copy import hopper_properties, medians_ms

SETS = 4  # input sets a chain rotates over: four distinct weights, more than L2 holds


def quick_space(m: int, n: int, k: int, sms: int) -> list[dict]:
    return [c for c in small_m_space(m, n, k, sms) if c["HINT"] == 1 and c["STAGES"] in (8, 16)]


# The kernels with a PDL = 1 variant: the defines of each of its columns
# of the table ("tilec" is the kernel without PDL)
COLUMNS = {
    "gemm_small_m": {"tilec": {}, "PDL": {"PDL": 1, "TRIGGER": 1}, "PDL early": {"PDL": 1, "TRIGGER": 0}},
    "hgemm_v7": {"tilec": {}, "PDL": {"PDL": 1}},
}


def pick(M: int, N: int, K: int, sms: int, kernels, space: str, runs: int, chain: int):
    """The kernel and configuration `tilec.autotune` finds fastest for an
    M x N x K GEMM among `kernels` (those of them that can run it,
    gemm_sweep's KERNELS): (name, its defines with the configuration).
    With `chain` 1, timed one launch at a time without PDL on three input
    sets, as the sweep tunes; otherwise the PDL kernel (its "PDL" column)
    timed in chains of `chain` programmatic launches on SETS input sets, as
    the table below times it."""
    sets = [(torch.randn(M, K, dtype=torch.float16, device="cuda"),
             torch.randn(N, K, dtype=torch.float16, device="cuda"),
             torch.empty(M, N, dtype=torch.float16, device="cuda")) for _ in range(3 if chain == 1 else SETS)]
    torch.cuda.synchronize()  # the weights are written before a programmatic launch's pre-wait loads
    best = None
    for name in kernels:
        fits, configs, _, _ = SWEEP_KERNELS[name]
        if not fits(M, N, K, sms):
            continue
        if name == "gemm_small_m" and space == "quick":
            configs = quick_space
        defines = {"M": M, "N": N, "K": K, **({"SM_COUNT": sms} if name == "hgemm_v7" else {})}
        timed = {**defines, **(COLUMNS[name]["PDL"] if chain > 1 else {})}
        tuned = autotune.tune(source(name, "f16"), configs(M, N, K, sms), sets, defines=timed,
                              target="sm_90a", runs=runs, chain=chain, progress=False)
        ms = tuned.times_ms[autotune.config_text(tuned.config)]
        if best is None or ms < best[0]:
            best = (ms, name, {**defines, **tuned.config})
    if best is None:
        raise SystemExit(f"none of {', '.join(kernels)} runs M={M} N={N} K={K}")
    return best[1:]


def chain(launch, sets, length: int):
    """A callable that launches `launch(A, B, D)` `length` times back to
    back, on the input sets in turn."""
    order = [sets[i % len(sets)] for i in range(length)]

    def run():
        for operands in order:
            launch(*operands)

    return run


def graphed(run):
    """`run` captured in a CUDA graph: the graph's replay."""
    run()  # warm: no first launch (a slow path, cuBLAS's workspace) inside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    torch.cuda.synchronize()
    return graph.replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ms", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--layers", nargs="+", metavar="MODEL:LAYER",
                        choices=[f"{m}:{l}" for m, l, _, _ in LLM], help="only these LLM layers (e.g. 8B:o)")
    parser.add_argument("--chain", type=int, default=20, help="GEMMs launched back to back per timing")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tune-runs", type=int, default=8)
    parser.add_argument("--space", choices=("quick", "full"), default="quick")
    parser.add_argument("--kernels", nargs="+", choices=list(COLUMNS), default=list(COLUMNS),
                        help="only these kernels are tuned")
    parser.add_argument("--tune", choices=("launch", "chain"), default="launch",
                        help="choose kernel and configuration per launch without PDL (as the sweep) "
                             "or by their PDL kernels' time in chains of --chain launches")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA graph replays")
    args = parser.parse_args()
    if any(m > 128 for m in args.ms):
        parser.error("--ms: the decode rows are M <= 128")
    props = hopper_properties()
    sms = props.multi_processor_count
    torch.backends.cuda.matmul.allow_tf32 = False
    copy = copy_gbps()
    layers = args.layers and [name.replace(":", " ") for name in args.layers]
    rows = list(shapes(["llm"], args.ms, layers=layers))
    print(f"{torch.cuda.get_device_name(0)} ({sms} SMs); D = A @ B^T, f16; chains of {args.chain} GEMMs over "
          f"{SETS} input sets, median of {args.runs}; torch copy {copy:.0f} GB/s; tuned per {args.tune}")

    # each shape's kernel and configuration (`pick`), then every column's
    # kernel compiled in one parallel batch per source
    chain_length = 1 if args.tune == "launch" else args.chain
    picks = [pick(M, N, K, sms, args.kernels, args.space, args.tune_runs, chain_length) for _, M, N, K in rows]
    column_defines = [{column: {**defines, **extra} for column, extra in COLUMNS[name].items()}
                      for name, defines in picks]
    modules = {}
    for name in {name for name, _ in picks}:
        text, filename = read_source(source(name, "f16"))
        batch = [d for (kernel, _), columns in zip(picks, column_defines) if kernel == name
                 for d in columns.values()]
        built, rejected = autotune.compile_configs(text, filename, {}, batch, "sm_90a")
        if rejected:
            raise SystemExit(f"kernels that did not compile: {rejected}")
        modules.update({(name, config): module for config, module in built.items()})

    modes = ["stream"] + ([] if args.no_graph else ["graph"])
    print("us per GEMM; stream: launched on a stream, graph: replayed from a CUDA graph; ratio: cuBLAS / PDL")
    print(f"{'mode':<7}{'shape':<12}{'M':>5}{'N':>7}{'K':>7}  {'cuBLAS':>7} {'tilec':>7} {'PDL':>7} "
          f"{'PDL early':>9} {'PDL=1 plain':>11}  {'PDL TF/s':>8} {'ratio':>6}  "
          f"{'of copy: cuBLAS / tilec / PDL':>29}  config")
    fractions = {mode: [] for mode in modes}
    for (label, M, N, K), (kernel_name, tuned), columns in zip(rows, picks, column_defines):
        kernels = {column: modules[kernel_name, autotune.config_text(d)].kernel() for column, d in columns.items()}
        config = {key: value for key, value in tuned.items() if key not in ("M", "N", "K", "SM_COUNT")}
        nbytes = 2 * (M * K + N * K + M * N)
        flop = 2.0 * M * N * K
        sets = [(torch.randn(M, K, dtype=torch.float16, device="cuda"),
                 torch.randn(N, K, dtype=torch.float16, device="cuda")) for _ in range(SETS)]
        variants = {
            "cuBLAS": lambda A, B, D: torch.matmul(A, B.T, out=D),
            "tilec": lambda A, B, D: kernels["tilec"](A, B, D),
            "PDL": lambda A, B, D: kernels["PDL"](A, B, D),
        }
        if "PDL early" in kernels:
            variants["PDL early"] = lambda A, B, D: kernels["PDL early"](A, B, D)
        variants["PDL=1 plain"] = lambda A, B, D: kernels["PDL"](A, B, D, pdl=False)
        outputs = {name: [torch.empty(M, N, dtype=torch.float16, device="cuda") for _ in sets] for name in variants}
        chains = {name: chain(launch, [(A, B, D) for (A, B), D in zip(sets, outputs[name])], args.chain)
                  for name, launch in variants.items()}
        torch.cuda.synchronize()  # the weights are written before a programmatic launch's pre-wait loads
        for name, run in chains.items():
            for D in outputs[name]:
                D.fill_(float("nan"))
            run()
        torch.cuda.synchronize()
        for i, (A, B) in enumerate(sets):
            ref = A.float() @ B.float().T
            for name in variants:
                err = relative_error(outputs[name][i], ref)
                if err >= MAX_ERROR:
                    raise SystemExit(f"{label} M={M}: {name} is wrong on input set {i} (relative error {err:.1e})")
        for mode in modes:
            runs = list(chains.values()) if mode == "stream" else [graphed(run) for run in chains.values()]
            t = dict(zip(variants, (ms * 1e3 / args.chain for ms in medians_ms(runs, args.runs, 2))))
            bw = [nbytes / t[name] / 1e3 / copy for name in ("cuBLAS", "tilec", "PDL")]
            fractions[mode].append(bw[2])
            early = f"{t['PDL early']:.2f}" if "PDL early" in t else "-"
            print(f"{mode:<7}{label:<12}{M:>5}{N:>7}{K:>7}  {t['cuBLAS']:>7.2f} {t['tilec']:>7.2f} {t['PDL']:>7.2f} "
                  f"{early:>9} {t['PDL=1 plain']:>11.2f}  {flop / t['PDL'] / 1e6:>8.1f} "
                  f"{t['cuBLAS'] / t['PDL']:>6.3f}  "
                  f"{' / '.join(f'{f:.0%}' for f in bw):>29}  {kernel_name} {autotune.config_text(config)}")
        del sets, outputs, chains
        torch.cuda.empty_cache()
    for mode in modes:
        f = fractions[mode]
        print(f"{mode}: {sum(x >= 0.9 for x in f)} of {len(f)} shapes at >= 90% of the copy bandwidth with PDL "
              f"(median {statistics.median(f):.0%}, min {min(f):.0%})")


if __name__ == "__main__":
    main()

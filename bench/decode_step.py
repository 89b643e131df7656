"""Decode GEMMs timed as a decode step runs them: many launches back to
back, with and without programmatic dependent launch (PDL), against cuBLAS,
in one run on an H100.  A benchmark, not a test.

    python3 bench/decode_step.py [--ms 16 64 128] [--layers 8B:o 70B:qkv ...] [--chain 20]
                                 [--runs 15] [--space quick|full] [--no-graph]

The shapes are gemm_sweep.py's LLM projections (its `LLM` table) at the
decode rows M <= 128, D = A @ B^T in f16.  Per shape, gemm_small_m's
configuration is chosen by `tilec.autotune` over gemm_sweep's
`small_m_space` (`--space full`; the default `quick` keeps its HINT = 1,
STAGES 8 and 16 entries, the ones the sweep picked on every decode row but
one), on the kernel without PDL; the same configuration is then compiled
with `-D PDL=1` (examples/hopper/gemm_small_m.tile: B's first loads before
the grid dependency wait).

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
  after its wait;
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
from gemm_sweep import LLM, copy_gbps, shapes, small_m_space
from tma_copy import hopper_properties, medians_ms

SETS = 4  # input sets a chain rotates over: four distinct weights, more than L2 holds


def quick_space(m: int, n: int, k: int, sms: int) -> list[dict]:
    return [c for c in small_m_space(m, n, k, sms) if c["HINT"] == 1 and c["STAGES"] in (8, 16)]


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
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA graph replays")
    args = parser.parse_args()
    if any(m > 128 for m in args.ms):
        parser.error("--ms: the decode rows are M <= 128")
    props = hopper_properties()
    sms = props.multi_processor_count
    torch.backends.cuda.matmul.allow_tf32 = False
    copy = copy_gbps()
    space = quick_space if args.space == "quick" else small_m_space
    layers = args.layers and [name.replace(":", " ") for name in args.layers]
    rows = list(shapes(["llm"], args.ms, layers=layers))
    path = source("gemm_small_m", "f16")
    print(f"{torch.cuda.get_device_name(0)} ({sms} SMs); D = A @ B^T, f16; chains of {args.chain} GEMMs over "
          f"{SETS} input sets, median of {args.runs}; torch copy {copy:.0f} GB/s")

    # each shape's configuration, tuned without PDL as the sweep tunes it
    # (three rotating input sets), then every PDL = 1 kernel compiled in one
    # parallel batch
    configs = []
    for label, M, N, K in rows:
        tune_sets = [(torch.randn(M, K, dtype=torch.float16, device="cuda"),
                      torch.randn(N, K, dtype=torch.float16, device="cuda"),
                      torch.empty(M, N, dtype=torch.float16, device="cuda")) for _ in range(3)]
        tuned = autotune.tune(path, space(M, N, K, sms), tune_sets, defines={"M": M, "N": N, "K": K},
                              target="sm_90a", runs=args.tune_runs, progress=False)
        configs.append((tuned.kernel, tuned.config))
        del tune_sets
    text, filename = read_source(path)
    pdl_defines = [{trigger: {"M": M, "N": N, "K": K, **config, "PDL": 1, "TRIGGER": trigger} for trigger in (1, 0)}
                   for (_, M, N, K), (_, config) in zip(rows, configs)]
    batch = [d for both in pdl_defines for d in both.values()]
    modules, rejected = autotune.compile_configs(text, filename, {}, batch, "sm_90a")
    if rejected:
        raise SystemExit(f"PDL kernels that did not compile: {rejected}")

    modes = ["stream"] + ([] if args.no_graph else ["graph"])
    print("us per GEMM; stream: launched on a stream, graph: replayed from a CUDA graph; ratio: cuBLAS / PDL")
    print(f"{'mode':<7}{'shape':<12}{'M':>5}{'N':>7}{'K':>7}  {'cuBLAS':>7} {'tilec':>7} {'PDL':>7} "
          f"{'PDL early':>9} {'PDL=1 plain':>11}  {'PDL TF/s':>8} {'ratio':>6}  "
          f"{'of copy: cuBLAS / tilec / PDL':>29}  config")
    fractions = {mode: [] for mode in modes}
    for (label, M, N, K), (plain_kernel, config), defines in zip(rows, configs, pdl_defines):
        pdl_kernel, early_kernel = (modules[autotune.config_text(defines[t])].kernel() for t in (1, 0))
        nbytes = 2 * (M * K + N * K + M * N)
        flop = 2.0 * M * N * K
        sets = [(torch.randn(M, K, dtype=torch.float16, device="cuda"),
                 torch.randn(N, K, dtype=torch.float16, device="cuda")) for _ in range(SETS)]
        variants = {
            "cuBLAS": lambda A, B, D: torch.matmul(A, B.T, out=D),
            "tilec": lambda A, B, D: plain_kernel(A, B, D),
            "PDL": lambda A, B, D: pdl_kernel(A, B, D),
            "PDL early": lambda A, B, D: early_kernel(A, B, D),
            "PDL=1 plain": lambda A, B, D: pdl_kernel(A, B, D, pdl=False),
        }
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
            print(f"{mode:<7}{label:<12}{M:>5}{N:>7}{K:>7}  {t['cuBLAS']:>7.2f} {t['tilec']:>7.2f} {t['PDL']:>7.2f} "
                  f"{t['PDL early']:>9.2f} {t['PDL=1 plain']:>11.2f}  {flop / t['PDL'] / 1e6:>8.1f} "
                  f"{t['cuBLAS'] / t['PDL']:>6.3f}  "
                  f"{' / '.join(f'{f:.0%}' for f in bw):>29}  {autotune.config_text(config)}")
        del sets, outputs, chains
        torch.cuda.empty_cache()
    for mode in modes:
        f = fractions[mode]
        print(f"{mode}: {sum(x >= 0.9 for x in f)} of {len(f)} shapes at >= 90% of the copy bandwidth with PDL "
              f"(median {statistics.median(f):.0%}, min {min(f):.0%})")


if __name__ == "__main__":
    main()

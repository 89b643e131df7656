"""What the GEMM epilogue (examples/hopper/gemm_epilogue.tile) costs:
hgemm_v7 without one, and with each of its steps and all of them, in one
run on one device.  A benchmark, not a test.

    python3 bench/epilogue.py [--size 4096 | --shape M N K] [--variants NAME ...]
                              [--runs 50] [--compile-only]

(tilec installed; else PYTHONPATH=. from the repo root.)  D = act(A B^T +
bias) + R at M = N = K = size (or M x N x K: a shape whose M and N are not
multiples of the tile times the epilogue's reads at the ragged edge), f16,
each variant compiled with its -D values and SM_COUNT = the device's SMs.  Before timing, each variant
writes a NaN-poisoned D from fresh random inputs, which must be within
2e-3 relative Frobenius error of torch's f32 computation of the same.
Times are CUDA-event medians over the runs after a warm-up, each launch
queued behind a GPU sleep (bench/tma_copy.py), so launch cost is not
measured.  The last row is torch (cuBLAS matmul, then its own bias, GELU
and residual kernels) for reference.

--compile-only compiles every variant (SM_COUNT 132) and prints the global
loads in its PTX by width, with no GPU (torch is imported only to time):
the epilogue's bias and residual reads, e.g. R's 4-byte loads.
"""
from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from tilec.pipeline import compile_source

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "hgemm_v7.tile"
VARIANTS = {
    "none": {},
    "bias": {"HAS_BIAS": True},
    "gelu": {"ACT": "ACT_GELU"},
    "residual": {"HAS_RESIDUAL": True},
    "bias+gelu+residual": {"HAS_BIAS": True, "ACT": "ACT_GELU", "HAS_RESIDUAL": True},
}
MAX_ERROR = 2e-3


def compile_variant(shape: tuple, sms: int, config: dict):
    m, n, k = shape
    defines = {"M": m, "N": n, "K": k, "SM_COUNT": sms, **config}
    return compile_source(SOURCE.read_text(), str(SOURCE), target="sm_90a", defines=defines)


def global_loads(ptx: str) -> str:
    """The PTX's ld.global instructions, counted by type (`b32: 128`)."""
    kinds = Counter(re.findall(r"\bld\.global(?:\.[a-z]+)*?\.((?:v\d\.)?[bfsu]\d+)\s", ptx))
    return ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) or "none"


def reference(A, B, bias, R, config):
    import torch

    x = A.float() @ B.float().T
    if config.get("HAS_BIAS"):
        x = x + bias.float()
    if config.get("ACT") == "ACT_GELU":
        x = torch.nn.functional.gelu(x, approximate="tanh")
    if config.get("HAS_RESIDUAL"):
        x = x + R.float()
    return x


def inputs(shape):
    import torch

    m, n, k = shape
    A = torch.randn(m, k, device="cuda").half()
    B = (torch.randn(n, k, device="cuda") / k**0.5).half()
    bias = torch.randn(n, device="cuda").half()
    R = torch.randn(m, n, device="cuda").half()
    return A, B, bias, R


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"), help="instead of size^3")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--compile-only", action="store_true", help="compile, print the global loads, no GPU")
    args = parser.parse_args()
    shape = tuple(args.shape or (args.size,) * 3)
    variants = {name: VARIANTS[name] for name in args.variants}
    if args.compile_only:
        for name, config in variants.items():
            print(f"{name:<20}{global_loads(compile_variant(shape, 132, config).ptx)}")
        return
    import torch

    from tilec.runtime.module import CompiledModule
    from tma_copy import median_ms

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m, n, k = shape
    print(f"{torch.cuda.get_device_name(0)}; hgemm_v7 f16 {m}x{n}x{k}, SM_COUNT {sms}; median of {args.runs} runs")
    print(f"{'epilogue':<20}{'ms':>9}{'TFLOP/s':>9}{'vs first':>9}{'error':>10}")
    flop = 2.0 * m * n * k
    base = None
    for name, config in variants.items():
        r = compile_variant(shape, sms, config)
        kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
        A, B, bias, R = inputs(shape)
        D = torch.full((m, n), float("nan"), device="cuda", dtype=torch.half)
        extra = ([bias] if config.get("HAS_BIAS") else []) + ([R] if config.get("HAS_RESIDUAL") else [])
        kernel(A, B, D, *extra)
        ref = reference(A, B, bias, R, config)
        err = float("inf") if torch.isnan(D).any() else ((D.float() - ref).norm() / ref.norm()).item()
        if err > MAX_ERROR:
            raise SystemExit(f"{name}: relative error {err:.1e} > {MAX_ERROR}")
        ms = median_ms(lambda: kernel(A, B, D, *extra), args.runs, args.warmup)
        base = base or ms
        print(f"{name:<20}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{base / ms:>9.3f}{err:>10.1e}")
    A, B, bias, R = inputs(shape)

    def torch_epilogue():
        return torch.nn.functional.gelu(torch.addmm(bias, A, B.T), approximate="tanh") + R

    ms = median_ms(torch_epilogue, args.runs, args.warmup)
    print(f"{'torch b+g+r':<20}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{base / ms:>9.3f}{'':>10}")


if __name__ == "__main__":
    main()

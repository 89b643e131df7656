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

    python3 bench/gemm.py --suites fp8 mn [--sizes 4096 8192]

adds, in the same run, the FP8 kernels against torch._scaled_mm (cuBLASLt
FP8): examples/hopper/fp8_gemm.tile (e4m3 x e4m3 -> bf16, per-tensor
scales; goal >= 1.0x torch._scaled_mm at 4096^3 and 8192^3) and
fp8_gemm_blockscaled.tile (1 x 128 A and 128 x 128 B block scales; its
TFLOP/s, and its ratio to the per-tensor torch._scaled_mm), each checked
against a float64 reference of the dequantized inputs (NaN-poisoned output);
and `mn`: hgemm_v7_mn.tile (D = A @ B with B row-major K x N, read MN-major)
against hgemm_v7 on the same A and B^T (goal: within 3% at 8192^3).
"""
from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import torch

from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import median_ms, medians_ms, taking_turns

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "hopper"
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
MAX_ERROR = 1e-2
GOAL = (7, 8192, "f16", 0.85)  # version, size, dtype, fraction of cuBLAS


_copies: dict[str, tempfile.TemporaryDirectory] = {}


def source(name: str, dtype: str) -> Path:
    """The path of examples/hopper/NAME.tile for `dtype`: the file itself
    for f16; otherwise a copy in a temporary directory that holds every
    hopper example with its element type replaced (the f32 accumulators and
    workspaces stay f32), so that an `include` (hgemm_v7's
    gemm_epilogue.tile) reads its copy beside it, as it must: an included
    file resolves beside the including one, and text has no place."""
    if dtype == "f16":
        return EXAMPLES / f"{name}.tile"
    if dtype not in _copies:
        _copies[dtype] = tempfile.TemporaryDirectory(prefix=f"tilec-{dtype}-")
        for path in EXAMPLES.glob("*.tile"):
            text = re.sub(r"\bf16\b", dtype, path.read_text())
            (Path(_copies[dtype].name) / path.name).write_text(text)
    return Path(_copies[dtype].name) / f"{name}.tile"


def kernel(path: Path, defines: dict):
    """The sm_90a kernel of the .tile file at `path`, compiled with `defines`."""
    result = compile_source(path.read_text(), str(path), target="sm_90a", defines=defines)
    return CompiledModule(result.ptx, result.meta, "sm_90a").kernel()


def build(version: int, dtype: str, size: int, sm_count: int):
    defines = {"M": size, "N": size, "K": size}
    if version in (6, 7):
        defines["SM_COUNT"] = sm_count
    return kernel(source(f"hgemm_v{version}", dtype), defines)


def build_example(name: str, size: int, sm_count: int):
    return kernel(EXAMPLES / f"{name}.tile", {"M": size, "N": size, "K": size, "SM_COUNT": sm_count})


def row(label: str, size: int, name: str, ms: float, base_ms: float, err: float) -> str:
    flop = 2.0 * size**3
    return f"{label:<6}{size:>6}  {name:<14}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{base_ms / ms:>11.3f}{err:>10.1e}"


def fp8_suite(args, sm_count: int, stream) -> dict:
    """FP8 per-tensor and block-scaled kernels against torch._scaled_mm."""
    print(f"{'':<6}{'size':>6}  {'kernel':<14}{'ms':>9}{'TFLOP/s':>9}{'vs scaled_mm':>11}{'rel err':>10}")
    ratios = {}
    f8 = torch.float8_e4m3fn
    for size in args.sizes:
        a, b = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
        sa, sb = a.abs().max() / 448, b.abs().max() / 448
        A, B = (a / sa).to(f8), (b / sb).to(f8)
        ref = (A.double() * sa.double()) @ (B.double() * sb.double()).T
        sa, sb = sa.reshape(1).float(), sb.reshape(1).float()
        del a, b
        theirs = lambda: torch._scaled_mm(A, B.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
        base = median_ms(theirs, args.runs, args.warmup)
        print(row("fp8", size, "scaled_mm", base, base, relative_error(theirs(), ref)))
        A8, B8 = A.view(torch.uint8), B.view(torch.uint8)
        kernel = build_example("fp8_gemm", size, sm_count)
        D = torch.empty((size, size), dtype=torch.bfloat16, device="cuda")
        err = output_error(lambda: kernel(A8, B8, D, sa, sb, stream=stream), D, ref)
        if err < MAX_ERROR:
            ms = median_ms(lambda: kernel(A8, B8, D, sa, sb, stream=stream), args.runs, args.warmup)
            ratios["fp8", size] = base / ms
            print(row("fp8", size, "fp8_gemm", ms, base, err))
        else:
            print(f"fp8   {size:>6}  fp8_gemm      {'WRONG':>9}{'':>20}{err:>10.1e}")
        # block scales: 1 x 128 for A (stored K/128 x M), 128 x 128 for B
        del ref, D
        g = torch.Generator(device="cuda").manual_seed(size)
        SA = torch.rand((size // 128, size), device="cuda", generator=g) + 0.5
        SB = torch.rand((size // 128, size // 128), device="cuda", generator=g) + 0.5
        ref = (A.double() * SA.double().T.repeat_interleave(128, dim=1)) @ (
            B.double() * SB.double().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)).T
        kernel = build_example("fp8_gemm_blockscaled", size, sm_count)
        D = torch.empty((size, size), dtype=torch.bfloat16, device="cuda")
        err = output_error(lambda: kernel(A8, B8, D, SA, SB, stream=stream), D, ref)
        del ref
        if err < MAX_ERROR:
            ms = median_ms(lambda: kernel(A8, B8, D, SA, SB, stream=stream), args.runs, args.warmup)
            print(row("fp8", size, "blockscaled", ms, base, err))
        else:
            print(f"fp8   {size:>6}  blockscaled   {'WRONG':>9}{'':>20}{err:>10.1e}")
        del A, B, A8, B8, D, SA, SB
        torch.cuda.empty_cache()
    for size in args.sizes:
        if ("fp8", size) in ratios:
            got = ratios["fp8", size]
            print(f"goal: fp8_gemm at {size}^3 >= 1.0x torch._scaled_mm: {got:.3f}x, "
                  f"{'met' if got >= 1.0 else 'NOT met'}")
    return ratios


def mn_suite(args, sm_count: int, stream) -> None:
    """hgemm_v7_mn (B row-major K x N, read MN-major) against hgemm_v7."""
    print(f"{'':<6}{'size':>6}  {'kernel':<14}{'ms':>9}{'TFLOP/s':>9}{'vs v7':>11}{'rel err':>10}")
    for size in args.sizes:
        A = torch.randn(size, size, dtype=torch.float16, device="cuda")
        Bkn = torch.randn(size, size, dtype=torch.float16, device="cuda")  # B, K x N
        Bnk = Bkn.T.contiguous()  # the same B, N x K, for v7
        ref = A.float() @ Bkn.float()
        v7, mn = build(7, "f16", size, sm_count), build_example("hgemm_v7_mn", size, sm_count)
        D = torch.empty((size, size), dtype=torch.float16, device="cuda")
        err = output_error(lambda: v7(A, Bnk, D, stream=stream), D, ref)
        base = median_ms(lambda: v7(A, Bnk, D, stream=stream), args.runs, args.warmup)
        print(row("f16", size, "v7 (K-major)", base, base, err))
        err = output_error(lambda: mn(A, Bkn, D, stream=stream), D, ref)
        if err >= MAX_ERROR:
            print(f"f16   {size:>6}  v7_mn         {'WRONG':>9}{'':>20}{err:>10.1e}")
            continue
        ms = median_ms(lambda: mn(A, Bkn, D, stream=stream), args.runs, args.warmup)
        print(row("f16", size, "v7_mn", ms, base, err))
        if size == 8192:
            print(f"goal: v7_mn at 8192^3 within 3% of v7: {base / ms:.3f}x, "
                  f"{'met' if base / ms >= 0.97 else 'NOT met'}")
        del A, Bkn, Bnk, ref, D
        torch.cuda.empty_cache()


def relative_error(d: torch.Tensor, ref: torch.Tensor) -> float:
    d = d.float()
    if torch.isnan(d).any():
        return float("inf")
    return float(torch.linalg.norm(d - ref) / torch.linalg.norm(ref))


def output_error(launch, d: torch.Tensor, ref: torch.Tensor) -> float:
    """The relative error of what `launch()` writes to `d` against `ref`,
    `d` poisoned with NaN first, so that an element the launch never writes
    counts as wrong (infinite error)."""
    d.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    return relative_error(d, ref)


def against_cublas(shape: tuple, dtype, names: list, kernels: list, runs: int, repeats: int, stream) -> list:
    """D = A @ B^T of each kernel checked on NaN-poisoned output against an
    f32 reference (a wrong one ends the run, named), then cuBLAS and the
    kernels timed taking turns on three fresh random input sets, each launch
    behind a GPU sleep: per repeat, the medians in ms, cuBLAS's first."""
    m, n, k = shape
    sets = [(torch.randn(m, k, dtype=dtype, device="cuda"), torch.randn(n, k, dtype=dtype, device="cuda"),
             torch.empty(m, n, dtype=dtype, device="cuda")) for _ in range(3)]
    a, b, d = sets[0]
    ref = a.float() @ b.float().T
    for name, kern in zip(names, kernels):
        err = output_error(lambda: kern(a, b, d, stream=stream), d, ref)
        if not err < MAX_ERROR:
            raise SystemExit(f"{m}x{n}x{k} {name}: relative error {err}")
    del ref
    rotating = taking_turns(sets)
    launches = [rotating(lambda A, B, D: torch.matmul(A, B.T, out=D))]
    launches += [rotating(lambda A, B, D, kern=kern: kern(A, B, D, stream=stream)) for kern in kernels]
    return [medians_ms(launches, runs, 5) for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["f16", "bf16"])
    parser.add_argument("--versions", type=int, nargs="+", choices=(4, 5, 6, 7), default=[4, 5, 6, 7])
    parser.add_argument("--suites", nargs="+", choices=("gemm", "fp8", "mn"), default=["gemm"])
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
    if "fp8" in args.suites:
        fp8_suite(args, props.multi_processor_count, stream)
    if "mn" in args.suites:
        mn_suite(args, props.multi_processor_count, stream)
    if "gemm" not in args.suites:
        return
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

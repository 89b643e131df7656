"""Bandwidth of the row softmax and RMSNorm examples (examples/softmax.tile,
examples/rmsnorm.tile) against torch.softmax, torch's rms_norm, a Triton
row softmax and torch's device-to-device copy, in one run on the GPU.  A
benchmark, not a test: it checks every kernel once, then prints a table.

    python3 bench/norms.py [--shapes 8192x4096 4096x1024] [--threads 256 128 64] [--rpc 1] [--runs 100]

(tilec installed; else PYTHONPATH=. from the repo root; run from bench/.)
Inputs are fresh random f16 [rows, N] (and an f16 weight of N); each
kernel first writes a NaN-poisoned output that must match torch (f32
reference math).  GB/s counts the bytes read and written once: 2 * rows *
N * 2 bytes (+ the weight for RMSNorm), the floor every one of these
kernels has; the copy moves the same bytes and is the yardstick.  Times
are CUDA-event medians, each launch queued behind a GPU sleep (see
bench/tma_copy.py).  `--threads` picks the CTA size of the tilec kernels
(one row per CTA, 8 f16 per thread per chunk; 0: N / 8, one chunk) and
`--rpc` the rows each rmsnorm CTA does in turn (W loaded once); list
several to compare.  The goal: each tilec kernel >= 90% of the copy's
bandwidth at both shapes.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from tilec.pipeline import compile_source
from tilec.runtime.assemble import resource_usage
from tilec.runtime.module import CompiledModule
from tma_copy import median_ms

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GOAL = 0.90
EPS = 1e-6


def build(name: str, rows: int, n: int, threads: int, **more):
    path = EXAMPLES / f"{name}.tile"
    r = compile_source(path.read_text(), str(path), target="sm_90a",
                       defines={"ROWS": rows, "N": n, "THREADS": threads, **more})
    usage = resource_usage(r.ptx, "sm_90a").get(name, {})
    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel(name)
    stream = torch.cuda.current_stream()
    # on torch's stream, so the events time the kernel (without a stream the call waits for it)
    return (lambda *args: kernel(*args, stream=stream)), usage


def triton_softmax():
    """A one-row-per-program Triton softmax (the classic formulation), or
    None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * n + cols, (e / tl.sum(e, axis=0)).to(tl.float16), mask=cols < n)

    def run(x, y):
        rows, n = x.shape
        kernel[(rows,)](x, y, n, BLOCK=triton.next_power_of_2(n), num_warps=max(4, min(16, n // 256)))

    return run


def rms_reference(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + EPS) * w.float()).half()


def check(name, y, want):
    if torch.isnan(y).any():
        raise SystemExit(f"{name}: NaN left in the output")
    torch.testing.assert_close(y, want, atol=2e-2, rtol=1e-2, msg=lambda m: f"{name}: {m}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["8192x4096", "4096x1024"])
    parser.add_argument("--threads", type=int, nargs="+", default=[256, 128, 64])
    parser.add_argument("--rpc", type=int, nargs="+", default=[1], help="rows per CTA of rmsnorm")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    tri = triton_softmax()
    print(f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}; f16 in/out; median of {args.runs} runs; "
          "GB/s = (bytes read + bytes written) / time")
    print(f"{'shape':>10} {'kernel':>22} {'threads':>7} {'regs':>5} {'us':>8} {'GB/s':>7} {'vs copy':>8}")
    verdicts = []
    for shape in args.shapes:
        rows, n = (int(v) for v in shape.split("x"))
        x = torch.randn(rows, n, device="cuda").half() * 3
        w = torch.randn(n, device="cuda").half()
        y = torch.full_like(x, float("nan"))
        nbytes = 2 * x.numel() * x.element_size()

        def report(label, threads, regs, fn, extra=0):
            us = median_ms(fn, args.runs, args.warmup) * 1e3
            gbs = (nbytes + extra) / us / 1e3
            print(f"{shape:>10} {label:>22} {threads:>7} {regs:>5} {us:>8.2f} {gbs:>7.0f} {gbs / copy_gbs:>8.3f}")
            return gbs

        copy_us = median_ms(lambda: y.copy_(x), args.runs, args.warmup) * 1e3
        copy_gbs = nbytes / copy_us / 1e3
        print(f"{shape:>10} {'torch copy':>22} {'':>7} {'':>5} {copy_us:>8.2f} {copy_gbs:>7.0f} {1:>8.3f}")
        soft_want = torch.softmax(x.float(), dim=1).half()
        rms_want = rms_reference(x, w)
        report("torch.softmax", "", "", lambda: torch.softmax(x, dim=1))
        if tri is not None:
            y.fill_(float("nan"))
            tri(x, y)
            check("triton softmax", y, soft_want)
            report("triton softmax", "", "", lambda: tri(x, y))
        report("torch rms_norm", "", "", lambda: torch.nn.functional.rms_norm(x, (n,), w, EPS), 2 * n)
        for threads in args.threads:
            threads = threads or n // 8
            if n % (threads * 8):
                print(f"{shape:>10} {'tilec (skipped)':>22} {threads:>7}  N is not a multiple of 8 * threads")
                continue
            soft, su = build("softmax", rows, n, threads)
            y.fill_(float("nan"))
            soft(x, y)
            torch.cuda.synchronize()
            check("tilec softmax", y, soft_want)
            gbs = report("tilec softmax", threads, su.get("registers", "?"), lambda: soft(x, y))
            verdicts.append((shape, "tilec softmax", threads, gbs / copy_gbs, su))
            for rpc in args.rpc:
                rms, ru = build("rmsnorm", rows, n, threads, RPC=rpc)
                y.fill_(float("nan"))
                rms(x, w, y)
                torch.cuda.synchronize()
                check("tilec rmsnorm", y, rms_want)
                label = f"tilec rmsnorm rpc={rpc}"
                gbs = report(label, threads, ru.get("registers", "?"), lambda: rms(x, w, y), 2 * n)
                verdicts.append((shape, label, threads, gbs / copy_gbs, ru))
    best = {}
    for shape, name, threads, ratio, usage in verdicts:
        kernel = (shape, name.split(" rpc=")[0])
        if kernel not in best or ratio > best[kernel][0]:
            best[kernel] = (ratio, name, threads, usage.get("spill_stores", "?") if usage else "?")
    for (shape, _), (ratio, name, threads, spills) in best.items():
        print(f"{shape} {name} threads={threads} (the best configuration): {ratio:.1%} of copy "
              f"(goal {GOAL:.0%}: {'met' if ratio >= GOAL else 'NOT met'}); spill stores {spills}")


if __name__ == "__main__":
    main()

"""FlashAttention forward: tilec (examples/hopper/flash_attn_fwd.tile)
against every torch scaled_dot_product_attention backend, in one run on an
H100.  A benchmark, not a test: it checks every kernel once, then times it.

    python3 bench/attention.py [--seqs 1024 4096 8192 16384] [--dims 64 128]
                               [--dtypes f16 bf16] [--tokens 16384] [--hidden 2048] [--runs 50]
                               [--variant NAME[:KEY=VALUE,...]]...

(tilec installed; else PYTHONPATH=. from the repo root.)  At each sequence
length the total tokens and the hidden size are fixed, as in the
FlashAttention-3 paper's forward benchmark: batch = tokens / seq, heads =
hidden / d, so every size does the same work per token.  Q, K, V, O are
torch's [batch, heads, seq, d] row-major tensors; the tilec kernel sees them
as [batch * heads * seq, d] and is compiled per size (-D BH, SEQ, D, CAUSAL,
SCALE_LOG2).  The bf16 kernel is the same source with its element type
replaced.  Each --variant is the kernel compiled with further -D defines
(say `--variant base --variant s3:STAGES=3`), timed side by side with the
others on the same inputs, each a row of its own; without one, the kernel as
written, named `tilec`.

Correctness, before timing, on fresh random inputs (standard normal): the
tilec output (NaN-poisoned first) and its log-sum-exp against a float32
reference computed head by head on the first and last head of the batch:
relative Frobenius error <= 2e-3 (f16) / 1e-2 (bf16) for O and max absolute
error <= 1e-3 for the LSE (natural log).  Each torch backend's output is
checked the same way (reported, not required).

Timing: CUDA-event medians over the runs after a warm-up, each launch
queued behind a GPU sleep (bench/tma_copy.py), so launch overhead is not
measured for either side.  TFLOP/s counts 4 * B * H * S^2 * D, halved for
causal.  The first bar is tilec >= 1.0x the flash backend at every size;
the goal is tilec >= 1.0x cuDNN at seq >= 4096, d = 128.
"""
from __future__ import annotations

import argparse
import math
import re
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import hopper_properties, median_ms, parse_with_timing

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "flash_attn_fwd.tile"
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
MAX_ERROR = {"f16": 2e-3, "bf16": 1e-2}
MAX_LSE_ERROR = 1e-3
BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}
REF_ROWS = 2048  # query rows per chunk of the float32 reference


def compile_config(config):
    """(PTX, kernel.json) of the kernel for (dtype, B * H, seq, d, causal,
    the variant's own defines)."""
    dtype, bh, seq, d, causal, extra = config
    text = SOURCE.read_text()
    if dtype != "f16":
        text = re.sub(r"\bf16\b", dtype, text)
    defines = {"BH": bh, "SEQ": seq, "D": d, "CAUSAL": int(causal), "SCALE_LOG2": math.log2(math.e) / math.sqrt(d)}
    result = compile_source(text, str(SOURCE), target="sm_90a", defines={**defines, **extra})
    return result.ptx, result.meta


def reference(q, k, v, causal: bool):
    """float32 O and LSE of one head ([seq, d] each), in chunks of rows."""
    seq, d = q.shape
    q, k, v = q.float(), k.float(), v.float()
    outs, lses = [], []
    for r0 in range(0, seq, REF_ROWS):
        s = (q[r0:r0 + REF_ROWS] @ k.T) / math.sqrt(d)
        if causal:
            rows = torch.arange(r0, r0 + s.shape[0], device=s.device)[:, None]
            s.masked_fill_(torch.arange(seq, device=s.device)[None, :] > rows, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        outs.append(torch.exp(s - lse[:, None]) @ v)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def errors(o, lse, q, k, v, causal: bool):
    """(relative error of O, max abs error of LSE or None) over the first and
    last head; inf when anything is NaN."""
    B, H = q.shape[:2]
    num = den = 0.0
    lse_err = 0.0 if lse is not None else None
    for b, h in ((0, 0), (B - 1, H - 1)):
        ro, rl = reference(q[b, h], k[b, h], v[b, h], causal)
        got = o[b, h].float()
        if torch.isnan(got).any():
            return float("inf"), float("inf")
        num += float(torch.linalg.norm(got - ro)) ** 2
        den += float(torch.linalg.norm(ro)) ** 2
        if lse is not None:
            gl = lse[b, h]
            if torch.isnan(gl).any():
                return math.sqrt(num / den), float("inf")
            lse_err = max(lse_err, float((gl - rl).abs().max()))
    return math.sqrt(num / den), lse_err


def variant(spec: str) -> tuple[str, dict[str, int]]:
    """`NAME[:KEY=VALUE,...]` -> (NAME, {KEY: int(VALUE)})."""
    name, _, rest = spec.partition(":")
    defines = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not (name and eq and key.isidentifier()):
            raise argparse.ArgumentTypeError(f"'{spec}': expected NAME or NAME:KEY=VALUE,KEY=VALUE")
        try:
            defines[key] = int(value, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{spec}': {key}'s value '{value}' is not an integer") from None
    if not name or len(name) > 10:
        raise argparse.ArgumentTypeError(f"'{spec}': the name must be 1 to 10 characters")
    return name, defines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[1024, 4096, 8192, 16384])
    parser.add_argument("--dims", type=int, nargs="+", choices=(64, 128), default=[64, 128])
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["f16", "bf16"])
    parser.add_argument("--causal", nargs="+", choices=("no", "yes"), default=["no", "yes"])
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--variant", type=variant, action="append", dest="variants",
                        help="NAME[:KEY=VALUE,...]: the kernel with these -D defines (repeatable)")
    args = parse_with_timing(parser)
    variants = dict(args.variants or [("tilec", {})])
    hopper_properties()
    torch.backends.cuda.matmul.allow_tf32 = False  # a float32 reference, not tf32
    stream = torch.cuda.current_stream()
    print(f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}; tokens {args.tokens}, hidden {args.hidden}; "
          f"median of {args.runs} runs; TFLOP/s = 4 B H S^2 D (/2 causal) / time")
    print(f"{'dtype':<6}{'causal':<7}{'seq':>6}{'d':>5}{'B':>4}{'H':>4}  {'kernel':<10}{'ms':>9}{'TFLOP/s':>9}"
          f"{'O err':>10}{'LSE err':>10}  tilec speedup")
    configs = [(dtype, causal, d, seq) for dtype in args.dtypes for causal in (c == "yes" for c in args.causal)
               for d in args.dims for seq in args.seqs]
    shapes = {c: (max(1, args.tokens // c[3]), args.hidden // c[2]) for c in configs}
    # every kernel compiled up front, in parallel (the compiler is pure Python)
    builds = [(c, name) for c in configs for name in variants]
    with ProcessPoolExecutor() as pool:
        built = dict(zip(builds, pool.map(compile_config, [(dt, shapes[c][0] * shapes[c][1], seq, d, causal, variants[name])
                                                           for c, name in builds for dt, causal, d, seq in [c]])))
    # ... and loaded (assembled and JIT-compiled by the driver) in threads
    with ThreadPoolExecutor(8) as threads:
        kernels = dict(zip(builds, threads.map(lambda b: CompiledModule(*built[b], "sm_90a").kernel(), builds)))
    ratios = {name: {} for name in variants}
    for dtype, causal, d, seq in configs:
        B, H = shapes[dtype, causal, d, seq]
        shape = (B, H, seq, d)
        q, k, v = (torch.randn(shape, dtype=DTYPES[dtype], device="cuda") for _ in range(3))
        flop = 4.0 * B * H * seq * seq * d / (2 if causal else 1)
        head = f"{dtype:<6}{'yes' if causal else 'no':<7}{seq:>6}{d:>5}{B:>4}{H:>4}  "
        times = {}
        for name, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.cuda.synchronize()
                    err, _ = errors(o, None, q, k, v, causal)
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   args.runs, args.warmup)
            except RuntimeError as exc:  # the backend does not take this size/dtype
                print(head + f"{name:<10}{'n/a':>9}  ({str(exc).splitlines()[0][:60]})")
                continue
            times[name] = ms
            print(head + f"{name:<10}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{err:>10.1e}")
        flat = [t.view(B * H * seq, d) for t in (q, k, v)]
        for name in variants:
            kernel = kernels[(dtype, causal, d, seq), name]
            o = torch.full(shape, float("nan"), dtype=DTYPES[dtype], device="cuda")
            lse = torch.full((B, H, seq), float("nan"), dtype=torch.float32, device="cuda")
            launch = lambda: kernel(*flat, o.view(B * H * seq, d), lse.view(-1), stream=stream)
            launch()
            torch.cuda.synchronize()
            err, lse_err = errors(o, lse, q, k, v, causal)
            if not (err <= MAX_ERROR[dtype] and lse_err <= MAX_LSE_ERROR):
                print(head + f"{name:<10}{'WRONG':>9}{'':>9}{err:>10.1e}{lse_err:>10.1e}")
                continue
            ms = median_ms(launch, args.runs, args.warmup)
            vs = "  ".join(f"{n} {times[n] / ms:.2f}x" for n in times)
            ratios[name][dtype, causal, d, seq] = {n: times[n] / ms for n in times}
            print(head + f"{name:<10}{ms:>9.3f}{flop / ms / 1e9:>9.1f}{err:>10.1e}{lse_err:>10.1e}  {vs}")
    for name, by_size in ratios.items():
        label = f"{name}: " if len(variants) > 1 else ""
        flash = [r["flash"] for r in by_size.values() if "flash" in r]
        if flash:
            print(f"{label}first bar (>= 1.0x flash at every size): min {min(flash):.2f}x over {len(flash)} sizes, "
                  f"{'met' if min(flash) >= 1.0 else 'NOT met'}")
        goal = [r["cudnn"] for (dt, c, d, s), r in by_size.items() if d == 128 and s >= 4096 and "cudnn" in r]
        if goal:
            print(f"{label}goal (>= 1.0x cuDNN at seq >= 4096, d = 128): min {min(goal):.2f}x over {len(goal)} sizes, "
                  f"{'met' if min(goal) >= 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()

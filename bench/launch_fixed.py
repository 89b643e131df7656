"""Where a launch's fixed cost goes in bench/gemm_sweep.py's harness (each
launch queued behind a GPU sleep, CUDA events, medians; tma_copy.medians_ms,
all launches taking turns): an empty tilec kernel (bench/launch_fixed.tile)
with and without ~200 KB of dynamic shared memory and the driver's
shared-memory carveout preference, empty torch kernels, the events alone,
decode_floor's one-box stream, and two launches between one pair of events
(the second one's cost); then the decode GEMMs at N = 1024 and 4096 against
cuBLAS and the floor, in the same harness; last, the kernels' own durations
from the torch profiler (CUPTI), which leave the events' launch latency out;
and 20 launches back to back between one pair of events, as a decode step
queues them.  The GEMM rows are timed twice: as the sweep rotates its sets
(a launch may find in L2 what an earlier launch with another cache policy
left there) and behind a read of four times the L2 before each sleep.
A benchmark, not a test.

    cd bench && python3 launch_fixed.py [--runs 50] [--sections floor gemm l2 kernels stream]
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from tilec.pipeline import compile_source
from tilec.runtime import driver
from tilec.runtime.module import CompiledModule
from gemm import MAX_ERROR, output_error
from tma_copy import SLEEP_CYCLES, hopper_properties, medians_ms, taking_turns

HERE = Path(__file__).resolve().parent
EMPTY = HERE / "launch_fixed.tile"
FLOOR = HERE / "decode_floor.tile"
SMALL_M = HERE.parent / "examples" / "hopper" / "gemm_small_m.tile"
SPLIT_K = HERE.parent / "examples" / "hopper" / "gemm_small_m_split_k.tile"


def build(source: Path, defines: dict, carveout: int | None = None):
    """A kernel of `source`, loaded as a module of its own; `carveout` sets
    the function's preferred shared-memory carveout (percent) on it alone."""
    result = compile_source(source.read_text(), str(source), target="sm_90a", defines=defines)
    kernel = CompiledModule(result.ptx, result.meta, "sm_90a").kernel()
    if carveout is not None:
        driver.set_function_attribute(kernel._function, "PREFERRED_SHARED_MEMORY_CARVEOUT", carveout)
    return kernel


def show(rows: dict, runs: int, flush=None) -> None:
    times = medians_ms(list(rows.values()), runs, 5)
    flushed = medians_ms(list(rows.values()), runs, 5, before=flush) if flush else [None] * len(rows)
    for label, ms, fl in zip(rows, times, flushed):
        print(f"  {label:<64}{ms * 1e3:8.2f} us" + (f"   L2 flushed {fl * 1e3:8.2f} us" if fl else ""))


def l2_retention(sms: int, stream, runs: int, flush) -> None:
    """gemm_sweep.py's final timing pattern, [cuBLAS, tilec] taking turns
    over one counter of 3 rotating sets, so tilec's launch i reads the set
    cuBLAS read at launch i - 3: with B's loads evict_first (HINT = 1) the
    tilec launch between them leaves cuBLAS's lines in L2.  Against tilec
    timed alone and both timed behind an L2 flush."""
    for label, n, k in (("8B o", 4096, 4096), ("8B qkv", 6144, 4096)):
        m = 16
        sets = [(torch.randn(m, k, dtype=torch.float16, device="cuda"), torch.randn(n, k, dtype=torch.float16, device="cuda"),
                 torch.empty(m, n, dtype=torch.float16, device="cuda")) for _ in range(3)]
        print(f"{label} M=16 N={n} K={k} ({2 * n * k / 1e6:.0f} MB of B): cuBLAS / tilec us")
        for hint in (1, 0):
            kern = build(SMALL_M, {"M": m, "N": n, "K": k, "ROWS": 64, "STAGES": 16, "HINT": hint})
            rotating = taking_turns(sets)

            cublas = rotating(lambda A, B, D: torch.matmul(A, B.T, out=D))
            tilec = rotating(lambda A, B, D, kern=kern: kern(A, B, D, stream=stream))
            swept = medians_ms([cublas, tilec], runs, 5)
            alone = medians_ms([tilec], runs, 5)[0]
            flushed = medians_ms([cublas, tilec], runs, 5, before=flush)
            print(f"  gemm_small_m ROWS=64 STAGES=16 HINT={hint}: as the sweep times {swept[0] * 1e3:6.2f} / {swept[1] * 1e3:6.2f}; "
                  f"tilec alone {alone * 1e3:6.2f}; L2 flushed {flushed[0] * 1e3:6.2f} / {flushed[1] * 1e3:6.2f}")


def kernel_us(launch, flush, count: int = 10) -> float:
    """The device time of the kernels one `launch()` runs (CUPTI, through
    the torch profiler), mean of `count`, each behind an L2 flush and a
    sleep (which are left out)."""
    from torch.profiler import ProfilerActivity, profile
    launch()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(count):
            flush()
            torch.cuda._sleep(SLEEP_CYCLES // 10)
            launch()
        torch.cuda.synchronize()
    total = 0.0
    for ev in prof.key_averages():
        if "spin_kernel" in ev.key or ev.key.startswith("void at::native::reduce_kernel"):
            continue  # the sleep and the flush (scratch.sum())
        total += getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)
    return total / count


def stream_us(launches: list, flush, runs: int) -> float:
    """Per launch, the median over `runs` of one event pair around all of
    `launches` queued back to back (behind an L2 flush and a sleep): the
    launch latency of all but the first is hidden, as in a decode step's
    stream of kernels."""
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        torch.cuda._sleep(10 * SLEEP_CYCLES)  # longer than 20 slow-path launches take on the host
        start.record()
        for launch in launches:
            launch()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times) * 1e3 / len(launches)


def back_to_back(sms: int, stream, flush, empty, x, tiny, count: int = 20, runs: int = 20) -> None:
    """`count` launches back to back, each on its own input set (sets of B
    together at least four times the L2, so no launch reads another's B from
    L2), between one pair of events: the per-launch time a decode step sees."""
    l2 = hopper_properties().L2_cache_size
    print(f"{count} launches back to back between one pair of events, us per launch (median of {runs}):")
    print(f"  {'tilec empty kernel':<64}{stream_us([lambda: empty(x, tiny, stream=stream)] * count, flush, runs):8.2f} us")
    print(f"  {'torch.cuda._sleep(0)':<64}{stream_us([lambda: torch.cuda._sleep(0)] * count, flush, runs):8.2f} us")
    for n, extra in ((1024, "split_k"), (4096, "floor")):
        m, k = 16, 4096
        nsets = max(3, -(-4 * l2 // (2 * n * k)))
        sets = [(torch.randn(m, k, dtype=torch.float16, device="cuda"), torch.randn(n, k, dtype=torch.float16, device="cuda"),
                 torch.empty(m, n, dtype=torch.float16, device="cuda")) for _ in range(nsets)]
        kern = build(SMALL_M, {"M": m, "N": n, "K": k, "ROWS": 64, "STAGES": 16})
        rows = {f"N={n} gemm_small_m ROWS=64 STAGES=16": lambda A, B, D: kern(A, B, D, stream=stream),
                f"N={n} cuBLAS": lambda A, B, D: torch.matmul(A, B.T, out=D)}
        if extra == "split_k":
            sk = build(SPLIT_K, {"M": m, "N": n, "K": k, "SPLIT_K": 4, "STAGES": 8})
            W, C = torch.empty(4, n, m, device="cuda"), torch.zeros(n // 64, dtype=torch.int32, device="cuda")
            rows[f"N={n} gemm_small_m_split_k SPLIT_K=4 STAGES=8"] = lambda A, B, D: sk(A, B, D, W, C, stream=stream)
        else:
            fl = build(FLOOR, {"N": n, "K": k, "NUM_CTAS": sms, "ROWS": 64, "STAGES": 16})
            rows[f"N={n} decode_floor {sms} CTAs (B only)"] = lambda A, B, D: fl(B, stream=stream)
        for label, f in rows.items():
            launches = [lambda f=f, i=i: f(*sets[i % nsets]) for i in range(count)]
            for launch in launches[:nsets]:
                launch()  # the sets past the launcher's 4 take the slow path (~55 us of host time; the sleep covers it)
            print(f"  {label + f' ({nsets} sets)':<64}{stream_us(launches, flush, runs):8.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--sections", nargs="+", default=["floor", "gemm", "l2", "kernels", "stream"],
                        choices=["floor", "gemm", "l2", "kernels", "stream"])
    args = parser.parse_args()
    sms = hopper_properties().multi_processor_count
    stream = torch.cuda.current_stream()
    big = 200 * 1024
    scratch = torch.empty(4 * hopper_properties().L2_cache_size // 4, dtype=torch.float32, device="cuda").fill_(1.0)
    flush = lambda: scratch.sum()  # noqa: E731 (a read of four times the L2)
    print(f"{torch.cuda.get_device_name(0)} ({sms} SMs); CUDA-event medians of {args.runs}, each launch behind a GPU sleep")

    x = torch.zeros(sms, device="cuda")
    one = torch.zeros(1, device="cuda")
    e0 = build(EMPTY, {"CTAS": sms, "SMEM": 0})
    e1 = build(EMPTY, {"CTAS": sms, "SMEM": big})
    e1c = build(EMPTY, {"CTAS": sms, "SMEM": big}, carveout=100)
    e0c = build(EMPTY, {"CTAS": sms, "SMEM": 0}, carveout=100)
    e1w = build(EMPTY, {"CTAS": sms, "SMEM": big, "THREADS": 384})
    e1s = build(EMPTY, {"CTAS": 1, "SMEM": big})
    e64 = build(EMPTY, {"CTAS": sms, "SMEM": 64 * 1024})
    ld = build(EMPTY, {"CTAS": sms, "LOAD": 1})
    ldo = build(EMPTY, {"CTAS": sms, "LOAD": 1, "ROW": 64})
    ld1 = build(EMPTY, {"CTAS": sms, "LOAD": 1, "SMEM": big})
    floor = build(FLOOR, {"N": 64, "K": 64, "NUM_CTAS": sms, "ROWS": 64, "STAGES": 16})
    floorc = build(FLOOR, {"N": 64, "K": 64, "NUM_CTAS": sms, "ROWS": 64, "STAGES": 16}, carveout=100)
    tiny = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    a16, b64, d16 = (torch.randn(16, 64, dtype=torch.float16, device="cuda"), torch.randn(64, 64, dtype=torch.float16, device="cuda"),
                     torch.empty(16, 64, dtype=torch.float16, device="cuda"))
    launch = {
        "events alone (nothing launched)": lambda: None,
        "torch.cuda._sleep(0)": lambda: torch.cuda._sleep(0),
        "torch zero_ of 1 float": lambda: one.zero_(),
        "cuBLAS 16x64x64 (torch.matmul)": lambda: torch.matmul(a16, b64.T, out=d16),
        f"tilec empty {sms}x32, smem 0": lambda: e0(x, tiny, stream=stream),
        f"tilec empty {sms}x32, smem 0, carveout 100": lambda: e0c(x, tiny, stream=stream),
        f"tilec empty {sms}x32, smem 64 KB": lambda: e64(x, tiny, stream=stream),
        f"tilec empty {sms}x32, smem 200 KB": lambda: e1(x, tiny, stream=stream),
        f"tilec empty {sms}x32, smem 200 KB, carveout 100": lambda: e1c(x, tiny, stream=stream),
        f"tilec empty {sms}x384, smem 200 KB": lambda: e1w(x, tiny, stream=stream),
        "tilec empty 1x32, smem 200 KB": lambda: e1s(one, tiny, stream=stream),
        f"tilec empty {sms}x32 + one TMA box (L2-hot), waited for": lambda: ld(x, tiny, stream=stream),
        f"tilec empty {sms}x32 + one TMA box past the end (no read)": lambda: ldo(x, tiny, stream=stream),
        f"tilec empty {sms}x32 + one TMA box, smem 200 KB": lambda: ld1(x, tiny, stream=stream),
        "decode_floor, one box": lambda: floor(tiny, stream=stream),
        "decode_floor, one box, carveout 100": lambda: floorc(tiny, stream=stream),
        "pair: smem 0 then smem 0": lambda: (e0(x, tiny, stream=stream), e0(x, tiny, stream=stream)),
        "pair: smem 200 KB then smem 200 KB": lambda: (e1(x, tiny, stream=stream), e1(x, tiny, stream=stream)),
        "pair: smem 0 then smem 200 KB": lambda: (e0(x, tiny, stream=stream), e1(x, tiny, stream=stream)),
        "pair: smem 200 KB then smem 0": lambda: (e1(x, tiny, stream=stream), e0(x, tiny, stream=stream)),
        "pair: _sleep(0) then smem 200 KB": lambda: (torch.cuda._sleep(0), e1(x, tiny, stream=stream)),
        "pair: decode_floor one box twice": lambda: (floor(tiny, stream=stream), floor(tiny, stream=stream)),
        "pair: cuBLAS 16x64x64 twice": lambda: (torch.matmul(a16, b64.T, out=d16), torch.matmul(a16, b64.T, out=d16)),
    }
    if "floor" in args.sections:
        print("launch floor:")
        show(launch, args.runs)

    gemms = {}
    for n in (1024, 4096) if {"gemm", "kernels"} & set(args.sections) else ():
        m, k = 16, 4096
        sets = [(torch.randn(m, k, dtype=torch.float16, device="cuda"), torch.randn(n, k, dtype=torch.float16, device="cuda"),
                 torch.empty(m, n, dtype=torch.float16, device="cuda")) for _ in range(3)]
        rotating = taking_turns(sets)

        rows = {}
        for r in (64, 16):
            kern = build(SMALL_M, {"M": m, "N": n, "K": k, "ROWS": r, "STAGES": 16})
            A, B, D = sets[0]
            err = output_error(lambda: kern(A, B, D, stream=stream), D, A.float() @ B.float().T)
            assert err < MAX_ERROR, f"gemm_small_m ROWS={r} N={n}: relative error {err}"
            rows[f"N={n} gemm_small_m ROWS={r} STAGES=16"] = rotating(lambda A, B, D, kern=kern: kern(A, B, D, stream=stream))
        kc = build(SMALL_M, {"M": m, "N": n, "K": k, "ROWS": 64 if n == 4096 else 16, "STAGES": 16}, carveout=100)
        rows[f"N={n} gemm_small_m ROWS={64 if n == 4096 else 16}, carveout 100"] = rotating(lambda A, B, D, kc=kc: kc(A, B, D, stream=stream))
        sk = build(SPLIT_K, {"M": m, "N": n, "K": k, "SPLIT_K": 4, "STAGES": 8})
        W, C = torch.empty(4, n, m, device="cuda"), torch.zeros(n // 64, dtype=torch.int32, device="cuda")
        rows[f"N={n} gemm_small_m_split_k SPLIT_K=4 STAGES=8"] = rotating(lambda A, B, D, sk=sk, W=W, C=C: sk(A, B, D, W, C, stream=stream))
        fl = build(FLOOR, {"N": n, "K": k, "NUM_CTAS": sms, "ROWS": 64, "STAGES": 16})
        rows[f"N={n} decode_floor {sms} CTAs (B only)"] = rotating(lambda A, B, D, fl=fl: fl(B, stream=stream))
        rows[f"N={n} cuBLAS"] = rotating(lambda A, B, D: torch.matmul(A, B.T, out=D))
        if "gemm" in args.sections:
            print(f"M=16 N={n} K=4096 ({2 * n * k / 1e6:.0f} MB of B), 3 rotating sets:")
            show(rows, args.runs, flush)
        gemms.update(rows)
    if "l2" in args.sections:
        l2_retention(sms, stream, args.runs, flush)

    if "kernels" in args.sections:
        print("the kernels' own time (CUPTI, torch profiler; every kernel of one launch, each behind an L2 flush):")
        for label, f in {**launch, **gemms}.items():
            if not label.startswith("pair") and "events alone" not in label:
                print(f"  {label:<64}{kernel_us(f, flush):8.2f} us")
    if "stream" in args.sections:
        back_to_back(sms, stream, flush, e0, x, tiny)

if __name__ == "__main__":
    main()

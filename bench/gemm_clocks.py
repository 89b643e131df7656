"""The SM clock and board power while a GEMM runs back to back, for cuBLAS
and hgemm_v7 in turn: what rate the tensor cores can reach under a
sustained dense load, against the 989 TFLOP/s the spec gives at 1830 MHz.
A benchmark, not a test.

    python3 bench/gemm_clocks.py [--size 8192] [--seconds 6] [--blk-n 224]

Each GEMM (f16, D = A B^T, size^3) launches in batches of 20 for
`--seconds`, with no sleep between launches (unlike the sweep's timing,
which queues each launch behind a GPU sleep); the time per launch is
the whole span over the launches.  nvidia-smi is polled every 100 ms
meanwhile for the SM clock, the power draw, the temperature and the
active clock-event reasons (0x4: the software power cap); the first half
second of samples is dropped.  cuBLAS runs before and after hgemm_v7, so
a drift shows.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import threading
import time

import torch

from gemm import source
from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule

QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"


def poll(stop: threading.Event, rows: list) -> None:
    while not stop.is_set():
        out = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.strip()
        if out:
            rows.append(out.split(", "))
        time.sleep(0.1)


def sustained(name: str, launch, flop: float, seconds: float) -> None:
    for _ in range(3):
        launch()
    torch.cuda.synchronize()
    stop, rows = threading.Event(), []
    sampler = threading.Thread(target=poll, args=(stop, rows))
    sampler.start()
    start, launches = time.time(), 0
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    while time.time() - start < seconds:
        for _ in range(20):
            launch()
        launches += 20
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    stop.set()
    sampler.join()
    ms = begin.elapsed_time(end) / launches
    rows = rows[5:]
    clock, power = [float(r[0]) for r in rows], [float(r[1]) for r in rows]
    print(f"{name}: {ms * 1e3:.0f} us a launch, {flop / ms / 1e9:.0f} TFLOP/s; SM clock median "
          f"{statistics.median(clock):.0f} MHz (min {min(clock):.0f}, max {max(clock):.0f}); power median "
          f"{statistics.median(power):.0f} W; {rows[-1][2]} C at the end; clock-event reasons "
          f"{sorted(set(r[3] for r in rows))}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--blk-n", type=int, default=224, help="hgemm_v7's BLK_N (the sweep's pick at 8192^3)")
    args = parser.parse_args()
    n = args.size
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    A = torch.randn(n, n, dtype=torch.float16, device="cuda")
    B = torch.randn(n, n, dtype=torch.float16, device="cuda")
    D = torch.empty(n, n, dtype=torch.float16, device="cuda")
    path = source("hgemm_v7", "f16")
    r = compile_source(path.read_text(), str(path), target="sm_90a",
                       defines=dict(M=n, N=n, K=n, SM_COUNT=sms, BLK_N=args.blk_n))
    v7 = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    stream = torch.cuda.current_stream()
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip())
    flop = 2.0 * n ** 3
    sustained("cuBLAS", lambda: torch.matmul(A, B.T, out=D), flop, args.seconds)
    sustained(f"hgemm_v7 128x{args.blk_n}/4", lambda: v7(A, B, D, stream=stream), flop, args.seconds)
    sustained("cuBLAS", lambda: torch.matmul(A, B.T, out=D), flop, args.seconds)


if __name__ == "__main__":
    main()

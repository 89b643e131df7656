"""gemm_small_m's column slabs (ROWS = 64, 32, 16 columns of D per CTA)
against each other and cuBLAS on narrow weights (N = 1024, 2048, 4096; K =
4096; M = 16 and 64), timed as bench/gemm_sweep.py times (three rotating
input sets, each launch behind a GPU sleep, CUDA-event medians of 30).
Each configuration writes a NaN-poisoned D first, checked against an f32
product.  A benchmark, not a test.

    cd bench && python3 gemm_small_m_rows.py
"""
from __future__ import annotations

from pathlib import Path

import torch

from gemm import MAX_ERROR, output_error
from gemm_sweep import copy_gbps
from tilec.pipeline import compile_source
from tilec.runtime.module import CompiledModule
from tma_copy import median_ms, taking_turns

SOURCE = Path(__file__).resolve().parent.parent / "examples" / "hopper" / "gemm_small_m.tile"


def main() -> None:
    copy = copy_gbps()
    stream = torch.cuda.current_stream()
    print(f"{torch.cuda.get_device_name(0)}; torch copy {copy:.0f} GB/s; time, fraction of the copy bandwidth "
          f"over A + B + D, relative error")
    for n, k in [(1024, 4096), (2048, 4096), (4096, 4096)]:
        for m in (16, 64):
            sets = [(torch.randn(m, k, dtype=torch.float16, device="cuda"),
                     torch.randn(n, k, dtype=torch.float16, device="cuda"),
                     torch.empty(m, n, dtype=torch.float16, device="cuda")) for _ in range(3)]
            nbytes = 2 * (m * k + n * k + m * n)
            rotating = taking_turns(sets)
            row = []
            for rows in (64, 32, 16):
                defines = {"M": m, "N": n, "K": k, "ROWS": rows, "STAGES": 16 if m == 16 else 8}
                result = compile_source(SOURCE.read_text(), str(SOURCE), target="sm_90a", defines=defines)
                kernel = CompiledModule(result.ptx, result.meta, "sm_90a").kernel()
                A, B, D = sets[0]
                err = output_error(lambda: kernel(A, B, D, stream=stream), D, A.float() @ B.float().T)
                if err >= MAX_ERROR:
                    raise SystemExit(f"gemm_small_m ROWS={rows} M={m} N={n}: relative error {err}")
                ms = median_ms(rotating(lambda A, B, D: kernel(A, B, D, stream=stream)), 30, 5)
                row.append(f"ROWS={rows} {ms * 1e3:.2f} us {nbytes / ms / 1e6 / copy:.0%} err {err:.0e}")
            cublas = median_ms(rotating(lambda A, B, D: torch.matmul(A, B.T, out=D)), 30, 5)
            print(f"M={m} N={n} K={k}: " + "; ".join(row) + f"; cuBLAS {cublas * 1e3:.2f} us")


if __name__ == "__main__":
    main()

"""hgemm_v7 at fixed configurations against cuBLAS, as compiled by one or
more tilec trees, in one run: what a compiler change does to the same
kernels.  A benchmark, not a test.

    python3 bench/v7_configs.py [--trees OLD NEW] [--runs 50] [--repeats 3]

Each tree (a directory holding a `tilec` package; by default this one)
compiles every (shape, configuration) of CASES in one subprocess of its
own, with its own `tilec` and its own examples/hopper/hgemm_v7.tile (f16); this
process loads all the PTX with its own runtime and times every kernel with
cuBLAS on the same three rotating random input sets, launch by launch in
turn (`tma_copy.medians_ms`: CUDA events, each launch behind a GPU sleep),
after checking each kernel's NaN-poisoned output against cuBLAS (relative
Frobenius error below 1e-2).  The table gives each repeat's median in
microseconds and the ratio cuBLAS / tilec.

CASES are the shapes and stage counts the constant-divisor change (issue
17, bench/RESULTS.md) was about: the ring index `(stage + STAGES - 1) %
STAGES` divides by STAGES, which is no power of two at 5, 6, 7, 12 and 13.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from gemm import against_cublas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilec.runtime.module import CompiledModule  # noqa: E402

SQUARE_512 = (512, 512, 512)
O_512 = (512, 4096, 4096)  # 8B o, M = 512
DOWN_512 = (512, 4096, 14336)  # 8B down, M = 512
CASES = {
    SQUARE_512: [dict(BLK_M=64, BLK_N=64, STAGES=s) for s in (4, 8, 12, 13)],
    O_512: [dict(BLK_M=64, BLK_N=64, STAGES=s) for s in (8, 12, 13)]
    + [dict(BLK_M=128, BLK_N=128, STAGES=s) for s in (4, 6)],
    DOWN_512: [dict(BLK_M=128, BLK_N=128, STAGES=6, CLUSTER_M=2), dict(BLK_M=128, BLK_N=128, STAGES=4, CLUSTER_M=2)],
}

COMPILE = """
import json, sys
from tilec.pipeline import compile_source
out = []
for path, defines in json.load(sys.stdin):
    r = compile_source(open(path).read(), path, target="sm_90a", defines=defines)
    out.append((r.ptx, r.meta))
json.dump(out, sys.stdout)
"""


def compile_in(tree: Path, jobs: list) -> list:
    """(ptx, meta) for each (path, defines) of `jobs`, compiled by `tree`'s tilec."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    done = subprocess.run([sys.executable, "-c", COMPILE], input=json.dumps(jobs), env=env, cwd=tree,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", type=lambda t: Path(t).resolve(), default=[ROOT])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dtype = torch.float16
    stream = torch.cuda.current_stream()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(torch.cuda.get_device_name(), f"({sms} SMs), f16, median of {args.runs} per repeat, us (cuBLAS / tilec)")
    for (m, n, k), configs in CASES.items():
        names, kernels = [], []
        for tree in args.trees:
            jobs = [("examples/hopper/hgemm_v7.tile", dict(M=m, N=n, K=k, SM_COUNT=sms, GROUP=8, **c)) for c in configs]
            for c, (ptx, meta) in zip(configs, compile_in(tree, jobs)):
                names.append(f"{tree.name} {c['BLK_M']}x{c['BLK_N']}/{c['STAGES']}" + (" x2" if c.get("CLUSTER_M") else ""))
                kernels.append(CompiledModule(ptx, meta, "sm_90a").kernel())
        reps = against_cublas((m, n, k), dtype, names, kernels, args.runs, args.repeats, stream)
        print(f"{m}x{n}x{k}: cuBLAS " + " ".join(f"{r[0] * 1e3:.2f}" for r in reps))
        for i, name in enumerate(names, 1):
            print(f"  {name:<28}" + "  ".join(f"{r[i] * 1e3:7.2f} ({r[0] / r[i]:.3f})" for r in reps), flush=True)


if __name__ == "__main__":
    main()

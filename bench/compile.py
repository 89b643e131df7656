"""Compile time of every example: .tile to PTX in a cold process (the
`tilec` driver in a fresh Python), warm in this process (`compile_source`
again, imports and tables already loaded), and PTX to cubin (`assemble`,
nvJitLink).  A benchmark, not a test: it prints a table.

    python3 bench/compile.py [--repeat 5] [examples/hopper/hgemm_v7.tile ...]

(tilec installed; else PYTHONPATH=. from the repo root.)  Warm and assemble
times are the median of `--repeat` runs after one discarded run; cold is the
median wall time of `--repeat` driver processes, which includes Python's
start-up and tilec's imports.  Examples the compiler does not accept are
listed with the error instead of times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

ROOT = Path(__file__).resolve().parent.parent


def median_s(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_s(path: Path, repeat: int) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "tilec.cli", str(path), "-o", str(Path(tmp) / "out.ptx")]
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, capture_output=True)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = args.files or sorted(ROOT.glob("examples/**/*.tile"))
    print(f"{'example':<36}{'target':<9}{'cold ms':>9}{'warm ms':>9}{'cubin ms':>10}{'PTX lines':>11}")
    for path in files:
        name = str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)
        text = path.read_text()
        try:
            result = compile_source(text, str(path))
        except TilecError as err:
            print(f"{name:<36}not compiled: {err.message.splitlines()[0]}")
            continue
        target = result.meta["target"]
        warm = median_s(lambda: compile_source(text, str(path)), args.repeat)
        cubin = median_s(lambda: assemble(result.ptx, target), args.repeat)
        cold = cold_s(path, args.repeat)
        lines = result.ptx.count("\n")
        print(f"{name:<36}{target:<9}{cold * 1e3:>9.0f}{warm * 1e3:>9.0f}{cubin * 1e3:>10.0f}{lines:>11}")


if __name__ == "__main__":
    main()

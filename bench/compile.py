"""Compile time of every example: .tile to PTX in a cold process (the
`tilec` driver in a fresh Python), warm in this process (`compile_source`
again, imports and tables already loaded), and PTX to cubin (`assemble`,
nvJitLink).  A benchmark, not a test: it prints a table.

    python3 bench/compile.py [--repeat 5] [examples/hopper/hgemm_v7.tile ...]

(tilec installed; else PYTHONPATH=. from the repo root.)  Warm and assemble
times are the median of `--repeat` runs after one discarded run; cold is the
median wall time of `--repeat` driver processes, which includes Python's
start-up and tilec's imports; "cold cpu" and "warm cpu" are the median
user + system CPU times of the same runs (the figures to read on a loaded
machine, where wall time mostly measures waiting).  Cold runs use a private bytecode cache, filled by one
discarded run, as an installed tilec has (pip compiles it on install);
`--no-bytecode` makes every run compile tilec's sources instead.  The load
average is printed first: compare numbers taken at similar loads only.
Examples the compiler does not accept are listed with the error instead of
times.  The interpreter's own start-up (`python3 -c pass`, median of
`--repeat`, wall and CPU) is printed under the load average: every cold
figure includes it, and what the environment's site packages import at
start-up is no part of tilec; so is the start-up plus tilec's imports (the
driver's and the whole compiler's), which every cold figure includes too.
"warm" compiles the same text again, and so reuses its parse (`parse.parsed`
keeps it per process); "new text" is the warm wall time of a text with one
more comment line each run, parsed each time: a cold compile does about
that much compiling after its imports.  `--no-cubin` leaves out the PTX-to-cubin
column (nvJitLink), which on a loaded machine takes longer than the rest.
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this tree's tilec, as the cold runs' PYTHONPATH says, not an installed one

from tilec.compiler.diagnostics import TilecError  # noqa: E402
from tilec.pipeline import compile_source  # noqa: E402
from tilec.runtime.assemble import assemble  # noqa: E402


def median_s(fn, repeat: int, clock=time.perf_counter) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


START_UP = "pass"
IMPORTS = "import os, tilec.cli, tilec.pipeline; os._exit(0)"
"""What every cold run does before it compiles: start Python, and that plus
load the driver and the compiler (ending as the driver does, without the
interpreter's teardown)."""


def cold_s(path: Optional[Path], repeat: int, bytecode: bool, statement: str = START_UP) -> tuple:
    """(median wall, median CPU) seconds of `repeat` driver processes
    compiling `path`, or of `python3 -c statement` for no path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        if path is None:
            command = [sys.executable, "-c", statement]
        else:
            command = [sys.executable, "-m", "tilec.cli", str(path), "-o", str(Path(tmp) / "out.ptx")]
        if bytecode:
            subprocess.run(command, check=True, env=env, capture_output=True)
        walls, cpus = [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, capture_output=True)
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-bytecode", action="store_true", help="cold runs compile tilec's sources each time")
    parser.add_argument("--no-cubin", action="store_true", help="leave out the PTX-to-cubin column")
    args = parser.parse_args()
    files = args.files or sorted(ROOT.glob("examples/**/*.tile"))
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; "
          f"bytecode cache {'off' if args.no_bytecode else 'on'}")
    for statement in (START_UP, IMPORTS):
        wall, cpu = cold_s(None, args.repeat, not args.no_bytecode, statement)
        print(f"python3 -c '{statement}': {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU")
    print(f"{'example':<36}{'target':<9}{'cold ms':>9}{'cold cpu':>10}{'warm ms':>9}{'warm cpu':>10}"
          f"{'new text':>10}{'cubin ms':>10}{'PTX lines':>11}")
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
        warm_cpu = median_s(lambda: compile_source(text, str(path)), args.repeat, time.process_time)
        texts = (f"{text}\n# compile {i}\n" for i in itertools.count())
        new_text = median_s(lambda: compile_source(next(texts), str(path)), args.repeat)
        cubin = None if args.no_cubin else median_s(lambda: assemble(result.ptx, target), args.repeat)
        cold, cold_cpu = cold_s(path, args.repeat, not args.no_bytecode)
        lines = result.ptx.count("\n")
        print(f"{name:<36}{target:<9}{cold * 1e3:>9.0f}{cold_cpu * 1e3:>10.0f}{warm * 1e3:>9.0f}"
              f"{warm_cpu * 1e3:>10.0f}{new_text * 1e3:>10.0f}{'-' if cubin is None else f'{cubin * 1e3:.0f}':>10}{lines:>11}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Run every GPU example under NVIDIA compute-sanitizer and summarise.

    python3 tools/sanitize.py [--tools memcheck,racecheck,synccheck] [--examples A,B] [--timeout 300]
    python3 tools/sanitize.py --run-one hopper/hgemm_v5.tile

The parent lists the examples (tests/example_launches.py: every program in
examples/ and examples/hopper/, each with the defines of a small launch),
keeps those the device in hand can run, and for each example and tool runs

    compute-sanitizer --tool TOOL --error-exitcode 9 python3 tools/sanitize.py --run-one EXAMPLE

so that each sanitizer sees one process that compiles (through the on-disk
cache the parent has filled), launches the example once on random inputs
and synchronises.  The table gives, per example and tool, the error count
from the sanitizer's ERROR SUMMARY, the result (clean, errors, failed: the
child itself failed, timeout, skipped, compile error) and a detail (the
sanitizer's first finding, or why); the output of every run that was not
clean follows it.  The exit status is 0 when every
run is clean, 1 otherwise (an example that does not compile counts), 2 when
compute-sanitizer or a GPU is missing.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import example_launches  # noqa: E402  (tests/example_launches.py)
from tilec.compiler.diagnostics import TilecError  # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck")
ERROR_EXIT = 9  # --error-exitcode: the sanitizer found errors

_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY")


@attrs.frozen
class Row:
    example: str
    tool: str  # "-" when no sanitizer ran
    errors: Optional[int]  # from the ERROR SUMMARY; None when there is none
    result: str  # "clean", "errors", "failed (...)", "timeout", "skipped", "compile error"
    detail: str = ""  # the sanitizer's first finding, why it was skipped, or the compile error
    output: str = attrs.field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return self.result in ("clean", "skipped")


def error_count(output: str) -> Optional[int]:
    """The count of the sanitizer's last ERROR SUMMARY line, if any.  A
    clean racecheck run of compute-sanitizer 2025 prints only its RACECHECK
    SUMMARY (hazards as errors and warnings): both count as findings."""
    counts = _SUMMARY.findall(output)
    if counts:
        return int(counts[-1])
    hazards = _RACE_SUMMARY.findall(output)
    return int(hazards[-1][0]) + int(hazards[-1][1]) if hazards else None


def first_finding(output: str) -> str:
    """The first report line of the sanitizer (`========= Invalid __global__
    read ...`), without its prefix; empty when it reported nothing."""
    for line in output.splitlines():
        m = re.match(r"=========\s(\S.*)$", line)
        if m and not m.group(1).startswith(_NOT_FINDINGS):
            return m.group(1).strip()
    return ""


def classify(example: str, tool: str, returncode: Optional[int], output: str) -> Row:
    """One sanitizer run as a row; `returncode` None means it timed out."""
    errors = error_count(output)
    if returncode is None:
        result = "timeout"
    elif returncode == ERROR_EXIT or (errors or 0) > 0:
        result = "errors"
    elif returncode != 0:
        result = f"failed (exit {returncode})"
    elif errors is None:
        result = "failed (no ERROR SUMMARY)"
    else:
        result = "clean"
    return Row(example, tool, errors, result, first_finding(output), output)


def format_table(rows: list) -> str:
    header = ("example", "tool", "errors", "result", "detail")
    cells = [header] + [
        (r.example, r.tool, "-" if r.errors is None else str(r.errors), r.result, r.detail) for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header) - 1)]
    lines = []
    for c in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(c, widths)) + "  " + c[-1])
    lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * len(header[-1]))
    return "\n".join(line.rstrip() for line in lines) + "\n"


def sanitize(example: str, tool: str, timeout: float) -> Row:
    command = [
        "compute-sanitizer", "--tool", tool, "--error-exitcode", str(ERROR_EXIT),
        sys.executable, str(Path(__file__).resolve()), "--run-one", example,
    ]  # fmt: skip
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        return classify(example, tool, None, output)
    return classify(example, tool, done.returncode, done.stdout + done.stderr)


def plan(names: list, compute_capability: tuple) -> tuple[list, list]:
    """(examples to sanitize, rows for the ones that are not): an example is
    skipped when it is not launched by design or the device cannot run its
    target, and reported when it does not compile at its small size."""
    runnable, rows = [], []
    for name in names:
        if name in example_launches.NOT_LAUNCHED:
            rows.append(Row(name, "-", None, "skipped", example_launches.NOT_LAUNCHED[name]))
        elif not example_launches.runs_on(name, compute_capability):
            rows.append(Row(name, "-", None, "skipped", f"{example_launches.target_of(name)} does not run here"))
        else:
            try:
                example_launches.compile_small(name)
            except TilecError as err:
                rows.append(Row(name, "-", None, "compile error", str(err).splitlines()[0]))
                continue
            runnable.append(name)
    return runnable, rows


def _arguments(argv):
    p = argparse.ArgumentParser(description="Run the GPU examples under compute-sanitizer.")
    p.add_argument("--run-one", metavar="EXAMPLE", help="launch one example once (the sanitizers' child)")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated compute-sanitizer tools")
    p.add_argument("--examples", help="comma-separated examples (paths under examples/); default: all")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per sanitizer run")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _arguments(argv)
    if args.run_one is not None:
        if args.run_one not in example_launches.SMALL:
            sys.stderr.write(f"sanitize: no small launch for {args.run_one} in tests/example_launches.py\n")
            return 2
        example_launches.launch(args.run_one)
        return 0
    if shutil.which("compute-sanitizer") is None:
        sys.stderr.write("sanitize: compute-sanitizer is not on PATH\n")
        return 2
    from tilec.runtime.driver import CudaError, device

    try:
        capability = device().compute_capability
    except CudaError as err:
        sys.stderr.write(f"sanitize: no GPU: {err.message}\n")
        return 2
    names = args.examples.split(",") if args.examples else example_launches.example_names()
    unknown = [n for n in names if n not in example_launches.SMALL and n not in example_launches.NOT_LAUNCHED]
    if unknown:
        sys.stderr.write(f"sanitize: no small launch for {', '.join(unknown)} in tests/example_launches.py\n")
        return 2
    runnable, rows = plan(names, capability)
    for name in runnable:
        for tool in args.tools.split(","):
            row = sanitize(name, tool, args.timeout)
            print(f"{name:<28} {tool:<10} {row.result}", flush=True)
            rows.append(row)
    rows.sort(key=lambda r: names.index(r.example))
    print()
    sys.stdout.write(format_table(rows))
    for r in rows:
        if not r.ok and r.output:
            print(f"\n===== {r.example} under {r.tool}: {r.result} =====")
            sys.stdout.write(r.output[-6000:])
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

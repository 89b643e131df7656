#!/usr/bin/env python3
"""Fuzz the tilec front end and passes for internal errors.

    python3 tools/fuzz.py --count 10000 --seed 1 [--out DIR] [--jobs 2]

Every input (a mutated example from examples/ or seed from
tests/bad_inputs.py, a random well-typed kernel, or a kernel at the edges:
deep nesting, other encodings and line terminators, operands at the ends of
their ranges, sizes at type limits -- all made by tests/strategies.py) is
compiled for every target; an input of bytes is decoded as a file would be.  A compile must
succeed, leaving IR that prints and parses back to itself, or raise a
`TilecError` that has a source span; anything else -- an exception of another
type, an error without a location, a compile that runs past --timeout
seconds, IR that does not round-trip -- is a failure.  Failures are grouped by (kind,
innermost tilec frame); the first input of each group is shrunk (lines, then
tokens, while the same failure persists) and written to DIR with its
traceback.  The summary lists the groups; the exit status is 1 when there is
any.

Input i of seed s is a function of (s, i) and of examples/ alone, so
`--seed s --start i --count 1` remakes it.
"""
from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import strategies  # noqa: E402  (tests/strategies.py)
from bad_inputs import SEEDS  # noqa: E402  (tests/bad_inputs.py)
from tilec.compiler import source  # noqa: E402
from tilec.compiler.diagnostics import TilecError  # noqa: E402
from tilec.pipeline import compile_source  # noqa: E402
from tilec.compiler.printer import print_module  # noqa: E402
from tilec.compiler.targets import TARGETS  # noqa: E402
from tilec.grammar.parser import parse  # noqa: E402

FILENAME = str(ROOT / "examples" / "hopper" / "fuzz.tile")
"""The name inputs are compiled under: beside the Hopper examples (it is
never read or written), so that their `include "gemm_epilogue.tile"`
resolves and their mutants reach the passes behind the include."""


def examples() -> list:
    """The texts mutated: the examples and the text seeds of bad inputs."""
    paths = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("examples/hopper/*.tile"))
    return [p.read_text() for p in paths] + [s.program for s in SEEDS if isinstance(s.program, str)]


def make_input(seed: int, index: int, sources: list):
    """Input `index` of run `seed`: a mutated example or seed, a generated
    kernel, a mutated generated kernel, or an edge-case kernel (text or
    bytes)."""
    c = strategies.RandomChooser(random.Random(f"{seed}:{index}"))
    kind = c.below(8)
    if kind < 3:
        return strategies.mutate(c.pick(sources), c)
    if kind >= 6:
        return strategies.edge_program(c)
    text = strategies.typed_program(c)
    return strategies.mutate(text, c) if kind == 5 else text


class Timeout(Exception):
    """The compile ran past the time limit."""


def _on_alarm(signum, frame):
    raise Timeout()


@attrs.frozen
class Outcome:
    """How one compile ended: `OK`, `LOCATED` (a located user error), or a
    failure of `kind` -- the exception type, "unlocated TilecError" or
    "Timeout" -- raised `where` (the innermost tilec frame,
    "tilec/passes/x.py:12 in f")."""

    kind: str
    where: str = ""
    message: str = ""
    trace: str = ""

    @property
    def failed(self) -> bool:
        return self not in (OK, LOCATED)

    @property
    def key(self) -> tuple:
        """What tells failures apart: the kind and the innermost frame's file
        and function (not its line, which moves as the code is edited)."""
        path, _, func = self.where.partition(" in ")
        return (self.kind, path.rsplit(":", 1)[0], func)


def _innermost_tilec_frame(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/tilec/" in f.filename.replace("\\", "/")]
    if not frames:
        return "<outside tilec>"
    f = frames[-1]
    path = Path(f.filename)
    try:
        path = path.relative_to(ROOT)
    except ValueError:
        pass
    return f"{path}:{f.lineno} in {f.name}"


OK = Outcome("ok")
LOCATED = Outcome("located error")


ROUND_TRIP_CHARS = 60_000
"""Printed IR longer than this many characters (a large `unroll` expanded)
is not parsed back: the parser reads about 45,000 characters a second, so
a longer round trip can run past --timeout on a loaded machine with no
fault of the compiler's (seed 27 input 5118: 2108 lines, 168,423
characters, 3.6 s to parse back).  The examples print 200 to 170,000
characters, all but two of them less than this."""


class Mismatch(Exception):
    """The printed IR of a compiled program parses to another module."""


def outcome(text: str, target: str, timeout: float) -> Outcome:
    """How compiling `text` for `target` ends, within `timeout` seconds; a
    compile that succeeds must also leave IR that prints and parses back."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    stage = "compile"
    try:
        if isinstance(text, bytes):
            text = source.decode(text, FILENAME)
        module = compile_source(text, FILENAME, target=target).module
        stage = "IR round trip"
        printed = print_module(module)
        if len(printed) > ROUND_TRIP_CHARS:
            return OK
        signal.setitimer(signal.ITIMER_REAL, timeout)
        if parse(printed, FILENAME) != module:
            raise Mismatch("the printed IR parses to a different module")
        return OK
    except TilecError as err:
        if err.span is not None and stage == "compile":
            return LOCATED
        kind, exc = "unlocated TilecError" if stage == "compile" else "TilecError", err
    except Timeout as err:
        kind, exc = "Timeout", err
    except RecursionError as err:  # before Exception: its traceback is huge
        kind, exc = "RecursionError", err
    except Exception as err:  # noqa: BLE001 -- every other exception is the finding
        kind, exc = type(err).__name__, err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if stage != "compile":
        kind += " in the IR round trip"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-12))
    return Outcome(kind, _innermost_tilec_frame(exc), str(exc)[:500], trace)


def shrink(text: str, target: str, key: tuple, timeout: float) -> str:
    """A smaller input failing the same way: drop chunks of lines, then of
    tokens, as long as the failure's key stays the same (ddmin, greedy)."""

    def fails(candidate: str) -> bool:
        return outcome(candidate, target, timeout).key == key

    for unit in ("lines", "tokens"):
        n = 2
        while True:
            if unit == "lines":
                pieces = text.split("\n")
                join = "\n".join
            else:
                pieces, join = _token_pieces(text), "".join
            if len(pieces) < 2:
                break
            n = min(n, len(pieces))
            size = -(-len(pieces) // n)
            for start in range(0, len(pieces), size):
                candidate = join(pieces[:start] + pieces[start + size:])
                if candidate != text and fails(candidate):
                    text = candidate
                    n = max(n - 1, 2)
                    break
            else:
                if n == len(pieces):
                    break
                n = min(len(pieces), n * 2)
    return text


def _token_pieces(text: str) -> list:
    """`text` cut so that each token is one piece together with the blank
    space before it (newlines stay with the next token's piece)."""
    pieces, last = [], 0
    for start, end, _, _ in strategies.tokens(text):
        pieces.append(text[last:end])
        last = end
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def _run_slice(args) -> tuple:
    seed, indices, targets, timeout = args
    sources = examples()
    found: dict = {}
    counts: Counter = Counter()
    for i in indices:
        text = make_input(seed, i, sources)
        for target in targets:
            f = outcome(text, target, timeout)
            counts[f.kind] += 1
            if f.failed and f.key not in found:
                found[f.key] = (f, text, target, i)
    return found, counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=1000, help="inputs to try (each on every target)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="the first input's index")
    p.add_argument("--out", default="fuzz-failures", help="where minimal failing inputs go")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per compile")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--no-shrink", action="store_true", help="write failing inputs as found")
    args = p.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    indices = list(range(args.start, args.start + args.count))
    jobs = max(1, args.jobs)
    slices = [(args.seed, indices[j::jobs], targets, args.timeout) for j in range(jobs)]
    began = time.perf_counter()
    if jobs == 1:
        results = [_run_slice(slices[0])]
    else:
        with multiprocessing.Pool(jobs) as pool:
            results = pool.map(_run_slice, slices)
    found: dict = {}
    counts: Counter = Counter()
    for f, c in results:
        counts.update(c)
        for key, item in f.items():
            if key not in found or item[3] < found[key][3]:
                found[key] = item
    out = Path(args.out)
    if found:
        out.mkdir(parents=True, exist_ok=True)
    by_kind = Counter(f.kind for f, _, _, _ in found.values())
    ok, located = counts.pop(OK.kind, 0), counts.pop(LOCATED.kind, 0)
    print(f"tilec fuzz: seed {args.seed}, {args.count} inputs, {ok + located + sum(counts.values())} "
          f"compiles on {', '.join(targets)}, {time.perf_counter() - began:.0f} s")
    print(f"compiled: {ok}; located errors: {located}; failing: {sum(counts.values())} "
          f"({len(found)} distinct)")
    for kind, n in sorted(by_kind.items()):
        print(f"  {kind}: {n} distinct, {counts[kind]} compiles")
    for number, (key, (f, text, target, i)) in enumerate(sorted(found.items()), 1):
        if not args.no_shrink and isinstance(text, str):
            text = shrink(text, target, key, args.timeout)
        stem = out / f"{number:03d}-{f.kind.replace(' ', '_')}"
        header = f"# tilec fuzz: {f.kind} at {f.where}; target {target}; seed {args.seed} input {i}\n"
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        stem.with_suffix(".tile").write_bytes(header.encode() + data + (b"" if data.endswith(b"\n") else b"\n"))
        stem.with_suffix(".txt").write_text(f"{f.kind} at {f.where} (target {target})\n\n{f.trace}")
        print(f"  {stem}.tile: {f.kind} at {f.where} [{target}]: {f.message.splitlines()[0] if f.message else ''}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

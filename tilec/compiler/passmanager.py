"""Passes, their context, and the manager that orders and runs them.

Passes declare the IR properties they need (`requires`), establish
(`provides`) and destroy (`invalidates`); the manager derives the order from
those declarations instead of trusting a hand-written list, so a new pass
cannot silently run before the analysis it depends on.  The order is a
topological sort of a graph (an edge from each provider to each requirer,
and from each requirer to each pass that invalidates what it requires),
broken by registration order so it is deterministic.  The sort is a few
lines of `heapq` because every compile orders the pipeline and importing
networkx costs a cold `tilec` run more than the rest of its start-up; networkx
is imported only to explain a cycle, which is a bug in tilec.

Instrumentation follows MLIR's pass manager: IR dumps before/after selected
passes (to a stream, or to numbered files in a directory), stopping after a
pass, a table of wall time per pass, and running the verifier after every
pass.
"""
from __future__ import annotations

import abc
import heapq
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence, TextIO

import attrs

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_module
from tilec.compiler.targets import Target


class Pass(abc.ABC):
    """One step of the pipeline: a function from module to module, plus the
    IR properties it needs and establishes."""

    name: str = ""
    requires: frozenset = frozenset()
    provides: frozenset = frozenset()
    invalidates: frozenset = frozenset()

    @abc.abstractmethod
    def apply(self, module: Optional[ir.Module], ctx: "PassContext") -> ir.Module:
        """Return the rewritten module (the first pass receives None)."""

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


ALL = "all"
"""The pass-name wildcard of the dump flags."""


HANG_TIMEOUT_NS = 2_000_000_000
"""How long an mbarrier wait may run under `Options.debug_hangs` before the
kernel reports it and traps: far beyond any wait of a working kernel."""


@attrs.define
class Options:
    """What the user asked of the pipeline beyond compiling: the
    instrumentation flags of the driver, and debugging code to emit."""

    dump_before: frozenset = frozenset()  # pass names, or {"all"}
    dump_after: frozenset = frozenset()
    dump_dir: Optional[str] = None  # dumps go to numbered files here instead of `stream`
    stop_after: Optional[str] = None
    time_passes: bool = False
    verify_each: bool = False
    debug_hangs: bool = False  # bound mbarrier waits; report and trap (emit_ptx/debug_hangs.py)
    stream: TextIO = attrs.field(factory=lambda: sys.stderr, eq=False, repr=False)


@attrs.define
class PassContext:
    """Everything a pass may read besides the module, and where passes leave
    output that is not IR (`artifacts["ptx"]`, `artifacts["meta"]`)."""

    target: Optional[Target] = None  # None until `parse` resolves it from the file
    filename: str = "<string>"
    source: str = ""
    defines: dict = attrs.field(factory=dict)  # -D NAME=VALUE, values as written
    options: Options = attrs.field(factory=Options)
    artifacts: dict = attrs.field(factory=dict)
    timings: dict = attrs.field(factory=dict)  # pass name -> wall seconds, in run order


class PipelineError(Exception):
    """The registered passes cannot be ordered: a bug in tilec, not in the
    user's program."""


def order_passes(passes: Sequence[Pass]) -> list:
    """The passes in dependency order, ties broken by registration order."""
    index = {}
    for i, p in enumerate(passes):
        if p.name in index:
            raise PipelineError(f"two passes are named '{p.name}'")
        index[p.name] = i
    providers = {}
    for p in passes:
        for prop in p.provides:
            if prop in providers:
                raise PipelineError(
                    f"'{prop}' is provided by both '{providers[prop].name}' and '{p.name}'"
                )
            providers[prop] = p
    edges = {}  # (from, to) -> why; insertion-ordered like a networkx DiGraph's
    for p in passes:
        for prop in sorted(p.requires):
            if prop not in providers:
                raise PipelineError(
                    f"pass '{p.name}' requires '{prop}', which no pass provides"
                )
            edges[providers[prop].name, p.name] = f"'{prop}'"
    for p in passes:
        for prop in sorted(p.invalidates):
            for q in passes:
                if q is not p and prop in q.requires:
                    edges[q.name, p.name] = f"'{prop}' (invalidated)"
    names = _lexicographic_topological_sort(index, edges)
    if names is None:
        raise PipelineError(_cycle_message(index, edges))
    by_name = {p.name: p for p in passes}
    return [by_name[n] for n in names]


def _lexicographic_topological_sort(index: dict, edges: dict) -> Optional[list]:
    """Kahn's algorithm taking, among the nodes whose predecessors are all
    placed, the one of lowest `index` (networkx's
    `lexicographical_topological_sort` with that key); None on a cycle."""
    successors = {name: [] for name in index}
    indegree = dict.fromkeys(index, 0)
    for a, b in edges:
        successors[a].append(b)
        indegree[b] += 1
    ready = [(i, name) for name, i in index.items() if indegree[name] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for succ in successors[name]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                heapq.heappush(ready, (index[succ], succ))
    return order if len(order) == len(index) else None


def _cycle_message(index: dict, edges: dict) -> str:
    import networkx as nx  # only here: see the module docstring

    graph = nx.DiGraph()
    graph.add_nodes_from(index)
    for (a, b), why in edges.items():
        graph.add_edge(a, b, why=why)
    cycle = nx.find_cycle(graph)
    path = " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
    whys = ", ".join(f"{a} -> {b} for {edges[a, b]}" for a, b in cycle)
    return f"the passes form a cycle: {path} ({whys})"


class PassManager:
    """Runs an ordered list of passes with the instrumentation of `Options`.

    `verify(module, ctx)` is called after each pass named in `verify_after`,
    and under `--verify-each` after every pass from the point where the IR
    has the properties `verify_requires` (the verifier reads IR as the front
    passes leave it and transforms nothing itself)."""

    def __init__(
        self,
        passes: Sequence[Pass],
        verify: Optional[Callable[[ir.Module, PassContext], None]] = None,
        verify_after: Iterable[str] = (),
        verify_requires: Iterable[str] = (),
    ):
        self.passes = order_passes(passes)
        self.verify = verify
        self.verify_after = frozenset(verify_after)
        self.verify_requires = frozenset(verify_requires)
        unknown = sorted(self.verify_after - set(self.names))
        if unknown:
            raise PipelineError(f"verify_after names passes that are not registered: {', '.join(unknown)}")

    @property
    def names(self) -> list:
        return [p.name for p in self.passes]

    def check_pass_names(self, names: Iterable[str], flag: str, allow_all: bool = False) -> None:
        """A user error for any name that is not a pass of this pipeline."""
        for name in names:
            if name == ALL and allow_all:
                continue
            if name not in self.names:
                raise TilecError(
                    f"unknown pass '{name}' in {flag} (passes: {', '.join(self.names)})"
                )

    def describe(self) -> str:
        """The ordered pipeline with each pass's requires/provides/invalidates."""
        lines = []
        for i, p in enumerate(self.passes, 1):
            parts = [f"{i:2d}. {p.name}"]
            for label, props in (
                ("requires", p.requires),
                ("provides", p.provides),
                ("invalidates", p.invalidates),
            ):
                if props:
                    parts.append(f"{label} {', '.join(sorted(props))}")
            lines.append("  ".join(parts))
        return "\n".join(lines) + "\n"

    def run(self, module: Optional[ir.Module], ctx: PassContext) -> Optional[ir.Module]:
        opts = ctx.options
        self.check_pass_names(opts.dump_before, "--dump-ir-before", allow_all=True)
        self.check_pass_names(opts.dump_after, "--dump-ir-after", allow_all=True)
        if opts.stop_after is not None:
            self.check_pass_names([opts.stop_after], "--stop-after")
        verify_seconds = 0.0
        ran_verifier = False
        established = set()
        for position, p in enumerate(self.passes, 1):
            if module is not None and _selected(p.name, opts.dump_before):
                self._dump(module, ctx, position, p.name, "before")
            start = time.perf_counter()
            stage = f"pass '{p.name}'"
            try:
                module = p.apply(module, ctx)
                ctx.timings[p.name] = time.perf_counter() - start
                established = (established - p.invalidates) | p.provides
                verifiable = opts.verify_each and self.verify_requires <= established
                if self.verify is not None and (verifiable or p.name in self.verify_after):
                    start, stage = time.perf_counter(), "the verifier"
                    self._verify(module, ctx, p.name)
                    verify_seconds += time.perf_counter() - start
                    ran_verifier = True
            except RecursionError:
                raise _too_deep(stage, module, ctx) from None
            if _selected(p.name, opts.dump_after):
                self._dump(module, ctx, position, p.name, "after")
            if p.name == opts.stop_after:
                break
        if opts.time_passes:
            rows = list(ctx.timings.items())
            if ran_verifier:
                rows.append(("(verifier)", verify_seconds))
            opts.stream.write(format_timings(rows))
        return module

    def _verify(self, module: ir.Module, ctx: PassContext, after: str) -> None:
        try:
            self.verify(module, ctx)
        except TilecError as err:
            if after not in self.verify_after:
                err.notes += (f"found by the verifier after pass '{after}'",)
            raise

    def _dump(self, module: ir.Module, ctx: PassContext, position: int, name: str, when: str) -> None:
        text = print_module(module)
        if ctx.options.dump_dir is not None:
            folder = Path(ctx.options.dump_dir)
            folder.mkdir(parents=True, exist_ok=True)
            suffix = ".tile" if when == "after" else ".before.tile"
            (folder / f"{position:02d}-{name}{suffix}").write_text(text, encoding="utf-8")
        else:
            stream = ctx.options.stream
            stream.write(f"# -----// IR Dump {when.capitalize()} {name} //----- #\n")
            stream.write(text if text.endswith("\n") else text + "\n")


def _too_deep(stage: str, module: Optional[ir.Module], ctx: PassContext) -> TilecError:
    """The error for a program whose IR nests deeper than Python's recursion
    limit allows a pass to walk it.  The parser refuses deep source; this
    catches IR that grows deep later (metas substituted into metas), located
    at the kernel being compiled when there is one."""
    span = module.kernels[0].span if module is not None and module.kernels else None
    if span is None:
        span = ir.Span(ctx.filename, 1, 1, 1, 2)
    return TilecError(
        f"the program nests too deeply for {stage} once metas and helpers are "
        "substituted; split deep expressions with intermediate variables",
        span,
    )


def _selected(name: str, chosen: frozenset) -> bool:
    return ALL in chosen or name in chosen


def format_timings(rows: Sequence[tuple]) -> str:
    """The `--time-passes` table: wall milliseconds and share per row, then the total."""
    total = sum(seconds for _, seconds in rows)
    width = max([len("total")] + [len(name) for name, _ in rows])
    rule = "=" * (width + 24)
    lines = [rule, "tilec pass timing (wall clock)".center(len(rule)).rstrip(), rule]
    lines.append(f"{'pass':<{width}}  {'ms':>10}  {'share':>8}")
    for name, seconds in rows + [("total", total)]:
        share = 100.0 * seconds / total if total > 0 else 0.0
        lines.append(f"{name:<{width}}  {seconds * 1e3:10.3f}  {share:7.1f}%")
    return "\n".join(lines) + "\n"

"""Passes, their context, and the manager that orders and runs them.

Passes declare the IR properties they need (`requires`) and establish
(`provides`); the manager derives the order from those declarations instead
of trusting a hand-written list, so a new pass cannot silently run before
the analysis it depends on.  The order is a topological sort of a graph (an
edge from each provider to each requirer), broken by registration order so
it is deterministic.  The declarations are kept honest: a property nobody
provides, a cycle, and a property that is provided but neither required by
a pass or the verifier nor named a final product of the pipeline are
errors, each naming the passes involved.  (No pass destroys a property that
a later pass needs, so there is no `invalidates`: a property once provided
holds to the end.)  The sort is a few
lines of `heapq` because every compile orders the pipeline and importing
networkx costs a cold `tilec` run more than the rest of its start-up; networkx
is imported only to explain a cycle, which is a bug in tilec.

Instrumentation follows MLIR's `PassInstrumentation`: objects with hooks
run before each pass, after it, and after it fails, and once when the
pipeline ends.  The verifier, IR dumps (to a stream, or to numbered files
in a directory), the reproducer a failing pass leaves in the dump
directory, and the table of wall time per pass are instrumentations;
stopping after a pass is the manager's own control flow.
"""
from __future__ import annotations

import abc
import gc
import heapq
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence, TextIO

from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.files import write_atomic
from tilec.compiler.targets import Target

if TYPE_CHECKING:
    from tilec.compiler import ir
    from tilec.compiler.symbols import Analyses, KernelSymbols

# The IR, its printer and the analyses are imported on first use, not with
# this module: the driver reads `HANG_TIMEOUT_NS` for its --help text, and
# `tilec --help` and `--version` need none of the compiler (the IR's classes
# and attrs are most of what importing it costs).


def _print_module(module: ir.Module) -> str:
    from tilec.compiler.printer import print_module

    return print_module(module)


def _new_analyses() -> Analyses:
    from tilec.compiler.symbols import Analyses

    return Analyses()


class Pass(abc.ABC):
    """One step of the pipeline: a function from module to module, plus the
    IR properties it needs and establishes."""

    name: str = ""
    requires: frozenset = frozenset()
    provides: frozenset = frozenset()

    @abc.abstractmethod
    def apply(self, module: Optional[ir.Module], ctx: "PassContext") -> ir.Module:
        """Return the rewritten module (the first pass receives None)."""

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


ALL = "all"
"""The pass-name wildcard of the dump flags."""


class gc_paused:
    """A `with` block run with Python's cyclic garbage collector off; on
    again after it if it was on before (so blocks nest, and a caller who had
    it off keeps it off).  tilec pauses it where it allocates by the hundred
    thousand what is never garbage: loading its modules (functions, classes,
    tables: `tilec.pipeline`), a compile (IR nodes, frozen trees that form
    no cycles: `compile_source`) and the driver's whole run (`tilec.cli`).
    There, each of the collector's passes -- one per 700 new objects, each
    walking much of what survived so far -- frees nothing; together they were
    5-10% of a compile and a twentieth of loading the compiler.  A class
    rather than a `contextlib.contextmanager`: the driver does not load
    contextlib to start."""

    __slots__ = ("_resume",)

    def __enter__(self) -> "gc_paused":
        self._resume = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._resume:
            gc.enable()


HANG_TIMEOUT_NS = 2_000_000_000
"""How long an mbarrier wait may run under `Options.debug_hangs` before the
kernel reports it and traps: far beyond any wait of a working kernel."""


@records.mutable
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
    line_info: bool = False  # .file/.loc directives mapping PTX to .tile lines (-g)
    instrumentations: tuple = ()  # further PassInstrumentation objects, run after the built-in ones
    stream: TextIO = records.field(factory=lambda: sys.stderr, eq=False, repr=False)


@records.mutable
class PassContext:
    """Everything a pass may read besides the module, and where passes leave
    output that is not IR (`artifacts["ptx"]`, `artifacts["meta"]`)."""

    target: Optional[Target] = None  # None until `parse` resolves it from the file
    filename: str = "<string>"
    source: str = ""
    defines: dict = records.field(factory=dict)  # -D NAME=VALUE, values as written
    options: Options = records.field(factory=Options)
    artifacts: dict = records.field(factory=dict)
    timings: dict = records.field(factory=dict)  # pass name -> wall seconds, in run order
    timings_extra: dict = records.field(factory=dict)  # other rows of --time-passes ("(verifier)")
    analyses: Analyses = records.field(factory=_new_analyses, eq=False, repr=False)  # see `symbols`

    def symbols(self, kernel: ir.Kernel, module: ir.Module) -> KernelSymbols:
        """The analysis of `kernel` (`tilec.compiler.symbols`), made once per
        kernel object of the compile and kept here for the passes after."""
        return self.analyses.of(kernel, module, self.target)


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


class PassInstrumentation:
    """Hooks around each pass, after MLIR's `PassInstrumentation`.  `module`
    is the pass's input in `before_pass` and `after_pass_failed` (None for
    the first pass), its output in `after_pass`; `position` is the pass's
    1-based place in the pipeline.  A hook may raise: an error from
    `after_pass` (the verifier's) counts as the pass's failure."""

    def before_pass(self, p: Pass, module: Optional[ir.Module], ctx: "PassContext", position: int) -> None:
        pass

    def after_pass(self, p: Pass, module: ir.Module, ctx: "PassContext", position: int) -> None:
        pass

    def after_pass_failed(
        self, p: Pass, module: Optional[ir.Module], ctx: "PassContext", position: int, error: BaseException
    ) -> None:
        pass

    def after_pipeline(self, ctx: "PassContext") -> None:
        pass


class PassManager:
    """Runs an ordered list of passes with the instrumentation of `Options`.

    `verify(module, ctx)` is called after each pass named in `verify_after`,
    and under `--verify-each` after every pass from the point where the IR
    has the properties `verify_requires` (the verifier reads IR as the front
    passes leave it and transforms nothing itself).  `products` are the
    properties the pipeline exists to establish (`ptx`); every other
    property a pass provides must be required by a pass or by the verifier."""

    def __init__(
        self,
        passes: Sequence[Pass],
        verify: Optional[Callable[[ir.Module, PassContext], None]] = None,
        verify_after: Iterable[str] = (),
        verify_requires: Iterable[str] = (),
        products: Iterable[str] = (),
    ):
        self.passes = order_passes(passes)
        self.verify = verify
        self.verify_after = frozenset(verify_after)
        self.verify_requires = frozenset(verify_requires)
        unknown = sorted(self.verify_after - set(self.names))
        if unknown:
            raise PipelineError(f"verify_after names passes that are not registered: {', '.join(unknown)}")
        _check_properties(self.passes, self.verify_requires, self.verify_after, frozenset(products))

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
        """The ordered pipeline with each pass's requires/provides."""
        lines = []
        for i, p in enumerate(self.passes, 1):
            parts = [f"{i:2d}. {p.name}"]
            for label, props in (("requires", p.requires), ("provides", p.provides)):
                if props:
                    parts.append(f"{label} {', '.join(sorted(props))}")
            lines.append("  ".join(parts))
        return "\n".join(lines) + "\n"

    def instrumentations(self, opts: "Options") -> list:
        """The hooks `opts` asks for, in the order they run after a pass:
        verify first (a dump after a pass shows IR the verifier accepted)."""
        out = []
        if self.verify is not None:
            out.append(Verification(self.verify, self.verify_after, self.verify_requires if opts.verify_each else None))
        if opts.dump_before or opts.dump_after:
            out.append(IRDumps(opts.dump_before, opts.dump_after))
        if opts.dump_dir is not None:
            out.append(FailureReproducer(opts.dump_dir))
        if opts.time_passes:
            out.append(TimingReport())
        return out

    def run(self, module: Optional[ir.Module], ctx: PassContext) -> Optional[ir.Module]:
        opts = ctx.options
        self.check_pass_names(opts.dump_before, "--dump-ir-before", allow_all=True)
        self.check_pass_names(opts.dump_after, "--dump-ir-after", allow_all=True)
        if opts.stop_after is not None:
            self.check_pass_names([opts.stop_after], "--stop-after")
        hooks = self.instrumentations(opts) + list(opts.instrumentations)
        for position, p in enumerate(self.passes, 1):
            for h in hooks:
                h.before_pass(p, module, ctx, position)
            given = module
            stage = f"pass '{p.name}'"
            try:
                start = time.perf_counter()
                module = p.apply(given, ctx)
                ctx.timings[p.name] = time.perf_counter() - start
                stage = "the verifier"  # the first hook after a pass, and the one that walks the IR
                for h in hooks:
                    h.after_pass(p, module, ctx, position)
            except Exception as err:
                error = _too_deep(stage, module, ctx) if isinstance(err, RecursionError) else err
                for h in hooks:
                    h.after_pass_failed(p, given, ctx, position, error)
                if error is not err:
                    raise error from None
                raise
            if p.name == opts.stop_after:
                break
        for h in hooks:
            h.after_pipeline(ctx)
        return module


def _check_properties(passes: Sequence[Pass], verify_requires: frozenset, verify_after: frozenset,
                      products: frozenset) -> None:
    """Every provided property is needed by someone (a later pass, the
    verifier) or is a product, and the verifier runs only where what it
    reads is established."""
    required = set(verify_requires)
    for p in passes:
        required |= p.requires
    established = set()
    for p in passes:
        for prop in sorted(p.provides - required - products):
            raise PipelineError(
                f"pass '{p.name}' provides '{prop}', which no pass or the verifier requires "
                "and which is not a product of the pipeline"
            )
        established |= p.provides
        missing = sorted(verify_requires - established)
        if p.name in verify_after and missing:
            raise PipelineError(
                f"the verifier runs after '{p.name}' but requires {', '.join(repr(m) for m in missing)}, "
                "not established by then"
            )


class Verification(PassInstrumentation):
    """The verifier after the passes in `after`, and (under --verify-each,
    `each` not None) after every pass once the IR has the properties
    `each`.  Its error after an unlisted pass says which pass it followed."""

    def __init__(self, verify, after: frozenset, each: Optional[frozenset]):
        self.verify, self.after, self.each = verify, after, each
        self.established = set()
        self.seconds = None  # wall time spent verifying; None until it ran

    def after_pass(self, p, module, ctx, position):
        self.established |= p.provides
        if not (p.name in self.after or (self.each is not None and self.each <= self.established)):
            return
        start = time.perf_counter()
        try:
            self.verify(module, ctx)
        except TilecError as err:
            if p.name not in self.after:
                err.notes += (f"found by the verifier after pass '{p.name}'",)
            raise
        finally:
            self.seconds = (self.seconds or 0.0) + time.perf_counter() - start

    def after_pipeline(self, ctx):
        if self.seconds is not None:
            ctx.timings_extra["(verifier)"] = self.seconds


class IRDumps(PassInstrumentation):
    """--dump-ir-before / --dump-ir-after: the IR to the options' stream, or
    to numbered files in --dump-dir (`NN-pass.tile`, `NN-pass.before.tile`)."""

    def __init__(self, before: frozenset, after: frozenset):
        self.before, self.after = before, after

    def before_pass(self, p, module, ctx, position):
        if module is not None and _selected(p.name, self.before):
            _dump(module, ctx, f"{position:02d}-{p.name}.before.tile", f"IR Dump Before {p.name}")

    def after_pass(self, p, module, ctx, position):
        if _selected(p.name, self.after):
            _dump(module, ctx, f"{position:02d}-{p.name}.tile", f"IR Dump After {p.name}")


class FailureReproducer(PassInstrumentation):
    """With --dump-dir, a pass that fails (an error of the user's program, a
    verifier complaint about its output, or a crash) leaves the IR it was
    given in `NN-pass.failed.tile`, so every failure comes with the input
    that reproduces it.  The error gets a note naming the file."""

    def __init__(self, folder: str):
        self.folder = folder

    def after_pass_failed(self, p, module, ctx, position, error):
        if module is None:
            return  # the first pass's input is the source file itself
        try:
            text = _print_module(module)
        except RecursionError:
            return  # IR too deep to print (the error says so)
        path = Path(self.folder) / f"{position:02d}-{p.name}.failed.tile"
        _write(path, text)
        note = f"the IR pass '{p.name}' was given is in {path}"
        if isinstance(error, TilecError):
            error.notes += (note,)
        elif hasattr(error, "add_note"):
            error.add_note(note)


class TimingReport(PassInstrumentation):
    """--time-passes: the table of wall time per pass (and the verifier's)
    to the options' stream when the pipeline ends."""

    def after_pipeline(self, ctx):
        rows = list(ctx.timings.items()) + list(ctx.timings_extra.items())
        ctx.options.stream.write(format_timings(rows))


def _dump(module: ir.Module, ctx: "PassContext", filename: str, banner: str) -> None:
    text = _print_module(module)
    if ctx.options.dump_dir is not None:
        _write(Path(ctx.options.dump_dir) / filename, text)
    else:
        stream = ctx.options.stream
        stream.write(f"# -----// {banner} //----- #\n")
        stream.write(text if text.endswith("\n") else text + "\n")


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as err:
        raise TilecError(f"cannot write the IR dump '{path}': {err.strerror or err}") from None


def _too_deep(stage: str, module: Optional[ir.Module], ctx: PassContext) -> TilecError:
    """The error for a program whose IR nests deeper than Python's recursion
    limit allows a pass to walk it.  The parser refuses deep source; this
    catches IR that grows deep later (metas substituted into metas), located
    at the kernel being compiled when there is one."""
    span = module.kernels[0].span if module is not None and module.kernels else None
    if span is None:
        from tilec.compiler.ir import Span

        span = Span(ctx.filename, 1, 1, 1, 2)
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

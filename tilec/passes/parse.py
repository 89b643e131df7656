"""The `parse` pass: source text to IR, its `include` lines resolved, and
the compilation target.

The target is resolved here because the file may name it: `--target` wins,
then the module's `target` line, then sm_90a.

`include "path.tile"` (docs/language.md, "Including files") brings the
consts and inline helpers of another file, found relative to the including
file (`tilec.compiler.source.include_path`).  This pass replaces the lines
by those declarations, the included ones first, in the order of the lines
(depth first), so every later pass, and the IR this pass prints, sees one
module that parses back as it is.  A file reached twice is taken once (two
files may share a third); a file that includes itself, directly or through
others, is an error at the line that closes the cycle.  An included file
holds consts and helpers only: no target line, no kernel.
"""
from __future__ import annotations

import functools
import os

import attrs

from tilec.compiler import ir, source, targets
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.grammar.parser import parse


class Parse(Pass):
    name = "parse"
    provides = frozenset({"parsed"})

    def apply(self, module, ctx: PassContext) -> ir.Module:
        module = parsed(ctx.source, ctx.filename)
        if module.includes:
            module = expand_includes(module, ctx.filename)
        if ctx.target is None:
            ctx.target = targets.target(module.target or targets.DEFAULT_TARGET, module.span)
        return module


def expand_includes(module: ir.Module, filename: str) -> ir.Module:
    """`module` (parsed from `filename`) with its `include` lines replaced by
    the consts and helpers of the files they name."""
    consts, helpers = [], []
    _gather(module, filename, (), set(), consts, helpers)
    return attrs.evolve(module, consts=tuple(consts), helpers=tuple(helpers), includes=())


def _gather(module: ir.Module, filename: str, chain: tuple, done: set, consts: list, helpers: list) -> None:
    """Append the declarations of `module`'s includes, then its own.
    `chain` holds (real path of the including file, include line) for the
    files being included, outermost first; `done` the real paths taken."""
    here = os.path.realpath(filename)
    for inc in module.includes:
        try:
            path = source.include_path(inc.path, filename)
        except TilecError as err:
            raise err.with_span(inc.span) from None
        real = os.path.realpath(path)
        if real == here or any(real == r for r, _ in chain):
            files = [i.span.file for _, i in chain] + [filename, path]
            raise TilecError(
                f"include \"{inc.path}\" makes a cycle: {' -> '.join(files)}",
                inc.span,
                notes=_included_from(chain),
            )
        if real in done:
            continue
        done.add(real)
        line = (here, inc)
        try:
            text = source.read(path)
        except TilecError as err:
            if err.span is not None:  # read, but not UTF-8: located in the included file
                raise _noted(err, chain + (line,)) from None
            raise TilecError(
                f"include \"{inc.path}\": cannot read '{path}' ({err.message.rpartition(': ')[2]})",
                inc.span,
                notes=_included_from(chain),
            ) from None
        try:
            included = parsed(text, path)
        except TilecError as err:
            raise _noted(err, chain + (line,)) from None
        if included.target is not None:
            raise TilecError(
                f"include \"{inc.path}\": '{path}' has a 'target' line; an included file holds consts "
                "and helpers only (the including file names the target)",
                inc.span,
            )
        if included.kernels:
            kernel = included.kernels[0]
            raise TilecError(
                f"kernel '{kernel.name}' is in an included file, which holds consts and helpers only",
                kernel.span,
                notes=_included_from(chain + (line,)),
            )
        _gather(included, path, chain + (line,), done, consts, helpers)
    consts.extend(module.consts)
    helpers.extend(module.helpers)


@functools.lru_cache(maxsize=64)
def parsed(text: str, path: str) -> ir.Module:
    """`parse(text, path)`, kept per process: a process that compiles one
    source many times -- the autotuner, one compile per set of `-D` values;
    the tests; a runtime compiling variants on first launch -- parses it
    once, and every kernel that includes a library file
    (`gemm_epilogue.tile`) shares its parse.  The parse depends on the text
    and the file name alone (the `-D` values are applied by expand-inline),
    and keyed on the text as read, an edited file parses afresh; the IR is
    immutable, so one tree can serve every compile.  A syntax error is not
    kept: it is raised again at each parse.  (Only the parse is kept: every
    later pass runs at each compile.)"""
    return parse(text, path)


def _noted(err: TilecError, chain: tuple) -> TilecError:
    """`err`, found in an included file, with the include lines that led there."""
    return TilecError(err.message, err.span, notes=err.notes + _included_from(chain))


def _included_from(chain: tuple) -> tuple:
    """Notes naming the include lines that led to a file, innermost first."""
    return tuple(f"included from {inc.span}" for _, inc in reversed(chain))

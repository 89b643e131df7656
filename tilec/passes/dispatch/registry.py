"""Which lowering ("variant") of a tile primitive applies to a call.

A tile primitive (`copy`, `gemm_async`, ...) has several lowerings per GPU
generation: TMA or cp.async or plain loads, tcgen05 or wgmma or mma.sync.
Each variant is one module that says, with named predicates, when it applies,
so adding a lowering never means editing a central switch, and a call that no
variant accepts gets an error listing, for every candidate, the first
condition that failed and why.

The dispatch pass builds a `TileOp` per primitive call and asks `select` for
the statements that replace it.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.builtins import TILE_PRIMITIVES
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.targets import TARGETS, Target
from tilec.compiler.tile_op import TileOp
from tilec.compiler.visit import NameGen

FAMILIES = tuple(dict.fromkeys(t.family for t in TARGETS.values()))
"""The target families a variant can list, oldest first."""


# --------------------------------------------------------------------------
# What a variant sees
# --------------------------------------------------------------------------


@records.frozen
class DispatchContext:
    """What a variant may consult besides the call: the target, the kernel's
    symbol information (`tilec.compiler.symbols`; buffers' scope, dtype, shape,
    layout), the generator of fresh names, and the conditions the call runs
    under (`guards`, outermost first; an `else` branch contributes `not cond`),
    which tell a warp-collective lowering whether every lane takes part."""

    target: Target
    symbols: object = None
    names: NameGen = records.field(factory=NameGen)
    guards: tuple = ()  # of ir.Expr

    def fresh(self, hint: str) -> str:
        return self.names.fresh(hint)


# --------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------

PredicateResult = Union[bool, tuple]  # ok, or (ok, reason or None)


@records.frozen
class Predicate:
    """A named condition of a variant.  `fn(op, ctx)` returns `ok` or `(ok,
    reason)`; the name and the reason are what the user reads when it fails."""

    name: str
    fn: Callable[[TileOp, DispatchContext], PredicateResult]

    def check(self, op: TileOp, ctx: DispatchContext) -> tuple[bool, Optional[str]]:
        result = self.fn(op, ctx)
        ok, reason = result if isinstance(result, tuple) else (result, None)
        if not isinstance(ok, bool) or not (reason is None or isinstance(reason, str)):
            raise TypeError(f"predicate {self.name} returned {result!r}, not ok or (ok, reason)")
        return ok, reason


def predicate(name: str, fn: Callable[[TileOp, DispatchContext], PredicateResult]) -> Predicate:
    return Predicate(name, fn)


class Decline(Exception):
    """Raised by a variant's implementation that finds, past its predicates,
    that it cannot lower this call; dispatch moves on to the next variant."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Lowering = Callable[[TileOp, DispatchContext], Sequence[ir.Stmt]]


@records.frozen
class Variant:
    op: str
    name: str
    families: tuple
    priority: int
    when: tuple  # of Predicate
    impl: Lowering

    def attempt(self, op: TileOp, ctx: DispatchContext):
        """The statements, or the string saying why this variant did not apply."""
        for pred in self.when:
            try:
                ok, reason = pred.check(op, ctx)
            except Decline as d:  # a predicate built on an analysis that declines
                ok, reason = False, d.reason
            if not ok:
                return f"rejected by {pred.name}" + (f": {reason}" if reason else "")
        try:
            stmts = self.impl(op, ctx)
        except Decline as d:
            return f"declined: {d.reason}"
        if not isinstance(stmts, (list, tuple)) or not all(isinstance(s, ir.Stmt) for s in stmts):
            raise TypeError(f"variant {self.op}/{self.name} returned {stmts!r}, not a list of statements")
        return tuple(stmts)


@records.frozen
class Selection:
    variant: Variant
    stmts: tuple  # of ir.Stmt replacing the call


class Registry:
    """The variants of every tile primitive, in descending priority (ties keep
    registration order)."""

    def __init__(self):
        self._variants: dict = {}

    def register(
        self,
        op: str,
        *,
        families: Sequence[str],
        name: str,
        priority: int = 0,
        when: Sequence[Predicate] = (),
    ) -> Callable[[Lowering], Lowering]:
        """Decorator adding the decorated lowering as variant `name` of `op`."""
        if op not in TILE_PRIMITIVES:
            raise ValueError(f"{op!r} is not a tile primitive ({', '.join(sorted(TILE_PRIMITIVES))})")
        if isinstance(families, str) or not families or any(f not in FAMILIES for f in families):
            raise ValueError(f"families must be a non-empty tuple drawn from {FAMILIES}, got {families!r}")
        if not name or any(c.isspace() for c in name):
            raise ValueError(f"variant name {name!r} must be a non-empty word")
        if any(v.name == name for v in self._variants.get(op, ())):
            raise ValueError(f"variant {name!r} of {op!r} is registered twice")
        if not all(isinstance(p, Predicate) for p in when):
            raise TypeError("when= takes predicate(name, fn) values")

        def decorate(fn: Lowering) -> Lowering:
            variant = Variant(op, name, tuple(families), priority, tuple(when), fn)
            variants = self._variants.setdefault(op, [])
            variants.append(variant)
            variants.sort(key=lambda v: -v.priority)  # stable: ties keep registration order
            return fn

        return decorate

    def variants(self, op: str) -> tuple:
        """Every variant of `op`, for any family, in the order dispatch tries them."""
        return tuple(self._variants.get(op, ()))

    def select(self, op: TileOp, ctx: DispatchContext) -> Selection:
        """The first variant, by descending priority, whose predicates pass and
        whose implementation does not decline; `dispatch="name"` tries only
        that one.  A TilecError at the call when none applies."""
        family = ctx.target.family
        candidates = self.variants(op.name)
        if op.dispatch is not None:
            forced = [v for v in candidates if v.name == op.dispatch]
            if not forced:
                known = ", ".join(sorted(v.name for v in candidates)) or "none is registered"
                raise TilecError(f"unknown variant '{op.dispatch}' of '{op.name}' (known: {known})", op.span)
            if family not in forced[0].families:
                raise TilecError(
                    f"variant '{op.dispatch}' of '{op.name}' is not available on {ctx.target} "
                    f"(it supports {', '.join(forced[0].families)})",
                    op.span,
                )
            candidates = forced
        rows = []
        for variant in candidates:
            if family not in variant.families:
                rows.append((variant, f"not available on {family} (supports {', '.join(variant.families)})"))
                continue
            outcome = variant.attempt(op, ctx)
            if isinstance(outcome, tuple):
                return Selection(variant, outcome)
            rows.append((variant, outcome))
        if op.dispatch is not None:
            header = f"variant '{op.dispatch}' of '{op.name}' does not accept this call on {ctx.target}"
        elif not rows:
            header = f"no variant of '{op.name}' is registered"
        else:
            header = f"no variant of '{op.name}' accepts this call on {ctx.target}"
        raise TilecError(header + _table(rows), op.span)


def _table(rows) -> str:
    if not rows:
        return ""
    cells = [("variant", "priority", "result")] + [(v.name, str(v.priority), why) for v, why in rows]
    w0 = max(len(c[0]) for c in cells) + 2
    w1 = max(len(c[1]) for c in cells) + 2
    return "".join(f"\n  {a:<{w0}}{b:<{w1}}{c}" for a, b, c in cells)


REGISTRY = Registry()
"""The registry the compiler dispatches with; variant modules register here."""

register = REGISTRY.register

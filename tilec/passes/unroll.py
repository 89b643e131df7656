"""The `unroll` pass: `for v in unroll(...)` becomes one copy of the body per
iteration, with `v` replaced by its value and the resulting constants folded.

Dispatch variants write their instruction nests as unroll loops (one `mma`
per (m, n, k) tile), so this runs after dispatch; after it, every register
index the emitter sees is a literal, which is what lets a register array live
in registers rather than local memory.  Nested unroll loops expand outside
in, so an inner loop's bounds may use the outer index.

The body of a loop is a scope of its own, run once per iteration, but the
copies land side by side in the enclosing block.  So a name the body binds
(`kp = s % 2`, or a mutable `acc: f32 = 0.0` declared in it) belongs to its
iteration: when its value folds to a literal the literal replaces its uses
(a plain binding only), otherwise each copy binds a fresh name.  A name
declared before the loop is not bound by the body but updated (`x = x + 1`
on a mutable scalar), and keeps its meaning across the copies.
"""
from __future__ import annotations

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.visit import NameGen
from tilec.compiler.fold import Copies

_LITERALS = (ir.Int, ir.Float, ir.Bool)

MAX_ITERATIONS = 1024
"""Iterations one unroll loop may have.  The examples' loops have at most 64;
beyond a few thousand copies the kernel is too large to compile in seconds
(or at all: `unroll(2**63 - 1)` would never finish), and `range` is the
loop for that."""

MAX_STATEMENTS = 8192
"""Statements the copies of one kernel's unroll loops may add up to, nested
loops multiplied (the largest example has a few hundred after unrolling)."""


class Unroll(Pass):
    name = "unroll"
    requires = frozenset({"dispatched"})
    provides = frozenset({"unrolled"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return unroll_module(module)


def unroll_module(module: ir.Module) -> ir.Module:
    kernels = tuple(
        attrs.evolve(k, body=_Unroller(k).block(k.body, frozenset(p.name for p in k.params)))
        for k in module.kernels
    )
    return attrs.evolve(module, kernels=kernels)


def _declare(visible: set, s: ir.Stmt) -> None:
    """Add to `visible` the names `s` assigns: declared in its block, or
    updated when already visible (the only other declarations, metas and
    tensor maps, are never assigned to)."""
    if type(s) is ir.Assign:
        for t in s.targets:
            if type(t) is ir.Name:
                visible.add(t.id)


class _Unroller:
    """Expands one kernel's unroll loops; `visible` arguments are the names
    declared before the statement in enclosing blocks."""

    def __init__(self, kernel: ir.Kernel):
        # (a dispatched kernel binds every name it uses: its statements give them all, no walk of
        # its expressions)
        self.names = NameGen.lazily(lambda: visit.bound_names(kernel))
        self.copied = 0  # statements written by expand, for MAX_STATEMENTS
        # id(loop) -> (loop, the Copies of its body): a nested loop's copies, made once per copy of the
        # loop around it, share what does not depend on the names replaced (the loop is kept so that
        # its id stays its own)
        self.copies: dict = {}

    def block(self, stmts, visible) -> tuple:
        visible = set(visible)
        out = []
        for s in stmts:
            if type(s) is _Nested:
                new = self.expand(s.loop, visible, s.env)
            elif isinstance(s, ir.For) and s.kind == "unroll":
                new = self.expand(s, visible, {})
            else:
                new = [self.inside(s, visible)]
            for n in new:
                _declare(visible, n)
            out.extend(new)
        return tuple(out)

    def inside(self, s: ir.Stmt, visible: set) -> ir.Stmt:
        fields = visit.block_fields(type(s))
        if not fields:
            return s
        inner = visible | {s.var} if isinstance(s, ir.For) else visible
        return visit.map_blocks(s, lambda block: self.block(block, inner), fields)

    def expand(self, loop: ir.For, visible: set, env: dict) -> list:
        """The copies of `loop`, whose names in `env` (an enclosing loop's
        copy's: its index and the names it bound) are replaced by their
        values in the bounds and in every copy of the body."""
        hit = self.copies.get(id(loop))
        first = hit is None or hit[0] is not loop
        if first:
            hit = self.copies[id(loop)] = (loop, Copies())
        copies = hit[1]
        try:
            bounds = []
            for what, e in (("start", loop.start), ("stop", loop.stop), ("step", loop.step)):
                value = copies.expr(e, env)
                if not isinstance(value, ir.Int):
                    raise TilecError(
                        f"the {what} of unroll loop '{loop.var}' must be a compile-time integer", e.span or loop.span
                    )
                bounds.append(value.value)
            start, stop, step = bounds
            if step == 0:
                raise TilecError(f"unroll loop '{loop.var}' has step 0", loop.step.span or loop.span)
            if first:  # (the body as written: the same for every copy of an enclosing loop)
                _check_not_rebound(loop)
            count = max(0, (stop - start + (step - 1 if step > 0 else step + 1)) // step)  # len() stops at 2**63
            if count > MAX_ITERATIONS:
                raise TilecError(
                    f"this unrolls {count} iterations (loop '{loop.var}'), more than the "
                    f"{MAX_ITERATIONS} tilec unrolls; use a range(...) loop, or split the tile operation",
                    loop.span,
                )
            out = []
            for i in range(start, stop, step):
                copy = self.block(self.iteration(copies, loop.body, visible, {**env, loop.var: ir.Int(i)}), visible)
                self.copied += _statements(copy)
                if self.copied > MAX_STATEMENTS:
                    raise TilecError(
                        f"unrolling makes more than {MAX_STATEMENTS} statements in this kernel; "
                        "make some unroll loops range(...) loops, or split the tile operations",
                        loop.span,
                    )
                out.extend(copy)
            return out
        finally:
            copies.close()  # (a rewriter is made again for the next env: see Copies.close)

    def iteration(self, copies: Copies, stmts, visible: set, env: dict) -> list:
        """One copy of a loop body, `env` (the loop variable's value and the
        enclosing copies' names) substituted and folded (by `copies`, the
        loop's), with the names it binds made its own.  A substituted literal
        may decide an `if`, whose taken branch then joins the copy (and its
        bindings with it).  An unroll loop in the copy is left to `block`,
        with the names as they are where it stands (`_Nested`): its copies
        take them with their own index in one substitution, rather than a
        copy of the loop being made first only for its copies to be made of
        that."""
        visible = set(visible)
        env = dict(env)
        pending, out = list(stmts), []
        while pending:
            s = pending.pop(0)
            if type(s) is ir.For and s.kind == "unroll":
                out.append(_Nested(s, dict(env)))
                continue
            folded = copies.block((s,), env)
            if len(folded) != 1:
                pending[:0] = folded
                continue
            (s,) = folded
            if isinstance(s, ir.Assign):
                s = self.bind(s, env, visible)
                if s is None:
                    continue
            _declare(visible, s)
            out.append(s)
        return out

    def bind(self, s: ir.Assign, env: dict, visible: set):
        """`s` with the names it binds (not `visible` ones) recorded in `env`:
        a plain binding of a literal is dropped, any other renamed fresh.
        None when nothing is left of it."""
        single = len(s.targets) == 1
        if single:
            values = (s.value,)
        elif isinstance(s.value, ir.TupleExpr) and len(s.value.items) == len(s.targets):
            values = s.value.items
        else:
            values = None  # one value unpacked into several names: rename only
        targets, kept = [], []
        for k, t in enumerate(s.targets):
            value = values[k] if values is not None else None
            if isinstance(t, ir.Name) and t.id not in visible:
                if s.type is None and isinstance(value, _LITERALS):
                    env[t.id] = value
                    continue
                t = ir.Name(self.names.fresh(t.id), span=t.span)
                env[s.targets[k].id] = t
            targets.append(t)
            kept.append(value)
        if not targets:
            return None
        if values is None:
            value = s.value
        elif len(kept) == 1:
            value = kept[0]
        else:
            value = visit.evolve(s.value, items=tuple(kept))
        return visit.evolve(s, targets=tuple(targets), value=value)


class _Nested:
    """An unroll loop inside a copy of an enclosing loop's body, as written,
    with the names (`env`) that copy replaces where the loop stands."""

    __slots__ = ("loop", "env")

    def __init__(self, loop: ir.For, env: dict):
        self.loop, self.env = loop, env


def _check_not_rebound(loop: ir.For) -> None:
    for n in visit.statements(loop.body):  # only statements bind names
        if isinstance(n, ir.For) and n.var == loop.var:
            raise TilecError(f"inner loop reuses the unroll variable '{loop.var}'", n.span)
        targets = ()
        if isinstance(n, ir.Assign):
            targets = n.targets
        elif isinstance(n, ir.AugAssign):
            targets = (n.target,)
        for t in targets:
            items = t.items if isinstance(t, ir.TupleExpr) else (t,)
            for item in items:
                if isinstance(item, ir.Name) and item.id == loop.var:
                    raise TilecError(f"cannot assign to the unroll variable '{loop.var}'", item.span)


def _statements(stmts) -> int:
    """How many statements `stmts` holds, nested bodies included."""
    return sum(1 for _ in visit.statements(stmts))

"""A tile primitive's operand `buf` or `buf[a:b, i, :]`, read once.

Every reader of regions -- the verifier, dispatch's operand reader, the TMA
planner -- needs the same facts: which buffer, where each dim starts (an
expression, possibly a run-time one) and how many elements it spans (a
compile-time integer when `stop - start` is one as a linear form:
`k * 64 + 64` minus `k * 64` is 64).  `Region.read` computes them and
`check_bounds` tells whether the region is inside its buffer, with one set
of messages whoever asks.

A region may run past the end of a *global* tensor where the hardware clips
it: a TMA load fills the positions outside the tensor and a TMA store skips
them (`past_end=True`).  A copy that really reads or writes memory there
keeps the check.
"""
from __future__ import annotations

import functools
from typing import Optional, Sequence

from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.affine import Affine, linear
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.fold import fold_expr
from tilec.compiler.printer import print_expr
from tilec.compiler.symbols import Buffer

__all__ = ["Region", "extent_expr", "plus"]


@records.frozen
class Region:
    """Per buffer dim its start (an expression) and extent (None when it is
    not a compile-time integer); a dim indexed by a scalar has extent 1 and
    `sliced` False.  The region's *shape* is its extents other than 1;
    regions of equal shape correspond element by element in row-major
    order of those dims."""

    buffer: Buffer
    starts: tuple
    extents: tuple
    expr: ir.Expr
    sliced: tuple = records.field(default=None, eq=False)

    @classmethod
    def read(cls, expr: ir.Expr, buf: Buffer) -> "Region":
        """The region `expr` names in `buf` (`expr` is `buf` or an index of
        it), starts and stops with their constants folded."""
        if not isinstance(expr, ir.Index):
            n = len(buf.shape)
            return cls(buf, (_ZERO,) * n, tuple(buf.shape), expr, (True,) * n)
        if len(expr.indices) != len(buf.shape):
            raise TilecError(
                f"'{buf.name}' has {len(buf.shape)} dimension(s), indexed with {len(expr.indices)}", expr.span
            )
        starts, extents, sliced = [], [], []
        for index, n in zip(expr.indices, buf.shape):
            if isinstance(index, ir.Slice) and index.start is None and index.stop is None:
                # `:`, the whole dim (most of a tile primitive's slices): nothing to fold or subtract
                starts.append(_ZERO)
                extents.append(n if isinstance(n, int) else None)
            elif isinstance(index, ir.Slice):
                start = _ZERO if index.start is None else _folded(index.start)
                stop = _folded(index.stop if index.stop is not None else extent_expr(n))
                starts.append(start)
                extents.append(_difference(stop, start))
            else:
                starts.append(_folded(index))
                extents.append(1)
            sliced.append(isinstance(index, ir.Slice))
        return cls(buf, tuple(starts), tuple(extents), expr, tuple(sliced))

    # ---- what it is -----------------------------------------------------

    @property
    def name(self) -> str:
        return self.buffer.name

    @functools.cached_property
    def dims(self) -> tuple:
        """The buffer dims the region extends over (extent > 1); worked out
        once (a lowering asks for each element it names)."""
        return tuple(d for d, e in enumerate(self.extents) if e != 1)

    @functools.cached_property
    def shape(self) -> tuple:
        return tuple(self.extents[d] for d in self.dims)

    @property
    def scope(self) -> str:
        return self.buffer.scope

    @property
    def is_local(self) -> bool:
        return self.buffer.scope == "local"

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    def const_starts(self) -> Optional[tuple]:
        """The starts as integers, or None when one is not a literal."""
        if all(isinstance(s, ir.Int) for s in self.starts):
            return tuple(s.value for s in self.starts)
        return None

    def affine_starts(self, atoms: Optional[dict] = None, divisor=None) -> tuple[Affine, ...]:
        """The starts as linear forms (`tilec.compiler.affine.linear`)."""
        return tuple(linear(s, atoms, divisor) for s in self.starts)

    def coordinate(self, index: Sequence[ir.Expr]) -> tuple:
        """The buffer coordinate (expressions) of region index `index` (one
        expression per region dim)."""
        out = list(self.starts)
        for d, i in zip(self.dims, index):
            out[d] = plus(self.starts[d], i)
        return tuple(out)

    def element(self, index: Sequence[ir.Expr]) -> ir.Index:
        return ir.Index(ir.Name(self.name), self.coordinate(index))

    # ---- checks ---------------------------------------------------------

    def check_extents(self) -> None:
        """A located error unless every extent is a compile-time integer."""
        for d, extent in enumerate(self.extents):
            if extent is None:
                i = self.expr.indices[d]
                start = i.start if i.start is not None else ir.Int(0)
                stop = i.stop if i.stop is not None else extent_expr(self.buffer.shape[d])
                raise TilecError(
                    f"the extent of dim {d} of region '{print_expr(self.expr)}' must be a compile-time "
                    f"integer (the slice runs from '{print_expr(start)}' to '{print_expr(stop)}')",
                    i.span or self.expr.span,
                )

    def check_bounds(self, past_end: bool = False) -> None:
        """A located error unless every dim with a compile-time start lies in
        the buffer and every compile-time extent is 1..size (a runtime
        extent's size is known at launch only: a start below 0 or an extent
        below 1 is all that is refused there).  With
        `past_end` a global tensor's region may run past its end (not start
        before it or past it): the hardware clips what lies outside."""
        past_end = past_end and self.buffer.scope == "global"
        for d, (start, extent, n) in enumerate(zip(self.starts, self.extents, self.buffer.shape)):
            if extent is None:
                continue
            index = self.expr.indices[d] if isinstance(self.expr, ir.Index) else None
            span = (index.span if index is not None else None) or self.expr.span
            lo = start.value if isinstance(start, ir.Int) else None
            if isinstance(n, str):
                if extent < 1 or lo is not None and lo < 0:
                    raise TilecError(
                        f"'{print_expr(self.expr)}' starts below 0 or is empty in dimension {d} of '{self.name}'",
                        span,
                    )
                continue
            if not self.sliced[d]:
                if lo is not None and not 0 <= lo < n:
                    raise TilecError(
                        f"index {lo} is out of bounds for dimension {d} of '{self.name}' (size {n})", span
                    )
                continue
            inside = 1 <= extent <= n and (lo is None or 0 <= lo and (lo + extent <= n or past_end and lo < n))
            if not inside:
                stop = print_expr(plus(start, ir.Int(extent)))
                raise TilecError(
                    f"slice {print_expr(start)}:{stop} is out of bounds for dimension {d} of "
                    f"'{self.name}' (size {n})",
                    span,
                )


_ZERO = ir.Int(0)  # (a frozen node: one serves every region starting at 0)


def _folded(e: ir.Expr) -> ir.Expr:
    """`e` with its constants folded; a literal is already (most scalar
    indices and many slice bounds are)."""
    return e if type(e) is ir.Int else fold_expr(e)


def _difference(stop: ir.Expr, start: ir.Expr) -> Optional[int]:
    """`stop - start` when it is a compile-time integer, else None.  Most
    slices are `x + a : x + b` or literals (`x` any expression, `a` and `b`
    integers, either maybe absent): their extent is `b - a`, read without
    building the linear forms (`linear`) that any other slice needs, and
    equal to what those would give."""
    x, a = _constant_part(start)
    y, b = _constant_part(stop)
    if x is y or x == y:
        return b - a
    d = linear(stop) - linear(start)
    return d.const if d.is_const else None


def _constant_part(e: ir.Expr) -> tuple:
    """(x, c) with `e` = `x + c`: a literal is (None, c), `x + 4` and
    `x - 4` are (x, 4) and (x, -4), anything else (e, 0)."""
    if type(e) is ir.Int:
        return None, e.value
    if type(e) is ir.Binary and type(e.rhs) is ir.Int and e.op in ("+", "-"):
        return e.lhs, e.rhs.value if e.op == "+" else -e.rhs.value
    return e, 0


def extent_expr(n) -> ir.Expr:
    """A buffer extent as an expression: a literal, or a runtime extent's name."""
    return ir.Name(n) if isinstance(n, str) else ir.Int(n)


def plus(a: ir.Expr, b) -> ir.Expr:
    """`a + b` (`b` may be an int), a zero dropped and constants folded."""
    b = ir.Int(b) if isinstance(b, int) else b
    if isinstance(b, ir.Int) and b.value == 0:
        return a
    if isinstance(a, ir.Int) and a.value == 0:
        return b
    return fold_expr(ir.Binary("+", a, b))

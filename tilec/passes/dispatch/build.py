"""Building the IR a lowering writes.  Arithmetic on thread positions and
indices goes through `add`/`mul`/`floordiv`/`mod`, which fold what they can
(`(x * 8) // 4` is `x * 2`, `(x % 4) // 8` is 0), so the lowered IR reads
like what an author would write; `copy_vec`, `assign` and `guarded` are the
statements most lowerings end in.  `located` places what a lowering built
at its call.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from tilec.compiler import ir, visit
from tilec.compiler.affine import linear
from tilec.compiler.fold import fold_expr
from tilec.compiler.region import Region, plus as add

__all__ = [
    "add", "assign", "built_at", "conj", "const", "copy_vec", "difference", "floordiv", "guarded",
    "located", "located_elements", "mod", "mul", "sharing_built",
]


def const(e: ir.Expr) -> Optional[int]:
    e = fold_expr(e)
    return e.value if isinstance(e, ir.Int) else None


def mul(a: ir.Expr, k: int) -> ir.Expr:
    if k == 0:
        return ir.Int(0)
    return a if k == 1 else fold_expr(ir.Binary("*", a, ir.Int(k)))


def _by_literal(a: ir.Expr, op: str):
    """(x, k) when `a` is `x op k` for a literal k."""
    if isinstance(a, ir.Binary) and a.op == op and isinstance(a.rhs, ir.Int):
        return a.lhs, a.rhs.value
    return None


def floordiv(a: ir.Expr, k: int) -> ir.Expr:
    if k == 1:
        return a
    scaled, divided, wrapped = _by_literal(a, "*"), _by_literal(a, "//"), _by_literal(a, "%")
    if scaled is not None and scaled[1] % k == 0:
        return mul(scaled[0], scaled[1] // k)
    if divided is not None and divided[1] > 0:
        return floordiv(divided[0], divided[1] * k)
    if wrapped is not None and 0 < wrapped[1] <= k:  # x % a is in [0, a)
        return ir.Int(0)
    return fold_expr(ir.Binary("//", a, ir.Int(k)))


def mod(a: ir.Expr, k: int) -> ir.Expr:
    scaled, wrapped = _by_literal(a, "*"), _by_literal(a, "%")
    if k == 1 or scaled is not None and scaled[1] % k == 0:
        return ir.Int(0)
    if wrapped is not None and wrapped[1] % k == 0:
        return mod(wrapped[0], k)
    divided = _by_literal(a, "//")
    inner = divided and _by_literal(divided[0], "%")
    if inner and divided[1] > 0 and -(-inner[1] // divided[1]) <= k:  # (x % a) // b < ceil(a / b)
        return a
    return fold_expr(ir.Binary("%", a, ir.Int(k)))


def conj(conds: Sequence[ir.Expr]) -> Optional[ir.Expr]:
    out = None
    for c in conds:
        out = c if out is None else ir.Binary("and", out, c)
    return out


def difference(stop: ir.Expr, start: ir.Expr) -> Optional[int]:
    """`stop - start` when it is a compile-time integer."""
    d = linear(fold_expr(ir.Binary("-", stop, start)))
    return d.const if d.is_const else None


def copy_vec(dst: ir.Index, src: ir.Index, v: int, span: Optional[ir.Span] = None) -> ir.Stmt:
    """`copy_vec(dst, src, v)`, at `span` when given (`dst` and `src`
    then placed there already: `located` keeps the statement as it is)."""
    return ir.ExprStmt(ir.Call("copy_vec", (dst, src, ir.Int(v, span=span)), span=span), span=span)


def assign(dst: ir.Expr, value: ir.Expr, span: Optional[ir.Span] = None) -> ir.Stmt:
    return ir.Assign((dst,), value, span=span)


def guarded(cond: Optional[ir.Expr], stmts: list) -> list:
    if cond is None or not stmts:
        return stmts
    return [ir.If(cond, tuple(stmts))]


def located(node: ir.Node, span: Optional[ir.Span]) -> ir.Node:
    """`node` with every node that has no source location placed at `span`,
    the call being lowered: dispatch places each statement a lowering
    returns, so that a later complaint about what it built points at the
    primitive that produced it.

    A node already at `span` (that very object) is kept with everything
    below it: a lowering builds a node at its call's span only of located
    parts (`register_element`'s elements, names and literals built at the
    span, or what it placed with this function: address arithmetic from
    `add`/`mul`, which fold into nodes without a location, or an operand
    taken from the program), so the hundreds of elements and instructions
    of a GEMM's statements need no walk; a node built without a span is
    rebuilt at `span`, its children placed the same way.  What is placed
    is kept for the kernel (`built_at(span).placed`): a lowering reuses
    subtrees, and so do the calls at one span (an inlined helper's, whose
    lane addresses are the kernel's), and each is rebuilt once."""
    if span is None:
        return node
    memo = built_at(span).placed

    def fn(n):
        at = n.span
        if at is span:
            return n
        done = memo.get(id(n))
        if done is not None:
            return done[1]
        new = visit.map_children(n, fn) if at is not None else visit.map_children(n, fn, span=span)
        memo[id(n)] = (n, new)  # `n` kept alive so that its id is not reused
        return new

    try:
        return fn(node)
    finally:
        fn = None  # see visit._NO_CYCLE


class Built:
    """What dispatch built at one call's span for the kernel it lowers:
    `placed` maps id(node) to (node, the node placed at the span)
    (`located`); `made` holds the register elements named there
    (`register_storage.register_elements`: by buffer name, its name node
    and its elements by coordinate; the indices by value) and the wgmma
    fragments made of them (`wgmma_fragment.fragment_elements`: by
    ("fragment", id of the coordinates), kept with them)).  Kept per span, not per call,
    because the calls of one inlined helper share their span and most of
    what they build (an epilogue's cast and stmatrix of each column
    block)."""

    __slots__ = ("span", "placed", "made")

    def __init__(self, span: ir.Span):
        self.span = span  # kept so that its id stays its
        self.placed: dict = {}
        self.made: dict = {}


_BUILT: list = []
"""The tables (id(span) -> Built) of the kernels being dispatched, the
innermost last (`sharing_built`)."""


class sharing_built:
    """A `with` block in which `built_at` shares what is built at each span:
    `dispatch_module`'s, one per kernel, so that nothing outlives the
    kernel's dispatch.  A class rather than a `contextlib.contextmanager`,
    like `passmanager.gc_paused`."""

    __slots__ = ()

    def __enter__(self) -> "sharing_built":
        _BUILT.append({})
        return self

    def __exit__(self, *exc_info) -> None:
        _BUILT.pop()


def built_at(span: ir.Span) -> Built:
    """What was built at `span` in the kernel being dispatched
    (`sharing_built`); asked outside one (a test's `select`), a new `Built`
    that shares nothing."""
    if not _BUILT:
        return Built(span)
    table = _BUILT[-1]
    found = table.get(id(span))
    if found is None:
        found = table[id(span)] = Built(span)
    return found


def located_elements(r: Region, span: ir.Span, dims: Optional[Sequence[int]] = None) -> Callable:
    """`located(r.element(index), span)` as a function of `index`, for a
    lowering that names many elements of one region with index expressions
    it shares between them (a register copy's hundred elements of memory,
    built from a few offsets of the thread per dim, which
    `register_storage.region_index` shares): each dim's coordinate for each
    index expression (keyed by its id, the expression kept so that the id
    stays its) is added to the start and placed once, and the elements,
    built at `span` of placed parts, need no walk in `located`.  `index`
    has one expression per dim of `dims` (the region's dims by default; a
    broadcast operand moves along fewer), the other dims stay at their
    start."""
    name = ir.Name(r.name, span=span)
    starts = r.starts
    placed = [located(s, span) for s in starts]
    made: dict = {}  # (dim, id(index expression)) -> (the expression, the coordinate at span)
    dims = r.dims if dims is None else dims

    def element(index: Sequence[ir.Expr]) -> ir.Index:
        coord = list(placed)
        for d, i in zip(dims, index):
            key = (d, id(i))
            found = made.get(key)
            if found is None:
                found = made[key] = (i, located(add(starts[d], i), span))
            coord[d] = found[1]
        return ir.Index(name, tuple(coord), span=span)

    return element

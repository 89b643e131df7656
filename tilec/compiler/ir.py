"""The tilec IR: immutable attrs nodes that mirror the .tile grammar one to one.

Every pass consumes and produces this IR, and the printer writes it back as
.tile text, so a dump taken between any two passes can be parsed again.  The
nodes are deliberately syntactic (calls, names, indexing) rather than a zoo of
typed operations: tile primitives, intrinsics, allocations and launch
declarations are all `Call`s whose meaning comes from the tables in
`tilec.compiler.builtins` and `tilec.compiler.intrinsics`.  That keeps the
grammar, the printer and the round trip small, and lets a lowering pass write
its output in exactly the notation a kernel author would use.

Source spans ride along on every node but take no part in equality or hashing.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import attrs

from tilec.compiler import records


@records.node
class Span:
    """Where a node came from: 1-based line and column, end exclusive."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def _span():
    return attrs.field(default=None, eq=False, hash=False, repr=False, kw_only=True)


class Node:
    """Base class for all IR nodes (expressions, statements, declarations).

    Every node class is a `records.frozen` class: equality, hashing and
    `repr` are the methods shared by all of them, as attrs' would be (two
    nodes are equal when they are of the same class and every field but the
    span is equal; the repr is `Binary(op='+', lhs=Name(id='i'), rhs=Int(value=1))`)."""

    span: Optional[Span]


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------


class Expr(Node):
    pass


@records.node
class Int(Expr):
    value: int
    span: Optional[Span] = _span()


@records.node
class Float(Expr):
    value: float
    span: Optional[Span] = _span()


@records.node
class Bool(Expr):
    value: bool
    span: Optional[Span] = _span()


@records.node
class Str(Expr):
    value: str
    span: Optional[Span] = _span()


@records.node
class Name(Expr):
    """A reference to a variable, constant, buffer, helper or thread axis."""

    id: str
    span: Optional[Span] = _span()


@records.node
class DTypeLit(Expr):
    """A dtype used as a value, e.g. the `f16` in `alloc((8, 8), f16)`."""

    name: str
    span: Optional[Span] = _span()


LITERALS = frozenset({Int, Float, Bool, Str, DTypeLit})
"""The literal expression classes: they name nothing and hold no node, so
a search for names or calls skips them (`type(e) in LITERALS`: node
classes have no subclasses)."""

NAMES = frozenset({Name})
"""A name's class alone: what a search for the names in a node looks for
(`visit.find_all(e, ir.NAMES)`)."""

LEAVES = LITERALS | NAMES
"""The expression classes that hold no node: the literals and names."""


@records.node
class Unary(Expr):
    op: str  # "-", "not", "~"
    operand: Expr
    span: Optional[Span] = _span()


@records.node
class Binary(Expr):
    op: str  # + - * / // % << >> & | ^ and or == != < <= > >=
    lhs: Expr
    rhs: Expr
    span: Optional[Span] = _span()


@records.node
class Select(Expr):
    """`a if cond else b`."""

    cond: Expr
    then: Expr
    orelse: Expr
    span: Optional[Span] = _span()


@records.node
class Keyword(Node):
    """A keyword argument `name=value`, or a `**value` splat when name is None."""

    name: Optional[str]
    value: Expr
    span: Optional[Span] = _span()


@records.node
class Call(Expr):
    """A call of a dotted function name: a builtin, a tile primitive (with its
    optional scope prefix, e.g. ``warp.gemm``), an intrinsic (``ptx.mbarrier.init``)
    or an inline helper."""

    func: str
    args: Tuple[Expr, ...] = ()
    kwargs: Tuple[Keyword, ...] = ()
    span: Optional[Span] = _span()


CALLS = frozenset({Call})
"""A call's class alone: what a search for the calls in a node looks for
(`visit.find_all(e, ir.CALLS)`)."""


@records.node
class Method(Expr):
    """`obj.name(args)`: buffer views (`.local`, `.view`, `.ptr_to`), the pool
    (`.alloc`), schedulers (`.valid`, `.next_tile`)."""

    obj: Expr
    name: str
    args: Tuple[Expr, ...] = ()
    kwargs: Tuple[Keyword, ...] = ()
    span: Optional[Span] = _span()


@records.node
class Attr(Expr):
    """`obj.name` without a call, e.g. `ts.m_idx`."""

    obj: Expr
    name: str
    span: Optional[Span] = _span()


@records.node
class Slice(Expr):
    """`start:stop` inside an index; either bound may be omitted."""

    start: Optional[Expr] = None
    stop: Optional[Expr] = None
    span: Optional[Span] = _span()


@records.node
class Index(Expr):
    """`base[i, j:k, ...]`: an element load, a region, or a store target."""

    base: Expr
    indices: Tuple[Expr, ...]
    span: Optional[Span] = _span()


@records.node
class TupleExpr(Expr):
    items: Tuple[Expr, ...]
    span: Optional[Span] = _span()


@records.node
class ListExpr(Expr):
    items: Tuple[Expr, ...]
    span: Optional[Span] = _span()


@records.node
class DictExpr(Expr):
    """`{"dispatch": "tma", "mbar": bar.ptr_to([0])}`: used with `**` splats."""

    keys: Tuple[str, ...]
    values: Tuple[Expr, ...]
    span: Optional[Span] = _span()


@records.node
class LayoutIter(Node):
    """One `extent:stride@axis` iterator of a layout literal.

    `stride` is None in the shape-only form `S[8, 256]`, where strides are
    implied row-major over memory.  `axis` is None for the memory axis `m`
    written without an `@`."""

    extent: Expr
    stride: Optional[Expr] = None
    axis: Optional[str] = None
    span: Optional[Span] = _span()


S_IS_A_LAYOUT = ("S[...] is always a layout literal, so a buffer named 'S' cannot be indexed or sliced: "
                 "rename it (e.g. 'S_' or 'scores')")
"""What every reader says where an `S[...]` stands for a buffer's element or
region: the name `S` heads layout literals wherever it is indexed."""


@records.node
class LayoutLit(Expr):
    """A layout in the seeds' notation:
    ``SW[pe, sw, atom] * S[(shape) : (strides)] + R[ext : stride@axis] + O[off@axis]``.

    The children are expressions so that symbolic extents (`BLK_N`) print back
    as written; the fold pass turns them into integers and
    `tilec.compiler.layout` gives the literal its meaning."""

    shard: Tuple[LayoutIter, ...]
    replica: Tuple[LayoutIter, ...] = ()
    offset: Tuple[LayoutIter, ...] = ()  # `O[3@TCol]`: extent is Int(1), stride the offset
    swizzle: Optional[Tuple[Expr, Expr, Expr]] = None
    span: Optional[Span] = _span()


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


class Stmt(Node):
    pass


@records.node
class Assign(Stmt):
    """`a = e`, `a, b = e1, e2`, `x: i32 = 0` (a typed mutable scalar), or a
    buffer-element store `buf[i] = e`."""

    targets: Tuple[Expr, ...]
    value: Expr
    type: Optional[str] = None
    span: Optional[Span] = _span()


@records.node
class AugAssign(Stmt):
    """`x op= e`."""

    target: Expr
    op: str
    value: Expr
    span: Optional[Span] = _span()


@records.node
class Meta(Stmt):
    """`meta name = expr`: a compile-time value substituted at each use (the
    seeds' `T.meta_var`)."""

    name: str
    value: Expr
    span: Optional[Span] = _span()


@records.node
class ExprStmt(Stmt):
    expr: Expr
    span: Optional[Span] = _span()


@records.node
class For(Stmt):
    """`for v in range(a, b, s):` (a runtime loop) or `for v in unroll(...)`
    (expanded at compile time).  `kind` is "range" or "unroll"."""

    var: str
    kind: str
    start: Expr
    stop: Expr
    step: Expr
    body: Tuple[Stmt, ...]
    span: Optional[Span] = _span()


@records.node
class If(Stmt):
    cond: Expr
    then: Tuple[Stmt, ...]
    orelse: Tuple[Stmt, ...] = ()
    span: Optional[Span] = _span()


@records.node
class While(Stmt):
    cond: Expr
    body: Tuple[Stmt, ...]
    span: Optional[Span] = _span()


@records.node
class Pass(Stmt):
    span: Optional[Span] = _span()


@records.node
class Return(Stmt):
    """`return expr` (or a bare `return`): the value of an inline helper
    called as an expression; only the last statement of a helper's body."""

    value: Optional[Expr] = None
    span: Optional[Span] = _span()


@records.node
class InlineDef(Stmt):
    """`inline def name(params):` a helper expanded at each call site, seeing
    the variables of its enclosing scope (the seeds' `@T.inline`)."""

    name: str
    params: Tuple[str, ...]
    body: Tuple[Stmt, ...]
    span: Optional[Span] = _span()


@records.node
class TensorMap(Stmt):
    """A TMA descriptor the host encodes before launch, written by plan-tma at
    the top of the kernel body:

    ``tensormap A_tmap0 = tensormap(A, f16, dims=(64, 8, 4), strides=(512, 128),
    box=(64, 8, 4), elem_strides=(1, 1, 1), interleave="none", swizzle="128B",
    l2_promotion="128B", oob_fill="zero")``

    dims, box and elem_strides are innermost first; strides are in bytes and
    leave out the innermost dimension's (it is the element size)."""

    name: str
    value: Call
    span: Optional[Span] = _span()


# --------------------------------------------------------------------------
# Declarations
# --------------------------------------------------------------------------


@records.node
class Param(Node):
    """A kernel parameter: a global buffer (`dtype[shape] layout L`) when
    `shape` is not None, else a scalar of `dtype`.  `cond` (`bias: f16[N] if
    HAS_BIAS`) makes it conditional: present only where the compile-time
    condition holds; `fold-constants` decides and drops it or the condition."""

    name: str
    dtype: str
    shape: Optional[Tuple[Expr, ...]] = None
    layout: Optional[Expr] = None
    cond: Optional[Expr] = None
    span: Optional[Span] = _span()


@records.node
class Kernel(Node):
    name: str
    params: Tuple[Param, ...]
    body: Tuple[Stmt, ...]
    span: Optional[Span] = _span()


@records.node
class Const(Node):
    """`const NAME = expr` at module level; overridable with `-D NAME=VALUE`."""

    name: str
    value: Expr
    span: Optional[Span] = _span()


@records.node
class Include(Node):
    """`include "path.tile"` at module level: the consts and helpers of that
    file, resolved relative to the including file.  The parser keeps the
    line; the `parse` pass replaces it by the file's declarations."""

    path: str
    span: Optional[Span] = _span()


@records.node
class Module(Node):
    target: Optional[str]
    consts: Tuple[Const, ...]
    helpers: Tuple[InlineDef, ...]
    kernels: Tuple[Kernel, ...]
    includes: Tuple[Include, ...] = ()
    span: Optional[Span] = _span()


AnyNode = Union[Expr, Stmt, Param, Kernel, Const, Include, Module, Keyword, LayoutIter]

"""Constant folding: compile-time arithmetic, with Python's meaning.

Once consts and metas are substituted, most extents, offsets and byte counts
in a kernel are literal arithmetic; later passes (smem planning, TMA planning,
dispatch) need them as integers.  The `fold-constants` pass folds a whole
module once; passes that build arithmetic of their own (unroll, dispatch,
scheduler lowering, assert checking) fold it with these functions.

Folding follows Python, the language the syntax borrows: `//` and `%` round toward negative infinity, `/` is true
division (a float), `and`/`or` short-circuit.  Only literals fold; an
expression with a runtime value stays as written, except that a constant
left operand of `and`/`or` decides or disappears.  An `if` whose condition
folds to a constant is replaced by the branch taken, and `while False` by
nothing, so a dispatch variant may emit a guard on an unrolled index freely.

Layout constructors (`tile_to`, `mma_shared_layout`, `tma_shared_layout`)
with constant arguments become `LayoutLit`s, and `SWIZZLE_*` names their mode
number, so every later pass sees one layout notation.
"""
from __future__ import annotations

import math
import operator

import attrs

from tilec.compiler import ir, layout_shape, shared_layouts, visit
from tilec.compiler.builtins import BUILTINS, PREDEFINED
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout_ir import to_layout, to_lit


def fold(node: ir.Node, names: set | None = None) -> ir.Node:
    """`node` with every constant expression folded and every constant `if`
    resolved (a module, kernel, statement or expression).  Folding is pure,
    so a subtree that expansion placed at many uses is folded once.  With
    `names`, the names `node` mentions are added to it (every name the
    folded node mentions among them), found in the same traversal.  The
    folded node is pruned only when an `if` or `while` condition in it is a
    literal: most are decided before (by expand-inline), and a prune looks
    at every statement."""
    decided = []  # the ifs and whiles whose condition is a literal bool once folded

    def fold_one(n):
        cls = type(n)
        if cls is ir.If or cls is ir.While:
            if type(n.cond) is ir.Bool:
                decided.append(n)
            return n
        if names is not None and cls is ir.Name:
            names.add(n.id)
        return _fold_node(n)

    folded = visit.transform(node, fold_one, pure=True, only=_FOLDED_AND_BRANCHES)
    return prune(folded) if decided else folded


def fold_expr(expr: ir.Expr) -> ir.Expr:
    return visit.transform(expr, _fold_node, only=_FOLDED)


class Copies:
    """The copies of one block of statements (an unroll loop's body), each
    with some names replaced by values (the loop variable's, the names a
    copy binds) and then folded, constant `if`s replaced by their taken
    branch: `block(stmts, env)` is `stmts` with each name in `env` (name ->
    literal or name) replaced by its value at the use's span, folded.

    The copies differ only where they mention a replaced name.  A subtree
    that mentions none folds to the same expression in every copy, so it is
    folded once, at its first copy, and that result is shared by the copies
    after it: a copy costs a visit of the nodes on a path to a replaced name
    (and their children), not of the whole body.  Folding visits the
    subtrees in the same order either way, so the result and the first
    error met are those of a fold of the whole substituted copy (an error
    is never kept: a subtree that raised is visited again, and raises
    again, in every copy that reaches it).  A shared result is kept with
    its subtree (ids stay their own while the object lives)."""

    def __init__(self):
        self._names = set()  # every name an `env` has held: a subtree mentioning one is never shared
        self._shared = {}  # id(subtree) -> (subtree, folded), for subtrees mentioning no name in _names
        self._env = self._child = self._release = None  # the last `env`, the rewriter reading it, its release

    def block(self, stmts, env: dict) -> tuple:
        child = self._child_for(env)
        out = []
        for s in stmts:
            new = child(s, type(s))
            out.append(s if new is None else new[0])
        return _prune_block(tuple(out))

    def expr(self, e: ir.Expr, env: dict) -> ir.Expr:
        """`e` with each name in `env` replaced by its value, folded."""
        new = self._child_for(env)(e, type(e))
        return e if new is None else new[0]

    def _child_for(self, env: dict):
        if not self._names.issuperset(env):
            self._names.update(env)  # what was shared may mention a name only now replaced
            self._shared.clear()
        if env is not self._env:  # (a copy's statements come one at a time, with one env that grows)
            self.close()
            self._child, self._release = self._rewriter(env)
            self._env = env
        return self._child

    def close(self) -> None:
        """Let go of the rewriter of the last `env`: its two functions call
        each other through their cells, a reference cycle that would keep
        them and the nodes they reach until the cyclic collector runs
        (visit._NO_CYCLE).  The shared results stay: a later `block` or
        `expr` makes a rewriter again."""
        if self._release is not None:
            self._release()
        self._env = self._child = self._release = None

    def _rewriter(self, env: dict):
        """(`child`, a function that empties the cells by which `child` and
        the `rewrite` it calls reach each other).  `child(node, type(node))`
        is None when `node` is kept as it is (a literal, a name neither
        replaced nor predefined), else (`node` substituted and folded,
        whether it mentions one of `names`).  Most nodes are literals and
        names, met as children: they are taken care of there, with no
        call."""
        names, shared, plans, Name, Binary, predefined = (
            self._names, self._shared, visit._PLANS, ir.Name, ir.Binary, PREDEFINED)
        folders, is_ = _FOLDERS, operator.is_

        def rewrite(n, cls):
            key = id(n)
            hit = shared.get(key)
            if hit is not None:
                return hit[1], False
            try:
                getter, children, _ = plans[cls]
            except KeyError:
                getter, children, _ = visit._plan(cls)
            varies = False
            values = getter(n)
            changed = None
            for i in children:
                value = values[i]
                t = type(value)
                if t is tuple:
                    if not value:
                        continue
                    items = []
                    for item in value:
                        t = type(item)
                        if t is Name:
                            if item.id in names:
                                varies = True
                                sub = env.get(item.id)
                                if sub is not None:
                                    item = _fold_node(visit.evolve(sub, span=item.span))
                                    items.append(item)
                                    continue
                            if item.id in predefined:
                                item = _fold_name(item)
                        elif t in composite:
                            item, v = rewrite(item, t)
                            varies = varies or v
                        elif t not in simple:
                            new = child(item, t)
                            if new is not None:
                                item, v = new
                                varies = varies or v
                        items.append(item)
                    if all(map(is_, items, value)):
                        continue
                    new = tuple(items)
                elif t is Name:
                    if value.id in names:
                        varies = True
                        sub = env.get(value.id)
                        if sub is not None:
                            new = _fold_node(visit.evolve(sub, span=value.span))
                        elif value.id in predefined:
                            new = _fold_name(value)
                        else:
                            continue
                    elif value.id in predefined:
                        new = _fold_name(value)
                    else:
                        continue
                elif t in composite:
                    new, v = rewrite(value, t)
                    varies = varies or v
                    if new is value:
                        continue
                elif t in simple:
                    continue
                else:
                    new = child(value, t)
                    if new is None:
                        continue
                    new, v = new
                    varies = varies or v
                    if new is value:
                        continue
                if changed is None:
                    changed = list(values)
                changed[i] = new
            if changed is None:
                fold_one = folders.get(cls)
                out = n if fold_one is None else fold_one(n)
            elif cls is Binary:  # (most fold to a literal: the node is built only if not)
                out = _binary_of(changed[0], changed[1], changed[2], n.span)
                if out is None:
                    out = cls(*changed, span=n.span)
            else:
                fold_one = folders.get(cls)
                out = cls(*changed, span=n.span)
                if fold_one is not None:
                    out = fold_one(out)
            if not varies:
                shared[key] = (n, out)
            return out, varies

        def child(n, cls):
            """A node of any class (and sorts a class met for the first time)."""
            if cls is Name:
                if n.id in names:
                    sub = env.get(n.id)
                    return _fold_node(n if sub is None else visit.evolve(sub, span=n.span)), True
                return (_fold_name(n), False) if n.id in predefined else None
            if cls in composite:
                return rewrite(n, cls)
            if not isinstance(n, ir.Node):
                return None
            try:
                children = plans[cls][1]
            except KeyError:
                children = visit._plan(cls)[1]
            if children:
                composite.add(cls)
                return rewrite(n, cls)
            simple.add(cls)  # a literal: no folder takes a node without children but a name
            return None

        def release():
            nonlocal rewrite, child
            rewrite = child = None

        composite, simple = _COMPOSITE, _SIMPLE
        return child, release


_COMPOSITE: set = set()
"""Node classes with children, as `Copies` meets them."""

_SIMPLE: set = {type(None)}
"""Node classes without children (nor a name), and None, as `Copies`
meets them: a copy keeps them as they are."""


def prune(node: ir.Node) -> ir.Node:
    """Resolve `if`/`while` statements whose condition is a literal bool.  A
    body left empty becomes `pass`, so the printed IR still parses.  A node
    with nothing to resolve is kept as it is."""
    cls = type(node)
    fields = _BLOCK_FIELDS.get(cls)
    if fields is None:
        fields = _BLOCK_FIELDS[cls] = _block_fields(cls)
    blocks, kernels = fields
    if not (blocks or kernels):
        return node
    if blocks:
        node = visit.map_blocks(node, _prune_block, blocks)
    if kernels:
        node = visit.keep(node, **{name: tuple(prune(v) for v in getattr(node, name)) for name in kernels})
    return node


def _block_fields(cls) -> tuple:
    """(the fields of `cls` that hold a block of statements, those that hold
    kernels), by their annotations in `ir.py`."""
    return (visit.block_fields(cls),
            tuple(f.name for f in attrs.fields(cls) if str(f.type) == "Tuple[Kernel, ...]"))


def branch_not_taken(s: ir.Stmt):
    """"then" or "orelse" for an `if` whose condition is a literal bool: the
    branch it does not take, which expand-inline leaves as written
    (unexpanded) and `prune` drops; None for any other statement.  The passes
    between expand-inline and fold-constants do not look into it."""
    if type(s) is ir.If and type(s.cond) is ir.Bool:
        return "orelse" if s.cond.value else "then"
    return None


_BLOCK_FIELDS: dict = {}
"""Node class -> `_block_fields(cls)`, asked of attrs once: `prune` looks at
every statement unroll folds, each copy of a loop body."""


def _prune_block(stmts: tuple) -> tuple:
    out = []
    for s in stmts:
        if isinstance(s, ir.If) and isinstance(s.cond, ir.Bool):
            out.extend(_prune_block(s.then if s.cond.value else s.orelse))
        elif isinstance(s, ir.While) and isinstance(s.cond, ir.Bool) and not s.cond.value:
            continue
        else:
            out.append(prune(s))
    return tuple(out)


# --------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------

_NUMBER = (ir.Int, ir.Float)

_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}
_INT_ONLY = {
    "<<": operator.lshift,
    ">>": operator.rshift,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
}
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _literal(value, span) -> ir.Expr:
    if isinstance(value, bool):
        return ir.Bool(value, span=span)
    if isinstance(value, int):
        return ir.Int(value, span=span)
    return ir.Float(float(value), span=span)


def _fold_node(node: ir.Node) -> ir.Node:
    fold_one = _FOLDERS.get(type(node))
    return node if fold_one is None else fold_one(node)


def _fold_select(node: ir.Select) -> ir.Expr:
    if isinstance(node.cond, ir.Bool):
        return node.then if node.cond.value else node.orelse
    return node


def _fold_call(node: ir.Call) -> ir.Expr:
    if node.func in ("min", "max"):
        return _fold_min_max(node)
    if node.func in _LAYOUT_CONSTRUCTORS:
        return _fold_layout(node)
    return node


def _fold_name(node: ir.Name) -> ir.Expr:
    if node.id in PREDEFINED:
        return ir.Int(PREDEFINED[node.id], span=node.span)
    return node


def _fold_unary(node: ir.Unary) -> ir.Expr:
    v = node.operand
    if node.op == "-" and isinstance(v, _NUMBER):
        return _literal(-v.value, node.span)
    if node.op == "not" and isinstance(v, ir.Bool):
        return ir.Bool(not v.value, span=node.span)
    if node.op == "~" and isinstance(v, ir.Int):
        return ir.Int(~v.value, span=node.span)
    return node


def _fold_binary(node: ir.Binary) -> ir.Expr:
    folded = _binary_of(node.op, node.lhs, node.rhs, node.span)
    return node if folded is None else folded


def _binary_of(op: str, a: ir.Expr, b: ir.Expr, span) -> ir.Expr | None:
    """`a op b` folded, at `span`, or None when it does not fold (`Copies`
    folds the operands of a copy before it builds the node)."""
    if op in ("and", "or"):
        if isinstance(a, ir.Bool):
            decided = a.value if op == "or" else not a.value
            return a if decided else b
        return None
    if op in ("==", "!=") and type(a) is type(b) and isinstance(a, (ir.Bool, ir.Str)):
        return ir.Bool(_COMPARE[op](a.value, b.value), span=span)
    if isinstance(a, ir.Bool) and isinstance(b, ir.Bool) and op in ("&", "|", "^"):
        return ir.Bool(_INT_ONLY[op](a.value, b.value), span=span)
    if not (isinstance(a, _NUMBER) and isinstance(b, _NUMBER)):
        return None
    x, y = a.value, b.value
    if op in _COMPARE:
        return ir.Bool(_COMPARE[op](x, y), span=span)
    if op in _ARITH:
        if op in ("/", "//", "%") and y == 0:
            raise TilecError("division by zero in a constant expression", span)
        return _literal(_in_64_bits(_ARITH[op](x, y), span), span)
    if op in _INT_ONLY and isinstance(a, ir.Int) and isinstance(b, ir.Int):
        if op in ("<<", ">>") and y < 0:
            raise TilecError(f"negative shift count {y}", span)
        if op == "<<" and x and y >= 64:  # raised before Python makes a number of y bits
            raise TilecError(f"constant expression overflows 64 bits (a shift left by {y})", span)
        return ir.Int(_in_64_bits(_INT_ONLY[op](x, y), span), span=span)
    return None


def _in_64_bits(value, span):
    """`value`, when an i64 or u64 can hold it (an integer) or it is a finite
    f64: other constants exist in no runtime type and have no literal to
    print, and folding more arithmetic on a huge integer only makes bigger
    ones (or fails to make a float)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise TilecError(f"constant expression overflows the f64 range (it is {value})", span)
    if isinstance(value, int) and not -(1 << 63) <= value < 1 << 64:
        raise TilecError(
            f"constant expression overflows 64 bits (its value needs {value.bit_length()} bits)", span
        )
    return value


def _fold_index(node: ir.Index) -> ir.Expr:
    base = node.base
    if not (isinstance(base, (ir.TupleExpr, ir.ListExpr)) and len(node.indices) == 1):
        return node
    i = node.indices[0]
    if not isinstance(i, ir.Int):
        return node
    if not -len(base.items) <= i.value < len(base.items):
        raise TilecError(
            f"index {i.value} is out of range for a tuple of {len(base.items)} items", i.span or node.span
        )
    return base.items[i.value]


def _fold_min_max(node: ir.Call) -> ir.Expr:
    items = node.args
    if len(items) == 1 and isinstance(items[0], (ir.TupleExpr, ir.ListExpr)):
        items = items[0].items
    if node.kwargs or not items or not all(isinstance(i, _NUMBER) for i in items):
        return node
    pick = min if node.func == "min" else max
    return pick(items, key=lambda i: i.value)


_LAYOUT_CONSTRUCTORS = {
    "mma_shared_layout": lambda v: shared_layouts.mma_shared_layout(v["dtype"], v["mode"], v["shape"]),
    "tma_shared_layout": lambda v: shared_layouts.tma_shared_layout(v["dtype"], v["mode"], v["shape"]),
    "tile_to": lambda v: layout_shape.tile_to(to_layout(v["layout"]), v["shape"], v["atom_shape"]),
    "reduce_layout": lambda v: layout_shape.reduce_dims(to_layout(v["layout"]), v["shape"], v["axes"]),
}


def _fold_layout(node: ir.Call) -> ir.Expr:
    """A layout constructor with literal arguments as the layout it makes."""
    row = BUILTINS[node.func]
    bound = row.signature.bind(node.func, node.args, node.kwargs, node.span)
    values = row.signature.literals(node.func, bound, node.span)
    layout = bound.get("layout")
    if layout is not None:
        if not isinstance(layout, ir.LayoutLit):
            raise TilecError(f"{node.func}: 'layout' must be a layout", layout.span or node.span)
        values["layout"] = layout
    try:
        made = _LAYOUT_CONSTRUCTORS[node.func](values)
    except TilecError as err:
        raise err.with_span(node.span)
    return attrs.evolve(to_lit(made), span=node.span)


_FOLDERS = {
    ir.Binary: _fold_binary,
    ir.Unary: _fold_unary,
    ir.Select: _fold_select,
    ir.Index: _fold_index,
    ir.Call: _fold_call,
    ir.Name: _fold_name,
}
"""Node class -> what folds a node of it (a class not listed folds to
itself).  The folder visits every node of every statement it folds; one
lookup replaces a chain of isinstance tests."""

_FOLDED = frozenset(_FOLDERS)
"""The classes a fold rewrites (`visit.transform`'s `only`)."""

_FOLDED_AND_BRANCHES = _FOLDED | {ir.If, ir.While}
"""What `fold` looks at: the classes it rewrites, and the statements `prune` resolves."""

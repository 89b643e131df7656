"""Readable output: repetitive statements written back as `unroll` loops."""
from __future__ import annotations

from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.passes.dispatch.build import add, located, mul
from tilec.passes.dispatch.registry import DispatchContext


_EQ_FIELDS: dict = {}  # node class -> a getter of the fields its equality compares (all but the span), as a tuple
_TUPLE = object()  # marks a tuple field's items in a key


def _eq_getter(cls):
    getter = visit.tuple_getter(tuple(f.name for f in attrs.fields(cls) if f.eq)) or (lambda n: ())
    _EQ_FIELDS[cls] = getter
    return getter


def _shape(node: ir.Node, memo: dict) -> tuple:
    """(key, integers) of `node`: the key (a flat tuple) compares equal
    exactly when two nodes would after every `Int` became `Int(0)` (attrs
    equality: the class, then every field but the span), and the integers
    are its `Int` values in walk (pre-)order.  Comparing keys is one
    C-level tuple comparison, where rebuilt trees compared node by node
    through attrs' `__eq__`; the key lists, in pre-order, each node's class
    and then its fields (a tuple as `_TUPLE`, its length, its items), which
    a node's class makes unambiguous (an element of constant indices is one
    entry: its buffer and rank).

    `memo` (id -> (key, integers)) holds every node keyed so far in one
    roll, whose statements are alive meanwhile (their ids stay theirs): a
    lowering shares subtrees between its statements (a region's start, a
    thread's offset along a dim, in each of a copy's hundred elements), and
    each is walked once."""
    cls = type(node)
    if cls is _Int:
        return (_Int,), (node.value,)
    if cls is _Index and type(node.base) is _Name and all(type(i) is _Int for i in node.indices):
        # a register element (`buf[2, 5]`), most of what a lowering names: one entry
        found = ((_Index, node.base.id, len(node.indices)),), tuple([i.value for i in node.indices])
    else:
        key, ints = [cls], []
        try:
            getter = _EQ_FIELDS[cls]
        except KeyError:
            getter = _eq_getter(cls)
        for v in getter(node):
            _field(v, key, ints, memo)
        found = tuple(key), tuple(ints)
    memo[id(node)] = found
    return found


def _field(v, key: list, ints: list, memo: dict) -> None:
    """A field's part of `_shape`'s key and integers, appended."""
    if type(v) is _Int:
        key.append(_Int)
        ints.append(v.value)
    elif isinstance(v, ir.Node):
        k, i = memo.get(id(v)) or _shape(v, memo)
        key += k
        ints += i
    elif type(v) is tuple:
        key.append(_TUPLE)
        key.append(len(v))
        for item in v:
            _field(item, key, ints, memo)
    else:
        key.append(v)


_Int, _Index, _Name = ir.Int, ir.Index, ir.Name


def _template(stmt: ir.Stmt, var: ir.Name, first: list, step: list, span) -> ir.Stmt:
    """`stmt` (the first of a run) with every integer that changes along the
    run written as `first + var * step`, placed at `span` (`_moving`)."""
    values = iter(zip(first, step))

    def fn(n):
        if not isinstance(n, ir.Int):
            return n
        v, d = next(values)
        return n if d == 0 else _moving(var, d, v, span)

    return _rewrite_preorder(stmt, fn)


def _rewrite_preorder(node: ir.Node, fn) -> ir.Node:
    """`fn` on every Int in walk (pre-)order, the order `_shape` collects them."""
    if isinstance(node, ir.Int):
        return fn(node)
    return visit.map_children(node, lambda child: _rewrite_preorder(child, fn))


def _moving(var: ir.Name, step: int, first: int, span) -> ir.Expr:
    """`first + var * step`, folded, at `span`: the call's, where it
    replaces an integer of a statement built there (`located` keeps such a
    statement as it is)."""
    return located(add(mul(var, step), first), span)


def roll(ctx: DispatchContext, stmts: list, span, shortest: int = 3, anchors: Optional[list] = None) -> list:
    """`stmts` with every run of `shortest` or more statements that differ
    only in integers, each changing by a fixed step, written as one `unroll`
    loop -- what an author would write; the unroll pass expands it again.
    `span` is the call's, the lowering's statements being built there.

    `anchors` (a tuple of integers per statement) lets a lowering that
    knows some of each statement's integers spare the keying of all of
    them where no run can be: integers of the statement (the coordinate of
    the register it names, say) found at the same place in every statement
    of the same shape.  In a run they step evenly, as all its integers do;
    where no `shortest` consecutive anchors do, there is no run, and
    `stmts` are returned as they are (a register copy of a wgmma fragment,
    whose registers hold rows 0 and 8 in turn, rolls nothing)."""
    if anchors is not None and not _may_run(anchors, shortest):
        return list(stmts)
    memo: dict = {}
    shapes, ints = zip(*[_shape(s, memo) for s in stmts]) if stmts else ((), ())
    out = []
    for i, j, step in _runs(shapes, ints, shortest):
        if step is None:
            out.append(stmts[i])
        else:
            var = ctx.fresh("j")
            body = _template(stmts[i], ir.Name(var), ints[i], step, span)
            out.append(ir.For(var, "unroll", ir.Int(0), ir.Int(j - i), ir.Int(1), (body,)))
    return out


def roll_rows(ctx: DispatchContext, rows: list, build, span, shortest: int = 3) -> list:
    """`roll` of the statements `build(kind, values)` makes from `rows` of
    (kind, integers), without building and keying each statement first: a
    lowering that writes one statement per register element (a cast's
    conversions) knows which of its statements have one shape (the same
    kind) and their integers (in the order `_shape` collects them).  A
    statement left alone is built from its integers; a run's body from
    `first + var * step` where its integer changes (an expression) and the
    integer where it does not, as `roll` would rewrite the run's first
    statement."""
    ints = [values for _, values in rows]
    if not _may_run([values[:2] for values in ints], shortest):
        # (a run's first two integers step evenly too: where none do, there is none, and the rest goes unread)
        return [build(kind, values) for kind, values in rows]
    kinds = [kind for kind, _ in rows]
    out = []
    for i, j, step in _runs(kinds, ints, shortest):
        if step is None:
            out.append(build(kinds[i], ints[i]))
        else:
            var = ir.Name(ctx.fresh("j"))
            values = [v if d == 0 else _moving(var, d, v, span) for v, d in zip(ints[i], step)]
            out.append(ir.For(var.id, "unroll", ir.Int(0), ir.Int(j - i), ir.Int(1), (build(kinds[i], values),)))
    return out


def _may_run(anchors: list, shortest: int) -> bool:
    """Whether some `shortest` (2 or more) consecutive `anchors` (tuples of
    integers) step evenly: one step, the same from each to the next -- a
    `shortest - 1` equal steps in a row, each step found once."""
    run, before = 0, None
    for a, b in zip(anchors, anchors[1:]):
        step = [y - x for x, y in zip(a, b)] if len(a) == len(b) else None
        run = 0 if step is None else run + 1 if step == before else 1
        if run == shortest - 1:
            return True
        before = step
    return False


def _runs(keys: list, ints: list, shortest: int):
    """(i, j, step) for each run keys[i:j] of `shortest` or more equal keys
    whose integers change by `step` from one to the next, and (i, i + 1,
    None) for each statement in no such run, in order."""
    i = 0
    while i < len(keys):
        key = keys[i]
        first = ints[i]
        j = i + 1
        step = None
        while j < len(keys) and keys[j] == key:
            values = ints[j]
            d = [b - a for a, b in zip(first, values)]
            if step is None:
                step = d
            elif any(v != a + (j - i) * s for a, v, s in zip(first, values, step)):
                break
            j += 1
        if j - i >= shortest:
            yield i, j, step
            i = j
        else:
            yield i, i + 1, None
            i += 1

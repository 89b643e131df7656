"""Generic traversal of the attrs IR.

Passes are written as small rewrites; these two helpers spare each of them a
hand-written walk over every node class.  Children are discovered from the
attrs fields, so a new node class needs no change here.
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Iterator

import attrs

from tilec.compiler import ir


_CHILD_FIELDS: dict = {}
"""Node class -> the names of its fields that may hold nodes.  Every pass walks
the IR many times over; asking attrs for the fields at each node is most of
what a walk costs."""

_GETTERS: dict = {}
"""Node class -> a function returning the values of those fields as a
tuple (one `attrgetter` call instead of a `getattr` per field), or None for
a class without such fields."""


_SCALAR_FIELDS = frozenset({"str", "int", "float", "bool", "Optional[str]", "Optional[int]", "Tuple[str, ...]"})
"""Field annotations (as `ir.py` writes them) that never hold a node: such
fields are not searched for children, so a `Name` or an `Int` is a leaf
without a look at its fields."""


def _child_fields(cls) -> tuple:
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = _CHILD_FIELDS[cls] = tuple(
            f.name for f in attrs.fields(cls) if f.name != "span" and str(f.type) not in _SCALAR_FIELDS
        )
    return names


def _getter(cls):
    names = _child_fields(cls)
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        getter = lambda n: (one(n),)  # noqa: E731
    elif names:
        getter = operator.attrgetter(*names)
    else:
        getter = None  # a leaf
    _GETTERS[cls] = getter
    return getter


def _child_list(node: ir.Node) -> list:
    try:
        getter = _GETTERS[type(node)]
    except KeyError:
        getter = _getter(type(node))
    if getter is None:
        return []
    Node = ir.Node
    out = []
    for value in getter(node):
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            out += [item for item in value if isinstance(item, Node)]
    return out


def children(node: ir.Node) -> Iterator[ir.Node]:
    """Direct child nodes, in field order (tuples flattened, None skipped)."""
    return iter(_child_list(node))


def walk(node: ir.Node) -> Iterator[ir.Node]:
    """Every node below and including `node`, pre-order.  (`_child_list`
    written out in the loop: a walk visits every node of a kernel, and the
    call per node was a third of its time; the children are pushed last
    first, straight onto the stack, rather than gathered in a list to be
    reversed and added.)"""
    stack = [node]
    pop, push, getters, Node = stack.pop, stack.append, _GETTERS, ir.Node
    while stack:
        node = pop()
        yield node
        try:
            getter = getters[type(node)]
        except KeyError:
            getter = _getter(type(node))
        if getter is None:
            continue
        for value in reversed(getter(node)):
            if isinstance(value, Node):
                push(value)
            elif isinstance(value, tuple):
                for item in reversed(value):
                    if isinstance(item, Node):
                        push(item)


def statements(stmts: Iterable[ir.Stmt]) -> Iterator[ir.Stmt]:
    """Every statement of a block, nested blocks included, in `walk`'s
    (pre-)order, without entering an expression: no statement is inside
    one, and a kernel holds far more expression nodes than statements, so
    what a pass asks of its assignments and loops needs no walk of them."""
    stack = list(stmts)
    stack.reverse()
    Stmt = ir.Stmt
    while stack:
        s = stack.pop()
        yield s
        inner = [c for c in _child_list(s) if isinstance(c, Stmt)]
        inner.reverse()
        stack += inner


def map_children(node: ir.Node, fn: Callable[[ir.Node], ir.Node], **also) -> ir.Node:
    """Rebuild `node` with `fn` applied to each direct child (not recursive);
    fields in `also` are replaced in the same rebuild (one node built, not
    two, where a caller changes a field besides the children)."""
    cls = type(node)
    try:
        getter = _GETTERS[cls]
    except KeyError:
        getter = _getter(cls)
    if getter is None:
        return _rebuild(node, also) if also else node
    Node = ir.Node
    changes = also or None
    for name, value in zip(_CHILD_FIELDS[cls], getter(node)):
        if isinstance(value, Node):
            new = fn(value)
            if new is value:
                continue
        elif isinstance(value, tuple) and value:
            items = [fn(v) if isinstance(v, Node) else v for v in value]
            if all(map(operator.is_, items, value)):
                continue  # nothing below changed: keep the node (and its identity)
            new = tuple(items)
        else:
            continue
        if changes is None:
            changes = {}
        changes[name] = new
    return _rebuild(node, changes) if changes else node


_INIT: dict = {}
"""Node class -> (a function returning the values of its positional fields
as a tuple, each such field's position).  Every IR class takes its fields
as positional `__init__` arguments of the same names, in order, and then
`span` as its one keyword-only argument (`ir._span`)."""


def evolve(node: ir.Node, **changes) -> ir.Node:
    """`attrs.evolve(node, **changes)` for IR nodes, without asking attrs for
    the fields of the class at each call, and passing them by position (a
    transform rebuilds thousands of nodes)."""
    return _rebuild(node, changes)


def _rebuild(node: ir.Node, changes: dict) -> ir.Node:
    """`evolve` with the changes as a dict (`map_children` builds one)."""
    cls = type(node)
    try:
        getter, position = _INIT[cls]
    except KeyError:
        getter, position = _INIT[cls] = _init_spec(cls)
    values = getter(node)
    span = node.span
    if changes:
        values = list(values)
        for name, value in changes.items():
            if name == "span":
                span = value
            else:
                values[position[name]] = value
    return cls(*values, span=span)


def _init_spec(cls) -> tuple:
    fields = attrs.fields(cls)
    assert [f.name for f in fields if f.kw_only] == ["span"], f"{cls.__name__}: only `span` is keyword-only"
    names = tuple(f.name for f in fields if not f.kw_only)
    if len(names) > 1:
        getter = operator.attrgetter(*names)
    elif names:
        one = operator.attrgetter(names[0])
        getter = lambda n: (one(n),)  # noqa: E731
    else:
        getter = lambda n: ()  # noqa: E731
    return getter, {name: i for i, name in enumerate(names)}


def transform(node: ir.Node, fn: Callable[[ir.Node], ir.Node], pure: bool = False) -> ir.Node:
    """Post-order rewrite: children first, then `fn` on the rebuilt node.

    `fn` returns the node unchanged to keep it.  Spans are preserved (a
    rebuilt node keeps its own).

    With `pure=True` (`fn`'s result depends on the node alone: no fresh
    names, no outside state), each node object is rewritten once and its
    result reused wherever the same object occurs again.  Substitution
    shares subtrees: expand-inline puts one const's, meta's or argument's
    expression object at every use, so an expanded kernel is a DAG
    (hgemm_v7's: 11.5k node occurrences, 5k distinct objects), and a
    rewrite of every occurrence repeats the same work.  Keying on `id` is
    safe here: every node visited is reachable from `node`, alive until the
    rewrite returns."""

    getters = _GETTERS
    if pure:
        done: dict = {}

        def rewrite(n):
            key = id(n)
            out = done.get(key)
            if out is None:
                try:
                    leaf = getters[type(n)] is None
                except KeyError:
                    leaf = _getter(type(n)) is None
                out = done[key] = fn(n if leaf else map_children(n, rewrite))
            return out

    else:

        def rewrite(n):
            try:
                leaf = getters[type(n)] is None
            except KeyError:
                leaf = _getter(type(n)) is None
            return fn(n if leaf else map_children(n, rewrite))

    return rewrite(node)


def identifiers(node: ir.Node, skip_helper_bodies: bool = False, module: ir.Module | None = None) -> set:
    """Every name that occurs in `node`: referenced, bound or declared.

    This is what a pass's fresh names must avoid.  `skip_helper_bodies` leaves
    out what an inline helper binds (its parameters and body), which are
    renamed on expansion anyway; `module` adds the names its consts and
    helpers declare, for a `node` (a kernel) that can see them.  (Nodes are
    told apart by their class alone: IR classes have no subclasses.)"""
    names = set()
    if module is not None:
        names.update(c.name for c in module.consts)
        names.update(h.name for h in module.helpers)
    Name, For, InlineDef = ir.Name, ir.For, ir.InlineDef
    declared = {ir.Param, ir.Meta, InlineDef, ir.TensorMap}
    for n in _outside_helpers(node) if skip_helper_bodies else walk(node):
        cls = type(n)
        if cls is Name:
            names.add(n.id)
        elif cls is For:
            names.add(n.var)
        elif cls in declared:
            names.add(n.name)
            if cls is InlineDef and not skip_helper_bodies:
                names.update(n.params)
    return names


def _outside_helpers(node: ir.Node) -> Iterator[ir.Node]:
    """`walk(node)` (in another order) without the bodies of inline helpers:
    an `InlineDef` is visited, what it holds is not."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if type(n) is not ir.InlineDef:
            stack += _child_list(n)


class NameGen:
    """Fresh identifiers for the temporaries a lowering introduces (descriptor
    registers, loop variables), distinct from every name already in the kernel
    and from each other.  A free hint is used as is, else `hint_1`, `hint_2`..."""

    def __init__(self, taken: Iterable[str] = ()):
        self._taken = set(taken)
        self._unread = None  # (node, module) whose identifiers are taken too

    @classmethod
    def avoiding(cls, node: ir.Node, module: ir.Module | None = None) -> "NameGen":
        """Names distinct from `identifiers(node, module=module)`, a walk
        made at the first `fresh`: the IR is immutable, so the set is the
        same then, and a pass that introduces no name (unroll of a kernel
        without locals to rename, plan-tma without a copy to plan) walks the
        kernel not at all."""
        gen = cls()
        gen._unread = (node, module)
        return gen

    def fresh(self, hint: str) -> str:
        if not hint.isidentifier():
            raise ValueError(f"name hint {hint!r} is not an identifier")
        if self._unread is not None:
            node, module = self._unread
            self._unread = None
            self._taken |= identifiers(node, module=module)
        name, n = hint, 0
        while name in self._taken:
            n += 1
            name = f"{hint}_{n}"
        self._taken.add(name)
        return name

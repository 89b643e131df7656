"""Generic traversal of the attrs IR.

Passes are written as small rewrites; these two helpers spare each of them a
hand-written walk over every node class.  Children are discovered from the
attrs fields, so a new node class needs no change here.
"""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Iterator, Sequence

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


def tuple_getter(names: tuple):
    """A function returning the fields `names` of a node as a tuple (one
    `attrgetter` call instead of a `getattr` per field), or None for no
    names."""
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda n: (one(n),)
    return operator.attrgetter(*names) if names else None


def _getter(cls):
    getter = _GETTERS[cls] = tuple_getter(_child_fields(cls))  # None: a leaf
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


def find_all(node: ir.Node, classes: frozenset) -> list:
    """The nodes of `node` (itself included) whose class is in `classes`,
    in `walk`'s pre-order.  What most walks are for -- a pass looking for
    the calls or the names in an expression -- without a generator's resume
    per node, and without a look at a child that has no children and is not
    looked for (a literal; a name, unless names are: half of the nodes)."""
    out = []
    skip = _KEPT.get(classes) or _kept(classes)
    stack = [node]
    pop, push, found, getters = stack.pop, stack.append, out.append, _BACKWARDS
    while stack:
        n = pop()
        cls = type(n)
        if cls in classes:
            found(n)
        try:
            getter = getters[cls]
        except KeyError:
            getter = getters[cls] = tuple_getter(_child_fields(cls)[::-1])
        if getter is None:
            continue
        for value in getter(n):  # (last first: the stack gives them back first first)
            t = type(value)
            if t in skip:
                continue
            if t is tuple:
                for item in reversed(value):
                    if type(item) not in skip:
                        push(item)
            else:
                push(value)
    return out


_BACKWARDS: dict = {}
"""Node class -> a function returning the values of its fields that may
hold nodes as a tuple, last field first, or None (`find_all`)."""


def statements(stmts: Iterable[ir.Stmt]) -> Iterator[ir.Stmt]:
    """Every statement of a block, nested blocks included, in `walk`'s
    (pre-)order, without entering an expression: no statement is inside
    one, and a kernel holds far more expression nodes than statements, so
    what a pass asks of its assignments and loops needs no walk of them."""
    stack = list(stmts)
    stack.reverse()
    blocks = _BLOCKS
    while stack:
        s = stack.pop()
        yield s
        try:
            fields = blocks[type(s)]
        except KeyError:
            fields = block_fields(type(s))
        for name in reversed(fields):
            inner = list(getattr(s, name))
            inner.reverse()
            stack += inner


def block_fields(cls) -> tuple:
    """The names of the fields of `cls` that hold a block of statements (a
    body, a branch), by their annotations in `ir.py`."""
    fields = _BLOCKS.get(cls)
    if fields is None:
        fields = _BLOCKS[cls] = tuple(f.name for f in attrs.fields(cls) if str(f.type) == "Tuple[Stmt, ...]")
    return fields


_BLOCKS: dict = {}
"""Node class -> `block_fields(cls)`, asked of attrs once: most statements
hold no block, and a walk of the statements looks at every one."""


def expressions(s: ir.Stmt) -> list:
    """The expressions statement `s` holds itself, not those of the
    statements nested in it, in field order (tuples flattened, None
    skipped).  Every statement class holds its expressions before its
    blocks, so these and then the nested statements' are `walk`'s order."""
    cls = type(s)
    try:
        getter = _OWN[cls]
    except KeyError:
        blocks = block_fields(cls)
        getter = _OWN[cls] = tuple_getter(tuple(f for f in _child_fields(cls) if f not in blocks))
    out = []
    if getter is not None:
        for value in getter(s):
            if type(value) is tuple:
                out += value
            elif value is not None:
                out.append(value)
    return out


_OWN: dict = {}
"""Statement class -> a function returning the values of its fields that
hold expressions (`expressions`), or None for a class without any."""


def map_children(node: ir.Node, fn: Callable[[ir.Node], ir.Node], **also) -> ir.Node:
    """Rebuild `node` with `fn` applied to each direct child (not recursive);
    fields in `also` are replaced in the same rebuild (one node built, not
    two, where a caller changes a field besides the children)."""
    cls = type(node)
    try:
        getter, children, position = _PLANS[cls]
    except KeyError:
        getter, children, position = _plan(cls)
    values = _mapped(getter(node), children, fn) if children else None
    if also:
        values = list(getter(node)) if values is None else values
        span = node.span
        for name, value in also.items():
            if name == "span":
                span = value
            else:
                values[position[name]] = value
        return cls(*values, span=span)
    return node if values is None else cls(*values, span=node.span)


def _mapped(values: tuple, children: tuple, fn) -> list | None:
    """`values` (a node's positional fields) with `fn` applied to the nodes
    in the fields at the positions `children`, as a list, or None when `fn`
    returned every node itself (the node is then kept, identity and all)."""
    Node = ir.Node
    out = None
    for i in children:
        value = values[i]
        if isinstance(value, Node):
            new = fn(value)
            if new is value:
                continue
        elif type(value) is tuple and value:
            items = [fn(v) if isinstance(v, Node) else v for v in value]
            if all(map(operator.is_, items, value)):
                continue  # nothing below changed: keep the tuple
            new = tuple(items)
        else:
            continue
        if out is None:
            out = list(values)
        out[i] = new
    return out


_PLANS: dict = {}
"""Node class -> (a function returning the values of its positional fields
as a tuple, the positions of the fields that may hold nodes, each field's
position by name).  Every IR class takes its fields as positional
`__init__` arguments of the same names, in order, and then `span` as its
one keyword-only argument (`ir._span`), so a rebuild reads the fields once
and passes them back by position."""


def keep(node: ir.Node, **fields) -> ir.Node:
    """`node` with `fields` replaced (`evolve`), or `node` itself when every
    new value is the old one (a tuple item by item): a rewrite that changes
    nothing below a node hands on the same object, so what is memoized on
    it (a kernel's analysis on the pass context, a pure rewrite's results)
    carries over to the passes after."""
    for name, value in fields.items():
        old = getattr(node, name)
        if value is old:
            continue
        if type(value) is tuple and type(old) is tuple and len(value) == len(old) \
                and all(map(operator.is_, value, old)):
            continue
        return evolve(node, **fields)
    return node


def map_blocks(s: ir.Stmt, fn: Callable[[tuple], tuple], fields: Sequence[str]) -> ir.Stmt:
    """`s` with `fn` applied to each of its blocks named in `fields` that
    holds statements; a block `fn` leaves empty becomes `pass` (an `orelse`
    stays empty), so the printed IR still parses; `s` itself when no block
    changed (`keep`)."""
    changes = {}
    for field in fields:
        value = getattr(s, field)
        if value:
            block = fn(value)
            changes[field] = block if block or field == "orelse" else (ir.Pass(span=value[0].span),)
    return keep(s, **changes)


def evolve(node: ir.Node, **changes) -> ir.Node:
    """`attrs.evolve(node, **changes)` for IR nodes, without asking attrs for
    the fields of the class at each call, and passing them by position (a
    transform rebuilds thousands of nodes)."""
    cls = type(node)
    try:
        getter, _, position = _PLANS[cls]
    except KeyError:
        getter, _, position = _plan(cls)
    values = getter(node)
    span = node.span
    if len(changes) == 1 and "span" in changes:  # (a value substituted at a use: most calls)
        return cls(*values, span=changes["span"])
    if changes:
        values = list(values)
        for name, value in changes.items():
            if name == "span":
                span = value
            else:
                values[position[name]] = value
    return cls(*values, span=span)


def _plan(cls) -> tuple:
    fields = attrs.fields(cls)
    assert [f.name for f in fields if f.kw_only] == ["span"], f"{cls.__name__}: only `span` is keyword-only"
    names = tuple(f.name for f in fields if not f.kw_only)
    getter = tuple_getter(names) or (lambda n: ())
    position = {name: i for i, name in enumerate(names)}
    plan = _PLANS[cls] = (getter, tuple(position[name] for name in _child_fields(cls)), position)
    return plan


# _NO_CYCLE: a recursive closure refers to itself through its cell, a
# reference cycle that keeps it, its memo and every node it made alive until
# the cyclic collector runs (after one gemm_stream_k compile, ~70k objects
# and 50-60 ms of collection).  Emptying the cell when the walk returns lets
# reference counting free them at once.


def transform(node: ir.Node, fn: Callable[[ir.Node], ir.Node], pure: bool = False, only=None) -> ir.Node:
    """Post-order rewrite: children first, then `fn` on the rebuilt node.

    `fn` returns the node unchanged to keep it.  Spans are preserved (a
    rebuilt node keeps its own).  With `only` (a set of node classes), `fn`
    is called on nodes of those classes alone and keeps every other: most
    rewrites change a few kinds of node, and a call per node was a good part
    of their time (`only` is a frozenset: see `_kept`).

    With `pure=True` (`fn`'s result depends on the node alone: no fresh
    names, no outside state), each node object with children is rewritten
    once and its result reused wherever the same object occurs again (a
    node without children is cheaper to give to `fn` again).  Substitution
    shares subtrees: expand-inline puts one const's, meta's or argument's
    expression object at every use, so an expanded kernel is a DAG
    (hgemm_v7's: 11.5k node occurrences, 5k distinct objects), and a
    rewrite of every occurrence repeats the same work.  Keying on `id` is
    safe here: every node visited is reachable from `node`, alive until the
    rewrite returns.

    (`map_children` written out in the recursion: a rewrite visits every
    node, and a call per node more was a good part of its time.  For the
    same reason a child whose class `fn` is never called on and that has
    no children -- a literal, or a name where names are not rewritten:
    half of the nodes -- is kept where it is met, with no call: `_kept`;
    and one that has no children and that `fn` is called on -- a name
    being substituted or folded -- is given to `fn` where it is met.)"""

    plans = _PLANS
    is_ = operator.is_
    done = {} if pure else None
    kept = _KEPT.get(only) or _kept(only)
    direct = _DIRECT.get(only)
    if direct is None:
        direct = _direct(only)

    def rewrite(n):
        cls = type(n)
        try:
            getter, children, _ = plans[cls]
        except KeyError:
            getter, children, _ = _plan(cls)
        if not children and only is not None and cls not in only:
            return n
        if done is not None:
            key = id(n)
            hit = done.get(key)
            if hit is not None:
                return hit
        if children:
            values = getter(n)
            changed = None
            for i in children:
                value = values[i]
                t = type(value)
                if t in kept:
                    continue
                if t is tuple:
                    if not value:
                        continue
                    items = [v if type(v) in kept else fn(v) if type(v) in direct else rewrite(v) for v in value]
                    if all(map(is_, items, value)):
                        continue
                    new = tuple(items)
                else:
                    new = fn(value) if t in direct else rewrite(value)
                    if new is value:
                        continue
                if changed is None:
                    changed = list(values)
                changed[i] = new
            if changed is not None:
                n = cls(*changed, span=n.span)
        out = fn(n) if only is None or cls in only else n
        if done is not None:
            done[key] = out
        return out

    try:
        return rewrite(node)
    finally:
        rewrite = None  # see _NO_CYCLE


def _kept(only) -> frozenset:
    """The classes of the child values that a `transform` with `only` keeps,
    and `find_all` looking for `only` passes over, without a look: None's,
    and with `only`, the IR classes without children that are not in it.
    (A child field holds a node, a tuple of nodes or None: `ir.py`'s
    annotations.)  Found once per `only` (None, or a frozenset of classes)."""
    kept = _KEPT.get(only)
    if kept is None:
        kept = {type(None)}
        if only is not None:
            kept.update(cls for cls in _ir_classes() if not _child_fields(cls) and cls not in only)
        kept = _KEPT[only] = frozenset(kept)
    return kept


_KEPT: dict = {}
"""only -> `_kept(only)`."""


def _direct(only) -> frozenset:
    """The classes without children that `fn` is called on (`transform`)."""
    direct = _DIRECT[only] = _kept(frozenset()) - _kept(only)
    return direct


_DIRECT: dict = {}
"""only -> `_direct(only)`."""


def _ir_classes() -> list:
    """The classes of IR nodes: those `ir.py` defines that derive from
    `ir.Node` and have no subclass (`Expr` and `Stmt` are only bases)."""
    return [cls for cls in vars(ir).values()
            if isinstance(cls, type) and issubclass(cls, ir.Node) and not cls.__subclasses__()]


def identifiers(node: ir.Node, skip_helper_bodies: bool = False, module: ir.Module | None = None,
                skipped: list | None = None) -> set:
    """Every name that occurs in `node`: referenced, bound or declared.

    This is what a pass's fresh names must avoid.  `skip_helper_bodies` leaves
    out what an inline helper binds (its parameters and body), which are
    renamed on expansion anyway, and appends the helpers so left to
    `skipped` (a list, when given): the names of `node` are then those
    returned and those of the helpers in `skipped`.  `module` adds the names
    its consts and helpers declare, for a `node` (a kernel) that can see
    them.  (Nodes are told apart by their class alone: IR classes have no
    subclasses.)"""
    names = set()
    if module is not None:
        names.update(c.name for c in module.consts)
        names.update(h.name for h in module.helpers)
    Name, For, InlineDef = ir.Name, ir.For, ir.InlineDef
    declared = {ir.Param, ir.Meta, InlineDef, ir.TensorMap}
    getters = _GETTERS
    add = names.add
    # (`walk` written out, in another order: a set does not need walk's, and
    # a generator's yield per node was much of the time.)  A kernel is a DAG:
    # substitution and lowering put one subtree object at many uses (each of
    # flash_attn_fwd's wgmma calls of a group takes the same 64-register
    # tuple: 28k node occurrences, 7k objects), and a subtree's names are
    # the same at each, so a node with children is entered once (`seen`);
    # names are taken from the children directly rather than pushed, and
    # leaves without a name (the literals, half of the nodes) not pushed.
    skip = _kept(ir.NAMES)  # None and the IR classes without children but Name
    seen = set()
    see = seen.add
    if type(node) is Name:
        return {*names, node.id}
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        key = id(n)
        if key in seen:
            continue
        see(key)
        cls = type(n)
        if cls is For:
            add(n.var)
        elif cls in declared:
            add(n.name)
            if cls is InlineDef:
                if skip_helper_bodies:
                    if skipped is not None:
                        skipped.append(n)
                    continue
                names.update(n.params)
        try:
            getter = getters[cls]
        except KeyError:
            getter = _getter(cls)
        if getter is None:
            continue
        for value in getter(n):
            t = type(value)
            if t is Name:
                add(value.id)
            elif t is tuple:
                for item in value:
                    t = type(item)
                    if t is Name:
                        add(item.id)
                    elif t not in skip:
                        push(item)
            elif t not in skip:
                push(value)
    return names


def bound_names(kernel: ir.Kernel) -> set:
    """The names `kernel`'s parameters and statements bind or declare,
    found without entering an expression (a kernel holds far more
    expression nodes than statements).  For a kernel whose every use of a
    name is of one bound in it (what the symbol analysis accepts, once
    consts are substituted and predefined names folded: the kernels from
    dispatch on) these are `identifiers(kernel)`, for a fraction of the
    walk; `KernelSymbols.names_in_use` is the same set read from an
    analysis."""
    names = set()
    add, Name, TupleExpr = names.add, ir.Name, ir.TupleExpr
    for p in kernel.params:
        add(p.name)
        for e in p.shape or ():
            if type(e) is Name:  # a runtime extent
                add(e.id)
    for s in statements(kernel.body):
        cls = type(s)
        if cls is ir.Assign:
            for t in s.targets:
                for item in t.items if type(t) is TupleExpr else (t,):
                    if type(item) is Name:
                        add(item.id)
        elif cls is ir.For:
            add(s.var)
        elif cls is ir.Meta or cls is ir.TensorMap:
            add(s.name)
        elif cls is ir.InlineDef:
            add(s.name)
            names.update(s.params)
    return names


class NameGen:
    """Fresh identifiers for the temporaries a lowering introduces (descriptor
    registers, loop variables), distinct from every name already in the kernel
    and from each other.  A free hint is used as is, else `hint_1`, `hint_2`..."""

    def __init__(self, taken: Iterable[str] = ()):
        self._taken = set(taken)
        self._unread = None  # a function returning names taken too, called at the first `fresh`
        # hint -> where its search for a free name resumes: the names before
        # it were taken at the last call, and stay taken (unroll renames one
        # hint once per copy of a loop body)
        self._next: dict = {}

    @classmethod
    def lazily(cls, taken: Callable[[], Iterable[str]]) -> "NameGen":
        """Names distinct from `taken()`, called at the first `fresh`: the IR
        is immutable, so the names are the same then, and a pass that
        introduces no name (unroll of a kernel without locals to rename)
        reads none."""
        gen = cls()
        gen._unread = taken
        return gen

    def fresh(self, hint: str) -> str:
        if not hint.isidentifier():
            raise ValueError(f"name hint {hint!r} is not an identifier")
        if self._unread is not None:
            taken, self._unread = self._unread, None
            self._taken.update(taken())
        n = self._next.get(hint, 0)
        name = f"{hint}_{n}" if n else hint
        while name in self._taken:
            n += 1
            name = f"{hint}_{n}"
        self._taken.add(name)
        self._next[hint] = n + 1
        return name

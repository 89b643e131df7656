"""visit's faster forms of a walk and a rewrite agree with the plain ones:
`find_all` is `walk` filtered by class, `expressions` and the nested
statements are a statement's walk, and a `transform` with `only` calls its
function on exactly the nodes of those classes, children first."""
from hypothesis import given, settings
from hypothesis import strategies as st

import strategies
from tilec.compiler import ir, visit

_CLASS_SETS = st.sampled_from([
    frozenset({ir.Call}),
    frozenset({ir.Name}),
    frozenset({ir.Name, ir.Call}),
    frozenset({ir.Index}),
    frozenset({ir.Call, ir.Method}),
    frozenset({ir.Int, ir.Keyword, ir.Assign}),
])


@settings(max_examples=200, deadline=None)
@given(strategies.kernels(), _CLASS_SETS)
def test_find_all_is_the_walk_filtered_by_class(kernel, classes):
    found = visit.find_all(kernel, classes)
    expected = [n for n in visit.walk(kernel) if type(n) in classes]
    assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected))


@settings(max_examples=200, deadline=None)
@given(strategies.stmts())
def test_a_statements_expressions_then_its_blocks_are_its_walk(s):
    """What lower-scheduler and check-protocol rely on to find a
    statement's own calls and names in walk order."""
    order = [s]
    for e in visit.expressions(s):
        assert isinstance(e, ir.Expr) and not isinstance(e, ir.Stmt)
        order += visit.walk(e)
    for field in visit.block_fields(type(s)):
        for inner in getattr(s, field):
            order += visit.walk(inner)
    walked = list(visit.walk(s))
    assert len(order) == len(walked) and all(a is b for a, b in zip(order, walked))


@settings(max_examples=200, deadline=None)
@given(strategies.kernels(), _CLASS_SETS, st.booleans())
def test_transform_with_only_calls_fn_on_those_classes_children_first(kernel, classes, pure):
    seen = []

    def fn(node):
        seen.append(node)
        return node

    assert visit.transform(kernel, fn, pure=pure, only=classes) is kernel  # nothing changed: nothing rebuilt
    # post-order, each object with children once when pure (a DAG's shared subtree is rewritten once)
    expected = [n for n in _post_order(kernel) if type(n) in classes]
    if pure:
        ids = set()
        expected = [n for n in expected if type(n) in _LEAVES or not (id(n) in ids or ids.add(id(n)))]
    assert len(seen) == len(expected) and all(a is b for a, b in zip(seen, expected))


def test_transform_rebuilds_the_path_to_what_fn_changed_and_keeps_the_rest():
    keep = ir.Binary("*", ir.Name("a"), ir.Int(2))
    e = ir.Call("f", (keep, ir.Binary("+", ir.Name("x"), ir.Int(1))), (ir.Keyword("k", ir.Str("s")),))
    out = visit.transform(e, lambda n: ir.Int(7) if n.id == "x" else n, only=frozenset({ir.Name}))
    assert out == ir.Call("f", (keep, ir.Binary("+", ir.Int(7), ir.Int(1))), (ir.Keyword("k", ir.Str("s")),))
    assert out.args[0] is keep and out.kwargs is e.kwargs


_LEAVES = ir.LEAVES | {ir.Pass}
"""The classes of the nodes that have no children."""


def _post_order(node):
    for child in visit.children(node):
        yield from _post_order(child)
    yield node


@settings(max_examples=200, deadline=None)
@given(strategies.modules())
def test_identifiers_are_every_name_the_walk_meets(module):
    expected = set()
    for n in visit.walk(module):
        if isinstance(n, ir.Name):
            expected.add(n.id)
        elif isinstance(n, ir.For):
            expected.add(n.var)
        elif isinstance(n, (ir.Param, ir.Meta, ir.InlineDef, ir.TensorMap)):
            expected.add(n.name)
            if isinstance(n, ir.InlineDef):
                expected.update(n.params)
    assert visit.identifiers(module) == expected


def test_map_blocks_makes_an_emptied_block_pass_keeps_an_empty_orelse_and_an_unchanged_statement():
    """A rewrite of a statement's blocks: one left empty becomes `pass`
    (at its first statement's span) so the IR still prints, an `orelse`
    may stay empty, and a statement whose blocks are unchanged is itself."""
    span = ir.Span("t.tile", 3, 5, 3, 9)
    body = (ir.ExprStmt(ir.Call("f", ()), span=span),)
    s = ir.If(ir.Name("c"), body, body)
    out = visit.map_blocks(s, lambda block: (), ("then", "orelse"))
    assert out.then == (ir.Pass(),) and out.then[0].span is span and out.orelse == ()
    assert visit.map_blocks(s, lambda block: tuple(block), ("then", "orelse")) is s
    assert visit.map_blocks(s, lambda block: (), ("orelse",)).then is body

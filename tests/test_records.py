"""`records.frozen` behaves as `attrs.frozen`: the shared methods it gives a
class compare, hash and print as attrs' generated ones would."""
import attrs
import pytest

from tilec.compiler import ir, records


def _pair(decorate):
    @decorate
    class Point:
        x: int
        y: object = attrs.field(default=None, eq=False)
        z: object = attrs.field(default=0, repr=False)

    return Point


def test_same_repr_and_equality_as_attrs():
    ours, theirs = _pair(records.frozen), _pair(attrs.frozen)
    for args in [(1,), (1, "a", 2), (2, [3], (4, 5))]:
        assert repr(ours(*args)) == repr(theirs(*args))
    assert ours(1, "a") == ours(1, "b")  # y takes no part in equality
    assert hash(ours(1, "a")) == hash(ours(1, "b"))
    assert ours(1, z=2) != ours(1, z=3)
    assert ours(1) != theirs(1)  # another class is never equal
    assert ours(1).__eq__(theirs(1)) is NotImplemented
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ours(1).x = 2


def test_no_compared_fields_and_nested_classes():
    @records.frozen
    class Empty:
        note: str = attrs.field(default="", eq=False)

    assert Empty("a") == Empty("b") and hash(Empty("a")) == hash(Empty("b"))
    assert repr(Empty("a")) == "Empty(note='a')"  # a class defined in a function: attrs' repr drops the <locals> path


def test_eq_false_and_own_methods_kept():
    @records.frozen(eq=False)
    class Ident:
        x: int

    a = Ident(1)
    assert a != Ident(1) and a == a and hash(a) == object.__hash__(a)

    @records.frozen
    class Shown:
        x: int

        def __repr__(self):
            return f"<{self.x}>"

    assert repr(Shown(3)) == "<3>" and Shown(3) == Shown(3)


def test_ir_nodes_use_the_shared_methods():
    node = ir.Binary(op="+", lhs=ir.Name(id="i"), rhs=ir.Int(value=1))
    assert repr(node) == "Binary(op='+', lhs=Name(id='i'), rhs=Int(value=1))"
    spanned = ir.Binary(op="+", lhs=ir.Name(id="i"), rhs=ir.Int(value=1), span=ir.Span("f", 1, 1))
    assert node == spanned and hash(node) == hash(spanned)
    assert type(node).__eq__ is type(ir.Name(id="i")).__eq__

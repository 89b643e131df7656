"""`records`: the IR's node classes are attrs classes (`records.node`), the
other records (`records.frozen`, `records.mutable`) plain slotted classes
built without compiling code per class; all compare, hash and print as
attrs' generated methods would."""
import builtins
import copy
import functools
import pickle
import types

import attrs
import pytest

from tilec.compiler import ir, record_templates, records, symbols, targets


def _pair(decorate, field):
    @decorate
    class Point:
        x: int
        y: object = field(default=None, eq=False)
        z: object = field(default=0, repr=False)

    return Point


def test_same_repr_and_equality_as_attrs():
    ours, theirs = _pair(records.frozen, records.field), _pair(attrs.frozen, attrs.field)
    for args in [(1,), (1, "a", 2), (2, [3], (4, 5))]:
        assert repr(ours(*args)) == repr(theirs(*args))
    assert ours(1, "a") == ours(1, "b")  # y takes no part in equality
    assert hash(ours(1, "a")) == hash(ours(1, "b"))
    assert ours(1, z=2) != ours(1, z=3)
    assert ours(1) != theirs(1)  # another class is never equal
    assert ours(1).__eq__(theirs(1)) is NotImplemented
    with pytest.raises(records.FrozenError, match="cannot assign to 'x': .*Point is frozen"):
        ours(1).x = 2
    with pytest.raises(records.FrozenError, match="cannot delete 'x'"):
        del ours(1).x
    assert issubclass(records.FrozenError, AttributeError)


def test_no_compared_fields_and_nested_classes():
    @records.frozen
    class Empty:
        note: str = records.field(default="", eq=False)

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
    assert type(node).__eq__ is type(ir.Name(id="i")).__eq__ is type(ir.Span("f", 1, 1)).__eq__
    assert attrs.has(ir.Binary) and attrs.has(ir.Span)  # the IR's classes are attrs classes, other records not
    assert not attrs.has(targets.Target) and not attrs.has(symbols.KernelSymbols)


def test_constructor_arguments():
    @records.frozen
    class Rec:
        a: int
        b: str = "b"
        _hidden: int = 0

    assert Rec(1) == Rec(a=1, b="b", hidden=0)  # `_hidden` is the argument `hidden`, as with attrs
    assert Rec(1, "c", 2)._hidden == 2
    with pytest.raises(TypeError, match=r"Rec.__init__\(\) missing 1 required positional argument: 'a'"):
        Rec()
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        Rec(1, c=2)
    assert not hasattr(Rec(1), "__dict__")


def test_factories_converters_and_post_init():
    seen = []

    @records.frozen
    class Rec:
        items: tuple = records.field(converter=tuple)
        more: tuple = records.field(default=[], converter=tuple)
        bag: list = records.field(factory=list)
        size: int = records.field(factory=lambda self: len(self.items), takes_self=True)
        note: str = records.field(default="n", init=False, eq=False)

        def __post_init__(self):
            seen.append(self.size)

    r = Rec([1, 2])
    assert r.items == (1, 2) and r.more == () and r.size == 2 and r.note == "n" and seen == [2]
    assert r.bag == [] and r.bag is not Rec([]).bag  # a new list per instance
    with pytest.raises(TypeError):
        Rec([1], note="m")  # init=False: not an argument
    changed = records.evolve(r, more=[3])
    assert changed.more == (3,) and changed.items == (1, 2) and changed.bag is r.bag


def test_mutable_records():
    @records.mutable
    class Pool:
        name: str
        cursor: int = 0
        log: list = records.field(factory=list, eq=False)

    p = Pool("p")
    p.cursor = 4
    assert p == Pool("p", 4) and p != Pool("p")
    assert repr(p) == "Pool(name='p', cursor=4, log=[])"
    with pytest.raises(TypeError, match="unhashable"):
        hash(p)


def test_declaration_mistakes_are_refused():
    with pytest.raises(TypeError, match="a field without a default follows one with a default"):
        @records.frozen
        class Order:
            a: int = 0
            b: int

    with pytest.raises(TypeError, match="records.field"):
        @records.frozen
        class Foreign:
            a: int = attrs.field(default=0)

    with pytest.raises(TypeError, match="__post_init__"):
        @records.frozen
        class Hook:
            a: int

            def __attrs_post_init__(self):
                pass


def test_no_code_is_compiled(monkeypatch):
    """The point of `records.frozen`: defining a record compiles nothing."""

    def refuse(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(builtins, "compile", refuse)
    monkeypatch.setattr(builtins, "exec", refuse)
    Point = _pair(records.frozen, records.field)
    assert Point(1, 2, 3).z == 3


def test_every_template_stores_its_arguments_in_order():
    for n in range(records._MAX_ARGUMENTS + 1):
        stored = []
        names = {f"s{i}": (lambda i: lambda record, value: stored.append((i, record, value)))(i) for i in range(n)}
        template = getattr(record_templates, f"init{n}")
        assert template.__code__.co_varnames == ("self",) + tuple(f"a{i}" for i in range(n))
        types.FunctionType(template.__code__, names)("r", *range(10, 10 + n))
        assert stored == [(i, "r", 10 + i) for i in range(n)]
    fields = {f"f{i}": "int" for i in range(records._MAX_ARGUMENTS + 1)}
    with pytest.raises(TypeError, match=f"Wide: a record takes at most {records._MAX_ARGUMENTS} constructor arguments"):
        records.frozen(type("Wide", (), {"__annotations__": fields}))


class _Base:
    def describe(self):
        return "base"


@records.frozen
class _Squared(_Base):
    x: int

    @functools.cached_property
    def square(self):
        _CALLS.append(self.x)
        return self.x * self.x

    def describe(self):
        return "squared " + super().describe()


_CALLS = []


def test_cached_property_super_pickle_and_copy():
    r = _Squared(3)
    assert r.square == 9 and r.square == 9 and _CALLS == [3]
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        r.other
    assert r.describe() == "squared base"
    assert pickle.loads(pickle.dumps(r)) == r and copy.copy(r) == r and copy.deepcopy(r).x == 3

"""Record classes: the IR's nodes (`node`) and every other record of the
compiler, the passes and the runtime (`frozen`, `mutable`).

Defining a class is work done in every process that imports it, and tilec
defines about a hundred records.  attrs builds each one by generating the
source of its methods and compiling it, ~1.5 M instructions a class: most of
what importing tilec cost.  So only the IR's node classes are attrs classes
(`node`): the generic traversal reads their fields with `attrs.fields`
(visit, fold, roll) and passes rebuild them with `attrs.evolve`.  The other
records are plain classes with `__slots__` that `frozen` and `mutable` build
without compiling anything: their `__init__` is a copy of one of the
functions written out in `record_templates` (one per number of arguments),
renamed so that its arguments are the fields (keywords work, and a missing
argument is reported as `Operand.__init__() missing 1 required positional
argument: 'text'`), storing through the slots' own descriptors.  Defining one
costs a fifth of an attrs class; building an instance costs what an attrs
one does.

All three share one equality, hash and repr, which behave as attrs' would:
two records are equal when they are of the same class and every field with
eq=True is equal, the hash is that of the class and those values, and the
repr is `Binary(op='+', lhs=Name(id='i'), rhs=Int(value=1))` (the fields with
repr=True).  Differences from attrs': the repr does not guard against a
record that contains itself (a frozen record cannot, short of a mutable field
holding it), and a record with one compared field compares that value itself
rather than a 1-tuple of it (the same except for a field holding one NaN
object, which attrs' tuple calls equal to itself).  A method the class
defines itself is kept; `eq=False` keeps identity equality and hashing.  A
mutable record that compares its fields is unhashable, as with attrs.

`field(...)` declares a field's default (`default=`, or `factory=` called
for each instance, with the instance so far when `takes_self`), a
`converter` applied to the value given (or defaulted), whether it takes part
in equality (`eq`) and the repr (`repr`), and `init=False` for a field the
constructor does not take (it gets its default).  A field named `_x` is the
constructor's argument `x`.  A class's `__post_init__(self)`, when it has
one, runs last (checks).  Assigning to or deleting a field of a frozen
record raises `FrozenError`.  `evolve(record, **changes)` is a copy with
some fields changed.  A `functools.cached_property` works as on a class with
a `__dict__` (it gets a slot).  Records do not inherit fields from a base class (none
needs to)."""
from __future__ import annotations

import functools
import operator
from types import FunctionType

from tilec.compiler import record_templates


class FrozenError(AttributeError):
    """An assignment to, or deletion of, a field of a frozen record."""


class _Nothing:
    def __repr__(self) -> str:
        return "NOTHING"


NOTHING = _Nothing()
"""A field's default when it has none."""

_FROM_FACTORY = _Nothing()  # an argument's default that asks for the factory's value


class Field:
    """A field's declaration, as `field` makes it (`name` is filled in when the
    class is built)."""

    __slots__ = ("name", "default", "factory", "takes_self", "converter", "eq", "repr", "init")

    def __init__(self, default=NOTHING, factory=None, takes_self=False, converter=None, eq=True, repr=True,
                 init=True):
        if default is not NOTHING and factory is not None:
            raise TypeError("a field takes a default or a factory, not both")
        self.name = None
        self.default, self.factory, self.takes_self = default, factory, takes_self
        self.converter, self.eq, self.repr, self.init = converter, eq, repr, init

    @property
    def has_default(self) -> bool:
        return self.default is not NOTHING or self.factory is not None

    def value(self, record):
        """The default value for `record` (its factory's, or the default)."""
        if self.factory is None:
            return self.default
        return self.factory(record) if self.takes_self else self.factory()


def field(*, default=NOTHING, factory=None, takes_self: bool = False, converter=None, eq: bool = True,
          repr: bool = True, init: bool = True) -> Field:
    """A field with more than a plain default; see the module docstring."""
    return Field(default, factory, takes_self, converter, eq, repr, init)


def frozen(cls=None, *, eq: bool = True):
    """An immutable record; usable as `@frozen` and `@frozen(eq=False)`."""
    return _decorator(cls, eq, True)


def mutable(cls=None, *, eq: bool = True):
    """A record whose fields may be reassigned; `@mutable`, `@mutable(eq=False)`."""
    return _decorator(cls, eq, False)


def node(cls=None, *, eq: bool = True, **options):
    """An IR node class: `attrs.frozen(cls, eq=eq, **options)` with the shared
    methods; usable as `@node` and `@node(...)`.  (attrs is imported here,
    so that a process using no IR node class does not import it.)"""
    import attrs

    def wrap(cls):
        own = cls.__dict__
        keep_eq, keep_repr = "__eq__" in own, "__repr__" in own
        # None: attrs keeps the class's own method (its auto-detection)
        cls = attrs.frozen(cls, eq=None if eq and keep_eq else False, repr=None if keep_repr else False, **options)
        fields = attrs.fields(cls)
        _share_methods(cls, tuple(f.name for f in fields if f.repr),
                       tuple(f.name for f in fields if f.eq) if eq and not keep_eq else None, keep_repr)
        return cls

    return wrap if cls is None else wrap(cls)


def evolve(record, **changes):
    """A copy of the (non-IR) `record` with the fields `changes` replaced; the
    others are passed on as they are (through the constructor: converters
    and checks run again)."""
    cls = record.__class__
    for spec in cls._fields:
        if spec.init:
            alias = _alias(spec.name)
            if alias not in changes:
                changes[alias] = getattr(record, spec.name)
    return cls(**changes)


def _decorator(cls, eq: bool, is_frozen: bool):
    def wrap(cls):
        return _build(cls, eq, is_frozen)

    return wrap if cls is None else wrap(cls)


def _build(cls, eq: bool, is_frozen: bool):
    own = dict(cls.__dict__)
    if "__attrs_post_init__" in own:
        raise TypeError(f"{cls.__qualname__}: a record's check after construction is `__post_init__`")
    fields = []
    for name in own.get("__annotations__", {}):
        declared = own.pop(name, NOTHING)
        if isinstance(declared, Field):
            spec = declared
        elif type(declared).__module__.split(".")[0] in ("attr", "attrs"):
            raise TypeError(f"{cls.__qualname__}.{name}: declare a record's field with `records.field`, not attrs'")
        else:
            spec = Field(default=declared)
        spec.name = name
        fields.append(spec)
    taken = [spec for spec in fields if spec.init]
    for before, after in zip(taken, taken[1:]):
        if before.has_default and not after.has_default:
            raise TypeError(f"{cls.__qualname__}.{after.name}: a field without a default follows one with a default")
    cached = {name: value.func for name, value in own.items() if isinstance(value, functools.cached_property)}
    for name in cached:
        del own[name]
    if cached:
        own["_cached"] = cached
        own["__getattr__"] = _cached_getattr
    own["__slots__"] = tuple(spec.name for spec in fields) + tuple(cached)
    own.pop("__dict__", None)
    own.pop("__weakref__", None)
    new = type(cls)(cls.__name__, cls.__bases__, own)
    new.__qualname__ = cls.__qualname__
    _point_class_cells(new, cls)
    new._fields = tuple(fields)
    new.__init__ = _make_init(new, taken, fields, own.get("__post_init__"))
    if is_frozen:
        new.__setattr__ = _frozen_setattr
        new.__delattr__ = _frozen_delattr
    new.__getstate__ = _getstate
    new.__setstate__ = _setstate
    keep_eq = "__eq__" in own
    _share_methods(new, tuple(spec.name for spec in fields if spec.repr),
                   tuple(spec.name for spec in fields if spec.eq) if eq and not keep_eq else None,
                   "__repr__" in own)
    if eq and not keep_eq and not is_frozen:
        new.__hash__ = None  # attrs' rule: a mutable record that compares its fields is unhashable
    return new


def _share_methods(cls, shown: tuple, compared, keep_repr: bool) -> None:
    """Give `cls` the shared repr (of the fields `shown`) unless it has its
    own, and the shared equality and hash (of the fields `compared`) unless
    `compared` is None."""
    if not keep_repr:
        cls._shown = shown
        cls.__repr__ = _repr
    if compared is not None:
        cls._compared = operator.attrgetter(*compared) if compared else staticmethod(_nothing)
        cls.__eq__ = _eq
        cls.__hash__ = _hash


def _point_class_cells(new, old) -> None:
    """Methods that use `super()` or `__class__` close over the class as
    first built; point them at the slotted class that replaces it."""
    for value in new.__dict__.values():
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        elif isinstance(value, property):
            value = value.fget
        for cell in getattr(value, "__closure__", None) or ():
            if cell.cell_contents is old:
                cell.cell_contents = new


def _make_init(cls, taken: list, fields: list, post_init):
    """`cls.__init__`: a copy of the template for `len(taken)` arguments
    (`record_templates`), its arguments renamed to the fields, storing
    through the slots' descriptors.  A class with converters, factories,
    fields the constructor does not take or a `__post_init__` has a
    `finish` step too, run after the last store (for no arguments, the
    whole constructor)."""
    n = len(taken)
    template = getattr(record_templates, f"init{n}", None)
    if template is None:
        raise TypeError(f"{cls.__qualname__}: a record takes at most {_MAX_ARGUMENTS} constructor arguments")
    stores = [getattr(cls, spec.name).__set__ for spec in taken]
    steps = tuple(
        (spec, getattr(cls, spec.name).__set__)
        for spec in fields
        if spec.converter is not None or spec.factory is not None or not spec.init
    )
    if steps or post_init is not None:
        finish = _finisher(steps, post_init)
        if not stores:
            def init(self):
                finish(self)

            init.__qualname__ = f"{cls.__qualname__}.__init__"
            init.__module__ = cls.__module__
            return init
        stores[-1] = _then(stores[-1], finish)
    code = template.__code__.replace(
        co_varnames=("self",) + tuple(_alias(spec.name) for spec in taken),
        co_name="__init__",
        co_qualname=f"{cls.__qualname__}.__init__",
    )
    defaults = tuple(
        _FROM_FACTORY if spec.factory is not None else spec.default for spec in taken if spec.has_default
    )
    init = FunctionType(code, {f"s{i}": store for i, store in enumerate(stores)}, "__init__", defaults or None)
    init.__qualname__ = code.co_qualname
    init.__module__ = cls.__module__
    return init


_MAX_ARGUMENTS = max(int(name[4:]) for name in vars(record_templates) if name.startswith("init"))


def _then(store, finish):
    def store_then_finish(record, value):
        store(record, value)
        finish(record)

    return store_then_finish


def _finisher(steps: tuple, post_init):
    def finish(record):
        for spec, store in steps:
            if spec.init:
                value = getattr(record, spec.name)
                if value is _FROM_FACTORY:
                    value = spec.value(record)
            else:
                value = spec.value(record)
            if spec.converter is not None:
                value = spec.converter(value)
            store(record, value)
        if post_init is not None:
            post_init(record)

    return finish


def _alias(name: str) -> str:
    return name.lstrip("_")


def _cached_getattr(self, name):
    """A `functools.cached_property` of a record (a slot, as records have no
    `__dict__`): computed on the first read, when the slot is still empty."""
    compute = self._cached.get(name)
    if compute is None:
        raise AttributeError(f"'{self.__class__.__name__}' object has no attribute '{name}'")
    value = compute(self)
    object.__setattr__(self, name, value)
    return value


def _frozen_setattr(self, name, value):
    raise FrozenError(f"cannot assign to '{name}': {self.__class__.__qualname__} is frozen")


def _frozen_delattr(self, name):
    raise FrozenError(f"cannot delete '{name}': {self.__class__.__qualname__} is frozen")


def _getstate(self) -> tuple:
    return tuple(getattr(self, spec.name) for spec in self._fields)


def _setstate(self, state: tuple) -> None:
    for spec, value in zip(self._fields, state):
        object.__setattr__(self, spec.name, value)


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return self._compared(self) == other._compared(other)


def _hash(self):
    return hash((self.__class__, self._compared(self)))


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
    return f"{self.__class__.__qualname__.rsplit('>.', 1)[-1]}({shown})"


def _nothing(record) -> tuple:
    return ()

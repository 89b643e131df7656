"""Immutable record classes: `attrs.frozen` with one shared equality, hash and repr.

attrs compiles the source of the methods it generates when a class is
defined; for the ~100 frozen classes of the compiler, the IR nodes and the
passes' records, the `__eq__`, `__hash__` and `__repr__` of each class were
about a fifth of what importing tilec cost.  `frozen` asks attrs for the
class and its `__init__` only and gives it these three shared methods, which
behave as attrs' would: two records are equal when they are of the same class
and every field with eq=True is equal, the hash is that of the class and
those values, and the repr is `Binary(op='+', lhs=Name(id='i'), rhs=Int(value=1))`
(the fields with repr=True).  Differences from attrs': the repr does not guard
against a record that contains itself (a frozen record cannot, short of a
mutable field holding it), and a record with one compared field compares
that value itself rather than a 1-tuple of it (the same except for a field
holding one NaN object, which attrs' tuple calls equal to itself).

A method the class defines itself is kept, as attrs does; `eq=False` keeps
identity equality and hashing, as with attrs."""
from __future__ import annotations

import operator

import attrs


def frozen(cls=None, *, eq: bool = True, **options):
    """`attrs.frozen(cls, eq=eq, **options)` with the shared methods; usable
    as `@frozen` and `@frozen(...)`."""

    def wrap(cls):
        own = cls.__dict__
        keep_eq, keep_repr = "__eq__" in own, "__repr__" in own
        # None: attrs keeps the class's own method (its auto-detection)
        cls = attrs.frozen(cls, eq=None if eq and keep_eq else False, repr=None if keep_repr else False, **options)
        fields = attrs.fields(cls)
        if not keep_repr:
            cls._shown = tuple(f.name for f in fields if f.repr)
            cls.__repr__ = _repr
        if eq and not keep_eq:
            compared = tuple(f.name for f in fields if f.eq)
            cls._compared = operator.attrgetter(*compared) if compared else staticmethod(_nothing)
            cls.__eq__ = _eq
            cls.__hash__ = _hash
        return cls

    return wrap if cls is None else wrap(cls)


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

"""Integer linear forms over symbols: `const + sum(coeff * symbol)`.

Region starts (`bx * 128`, `k * 64 + 64`), TMA coordinates and shared
offsets are such forms, and so is the difference that proves a slice
`k * 64 : k * 64 + 64` has 64 elements.  A *symbol* is an opaque name of
a value the compiler does not know: a loop variable, `k % 2`, a kernel
scalar, a shape bound at launch.  What is known about it travels with the
form as a divisor (`K` with `assume(K % 8 == 0)` is a multiple of 8), so
divisibility questions (`divisible_by`) are answered from the form alone,
whoever built it.

`linear(expr, atoms)` reads an IR expression as a form: integer literals,
`+`, `-`, unary `-` and multiplication by a literal are understood; any
other subexpression is one symbol named by its printed text (recorded in
`atoms`, so `to_expr` can write the form back with the very expressions
it came from).  Fold constants first: `linear` does no arithmetic on
literals beyond those four operators.
"""
from __future__ import annotations

from math import gcd
from typing import Callable, Mapping, Optional, Union

from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.printer import print_expr

__all__ = ["Affine", "linear", "to_expr"]


def _merge(a: tuple, b: tuple) -> tuple:
    """Two symbols' divisor facts: each fact holds, so a symbol is a multiple
    of the least common multiple of what each side knows."""
    facts = dict(a)
    for name, d in b:
        have = facts.get(name, 1)
        facts[name] = have * d // gcd(have, d)
    return tuple(sorted(facts.items()))


@records.frozen
class Affine:
    """`const + sum(coeff * symbol)`, `terms` sorted by symbol, no zero
    coefficients.  `divisors` records, for symbols known to be multiples of
    something (> 1), that divisor; it is a fact about the symbol, not part
    of the value, so two forms of equal value compare equal whatever each
    knows."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()
    divisors: tuple[tuple[str, int], ...] = records.field(default=(), eq=False)

    @classmethod
    def of(cls, value: Union[int, str, "Affine"]) -> "Affine":
        """An int is a constant, a str a symbol with coefficient 1."""
        if isinstance(value, Affine):
            return value
        if isinstance(value, str):
            return cls.symbol(value)
        if type(value) is int:
            return cls(value)
        raise TypeError(f"an affine value is an int, a symbol name or an Affine, not {value!r}")

    @classmethod
    def symbol(cls, name: str, divisor: int = 1) -> "Affine":
        """The symbol `name`, known to be a multiple of `divisor`."""
        if type(divisor) is not int or divisor < 1:
            raise ValueError(f"a symbol's known divisor is a positive int, not {divisor!r}")
        return cls(0, ((name, 1),), ((name, divisor),) if divisor > 1 else ())

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.terms)

    def coefficient(self, name: str) -> int:
        return dict(self.terms).get(name, 0)

    def __add__(self, other: Union[int, "Affine"]) -> "Affine":
        other = Affine.of(other)
        coeffs = dict(self.terms)
        for name, c in other.terms:
            coeffs[name] = coeffs.get(name, 0) + c
        terms = tuple(sorted((n, c) for n, c in coeffs.items() if c))
        return Affine(self.const + other.const, terms, _merge(self.divisors, other.divisors))

    __radd__ = __add__

    def __sub__(self, other: Union[int, "Affine"]) -> "Affine":
        return self + Affine.of(other) * -1

    def __neg__(self) -> "Affine":
        return self * -1

    def __mul__(self, k: int) -> "Affine":
        if type(k) is not int:
            raise TypeError(f"an affine form is scaled by an int, not {k!r}")
        if k == 0:
            return Affine(0, (), self.divisors)
        return Affine(self.const * k, tuple((n, c * k) for n, c in self.terms), self.divisors)

    __rmul__ = __mul__

    def divisor(self, name: str) -> int:
        """What symbol `name` is known to be a multiple of (1: nothing)."""
        return dict(self.divisors).get(name, 1)

    def known_divisor(self) -> int:
        """The largest number known to divide the value whatever the symbols
        are (0 for the constant 0, which every number divides)."""
        d = abs(self.const)
        for name, c in self.terms:
            d = gcd(d, c * self.divisor(name))
        return d

    def divisible_by(self, n: int) -> bool:
        """Whether the value is a multiple of `n` whatever the symbols are."""
        return self.known_divisor() % n == 0

    def divisible_termwise(self, n: int) -> bool:
        """Whether the constant and every coefficient are multiples of `n`:
        what `exact_div` needs (a symbol known to be a multiple of `n` makes
        the value divisible, but its quotient would be a new symbol)."""
        return self.const % n == 0 and all(c % n == 0 for _, c in self.terms)

    def exact_div(self, n: int) -> "Affine":
        """The value divided by `n`, term by term (`divisible_termwise`)."""
        if not self.divisible_termwise(n):
            raise ValueError(f"{self} is not divisible by {n} term by term")
        return Affine(self.const // n, tuple((s, c // n) for s, c in self.terms), self.divisors)

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.const + sum(c * env[name] for name, c in self.terms)

    def __str__(self) -> str:
        parts = [name if c == 1 else f"{name} * {c}" for name, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def linear(
    e: ir.Expr, atoms: Optional[dict] = None, divisor: Optional[Callable[[ir.Expr], int]] = None
) -> Affine:
    """`e` as a linear form (see the module docstring).  Each opaque
    subexpression becomes a symbol named by its printed text, recorded in
    `atoms` (text -> expression) when given; `divisor(expr)`, when given,
    says what each such subexpression is known to be a multiple of."""
    if isinstance(e, ir.Int):
        return Affine(e.value)
    if isinstance(e, ir.Unary) and e.op == "-":
        return -linear(e.operand, atoms, divisor)
    if isinstance(e, ir.Binary) and e.op in ("+", "-"):
        lhs, rhs = linear(e.lhs, atoms, divisor), linear(e.rhs, atoms, divisor)
        return lhs + rhs if e.op == "+" else lhs - rhs
    if isinstance(e, ir.Binary) and e.op == "*":
        for k, other in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(k, ir.Int):
                return linear(other, atoms, divisor) * k.value
    key = print_expr(e)
    if atoms is not None:
        atoms[key] = e
    return Affine.symbol(key, divisor(e) if divisor is not None else 1)


def to_expr(a: Affine, atoms: Mapping[str, ir.Expr]) -> ir.Expr:
    """The expression of a form whose symbols are in `atoms`, terms in the
    form's order, each `term * c`, then the constant (`stage * 8192 + 640`)."""
    out: Optional[ir.Expr] = None
    for key, c in a.terms:
        term = atoms[key]
        if out is None:
            out = term if c == 1 else ir.Binary("*", term, ir.Int(c))
        else:
            scaled = term if abs(c) == 1 else ir.Binary("*", term, ir.Int(abs(c)))
            out = ir.Binary("+" if c > 0 else "-", out, scaled)
    if out is None:
        return ir.Int(a.const)
    if a.const:
        out = ir.Binary("+" if a.const > 0 else "-", out, ir.Int(abs(a.const)))
    return out

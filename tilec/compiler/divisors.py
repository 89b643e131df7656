"""What provably divides an integer expression.

The emitter proves vector alignment with it (an index that is a multiple of
4 allows a 4-wide access) and dispatch decides vector widths with the same
proof, so both ask this one function.
"""
from __future__ import annotations

from math import gcd

from tilec.compiler import ir


def known_divisor(e: ir.Expr, name_divisor=lambda name: 1) -> int:
    """A number that provably divides the value of `e` (1 when nothing is
    known; 0 for the literal 0, which every number divides).  `name_divisor`
    answers for names (what is known of a bound value or loop variable)."""
    if isinstance(e, ir.Int):
        return abs(e.value)
    if isinstance(e, ir.Name):
        return name_divisor(e.id)
    if isinstance(e, ir.Binary):
        a, b = known_divisor(e.lhs, name_divisor), known_divisor(e.rhs, name_divisor)
        if e.op == "*":
            return a * b
        if e.op in ("+", "-"):
            return gcd(a, b)
        if e.op == "<<" and isinstance(e.rhs, ir.Int):
            return a << e.rhs.value
        if e.op == "%" and isinstance(e.rhs, ir.Int):
            return gcd(a, b)
    # the value is one of two values: what divides both
    if isinstance(e, ir.Select):
        return gcd(known_divisor(e.then, name_divisor), known_divisor(e.orelse, name_divisor))
    if isinstance(e, ir.Call) and e.func in ("min", "max") and len(e.args) == 2 and not e.kwargs:
        return gcd(*(known_divisor(a, name_divisor) for a in e.args))
    return 1

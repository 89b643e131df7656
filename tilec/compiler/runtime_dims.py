"""Runtime extents: names in parameter extents that the launch binds.

`kernel add(A: f32[n], B: f32[n])` leaves `n` open: one compile serves
every length, and the launch reads `n` from the arrays (the first buffer
axis that names it; every other axis naming it must agree).  In the body
`n` is an i32 value like a scalar parameter, passed as a hidden `.u32`
parameter after the tensor maps.

What the kernel relies on is stated with `assume(cond, "message")` at the
kernel's top level: the launch refuses arguments for which `cond` is False,
and the compiler uses the divisibility it states (`n % 8 == 0` makes `n` a
known multiple of 8: vector accesses and alignment proofs see it, as they
see a loop variable's step).

kernel.json carries what a host needs to launch without Python: the dims
(which parameter axis binds each), the assumptions, and the grid, each
expression written as a small JSON tree (`to_json`): an int, a dim name,
or `[op, operand, ...]`.  docs/python.md documents the format.
"""
from __future__ import annotations

from math import gcd
from typing import Dict, Optional, Tuple

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.fold import fold_expr
from tilec.compiler.printer import print_expr

ASSUME = "assume"
SM_COUNT = "sm_count"  # sm_count(): the device's SM count, read at launch
SM_COUNT_PARAM = "__sm_count"  # its hidden entry parameter
ARITH = ("+", "-", "*", "//", "%")
COMPARE = ("==", "!=", "<", "<=", ">", ">=")
LOGIC = ("and", "or")
FUNCTIONS = ("min", "max")


@attrs.frozen
class Dim:
    """A runtime extent: its name, the buffer parameter axis that binds it
    at launch, and what it is known to be a multiple of (from assumes)."""

    name: str
    param: str
    axis: int
    divisor: int = 1
    span: Optional[ir.Span] = attrs.field(default=None, eq=False)


def check_dim_expr(e: ir.Expr, dims, what: str) -> None:
    """A located error unless `e` is integer arithmetic (`+ - * // %`,
    `min`, `max`) over integer literals, runtime dims and `sm_count()`:
    what a host can evaluate from the shapes and the device alone."""
    if isinstance(e, ir.Int):
        return
    if isinstance(e, ir.Name):
        if e.id not in dims:
            raise TilecError(f"{what} may use only constants and runtime extents; '{e.id}' is neither", e.span)
        return
    if isinstance(e, ir.Binary) and e.op in ARITH:
        check_dim_expr(e.lhs, dims, what)
        check_dim_expr(e.rhs, dims, what)
        return
    if isinstance(e, ir.Unary) and e.op == "-":
        check_dim_expr(e.operand, dims, what)
        return
    if isinstance(e, ir.Call) and e.func == SM_COUNT and not e.args and not e.kwargs:
        return
    if isinstance(e, ir.Call) and e.func in FUNCTIONS and len(e.args) == 2 and not e.kwargs:
        for a in e.args:
            check_dim_expr(a, dims, what)
        return
    raise TilecError(
        f"{what} must be integer arithmetic (+ - * // % min max) on constants, runtime extents and sm_count(), "
        f"not '{print_expr(e)}'",
        e.span,
    )


def check_condition(e: ir.Expr, dims) -> None:
    """A located error unless `e` is comparisons of dim expressions joined
    by and/or/not (or a bool literal)."""
    if isinstance(e, ir.Bool):
        return
    if isinstance(e, ir.Binary) and e.op in LOGIC:
        check_condition(e.lhs, dims)
        check_condition(e.rhs, dims)
        return
    if isinstance(e, ir.Unary) and e.op == "not":
        check_condition(e.operand, dims)
        return
    if isinstance(e, ir.Binary) and e.op in COMPARE:
        check_dim_expr(e.lhs, dims, f"{ASSUME}(...)")
        check_dim_expr(e.rhs, dims, f"{ASSUME}(...)")
        return
    raise TilecError(
        f"{ASSUME}(...) takes comparisons of runtime extents joined by and/or/not, "
        f"such as 'K % 8 == 0 and M >= 1', not '{print_expr(e)}'",
        e.span,
    )


def read_assume(call: ir.Call, dims) -> Tuple[ir.Expr, str]:
    """`assume(cond)` or `assume(cond, "message")`: the condition (checked)
    and the message (the condition's text when none is given)."""
    kw = {k.name: k.value for k in call.kwargs}
    args = list(call.args)
    if "cond" in kw:
        args.insert(0, kw.pop("cond"))
    if "message" in kw:
        args.append(kw.pop("message"))
    if kw or not 1 <= len(args) <= 2:
        raise TilecError(f'{ASSUME} takes a condition and an optional message: assume(K % 8 == 0, "...")', call.span)
    cond = args[0]
    check_condition(cond, dims)
    if len(args) == 2:
        if not isinstance(args[1], ir.Str):
            raise TilecError(f"{ASSUME}: the message must be a string literal", args[1].span or call.span)
        return cond, args[1].value
    return cond, print_expr(cond)


def divisor_facts(cond: ir.Expr) -> Dict[str, int]:
    """What `cond` guarantees each dim is a multiple of: the conjuncts of
    the form `NAME % c == 0` (either side of the `==`)."""
    if isinstance(cond, ir.Binary) and cond.op == "and":
        facts = divisor_facts(cond.lhs)
        for name, d in divisor_facts(cond.rhs).items():
            have = facts.get(name, 1)
            facts[name] = have * d // gcd(have, d)
        return facts
    if isinstance(cond, ir.Binary) and cond.op == "==":
        for mod, zero in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
            if (
                isinstance(zero, ir.Int) and zero.value == 0
                and isinstance(mod, ir.Binary) and mod.op == "%"
                and isinstance(mod.lhs, ir.Name) and isinstance(mod.rhs, ir.Int) and mod.rhs.value > 0
            ):
                return {mod.lhs.id: mod.rhs.value}
    return {}


def to_json(e: ir.Expr):
    """A dim expression or condition as kernel.json writes it: an int, a
    dim name, `["sm_count"]` (the device's SM count), or `[op, operand...]`
    with op one of `+ - * // % min max == != < <= > >= and or not neg`
    (`//` and `%` floor, as in Python)."""
    if isinstance(e, ir.Int):
        return e.value
    if isinstance(e, ir.Bool):
        return int(e.value)
    if isinstance(e, ir.Name):
        return e.id
    if isinstance(e, ir.Binary):
        return [e.op, to_json(e.lhs), to_json(e.rhs)]
    if isinstance(e, ir.Unary):
        return ["neg" if e.op == "-" else e.op, to_json(e.operand)]
    if isinstance(e, ir.Call):
        return [e.func] + [to_json(a) for a in e.args]
    raise TilecError(f"'{print_expr(e)}' cannot be written to kernel.json", e.span)


# --------------------------------------------------------------------------
# Shape-dependent integers read back as expressions of the extents
# --------------------------------------------------------------------------

# Two sets of primes above any box, block or divisor a plan meets; a runtime
# extent stands in as its known divisor times one of them.
_PROXY_PRIMES = (
    (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069),
    (2003, 2011, 2017, 2027, 2029, 2039, 2053, 2063, 2069, 2081, 2083, 2087),
)


def proxies(shape, divisors: Dict[str, int], which: int) -> Dict[str, int]:
    """A stand-in value per runtime extent of `shape`: its known divisor
    times a prime (of set `which`) no constant extent is a multiple of, so
    that divisibility questions get the answers the divisors alone give."""
    names = list(dict.fromkeys(e for e in shape if isinstance(e, str)))
    constants = [e for e in shape if isinstance(e, int)]
    primes = [p for p in _PROXY_PRIMES[which] if not any(c % p == 0 for c in constants)]
    if len(primes) < len(names):
        raise TilecError(f"too many runtime extents in one shape ({len(names)})")
    return {n: divisors.get(n, 1) * p for n, p in zip(names, primes)}


def read_back(value: int, proxy: Dict[str, int], divisors: Dict[str, int]) -> ir.Expr:
    """`value`, computed from the stand-ins `proxy`, as a product of a
    constant and the extents (or their quotients by their divisors: 2 * p
    is `K // 4` when K stands in as 8 * p, 16 * p is `K * 2`)."""
    factors = []
    for name, v in proxy.items():
        d = divisors.get(name, 1)
        prime = v // d
        while value % prime == 0 and value:
            value //= prime
            if value % d == 0:  # (K // 8) * 16 is K * 2
                value //= d
                factors.append(ir.Name(name))
            else:
                factors.append(ir.Binary("//", ir.Name(name), ir.Int(d)))
    out: Optional[ir.Expr] = None
    for f in factors:
        out = f if out is None else ir.Binary("*", out, f)
    if out is None:
        return ir.Int(value)
    return out if value == 1 else ir.Binary("*", out, ir.Int(value))


def substitute(e: ir.Expr, env: Dict[str, int]) -> ir.Expr:
    """`e` with the extents in `env` replaced by their values, folded."""
    return fold_expr(visit.transform(e, lambda n: ir.Int(env[n.id]) if isinstance(n, ir.Name) and n.id in env else n))

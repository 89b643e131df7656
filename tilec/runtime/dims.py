"""Runtime extents at launch: binding them from the arrays' shapes, checking
the kernel's assumptions, computing the grid.

kernel.json writes each expression as a JSON tree (an int, a dim name, or
`[op, operand...]`; docs/python.md); `evaluate` is its whole meaning, the
same a C++ host implements.  Nothing here evaluates text.
"""
from __future__ import annotations

import operator

from tilec.compiler.runtime_dims import I32_MAX, MAGIC_MUL, MAGIC_SHIFT, MAX_ELEMENTS, magic

_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "//": operator.floordiv, "%": operator.mod,
    "min": min, "max": max,
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
MAX_DIM = I32_MAX  # a dim is an i32 in the kernel; a buffer with runtime extents has < MAX_ELEMENTS elements


SM_COUNT = "sm_count()"  # the device's SM count in an `env` (no dim name has parentheses)
MAGIC_OPS = (MAGIC_MUL, MAGIC_SHIFT)  # a uniform divisor's hidden parameters (`magic`)


class DimError(ValueError):
    """An expression kernel.json should not contain, or one that cannot be
    evaluated for these extents (a division by zero)."""


def evaluate(tree, env: dict) -> int:
    """The value of a kernel.json expression for the dims in `env` (booleans
    are 0 and 1; `and`/`or` short-circuit)."""
    if isinstance(tree, bool):
        return int(tree)
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        if tree not in env:
            raise DimError(f"'{tree}' is not a runtime extent of this kernel")
        return env[tree]
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise DimError(f"{tree!r} is not an expression")
    op, args = tree[0], tree[1:]
    if op == "sm_count" and not args:
        if SM_COUNT not in env:
            raise DimError("sm_count() is not known here")
        return env[SM_COUNT]
    if op == "and" and len(args) == 2:
        return int(bool(evaluate(args[0], env)) and bool(evaluate(args[1], env)))
    if op == "or" and len(args) == 2:
        return int(bool(evaluate(args[0], env)) or bool(evaluate(args[1], env)))
    if op == "not" and len(args) == 1:
        return int(not evaluate(args[0], env))
    if op == "neg" and len(args) == 1:
        return -evaluate(args[0], env)
    if op in MAGIC_OPS and len(args) == 1:
        d = evaluate(args[0], env)
        if not 1 <= d <= MAX_DIM:
            raise DimError(f"the divisor {show(args[0])} is {d}, outside [1, {MAX_DIM}]")
        return magic(d)[MAGIC_OPS.index(op)]
    fn = _BINARY.get(op)
    if fn is None or len(args) != 2:
        raise DimError(f"{tree!r} is not an expression")
    a, b = evaluate(args[0], env), evaluate(args[1], env)
    if op in ("//", "%") and b == 0:
        raise DimError(f"{show(tree)} divides by zero")
    return int(fn(a, b))


def show(tree) -> str:
    """An expression as text, for messages."""
    if isinstance(tree, list) and tree:
        op, args = tree[0], [show(a) for a in tree[1:]]
        if op in ("min", "max"):
            return f"{op}({', '.join(args)})"
        if op == "neg":
            return f"-{args[0]}"
        if op == "not":
            return f"not {args[0]}"
        return f"({args[0]} {op} {args[1]})"
    return str(tree)


def device_values(params, env: dict) -> dict:
    """The value of each kernel.json `device` parameter (the SM count, the
    uniform divisors' magic numbers) for these extents and `env`'s SM
    count, by name."""
    return {p["name"]: evaluate(p["value"], env) for p in params if p["kind"] == "device"}


def grid(entry_grid, env: dict) -> tuple:
    """kernel.json's grid for these dims (entries are ints or expressions)."""
    return tuple(evaluate(g, env) if not isinstance(g, int) else g for g in entry_grid)


def failed_assumption(assumes, env: dict):
    """The first assumption that does not hold for `env`, or None."""
    for a in assumes:
        if not evaluate(a["cond"], env):
            return a
    return None


def tensormap_for(desc: dict, env: dict) -> dict:
    """A kernel.json tensor map with its dims and strides evaluated for
    these runtime extents (the entry itself when they are all ints)."""
    fields = ("dims", "strides")
    if all(isinstance(v, int) for f in fields for v in desc[f]):
        return desc
    return {**desc, **{f: [evaluate(v, env) for v in desc[f]] for f in fields}}

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

A division or remainder by a value the launch knows (a *uniform divisor*:
arithmetic on runtime extents and `sm_count()`, such as a scheduler's
`8 * ((N + 255) // 256)` tiles per group) would be an `div.s32` of some
twenty instructions on the GPU, each time it runs.  When the divisor is
provably in [1, 2**31 - 1] (`bounds`, from the extents' ranges and the
assumptions), the kernel instead takes two hidden parameters per divisor,
a multiplier and a shift computed at launch (`magic`, which
`tilec/runtime/dims.py` evaluates), and divides with a multiply-high, an
add and a shift (`uniform_divisors`).  A constant divisor gets the same
numbers as immediates (the emitter): ptxas would divide by it with a float
reciprocal.
"""
from __future__ import annotations

from math import gcd
from typing import Dict, Optional, Tuple

from tilec.compiler import records
from tilec.compiler import ir, visit
from tilec.compiler.builtins import LAUNCH_AXES
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.fold import fold_expr
from tilec.compiler.printer import print_expr

ASSUME = "assume"
SM_COUNT = "sm_count"  # sm_count(): the device's SM count, read at launch
SM_COUNT_PARAM = "__sm_count"  # its hidden entry parameter
MAGIC_MUL = "magic_mul"  # kernel.json ops: a uniform divisor's multiplier and shift (docs/python.md)
MAGIC_SHIFT = "magic_shift"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1  # a dim, sm_count() and every value computed from them is an i32
MAX_ELEMENTS = 2**31  # a buffer with runtime extents holds fewer elements (checked at launch: 32-bit indexing)
ARITH = ("+", "-", "*", "//", "%")
COMPARE = ("==", "!=", "<", "<=", ">", ">=")
LOGIC = ("and", "or")
FUNCTIONS = ("min", "max")


@records.frozen
class Dim:
    """A runtime extent: its name, the buffer parameter axis that binds it
    at launch, and what it is known to be a multiple of (from assumes)."""

    name: str
    param: str
    axis: int
    divisor: int = 1
    span: Optional[ir.Span] = records.field(default=None, eq=False)


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


# --------------------------------------------------------------------------
# Uniform divisors: division by launch-time values without div.s32
# --------------------------------------------------------------------------


def magic(d: int) -> Tuple[int, int]:
    """The multiplier and shift that divide by `d` (1 <= d <= 2**31 - 1)
    without a division instruction: for every 0 <= u < 2**31,

        u // d == (umulhi(u, mul) + u) >> shift

    in 32-bit unsigned arithmetic (umulhi: the high 32 bits of the 64-bit
    product; the sum stays below 2**32 because umulhi(u, mul) <= u).  With
    shift = ceil(log2(d)) and mul = floor(2**32 * (2**shift - d) / d) + 1,
    the multiplier 2**32 + mul is 2**(32 + shift) / d rounded up, and the
    rounding error times u stays below 1/d for u < 2**31 (Granlund and
    Montgomery, "Division by invariant integers using multiplication",
    1994, section 4; tests/test_magic_division.py checks it).  A signed
    numerator n is divided as u = n ^ (n >> 31) (n or ~n, below 2**31) and
    the quotient xor-ed back, which is the floor: ~(~n // d) == n // d.
    The same numbers divide every u < 2**32 (their figure 4.1, for shift
    >= 1) as (t + ((u - t) >> 1)) >> (shift - 1) with t = umulhi(u, mul),
    which never leaves 32 bits.  The launch computes them for uniform
    divisors; the emitter for constant ones, which ptxas itself would
    divide with a float reciprocal (I2F, MUFU.RCP, F2I) at every use."""
    if not 1 <= d <= I32_MAX:
        raise ValueError(f"a magic divisor is in [1, {I32_MAX}], not {d}")
    shift = (d - 1).bit_length()
    mul = (1 << 32) * ((1 << shift) - d) // d + 1
    return mul, shift


@records.frozen
class UniformDivisor:
    """A divisor the launch knows and that is proven to be in [1, 2**31 - 1]:
    the kernel reads its magic multiplier and shift from two hidden `.u32`
    parameters (`mul_param`, `shift_param`; kernel.json `device` entries)."""

    expr: ir.Expr
    index: int  # in order of first use in the kernel

    @property
    def mul_param(self) -> str:
        return f"__div{self.index}_mul"

    @property
    def shift_param(self) -> str:
        return f"__div{self.index}_shift"


def divisor_key(e: ir.Expr) -> str:
    """The text that identifies a divisor expression (equal expressions share
    one pair of hidden parameters)."""
    return print_expr(e)


def uniform_divisors(kernel: ir.Kernel, dims, assumes) -> Dict[str, UniformDivisor]:
    """Every right operand of `//` and `%` (and `//=`, `%=`) that the kernel
    evaluates on the GPU, is arithmetic on runtime extents and `sm_count()`
    (not a constant), and that `bounds` proves to be in [1, 2**31 - 1] for
    every launch the assumptions allow, keyed by `divisor_key`.  Whether a
    division uses one is the emitter's choice (it does for i32 operands)."""
    shapes = [
        tuple(e.value if isinstance(e, ir.Int) else e.id for e in p.shape)
        for p in kernel.params
        if p.shape is not None and all(isinstance(e, (ir.Int, ir.Name)) for e in p.shape)
    ]
    facts = bound_facts([cond for cond, _ in assumes], shapes)
    found: Dict[str, UniformDivisor] = {}
    for node in _device_nodes(kernel):
        if isinstance(node, ir.Binary) and node.op in ("//", "%"):
            divisor = node.rhs
        elif isinstance(node, ir.AugAssign) and node.op in ("//", "%"):
            divisor = node.value
        else:
            continue
        if isinstance(divisor, ir.Int):
            continue
        key = divisor_key(divisor)
        if key in found or not _is_dim_expr(divisor, dims):
            continue
        b = bounds(divisor, dims, facts)
        if b is not None and b[0] >= 1:
            found[key] = UniformDivisor(divisor, len(found))
    return found


def _device_nodes(kernel: ir.Kernel):
    """The nodes of `kernel` that the GPU evaluates: not the assumptions,
    the launch ids' extents (the grid) or the tensor maps' descriptions,
    which the host evaluates at launch."""
    stack = [kernel]
    while stack:
        node = stack.pop()
        if isinstance(node, ir.TensorMap) or (
            isinstance(node, ir.Call) and (node.func == ASSUME or node.func in LAUNCH_AXES)
        ):
            continue
        yield node
        stack.extend(reversed(list(visit.children(node))))  # pre-order: divisors numbered by first use


def _is_dim_expr(e: ir.Expr, dims) -> bool:
    try:
        check_dim_expr(e, dims, "a divisor")
    except TilecError:
        return False
    return True


def bound_facts(conds, shapes=()) -> Dict[str, Tuple[int, int]]:
    """The range each dim is confined to by what the launch checks: the
    conjuncts `NAME op c` (op one of `>= > <= < ==`, either way round) of
    the assumption conditions, the [0, 2**31 - 1] every extent has, and
    the fewer than 2**31 elements of each buffer with runtime extents
    (`shapes`: ints and dim names; `N` of `B: f16[N, K]` is below
    2**31 / 64 when K >= 64 is assumed)."""
    facts: Dict[str, Tuple[int, int]] = {}

    def add(name, lo, hi):
        have_lo, have_hi = facts.get(name, (0, I32_MAX))
        facts[name] = (max(have_lo, lo), min(have_hi, hi))

    def visit_cond(c):
        if isinstance(c, ir.Binary) and c.op == "and":
            visit_cond(c.lhs)
            visit_cond(c.rhs)
            return
        if not isinstance(c, ir.Binary) or c.op not in ("==", "<", "<=", ">", ">="):
            return
        op, name, value = c.op, c.lhs, c.rhs
        if isinstance(name, ir.Int) and isinstance(value, ir.Name):  # c <= NAME is NAME >= c
            op, name, value = _MIRROR[op], value, name
        if not isinstance(name, ir.Name) or not isinstance(value, ir.Int):
            return
        v = value.value
        lo, hi = {"==": (v, v), "<": (I32_MIN, v - 1), "<=": (I32_MIN, v),
                  ">": (v + 1, I32_MAX), ">=": (v, I32_MAX)}[op]  # fmt: skip
        add(name.id, lo, hi)

    try:
        for cond in conds:
            visit_cond(cond)
    finally:
        visit_cond = None  # a recursive closure: see visit._NO_CYCLE
    for shape in shapes:
        for axis, name in enumerate(shape):
            if not isinstance(name, str):
                continue
            others = 1
            for j, e in enumerate(shape):
                if j != axis:
                    others *= e if isinstance(e, int) else facts.get(e, (0, I32_MAX))[0]
            if others > 0:
                add(name, 0, (MAX_ELEMENTS - 1) // others)
    return facts


_MIRROR = {"==": "==", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def bounds(e: ir.Expr, dims, facts: Dict[str, Tuple[int, int]]) -> Optional[Tuple[int, int]]:
    """An interval [lo, hi] holding every value the dim expression `e` takes
    at a launch the assumptions (`facts`, from `bound_facts`) allow, or None
    when no such interval within i32 is found (a possible division by a
    range holding 0, or a value or intermediate beyond i32, where the
    kernel's arithmetic would wrap).  Extents are in [0, 2**31 - 1] (the
    launch refuses larger ones), `sm_count()` is at least 1."""
    if isinstance(e, ir.Int):
        r = (e.value, e.value)
    elif isinstance(e, ir.Name):
        r = facts.get(e.id, (0, I32_MAX)) if e.id in dims else None
    elif isinstance(e, ir.Call) and e.func == SM_COUNT:
        r = (1, I32_MAX)
    elif isinstance(e, ir.Unary) and e.op == "-":
        a = bounds(e.operand, dims, facts)
        r = None if a is None else (-a[1], -a[0])
    elif isinstance(e, ir.Call) and e.func in FUNCTIONS and len(e.args) == 2:
        a, b = (bounds(x, dims, facts) for x in e.args)
        if a is None or b is None:
            return None
        f = min if e.func == "min" else max
        r = (f(a[0], b[0]), f(a[1], b[1]))
    elif isinstance(e, ir.Binary) and e.op in ARITH:
        a, b = bounds(e.lhs, dims, facts), bounds(e.rhs, dims, facts)
        if a is None or b is None:
            return None
        r = _interval(e.op, a, b)
    else:
        return None
    if r is None or r[0] < I32_MIN or r[1] > I32_MAX:
        return None
    return r


def _interval(op: str, a, b) -> Optional[Tuple[int, int]]:
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*":
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if b[0] <= 0 <= b[1]:
        return None  # the divisor may be 0
    if op == "//":  # monotonic in each operand for a divisor of one sign: the corners bound it
        corners = [x // y for x in a for y in b]
        return min(corners), max(corners)
    # %: Python's remainder has the divisor's sign and is smaller in magnitude
    if b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        return 0, b[1] - 1
    return b[0] + 1, 0

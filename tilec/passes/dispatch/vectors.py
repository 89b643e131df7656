"""Memory regions moved in vectors: the widths an access may use
(`vector_ok`, proved the way the emitter proves them, with `Divisors`), and
`spread`, which shares a region's vector runs among the threads of a scope.
"""
from __future__ import annotations

from math import gcd, prod
from typing import Dict, Optional, Sequence

from tilec.compiler import ir
from tilec.compiler.divisors import known_divisor
from tilec.compiler.layout import fuse_contiguous
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import add, floordiv, mod, mul
from tilec.passes.dispatch.per_kernel import last_kernel, statements
from tilec.passes.dispatch.registry import DispatchContext


@last_kernel
def _assignments(kernel: ir.Kernel) -> Dict[str, list]:
    """name -> [(expression, loop step or None)]: every value bound to it."""
    sources: Dict[str, list] = {}
    for node in statements(kernel):
        if isinstance(node, ir.Assign) and node.type is None:
            values = node.value.items if isinstance(node.value, ir.TupleExpr) and len(node.targets) > 1 else (node.value,)
            for t, v in zip(node.targets, values):
                if isinstance(t, ir.Name):
                    sources.setdefault(t.id, []).append((v, None))
        elif isinstance(node, ir.For) and node.kind == "range" and isinstance(node.step, ir.Int):
            sources.setdefault(node.var, []).append((node.start, node.step.value))
    return sources


class Divisors:
    """`of(expr)`: a number known to divide `expr`, the way the emitter
    proves vector alignment (`tilec.compiler.divisors`) -- names bound to
    a value are as divisible as every expression assigned to them, range
    loop variables as their start and step, a runtime extent as its
    `assume`s state (`symbols.dims`) -- so that a vector width chosen here
    is one the emitter accepts."""

    def __init__(self, symbols):
        self.sources = _assignments(symbols.kernel)
        self.dims = symbols.dims
        self.cache: Dict[str, int] = {}
        self.exprs: Dict[int, tuple] = {}  # id(expr) -> (expr, its divisor): kept, so that its id stays its

    def name(self, name: str) -> int:
        if name in self.dims:
            return self.dims[name].divisor
        if name in self.cache:
            return self.cache[name]
        self.cache[name] = 1  # a cycle proves nothing
        sources = self.sources.get(name)
        if not sources:
            return 1
        d = 0
        for value, step in sources:
            d = gcd(d, self.of(value))
            if step is not None:
                d = gcd(d, step)
        self.cache[name] = d or 1
        return self.cache[name]

    def of(self, e: ir.Expr) -> int:
        """A number known to divide `e`, worked out once per expression
        object (a copy's elements share their coordinates, and each
        element's is asked)."""
        found = self.exprs.get(id(e))
        if found is None:
            found = self.exprs[id(e)] = (e, known_divisor(e, self.name))
        return found[1]


def vector_ok(r: Region, v: int, divisors: Divisors) -> bool:
    """Whether the elements of memory region `r` move in runs of v along its
    last dim with one aligned access each: the conditions under which the
    emitter's `copy_vec` proves the same (contiguous run, strides and offset
    multiples of v, the run within one swizzle chunk, the start aligned)."""
    if v == 1:
        return True
    buf = r.buffer
    last = len(buf.shape) - 1
    if not r.dims or r.dims[-1] != last or r.extents[last] is None or r.extents[last] % v:
        return False
    if buf.runtime_dims:
        return _runtime_vector_ok(r, v, divisors)
    layout = buf.tile_layout
    g = buf.grouped
    dims = [fuse_contiguous(g.dim(d)) for d in range(len(buf.shape))]
    inner = dims[last][-1] if dims[last] else None
    if inner is None or inner.axis != "m" or inner.stride != 1 or inner.extent % v:
        return False
    if any(it.axis == "m" and it.stride % v for its in dims for it in its if it is not inner):
        return False
    if dict(layout.offset).get("m", 0) % v:
        return False
    if layout.swizzle is not None and v > 1 << layout.swizzle.per_element:
        return False
    if buf.align % (v * buf.elem_bytes):
        return False
    return divisors.of(r.starts[last]) % v == 0


def _runtime_vector_ok(r: Region, v: int, divisors: Divisors) -> bool:
    """`vector_ok` for a row-major buffer with runtime extents, as the
    emitter proves it (`_runtime_vector_address`): every row stride (a
    product of later extents, a runtime one counting as the multiple its
    `assume` states), the start along the last dim and the buffer's
    alignment are multiples of the access."""
    buf = r.buffer
    stride = 1
    for extent in reversed(buf.shape[1:]):
        stride *= divisors.name(extent) if isinstance(extent, str) else extent
        if stride % v:
            return False
    if buf.align % (v * buf.elem_bytes):
        return False
    return divisors.of(r.starts[-1]) % v == 0


def widths(elem_bytes: int) -> list:
    """Vector widths to try, widest first: up to 16 bytes."""
    out, v = [], max(1, 16 // elem_bytes)
    while v >= 1:
        out.append(v)
        v //= 2
    return out


def spread(ctx: DispatchContext, count: int, tid: ir.Expr, shape: Sequence[int], v: int, make) -> list:
    """Statements that let `count` threads (the running one at `tid`) visit
    every element of a region of `shape`, in runs of `v` along the last dim:
    consecutive threads take consecutive runs, each thread every count-th.
    `make(index)` gives the statements for the run starting at region index
    `index` (expressions)."""
    vshape = tuple(shape[:-1]) + (shape[-1] // v,) if shape else ()
    total = prod(vshape)
    rounds = -(-total // count)
    var = ctx.fresh("i") if rounds > 1 else None
    it = ir.Name(var) if var else ir.Int(0)
    run = add(mul(it, count), tid)
    index, inner = [], 1
    for k in reversed(range(len(vshape))):
        index.append(_digit(it, count, tid, inner, vshape[k] if k > 0 else None))
        inner *= vshape[k]
    index.reverse()
    if index:
        index[-1] = mul(index[-1], v)
    body = list(make(tuple(index)))
    if total % count:
        body = [ir.If(ir.Binary("<", run, ir.Int(total)), tuple(body))]
    if var is None:
        return body
    return [ir.For(var, "unroll", ir.Int(0), ir.Int(rounds), ir.Int(1), tuple(body))]


def _digit(it: ir.Expr, count: int, tid: ir.Expr, inner: int, n: Optional[int]) -> ir.Expr:
    """(it * count + tid) // inner % n (no `% n` when n is None), with the
    loop index split off where inner divides count."""
    if count % inner:
        digit = floordiv(add(mul(it, count), tid), inner)
        return digit if n is None else mod(digit, n)
    q = count // inner
    if n is not None and q % n == 0:
        return mod(floordiv(tid, inner), n)
    digit = add(mul(it, q), floordiv(tid, inner))
    return digit if n is None else mod(digit, n)

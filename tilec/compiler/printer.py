"""IR to canonical `.tile` text.

The printer is the inverse of the parser: `parse(print_module(m)) == m` for
every module the parser can produce, and `print_module(parse(t)) == t` when
`t` is canonical.  Canonical means: 4-space indentation, no blank lines inside
bodies, the target line, the `const` lines and each helper and kernel separated
by one blank line, decimal integers, floats by `repr`, the fewest parentheses
that keep the tree (binary operators associate to the left; comparisons do not
chain), `range(n)` when a loop starts at 0 with step 1, `elif` for an else
branch that is a lone `if`, and layouts in their literal notation
(`SW[3, 3, 3] * S[(8, 64) : (64, 1)] + R[4 : 32@TLane] + O[5@TCol]`).

Nodes that no text can stand for (an empty body, a `Call` of a dotted name
outside the namespaces, a non-finite float) are compiler bugs and raise
`ValueError`.
"""
from __future__ import annotations

import math
import re

from tilec.compiler import ir
from tilec.compiler.lexicon import NAMESPACES

# Binding strength, loosest first.  Tuples are only printed whole, so they
# never compete.
_SELECT, _OR, _AND, _NOT, _COMPARE, _BOR, _BXOR, _BAND, _SHIFT, _ARITH, _TERM, _UNARY, _ATOM = range(1, 14)

_BINARY = {
    "or": _OR,
    "and": _AND,
    "==": _COMPARE, "!=": _COMPARE, "<": _COMPARE, "<=": _COMPARE, ">": _COMPARE, ">=": _COMPARE,
    "|": _BOR,
    "^": _BXOR,
    "&": _BAND,
    "<<": _SHIFT, ">>": _SHIFT,
    "+": _ARITH, "-": _ARITH,
    "*": _TERM, "/": _TERM, "//": _TERM, "%": _TERM,
}

_FUNC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}
_INDENT = "    "


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------


def print_expr(e: ir.Expr) -> str:
    """One expression, with no surrounding parentheses unless it is a tuple."""
    return _expr(e, _SELECT)


def _prec(e: ir.Expr) -> int:
    if isinstance(e, ir.Binary):
        return _BINARY[e.op]
    if isinstance(e, ir.Select):
        return _SELECT
    if isinstance(e, ir.Unary):
        return _NOT if e.op == "not" else _UNARY
    if isinstance(e, (ir.Int, ir.Float)):
        return _UNARY if _number(e).startswith("-") else _ATOM
    if isinstance(e, ir.LayoutLit):
        if e.replica or e.offset:
            return _ARITH
        return _TERM if e.swizzle is not None else _ATOM
    return _ATOM


def _expr(e: ir.Expr, min_prec: int) -> str:
    printer = _PRINTERS.get(type(e))
    if printer is None:
        raise TypeError(f"not an expression: {type(e).__name__}")
    text = printer(e)
    return f"({text})" if _prec(e) < min_prec else text


def _number(e) -> str:
    if isinstance(e, ir.Float):
        if not math.isfinite(e.value):
            raise ValueError(f"the float {e.value} has no literal")
        return repr(e.value)
    return str(e.value)


def _str(e: ir.Str) -> str:
    return '"' + "".join(_ESCAPES.get(c, c) for c in e.value) + '"'


def _binary(e: ir.Binary) -> str:
    p = _BINARY[e.op]
    if p == _COMPARE:
        return f"{_expr(e.lhs, _BOR)} {e.op} {_expr(e.rhs, _BOR)}"
    return f"{_expr(e.lhs, p)} {e.op} {_expr(e.rhs, p + 1)}"


def _unary(e: ir.Unary) -> str:
    if e.op == "not":
        return f"not {_expr(e.operand, _NOT)}"
    operand = _expr(e.operand, _UNARY)
    if e.op == "-" and isinstance(e.operand, (ir.Int, ir.Float)) and not operand.startswith("-"):
        # `-3` would read back as the literal Int(-3).
        operand = f"({operand})"
    return e.op + operand


def _select(e: ir.Select) -> str:
    return f"{_expr(e.then, _OR)} if {_expr(e.cond, _OR)} else {_expr(e.orelse, _SELECT)}"


def _arguments(args, kwargs) -> str:
    parts = [_expr(a, _SELECT) for a in args]
    for k in kwargs:
        value = _expr(k.value, _SELECT)
        parts.append(f"**{value}" if k.name is None else f"{k.name}={value}")
    return ", ".join(parts)


def _call(e: ir.Call) -> str:
    if not _FUNC.match(e.func) or ("." in e.func and e.func.split(".")[0] not in NAMESPACES):
        raise ValueError(f"Call.func {e.func!r} is neither a name nor a path in {sorted(NAMESPACES)}")
    return f"{e.func}({_arguments(e.args, e.kwargs)})"


def _postfix_base(obj: ir.Expr) -> str:
    # `3.x` would lex as the float `3.` followed by `x`.
    if isinstance(obj, (ir.Int, ir.Float)):
        return f"({_number(obj)})"
    return _expr(obj, _ATOM)


def _method(e: ir.Method) -> str:
    return f"{_postfix_base(e.obj)}.{e.name}({_arguments(e.args, e.kwargs)})"


def _attr(e: ir.Attr) -> str:
    return f"{_postfix_base(e.obj)}.{e.name}"


def _simple(e) -> bool:
    """Bounds that print without spaces around a slice's colon."""
    while isinstance(e, ir.Attr):
        e = e.obj
    return isinstance(e, (ir.Name, ir.Int, ir.Float, ir.Bool))


def _slice(e: ir.Slice) -> str:
    bounds = [b for b in (e.start, e.stop) if b is not None]
    lo = "" if e.start is None else _expr(e.start, _SELECT)
    hi = "" if e.stop is None else _expr(e.stop, _SELECT)
    if all(_simple(b) for b in bounds):
        return f"{lo}:{hi}"
    return f"{lo} : {hi}".strip()


def _index(e: ir.Index) -> str:
    if not e.indices:
        raise ValueError("an Index needs at least one index")
    items = ", ".join(_slice(i) if isinstance(i, ir.Slice) else _expr(i, _SELECT) for i in e.indices)
    return f"{_expr(e.base, _ATOM)}[{items}]"


def _items(items) -> str:
    return ", ".join(_expr(i, _SELECT) for i in items)


def _tuple(e: ir.TupleExpr) -> str:
    if len(e.items) == 1:
        return f"({_expr(e.items[0], _SELECT)},)"
    return f"({_items(e.items)})"


def _dict(e: ir.DictExpr) -> str:
    pairs = (f"{_str(ir.Str(k))}: {_expr(v, _SELECT)}" for k, v in zip(e.keys, e.values))
    return "{" + ", ".join(pairs) + "}"


def _stride(it: ir.LayoutIter) -> str:
    if it.axis is None:
        return _expr(it.stride, _SELECT)
    return f"{_expr(it.stride, _BOR)}@{it.axis}"


def _layout_group(head: str, iters) -> str:
    if not iters:
        raise ValueError(f"an empty {head}[...] group has no literal")
    if all(it.stride is None and it.axis is None for it in iters):
        return f"{head}[{_items(it.extent for it in iters)}]"
    if any(it.stride is None for it in iters):
        raise ValueError(f"{head}[...] mixes iterators with and without strides")
    if len(iters) == 1 and not any(isinstance(x, ir.TupleExpr) for x in (iters[0].extent, iters[0].stride)):
        return f"{head}[{_expr(iters[0].extent, _SELECT)} : {_stride(iters[0])}]"
    extents = _tuple(ir.TupleExpr(tuple(it.extent for it in iters)))
    strides = ", ".join(_stride(it) for it in iters)
    strides = f"({strides},)" if len(iters) == 1 else f"({strides})"
    return f"{head}[{extents} : {strides}]"


def _layout(e: ir.LayoutLit) -> str:
    text = _layout_group("S", e.shard)
    if e.swizzle is not None:
        text = f"SW[{_items(e.swizzle)}] * {text}"
    if e.replica:
        text += " + " + _layout_group("R", e.replica)
    if e.offset:
        for it in e.offset:
            if it.extent != ir.Int(1) or it.stride is None:
                raise ValueError("an offset iterator needs extent Int(1) and a stride")
        text += f" + O[{', '.join(_stride(it) for it in e.offset)}]"
    return text


_PRINTERS = {
    ir.Int: _number,
    ir.Float: _number,
    ir.Bool: lambda e: "True" if e.value else "False",
    ir.Str: _str,
    ir.Name: lambda e: e.id,
    ir.DTypeLit: lambda e: e.name,
    ir.Unary: _unary,
    ir.Binary: _binary,
    ir.Select: _select,
    ir.Call: _call,
    ir.Method: _method,
    ir.Attr: _attr,
    ir.Slice: _slice,
    ir.Index: _index,
    ir.TupleExpr: _tuple,
    ir.ListExpr: lambda e: f"[{_items(e.items)}]",
    ir.DictExpr: _dict,
    ir.LayoutLit: _layout,
}


# ---------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------


def print_stmt(s: ir.Stmt, indent: int = 0) -> str:
    """One statement (a compound one with its body), every line ending in a
    newline and indented by `indent` levels of four spaces."""
    lines = []
    _stmt(s, indent, lines)
    return "".join(line + "\n" for line in lines)


def _body(body, indent: int, lines: list) -> None:
    if not body:
        raise ValueError("an empty body has no text; leave a Pass() in it")
    for s in body:
        _stmt(s, indent, lines)


def _assign_value(s: ir.Assign) -> str:
    v = s.value
    if len(s.targets) > 1 and isinstance(v, ir.TupleExpr) and len(v.items) > 1:
        return _items(v.items)
    return _expr(v, _SELECT)


def _range(s: ir.For) -> str:
    zero, one = ir.Int(0), ir.Int(1)
    if s.step != one:
        args = (s.start, s.stop, s.step)
    elif s.start != zero:
        args = (s.start, s.stop)
    else:
        args = (s.stop,)
    return f"{s.kind}({_items(args)})"


def _stmt(s: ir.Stmt, indent: int, lines: list) -> None:
    pad = _INDENT * indent
    if isinstance(s, ir.Assign):
        targets = ", ".join(_expr(t, _ATOM) for t in s.targets)
        typed = f": {s.type}" if s.type is not None else ""
        lines.append(f"{pad}{targets}{typed} = {_assign_value(s)}")
    elif isinstance(s, ir.AugAssign):
        lines.append(f"{pad}{_expr(s.target, _ATOM)} {s.op}= {_expr(s.value, _SELECT)}")
    elif isinstance(s, ir.Meta):
        lines.append(f"{pad}meta {s.name} = {_expr(s.value, _SELECT)}")
    elif isinstance(s, ir.ExprStmt):
        lines.append(pad + _expr(s.expr, _SELECT))
    elif isinstance(s, ir.Pass):
        lines.append(pad + "pass")
    elif isinstance(s, ir.Return):
        v = s.value
        text = "" if v is None else " " + (
            _items(v.items) if isinstance(v, ir.TupleExpr) and len(v.items) > 1 else _expr(v, _SELECT))
        lines.append(pad + "return" + text)
    elif isinstance(s, ir.TensorMap):
        if s.value.func != "tensormap":
            raise ValueError("a TensorMap's value must be a tensormap(...) call")
        lines.append(f"{pad}tensormap {s.name} = {_call(s.value)}")
    elif isinstance(s, ir.For):
        lines.append(f"{pad}for {s.var} in {_range(s)}:")
        _body(s.body, indent + 1, lines)
    elif isinstance(s, ir.While):
        lines.append(f"{pad}while {_expr(s.cond, _SELECT)}:")
        _body(s.body, indent + 1, lines)
    elif isinstance(s, ir.If):
        keyword = "if"
        while True:
            lines.append(f"{pad}{keyword} {_expr(s.cond, _SELECT)}:")
            _body(s.then, indent + 1, lines)
            if len(s.orelse) == 1 and isinstance(s.orelse[0], ir.If):
                s, keyword = s.orelse[0], "elif"
                continue
            if s.orelse:
                lines.append(f"{pad}else:")
                _body(s.orelse, indent + 1, lines)
            break
    elif isinstance(s, ir.InlineDef):
        lines.append(f"{pad}inline def {s.name}({', '.join(s.params)}):")
        _body(s.body, indent + 1, lines)
    else:
        raise TypeError(f"not a statement: {type(s).__name__}")


# ---------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------


def _declared(p: ir.Param) -> str:
    if p.shape is None:
        return f"{p.name}: {p.dtype}"
    if not p.shape:
        raise ValueError(f"buffer parameter {p.name} has an empty shape")
    text = f"{p.name}: {p.dtype}[{_items(p.shape)}]"
    if p.layout is not None:
        text += f" layout {_expr(p.layout, _OR)}"  # a conditional layout in parentheses: `if` follows
    return text


def _param(p: ir.Param) -> str:
    return _declared(p) if p.cond is None else f"{_declared(p)} if {_expr(p.cond, _SELECT)}"


def print_module(m: ir.Module) -> str:
    """The whole module as canonical `.tile` text ("" for an empty module)."""
    blocks = []
    if m.target is not None:
        blocks.append([f"target {m.target}"])
    if m.includes:
        blocks.append([f"include {_str(ir.Str(i.path))}" for i in m.includes])
    if m.consts:
        blocks.append([f"const {c.name} = {_expr(c.value, _SELECT)}" for c in m.consts])
    for h in m.helpers:
        lines = []
        _stmt(h, 0, lines)
        blocks.append(lines)
    for k in m.kernels:
        lines = [f"kernel {k.name}({', '.join(_param(p) for p in k.params)}):"]
        _body(k.body, 1, lines)
        blocks.append(lines)
    return "\n".join("".join(line + "\n" for line in b) for b in blocks)

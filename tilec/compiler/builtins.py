"""The table of builtin calls: what each undotted call (and each buffer/pool
method) of the language means, and the signature it is checked against.

The IR keeps builtins as plain `Call`/`Method` nodes; this table is what gives
them meaning.  `symbols` reads it to know which calls declare launch ids,
buffers and pools, the verifier to check arguments, and the emitter to know
which calls produce values.  Signatures are written in a small text notation
(`Signature.parse`) shared with the intrinsic table, so that a row reads like
the call it describes:

    "shape: shape, dtype: dtype, *, scope: str(shared|shared.dyn|local|tmem), layout: layout = None"

Parameter kinds (the word after the colon):

| kind | what the argument must be | what a consumer receives |
| --- | --- | --- |
| `int`, `int(1|2)` | a compile-time integer (optionally one of the listed) | `int` |
| `bool` | `True`/`False` | `bool` |
| `str(a|b)` | a string literal, one of the listed | `str` |
| `dtype` | a dtype name (`f16`) | `str` |
| `shape` | a tuple/list of compile-time integers | `tuple[int, ...]` |
| `index` | a list of runtime index expressions (`[i, j]`) | the expressions |
| `layout` | a layout (literal or canonicalisable call) | the expression |
| `buffer` | the name of a buffer | the name |
| `element` | one buffer element `buf[i, j]` | the expression |
| `value(T)` | a runtime value converted to dtype `T` (`any`: kept) | an operand |
| `pred` | a runtime boolean | a predicate operand |
| `shared_addr` | a shared-memory address (`b.ptr_to(..)`, `address_of(..)`, a u32) | a u32 operand |
| `generic_addr` | a generic 64-bit address (`address_of(tensormap)`) | a u64 operand |
| `mem_addr` | a shared (u32) or global (u64) address (`b.ptr_to(..)`, `address_of(..)`) | an operand whose type says which |
| `reg(T)` | a writable scalar of dtype `T`: a register-array element or typed scalar | a register |
| `values(T)`, `regs(T)` | a tuple of the above | a list |
| `expr` | any expression, interpreted by the consumer | the expression |

`*name: kind` collects the remaining positional arguments; a bare `*` makes
the parameters after it keyword-only.
"""
from __future__ import annotations

import functools
import re
from typing import Dict, Optional, Sequence, Tuple


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError

REQUIRED = object()
"""Marks a parameter without a default."""

PARAM_KINDS = frozenset(
    "int bool str dtype shape index layout buffer element value pred shared_addr "
    "generic_addr mem_addr reg values regs expr".split()
)
RUNTIME_KINDS = frozenset("index element value pred shared_addr generic_addr mem_addr reg values regs".split())
"""Kinds whose arguments are evaluated when the kernel runs."""

NOT_LITERAL_KINDS = RUNTIME_KINDS | {"layout", "buffer", "expr"}
"""Kinds whose arguments `Signature.literals` leaves out: the runtime ones,
and those the row reads as expressions (a layout, a buffer, any expression)."""


@records.frozen
class ParamSpec:
    name: str
    kind: str
    arg: Optional[str] = None  # "f32" in value(f32), "1|2" in int(1|2)
    default: object = REQUIRED
    keyword_only: bool = False
    variadic: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.variadic

    @functools.cached_property
    def choices(self) -> Optional[Tuple]:
        """The allowed values of an enumerated `int(..)`/`str(..)` parameter
        (worked out once per parameter: every call binding it asks)."""
        if self.arg is None or self.kind not in ("int", "str"):
            return None
        items = self.arg.split("|")
        return tuple(int(x) for x in items) if self.kind == "int" else tuple(items)

    @functools.cached_property
    def literal_checked(self) -> bool:
        """Whether `Signature.bind` checks a literal argument of this
        parameter (`_check_literal`): a string, bool or dtype, or one of
        enumerated choices.  Most parameters take runtime operands, for
        which there is nothing to check."""
        return self.kind in ("str", "bool", "dtype") or self.choices is not None

    def __str__(self) -> str:
        text = ("*" if self.variadic else "") + f"{self.name}: {self.kind}"
        if self.arg is not None:
            text += f"({self.arg})"
        if self.default is not REQUIRED:
            text += f' = "{self.default}"' if isinstance(self.default, str) else f" = {self.default}"
        return text


_PARAM_RE = re.compile(
    r"^(?P<star>\*)?(?P<name>\w+)\s*:\s*(?P<kind>\w+)(?:\((?P<arg>[^)]*)\))?"
    r"(?:\s*=\s*(?P<default>.+))?$"
)


def _parse_default(text: str):
    text = text.strip()
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    return int(text, 0)


@records.frozen
class Signature:
    params: Tuple[ParamSpec, ...]

    @classmethod
    def parse(cls, text: str) -> "Signature":
        params = []
        keyword_only = False
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            if part == "*":
                keyword_only = True
                continue
            m = _PARAM_RE.match(part)
            if m is None or m["kind"] not in PARAM_KINDS:
                raise ValueError(f"bad parameter spec '{part}' in signature '{text}'")
            variadic = m["star"] is not None
            default = REQUIRED if m["default"] is None else _parse_default(m["default"])
            params.append(ParamSpec(m["name"], m["kind"], m["arg"], default, keyword_only, variadic))
            keyword_only = keyword_only or variadic
        return cls(tuple(params))

    def __str__(self) -> str:
        parts = []
        starred = False
        for p in self.params:
            if p.keyword_only and not starred and not p.variadic:
                parts.append("*")
            starred = starred or p.keyword_only or p.variadic
            parts.append(str(p))
        return ", ".join(parts)

    def bind(self, what: str, args: Sequence[ir.Expr], kwargs: Sequence[ir.Keyword], span) -> Dict:
        """Match a call's arguments to the parameters.

        Returns name -> argument expression (a tuple of expressions for a
        variadic parameter), or the Python default when the argument was left
        out.  Enumerated compile-time parameters are checked here when the
        argument is a literal."""
        bound: Dict[str, object] = {}
        positional = self._positional
        n, i = len(args), 0
        for p in positional:
            if p.variadic:
                bound[p.name] = tuple(args[i:])
                i = n
                break
            if i == n:
                break
            bound[p.name] = args[i]
            i += 1
        if i < n:
            raise TilecError(
                f"{what} takes at most {len(positional)} positional argument(s), got {len(positional) + n - i}",
                args[i].span or span,
            )
        by_name = self._by_name
        for kw in kwargs:
            if kw.name is None:
                raise TilecError(f"'**' arguments must be expanded before {what} is checked", kw.span or span)
            p = by_name.get(kw.name)
            if p is None or p.variadic:
                raise TilecError(
                    f"{what} has no parameter '{kw.name}' (expected: {self})", kw.span or span
                )
            if p.name in bound:
                raise TilecError(f"{what} got parameter '{kw.name}' twice", kw.span or span)
            bound[p.name] = kw.value
        for p in self.params:
            if p.name in bound:
                if p.literal_checked:
                    _check_literal(what, p, bound[p.name], span)
            elif p.required:
                raise TilecError(f"{what} is missing argument '{p.name}' (expected: {self})", span)
            else:
                bound[p.name] = () if p.variadic else p.default
        return bound

    # What `bind` and `literals` read of the parameters, worked out once per
    # signature: every call of a builtin or intrinsic is bound, some several times.
    @functools.cached_property
    def _positional(self) -> tuple:
        return tuple(p for p in self.params if not p.keyword_only or p.variadic)

    @functools.cached_property
    def _by_name(self) -> dict:
        return {p.name: p for p in self.params}

    @functools.cached_property
    def compile_time(self) -> tuple:
        """The parameters `literals` reads: those taking compile-time literals."""
        return tuple(p for p in self.params if p.kind not in NOT_LITERAL_KINDS)

    @functools.cached_property
    def not_literal(self) -> tuple:
        """The others: evaluated when the kernel runs, or read as expressions."""
        return tuple(p for p in self.params if p.kind in NOT_LITERAL_KINDS)

    def literals(self, what: str, bound: Dict, span) -> Dict:
        """The compile-time arguments of a bound call as Python values (ints,
        strings, bools, dtype names, shapes); runtime ones are left out.  A
        compile-time argument that is not a literal is a located error: the
        fold pass should have made it one."""
        out = {}
        for p in self.compile_time:
            arg = bound[p.name]
            if p.variadic:
                out[p.name] = tuple(literal(what, p, a, span) for a in arg)
            else:
                out[p.name] = literal(what, p, arg, span)
        return out


def literal(what: str, p: ParamSpec, arg, span):
    """One compile-time argument as a Python value."""
    if not isinstance(arg, ir.Expr):
        return arg  # a default
    where = arg.span or span
    if p.kind == "int" and isinstance(arg, ir.Int):
        return arg.value
    if p.kind == "bool" and isinstance(arg, ir.Bool):
        return arg.value
    if p.kind == "str" and isinstance(arg, ir.Str):
        return arg.value
    if p.kind == "dtype" and isinstance(arg, ir.DTypeLit):
        return arg.name
    if p.kind == "shape" and isinstance(arg, (ir.TupleExpr, ir.ListExpr)):
        if all(isinstance(i, ir.Int) for i in arg.items):
            return tuple(i.value for i in arg.items)
    if p.kind == "shape" and isinstance(arg, ir.Int):
        return (arg.value,)
    raise TilecError(f"{what}: '{p.name}' must be a compile-time {p.kind}", where)


def _check_literal(what: str, p: ParamSpec, arg, span) -> None:
    if not isinstance(arg, ir.Expr):
        return
    where = arg.span or span
    if p.kind == "str":
        if not isinstance(arg, ir.Str):
            raise TilecError(f"{what}: '{p.name}' must be a string literal", where)
    elif p.kind == "bool":
        if not isinstance(arg, ir.Bool):
            raise TilecError(f"{what}: '{p.name}' must be True or False", where)
    elif p.kind == "dtype":
        if not isinstance(arg, ir.DTypeLit):
            raise TilecError(f"{what}: '{p.name}' must be a dtype", where)
    choices = p.choices
    if choices is not None and isinstance(arg, (ir.Int, ir.Str)) and arg.value not in choices:
        shown = ", ".join(repr(c) for c in choices)
        raise TilecError(f"{what}: '{p.name}' must be one of {shown}, got {arg.value!r}", where)


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------


@records.frozen
class Builtin:
    name: str
    signature: Signature
    category: str  # "launch", "memory", "address", "compile-time", "conversion", "math", "vector"
    result: str  # what a call evaluates to, in words (or a dtype)
    doc: str


@records.frozen
class LaunchAxis:
    """How a launch-id builtin maps onto the hardware.

    `level` names the axis; thread-level ids (`stride` not None) cover the
    flattened thread index `%tid.x` from `stride` up to `stride * extent`, which
    is how the block size is derived from the declarations.  `max_extent`
    bounds the declared extent."""

    level: str
    stride: Optional[int]
    max_extent: Optional[int]
    max_dims: int = 1


LAUNCH_AXES = {
    "cta_id": LaunchAxis("cta", None, None, 3),
    "cta_id_in_cluster": LaunchAxis("cluster", None, 16, 3),
    "warpgroup_id": LaunchAxis("warpgroup", 128, 8),
    "warp_id_in_wg": LaunchAxis("warp_in_wg", 32, 4),
    "warp_id": LaunchAxis("warp", 32, 32),
    "lane_id": LaunchAxis("lane", 1, 32),
    "thread_id": LaunchAxis("thread", 1, 1024),
    "thread_id_in_wg": LaunchAxis("thread_in_wg", 1, 128),
}

SCOPES = ("shared", "shared.dyn", "local", "tmem")
"""Where `alloc` can place a buffer (global buffers are kernel parameters)."""

ROUNDINGS = ("rn", "rz", "rm", "rp")
"""Rounding modes of `convert`: to nearest even, toward zero, toward -inf,
toward +inf.  Float-to-int conversions use the integer forms (`.rni` ...)."""

PREDEFINED = {
    "SWIZZLE_NONE": 0,
    "SWIZZLE_32B_ATOM": 1,
    "SWIZZLE_64B_ATOM": 2,
    "SWIZZLE_128B_ATOM": 3,
}
"""Names every program can use, with their integer values."""

TILE_PRIMITIVES = frozenset({"copy", "copy_async", "gemm", "gemm_async", "cast", "fill", "reduce", "map"})
TILE_SCOPES = frozenset({"cta", "wg", "warp", "thread"})
"""Tile primitives are lowered by dispatch; their signatures live with their
variants.  A call `wg.copy` is the primitive `copy` at warpgroup scope."""


def tile_primitive(func: str) -> Optional[str]:
    """The primitive a call names (`copy` for `copy` and `warp.copy`), else None."""
    head, _, rest = func.rpartition(".")
    if rest in TILE_PRIMITIVES and (head == "" or head in TILE_SCOPES):
        return rest
    return None


def _row(name, signature, category, result, doc) -> Builtin:
    return Builtin(name, Signature.parse(signature), category, result, doc)


_LAUNCH_SIG = "extents: shape"
_TABLE = [
    _row("cta_id", _LAUNCH_SIG, "launch", "i32, or a tuple of i32 for 2-3 extents",
         "The CTA index (%ctaid); the extents are the grid."),
    _row("cta_id_in_cluster", _LAUNCH_SIG, "launch", "i32, or a tuple of i32",
         "The CTA's rank in its cluster; the extents are the cluster shape."),
    _row("warpgroup_id", _LAUNCH_SIG, "launch", "i32", "%tid.x / 128."),
    _row("warp_id_in_wg", _LAUNCH_SIG, "launch", "i32", "(%tid.x / 32) % 4."),
    _row("warp_id", _LAUNCH_SIG, "launch", "i32", "%tid.x / 32."),
    _row("lane_id", _LAUNCH_SIG, "launch", "i32", "%laneid."),
    _row("thread_id", _LAUNCH_SIG, "launch", "i32", "%tid.x."),
    _row("thread_id_in_wg", _LAUNCH_SIG, "launch", "i32", "%tid.x % 128."),
    _row("alloc",
         "shape: shape, dtype: dtype, *, scope: str(shared|shared.dyn|local|tmem), "
         "layout: layout = None, align: int = 0",
         "memory", "buffer",
         "A buffer in the given scope.  shared: a static .shared array; shared.dyn: a "
         "slice of the dynamic arena; local: the thread's registers (or .local memory "
         "when indexed at run time).  align 0 means the default (16 bytes, or the "
         "element size if larger)."),
    _row("alloc_shared", "shape: shape, dtype: dtype, *, layout: layout = None, align: int = 0",
         "memory", "buffer", "alloc(..., scope=\"shared\")."),
    _row("alloc_local", "shape: shape, dtype: dtype, *, layout: layout = None, align: int = 0",
         "memory", "buffer", "alloc(..., scope=\"local\")."),
    _row("decl_buffer",
         "shape: shape, dtype: dtype, data: buffer = None, *, elem_offset: int = 0, "
         "layout: layout = None, scope: str(shared|shared.dyn|local|tmem) = None, "
         "allocated_addr: value(u32) = None",
         "memory", "buffer",
         "A buffer over existing storage: `data`'s bytes from elem_offset elements of "
         "this dtype on, or tensor memory at `allocated_addr` (scope tmem)."),
    _row("smem_pool", "", "memory", "pool",
         "A bump allocator over the dynamic shared arena: pool.alloc(shape, dtype, "
         "layout=, align=), pool.move_base_to(bytes), pool.commit()."),
    _row("address_of", "x: expr", "address", "an address",
         "The address of a buffer (its first element), a buffer element `b[i]`, or a "
         "tensor map (generic u64).  Shared buffers give u32 shared-window addresses, "
         "global ones u64."),
    _row("sm_count", "", "launch-value", "i32",
         "The number of SMs of the device the kernel runs on, read at launch (a persistent grid: "
         "cta_id([sm_count()])); a hidden kernel parameter, so it is the same value everywhere."),
    _row("min", "a: expr, b: expr", "math", "the promoted type of a and b",
         "Folded when both are constants, else min.<type>."),
    _row("max", "a: expr, b: expr", "math", "the promoted type of a and b",
         "Folded when both are constants, else max.<type>."),
    # scalar math (tilec.compiler.math_fns; emitted by emit_ptx/math_emit.py)
    _row("exp2", "x: expr, *, approx: bool = False, packed: str(f16x2|bf16x2) = None", "math", "the type of x",
         "2**x (ex2)."),
    _row("exp", "x: expr, *, approx: bool = False", "math", "the type of x", "e**x (ex2 of x*log2(e))."),
    _row("log2", "x: expr, *, approx: bool = False", "math", "the type of x", "log2(x) (lg2)."),
    _row("log", "x: expr, *, approx: bool = False", "math", "the type of x", "ln(x) (lg2(x)*ln(2))."),
    _row("sqrt", "x: expr, *, approx: bool = False", "math", "the type of x", "sqrt(x) (sqrt.rn)."),
    _row("rsqrt", "x: expr, *, approx: bool = False", "math", "the type of x", "1/sqrt(x)."),
    _row("rcp", "x: expr, *, approx: bool = False", "math", "the type of x", "1/x (rcp.rn)."),
    _row("tanh", "x: expr, *, approx: bool = False, packed: str(f16x2|bf16x2) = None", "math", "the type of x",
         "tanh(x)."),
    _row("sin", "x: expr, *, approx: bool = False", "math", "the type of x", "sin(x) (radians)."),
    _row("cos", "x: expr, *, approx: bool = False", "math", "the type of x", "cos(x) (radians)."),
    _row("abs", "x: expr, *, packed: str(f16x2|bf16x2) = None", "math", "the type of x", "|x| (abs)."),
    _row("fma", "a: expr, b: expr, c: expr, *, packed: str(f16x2|bf16x2) = None", "math", "the promoted type",
         "a*b+c rounded once (fma.rn)."),
    _row("copysign", "a: expr, b: expr", "math", "the promoted type",
         "The magnitude of a with the sign of b (copysign)."),
    _row("convert", "x: value(any), dtype: dtype, *, rounding: str(rn|rz|rm|rp) = None",
         "conversion", "dtype",
         "A scalar conversion (cvt).  The default rounding is rn for conversions that "
         "round to a float and rz (truncation) for float to int; exact conversions take none."),
    _row("reinterpret", "x: value(any), dtype: dtype", "conversion", "dtype",
         "The same bits as another dtype of equal width (mov.b<N>)."),
    _row("pack_f16x2", "lo: value(f32), hi: value(f32), *, rounding: str(rn|rz) = \"rn\"",
         "conversion", "u32",
         "Two f32 rounded to f16 and packed: lo in bits 0-15 (the lower address in "
         "memory), hi in bits 16-31 (cvt.<rounding>.f16x2.f32)."),
    _row("pack_bf16x2", "lo: value(f32), hi: value(f32), *, rounding: str(rn|rz) = \"rn\"",
         "conversion", "u32", "As pack_f16x2, to bf16 (cvt.<rounding>.bf16x2.f32)."),
    _row("copy_vec", "dst: element, src: element, n: int", "vector", "nothing (a statement)",
         "Moves n consecutive storage elements from src to dst in one access per side: "
         "a vector ld/st of up to 16 bytes for memory, n registers for a register array.  "
         "The elements must be contiguous and the access aligned to its size; the "
         "emitter proves both from the layouts and indices or reports an error."),
    _row("tile_to", "layout: layout, shape: shape, atom_shape: shape", "compile-time", "layout",
         "Repeats a layout over a larger shape (layout algebra)."),
    _row("reduce_layout", "layout: layout, shape: shape, axes: shape", "compile-time", "layout",
         "The register layout of `reduce`'s result over `axes` (those dims kept with extent 1)."),
    _row("mma_shared_layout", "dtype: dtype, mode: int(0|1|2|3), shape: shape", "compile-time",
         "layout", "The swizzled shared layout tensor-core operands expect."),
    _row("tma_shared_layout", "dtype: dtype, mode: int(0|1|2|3), shape: shape", "compile-time",
         "layout", "The swizzled shared layout a TMA box lands in."),
]

BUILTINS: Dict[str, Builtin] = {b.name: b for b in _TABLE}


@records.frozen
class MethodRow:
    receiver: str  # "buffer" or "pool"
    name: str
    signature: Signature
    result: str
    doc: str


def _method(receiver, name, signature, result, doc) -> MethodRow:
    return MethodRow(receiver, name, Signature.parse(signature), result, doc)


_METHODS = [
    _method("buffer", "ptr_to", "index: index", "an address",
            "The address of one element (shared: u32, global: u64, tmem: u32 lane<<16|column)."),
    _method("buffer", "local", "n: int", "buffer",
            "The thread's n storage elements of a local buffer, as a 1-D local buffer."),
    _method("buffer", "view", "*shape: int, layout: layout = None", "buffer",
            "The same storage seen with another shape and layout."),
    _method("pool", "alloc", "shape: shape, dtype: dtype, *, layout: layout = None, align: int = 0",
            "buffer", "The next slice of the arena, aligned (default 16 bytes)."),
    _method("pool", "move_base_to", "offset: int", "nothing",
            "Continues allocating at this byte offset (it may not move backwards)."),
    _method("pool", "commit", "", "nothing", "Ends the pool: its size is final."),
]

METHODS: Dict[Tuple[str, str], MethodRow] = {(m.receiver, m.name): m for m in _METHODS}

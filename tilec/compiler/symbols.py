"""Per-kernel analysis: what every name of a kernel is, and the launch shape.

Dispatch, the verifier and the emitter all need the same facts (is `A` a
global buffer, what layout has `Asmem`, which dtype has `phase`, how many
threads does the block have), so they are computed once here from the
builtin and intrinsic tables instead of being rediscovered by each pass.

    syms = analyze_kernel(kernel, module, target)
    syms.lookup("Asmem").buffer.layout      # a Symbol; .kind says what it is
    syms.launch.block                       # (128, 1, 1)
    syms.type_of(expr)                      # "i32", "f16", "bool", "shared_ptr"...

Names are flat per kernel: a name may be defined again in a sibling block
(two loops over `s`) when both definitions agree on kind and type, but never
while the first is still visible, and a buffer name only once.  Scalars
bound with a plain `x = e` are immutable; `x: i32 = e` declares a mutable one.

Value types (`tilec.compiler.value_types`) are dtype names, "bool" and the
address types.
"""
from __future__ import annotations

import functools
from math import gcd
from typing import Callable, Dict, List, Optional, Tuple

from tilec.compiler import records
from tilec.compiler import builtins, intrinsics, ir, visit
from tilec.compiler.builtins import BUILTINS, LAUNCH_AXES, METHODS, PREDEFINED
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES, dtype as lookup_dtype
from tilec.compiler.layout import TileLayout, cosize, row_major
from tilec.compiler.layout_ir import to_layout
from tilec.compiler.layout_shape import Grouped, group
from tilec.compiler.math_fns import FLOATS as MATH_FLOATS, MATH, result_type as math_result_type
from tilec.compiler import runtime_dims
from tilec.compiler.runtime_dims import Dim
from tilec.compiler.swizzle import Swizzle
from tilec.compiler.targets import Target
from tilec.compiler.value_types import (
    FLOAT_TYPES,
    FP8_TYPES,
    NARROW_INT_TYPES,
    POINTER_TYPES,
    VALUE_TYPES,
    assignable,
    fits,
    is_float,
    is_int,
    literal_type,
    no_arithmetic,
    promote,
    type_bits,
    value_type_of_dtype,
)

DYN_ARENA = "<dynamic shared memory>"
"""The `storage` of buffers placed in the kernel's one dynamic shared arena."""

DEFAULT_ALIGN = 16
ARENA_ALIGN = 1024


# --------------------------------------------------------------------------
# What names are
# --------------------------------------------------------------------------


@records.frozen
class Buffer:
    """A buffer: a global parameter, an allocation, a declared buffer over
    existing storage, or a view.

    `storage` names the buffer that owns the bytes (itself for a root, the
    base for a view or a `decl_buffer` over data, `DYN_ARENA` for anything in
    the dynamic shared arena) and `byte_offset` is where this buffer starts
    in it.  `layout` is the layout literal as written (None: row-major);
    `tile_layout` is its meaning."""

    name: str
    dtype: str
    shape: Tuple[int | str, ...]  # a str is a runtime extent (global parameters only)
    scope: str  # "global", "shared", "shared.dyn", "local", "tmem"
    layout: Optional[ir.Expr] = None
    align: int = DEFAULT_ALIGN
    storage: str = ""
    byte_offset: int = 0
    allocated_addr: Optional[ir.Expr] = None
    span: Optional[ir.Span] = records.field(default=None, eq=False)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype].bytes

    @property
    def runtime_dims(self) -> Tuple[str, ...]:
        """The names of its runtime extents (a global parameter's)."""
        return tuple(e for e in self.shape if isinstance(e, str))

    def static_only(self, what: str) -> None:
        """A located error when the buffer has runtime extents: `what`
        needs its shape at compile time."""
        if self.runtime_dims:
            raise TilecError(
                f"{what} needs the shape of '{self.name}' at compile time, but its extent(s) "
                f"{', '.join(self.runtime_dims)} are bound at launch",
                self.span,
            )

    @property
    def numel(self) -> int:
        self.static_only("the element count")
        n = 1
        for e in self.shape:
            n *= e
        return n

    @property
    def nbytes(self) -> int:
        """Bytes the buffer spans: its element count, or what its layout
        addresses when it has one -- further for padded rows or a swizzle
        block, less for a broadcast (a stride-0 dim reads one position
        many times)."""
        if isinstance(self.layout, ir.LayoutLit) and self.scope in ("shared", "shared.dyn", "global"):
            return cosize(self.tile_layout, "m") * self.elem_bytes
        return self.numel * self.elem_bytes

    @functools.cached_property
    def tile_layout(self) -> TileLayout:
        """The layout value over the buffer's shape (row-major when none is
        given), computed once per buffer: every pass that places elements
        asks for it.  A layout still written as a constructor call is an
        error here (the verifier reports it first, where it is written)."""
        self.static_only("a layout")
        if self.layout is not None and not isinstance(self.layout, ir.LayoutLit):
            raise TilecError(
                f"the layout of '{self.name}' must be a layout such as S[...] or mma_shared_layout(...)",
                self.layout.span or self.span,
            )
        try:
            return row_major(self.shape) if self.layout is None else to_layout(self.layout, self.shape)
        except TilecError as err:
            raise err.with_span((self.layout is not None and self.layout.span) or self.span)

    @functools.cached_property
    def grouped(self) -> Grouped:
        """`tile_layout` grouped by the buffer's shape (each dim's iterators,
        `layout_shape.group`), computed once per buffer: dispatch reads it
        for each call naming the buffer.  It cannot fail where
        `tile_layout` did not, which grouped the layout by the same shape."""
        return group(self.tile_layout, self.shape)

    @property
    def is_root(self) -> bool:
        return self.storage == self.name

    @property
    def is_shared(self) -> bool:
        return self.scope in ("shared", "shared.dyn")


@records.frozen
class LaunchId:
    name: str
    builtin: str  # "cta_id", "lane_id", ...
    level: str  # LAUNCH_AXES[builtin].level
    extent: int | ir.Expr  # an expression of runtime extents for a cta id bound at launch
    dim: int = 0  # x, y, z for multi-dimensional cta ids
    span: Optional[ir.Span] = records.field(default=None, eq=False)


@records.frozen
class Launch:
    grid: Tuple[int | ir.Expr, int | ir.Expr, int | ir.Expr]  # expressions of runtime extents allowed
    block: Tuple[int, int, int]
    cluster: Tuple[int, int, int]
    ids: Tuple[LaunchId, ...]

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@records.mutable
class Pool:
    """The bump allocator of `smem_pool()`: `base` is its offset in the
    dynamic arena, `cursor` the next free byte relative to it."""

    name: str
    base: int
    cursor: int = 0
    committed: bool = False
    span: Optional[ir.Span] = None


@records.frozen
class Symbol:
    """One name.  `kind` is one of: "buffer", "scalar_param", "tensormap",
    "launch_id", "pool", "scalar" (mutable, typed), "value" (immutable),
    "loop_var", "meta".  `type` is the value type of scalars, values, loop
    variables, parameters and launch ids."""

    name: str
    kind: str
    type: Optional[str] = None
    buffer: Optional[Buffer] = None
    launch_id: Optional[LaunchId] = None
    pool: Optional[Pool] = None
    tensormap: Optional[ir.TensorMap] = None
    span: Optional[ir.Span] = records.field(default=None, eq=False)


SCALAR_KINDS = ("scalar_param", "dim", "launch_id", "scalar", "value", "loop_var")


_ARITH = ("+", "-", "*", "/", "//", "%")
_BITWISE = ("&", "|", "^")
_SHIFTS = ("<<", ">>")
_COMPARE = ("==", "!=", "<", "<=", ">", ">=")


class _Typing:
    """The typing half of `KernelSymbols`: the value type of each of the
    kernel's expressions.  A node's type depends only on the node and the
    kernel's symbols (a name keeps its kind and type in every block that
    defines it), so each node is typed once: the analysis and the emitter
    ask for the type of every subexpression, and without the memo each
    question re-typed the whole subtree below it.  A base class of the
    analysis, not an object of its own: one that pointed back at the
    analysis made a reference cycle, which left every analysis, its memos
    and the IR they hold (~4,600 objects a v7 compile) to the cyclic
    collector instead of freeing them when the compile ends."""

    __slots__ = ()

    def type_of(self, e: ir.Expr) -> str:
        """The value type of a runtime expression (a located error if it is
        not a value: a buffer, a region, an unknown call...)."""
        hit = self._type_memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        cls = type(e)
        try:
            typer = _TYPERS[cls]
        except KeyError:
            typer = _TYPERS[cls] = getattr(_Typing, "_" + cls.__name__, None)
        if typer is None:
            raise TilecError(f"expected a value, found {cls.__name__.lower()}", e.span)
        t = typer(self, e)
        self._type_memo[id(e)] = (e, t)  # the node kept so that its id stays its own
        return t

    def _LayoutLit(self, e):
        raise TilecError(f"a layout is not a value here; {ir.S_IS_A_LAYOUT}", e.span)

    def _Int(self, e):
        return literal_type(e.value)

    def _Float(self, e):
        return "f32"

    def _Bool(self, e):
        return "bool"

    def _Name(self, e):
        sym = self.lookup(e.id, e.span)
        if sym.kind in SCALAR_KINDS:
            return sym.type
        if sym.kind == "meta":
            raise TilecError(f"meta value '{e.id}' must be substituted before this point", e.span)
        raise TilecError(f"'{e.id}' is a {_describe(sym)}, not a scalar value", e.span)

    def operand_type(self, e: ir.Binary) -> str:
        """The type both operands of an arithmetic or comparison `e` are
        converted to before the operation (an int literal takes the other
        operand's type when it fits, else the usual promotion); asked of
        every arithmetic node by the typing and again by the emitter."""
        hit = self._operand_memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        t = self._operand_type(e)
        self._operand_memo[id(e)] = (e, t)
        return t

    def _operand_type(self, e: ir.Binary) -> str:
        a, b = e.lhs, e.rhs
        ta, tb = self.type_of(a), self.type_of(b)
        no_arithmetic(ta, e.span)
        no_arithmetic(tb, e.span)
        if isinstance(a, (ir.Int, ir.Float)) and not isinstance(b, (ir.Int, ir.Float)):
            if tb != "bool" and (is_float(tb) or (isinstance(a, ir.Int) and fits(a.value, tb))):
                return tb
        if isinstance(b, (ir.Int, ir.Float)) and not isinstance(a, (ir.Int, ir.Float)):
            if ta != "bool" and (is_float(ta) or (isinstance(b, ir.Int) and fits(b.value, ta))):
                return ta
        if ta in POINTER_TYPES and tb in POINTER_TYPES:
            if ta != tb or e.op not in ("-",) + _COMPARE:
                raise TilecError(f"cannot combine addresses {ta} and {tb} with '{e.op}'", e.span)
            return ta
        return promote(ta, tb, e.span)

    def _Binary(self, e):
        op = e.op
        if op in ("and", "or"):
            for side in (e.lhs, e.rhs):
                if self.type_of(side) != "bool":
                    raise TilecError(f"operands of '{op}' must be bool", side.span)
            return "bool"
        if op in _SHIFTS:
            t = self.type_of(e.lhs)
            if not is_int(t) or not is_int(self.type_of(e.rhs)):
                raise TilecError(f"'{op}' needs integer operands", e.span)
            return t
        t = self.operand_type(e)
        if op in _COMPARE:
            if t == "bool" and op not in ("==", "!="):
                raise TilecError(f"'{op}' is not defined on bool", e.span)
            return "bool"
        if op in _BITWISE:
            if not (is_int(t) or t == "bool"):
                raise TilecError(f"'{op}' needs integer or bool operands, got {t}", e.span)
            return t
        if t == "bool":
            raise TilecError(f"'{op}' is not defined on bool", e.span)
        if op == "/" and not is_float(t):
            raise TilecError("'/' on integers: use '//' (floor division)", e.span)
        if t in POINTER_TYPES and op not in ("+", "-"):
            raise TilecError(f"'{op}' is not defined on addresses", e.span)
        if op == "-" and self.type_of(e.lhs) in POINTER_TYPES and self.type_of(e.rhs) in POINTER_TYPES:
            return "i32" if POINTER_TYPES[t] == 32 else "i64"  # a byte distance
        if op == "%" and is_float(t):
            raise TilecError("'%' is not defined on floats", e.span)
        return t

    def _Unary(self, e):
        t = self.type_of(e.operand)
        if e.op == "not":
            if t != "bool":
                raise TilecError("operand of 'not' must be bool", e.span)
            return t
        if e.op == "~" and not is_int(t):
            raise TilecError("operand of '~' must be an integer", e.span)
        if e.op == "-" and (t == "bool" or t in POINTER_TYPES):
            raise TilecError(f"cannot negate a {t}", e.span)
        no_arithmetic(t, e.span)
        return t

    def _Select(self, e):
        if self.type_of(e.cond) != "bool":
            raise TilecError("the condition of 'if ... else' must be bool", e.cond.span)
        if self.type_of(e.then) == self.type_of(e.orelse) == "bool":
            return "bool"
        return self.operand_type(ir.Binary("+", e.then, e.orelse, span=e.span))

    def _Index(self, e):
        buf = self.buffer_of(e)
        check_element(buf, e)
        if buf.scope == "tmem":
            raise TilecError(f"tensor-memory buffer '{buf.name}' cannot be read element-wise", e.span)
        check_scalar_elements(buf, e.span)
        return value_type_of_dtype(buf.dtype)

    def _Method(self, e):
        if e.name != "ptr_to":
            raise TilecError(f"'.{e.name}(...)' is not a value", e.span)
        buf = self.buffer_of(e.obj)
        return address_type(buf, e.span)

    def _Call(self, e):
        f = e.func
        if f in ("min", "max"):
            bound = self.bound(e)
            return self.operand_type(ir.Binary("+", bound["a"], bound["b"], span=e.span))
        if f == runtime_dims.SM_COUNT:
            self.bound(e)
            return "i32"
        if f in MATH:
            return self._math(MATH[f], e)
        if f in ("convert", "reinterpret"):
            bound = self.bound(e)
            t = builtins.literal(f, BUILTINS[f].signature.params[1], bound["dtype"], e.span)
            src = self.type_of(bound["x"])
            narrow = t in NARROW_INT_TYPES
            if (t not in VALUE_TYPES and not narrow) or t == "bool":
                raise TilecError(f"{f}: cannot produce a {t} scalar", bound["dtype"].span or e.span)
            if f == "reinterpret" and type_bits(src) != type_bits(t):
                raise TilecError(f"reinterpret: {src} and {t} differ in width", e.span)
            if f == "convert" and src == "bool":
                raise TilecError("convert: use 'a if cond else b' to turn a bool into a number", e.span)
            if src in FP8_TYPES and f == "reinterpret" and narrow:
                return value_type_of_dtype(t)  # its bits: a u8 or i8 value
            if (src in FP8_TYPES or t in FP8_TYPES) and src != t:
                other = t if src in FP8_TYPES else src
                if f == "reinterpret" or other not in ("f16", "bf16", "f32") + FP8_TYPES:
                    fp8 = src if src in FP8_TYPES else t
                    raise TilecError(f"{f}: {fp8} converts only to and from f16, bf16, f32 and the other 8-bit "
                                     f"float, not {other}", e.span)
            return value_type_of_dtype(t) if narrow else t
        if f in ("pack_f16x2", "pack_bf16x2"):
            bound = self.bound(e)
            for p in ("lo", "hi"):
                if not assignable(self.type_of(bound[p]), "f32", bound[p]):
                    raise TilecError(f"{f}: '{p}' must be f32", bound[p].span or e.span)
            return "u32"
        if f == "address_of":
            bound = self.bound(e)
            x = bound["x"]
            if isinstance(x, ir.Name) and self.lookup(x.id, x.span).kind == "tensormap":
                return "generic_ptr"
            if isinstance(x, ir.Index):
                check_element(self.buffer_of(x), x)
            return address_type(self.buffer_of(x), e.span)
        if intrinsics.is_intrinsic_name(f):
            row = intrinsics.lookup(f, e.span)
            if row.result is None:
                raise TilecError(f"{f} does not produce a value", e.span)
            bound = self.bound(e)
            if row.result.startswith("="):  # the type of that argument
                return self.type_of(bound[row.result[1:]])
            return row.result
        raise TilecError(f"'{f}(...)' is not a value", e.span)

    def math_operand_type(self, e: ir.Call) -> str:
        """The type the operands of a math builtin are converted to: their
        promotion, an all-literal call computing in f32."""
        row = BUILTINS[e.func]
        bound = self.bound(e)
        operands = [bound[p.name] for p in row.signature.params if p.kind == "expr"]
        if all(isinstance(x, (ir.Int, ir.Float)) for x in operands):
            return "f32" if not MATH[e.func].ints or any(isinstance(x, ir.Float) for x in operands) else "i32"
        t = None
        for x in operands:
            if isinstance(x, (ir.Int, ir.Float)):
                continue
            tx = self.type_of(x)
            t = tx if t is None else promote(t, tx, e.span)
        for x in operands:
            if isinstance(x, ir.Float) and t not in MATH_FLOATS:
                raise TilecError(f"{e.func}: a float literal is not a {t}", x.span or e.span)
        return t

    def _math(self, fn, e: ir.Call) -> str:
        row = BUILTINS[e.func]
        bound = self.bound(e)
        if bound.get("packed") is not None:
            for p in row.signature.params:
                x = bound[p.name]
                if p.kind == "expr" and not isinstance(x, ir.Int) and self.type_of(x) not in ("u32", "i32"):
                    raise TilecError(f"{e.func}(packed=...) takes u32 words of two halves (pack_f16x2), "
                                     f"got a {self.type_of(x)}", x.span or e.span)
            return "u32"
        return math_result_type(fn, self.math_operand_type(e), e.span)


@records.mutable
class KernelSymbols(_Typing):
    kernel: ir.Kernel
    target: Target
    symbols: Dict[str, Symbol] = records.field(factory=dict)
    buffers: Dict[str, Buffer] = records.field(factory=dict)  # definition order
    tensormaps: Dict[str, ir.TensorMap] = records.field(factory=dict)
    pools: Dict[str, Pool] = records.field(factory=dict)
    launch: Optional[Launch] = None
    dynamic_smem: int = 0  # bytes of the dynamic arena
    helpers: frozenset = frozenset()
    dims: Dict[str, Dim] = records.field(factory=dict)  # runtime extents, in order of appearance
    assumes: List[Tuple[ir.Expr, str]] = records.field(factory=list)  # (condition, message)
    uses_sm_count: bool = False  # some expression reads sm_count(): the kernel takes it as a hidden parameter
    # the kernel executes ptx.griddepcontrol.wait: the runtime may launch it programmatically (kernel.json)
    waits_grid_dependency: bool = False
    # divisors known at launch and proven positive: hidden magic-number parameters (runtime_dims.uniform_divisors)
    divisors: Dict[str, "runtime_dims.UniformDivisor"] = records.field(factory=dict)
    runtime_indexed: set = records.field(factory=set)  # storage roots of local buffers indexed at run time somewhere
    pair_written: set = records.field(factory=set)  # storage roots of local buffers an intrinsic takes as f16x2 pairs
    # id(node) -> (node, its type), id(binary) -> (binary, its operands' type): see `_Typing`
    _type_memo: dict = records.field(init=False, eq=False, repr=False, factory=dict)
    _operand_memo: dict = records.field(init=False, eq=False, repr=False, factory=dict)
    # id(intrinsic call) -> (call, its bound arguments): see `bound`
    _bound: dict = records.field(init=False, eq=False, repr=False, factory=dict)

    def lookup(self, name: str, span=None) -> Symbol:
        sym = self.symbols.get(name)
        if sym is None:
            raise TilecError(f"'{name}' is not defined", span)
        return sym

    def buffer(self, name: str, span=None) -> Buffer:
        sym = self.lookup(name, span)
        if sym.buffer is None:
            raise TilecError(f"'{name}' is not a buffer (it is a {_describe(sym)})", span)
        return sym.buffer

    def buffer_of(self, expr: ir.Expr) -> Buffer:
        """The buffer an expression names: `b`, or the base of `b[...]`."""
        if isinstance(expr, ir.Index):
            expr = expr.base
        if not isinstance(expr, ir.Name):
            raise TilecError("expected a buffer name", expr.span)
        return self.buffer(expr.id, expr.span)

    def bound(self, call: ir.Call) -> dict:
        """The arguments of the call `call` of a builtin or an intrinsic
        bound to its row's parameters (`Signature.bind`), bound once per call
        object: the analysis checks a call and types it (a math call three
        times), and emit-ptx reads the same calls again.  Read it, never
        change it."""
        hit = self._bound.get(id(call))
        if hit is not None and hit[0] is call:
            return hit[1]
        f = call.func
        row = BUILTINS.get(f)
        signature = (row if row is not None else intrinsics.lookup(f, call.span)).signature
        bound = signature.bind(f, call.args, call.kwargs, call.span)
        self._bound[id(call)] = (call, bound)  # the call kept so that its id stays its own
        return bound

    def names_in_use(self, module: ir.Module) -> set:
        """Every name the kernel binds or reads, without a walk: each is a
        symbol of this analysis, a const or helper of `module`, or a
        predefined constant (what `visit.identifiers(kernel, module=module)`
        collects, and a few predefined names more); what the fresh names
        of a pass that rewrites the kernel avoid (`visit.NameGen`)."""
        return {*self.symbols, *PREDEFINED, *(c.name for c in module.consts), *(h.name for h in module.helpers)}

    def carried(self, kernel: ir.Kernel, tensormaps: Tuple[ir.TensorMap, ...] = ()) -> "KernelSymbols":
        """This analysis as that of `kernel`: this one's kernel with the
        statements `tensormaps` added at the top of its body (`Analyses.carry`
        says when that holds).  The new names come after the parameters' and
        before the body's, as an analysis of `kernel` would define them; the
        types already worked out are kept (a node's type depends on the node
        and the names, which keep their meaning)."""
        symbols, maps = self.symbols, self.tensormaps
        if tensormaps:
            params = len(kernel.params) + len(self.dims)  # the parameters and their runtime extents come first
            items = list(self.symbols.items())
            added = [(t.name, Symbol(t.name, "tensormap", tensormap=t, span=t.span)) for t in tensormaps]
            symbols = dict(items[:params] + added + items[params:])
            maps = {**{t.name: t for t in tensormaps}, **self.tensormaps}
        return self._sharing(kernel=kernel, symbols=symbols, tensormaps=maps)

    def _sharing(self, **changes) -> "KernelSymbols":
        """This analysis with `changes`, keeping the types and bindings
        already worked out (what `carried` and `pools_written_out` hand on)."""
        new = records.evolve(self, **changes)
        new._type_memo, new._operand_memo = self._type_memo, self._operand_memo
        new._bound = self._bound
        return new

    def pools_written_out(self, kernel: ir.Kernel, module: ir.Module) -> Optional["KernelSymbols"]:
        """This analysis as that of `kernel`: this one's kernel with its pool
        written out by plan-smem -- the pool an `alloc` of its bytes in the
        dynamic arena, each `pool.alloc` a `decl_buffer` over it, its
        `move_base_to` and `commit` gone -- or None where that is not shown
        to hold (more than one pool, an empty one, another allocation in the
        arena, runtime extents), and the caller analyzes afresh.  Nothing
        moves: with one pool and nothing else in the arena, the arena's
        `alloc` lands on the pool's base, so every offset stays.  What
        changes are the buffers of the pool's name (now the arena), of its
        allocations (a `decl_buffer` is aligned to what its offset
        guarantees) and of the views and declarations over those: each is
        built again by the analysis's own declaration code, with every name
        of the kernel visible (the declaration was checked where it stands
        by this analysis).  The types and bindings worked out are kept, as
        in `carried`."""
        if len(self.pools) != 1 or self.dims or self.uses_sm_count:
            return None  # (uniform divisors read the kernel: only with runtime extents or sm_count)
        (pool,) = self.pools.values()
        if pool.cursor == 0:
            return None
        symbols = dict(self.symbols)
        again = _Analyzer(kernel, module, self.target)
        again.syms.symbols, again.in_scope = symbols, set(symbols)
        again.arena_end = pool.base  # the arena's alloc (1024-aligned) lands on the pool's base
        changed = set()  # the names whose buffer is built again
        for s in visit.statements(kernel.body):
            if type(s) is not ir.Assign or len(s.targets) != 1 or type(s.targets[0]) is not ir.Name:
                continue
            name, value = s.targets[0].id, s.value
            kind = type(value)
            if name == pool.name:
                buf = again.alloc(name, value)
            elif kind is ir.Call and value.func == "decl_buffer":
                data = next((k.value for k in value.kwargs if k.name == "data"), None)
                if type(data) is not ir.Name or data.id not in changed:
                    continue
                buf = again.decl_buffer(name, value)
            elif kind is ir.Method and value.name == "view" and type(value.obj) is ir.Name:
                if value.obj.id not in changed:
                    continue
                buf = again.method(value, statement=False, result_name=name)
            else:
                sym = self.symbols.get(name)
                if kind is ir.Call and sym is not None and sym.buffer is not None and sym.buffer.storage == DYN_ARENA:
                    return None  # another allocation in the arena: the pool's base came after it
                continue
            changed.add(name)
            symbols[name] = Symbol(name, "buffer", buffer=buf, span=buf.span or s.span)
        if pool.name not in changed:
            return None
        buffers = {name: sym.buffer for name, sym in symbols.items() if sym.buffer is not None}
        return self._sharing(kernel=kernel, symbols=symbols, buffers=buffers, pools={})


def _describe(sym: Symbol) -> str:
    return {
        "buffer": "buffer",
        "scalar_param": "scalar parameter",
        "dim": "run-time extent",
        "tensormap": "tensor map",
        "launch_id": "launch id",
        "pool": "shared-memory pool",
        "scalar": "mutable scalar",
        "value": "value",
        "loop_var": "loop variable",
        "meta": "meta value",
    }[sym.kind]


_TYPERS: Dict[type, Optional[Callable]] = {}
"""Node class -> the `_Typing` method typing it (`_Int`, `_Binary`...), or
None for a class that is no value; looked up once per class."""


def address_type(buf: Buffer, span) -> str:
    if buf.is_shared:
        return "shared_ptr"
    if buf.scope == "global":
        return "global_ptr"
    if buf.scope == "tmem":
        return "u32"
    raise TilecError(f"register array '{buf.name}' has no address; use its elements", span)


def check_element(buf: Buffer, e: ir.Index) -> None:
    """`e` indexes one element of `buf`: one scalar index per dimension."""
    if len(e.indices) != len(buf.shape):
        raise TilecError(
            f"'{buf.name}' has {len(buf.shape)} dimension(s), indexed with {len(e.indices)}", e.span
        )
    for i in e.indices:
        if isinstance(i, ir.Slice):
            raise TilecError("a region (slice) is not an element; tile primitives take regions", i.span)


def check_scalar_elements(buf: Buffer, span) -> None:
    """An element of `buf` is read or written one at a time: its dtype must be
    a scalar value's (fp4 and the ue8m0 scale factors are packed, moved only
    by the tile primitives)."""
    d = DTYPES[buf.dtype]
    if d.kind == "float" and d.name not in FLOAT_TYPES + FP8_TYPES:
        raise TilecError(f"{buf.dtype} elements are not scalar values", span)


# --------------------------------------------------------------------------
# The analysis
# --------------------------------------------------------------------------


def analyze_kernel(kernel: ir.Kernel, module: ir.Module, target: Target) -> KernelSymbols:
    """The symbols and launch configuration of `kernel` (located errors for
    undefined names, wrong arguments, conflicting declarations...).  It
    depends on the kernel, the target and the names of the module's consts
    and helpers.  A compile asks through `Analyses` (on its pass context),
    which keeps each kernel's analysis for the passes after."""
    a = _Analyzer(kernel, module, target)
    a.run()
    if a.pool_outgrew_placement():
        # plan-smem writes each pool out as one allocation where `smem_pool()` stands, of the bytes
        # the pool ends up holding, and what the arena holds after it comes after those bytes: the
        # second run places the arena so, knowing each pool's size from the first
        a = _Analyzer(kernel, module, target, pool_sizes={p.name: p.cursor for p in a.syms.pools.values()})
        a.run()
    return a.syms


class Analyses:
    """The analyses of the kernels one compile has seen, by kernel object.

    The IR is frozen, so a kernel object has one analysis for the whole
    compile: the verifier, check-protocol and infer-scope read the same
    kernel (and emit-ptx the kernel unroll gives), and every analysis costs a walk of the whole kernel.  A pass
    whose rewrite leaves the analysis as it was (infer-scope's scope
    prefixes) or changes it in a way it states (plan-tma's tensor maps)
    hands it on with `carry`, so the pass after it does not analyze again.
    The entries keep their kernels alive, so an id is never reused while
    its entry is kept.  Callers read the analyses, never change them."""

    def __init__(self):
        self._entries: Dict[int, tuple] = {}  # id(kernel) -> (kernel, key, KernelSymbols)

    def _kept(self, kernel: ir.Kernel, key) -> Optional[KernelSymbols]:
        """The analysis kept for this kernel object under `key`, or None."""
        entry = self._entries.get(id(kernel))
        if entry is not None and entry[0] is kernel and entry[1] == key:
            return entry[2]
        return None

    def of(self, kernel: ir.Kernel, module: ir.Module, target: Target) -> KernelSymbols:
        key = _module_key(module, target)
        syms = self._kept(kernel, key)
        if syms is None:
            syms = analyze_kernel(kernel, module, target)
            self._entries[id(kernel)] = (kernel, key, syms)
        return syms

    def carry(self, old: ir.Kernel, new: ir.Kernel, module: ir.Module, target: Target,
              tensormaps: Tuple[ir.TensorMap, ...] = ()) -> None:
        """`new` is `old` with the tensor-map statements `tensormaps` put at
        the top of its body and otherwise changed only where the analysis
        does not look (a tile primitive's name or keyword arguments that
        name nothing new): its analysis is `old`'s plus those tensor maps.
        Nothing is kept when `old` was never analyzed."""
        key = _module_key(module, target)
        syms = None if new is old else self._kept(old, key)
        if syms is not None:
            self._entries[id(new)] = (new, key, syms.carried(new, tensormaps))

    def carry_pools_written_out(self, old: ir.Kernel, new: ir.Kernel, module: ir.Module, target: Target) -> None:
        """`new` is `old` with its pools written out by plan-smem: its
        analysis is `old`'s as `KernelSymbols.pools_written_out` makes it,
        where that holds (else `new` is analyzed when asked)."""
        key = _module_key(module, target)
        syms = None if new is old else self._kept(old, key)
        if syms is not None:
            syms = syms.pools_written_out(new, module)
        if syms is not None:
            self._entries[id(new)] = (new, key, syms)

    def kept(self) -> list:
        """(kernel, analysis) of every entry (the tests compare them with a
        fresh analysis)."""
        return [(kernel, syms) for kernel, _, syms in self._entries.values()]


def _module_key(module: ir.Module, target: Target) -> tuple:
    """What an analysis depends on besides the kernel."""
    return (target, frozenset(h.name for h in module.helpers), frozenset(c.name for c in module.consts))


class _Analyzer:
    def __init__(self, kernel: ir.Kernel, module: ir.Module, target: Target, pool_sizes: Optional[dict] = None):
        self.syms = KernelSymbols(kernel, target, helpers=frozenset(h.name for h in module.helpers))
        self.consts = {c.name for c in module.consts}
        self.scopes: List[list] = [[]]  # the names each open block defined, innermost last
        self.in_scope: set = set()  # the names of all open blocks: those visible (a name is defined once while visible)
        self.launch_ids: List[LaunchId] = []
        self.arena_end = 0
        # pool name -> the bytes the pool ends up holding, reserved in the arena where it is made
        # (known on `analyze_kernel`'s second run only)
        self.pool_sizes = pool_sizes or {}
        self.placed: Dict[str, int] = {}  # pool name -> its cursor at the latest placement in the arena after it
        self.static_end = 0  # bytes of static shared memory, allocations in order
        # id(tuple expression) -> (it, the innermost block open when `exprs` checked it)
        self.checked_tuples: Dict[int, tuple] = {}
        self.paired: Dict[tuple, tuple] = {}  # (id(items), id(types)) -> items: see `pair_operands`

    # ---- scopes -------------------------------------------------------

    def visible(self, name: str) -> bool:
        return name in self.in_scope

    def define(self, sym: Symbol) -> None:
        name = sym.name
        if name in self.consts or name in PREDEFINED:
            raise TilecError(f"'{name}' is a constant and cannot be redefined", sym.span)
        old = self.syms.symbols.get(name)
        if old is not None:
            if self.visible(name):
                hint = f"; declare it as '{name}: {old.type} = ...' to update it" if old.kind == "value" else ""
                raise TilecError(
                    f"'{name}' is already defined (line {old.span.line if old.span else '?'}){hint}", sym.span
                )
            if old.kind != sym.kind or old.type != sym.type or sym.kind in ("buffer", "pool", "launch_id", "tensormap"):
                raise TilecError(
                    f"'{name}' was defined elsewhere in this kernel as a {_describe(old)}"
                    + (f" of type {old.type}" if old.type else "")
                    + "; use another name",
                    sym.span,
                )
        self.syms.symbols[name] = sym
        if sym.buffer is not None:
            self.syms.buffers[name] = sym.buffer
        self.scopes[-1].append(name)
        self.in_scope.add(name)

    def block(self, stmts, extra: Optional[Symbol] = None) -> None:
        self.scopes.append([])
        if extra is not None:
            self.define(extra)
        for s in stmts:
            self.stmt(s)
        self.in_scope.difference_update(self.scopes.pop())

    # ---- driver -------------------------------------------------------

    def run(self) -> None:
        k = self.syms.kernel
        for p in k.params:
            self.param(p)
        for s in k.body:  # the kernel's top level shares the parameters' scope
            self.stmt(s)
        self.syms.launch = self.launch_config(k)
        self.syms.dynamic_smem = self.arena_end
        if self.syms.dims or self.syms.uses_sm_count:
            self.syms.divisors = runtime_dims.uniform_divisors(k, self.syms.dims, self.syms.assumes)

    def param(self, p: ir.Param) -> None:
        lookup_dtype(p.dtype, p.span)
        if p.shape is None:
            t = value_type_of_dtype(p.dtype)
            if t not in VALUE_TYPES or t in FP8_TYPES:
                raise TilecError(f"scalar parameter '{p.name}' cannot have dtype {p.dtype}", p.span)
            self.define(Symbol(p.name, "scalar_param", type=t, span=p.span))
            return
        shape = tuple(self.extent(p, axis, e) for axis, e in enumerate(p.shape))
        if any(isinstance(e, str) for e in shape) and p.layout is not None:
            raise TilecError(
                f"'{p.name}' has runtime extents and a layout; a buffer with runtime extents is row-major",
                p.layout.span or p.span,
            )
        buf = Buffer(p.name, p.dtype, shape, "global", p.layout, 256, p.name, 0, span=p.span)
        self.define(Symbol(p.name, "buffer", buffer=buf, span=p.span))

    def extent(self, p: ir.Param, axis: int, e) -> int | str:
        """A parameter extent: a compile-time integer, or a name that is not
        a const, which declares a runtime extent (bound at launch from the
        first axis naming it)."""
        if isinstance(e, ir.Int):
            return e.value
        if not isinstance(e, ir.Name):
            raise TilecError(
                "a parameter extent must be a compile-time integer or a name (a runtime extent)",
                getattr(e, "span", None),
            )
        if e.id not in self.syms.dims:
            old = self.syms.symbols.get(e.id)
            if old is not None and old.kind == "scalar_param":
                raise TilecError(
                    f"'{e.id}' is a scalar parameter; a runtime extent is bound from the arrays' shapes, "
                    f"so drop the parameter '{e.id}' and use the extent's name",
                    e.span,
                )
            self.syms.dims[e.id] = Dim(e.id, p.name, axis, span=e.span)
            self.define(Symbol(e.id, "dim", type="i32", span=e.span))
        return e.id

    def assume(self, s: ir.ExprStmt) -> None:
        if len(self.scopes) != 1:
            raise TilecError(f"{runtime_dims.ASSUME}(...) belongs at the kernel's top level", s.span)
        cond, message = runtime_dims.read_assume(s.expr, self.syms.dims)
        self.syms.assumes.append((cond, message))
        for name, d in runtime_dims.divisor_facts(cond).items():
            dim = self.syms.dims[name]
            self.syms.dims[name] = records.evolve(dim, divisor=dim.divisor * d // gcd(dim.divisor, d))

    def const_int(self, e, what: str) -> int:
        if isinstance(e, ir.Int):
            return e.value
        raise TilecError(f"{what} must be a compile-time integer", getattr(e, "span", None))

    # ---- statements ---------------------------------------------------

    def stmt(self, s: ir.Stmt) -> None:
        method = getattr(self, "_" + type(s).__name__)
        method(s)

    def _Pass(self, s):
        pass

    def _Meta(self, s):
        self.exprs(s.value)
        self.define(Symbol(s.name, "meta", span=s.span))

    def _InlineDef(self, s):
        raise TilecError("inline helpers must be defined at module level or expanded first", s.span)

    def _TensorMap(self, s):
        self.exprs(*s.value.args, *(k.value for k in s.value.kwargs))
        self.syms.tensormaps[s.name] = s
        self.define(Symbol(s.name, "tensormap", tensormap=s, span=s.span))

    def _ExprStmt(self, s):
        e = s.expr
        if isinstance(e, ir.Call) and e.func in LAUNCH_AXES:
            self.launch_decl([], e, s.span)
            return
        if isinstance(e, ir.Call) and e.func == runtime_dims.ASSUME:
            self.assume(s)
            return
        if isinstance(e, ir.Method):
            self.method(e, statement=True)
            return
        if not isinstance(e, ir.Call):
            raise TilecError("an expression statement must be a call", e.span or s.span)
        self.call(e, statement=True)

    def _For(self, s):
        self.exprs(s.start, s.stop, s.step)
        t = "i32"
        for bound in (s.start, s.stop):
            bt = self.syms.type_of(bound)
            if not is_int(bt):
                raise TilecError("range bounds must be integers", bound.span)
            if not isinstance(bound, ir.Int):
                t = promote(t, bt, bound.span)
        self.block(s.body, Symbol(s.var, "loop_var", type=t, span=s.span))

    def _If(self, s):
        self.cond(s.cond)
        self.block(s.then)
        self.block(s.orelse)

    def _While(self, s):
        self.cond(s.cond)
        self.block(s.body)

    def cond(self, e):
        self.exprs(e)
        if self.syms.type_of(e) != "bool":
            raise TilecError("a condition must be bool (compare with == 0 to test a number)", e.span)

    def _AugAssign(self, s):
        self.exprs(s.value)
        t = s.target
        if isinstance(t, ir.Index):
            self.exprs(t)
            self.syms.type_of(t)
            self.store_target(t, s.span)
        elif isinstance(t, ir.Name):
            sym = self.syms.lookup(t.id, t.span)
            if sym.kind != "scalar":
                raise TilecError(f"cannot update {_describe(sym)} '{t.id}'", t.span)
        else:
            raise TilecError("cannot assign to this expression", t.span or s.span)
        self.syms.type_of(ir.Binary(s.op, t, s.value, span=s.span))

    def _Assign(self, s):
        targets, value = s.targets, s.value
        if s.type is not None:
            if len(targets) != 1 or not isinstance(targets[0], ir.Name):
                raise TilecError("a typed declaration names one scalar", s.span)
            self.exprs(value)
            t = value_type_of_dtype(lookup_dtype(s.type, s.span).name)
            if t not in VALUE_TYPES:
                raise TilecError(f"mutable scalars cannot have dtype {s.type}: it is not a scalar value type", s.span)
            if t != s.type:
                raise TilecError(f"mutable scalars cannot have dtype {s.type} (use {t})", s.span)
            src = self.syms.type_of(value)
            if not assignable(src, t, value):
                raise TilecError(f"cannot initialise {t} '{targets[0].id}' with a {src}", value.span or s.span)
            self.define(Symbol(targets[0].id, "scalar", type=t, span=targets[0].span or s.span))
            return
        if isinstance(value, ir.Call) and value.func in LAUNCH_AXES:
            self.launch_decl(targets, value, s.span)
            return
        if len(targets) == 1 and isinstance(targets[0], ir.Name):
            made = self.declaration(targets[0], value, s.span)
            if made:
                return
        values = list(value.items) if isinstance(value, ir.TupleExpr) and len(targets) > 1 else [value]
        if len(values) != len(targets):
            raise TilecError(f"cannot unpack {len(values)} value(s) into {len(targets)} names", s.span)
        for v in values:
            self.exprs(v)
        types = [self.syms.type_of(v) for v in values]
        for target, v, t in zip(targets, values, types):
            self.assign_one(target, v, t, s.span)

    def assign_one(self, target, value, t, span):
        if isinstance(target, ir.Index):
            self.exprs(target)
            buf = self.store_target(target, span)
            dst = value_type_of_dtype(buf.dtype)
            if not assignable(t, dst, value):
                raise TilecError(
                    f"cannot store a {t} into {buf.dtype} buffer '{buf.name}' (use convert)",
                    value.span or span,
                )
            return
        if not isinstance(target, ir.Name):
            raise TilecError("cannot assign to this expression", target.span or span)
        old = self.syms.symbols.get(target.id)
        if old is not None and self.visible(target.id):
            if old.kind == "scalar":
                if not assignable(t, old.type, value):
                    raise TilecError(
                        f"cannot assign a {t} to {old.type} '{target.id}' (use convert)", value.span or span
                    )
                return
            if old.kind != "value":
                raise TilecError(f"cannot assign to {_describe(old)} '{target.id}'", target.span or span)
        if t not in VALUE_TYPES:
            raise TilecError(f"cannot bind a {t}", value.span or span)
        self.define(Symbol(target.id, "value", type=t, span=target.span or span))

    def store_target(self, t: ir.Index, span) -> Buffer:
        buf = self.syms.buffer_of(t)
        check_element(buf, t)
        if buf.scope == "tmem":
            raise TilecError(f"tensor-memory buffer '{buf.name}' cannot be written element-wise", t.span)
        check_scalar_elements(buf, t.span)
        return buf

    # ---- declarations -------------------------------------------------

    def launch_decl(self, targets, call: ir.Call, span) -> None:
        axis = LAUNCH_AXES[call.func]
        bound = BUILTINS[call.func].signature.bind(call.func, call.args, call.kwargs, call.span)
        extents = self.grid_extents(call, bound["extents"])
        if extents is None:
            extents = builtins.literal(call.func, BUILTINS[call.func].signature.params[0], bound["extents"], call.span)
        if not 1 <= len(extents) <= axis.max_dims:
            raise TilecError(f"{call.func} takes 1 to {axis.max_dims} extent(s), got {len(extents)}", call.span)
        for e in extents:
            if isinstance(e, ir.Expr):
                continue
            if e < 1 or (axis.max_extent is not None and e > axis.max_extent):
                limit = f" (at most {axis.max_extent})" if axis.max_extent else ""
                raise TilecError(f"{call.func} extent {e} is out of range{limit}", call.span)
        if any(i.builtin == call.func for i in self.launch_ids):
            raise TilecError(f"{call.func} is declared twice", call.span)
        if targets and len(targets) != len(extents):
            raise TilecError(
                f"{call.func} with {len(extents)} extent(s) gives {len(extents)} id(s), assigned to {len(targets)}",
                span,
            )
        names = []
        for t in targets:
            if not isinstance(t, ir.Name):
                raise TilecError("launch ids are assigned to names", t.span or span)
            names.append(t.id)
        for dim, extent in enumerate(extents):
            name = names[dim] if names else f"<{call.func}.{dim}>"
            lid = LaunchId(name, call.func, axis.level, extent, dim, span=call.span)
            self.launch_ids.append(lid)
            if names:
                self.define(Symbol(name, "launch_id", type="i32", launch_id=lid, span=lid.span))

    def grid_extents(self, call: ir.Call, arg) -> Optional[list]:
        """`cta_id([...])` extents when one is an expression of runtime
        extents (the grid computed at launch); None otherwise."""
        if call.func != "cta_id" or not isinstance(arg, (ir.ListExpr, ir.TupleExpr)):
            return None
        if all(isinstance(i, ir.Int) for i in arg.items):
            return None
        out = []
        for item in arg.items:
            if isinstance(item, ir.Int):
                out.append(item.value)
            else:
                runtime_dims.check_dim_expr(item, self.syms.dims, "a grid extent")
                out.append(item)
        return out

    def declaration(self, target: ir.Name, value: ir.Expr, span) -> bool:
        """Handle `name = <buffer/pool-producing call>`; False for a plain value."""
        name = target.id
        if isinstance(value, ir.Call) and value.func in ("alloc", "alloc_shared", "alloc_local"):
            self.define_buffer(self.alloc(name, value), span)
            return True
        if isinstance(value, ir.Call) and value.func == "decl_buffer":
            self.define_buffer(self.decl_buffer(name, value), span)
            return True
        if isinstance(value, ir.Call) and value.func == "smem_pool":
            BUILTINS["smem_pool"].signature.bind("smem_pool", value.args, value.kwargs, value.span)
            self.placing()
            pool = Pool(name, _align_up(self.arena_end, ARENA_ALIGN), span=value.span)
            if self.pool_sizes.get(name):  # (an empty pool is no allocation: plan-smem drops it)
                self.arena_end = pool.base + self.pool_sizes[name]
            self.syms.pools[name] = pool
            self.define(Symbol(name, "pool", pool=pool, span=value.span))
            return True
        if isinstance(value, ir.Method) and value.name in ("alloc", "local", "view"):
            self.define_buffer(self.method(value, statement=False, result_name=name), span)
            return True
        return False

    def define_buffer(self, buf: Buffer, span) -> None:
        self.define(Symbol(buf.name, "buffer", buffer=buf, span=buf.span or span))

    def _alloc_args(self, func: str, row, call):
        bound = row.signature.bind(func, call.args, call.kwargs, call.span)
        for key in ("layout", "allocated_addr"):
            if isinstance(bound.get(key), ir.Expr):
                self.exprs(bound[key])
        values = row.signature.literals(func, bound, call.span)
        lookup_dtype(values["dtype"], call.span)
        for e in values["shape"]:
            if e < 1:
                raise TilecError(f"buffer extents must be positive, got {e}", call.span)
        return bound, values

    def _align(self, values, dtype: str, span, swizzled: Optional[ir.Expr] = None) -> int:
        """The alignment of an allocation: as asked (16 bytes by default),
        raised for a shared buffer to what the swizzle of its layout
        `swizzled` needs (`swizzle_alignment`).  The offsets of every
        allocation after it count the raised alignment from the first
        analysis on; plan-smem writes it out."""
        align = values.get("align") or max(DEFAULT_ALIGN, DTYPES[dtype].bytes)
        if align & (align - 1) or align > ARENA_ALIGN:
            raise TilecError(f"align must be a power of two up to {ARENA_ALIGN}, got {align}", span)
        need = swizzle_alignment(swizzled, dtype)
        return need if need > 1 and values.get("align", 0) < need else align

    def alloc(self, name: str, call: ir.Call) -> Buffer:
        bound, values = self._alloc_args(call.func, BUILTINS[call.func], call)
        scope = {"alloc_shared": "shared", "alloc_local": "local"}.get(call.func) or values["scope"]
        dtype = values["dtype"]
        layout = bound["layout"] if isinstance(bound["layout"], ir.Expr) else None
        align = self._align(values, dtype, call.span, layout if scope in ("shared", "shared.dyn") else None)
        buf = Buffer(name, dtype, values["shape"], scope, layout, align, name, 0, span=call.span)
        if scope == "shared.dyn":
            self.placing()
            offset = _align_up(self.arena_end, align)
            buf = records.evolve(buf, storage=DYN_ARENA, byte_offset=offset)
            self.arena_end = offset + buf.nbytes
            self.check_smem(call.span)
        elif scope == "shared":
            self.static_end = _align_up(self.static_end, align) + buf.nbytes
            self.check_smem(call.span)
        elif scope == "tmem":
            raise TilecError("tensor memory is allocated with ptx.tcgen05.alloc and declared with decl_buffer", call.span)
        return buf

    def placing(self) -> None:
        """Something is placed at the arena's end: note how far each pool
        made before it reaches now (a cursor only grows, so the latest
        placement is the one a later allocation would overlap first)."""
        for name, pool in self.syms.pools.items():
            self.placed[name] = pool.cursor

    def pool_outgrew_placement(self) -> bool:
        """Whether a pool allocated more after something was placed at the
        arena's end after it (its later allocations overlap that, here)."""
        pools = self.syms.pools
        return any(pools[name].cursor > cursor for name, cursor in self.placed.items())

    def check_smem(self, span) -> None:
        """A located error at the allocation that takes the block past the
        target's shared memory: its static limit (ptxas': 48 KiB on sm_80,
        all 227 KiB on sm_90a/sm_100a, which the driver launches without an
        opt-in), and static plus dynamic at most the opt-in maximum (which
        only the launch would check).  docs/language.md, Limits, says why."""
        target = self.syms.target
        if self.static_end > target.max_static_smem:
            hint = ""
            if target.max_static_smem < target.max_smem:
                hint = (
                    f'; allocate large buffers with scope="shared.dyn" or from a smem_pool() '
                    f"(static plus dynamic may reach {_bytes(target.max_smem)})"
                )
            raise TilecError(
                f"static shared memory reaches {self.static_end} bytes, over the "
                f"{_bytes(target.max_static_smem)} of static shared memory a block may have on "
                f"{target.name}{hint}",
                span,
            )
        total = self.static_end + self.arena_end
        if total > target.max_smem:
            raise TilecError(
                f"shared memory reaches {total} bytes ({self.static_end} static, {self.arena_end} dynamic), "
                f"over the {_bytes(target.max_smem)} a block may use on {target.name}",
                span,
            )

    def decl_buffer(self, name: str, call: ir.Call) -> Buffer:
        row = BUILTINS["decl_buffer"]
        bound, values = self._alloc_args("decl_buffer", row, call)
        dtype, shape = values["dtype"], values["shape"]
        layout = bound["layout"] if isinstance(bound["layout"], ir.Expr) else None
        addr = bound["allocated_addr"] if isinstance(bound["allocated_addr"], ir.Expr) else None
        data = bound["data"]
        scope = values.get("scope")
        if addr is not None:
            if data is not None or scope not in (None, "tmem"):
                raise TilecError("allocated_addr declares a tensor-memory buffer (no data, scope \"tmem\")", call.span)
            return Buffer(name, dtype, shape, "tmem", layout, 1, name, 0, addr, span=call.span)
        if data is None:
            raise TilecError("decl_buffer needs data=<buffer> or allocated_addr=<tmem address>", call.span)
        if not isinstance(data, ir.Name):
            raise TilecError("decl_buffer data must be a buffer name", data.span or call.span)
        base = self.syms.buffer(data.id, data.span)
        if scope is not None and scope != base.scope:
            raise TilecError(f"decl_buffer over {base.scope} buffer '{base.name}' cannot have scope {scope}", call.span)
        offset = base.byte_offset + values["elem_offset"] * DTYPES[dtype].bytes
        nbytes = _numel(shape) * DTYPES[dtype].bytes
        if offset - base.byte_offset + nbytes > base.nbytes:
            raise TilecError(
                f"'{name}' ({nbytes} bytes at element offset {values['elem_offset']}) overruns "
                f"'{base.name}' ({base.nbytes} bytes)",
                call.span,
            )
        align = _offset_align(base.align, offset - base.byte_offset)
        return Buffer(name, dtype, shape, base.scope, layout, align, base.storage, offset, span=call.span)

    # ---- methods ------------------------------------------------------

    def method(self, e: ir.Method, statement: bool, result_name: Optional[str] = None):
        if not isinstance(e.obj, ir.Name):
            raise TilecError("methods are called on buffer or pool names", e.obj.span or e.span)
        sym = self.syms.lookup(e.obj.id, e.obj.span)
        receiver = {"buffer": "buffer", "pool": "pool"}.get(sym.kind)
        row = METHODS.get((receiver, e.name))
        if row is None:
            raise TilecError(f"{_describe(sym)} '{e.obj.id}' has no method '{e.name}'", e.span)
        what = f"{e.obj.id}.{e.name}"
        bound = row.signature.bind(what, e.args, e.kwargs, e.span)
        for key, arg in bound.items():
            if isinstance(arg, ir.Expr):
                self.exprs(arg)
        if e.name == "ptr_to":
            if statement:
                raise TilecError(f"{what}(...) is a value, not a statement", e.span)
            index = bound["index"]
            if not isinstance(index, (ir.ListExpr, ir.TupleExpr)) or len(index.items) != len(sym.buffer.shape):
                raise TilecError(f"{what} takes a list of {len(sym.buffer.shape)} index(es)", e.span)
            self.syms.type_of(e)
            return None
        values = row.signature.literals(what, bound, e.span)
        for extent in values.get("shape", ()) + ((values["n"],) if "n" in values else ()):
            if extent < 1:
                raise TilecError(f"buffer extents must be positive, got {extent}", e.span)
        if receiver == "pool":
            return self.pool_method(sym.pool, e, bound, values, statement, result_name)
        if statement:
            raise TilecError(f"{what}(...) makes a buffer; assign it to a name", e.span)
        base = sym.buffer
        layout = bound.get("layout") if isinstance(bound.get("layout"), ir.Expr) else None
        if e.name == "local":
            if base.scope != "local":
                raise TilecError(f"'{base.name}' is not a local buffer", e.span)
            return Buffer(result_name, base.dtype, (values["n"],), "local", None, base.align,
                          base.storage, base.byte_offset, span=e.span)
        shape = values["shape"]
        if not shape:
            raise TilecError(f"{what} needs the new shape", e.span)
        view = Buffer(result_name, base.dtype, shape, base.scope, layout, base.align,
                      base.storage, base.byte_offset, base.allocated_addr, span=e.span)
        # What the view addresses must lie in its base: with a layout, the
        # positions the layout reaches (a broadcast `S[(M, N) : (0, 1)]` of
        # an N-element vector reaches N of them), else its element count.
        if base.scope != "local" and view.nbytes > base.nbytes:
            reach = view.nbytes // base.elem_bytes
            what = "reaches" if isinstance(layout, ir.LayoutLit) else "has"
            raise TilecError(
                f"view {shape} {what} {reach} elements of '{base.name}', which holds "
                f"{base.nbytes // base.elem_bytes}",
                e.span,
            )
        return view

    def pool_method(self, pool: Pool, e, bound, values, statement, result_name):
        what = f"{pool.name}.{e.name}"
        if pool.committed:
            raise TilecError(f"pool '{pool.name}' is already committed", e.span)
        if e.name == "alloc":
            if statement:
                raise TilecError(f"{what}(...) makes a buffer; assign it to a name", e.span)
            dtype = values["dtype"]
            lookup_dtype(dtype, e.span)
            layout = bound["layout"] if isinstance(bound["layout"], ir.Expr) else None
            align = self._align(values, dtype, e.span, layout)
            offset = _align_up(pool.cursor, align)
            buf = Buffer(result_name, dtype, values["shape"], "shared.dyn", layout, align,
                         DYN_ARENA, pool.base + offset, span=e.span)
            pool.cursor = offset + buf.nbytes
        elif e.name == "move_base_to":
            if values["offset"] < pool.cursor:
                raise TilecError(
                    f"{what}({values['offset']}) would move back over {pool.cursor} allocated bytes", e.span
                )
            pool.cursor = values["offset"]
            buf = None
        else:
            pool.committed = True
            buf = None
        self.arena_end = max(self.arena_end, pool.base + pool.cursor)
        self.check_smem(e.span)
        if buf is None and not statement:
            raise TilecError(f"{what}(...) is a statement, not a value", e.span)
        return buf

    # ---- expressions --------------------------------------------------

    def exprs(self, *es) -> None:
        """Check every name and call inside the expressions, in `visit.walk`'s
        order (the first mistake met is the one reported).  The nodes still
        to see are kept on a stack, children pushed last first; literals,
        which check nothing, are never pushed (most nodes of an unrolled
        kernel are the literal indices of its register elements), and the
        classes most nodes belong to are taken apart here rather than by a
        generic walk (node classes have no subclasses: `type(node) is`)."""
        stack = [e for e in reversed(es) if e is not None and type(e) not in ir.LITERALS]
        pop, push, literals, in_scope = stack.pop, stack.append, ir.LITERALS, self.in_scope
        Name, Int, symbols, runtime_indexed = ir.Name, ir.Int, self.syms.symbols, self.syms.runtime_indexed
        checked = self.checked_tuples
        while stack:
            node = pop()
            kind = type(node)
            if kind is Name:
                if node.id not in in_scope:
                    self.name_use(node)
                continue
            if kind is ir.Index:
                base = node.base
                if type(base) is not Name:
                    children = (base,) + node.indices
                else:  # the common case: the base checked here rather than pushed
                    if base.id not in in_scope:
                        self.name_use(base)
                    constant = True
                    for i in reversed(node.indices):
                        if type(i) is not Int:
                            constant = False
                            if type(i) not in literals:
                                push(i)
                    if not constant:
                        # a local buffer indexed by a run-time value: its registers cannot
                        # be named at compile time, so it lives in local memory
                        sym = symbols.get(base.id)
                        buf = sym.buffer if sym is not None else None
                        if buf is not None and buf.scope == "local":
                            runtime_indexed.add(buf.storage)
                    continue
            elif kind is ir.Binary:
                children = (node.lhs, node.rhs)
            elif kind is ir.TupleExpr or kind is ir.ListExpr:
                # One tuple object at many uses (the wgmma calls of a group take the same
                # register tuple) checks alike at each while the block it was first checked
                # in is open: every name it uses is still visible, and the rest of what is
                # checked depends on the nodes alone.
                first = checked.get(id(node))
                if first is not None and first[0] is node and any(s is first[1] for s in self.scopes):
                    continue
                checked[id(node)] = (node, self.scopes[-1])
                children = node.items
            elif kind is ir.Call:
                self.call(node, statement=False, recurse=False)
                children = node.args + tuple(k.value for k in node.kwargs)
            elif kind is ir.Method:
                if not isinstance(node.obj, ir.Name):
                    raise TilecError("methods are called on buffer or pool names", node.span)
                if node.name == "ptr_to":  # the one method that is a value: check its index
                    self.method(node, statement=False)
                children = (node.obj,) + node.args + tuple(k.value for k in node.kwargs)
            elif kind is ir.Attr:
                raise TilecError(f"unknown attribute '.{node.name}'", node.span)
            else:
                children = tuple(visit.children(node))
            for child in reversed(children):
                if type(child) not in literals:
                    push(child)

    def pair_operands(self, items, types) -> None:
        """Record the 16-bit float local buffers whose elements an intrinsic
        takes as packed pairs (a `regs(f16x2)` operand, wgmma's f16
        accumulator): the emitter stores them two to a b32 register.  The
        same `items` (a register tuple at many calls) record the same
        buffers again once each name had its symbol: a buffer's symbol is
        never replaced."""
        key = (id(items), id(types))
        if self.paired.get(key) is items:
            return
        complete = True
        for x in items:
            if isinstance(x, ir.Index) and isinstance(x.base, ir.Name):
                sym = self.syms.symbols.get(x.base.id)
                if sym is None:
                    complete = False
                    continue
                buf = sym.buffer
                if buf is not None and buf.scope == "local" and f"{buf.dtype}x2" in types:
                    self.syms.pair_written.add(buf.storage)
        if complete:
            self.paired[key] = items

    def name_use(self, n: ir.Name) -> None:
        if n.id in self.in_scope or n.id in self.consts or n.id in PREDEFINED or n.id in self.syms.helpers:
            return
        if n.id in self.syms.symbols:
            raise TilecError(f"'{n.id}' is used outside the block that defines it", n.span)
        raise TilecError(f"'{n.id}' is not defined", n.span)

    def call(self, e: ir.Call, statement: bool, recurse: bool = True) -> None:
        f = e.func
        if f == runtime_dims.SM_COUNT:
            self.syms.uses_sm_count = True
        elif f == intrinsics.GRID_DEPENDENCY_WAIT:
            self.syms.waits_grid_dependency = True
        if recurse:
            self.exprs(*e.args, *(k.value for k in e.kwargs))
        # A known intrinsic first: most calls of a lowered kernel are (its name, dotted under
        # ptx or cuda, is no helper's or tile primitive's).
        row = intrinsics.INTRINSICS.get(f)
        if row is None:
            if f in self.syms.helpers:
                return
            if builtins.tile_primitive(f) is not None:
                if not statement:
                    raise TilecError(f"{f}(...) is a statement, not a value", e.span)
                return
            if intrinsics.is_intrinsic_name(f):
                intrinsics.lookup(f, e.span)  # an unknown intrinsic: a located error
        else:
            bound = self.syms.bound(e)
            if row.check is not None:
                row.check(row.signature.literals(f, bound, e.span), e.span)
            for name, types in _pair_params(row):
                if isinstance(bound.get(name), (ir.TupleExpr, ir.ListExpr)):
                    self.pair_operands(bound[name].items, types)
            return
        row = BUILTINS.get(f)
        if row is None:
            raise TilecError(f"unknown function '{f}'", e.span)
        bound = self.syms.bound(e)
        if row.category in ("launch", "memory"):
            raise TilecError(f"{f}(...) must be assigned to a name", e.span)
        if statement and f != "copy_vec":
            raise TilecError(f"{f}(...) is a value, not a statement", e.span)
        if f == "copy_vec":
            if not statement:
                raise TilecError("copy_vec(...) is a statement, not a value", e.span)
            for side in ("dst", "src"):
                arg = bound[side]
                if not isinstance(arg, ir.Index):
                    raise TilecError(f"copy_vec: '{side}' must be a buffer element", arg.span or e.span)
                check_element(self.syms.buffer_of(arg), arg)
            row.signature.literals(f, bound, e.span)

    # ---- launch -------------------------------------------------------

    def launch_config(self, k: ir.Kernel) -> Launch:
        ids = tuple(self.launch_ids)
        grid, cluster = [1, 1, 1], [1, 1, 1]
        for i in ids:
            if i.level == "cta":
                grid[i.dim] = i.extent
            elif i.level == "cluster":
                cluster[i.dim] = i.extent
        for d in range(3):
            if isinstance(grid[d], int) and grid[d] % cluster[d]:
                raise TilecError(
                    f"the grid {tuple(grid)} is not a whole number of clusters {tuple(cluster)}", k.span
                )
        threads = [i for i in ids if LAUNCH_AXES[i.builtin].stride is not None]
        block = 1
        for i in threads:
            block = max(block, LAUNCH_AXES[i.builtin].stride * i.extent)
        for i in threads:
            stride = LAUNCH_AXES[i.builtin].stride
            covered = stride * i.extent
            outer = [LAUNCH_AXES[j.builtin].stride for j in threads if LAUNCH_AXES[j.builtin].stride > stride]
            if outer and covered != min(outer) and covered < block:
                raise TilecError(
                    f"{i.builtin}([{i.extent}]) covers {covered} threads but the next declared level "
                    f"starts every {min(outer)}: the thread ids would not tile the block",
                    i.span,
                )
        if cluster != [1, 1, 1] and not self.syms.target.at_least("sm_90a"):
            raise TilecError(f"clusters need sm_90a or newer (target is {self.syms.target})", k.span)
        return Launch(tuple(grid), (block, 1, 1), tuple(cluster), ids)


def swizzle_alignment(layout: Optional[ir.Expr], dtype: str) -> int:
    """The byte alignment a shared buffer with this layout needs: the
    swizzle's period (one atom of 8 rows), or 1 when the layout does not
    swizzle.  The hardware XORs absolute address bits (bits 4-6 with 7-9 for
    the 128-byte mode), so a swizzled tile must start on a multiple of 8
    swizzle rows -- 1024 bytes for 128B, 512 for 64B, 256 for 32B."""
    if not isinstance(layout, ir.LayoutLit) or layout.swizzle is None:
        return 1
    if not all(isinstance(e, ir.Int) for e in layout.swizzle):
        return 1
    period = Swizzle(*(e.value for e in layout.swizzle)).period
    return max(1, period * DTYPES[dtype].bits // 8)


def _pair_params(row: intrinsics.Intrinsic) -> tuple:
    """(name, types) of the parameters of an intrinsic that take 16-bit
    float pairs (`regs(f16x2)`, `regs(f16x2|f32)`...), worked out once per row."""
    params = _PAIR_PARAMS.get(row.name)
    if params is None:
        params = _PAIR_PARAMS[row.name] = tuple(
            (p.name, p.arg.split("|")) for p in row.signature.params if p.kind == "regs" and "x2" in p.arg
        )
    return params


_PAIR_PARAMS: Dict[str, tuple] = {}  # intrinsic name -> `_pair_params`


def _bytes(n: int) -> str:
    """A shared-memory limit as the message says it: "232448 bytes (227 KiB)"."""
    return f"{n} bytes ({n // 1024} KiB)"


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _numel(shape) -> int:
    n = 1
    for e in shape:
        n *= e
    return n


def _offset_align(align: int, offset: int) -> int:
    """The alignment guaranteed at `offset` bytes into storage aligned to `align`."""
    while align > 1 and offset % align:
        align //= 2
    return align

"""The `lower-scheduler` pass: persistent tile schedulers become scalars.

A persistent kernel launches a fixed number of CTAs (or clusters) and lets
each walk over many output tiles.  The walk is written with a scheduler
object,

    ts = persistent_scheduler_2d(num_m_tiles=32, num_n_tiles=32,
                                 l2_group_size=8, num_clusters=132)
    ts.init(bx)
    while ts.valid():
        ... ts.m_idx ... ts.n_idx ...
        ts.next_tile()

and nothing after this pass needs to know about it: the object is three
mutable i32 scalars (the linear tile index and its (m, n) decoding), `init`
and `next_tile` are assignments, `valid()` a comparison and `m_idx`/`n_idx`
plain names.  So the symbol analysis, scope inference, dispatch and the
emitter see ordinary scalar code, and the sm_90a and sm_100a kernels share
one scheduler.

The order is the L2-grouped one: linear tile t belongs to group
t // (G * num_n_tiles) of G consecutive M-tiles (G = l2_group_size; the last
group may be shorter), and within a group the M index runs fastest.  CTAs
that run at the same time then share G rows of A tiles and a few columns of
B tiles, which stay in L2.  Each CTA starts at its own id and strides by
`num_clusters`, the number of CTAs (or clusters) launched.

Schedulers are declared with a plain assignment anywhere in the kernel.  The
pass runs right after expand-inline, so that every later pass (and the
symbol analysis they share) sees plain scalars; the four arguments must fold
to compile-time integers there, except that the tile counts may be
arithmetic on runtime extents (`(M + 127) // 128` for `A: f16[M, K]`),
and the CTA count `sm_count()`, computed in the kernel.

With runtime tile counts the decode is on the path to a tile's first load,
so it is written for speed: the counts the walk needs are computed once, at
the declaration, and the two divisions are by kernel-uniform expressions of
the extents -- tiles per group, and the rows of the last (short) group --
which the emitter turns into a multiply-high by magic numbers the launch
computes (`runtime_dims.uniform_divisors`); remainders are `a - q * d`.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import attrs

from tilec.compiler import records
from tilec.compiler import ir, runtime_dims, visit
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.visit import NameGen
from tilec.compiler.fold import branch_not_taken, fold_expr

CONSTRUCTOR = "persistent_scheduler_2d"
SIGNATURE = Signature.parse(
    "*, num_m_tiles: int, num_n_tiles: int, l2_group_size: int = 8, num_clusters: int"
)
ATTRIBUTES = ("m_idx", "n_idx")
METHODS = ("init", "valid", "next_tile")


class LowerScheduler(Pass):
    name = "lower-scheduler"
    requires = frozenset({"expanded"})
    provides = frozenset({"scheduler-lowered"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        return lower_schedulers(module)


def lower_schedulers(module: ir.Module) -> ir.Module:
    """`module` with every persistent_scheduler_2d of every kernel lowered."""
    kernels = tuple(_lower_kernel(k) for k in module.kernels)
    return attrs.evolve(module, kernels=kernels)


@records.frozen
class Scheduler:
    """One declared scheduler: its configuration and the names of its scalars."""

    name: str
    num_m_tiles: int | ir.Expr  # an expression of runtime extents, or an int
    num_n_tiles: int | ir.Expr
    group: int
    num_clusters: int | ir.Expr  # sm_count() for a grid of one CTA per SM
    tile: str
    m_idx: str
    n_idx: str
    names: NameGen = records.field(eq=False)  # fresh names for each runtime decode's values
    # runtime tile counts: the scalars computed once at the declaration
    counts: Dict[str, str] = records.field(factory=dict)

    @property
    def runtime(self) -> bool:
        return not (isinstance(self.num_m_tiles, int) and isinstance(self.num_n_tiles, int))

    def num_tiles(self, span) -> ir.Expr:
        if self.runtime:
            return ir.Name(self.counts["num_tiles"], span=span)
        return fold_expr(ir.Binary("*", _value(self.num_m_tiles, span), _value(self.num_n_tiles, span), span=span))

    def declare(self, span) -> List[ir.Stmt]:
        """The scheduler's scalars, and with runtime tile counts the counts
        the walk reads (`counts`): the tiles, the tiles per group and the
        M-tiles."""
        zero = ir.Int(0, span=span)
        out = [ir.Assign((ir.Name(n, span=span),), zero, type="i32", span=span) for n in (self.tile, self.m_idx, self.n_idx)]
        if self.runtime:
            m, n = _value(self.num_m_tiles, span), _value(self.num_n_tiles, span)
            values = {
                "num_tiles": ir.Binary("*", m, n, span=span),
                "per_group": self._per_group(span),
                "num_m_tiles": m,
            }
            out += [ir.Assign((ir.Name(self.counts[k], span=span),), fold_expr(v), span=span) for k, v in values.items()]
        return out

    def _per_group(self, span) -> ir.Expr:
        """Tiles per group, G * num_n_tiles: a uniform divisor.  A runtime
        num_n_tiles is taken as at least 1, so that the divisor is provably
        positive: with no N-tiles there is no tile, and the decode's values
        are never used."""
        n = self.num_n_tiles
        if not isinstance(n, int):
            n = ir.Call("max", (n, ir.Int(1, span=span)), span=span)
        return fold_expr(ir.Binary("*", ir.Int(self.group, span=span), _value(n, span), span=span))

    def decode(self, span) -> List[ir.Stmt]:
        """Assignments of m_idx and n_idx from the linear tile index."""
        tile = ir.Name(self.tile, span=span)

        def binary(op, a, b):
            return ir.Binary(op, a, b, span=span)

        def lit(v):
            return _value(v, span)

        if self.runtime:
            return self._runtime_decode(tile, binary, lit, span)
        per_group = fold_expr(binary("*", lit(self.group), lit(self.num_n_tiles)))
        first_m = binary("*", binary("//", tile, per_group), lit(self.group))
        within = binary("%", tile, per_group)
        if isinstance(self.num_m_tiles, int) and self.num_m_tiles % self.group == 0:
            rows = lit(self.group)
        else:  # the last group holds the remaining num_m_tiles % group rows
            rows = ir.Call("min", (binary("-", lit(self.num_m_tiles), first_m), lit(self.group)), span=span)
        return [
            ir.Assign((ir.Name(self.m_idx, span=span),), binary("+", first_m, binary("%", within, rows)), span=span),
            ir.Assign((ir.Name(self.n_idx, span=span),), binary("//", within, rows), span=span),
        ]

    def _runtime_decode(self, tile, binary, lit, span) -> List[ir.Stmt]:
        """The decode with runtime tile counts: group = tile // per_group,
        within = tile - group * per_group; a group has G rows, or, the last
        one, (num_m_tiles - 1) % G + 1 (in [1, G] for every count); n_idx =
        within // rows, m_idx = first_m + within - n_idx * rows.  Both
        divisors are uniform expressions of the extents (magic numbers at
        launch) and are not evaluated in the kernel; the counts are the
        scalars `declare` computed."""
        name = self.names.fresh
        group_id, first_m, within, rows = (
            name(f"{self.name}_{k}") for k in ("group", "first_m", "within", "rows")
        )

        def var(n):
            return ir.Name(n, span=span)

        def let(n, value):
            return ir.Assign((var(n),), value, span=span)

        G = lit(self.group)
        last_rows = fold_expr(binary("+", binary("%", binary("-", lit(self.num_m_tiles), lit(1)), G), lit(1)))
        n_idx = ir.Select(
            binary("==", var(rows), G), binary("//", var(within), G), binary("//", var(within), last_rows), span=span
        )
        return [
            let(group_id, binary("//", tile, self._per_group(span))),
            let(first_m, binary("*", var(group_id), G)),
            let(within, binary("-", tile, binary("*", var(group_id), var(self.counts["per_group"])))),
            let(rows, ir.Call("min", (binary("-", var(self.counts["num_m_tiles"]), var(first_m)), G), span=span)),
            let(self.n_idx, n_idx),
            let(self.m_idx, binary("+", var(first_m), binary("-", var(within), binary("*", var(self.n_idx), var(rows))))),
        ]


def _value(v, span) -> ir.Expr:
    return ir.Int(v, span=span) if isinstance(v, int) else v


def _lower_kernel(k: ir.Kernel) -> ir.Kernel:
    decls, taken, mentions = _declarations(k)
    if not decls:
        return k
    names = NameGen(taken)
    dims = {e.id for p in k.params for e in p.shape or () if isinstance(e, ir.Name)}
    schedulers = {}
    for name, call in decls.items():
        schedulers[name] = _configure(name, call, names, dims)
    return attrs.evolve(k, body=_Lowering(schedulers, mentions).block(k.body))


def _declarations(k: ir.Kernel) -> Tuple[Dict[str, ir.Call], set, dict]:
    """The scheduler declarations by name, the names the kernel takes (its
    parameters, names and loop variables: what the scheduler's fresh names
    avoid), and for each statement (by id) the names its own expressions
    mention (not those of its nested statements): the lowering rewrites only
    the statements that name a scheduler, and finds them here rather than by
    a second walk of every expression.  One pre-order walk finds the
    assignments, the calls and the names; the assignments are checked first,
    then the calls, each in walk order, so the first error reported is the
    same as two walks'."""
    assigns, calls = [], []
    taken = {p.name for p in k.params}
    mentions: dict = {}
    Name, Call, Assign, For = ir.Name, ir.Call, ir.Assign, ir.For

    def scan(node, names: set) -> None:
        for n in visit.find_all(node, _NAMES_AND_CALLS):
            if type(n) is Name:  # (IR classes have no subclasses)
                names.add(n.id)
            elif n.func == CONSTRUCTOR:
                calls.append(n)

    def statement(s) -> None:
        cls = type(s)
        if cls is Assign:
            if type(s.value) is Call and s.value.func == CONSTRUCTOR:
                assigns.append(s)
        elif cls is For:
            taken.add(s.var)
        names = mentions[id(s)] = set()
        for e in visit.expressions(s):  # (a statement's expressions come before its blocks: walk order)
            scan(e, names)
        untaken = branch_not_taken(s)  # as written, unexpanded: not lowered, dropped by fold-constants
        for field in visit.block_fields(cls):
            if field != untaken:
                for child in getattr(s, field):
                    statement(child)
        taken.update(names)

    try:
        for p in k.params:
            scan(p, taken)
        for s in k.body:
            statement(s)
    finally:
        statement = None  # a recursive closure: see visit._NO_CYCLE
    found: Dict[str, ir.Call] = {}
    for node in assigns:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ir.Name) or node.type is not None:
            raise TilecError(f"{CONSTRUCTOR}(...) must be assigned to one plain name", node.span)
        name = node.targets[0].id
        if name in found:
            raise TilecError(f"scheduler '{name}' is declared twice", node.span)
        found[name] = node.value
    for node in calls:
        if not any(node is c for c in found.values()):
            raise TilecError(f"{CONSTRUCTOR}(...) must be assigned to a name", node.span)
    return found, taken, mentions


_NAMES_AND_CALLS = frozenset({ir.Name, ir.Call})


def _configure(name: str, call: ir.Call, names: NameGen, dims: set) -> Scheduler:
    bound = SIGNATURE.bind(CONSTRUCTOR, call.args, call.kwargs, call.span)
    bound = {k: fold_expr(v) if isinstance(v, ir.Expr) else v for k, v in bound.items()}
    runtime = {
        k: bound[k] for k in ("num_m_tiles", "num_n_tiles", "num_clusters") if _of_runtime_extents(bound[k], dims)
    }
    bound.update({k: ir.Int(1) for k in runtime})  # the literal checks below skip them
    values = SIGNATURE.literals(CONSTRUCTOR, bound, call.span)
    for key in ("num_m_tiles", "num_n_tiles", "l2_group_size", "num_clusters"):
        if values[key] < 1:
            arg = bound[key]
            where = arg.span if isinstance(arg, ir.Expr) and arg.span else call.span
            raise TilecError(f"{CONSTRUCTOR}: '{key}' must be at least 1, got {values[key]}", where)
    if values["num_m_tiles"] * values["num_n_tiles"] >= 2**31:
        raise TilecError(f"{CONSTRUCTOR}: {values['num_m_tiles']} x {values['num_n_tiles']} tiles overflow i32", call.span)
    num_m_tiles = runtime.get("num_m_tiles", values["num_m_tiles"])
    num_n_tiles = runtime.get("num_n_tiles", values["num_n_tiles"])
    counts = {}
    if not (isinstance(num_m_tiles, int) and isinstance(num_n_tiles, int)):
        counts = {k: names.fresh(f"{name}_{k}") for k in ("num_tiles", "per_group", "num_m_tiles")}
    return Scheduler(
        name,
        num_m_tiles,
        num_n_tiles,
        values["l2_group_size"] if runtime else min(values["l2_group_size"], num_m_tiles),
        runtime.get("num_clusters", values["num_clusters"]),
        names.fresh(f"{name}_tile"),
        names.fresh(f"{name}_m_idx"),
        names.fresh(f"{name}_n_idx"),
        names,
        counts,
    )


def _of_runtime_extents(e, dims: set) -> bool:
    """Whether `e` is arithmetic on runtime extents and sm_count() (not a
    literal)."""
    if not isinstance(e, ir.Expr) or isinstance(e, ir.Int):
        return False
    try:
        runtime_dims.check_dim_expr(e, dims, "a tile count")
    except TilecError:
        return False
    return True


class _Lowering:
    def __init__(self, schedulers: Dict[str, Scheduler], mentions: dict):
        self.schedulers = schedulers
        self.mentions = mentions  # id(statement) -> the names its own expressions mention

    def block(self, stmts) -> tuple:
        out: List[ir.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s))
        return tuple(out)

    def stmt(self, s: ir.Stmt) -> List[ir.Stmt]:
        if isinstance(s, ir.Assign) and isinstance(s.value, ir.Call) and s.value.func == CONSTRUCTOR:
            return self.schedulers[s.targets[0].id].declare(s.span)
        if isinstance(s, ir.ExprStmt) and isinstance(s.expr, ir.Method):
            ts = self._receiver(s.expr)
            if ts is not None:
                return self.method_stmt(ts, s.expr)
        changes = {}
        fields = visit.block_fields(type(s))
        if fields:
            untaken = branch_not_taken(s)
            for field in fields:
                value = getattr(s, field)
                if value and field != untaken:
                    changes[field] = self.block(value)
        if self.mentions[id(s)].isdisjoint(self.schedulers):
            return [visit.keep(s, **changes)]
        return [visit.map_children(s, self._part, **changes)]

    def _part(self, node: ir.Node) -> ir.Node:
        """A statement's expression rewritten by `expr`, or kept as it is
        when no scheduler is named in it (there is nothing to replace, and
        nothing to refuse); its nested statements are lowered by `block`."""
        if isinstance(node, ir.Stmt):
            return node
        schedulers = self.schedulers
        for n in visit.find_all(node, ir.NAMES):
            if n.id in schedulers:
                return self.expr(node)
        return node

    def method_stmt(self, ts: Scheduler, m: ir.Method) -> List[ir.Stmt]:
        span = m.span
        tile = ir.Name(ts.tile, span=span)
        if m.kwargs:
            raise TilecError(f"{ts.name}.{m.name}() takes no keyword arguments", span)
        if m.name == "init":
            if len(m.args) != 1:
                raise TilecError(f"{ts.name}.init() takes the linear CTA (or cluster) id", span)
            return [ir.Assign((tile,), self.expr(m.args[0]), span=span)] + ts.decode(span)
        if m.name == "next_tile":
            if m.args:
                raise TilecError(f"{ts.name}.next_tile() takes no arguments", span)
            return [ir.AugAssign(tile, "+", _value(ts.num_clusters, span), span=span)] + ts.decode(span)
        if m.name == "valid":
            raise TilecError(f"{ts.name}.valid() is a value (use it in a condition)", span)
        raise TilecError(f"a tile scheduler has no method '{m.name}' (it has {', '.join(METHODS)})", span)

    def _receiver(self, e) -> "Scheduler | None":
        obj = e.obj
        if isinstance(obj, ir.Name) and obj.id in self.schedulers:
            return self.schedulers[obj.id]
        return None

    def expr(self, node: ir.Node) -> ir.Node:
        """`node` with scheduler attributes and `valid()` replaced (pre-order,
        so that the scheduler's own name is only an error outside them)."""
        if isinstance(node, ir.Attr):
            ts = self._receiver(node)
            if ts is not None:
                if node.name not in ATTRIBUTES:
                    raise TilecError(
                        f"a tile scheduler has no attribute '{node.name}' (it has {', '.join(ATTRIBUTES)})",
                        node.span,
                    )
                return ir.Name(ts.m_idx if node.name == "m_idx" else ts.n_idx, span=node.span)
        if isinstance(node, ir.Method):
            ts = self._receiver(node)
            if ts is not None:
                if node.name != "valid":
                    raise TilecError(f"{ts.name}.{node.name}() is a statement, not a value", node.span)
                if node.args or node.kwargs:
                    raise TilecError(f"{ts.name}.valid() takes no arguments", node.span)
                span = node.span
                return ir.Binary("<", ir.Name(ts.tile, span=span), ts.num_tiles(span), span=span)
        if isinstance(node, ir.Name) and node.id in self.schedulers:
            raise TilecError(
                f"tile scheduler '{node.id}' is used as a value; use its m_idx, n_idx or valid()", node.span
            )
        return visit.map_children(node, self.expr)

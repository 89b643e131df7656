"""The `plan-tma` pass: a TMA descriptor for every copy_async TMA will issue.

A copy_async between a global kernel parameter and a shared buffer goes
through TMA when it asks to (`dispatch="tma"`), or when it names no variant,
one thread issues it (infer-scope gave it `thread.`) and the target has TMA
(sm_90a and newer).  For each, this pass plans the descriptor
(`tilec.compiler.tma_planner`), writes it once per distinct descriptor of a
tensor as a statement at the top of the kernel -- where the emitter and
kernel.json find it --

    tensormap A_tmap0 = tensormap(A, f16, dims=(4096, 4096), strides=(8192,), box=(64, 128), ...)

and annotates the copy with what its dispatch variant needs, so that
nothing is planned twice:

    thread.copy_async(Asmem[stage, :, :], A[bx * 128 : bx * 128 + 128, k * 64 : k * 64 + 64],
                      dispatch="tma", mbar=bar.ptr_to([stage]), tmap="A_tmap0",
                      tma_issues=[((k * 64, bx * 128), stage * 8192)])

`tma_issues` has one `((coordinates...), shared_offset)` per
cp.async.bulk.tensor: the coordinates innermost first, in the descriptor's
elements; the offset in elements of the shared buffer's dtype from the
buffer's first element, before the swizzle (the box's shared address is the
buffer's address plus offset * element size).  Both are affine in the
region starts as written: the starts are read as sums of integer multiples
of opaque terms (`bx * 128`, `stage`, `k % 2`), and those terms are written
back unchanged.

A copy that did not ask for TMA and that no descriptor can express is left
alone, for dispatch to lower another way; under `dispatch="tma"` the reason
is the error.
"""
from __future__ import annotations

import collections

from tilec.compiler import records
from tilec.compiler import ir, runtime_dims, visit
from tilec.compiler.affine import to_expr
from tilec.compiler.builtins import tile_primitive
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import row_major
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.region import Region
from tilec.compiler.symbols import ARENA_ALIGN, DYN_ARENA, Buffer, KernelSymbols
from tilec.compiler.targets import Target
from tilec.compiler.tma_planner import SMEM_ALIGN, LayoutMemo, TmaPlan, plan_tma
from tilec.compiler.tile_op import TileOp
from tilec.compiler.visit import NameGen

TMA_TARGET = "sm_90a"


class PlanTma(Pass):
    name = "plan-tma"
    requires = frozenset({"folded", "canonical-layouts", "scheduler-lowered", "scoped", "smem-planned"})
    provides = frozenset({"tma-planned"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        kernels = []
        for k in module.kernels:
            planner = _KernelPlanner(k, module, ctx.target, ctx.symbols(k, module))
            planned = planner.run()
            # the tensor maps are the only new names: dispatch reads this analysis plus them
            ctx.analyses.carry(k, planned, module, ctx.target, tuple(planner.new))
            kernels.append(planned)
        return visit.keep(module, kernels=tuple(kernels))


class _KernelPlanner:
    def __init__(self, kernel: ir.Kernel, module: ir.Module, target: Target, syms: KernelSymbols):
        self.kernel = kernel
        self.target = target
        self.syms = syms
        self.names = NameGen(syms.names_in_use(module))  # the kernel's identifiers, without a walk
        # the kernel's own tensormap statements (call -> name), and how many maps each tensor has so far
        self.maps = {s.value: s.name for s in kernel.body if isinstance(s, ir.TensorMap)}
        self.counts = collections.Counter(call.args[0] for call in self.maps)
        self.planned: dict = {}  # (tensor, dtype, descriptor fields) -> the name `tensormap` gave it
        # (global buffer, shared buffer, regions, direction, fill) -> the plan: a kernel often makes
        # one copy in several places (a prologue and its main loop, both sides of a branch), and a
        # plan depends on these alone (a buffer's name stands for its layout, shape and dtype: a
        # kernel defines a buffer name once)
        self.plans: dict = {}
        self.layouts = LayoutMemo()  # what the plans work out from the buffers' layouts
        self.proxy_layouts: dict = {}  # a stand-in shape of a tensor with runtime extents -> its row-major layout
        self.params = frozenset(p.name for p in kernel.params)
        self.new: list = []

    def run(self) -> ir.Kernel:
        body = self.block(self.kernel.body)  # (which adds the tensor maps to self.new)
        return visit.keep(self.kernel, body=tuple(self.new) + body)

    def block(self, stmts) -> tuple:
        return tuple([self.stmt(s) for s in stmts])

    def stmt(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.ExprStmt) and isinstance(s.expr, ir.Call) and tile_primitive(s.expr.func) == "copy_async":
            call = self.copy(s.expr)
            return s if call is s.expr else visit.evolve(s, expr=call)
        fields = visit.block_fields(type(s))
        if not fields:  # (most statements hold no block)
            return s
        return visit.keep(s, **{f: self.block(getattr(s, f)) for f in fields})

    # ---- one copy -----------------------------------------------------

    def copy(self, call: ir.Call) -> ir.Call:
        op = TileOp.from_call(call)
        if "tmap" in op.kwargs:
            return call
        wanted = op.dispatch == "tma"
        if not wanted and (op.dispatch is not None or op.scope != "thread" or not self.target.at_least(TMA_TARGET)):
            return call
        try:
            if not self.target.at_least(TMA_TARGET):
                raise TilecError(f"TMA needs {TMA_TARGET} or newer (target is {self.target})")
            tensor, plan, atoms = self.plan(op)
        except TilecError as err:
            if wanted:
                raise err.with_span(call.span)
            return call
        issues = ir.ListExpr(
            tuple(
                ir.TupleExpr((ir.TupleExpr(tuple(to_expr(c, atoms) for c in i.coords)), to_expr(i.smem_offset, atoms)))
                for i in plan.issues
            )
        )
        kwargs = (
            ir.Keyword("tmap", ir.Str(self.tensormap(tensor, plan))),
            ir.Keyword("tma_issues", issues),
        )
        return visit.evolve(call, kwargs=call.kwargs + kwargs)

    def plan(self, op: TileOp) -> tuple[str, TmaPlan, dict]:
        if len(op.args) != 2:
            raise TilecError(f"copy_async takes the destination and the source, got {len(op.args)} operand(s)")
        dst, src = op.args
        bdst, bsrc = self.syms.buffer_of(dst), self.syms.buffer_of(src)
        if bsrc.scope == "global" and bdst.is_shared:
            direction, (garg, gbuf), (sarg, sbuf) = "g2s", (src, bsrc), (dst, bdst)
        elif bdst.scope == "global" and bsrc.is_shared:
            direction, (garg, gbuf), (sarg, sbuf) = "s2g", (dst, bdst), (src, bsrc)
        else:
            raise TilecError(f"TMA copies between global and shared memory, not from {bsrc.scope} to {bdst.scope}")
        if gbuf.name not in self.params:
            raise TilecError(f"TMA reads and writes kernel parameters through their tensor maps; '{gbuf.name}' is a view")
        atoms: dict = {}
        region = (_region(garg, gbuf, atoms), _region(sarg, sbuf, atoms))
        oob = op.kwargs.get("oob", ir.Str("zero"))
        if not isinstance(oob, ir.Str):
            raise TilecError('copy_async: oob= must be "zero" or "nan"', oob.span)
        slayout = sbuf.tile_layout
        key = (gbuf.name, sbuf.name, tuple(region[0]), tuple(region[1]), direction, oob.value)
        plan = self.plans.get(key)
        if plan is None:
            if gbuf.runtime_dims:
                plan = self.runtime_plan(gbuf, slayout, sbuf, region, direction, oob.value)
            else:
                plan = plan_tma(gbuf.tile_layout, gbuf.shape, slayout, sbuf.shape, region, gbuf.dtype, direction,
                                oob.value, self.layouts)
            self.plans[key] = plan
        need = SMEM_ALIGN
        if slayout.swizzle is not None:
            need = max(need, slayout.swizzle.period * sbuf.elem_bytes)
        if _alignment(sbuf) < need:
            raise TilecError(
                f"TMA needs shared buffer '{sbuf.name}' aligned to {need} bytes, but only {_alignment(sbuf)} "
                f"is guaranteed (allocate it with align={need})"
            )
        return gbuf.name, plan, atoms

    def runtime_plan(self, gbuf: Buffer, slayout, sbuf: Buffer, region, direction: str, oob: str) -> "_RuntimePlan":
        """The plan over a tensor with runtime extents: planned at two
        stand-in shapes (each extent its known divisor times a large prime,
        `runtime_dims.proxies`), which must agree but for the tensor's dims
        and strides; those are read back as expressions of the extents and
        checked against the second shape.  A plan whose choices depend on
        more than what the assumptions state is refused."""
        divisors = {n: self.syms.dims[n].divisor for n in gbuf.runtime_dims}
        plans = []
        for which in (0, 1):
            proxy = runtime_dims.proxies(gbuf.shape, divisors, which)
            shape = tuple(proxy[e] if isinstance(e, str) else e for e in gbuf.shape)
            # one layout object per stand-in shape, so that the layout memo serves every copy of the tensor
            layout = self.proxy_layouts.get(shape)
            if layout is None:
                layout = self.proxy_layouts[shape] = row_major(shape)
            try:
                plan = plan_tma(layout, shape, slayout, sbuf.shape, region, gbuf.dtype, direction, oob, self.layouts)
            except TilecError as err:
                stand_ins = ", ".join(f"{n} = {v}" for n, v in proxy.items())
                raise TilecError(
                    f"{err.message} (planned with the runtime extents of '{gbuf.name}' standing in as "
                    f"{stand_ins}: only what assume(...) states of them is known, e.g. assume(K % 8 == 0))",
                    err.span,
                )
            plans.append((proxy, plan))
        (first, plan), (second, other) = plans
        dims = tuple(runtime_dims.read_back(v, first, divisors) for v in plan.dims)
        strides = tuple(runtime_dims.read_back(v, first, divisors) for v in plan.strides)
        agree = records.evolve(plan, dims=other.dims, strides=other.strides) == other and all(
            runtime_dims.substitute(e, second) == ir.Int(v)
            for e, v in zip(dims + strides, other.dims + other.strides)
        )
        if not agree:
            raise TilecError(
                f"the TMA plan for '{gbuf.name}' depends on the values of its runtime extents "
                f"({', '.join(gbuf.runtime_dims)}), not only on what assume(...) states of them; "
                "state their divisibility (e.g. assume(K % 8 == 0)) or use compile-time extents"
            )
        return _RuntimePlan(plan, dims, strides)

    def tensormap(self, tensor: str, plan) -> str:
        """The name of the tensormap statement for `plan` over `tensor`, added
        at the top of the kernel the first time."""
        d = plan.descriptor()
        key = (tensor, plan.dtype) + tuple(tuple(d[k]) for k in _TUPLE_FIELDS) + tuple(d[k] for k in _STR_FIELDS)
        name = self.planned.get(key)
        if name is not None:  # a descriptor met before: its statement is not built again to be looked up
            return name
        fields = [
            (k, ir.TupleExpr(tuple(v if isinstance(v, ir.Expr) else ir.Int(v) for v in d[k])))
            for k in _TUPLE_FIELDS
        ]
        fields += [(k, ir.Str(d[k])) for k in _STR_FIELDS]
        call = ir.Call(
            "tensormap",
            (ir.Name(tensor), ir.DTypeLit(plan.dtype)),
            tuple(ir.Keyword(k, v) for k, v in fields),
        )
        # a new call equal to another new one has its key; a statement the kernel has is looked up
        # (when there is one: hashing a call walks all of it)
        name = self.maps.get(call) if self.maps else None
        if name is None:
            name = self.names.fresh(f"{tensor}_tmap{self.counts[call.args[0]]}")
            self.counts[call.args[0]] += 1
            self.new.append(ir.TensorMap(name, call))
        self.planned[key] = name
        return name


_TUPLE_FIELDS = ("dims", "strides", "box", "elem_strides")
_STR_FIELDS = ("interleave", "swizzle", "l2_promotion", "oob_fill")


@records.frozen
class _RuntimePlan:
    """A plan over a tensor with runtime extents: its descriptor's dims and
    strides are expressions of them (the rest is `plan`'s)."""

    plan: TmaPlan
    dims: tuple
    strides: tuple

    @property
    def issues(self):
        return self.plan.issues

    @property
    def dtype(self) -> str:
        return self.plan.dtype

    def descriptor(self) -> dict:
        return {**self.plan.descriptor(), "dims": list(self.dims), "strides": list(self.strides)}


# --------------------------------------------------------------------------
# Regions and affine starts
# --------------------------------------------------------------------------


def _alignment(buf: Buffer) -> int:
    """The byte alignment of the buffer's first element: in the dynamic arena
    (whose base is ARENA_ALIGN-aligned) what its offset gives, else what its
    allocation asked for."""
    if buf.storage != DYN_ARENA:
        return buf.align
    offset = buf.byte_offset
    return min(ARENA_ALIGN, offset & -offset) if offset else ARENA_ALIGN


def _region(arg: ir.Expr, buf: Buffer, atoms: dict) -> list:
    """(start, extent) per dim of a region operand: starts as `Affine`s over
    `atoms`, extents compile-time integers."""
    r = Region.read(arg, buf)
    try:
        r.check_extents()
    except TilecError as err:
        raise TilecError(f"a TMA box has compile-time constant extents, but {err.message}", err.span)
    return list(zip(r.affine_starts(atoms), r.extents))

"""The `plan-smem` pass: shared-memory pools become one dynamic arena.

`pool = smem_pool()` with `pool.alloc(...)`, `pool.move_base_to(...)` and
`pool.commit()` is a compile-time bump allocator.  This pass writes its
result out: the pool becomes one byte array in dynamic shared memory,

    pool = alloc((99328,), u8, scope="shared.dyn", align=1024)

and each allocation a view of it at a fixed offset,

    Asmem = decl_buffer((128, 64), f16, data=pool, elem_offset=512, layout=...)

so later passes and the emitter see plain buffers with known addresses.  The
offsets are the ones `tilec.compiler.symbols` computes (the one model of the
allocator: 1024-byte arena base, 16-byte default alignment, no moving back,
and a shared buffer with a swizzled layout aligned to the swizzle's period,
`symbols.swizzle_alignment`); this pass also writes that raised alignment
out as the allocation's `align=`, which leaves the analysis as it was.
The analysis of the written-out kernel is this pass's input's, rebuilt
where the writing changes it (`KernelSymbols.pools_written_out`), so the
passes after it do not analyze the kernel again.
The arena size of each kernel is left in `ctx.artifacts["dynamic_smem"]`.
"""
from __future__ import annotations

from typing import Optional

import attrs

from tilec.compiler import ir, visit
from tilec.compiler.builtins import BUILTINS, METHODS
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.symbols import swizzle_alignment

_SHARED_ALLOCS = ("alloc", "alloc_shared")


class PlanSmem(Pass):
    name = "plan-smem"
    requires = frozenset({"folded"})
    provides = frozenset({"smem-planned"})

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        sizes = ctx.artifacts.setdefault("dynamic_smem", {})
        kernels = []
        for k in module.kernels:
            aligned = _with_body(k, _map_block(k.body, _align_swizzled))
            ctx.analyses.carry(k, aligned, module, ctx.target)  # the analysis counted the alignment already
            k = aligned
            syms = ctx.symbols(k, module)
            sizes[k.name] = syms.dynamic_smem
            lowered = _with_body(k, _map_block(k.body, lambda s: _lower_pool(s, syms)))
            ctx.analyses.carry_pools_written_out(k, lowered, module, ctx.target)
            kernels.append(lowered)
        return attrs.evolve(module, kernels=tuple(kernels))


def _with_body(k: ir.Kernel, body: tuple) -> ir.Kernel:
    return k if body is k.body else attrs.evolve(k, body=body)


def _map_block(stmts: tuple, fn) -> tuple:
    """`fn` on every statement, nested ones too; it returns a list (empty to
    drop).  `stmts` itself when `fn` kept every statement as it was: a kernel
    without pools or swizzled allocations stays the same object, and its
    analysis, kept for it on the pass context, serves this pass and the next."""
    out = []
    changed = False
    for s in stmts:
        changes = {}
        for field in visit.block_fields(type(s)):
            value = getattr(s, field)
            if value:
                block = _map_block(value, fn)
                if block is not value:
                    changes[field] = block or (ir.Pass(span=value[0].span),)
        given = visit.evolve(s, **changes) if changes else s
        result = fn(given)
        changed = changed or len(result) != 1 or result[0] is not s
        out.extend(result)
    return tuple(out) if changed else stmts


# --------------------------------------------------------------------------
# Swizzle alignment
# --------------------------------------------------------------------------


def _align_swizzled(s: ir.Stmt) -> list:
    """Raise the `align=` of a shared allocation with a swizzled layout."""
    if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
        return [s]
    call = s.value
    if isinstance(call, ir.Method) and call.name == "alloc":
        row = METHODS[("pool", "alloc")]
    elif isinstance(call, ir.Call) and call.func in _SHARED_ALLOCS:
        row = BUILTINS[call.func]
    else:
        return [s]
    what = "pool.alloc" if isinstance(call, ir.Method) else call.func
    bound = row.signature.bind(what, call.args, call.kwargs, call.span)
    dtype, scope = bound["dtype"], bound.get("scope")
    if not isinstance(dtype, ir.DTypeLit) or dtype.name not in DTYPES:
        return [s]
    if isinstance(scope, ir.Str) and not scope.value.startswith("shared"):
        return [s]
    need = swizzle_alignment(bound["layout"], dtype.name)
    given = bound["align"]
    if need == 1 or not isinstance(given, (ir.Int, int)) or _value(given) >= need:
        return [s]
    kwargs = tuple(k for k in call.kwargs if k.name != "align") + (ir.Keyword("align", ir.Int(need)),)
    return [attrs.evolve(s, value=attrs.evolve(call, kwargs=kwargs))]


# --------------------------------------------------------------------------
# Pool lowering
# --------------------------------------------------------------------------


def _lower_pool(s: ir.Stmt, syms) -> list:
    if isinstance(s, ir.ExprStmt) and _pool_method(s.expr, syms) in ("move_base_to", "commit"):
        return []
    if not (isinstance(s, ir.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ir.Name)):
        return [s]
    name = s.targets[0].id
    value = s.value
    if isinstance(value, ir.Call) and value.func == "smem_pool":
        pool = syms.pools[name]
        if pool.cursor == 0:
            return []
        arena = ir.Call(
            "alloc",
            (ir.TupleExpr((ir.Int(pool.cursor),)), ir.DTypeLit("u8")),
            (ir.Keyword("scope", ir.Str("shared.dyn")), ir.Keyword("align", ir.Int(1024))),
            span=value.span,
        )
        return [attrs.evolve(s, value=arena)]
    if _pool_method(value, syms) == "alloc":
        pool = syms.pools[value.obj.id]
        buf = syms.buffers[name]
        offset = (buf.byte_offset - pool.base) // buf.elem_bytes
        kwargs = [
            ir.Keyword("data", ir.Name(pool.name)),
            ir.Keyword("elem_offset", ir.Int(offset)),
        ]
        if buf.layout is not None:
            kwargs.append(ir.Keyword("layout", buf.layout))
        view = ir.Call(
            "decl_buffer",
            (ir.TupleExpr(tuple(ir.Int(e) for e in buf.shape)), ir.DTypeLit(buf.dtype)),
            tuple(kwargs),
            span=value.span,
        )
        return [attrs.evolve(s, value=view)]
    return [s]


def _pool_method(e: ir.Expr, syms) -> Optional[str]:
    if isinstance(e, ir.Method) and isinstance(e.obj, ir.Name) and e.obj.id in syms.pools:
        return e.name
    return None



def _value(arg) -> int:
    """An `int` parameter's value: the literal, or the default."""
    return arg.value if isinstance(arg, ir.Int) else arg

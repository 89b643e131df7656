"""copy_async -> TMA ("tma"): one thread issues `cp.async.bulk.tensor`,
and the Tensor Memory Accelerator walks the tile a tensor map describes.

    if tid == 0:
        copy_async(Asmem[stage, :, :], A[m:m + 128, k:k + 64], dispatch="tma", mbar=bar.ptr_to([stage]))

Everything about the descriptor was decided by plan-tma, which annotated the
call with the tensor map's name and one `((coords...), shared_offset)` per
instruction (`tilec.passes.plan_tma`); this variant only turns those into
intrinsic calls, so planning happens once and kernel.json, the descriptor
statement and the instructions cannot disagree.  Direction comes from the
operand scopes:

- global -> shared (a load): `ptx.cp_async.bulk.tensor.g2s` per issue,
  completing on `mbar=` (required).  `multicast=` (a 16-bit mask of the
  cluster's CTAs) and `cache_hint=` (a 64-bit L2 policy) pass through.  On
  sm_100a the instruction carries `.cta_group::N` (`cta_group=`, 1 unless
  given); Hopper has only the one-CTA form, so there `cta_group=2` is an
  error and the qualifier is never written.
- shared -> global (a store): `ptx.cp_async.bulk.tensor.s2g` per issue, in
  the current bulk group; `reduce="add"` adds into global memory.  A store
  has no mbarrier and does not multicast.

What a load reads past the tensor's edge is in the tensor map (`oob=`,
"zero" or "nan"; NaN only for f16, bf16, tf32, f32 and f64 maps); a store
skips those positions.

Several issues (when one box cannot cover the tile: rows padded in shared
memory, more than five descriptor dims) are written out one after another:
the issue loop, unrolled.  The shared address of an issue is the buffer's
first element plus the planned offset.
Like every copy_async variant this emits no completion: the caller's
`mbarrier.arrive.expect_tx` / `try_wait` (loads) or `commit_group` /
`wait_group` (stores) close it.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.affine import linear
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.passes.dispatch.build import located, mul
from tilec.passes.dispatch.operands import region, same_shape
from tilec.passes.dispatch.per_kernel import last_call
from tilec.passes.dispatch.registry import DispatchContext, TileOp, predicate, register

SIGNATURE = Signature.parse(
    "dst: expr, src: expr, *, mbar: expr = None, cta_group: int(1|2) = None, multicast: expr = None, "
    'cache_hint: expr = None, reduce: str(add) = None, oob: str(zero|nan) = "zero", tmap: str = None, '
    "tma_issues: expr = None"
)

REDUCE_DTYPES = {"add": ("f16", "bf16", "f32", "i32", "u32", "u64")}
"""The element types cp.reduce.async.bulk.tensor can combine, per operation."""

NAN_FILL_DTYPES = ("f16", "bf16", "tf32", "f32", "f64")
"""The element types a tensor map can fill with NaN (fp8 and fp4 travel as
bytes, so TMA has no NaN for them)."""


def _bind(op: TileOp) -> dict:
    """The call's arguments by name: expressions, and Python values for
    the compile-time ones (cta_group, reduce, oob, tmap)."""
    bound = op.bind(SIGNATURE)
    return {**bound, **SIGNATURE.literals(op.call.func, bound, op.span)}


@last_call
def _regions(op: TileOp, ctx: DispatchContext):
    """(arguments, dst, src), read once per call (`last_call`) for the
    predicate and the lowering."""
    args = _bind(op)
    # TMA clips a tile at the global tensor's edge (fill on load, skip on store).
    dst = region(args["dst"], ctx.symbols, "the destination of copy_async", past_end=True)
    src = region(args["src"], ctx.symbols, "the source of copy_async", past_end=True)
    if dst.dtype != src.dtype:
        raise TilecError(f"copy_async: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}", op.span)
    same_shape(dst, src, "copy_async")
    return args, dst, src


def validate_copy_op(op: TileOp, ctx: DispatchContext):
    try:
        _regions(op, ctx)
    except TilecError as err:
        return False, err.message
    return True


def single_thread(op: TileOp, ctx: DispatchContext):
    if op.scope == "thread":
        return True
    return False, (
        f"TMA is issued by one thread, but this call is at {op.scope or 'cta'} scope; "
        "guard it to one thread (if tid == 0:) or write thread.copy_async"
    )


def tma_planned(op: TileOp, ctx: DispatchContext):
    if "tmap" in op.kwargs and "tma_issues" in op.kwargs:
        return True
    return False, (
        "plan-tma planned no tensor map for it (it plans copies between a global kernel "
        "parameter and shared memory, on sm_90a or newer)"
    )


@register(
    "copy_async",
    families=("hopper", "blackwell"),
    name="tma",
    priority=10,
    when=[
        predicate("validate_copy_op", validate_copy_op),
        predicate("single_thread", single_thread),
        predicate("tma_planned", tma_planned),
    ],
)
def lower(op: TileOp, ctx: DispatchContext) -> list:
    args, dst, src = _regions(op, ctx)
    if src.scope == "global" and dst.buffer.is_shared:
        load, shared, glob = True, dst, src
    elif dst.scope == "global" and src.buffer.is_shared:
        load, shared, glob = False, src, dst
    else:
        raise TilecError(f"TMA copies between global and shared memory, not from {src.scope} to {dst.scope}", op.span)
    if args["oob"] == "nan" and glob.dtype not in NAN_FILL_DTYPES:
        raise TilecError(
            f'oob="nan" fills with the NaN of a float tensor map ({", ".join(NAN_FILL_DTYPES)}); '
            f"TMA reads {glob.dtype} as plain bytes, which have no NaN",
            op.span,
        )
    tmap = _tensormap(args["tmap"], glob.name, ctx, op)
    # built at the call, of placed parts (`located`), so that dispatch need not rebuild each issue to place it
    span = op.span
    tmap_addr = ir.Call("address_of", (ir.Name(tmap.name, span=span),), span=span)
    first = _first_element(shared.buffer, op)
    issues = _issues(args["tma_issues"], op)
    if load:
        kwargs = _load_kwargs(args, ctx, op)  # (first: a load without mbar= is refused there)
        mbar = located(args["mbar"], span)
    else:
        kwargs = _store_kwargs(args, tmap, glob.dtype, op)
    out = []
    for coords, offset in issues:
        addr = _address(shared.buffer, offset, first, span)
        coords = located(coords, span)
        if load:
            call = ir.Call("ptx.cp_async.bulk.tensor.g2s", (addr, mbar, tmap_addr, coords), kwargs, span=span)
        else:
            call = ir.Call("ptx.cp_async.bulk.tensor.s2g", (addr, tmap_addr, coords), kwargs, span=span)
        out.append(ir.ExprStmt(call, span=span))
    return out


# --------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------


def _tensormap(name: str, tensor: str, ctx: DispatchContext, op: TileOp) -> ir.TensorMap:
    """The `tensormap` statement plan-tma wrote for this copy."""
    stmt = ctx.symbols.tensormaps.get(name)
    if stmt is None:
        raise TilecError(f"copy_async: tmap=\"{name}\" names no tensormap statement of this kernel", op.span)
    mapped = stmt.value.args[0]
    if not (isinstance(mapped, ir.Name) and mapped.id == tensor):
        raise TilecError(f"copy_async: tensor map '{name}' describes '{print_expr(mapped)}', not '{tensor}'", op.span)
    return stmt


def _first_element(buf, op: TileOp) -> int:
    """Where the buffer's first element is, in elements from its storage
    start (where plan-tma's offsets count from): the layout's memory
    offset.  Issue addresses are written from the first element's address,
    so that must be the unswizzled one."""
    layout = buf.tile_layout
    m0 = dict(layout.offset).get("m", 0)
    if m0 and layout.swizzle is not None and layout.swizzle(m0) != m0:
        raise TilecError(
            f"TMA addresses '{buf.name}' from its storage start, but its layout {layout} puts the first "
            "element where the swizzle moves it; allocate the buffer at that offset instead",
            op.span,
        )
    return m0


def _issues(value: ir.Expr, op: TileOp) -> list:
    """[(coordinates tuple, shared offset)] from plan-tma's annotation."""
    bad = TilecError(
        "copy_async: tma_issues must be a list of ((coordinates...), shared_offset) pairs, as plan-tma writes", op.span
    )
    if not isinstance(value, (ir.ListExpr, ir.TupleExpr)) or not value.items:
        raise bad
    out = []
    for item in value.items:
        if not (isinstance(item, ir.TupleExpr) and len(item.items) == 2 and isinstance(item.items[0], ir.TupleExpr)):
            raise bad
        out.append((item.items[0], item.items[1]))
    return out


def _address(buf, offset: ir.Expr, first: int, span) -> ir.Expr:
    """The shared address of an issue: `address_of(buf)` plus plan-tma's
    offset (a linear form in elements from the storage start) less the
    first element's, in bytes, written term by term
    (`address_of(Asmem) + stage * 32768 + 640`), placed at `span`."""
    eb = buf.elem_bytes
    atoms: dict = {}
    form = linear(offset, atoms)
    addr: ir.Expr = ir.Call("address_of", (ir.Name(buf.name, span=span),), span=span)
    for key, c in form.terms:
        addr = ir.Binary("+" if c > 0 else "-", addr, located(mul(atoms[key], abs(c) * eb), span), span=span)
    const = form.const - first
    if const:
        addr = ir.Binary("+" if const > 0 else "-", addr, ir.Int(abs(const) * eb, span=span), span=span)
    return addr


def _load_kwargs(args: dict, ctx: DispatchContext, op: TileOp) -> tuple:
    if args["mbar"] is None:
        raise TilecError("a TMA load completes on an mbarrier: pass mbar=bar.ptr_to([i])", op.span)
    if args["reduce"] is not None:
        raise TilecError("reduce= combines a TMA store into global memory; a load cannot reduce", op.span)
    group = args["cta_group"]
    if ctx.target.family == "blackwell":
        group = group or 1
    elif group == 2:
        raise TilecError(f"cta_group=2 (a CTA pair) needs sm_100a; {ctx.target} has one-CTA TMA loads only", op.span)
    else:
        group = None
    span = op.span
    kwargs = []
    if group is not None:
        kwargs.append(ir.Keyword("cta_group", ir.Int(group, span=span), span=span))
    for name in ("multicast", "cache_hint"):
        if args[name] is not None:
            kwargs.append(ir.Keyword(name, located(args[name], span), span=span))
    return tuple(kwargs)


def _store_kwargs(args: dict, tmap: ir.TensorMap, data_dtype: str, op: TileOp) -> tuple:
    for name, why in (("mbar", "it completes through bulk groups (commit_group / wait_group)"),
                      ("multicast", "it writes one global tile")):
        if args[name] is not None:
            raise TilecError(f"{name}= has no meaning for a TMA store: {why}", op.span)
    if args["cta_group"] == 2:
        raise TilecError("cta_group=2 has no meaning for a TMA store: each CTA stores its own tile", op.span)
    span = op.span
    kwargs = []
    reduce = args["reduce"]
    if reduce is not None:
        _check_reduce(reduce, tmap, data_dtype, op)
        kwargs.append(ir.Keyword("reduce", ir.Str(reduce, span=span), span=span))
    if args["cache_hint"] is not None:
        kwargs.append(ir.Keyword("cache_hint", located(args["cache_hint"], span), span=span))
    return tuple(kwargs)


def _check_reduce(reduce: str, tmap: ir.TensorMap, data_dtype: str, op: TileOp) -> None:
    """TMA reduces in the tensor map's element type, so that must be the
    data's own type (not the wider integer plan-tma reads a row of over
    256 elements as) and one the operation supports."""
    map_dtype = tmap.value.args[1].name
    if map_dtype != data_dtype:
        raise TilecError(
            f"reduce=\"{reduce}\" adds {data_dtype} elements, but tensor map '{tmap.name}' reads them as "
            f"{map_dtype} to fit an innermost box row of over 256 elements; copy at most 256 elements "
            "along the innermost dim per box",
            op.span,
        )
    allowed = REDUCE_DTYPES[reduce]
    if data_dtype not in allowed:
        raise TilecError(
            f"reduce=\"{reduce}\" on a TMA store needs {', '.join(allowed)} elements, got {data_dtype}", op.span
        )

"""copy_async -> cp.async ("cp_async"): global to shared memory without
passing through registers, the sm_80 way (it runs on every target).

    cta.copy_async(As[stage, :, :], A[m:m + 128, k:k + 32])
    ptx.cp_async.commit_group()
    ...
    ptx.cp_async.wait_group(STAGES - 2)
    cuda.cta_sync()

The threads of the call's scope share the tile as `copy` (ldst) does: it is
cut into runs along its last dim, as long as both layouts keep a run
contiguous and aligned -- 16 bytes where they allow, else 8, else 4 (a
padded or column-major shared tile takes the widest its layout allows) --
and consecutive threads take consecutive runs, which coalesces the global
reads.  Each run is one `ptx.cp_async` (`.cg` for 16 bytes, bypassing L1,
unless `cache="ca"`; `.ca` otherwise).  Where not even 4-byte runs exist
(2-byte elements scattered in shared memory), the elements are copied with
plain loads and stores: synchronously, which every wait accepts.

`oob="zero"`: the global region may run past the tensor's edge (a ragged
last tile); each run then reads only the bytes inside (cp.async's
`src_size`) and zero-fills the rest, and a run wholly outside reads
nothing.  Without it, the region must lie inside the tensor.

Like every copy_async variant it emits no completion: the caller commits
the group (`ptx.cp_async.commit_group()`) and waits on it
(`ptx.cp_async.wait_group(n)`), then synchronises the threads that read it.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.passes.dispatch import FAMILIES, predicate, register
from tilec.passes.dispatch.build import copy_vec
from tilec.passes.dispatch.operands import region, same_shape
from tilec.passes.dispatch.threads import Threads, scope_of, whole_scope
from tilec.passes.dispatch.vectors import Divisors, spread, vector_ok, widths
from tilec.passes.dispatch.registry import DispatchContext, TileOp

SIGNATURE = Signature.parse('dst: expr, src: expr, *, cache: str(ca|cg) = None, oob: str(zero) = None')

CP_ASYNC_BYTES = (16, 8, 4)
"""The sizes one cp.async moves."""


def _bind(op: TileOp) -> dict:
    bound = op.bind(SIGNATURE)
    return {**bound, **SIGNATURE.literals(op.call.func, bound, op.span)}


def global_to_shared(op: TileOp, ctx: DispatchContext):
    try:
        args = _bind(op)
        dst = region(args["dst"], ctx.symbols, "the destination of copy_async")
        src = region(args["src"], ctx.symbols, "the source of copy_async", past_end=True)
    except TilecError as err:
        return False, err.message
    if src.scope != "global" or not dst.buffer.is_shared:
        return False, f"cp.async copies global to shared memory, not {src.scope} to {dst.scope}"
    return True


@register(
    "copy_async",
    families=FAMILIES,
    name="cp_async",
    priority=5,
    when=[predicate("global_to_shared", global_to_shared), predicate("whole_scope", whole_scope)],
)
def lower(op: TileOp, ctx: DispatchContext) -> list:
    args = _bind(op)
    zero_fill = args["oob"] == "zero"
    dst = region(args["dst"], ctx.symbols, "the destination of copy_async")
    src = region(args["src"], ctx.symbols, "the source of copy_async", past_end=zero_fill)
    if dst.dtype != src.dtype:
        raise TilecError(f"copy_async: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype}", op.span)
    same_shape(dst, src, "copy_async")
    eb = DTYPES[dst.dtype].bytes
    if DTYPES[dst.dtype].bits < 8:
        raise TilecError(f"copy_async: {dst.dtype} elements are packed; copy them as bytes (u8)", op.span)
    divisors = Divisors(ctx.symbols)
    v = next(v for v in widths(eb) if vector_ok(dst, v, divisors) and vector_ok(src, v, divisors))
    size = v * eb
    if args["cache"] == "cg" and size != 16:
        raise TilecError(f"cache=\"cg\" needs 16-byte copies, but the layouts allow {size}-byte runs here", op.span)
    threads = Threads(ctx.symbols)
    scope = scope_of(op)
    tid = threads.require(threads.index(scope), f"each thread's position in its {scope}")

    if size not in CP_ASYNC_BYTES:
        if zero_fill:
            raise TilecError(
                f"oob=\"zero\" needs cp.async runs of 4 bytes or more; these layouts allow {size}-byte runs", op.span
            )
        return spread(ctx, threads.size(scope), tid, dst.shape, v,
                      lambda index: [copy_vec(dst.element(index), src.element(index), v)])

    cache = args["cache"] or ("cg" if size == 16 else "ca")

    def run(index):
        to = ir.Method(ir.Name(dst.name), "ptr_to", (ir.ListExpr(dst.element(index).indices),))
        at = src.element(index).indices
        kwargs = [ir.Keyword("size", ir.Int(size)), ir.Keyword("cache", ir.Str(cache))]
        if zero_fill:
            at, src_size = _clipped(at, src.buffer.shape, v, eb)
            kwargs.append(ir.Keyword("src_size", src_size))
        frm = ir.Method(ir.Name(src.name), "ptr_to", (ir.ListExpr(tuple(at)),))
        return [ir.ExprStmt(ir.Call("ptx.cp_async", (to, frm), tuple(kwargs)))]

    return spread(ctx, threads.size(scope), tid, dst.shape, v, run)


def _clipped(index, shape, v: int, eb: int):
    """(source index, bytes to read) of the run of v elements at global
    `index`: the bytes inside the tensor, 0 when a leading index is past
    its dim (then the index is moved to 0 there, so the address stays in
    the tensor and aligned)."""
    inside = None
    for i, n in zip(index[:-1], shape[:-1]):
        c = ir.Binary("<", i, ir.Int(n))
        inside = c if inside is None else ir.Binary("and", inside, c)
    last, n = index[-1], shape[-1]
    left = ir.Call("min", (ir.Call("max", (ir.Binary("-", ir.Int(n), last), ir.Int(0))), ir.Int(v)))
    nbytes = ir.Binary("*", left, ir.Int(eb))
    if inside is not None:
        nbytes = ir.Select(inside, nbytes, ir.Int(0))
    inside_last = ir.Binary("<", last, ir.Int(n))
    at = [ir.Select(ir.Binary("<", i, ir.Int(m)), i, ir.Int(0)) for i, m in zip(index[:-1], shape[:-1])]
    at.append(ir.Select(inside_last, last, ir.Int(0)))
    return at, nbytes

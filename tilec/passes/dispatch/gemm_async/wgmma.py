"""gemm_async -> wgmma.mma_async (Hopper, sm_90a).

    wg.gemm_async(acc[:, :], Asmem[stage, :, :], Bsmem[stage, :, :], accum=k != 0)

computes acc = A @ B^T (+ acc when `accum` is true; the default is False) for
an A tile of M x K and a B tile of N x K, both K-major in shared memory, or A
in registers.  One warpgroup issues it: `wgmma` is warpgroup-collective, so
the call must run in all 128 threads of a warpgroup (scope `wg`, or `cta`
when the block is one warpgroup).

The accumulator is a register buffer of f32 spread over the warpgroup with
the wgmma fragment layout.  For one m64nNk16 instruction thread t = 32 w + l
holds N/2 values; value i is the element

    row = 16 w + l / 4 + 8 ((i / 2) % 2),   col = 8 (i / 4) + 2 (l % 4) + i % 2

which, for a 64 x N tile, is the layout

    S[(4, 2, 8, N / 8, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]

An M x N accumulator with M = 64 m stacks m such tiles (an outer `m:N/2`
iterator), and an N over 256 is cut into equal instructions of at most 256
columns.  Any layout is accepted that gives every element of every
instruction to the thread and register the hardware uses: the check is
element by element, so layouts that order the registers differently work
too.  Later copies and casts read the accumulator through the same layout.
A from registers uses the same fragment with N = 16 per K step (8 f16 per
thread; `ptx.wgmma.mma_async.rs`).

Shared operands are read through matrix descriptors (`tilec.compiler.mma_desc`).
The swizzle mode (none, 32B, 64B, 128B) is the layout's swizzle; LBO and SBO
come from the layout's strides, and each K step of 16 and each 64-row block
of A (or 256-column block of B) moves the descriptor's start address.  Before
a descriptor is trusted, every element of the operand tile is located twice
-- by the buffer's layout and by the hardware's canonical K-major layout for
that descriptor -- and they must agree; so a layout wgmma cannot read (an
MN-major tile, a row stride that is not one atom row, a swizzled tile not
aligned to its 8-row atom) is rejected here, not computed wrong.  A region
may start at a run-time index (`Asmem[stage, c * 64 : c * 64 + 64, :]`) when
the layout is the same at every start the index can take (its known
divisors decide which those are).

What the lowering writes: `ptx.wgmma.fence()` (ordering the accumulator's
registers before the first wgmma), the two descriptors, then the
instructions, K steps outermost.  It does not commit or wait, exactly like
tcgen05's gemm_async: the caller closes the batch with
`ptx.wgmma.commit_group()` and waits with `ptx.wgmma.wait_group(n)` before
it reads the accumulator or lets the shared tiles be overwritten, which is
what lets a pipelined kernel keep one batch in flight (`wait_group(1)`).
Shared operands written by threads (not TMA) need `ptx.fence.proxy_async`
before the call.
"""
from __future__ import annotations

import itertools
from typing import Dict, List

import attrs

from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout_axes import LayoutError
from tilec.compiler.layout_shape import group
from tilec.compiler.mma_desc import SWIZZLE_NONE, SWIZZLE_WIDTH_BYTES, smem_desc_for_layout
from tilec.compiler.printer import print_expr
from tilec.compiler.swizzle import swizzle_mode
from tilec.passes.dispatch.operands import (
    Divisors,
    Region,
    Threads,
    region,
)
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp, predicate, register
from tilec.passes.dispatch.wgmma_fragment import MMA_M, WHOLE_WARPGROUP, fragment_elements

MMA_K = 16
MAX_N = 256
DTYPES_AB = ("f16", "bf16")

SIGNATURE = Signature.parse("C: expr, A: expr, B: expr, *, accum: expr = False, cta_group: int = 1")


# --------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------


@attrs.frozen
class Operands:
    C: Region
    A: Region
    B: Region
    accum: ir.Expr
    M: int
    N: int
    K: int


def operands(op: TileOp, ctx: DispatchContext) -> Operands:
    bound = op.bind(SIGNATURE)
    syms = ctx.symbols
    C = region(bound["C"], syms, "gemm_async's accumulator C")
    A = region(bound["A"], syms, "gemm_async's A")
    B = region(bound["B"], syms, "gemm_async's B")
    accum = bound["accum"]
    if not isinstance(accum, ir.Expr):
        accum = ir.Bool(accum, span=op.span)
    M, N = _matrix_shape(C)
    return Operands(C, A, B, accum, M, N, _matrix_shape(A)[1])


def _matrix_shape(r: Region) -> tuple:
    """The extents of the last two dims (the matrix); leading dims pick one
    matrix, so their extents must be 1."""
    if len(r.extents) < 2:
        return (r.extents[0], 1) if r.extents else (1, 1)
    return tuple(r.extents[-2:])


def _lead_extents_ok(r: Region) -> bool:
    return len(r.extents) >= 2 and all(e == 1 for e in r.extents[:-2])


# --------------------------------------------------------------------------
# Predicates (their names and reasons are what a rejected call reports)
# --------------------------------------------------------------------------


def _options(op: TileOp, ctx: DispatchContext):
    unknown = sorted(set(op.kwargs) - {"accum", "cta_group"})
    if unknown:
        return False, f"wgmma takes no {', '.join(unknown)} (only accum=)"
    cg = op.kwargs.get("cta_group")
    if cg is not None and not (isinstance(cg, ir.Int) and cg.value == 1):
        return False, "wgmma runs in one CTA (cta_group=1)"
    return True


def _operand_scopes(op: TileOp, ctx: DispatchContext):
    o = operands(op, ctx)
    if o.C.scope != "local":
        return False, f"the accumulator '{o.C.name}' must be a register (local) buffer, not {o.C.scope}"
    if not o.A.buffer.is_shared and o.A.scope != "local":
        return False, f"A '{o.A.name}' must be in shared memory or registers, not {o.A.scope}"
    if not o.B.buffer.is_shared:
        return False, f"B '{o.B.name}' must be in shared memory, not {o.B.scope}"
    for name, r in (("C", o.C), ("A", o.A), ("B", o.B)):
        if not _lead_extents_ok(r):
            return False, f"{name} '{r.name}' must be a 2-D tile (leading dims indexed by one value), got extents {r.extents}"
    return True


def _dtypes(op: TileOp, ctx: DispatchContext):
    o = operands(op, ctx)
    if o.A.dtype not in DTYPES_AB:
        return False, f"wgmma here multiplies f16 or bf16, got A {o.A.dtype}"
    if o.B.dtype != o.A.dtype:
        return False, f"A and B must have one dtype, got {o.A.dtype} and {o.B.dtype}"
    if o.C.dtype != "f32":
        return False, f"the accumulator must be f32, got {o.C.dtype}"
    return True


def _shape(op: TileOp, ctx: DispatchContext):
    o = operands(op, ctx)
    a_rows, b_rows = _matrix_shape(o.A)[0], _matrix_shape(o.B)[0]
    if (a_rows, o.K) != (o.M, _matrix_shape(o.B)[1]) or b_rows != o.N:
        return False, f"C {o.M}x{o.N} = A {a_rows}x{o.K} @ B^T with B {b_rows}x{_matrix_shape(o.B)[1]} do not fit"
    if o.M % MMA_M:
        return False, f"M ({o.M}) must be a multiple of {MMA_M} (one warpgroup issues m64 instructions)"
    if o.N % 8:
        return False, f"N ({o.N}) must be a multiple of 8"
    if o.K % MMA_K:
        return False, f"K ({o.K}) must be a multiple of {MMA_K}"
    return True


# --------------------------------------------------------------------------
# The lowering
# --------------------------------------------------------------------------


@register(
    "gemm_async",
    families=("hopper",),
    name="wgmma",
    priority=10,
    when=[
        WHOLE_WARPGROUP,
        predicate("options", _options),
        predicate("operand_scopes", _operand_scopes),
        predicate("dtypes", _dtypes),
        predicate("shape", _shape),
    ],
)
def lower(op: TileOp, ctx: DispatchContext) -> List[ir.Stmt]:
    o = operands(op, ctx)
    span = op.span
    n_inst = instruction_n(o.N)
    m_tiles, n_tiles, k_steps = o.M // MMA_M, o.N // n_inst, o.K // MMA_K
    threads = Threads(ctx.symbols)
    acc = fragment_elements(o.C, threads, [(MMA_M * i, n_inst * j) for i in range(m_tiles) for j in range(n_tiles)],
                            n_inst, "the accumulator")
    divisors = Divisors(ctx.symbols.kernel)
    b = shared_operand(o.B, n_inst, divisors, "B")
    stmts: List[ir.Stmt] = [ir.ExprStmt(ir.Call("ptx.wgmma.fence", span=span), span=span)]
    if o.A.scope == "local":
        a = None
        a_frags = fragment_elements(o.A, threads, [(MMA_M * i, MMA_K * kk) for i in range(m_tiles) for kk in range(k_steps)],
                                    MMA_K, "A")
    else:
        a = shared_operand(o.A, MMA_M, divisors, "A")
        a_desc = ctx.fresh("wgmma_desc_a")
        stmts.append(_assign(a_desc, a.descriptor_call(span), span))
    b_desc = ctx.fresh("wgmma_desc_b")
    stmts.append(_assign(b_desc, b.descriptor_call(span), span))
    scale = o.accum
    if not isinstance(scale, ir.Bool):
        name = ctx.fresh("wgmma_accum")
        stmts.append(_assign(name, scale, span))
        scale = ir.Name(name, span=span)
    kwargs = (ir.Keyword("dtype", ir.DTypeLit(o.A.dtype, span=span), span=span),)
    for kk in range(k_steps):
        for i in range(m_tiles):
            for j in range(n_tiles):
                d = ir.TupleExpr(tuple(acc[i * n_tiles + j]), span=span)
                b_val = _plus(ir.Name(b_desc, span=span), b.start_units[(j, kk)], span)
                s = scale if kk == 0 else ir.Bool(True, span=span)
                n_kw = (ir.Keyword("n", ir.Int(n_inst, span=span), span=span),) + kwargs
                if a is None:
                    a_val = ir.TupleExpr(tuple(a_frags[i * k_steps + kk]), span=span)
                    call = ir.Call("ptx.wgmma.mma_async.rs", (d, a_val, b_val, s), n_kw, span=span)
                else:
                    a_val = _plus(ir.Name(a_desc, span=span), a.start_units[(i, kk)], span)
                    call = ir.Call("ptx.wgmma.mma_async", (d, a_val, b_val, s), n_kw, span=span)
                stmts.append(ir.ExprStmt(call, span=span))
    return stmts


def instruction_n(n: int) -> int:
    """The N of each instruction: N itself up to 256, else the largest
    multiple of 8 up to 256 that divides N into equal parts."""
    if n <= MAX_N:
        return n
    return next(w for w in range(MAX_N, 7, -8) if n % w == 0)


def _assign(name: str, value: ir.Expr, span) -> ir.Stmt:
    return ir.Assign((ir.Name(name, span=span),), value, span=span)


def _plus(e: ir.Expr, k: int, span) -> ir.Expr:
    return e if k == 0 else ir.Binary("+", e, ir.Int(k, span=span), span=span)


# --------------------------------------------------------------------------
# Shared operands: matrix descriptors
# --------------------------------------------------------------------------


@attrs.frozen
class SharedOperand:
    """A shared operand as wgmma reads it: the element the descriptor's base
    address points at, the descriptor's constant fields, and per (row block,
    K step) the start address offset in 16-byte units."""

    region: Region
    ldo: int
    sdo: int
    mode: int
    start_units: Dict[tuple, int]

    def descriptor_call(self, span) -> ir.Call:
        base = ir.Method(ir.Name(self.region.name, span=span), "ptr_to",
                         (ir.ListExpr(tuple(self.region.starts), span=span),), span=span)
        args = (base, ir.Int(self.ldo, span=span), ir.Int(self.sdo, span=span), ir.Int(self.mode, span=span))
        return ir.Call("ptx.wgmma.encode_matrix_descriptor", args, span=span)


def shared_operand(r: Region, rows_per_inst: int, divisors: Divisors, what: str) -> SharedOperand:
    """Check that wgmma can read region `r` (rows x K, K-major) in blocks of
    `rows_per_inst` rows and 16 columns, and derive its descriptor.  `Decline`
    with the reason when it cannot."""
    buf = r.buffer
    name = f"{what} '{buf.name}'"
    layout = buf.tile_layout
    if layout.replica or any(a != "m" for a, _ in layout.offset) or any(it.axis != "m" for it in layout.shard):
        raise Decline(f"the layout of {name} must place elements in memory only, got {layout}")
    eb = DTYPES[buf.dtype].bytes
    try:
        mode = swizzle_mode(layout.swizzle, DTYPES[buf.dtype])
        grouped = group(attrs.evolve(layout, swizzle=None), buf.shape)
    except LayoutError as err:
        raise Decline(f"{name}: {err.message}") from None
    chunk = 16 // eb  # elements in 16 bytes: a core matrix row
    period = layout.swizzle.period if mode != SWIZZLE_NONE else chunk  # elements the base must be aligned to
    if buf.align % (period * eb):
        raise Decline(f"{name} is {buf.align}-byte aligned; wgmma needs {period * eb}-byte alignment for its layout")

    def g(d: int, x: int) -> int:
        """The pre-swizzle memory offset that coordinate x of dim d adds."""
        total = 0
        for it in reversed(grouped.dim(d)):
            x, digit = divmod(x, it.extent)
            total += digit * it.stride
        return total

    ndim = len(buf.shape)
    offset_m = dict(layout.offset).get("m", 0)
    base0, tables = offset_m, []
    for d in range(ndim):
        starts = _start_values(r, d, divisors)
        s0 = starts[0]
        base0 += g(d, s0)
        h = [g(d, s0 + x) - g(d, s0) for x in range(r.extents[d])]
        for s in starts[1:]:
            if (g(d, s) - g(d, s0)) % period or any(g(d, s + x) - g(d, s) != h[x] for x in range(r.extents[d])):
                raise Decline(
                    f"{name}: the tile starting at index {s} of dim {d} is laid out differently from the one at "
                    f"{s0}, and the run-time index '{print_expr(r.starts[d])}' may take either"
                )
        tables.append(h)
    if base0 % period:
        raise Decline(f"{name}: the tile does not start on a {period * eb}-byte boundary (a swizzle atom or core matrix row)")
    h_rows, h_k = tables[-2], tables[-1]
    rows, K = r.extents[-2], r.extents[-1]
    if h_k[1] - h_k[0] != 1:
        raise Decline(f"{name} must be K-major (its last dim contiguous) for wgmma here; got {layout}")
    sbo = (h_rows[8] - h_rows[0]) * eb if rows_per_inst > 8 else None
    lbo = (h_k[chunk] - h_k[0]) * eb if mode == SWIZZLE_NONE else None
    try:
        desc = smem_desc_for_layout("wgmma", buf.dtype, "K", mode, mn_stride=sbo, k_stride=lbo)
    except TilecError as err:
        raise Decline(f"{name}: {err.message}") from None
    width = SWIZZLE_WIDTH_BYTES[mode]
    xor_bits = (width // 16).bit_length() - 1  # 128B: 3 bits, 64B: 2, 32B: 1, none: 0
    starts: Dict[tuple, int] = {}
    for blk, kk in itertools.product(range(rows // rows_per_inst), range(K // MMA_K)):
        off = (h_rows[blk * rows_per_inst] + h_k[kk * MMA_K]) * eb
        if off % 16 or off < 0:
            raise Decline(f"{name}: the tile at row {blk * rows_per_inst}, column {kk * MMA_K} is not 16-byte aligned")
        starts[(blk, kk)] = off // 16
    swz = layout.swizzle
    # The byte the descriptor reads element (r, k) at, before its XOR, is a
    # row part plus a column part: the block's start address (row block plus
    # K step) and the offsets within the core matrices.
    row_lin, k_lin = [], []
    for r_ in range(rows):
        blk, rr = divmod(r_, rows_per_inst)
        row_lin.append(h_rows[blk * rows_per_inst] * eb + (rr // 8) * desc.sbo
                       + (rr % 8) * (16 if mode == SWIZZLE_NONE else width))
    for k in range(K):
        kk, kq = divmod(k, MMA_K)
        within = (kq * eb // 16) * desc.lbo + kq * eb % 16 if mode == SWIZZLE_NONE else kq * eb
        k_lin.append(h_k[kk * MMA_K] * eb + within)
    xor_mask = (1 << xor_bits) - 1
    for r_ in range(rows):
        for k in range(K):
            lin = row_lin[r_] + k_lin[k]
            hw = lin ^ (((lin >> 7) & xor_mask) << 4)
            m = h_rows[r_] + h_k[k]
            actual = (swz(m) if swz is not None else m) * eb
            if hw != actual:
                raise Decline(
                    f"{name} is not in a layout wgmma reads: element ({r_}, {k}) of the tile is at byte {actual}, "
                    f"the {SWIZZLE_WIDTH_BYTES[mode]}B K-major descriptor (LBO {desc.lbo}, SBO {desc.sbo}) reads it "
                    f"at {hw} ({layout})"
                )
    ldo, sdo, swizzle = desc.intrinsic_args()
    return SharedOperand(r, ldo, sdo, swizzle, starts)


def _start_values(r: Region, d: int, divisors: Divisors) -> List[int]:
    """The values the start of dim d can take: the constant, or every
    in-bounds multiple of what is known to divide the run-time expression."""
    start = r.starts[d]
    if isinstance(start, ir.Int):
        return [start.value]
    step = divisors.of(start) or 1
    return list(range(0, r.buffer.shape[d] - r.extents[d] + 1, step))



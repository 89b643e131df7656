"""gemm_async -> wgmma.mma_async (Hopper, sm_90a).

    wg.gemm_async(acc[:, :], Asmem[stage, :, :], Bsmem[stage, :, :], accum=k != 0)

computes acc = A @ B^T (+ acc when `accum` is true; the default is False) for
an A tile of M x K and a B tile of N x K in shared memory, or A in registers;
`transpose_A=True` takes A as K x M, `transpose_B=True` B as K x N (so
`D = A @ B` with B row-major K x N is `transpose_B=True`).  Types (the PTX
ISA's table, `mma_desc.wgmma_mma_k`): f16 (K 16 per instruction) into f32
or f16, bf16 (K 16) and tf32 (K 8) into f32, e4m3/e5m2 in any mix (K 32)
into f32 or f16, i8/u8 in any mix (K 32) into i32.  A from registers is any
of them, in the wgmma A fragment (four 32-bit registers per K step holding
one tf32, two 16-bit or four 8-bit values each), tf32 as f32 registers.  One
warpgroup issues it: `wgmma` is warpgroup-collective, so the call must run
in all 128 threads of a warpgroup (scope `wg`, or `cta` when the block is
one warpgroup).

The accumulator is a register buffer spread over the warpgroup with the
wgmma fragment layout.  For one m64nNk16 instruction thread t = 32 w + l
holds N/2 values (in N/2 registers, or for f16 two to a register: the
emitter stores such a buffer packed, `regs(f16x2)`); value i is the element

    row = 16 w + l / 4 + 8 ((i / 2) % 2),   col = 8 (i / 4) + 2 (l % 4) + i % 2

which, for a 64 x N tile, is the layout

    S[(4, 2, 8, N / 8, 4, 2) : (32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]

An M x N accumulator with M = 64 m stacks m such tiles (an outer `m:N/2`
iterator), and an N over 256 is cut into equal instructions of at most 256
columns.  Any layout is accepted that gives every element of every
instruction to the thread and register the hardware uses: the check is
element by element, so layouts that order the registers differently work
too.  Later copies and casts read the accumulator through the same layout.
A from registers uses the same fragment with N = K per K step (8 16-bit
values per thread; 16 8-bit ones, four adjacent columns to a register; 4
tf32, one to a register; `ptx.wgmma.mma_async.rs`), packed into 32-bit
registers before the wgmma.fence.

Shared operands are read through matrix descriptors, checked and built by
`dispatch/smem_matrix.py` (the module tcgen05 uses too).  Whether an operand
is K-major or MN-major (16-bit types only; the instruction's imm-trans flag)
is read off its layout: `tma_shared_layout(f16, mode, (K, N))` of a K x N
tile is MN-major.  The swizzle mode is the layout's swizzle; LBO and SBO come
from the layout's strides, and each K step and each 64-row block of A (or
256-column block of B) moves the descriptor's start address.  Every element
of every instruction tile is located by the buffer's layout and by the
hardware's canonical layout, and they must agree; so a layout wgmma cannot
read is rejected here, with the rule and the layout to use, not computed
wrong.  A region may start at a run-time index (`Asmem[stage, c * 64 : c *
64 + 64, :]`) when the layout is the same at every start the index can take
(its known divisors decide which those are).

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

from typing import List


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.mma_desc import wgmma_accumulators, wgmma_mma_k
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import located
from tilec.passes.dispatch.operands import region
from tilec.passes.dispatch.per_kernel import last_call
from tilec.passes.dispatch.threads import Threads
from tilec.passes.dispatch.vectors import Divisors
from tilec.passes.dispatch.registry import Decline, DispatchContext, TileOp, predicate, register
from tilec.passes.dispatch.smem_matrix import SharedMatrix, operand_matrix
from tilec.passes.dispatch.wgmma_fragment import MMA_M, WHOLE_WARPGROUP, fragment_elements

MAX_N = 256
FAMILIES = (("f16",), ("bf16",), ("tf32",), ("e4m3", "e5m2"), ("i8", "u8"))
"""A and B types wgmma multiplies: one family, in any mix within it."""
TRANSPOSABLE = ("f16", "bf16")
"""Types wgmma reads MN-major (imm-trans-a/b) [PTX 9.7.15.5.2]."""


SIGNATURE = Signature.parse(
    "C: expr, A: expr, B: expr, *, accum: expr = False, cta_group: int = 1, "
    "transpose_A: bool = False, transpose_B: bool = False"
)


# --------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------


@records.frozen
class Operands:
    C: Region
    A: Region
    B: Region
    accum: ir.Expr
    trans_a: bool
    trans_b: bool
    M: int
    N: int
    K: int

    def a_shape(self) -> tuple:
        """(M, K) of A as the call gives it (K x M when transpose_A)."""
        rows, cols = _matrix_shape(self.A)
        return (cols, rows) if self.trans_a else (rows, cols)

    def b_shape(self) -> tuple:
        """(N, K) of B as the call gives it (K x N when transpose_B)."""
        rows, cols = _matrix_shape(self.B)
        return (cols, rows) if self.trans_b else (rows, cols)


@last_call
def operands(op: TileOp, ctx: DispatchContext) -> Operands:
    """The call's operands, read once per call (`last_call`) for the
    predicates and the lowering."""
    bound = op.bind(SIGNATURE)
    lits = SIGNATURE.literals(op.call.func, bound, op.span)
    syms = ctx.symbols
    C = region(bound["C"], syms, "gemm_async's accumulator C")
    A = region(bound["A"], syms, "gemm_async's A")
    B = region(bound["B"], syms, "gemm_async's B")
    accum = bound["accum"]
    if not isinstance(accum, ir.Expr):
        accum = ir.Bool(accum, span=op.span)
    M, N = _matrix_shape(C)
    a_rows, a_cols = _matrix_shape(A)
    K = a_rows if lits["transpose_A"] else a_cols
    return Operands(C, A, B, accum, lits["transpose_A"], lits["transpose_B"], M, N, K)


def mma_k(o: Operands) -> int:
    """The K of one instruction for the operand types."""
    return {16: 16, 32: 8, 8: 32}[DTYPES[o.A.dtype].bits]


def a_type(o: Operands) -> str:
    """The type wgmma multiplies A as: its dtype, and tf32 for an f32 register
    buffer (a tf32 element is the 32 bits of an f32, of which the tensor core
    reads the top 19; tf32 is no register value type).  Every A type may come
    from registers."""
    return "tf32" if o.A.scope == "local" and o.A.dtype == "f32" else o.A.dtype


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
    unknown = sorted(set(op.kwargs) - {"accum", "cta_group", "transpose_A", "transpose_B"})
    if unknown:
        return False, f"wgmma takes no {', '.join(unknown)} (only accum=, transpose_A=, transpose_B=)"
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
    a = a_type(o)
    family = next((f for f in FAMILIES if a in f), None)
    if family is None:
        return False, (f"wgmma multiplies {', '.join('/'.join(f) for f in FAMILIES)}, got A {o.A.dtype}"
                       + (" (f32 A is taken from registers only, as tf32)" if o.A.dtype == "f32" else ""))
    if o.B.dtype not in family:
        one = "one dtype" if len(family) == 1 else f"dtypes of one family ({' or '.join(family)})"
        return False, f"A and B must have {one}, got {o.A.dtype} and {o.B.dtype}"
    accs = wgmma_accumulators(a)
    if o.C.dtype not in accs:
        return False, f"the accumulator must be {' or '.join(accs)}, got {o.C.dtype}"
    for name, trans, r in (("A", o.trans_a, o.A), ("B", o.trans_b, o.B)):
        if trans and r.dtype not in TRANSPOSABLE:
            return False, (f"wgmma reads {r.dtype} {name} only K-major: transpose_{name}=True needs "
                           f"{' or '.join(TRANSPOSABLE)}")
    if o.trans_a and o.A.scope == "local":
        return False, "A from registers is M x K (transpose_A=False)"
    return True


def _shape(op: TileOp, ctx: DispatchContext):
    o = operands(op, ctx)
    (a_m, a_k), (b_n, b_k) = o.a_shape(), o.b_shape()
    if (a_m, a_k) != (o.M, b_k) or b_n != o.N:
        return False, (f"C {o.M}x{o.N} = A {a_m}x{a_k} @ B^T with B {b_n}x{b_k} do not fit "
                       f"(A is {'K x M' if o.trans_a else 'M x K'}, B {'K x N' if o.trans_b else 'N x K'})")
    if o.M % MMA_M:
        return False, f"M ({o.M}) must be a multiple of {MMA_M} (one warpgroup issues m64 instructions)"
    if o.N % 8:
        return False, f"N ({o.N}) must be a multiple of 8"
    k = mma_k(o)
    if o.K % k:
        return False, f"K ({o.K}) must be a multiple of {k}"
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
    a_t = a_type(o)
    k_inst = mma_k(o)
    n_inst = instruction_n(o.N, a_t)
    m_tiles, n_tiles, k_steps = o.M // MMA_M, o.N // n_inst, o.K // k_inst
    threads = Threads(ctx.symbols)
    acc = fragment_elements(o.C, threads, [(MMA_M * i, n_inst * j) for i in range(m_tiles) for j in range(n_tiles)],
                            n_inst, "the accumulator", span, packed=DTYPES[o.C.dtype].bits == 16)
    divisors = Divisors(ctx.symbols)
    b = shared_operand(o.B, o.trans_b, [(n_inst * j, k_inst * kk) for j in range(n_tiles) for kk in range(k_steps)],
                       (n_inst, k_inst), divisors, "B")
    stmts: List[ir.Stmt] = []
    if o.A.scope == "local":
        a = None
        per = 32 // DTYPES[o.A.dtype].bits
        a_frags = fragment_elements(o.A, threads, [(MMA_M * i, k_inst * kk) for i in range(m_tiles) for kk in range(k_steps)],
                                    k_inst, "A", span, per=per)
        a_frags = [_packed_words(frag, per, ctx, stmts, span) for frag in a_frags]
    stmts.append(ir.ExprStmt(ir.Call("ptx.wgmma.fence", span=span), span=span))
    if o.A.scope != "local":
        a = shared_operand(o.A, o.trans_a, [(MMA_M * i, k_inst * kk) for i in range(m_tiles) for kk in range(k_steps)],
                           (MMA_M, k_inst), divisors, "A")
        a_desc = ctx.fresh("wgmma_desc_a")
        stmts.append(_assign(a_desc, a.descriptor(span), span))
    b_desc = ctx.fresh("wgmma_desc_b")
    stmts.append(_assign(b_desc, b.descriptor(span), span))
    scale = o.accum
    if not isinstance(scale, ir.Bool):
        name = ctx.fresh("wgmma_accum")
        stmts.append(_assign(name, scale, span))
        scale = ir.Name(name, span=span)
    kwargs = (ir.Keyword("dtype", ir.DTypeLit(a_t, span=span), span=span),)
    if o.B.dtype != a_t:
        kwargs += (ir.Keyword("b_dtype", ir.DTypeLit(o.B.dtype, span=span), span=span),)
    if a is not None and a.major == "MN":
        kwargs += (ir.Keyword("trans_a", ir.Int(1, span=span), span=span),)
    if b.major == "MN":
        kwargs += (ir.Keyword("trans_b", ir.Int(1, span=span), span=span),)
    # one accumulator tuple per tile and one keyword list, shared by every K step's instruction
    ds = [ir.TupleExpr(tuple(tile), span=span) for tile in acc]
    n_kw = (ir.Keyword("n", ir.Int(n_inst, span=span), span=span),) + kwargs
    for kk in range(k_steps):
        for i in range(m_tiles):
            for j in range(n_tiles):
                d = ds[i * n_tiles + j]
                b_val = b.operand(b_desc, (n_inst * j, k_inst * kk), span)
                s = scale if kk == 0 else ir.Bool(True, span=span)
                if a is None:
                    a_val = ir.TupleExpr(tuple(a_frags[i * k_steps + kk]), span=span)
                    call = ir.Call("ptx.wgmma.mma_async.rs", (d, a_val, b_val, s), n_kw, span=span)
                else:
                    a_val = a.operand(a_desc, (MMA_M * i, k_inst * kk), span)
                    call = ir.Call("ptx.wgmma.mma_async", (d, a_val, b_val, s), n_kw, span=span)
                stmts.append(ir.ExprStmt(call, span=span))
    return stmts


def _packed_words(frag: List[ir.Expr], per: int, ctx: DispatchContext, out: List[ir.Stmt], span) -> List[ir.Expr]:
    """A register A fragment as the four 32-bit registers wgmma reads: 16-bit
    values packed in pairs (ptx.mov.b32.pack), 8-bit ones in fours
    (ptx.mov.b32.pack4) by statements appended to `out`, which come before
    the wgmma.fence; f32 registers (tf32) as their bits (wgmma takes b32
    registers).  Packed at each instruction instead, inside the fenced
    region, the packing writes registers that a wgmma after the fence reads,
    and ptxas fences again before every instruction (C7519), so each waits
    for the one before it."""
    names = []
    for i in range(0, len(frag), per):
        if per == 1:
            value = ir.Call("reinterpret", (frag[i], ir.DTypeLit("u32", span=span)), span=span)
        else:
            value = ir.Call({2: "ptx.mov.b32.pack", 4: "ptx.mov.b32.pack4"}[per], tuple(frag[i:i + per]), span=span)
        name = ctx.fresh("wgmma_a")
        out.append(_assign(name, value, span))
        names.append(ir.Name(name, span=span))
    return names


def instruction_n(n: int, dtype: str = "f16") -> int:
    """The N of each instruction: the largest N the ISA has for `dtype`, up
    to 256, that divides N into equal parts (N itself when it is one)."""
    return next(w for w in range(min(n, MAX_N), 7, -8) if n % w == 0 and _n_ok(w, dtype))


def _n_ok(n: int, dtype: str) -> bool:
    try:
        wgmma_mma_k(dtype, dtype, "i32" if dtype in ("i8", "u8") else "f32", n)
    except TilecError:
        return False
    return True


def _assign(name: str, value: ir.Expr, span) -> ir.Stmt:
    """`name = value` at `span`, `value`'s unlocated nodes placed there
    (`located`)."""
    return ir.Assign((ir.Name(name, span=span),), located(value, span), span=span)


# --------------------------------------------------------------------------
# Shared operands: matrix descriptors
# --------------------------------------------------------------------------


def shared_operand(r: Region, transposed: bool, tiles, tile_shape: tuple, divisors: Divisors,
                   what: str) -> SharedMatrix:
    """Region `r` (rows x K, or K x rows when `transposed`) as wgmma reads
    it in tiles of `tile_shape` at the (row, k) origins `tiles`
    (`dispatch/smem_matrix.py`): K-major, or MN-major for 16-bit types;
    `Decline` with the reason when it cannot."""
    majors = ("K", "MN") if r.dtype in TRANSPOSABLE else ("K",)
    try:
        return operand_matrix("wgmma", r, transposed, tiles, tile_shape, divisors, what, majors=majors)
    except TilecError as err:
        raise Decline(err.message) from None

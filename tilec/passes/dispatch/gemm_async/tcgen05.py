"""gemm_async -> tcgen05.mma (Blackwell, sm_100a).

    if tid == 0:
        gemm_async(tmem[:, 0:128], Asmem[stage, :, :], Bsmem[stage, :, :], accum=k != 0)
        ptx.tcgen05.commit(mma_bar.ptr_to([0]), cta_group=1)

computes C = A @ B^T (+ C when `accum`, False by default) with A an M x K
tile and B an N x K tile (`transpose_A=True`: A is K x M, `transpose_B=True`:
B is K x N) in shared memory, or A in tensor memory, and the f32 accumulator
C in tensor memory.  One thread issues the instructions (scope `thread`); a
call at warp scope issues them from one elected lane.  They run
asynchronously and this lowering does not wait: the caller commits them
(`ptx.tcgen05.commit`) to an mbarrier and waits on it before reading C or
overwriting A and B.

Types pick the instruction kind and its K (`tilec.compiler.mma_desc`):
f16/bf16 kind::f16 (K 16), tf32 kind::tf32 (K 8), e4m3/e5m2 kind::f8f6f4
(K 32); with block scale factors `SFA=`, `SFB=` (ue8m0 regions of tensor
memory, one factor per 32 elements of K) e4m3/e5m2 become kind::mxf8f6f4
(K 32) and e2m1 kind::mxf4 (K 64).  Shapes: `cta_group=1` issues M x N
instructions with M = C's rows, 64 or 128; `cta_group=2` lets a pair of CTAs
(a cluster of 2) run one 2M x N instruction in which each CTA holds M rows
of A and C and N/2 rows of B.  N is cut into instructions of at most 256
columns, a multiple of 8 (16 for a pair); K into steps of the kind's K.  The
issue nest is (N block, K step), K innermost; the first K step of each block
accumulates when `accum` is true, the others always.

Shared operands are read through 64-bit matrix descriptors.  Whether an
operand is K-major or MN-major, its swizzle mode and its LBO/SBO are read off
the buffer's layout: every element of every instruction tile is located by
the layout and by the hardware's canonical layout for the descriptor, and
they must agree, so a layout the tensor core cannot read is an error here,
not a wrong result.  Each descriptor is encoded once per call, from the
buffer's first element, and each instruction adds its tile's offset in
16-byte units (the seeds' smem_desc_add_16B_offset); a region may start at a
run-time index on a dim laid out with one stride (`Asmem[stage, :, :]`).

Tensor memory is addressed `lane << 16 | column`, columns of 32 bits (an f16
element is half a column).  C must be laid out the way the instruction's data
path writes it (PTX ISA "Data Path Layout Organization"): row r of the tile
in lane r (M 128, and each CTA's half of M 256, layouts D and A); M 64 in
lanes 32 (r / 16) + r % 16 of each warp's quarter, from lane 0 or 16 (layout
F: `S[(4, 16, N) : (32@TLane, 1@TLane, 1@TCol)]`); a pair's M 128 with column
c of each CTA's 64 x N half in lane r + 64 (c / (N/2)), column c % (N/2)
(layout B: `S[(64, 2, N/2) : (1@TLane, 64@TLane, 1@TCol)]`).

Operands are read with the shared dispatch modules `placement` (a region
on its layout), `smem_matrix` (shared operands as descriptors) and `tmem`
(tensor-memory addresses), which copy_async's tcgen05_cp and tcgen05_ld use
too.  A tensor-memory operand's lanes and columns are checked along its first
row and first column: the layout's offsets and the data path's are each a
row part plus a column part (`placement`), so they agree on every element
exactly when they agree there.
"""
from __future__ import annotations

from typing import Dict, List, Optional


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.mma_desc import (
    BLOCK_SCALED_KINDS,
    Tcgen05InstrDesc,
    tcgen05_check_operand_swizzle,
    tcgen05_mma_k,
)
from tilec.compiler.region import Region
from tilec.passes.dispatch.operands import region
from tilec.passes.dispatch.vectors import Divisors
from tilec.passes.dispatch.placement import Placed, matrix, place
from tilec.passes.dispatch.registry import DispatchContext, TileOp, predicate, register
from tilec.passes.dispatch.smem_matrix import operand_matrix
from tilec.passes.dispatch.tmem import (
    check_cta_pair,
    column_bits,
    routed,
    router_error,
    tmem_address,
    tmem_base,
    tmem_columns,
)

SIGNATURE = Signature.parse(
    "C: expr, A: expr, B: expr, *, accum: expr = False, cta_group: int(1|2) = 1, "
    "transpose_A: bool = False, transpose_B: bool = False, SFA: expr = None, SFB: expr = None"
)

LANES = 128
MAX_N = 256
SF_BLOCK = 32
"""K elements per block scale factor (ue8m0, kind::mxf8f6f4 and kind::mxf4)."""


# --------------------------------------------------------------------------
# The call
# --------------------------------------------------------------------------

_KINDS = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "e4m3": "f8f6f4", "e5m2": "f8f6f4"}
_SCALED_KINDS = {"e4m3": "mxf8f6f4", "e5m2": "mxf8f6f4", "e2m1": "mxf4"}


@records.frozen
class Call:
    C: Region
    A: Region
    B: Region
    SFA: Optional[Region]
    SFB: Optional[Region]
    accum: ir.Expr
    cta_group: int
    trans_a: bool
    trans_b: bool


def bind(op: TileOp, ctx: DispatchContext) -> Call:
    b = op.bind(SIGNATURE)
    lits = SIGNATURE.literals(op.call.func, b, op.span)
    syms = ctx.symbols
    sf = {n: None if b[n] is None else region(b[n], syms, f"gemm_async's {n}") for n in ("SFA", "SFB")}
    accum = b["accum"] if isinstance(b["accum"], ir.Expr) else ir.Bool(b["accum"])
    return Call(
        region(b["C"], syms, "gemm_async's accumulator C"),
        region(b["A"], syms, "gemm_async's A"),
        region(b["B"], syms, "gemm_async's B"),
        sf["SFA"], sf["SFB"], accum, lits["cta_group"], lits["transpose_A"], lits["transpose_B"],
    )


def _single_thread_or_warp(op: TileOp, ctx: DispatchContext):
    scope = op.scope or "cta"
    if scope in ("thread", "warp"):
        return True
    return False, f"unsupported exec_scope {scope}, expected single thread or warp scope (guard the call: if tid == 0:)"


def _operand_spaces(op: TileOp, ctx: DispatchContext):
    c = bind(op, ctx)
    if c.C.scope != "tmem":
        return False, f"the accumulator C '{c.C.name}' must be in tensor memory, not {c.C.scope}"
    if not (c.A.buffer.is_shared or c.A.scope == "tmem"):
        return False, f"A '{c.A.name}' must be in shared or tensor memory, not {c.A.scope}"
    if not c.B.buffer.is_shared:
        return False, f"B '{c.B.name}' must be in shared memory, not {c.B.scope}"
    for n, r in (("SFA", c.SFA), ("SFB", c.SFB)):
        if r is not None and r.scope != "tmem":
            return False, f"the scale factors {n} '{r.name}' must be in tensor memory, not {r.scope}"
    return True


@register(
    "gemm_async",
    families=("blackwell",),
    name="tcgen05",
    priority=10,
    when=[
        predicate("single_thread_or_warp", _single_thread_or_warp),
        predicate("operand_spaces", _operand_spaces),
    ],
)
def lower(op: TileOp, ctx: DispatchContext) -> List[ir.Stmt]:
    c = bind(op, ctx)
    check_cta_pair(c.cta_group, ctx, "gemm_async")
    kind, mma_k = _kind(c)
    M, N = matrix(c.C, "gemm_async's accumulator C")
    a_rows, a_cols = matrix(c.A, "gemm_async's A")
    b_rows, b_cols = matrix(c.B, "gemm_async's B")
    a_m, K = (a_cols, a_rows) if c.trans_a else (a_rows, a_cols)
    b_n, b_k = (b_cols, b_rows) if c.trans_b else (b_rows, b_cols)
    cg = c.cta_group
    if a_m != M or b_k != K or b_n * cg != N:
        pair = f" (N / 2 = {N // 2} per CTA for cta_group 2)" if cg == 2 else ""
        raise TilecError(
            f"gemm_async shapes do not fit: C {M}x{N} = A {a_m}x{K} @ B^T with B {b_n}x{b_k}{pair} "
            f"(A is {'K x M' if c.trans_a else 'M x K'}, B {'K x N' if c.trans_b else 'N x K'})"
        )
    if K % mma_k:
        raise TilecError(f"gemm_async: K ({K}) must be a multiple of {mma_k}, the K of one kind::{kind} instruction")
    step = 8 * cg
    if N % step:
        raise TilecError(f"gemm_async: N ({N}) must be a multiple of {step} for cta_group {cg}")
    n_mma = N if N <= MAX_N else next(w for w in range(MAX_N, step - 1, -step) if N % w == 0)
    k_steps = K // mma_k
    blocks = [(nb * n_mma, kk * mma_k) for nb in range(N // n_mma) for kk in range(k_steps)]

    divisors = Divisors(ctx.symbols)
    B = operand_matrix("tcgen05", c.B, c.trans_b, sorted({(n0 // cg, k0) for n0, k0 in blocks}),
                       (n_mma // cg, mma_k), divisors, "gemm_async's B")
    if c.A.scope == "tmem":
        if c.trans_a:
            raise TilecError("gemm_async: A in tensor memory is M x K (transpose_A=False), read K-major")
        A = None
        a_major = "K"
    else:
        A = operand_matrix("tcgen05", c.A, c.trans_a, sorted({(0, k0) for _, k0 in blocks}), (M, mma_k), divisors,
                           "gemm_async's A", majors=("K",) if c.A.dtype == "e2m1" else ("K", "MN"))
        a_major = A.major
        tcgen05_check_operand_swizzle(kind, A.major, A.swizzle)
    tcgen05_check_operand_swizzle(kind, B.major, B.swizzle)
    m_inst = M * cg
    base_kw = dict(kind=kind, a_dtype=c.A.dtype, b_dtype=c.B.dtype, m=m_inst, n=n_mma, a_major=a_major,
                   b_major=B.major, cta_group=cg)
    _instr_desc(base_kw)

    names: Dict[ir.Expr, str] = {}
    stmts: List[ir.Stmt] = []

    def bound(value: ir.Expr, hint: str) -> ir.Expr:
        """`value` evaluated once, into a fresh name."""
        if isinstance(value, (ir.Int, ir.Bool, ir.Name)):
            return value
        if value not in names:
            names[value] = ctx.fresh(hint)
            stmts.append(ir.Assign((ir.Name(names[value]),), value))
        return ir.Name(names[value])

    d_addrs = _accumulator(c, M, n_mma, cg, blocks, bound)
    if A is None:
        a_ops = _tmem_a(c, M, blocks, bound)
    else:
        desc_a = ctx.fresh("tcgen05_desc_a")
        stmts.append(ir.Assign((ir.Name(desc_a),), A.descriptor()))
        a_ops = {(n0, k0): A.operand(desc_a, (0, k0)) for n0, k0 in blocks}
    desc_b = ctx.fresh("tcgen05_desc_b")
    stmts.append(ir.Assign((ir.Name(desc_b),), B.descriptor()))
    accum = bound(c.accum, "tcgen05_accum")
    scales = _scale_factors(c, M, n_mma, mma_k, k_steps, blocks, bound) if c.SFA is not None else None

    issue: List[ir.Stmt] = []
    for n0, k0 in blocks:
        args = (d_addrs[n0], a_ops[(n0, k0)], B.operand(desc_b, (n0 // cg, k0)))
        enable = accum if k0 == 0 else ir.Bool(True)
        kw = dict(base_kw)
        if scales is None:
            func, args = "ptx.tcgen05.mma", args + (enable,)
        else:
            sfa, sfb, kw["sfa_id"], kw["sfb_id"] = scales[(n0, k0)]
            _instr_desc(kw)
            func, args = "ptx.tcgen05.mma.block_scale", args + (sfa, sfb, enable)
        issue.append(ir.ExprStmt(ir.Call(func, args, _keywords(kw))))
    if (op.scope or "cta") == "warp":
        issue = [ir.If(ir.Call("ptx.elect_sync"), tuple(issue))]
    return stmts + issue


def _instr_desc(kw: dict) -> None:
    """Check the instruction `kw` describes against the ISA's shape and
    type rules (`tilec.compiler.mma_desc`)."""
    scaled = kw["kind"] in BLOCK_SCALED_KINDS
    try:
        Tcgen05InstrDesc(d_dtype="f32", scale_dtype="ue8m0" if scaled else None, **kw)
    except TilecError as err:
        raise TilecError(f"gemm_async: {err.message}") from None


_DEFAULTS = {"a_major": "K", "b_major": "K", "cta_group": 1, "sfa_id": 0, "sfb_id": 0}


def _keywords(kw: dict) -> tuple:
    out = []
    for key, value in kw.items():
        if _DEFAULTS.get(key, object()) == value:
            continue
        if key in ("a_dtype", "b_dtype"):
            node = ir.DTypeLit(value)
        elif isinstance(value, str):
            node = ir.Str(value)
        else:
            node = ir.Int(value)
        out.append(ir.Keyword(key, node))
    return tuple(out)


def _kind(c: Call) -> tuple:
    """(kind, K of one instruction) for the operand types; errors name the rule."""
    a, b = c.A.dtype, c.B.dtype
    if c.C.dtype != "f32":
        raise TilecError(f"gemm_async: the accumulator C must be f32, got {c.C.dtype}")
    if (c.SFA is None) != (c.SFB is None):
        raise TilecError("gemm_async: block scaling needs both SFA= and SFB=")
    table = _KINDS if c.SFA is None else _SCALED_KINDS
    if a not in table or b not in table or table[a] != table[b]:
        if c.SFA is None and "e2m1" in (a, b):
            raise TilecError("gemm_async: e2m1 operands need block scale factors SFA= and SFB= (kind::mxf4)")
        if c.SFA is not None and {a, b} <= set(_KINDS):
            raise TilecError(f"gemm_async: block scale factors apply to e4m3, e5m2 or e2m1 operands, not {a} x {b}")
        groups = "f16, bf16, tf32, e4m3/e5m2" if c.SFA is None else "e4m3/e5m2 or e2m1 with SFA/SFB"
        raise TilecError(f"gemm_async: tcgen05 multiplies A and B of one type family ({groups}), got A {a}, B {b}")
    kind = table[a]
    return kind, tcgen05_mma_k(kind)


def _datapath(M: int, n: int, cg: int):
    """(lane, column) offsets from the instruction's D address at which the
    data path writes row r, column c of this CTA's M x n part of D, and the
    lanes D's address may start at [PTX "Data Path Layout Organization"].
    Each offset is a part of r plus a part of c, both zero at (0, 0), as the
    line-by-line check of `_accumulator` requires."""
    if cg == 1 and M == 64:  # layout F: 16 lanes of each warp's quarter
        return (lambda r, c: (32 * (r // 16) + r % 16, c)), (0, 16)
    if cg == 2 and M == 64:  # layout B: the pair's M 128, columns split over lane halves
        half = n // 2
        return (lambda r, c: (r + 64 * (c // half), c % half)), (0,)
    return (lambda r, c: (r, c)), (0,)  # layouts D (M 128) and A (the pair's M 256)


def _row_then_column(rows: int, cols: int):
    """(i, k) along row 0, then along column 0: where two offsets that are
    each a row part plus a column part first disagree, if anywhere, in
    row-major order (past a row 0 that agrees, row i agrees everywhere once
    it agrees at (i, 0))."""
    for k in range(cols):
        yield 0, k
    for i in range(1, rows):
        yield i, 0


def _accumulator(c: Call, M: int, n_mma: int, cg: int, blocks, bound) -> Dict[int, ir.Expr]:
    """The D address of each N block, after checking that C's layout is the
    data path's."""
    what = "gemm_async's accumulator C"
    name = f"{what} '{c.C.name}'"
    if M not in (64, 128):
        raise TilecError(
            f"gemm_async: C has {M} rows; tcgen05 with cta_group {cg} takes M "
            f"{'64 or 128' if cg == 1 else '128 or 256 (64 or 128 rows of C per CTA)'}"
        )
    p = place(c.C, ("TLane", "TCol"), what)
    if p.layout.replica:
        raise TilecError(f"{name} cannot be replicated ({p.layout})")
    dyn = tmem_columns(p, what)
    at, aligns = _datapath(M, n_mma, cg)
    if p.bounds("TLane")[1] >= LANES:
        raise TilecError(f"{name} reaches past tensor memory's {LANES} lanes")
    base = bound(tmem_base(c.C.buffer), "tcgen05_tmem")
    out = {}
    for n0 in sorted({n0 for n0, _ in blocks}):
        lane0, col0 = p.offset("TLane", (0, n0)), p.offset("TCol", (0, n0))
        if lane0 not in aligns:
            raise TilecError(
                f"{name}: an M={M * cg} instruction's accumulator starts at tensor-memory lane "
                f"{' or '.join(map(str, aligns))}, but row 0 is in lane {lane0}"
            )
        for i, k in _row_then_column(M, n_mma):
            want = at(i, k)
            got = (p.offset("TLane", (i, n0 + k)) - lane0, p.offset("TCol", (i, n0 + k)) - col0)
            if got != want:
                raise TilecError(
                    f"{name} is not laid out as the M={M * cg} data path writes it: element ({i}, {n0 + k}) must "
                    f"be {want[0]} lanes and {want[1]} columns from the block's first, the layout puts it "
                    f"{got[0]} lanes and {got[1]} columns away ({p.layout})"
                )
        out[n0] = tmem_address(base, lane0, column_bits(col0, c.C.dtype, name), dyn)
    return out


def _tmem_a(c: Call, M: int, blocks, bound) -> Dict[tuple, ir.Expr]:
    """A in tensor memory: row r in lane r, K along the columns."""
    what = "gemm_async's A"
    name = f"{what} '{c.A.name}'"
    if M != 128:
        raise TilecError(f"gemm_async: A in tensor memory needs 128 rows per CTA (layouts D and A), got {M}")
    p = place(c.A, ("TLane", "TCol"), what)
    lane0, col0 = p.offset("TLane", (0, 0)), p.offset("TCol", (0, 0))
    if p.layout.replica or lane0 != 0 or any(
            (p.offset("TLane", (i, k)) - lane0, p.offset("TCol", (i, k)) - col0) != (i, k)
            for i, k in _row_then_column(M, p.shape[1])):
        raise TilecError(f"{name} must have row r in lane r and K along the columns ({p.layout})")
    dyn = tmem_columns(p, what)
    base = bound(tmem_base(c.A.buffer), "tcgen05_tmem")
    return {(n0, k0): tmem_address(base, 0, column_bits(p.offset("TCol", (0, k0)), c.A.dtype, name), dyn)
            for n0, k0 in blocks}


def _scale_factors(c: Call, M: int, n_mma: int, mma_k: int, k_steps: int, blocks, bound) -> Dict[tuple, tuple]:
    """Per (N block, K step): the SFA and SFB addresses and the byte ids the
    instruction descriptor selects.  A scale-factor region is rows x (its
    factors per instruction, or that times the K steps); row r of an
    instruction's rows is in lane r % 32 of every warp's quarter (the layout's
    R[4 : 32@TLane]) and column r / 32 from the first, and an instruction's
    factors for one row sit in consecutive bytes of a column.  Like C, an
    instruction's factors are checked along its rows for its first factor,
    then its other factors in row 0."""
    per = mma_k // SF_BLOCK
    out = {}
    sides = []
    for n, r, rows_per in (("SFA", c.SFA, M), ("SFB", c.SFB, n_mma // c.cta_group)):
        what = f"gemm_async's {n}"
        name = f"{what} '{r.name}'"
        if r.dtype != "ue8m0":
            raise TilecError(f"{name} must hold ue8m0 scale factors, got {r.dtype}")
        shape = r.extents[-2:]
        rows_total = M if n == "SFA" else (c.B.shape[1] if c.trans_b else c.B.shape[0])
        if len(shape) != 2 or any(e != 1 for e in r.extents[:-2]) or shape[0] != rows_total \
                or shape[1] not in (per, per * k_steps):
            raise TilecError(
                f"{name} must be {rows_total} x {per} (one set for every K step) or {rows_total} x {per * k_steps} "
                f"({per} ue8m0 per row and K step of {mma_k}), got extents {r.extents}"
            )
        p = place(r, ("TLane", "TCol"), what)
        if not routed(p.layout):
            raise TilecError(f"{name}: scale factors are read in every warp's lane quarter; {router_error(p.layout)}")
        base = bound(tmem_base(r.buffer), "tcgen05_tmem")
        sides.append((name, p, shape, rows_per, shape[1] == per, base, tmem_columns(p, what)))
    for n0, k0 in blocks:
        picks = []
        for idx, (name, p, shape, rows_per, shared_k, base, dyn) in enumerate(sides):
            row0 = 0 if idx == 0 else n0 // c.cta_group
            kc = 0 if shared_k else (k0 // mma_k) * per
            t0 = _factor_at(p, shape, "TCol", row0, kc)
            for j, i in _row_then_column(per, rows_per):  # factor j of the step, row i of the instruction
                got_lane = _factor_at(p, shape, "TLane", row0 + i, kc + j)
                got_col = _factor_at(p, shape, "TCol", row0 + i, kc + j) - t0
                want_col = 4 * (i // 32) + j
                if got_lane != i % 32 or got_col != want_col:
                    raise TilecError(
                        f"{name}: the scale factor of row {row0 + i}, K step {k0 // mma_k} must be in lane "
                        f"{i % 32}, byte {want_col} from the step's first; the layout puts it in lane "
                        f"{got_lane}, byte {got_col} ({p.layout})"
                    )
            col, sf_id = divmod(t0, 4)
            picks.append((tmem_address(base, 0, col, dyn), sf_id))
        (sfa, sfa_id), (sfb, sfb_id) = picks
        out[(n0, k0)] = (sfa, sfb, sfa_id, sfb_id)
    return out


def _factor_at(p: Placed, shape: tuple, axis: str, row: int, col: int) -> int:
    """The offset on `axis` of factor (row, col) of a rows x factors region
    of that `shape` (either extent may be 1, a dim the placement leaves out)."""
    return p.offset(axis, tuple(x for x, e in zip((row, col), shape) if e != 1))

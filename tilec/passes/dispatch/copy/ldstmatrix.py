"""copy between shared memory and a warp's register fragments ->
ldmatrix / stmatrix ("ldstmatrix").

`ldmatrix.m8n8.b16` moves 8x8 matrices of 16-bit elements: lane l gives the
address of row l % 8 of matrix l // 8 (16 contiguous bytes), and every lane
receives two elements of each matrix in one register -- (row l // 4,
columns 2 (l % 4) and + 1), or with `.trans` (rows 2 (l % 4) and + 1,
column l // 4).  That is the mma.sync fragment pattern, so a copy whose
register layout is made of such pairs moves with x4 / x2 / x1 matrix
instructions instead of 16-bit loads; `stmatrix` (sm_90) is the store.

The variant finds the matrices by evaluating the register layout: a pair of
storage slots (p0, p1) is a matrix when, across the lanes, the elements
they hold are the pattern above with each matrix row a contiguous, 16-byte
aligned run along the shared region's last dim (the layout checks of
`vector_ok`, which also keep a row inside one swizzle chunk).  The matrix
rows can lie anywhere, which is what lets one instruction load four
matrices from different places.  A fragment that does not decompose so
declines, and the plain `ldst` variant moves it.
"""
from __future__ import annotations

from tilec.compiler import ir
from tilec.compiler.printer import print_expr
from tilec.passes.dispatch import FAMILIES, Decline, predicate, register
from tilec.passes.dispatch.copy.operands import copy_operands
from tilec.passes.dispatch.build import add, floordiv, mod, mul
from tilec.passes.dispatch.register_storage import held_elements, register_element, storage
from tilec.passes.dispatch.threads import Threads, WARP_COLLECTIVE
from tilec.passes.dispatch.vectors import Divisors, vector_ok

ROWS = 8  # an 8x8 matrix of 16-bit elements: 8 rows of 16 bytes


def _shared_and_registers(op, ctx):
    dst, src = copy_operands(op, ctx)
    if src.buffer.is_shared and dst.is_local or dst.buffer.is_shared and src.is_local:
        return True
    return False, f"ldmatrix/stmatrix move between shared memory and registers, not {src.scope} to {dst.scope}"


def _half_elements(op, ctx):
    dst, _ = copy_operands(op, ctx)
    if dst.dtype in ("f16", "bf16"):
        return True
    return False, f"ldmatrix/stmatrix move 16-bit elements here (f16, bf16), not {dst.dtype}"


def _stmatrix_target(op, ctx):
    dst, _ = copy_operands(op, ctx)
    if dst.buffer.is_shared and not ctx.target.at_least("sm_90a"):
        return False, f"stmatrix needs sm_90a or newer (the target is {ctx.target})"
    return True


@register(
    "copy",
    families=FAMILIES,
    name="ldstmatrix",
    priority=20,
    when=[
        WARP_COLLECTIVE,
        predicate("shared_and_registers", _shared_and_registers),
        predicate("half_elements", _half_elements),
        predicate("stmatrix_target", _stmatrix_target),
    ],
)
def lower(op, ctx):
    dst, src = copy_operands(op, ctx)
    load = dst.is_local
    reg, smem = (dst, src) if load else (src, dst)
    threads = Threads(ctx.symbols)
    st = storage(reg.buffer, threads)
    if st.scope != "warp" or dict(st.used).get("laneid") != 32:
        raise Decline(f"'{reg.name}' is not spread over the 32 lanes of a warp")
    if not smem.dims or not vector_ok(smem, ROWS, Divisors(ctx.symbols)):
        raise Decline(
            f"the rows of '{print_expr(smem.expr)}' are not contiguous, 16-byte aligned runs of 8 "
            "elements along its last dim"
        )
    lane = threads.require(threads.axis("laneid"), "the lane")
    held = held_elements(reg, st, {"laneid": lane})
    matrices = _matrices(reg, st, held)
    stmts = []
    for trans in (False, True):
        todo = [m for m in matrices if m[2] == trans]
        while todo:
            num = 4 if len(todo) >= 4 else 2 if len(todo) >= 2 else 1
            group, todo = todo[:num], todo[num:]
            stmts.append(_instruction(load, reg, smem, st, group, num, trans, lane))
    return stmts


def _matrices(reg, st, held) -> list:
    """(p0, p1, trans) for every pair of slots that form a matrix; `Decline`
    unless every held slot is in one."""
    shifts = [st.thread_offset({"laneid": lane}) for lane in range(32)]
    index = {h.slot: [tuple(b + s[d] for b, d in zip(h.base, reg.dims)) for s in shifts] for h in held}
    free = [h.slot for h in held]
    found = []
    while free:
        p0 = free[0]
        pair = next(
            ((p1, trans) for trans in (False, True) for p1 in free[1:] if _is_matrix(index[p0], index[p1], trans)),
            None,
        )
        if pair is None:
            raise Decline(
                f"register slot {p0} of '{reg.name}' is in no 8x8 matrix of the ldmatrix pattern "
                "(pairs of consecutive columns in lanes 4r..4r+3, or their transpose)"
            )
        p1, trans = pair
        found.append((p0, p1, trans))
        free = [p for p in free if p not in (p0, p1)]
    return found


def _step(i: tuple, k: int) -> tuple:
    return i[:-1] + (i[-1] + k,)


def _is_matrix(e0: list, e1: list, trans: bool) -> bool:
    """e0[l], e1[l]: the region index lane l holds in the two slots."""
    if not trans:
        if any(e1[l] != _step(e0[l], 1) for l in range(32)):
            return False
        rows = [[e0[4 * g + q] for q in range(4)] for g in range(ROWS)]
        return all(r[0][-1] % ROWS == 0 and all(r[q] == _step(r[0], 2 * q) for q in range(4)) for r in rows)
    for r in range(ROWS):
        row = [(e0, e1)[r % 2][4 * g + r // 2] for g in range(ROWS)]
        if row[0][-1] % ROWS or any(row[g] != _step(row[0], g) for g in range(ROWS)):
            return False
    return True


def _instruction(load, reg, smem, st, group, num, trans, lane) -> ir.Stmt:
    """One ldmatrix/stmatrix of `num` matrices: each lane points at row
    lane % 8 of matrix lane // 8 (lanes past 8 * num repeat the pattern)."""
    row = mod(lane, ROWS)
    j = floordiv(lane, ROWS) if num == 4 else mod(floordiv(lane, ROWS), num)
    # the lane whose slot p0 (or p1, on odd rows when transposed) starts that row
    first = floordiv(row, 2) if trans else mul(row, 4)
    shift = st.offset_exprs({"laneid": first})

    def base(p, d):
        return st.slots[p][d] - reg.const_starts()[d]

    index = []
    for d in reg.dims:
        even = [base(p0, d) for p0, _, _ in group]
        value = _choose(j, even)
        if trans:  # odd rows start in slot p1
            odd = [base(p1, d) for _, p1, _ in group]
            steps = {o - e for o, e in zip(odd, even)}
            if len(steps) == 1:
                value = add(value, mul(mod(row, 2), steps.pop()))
            else:
                value = ir.Select(ir.Binary("==", mod(row, 2), ir.Int(0)), value, _choose(j, odd))
        index.append(add(value, shift[d]))
    addr = ir.Method(ir.Name(smem.name), "ptr_to", (ir.ListExpr(smem.coordinate(index)),))
    regs = ir.TupleExpr(tuple(
        register_element(reg.buffer, st.slots[p]) for p0, p1, _ in group for p in (p0, p1)
    ))
    kwargs = (ir.Keyword("num", ir.Int(num)), ir.Keyword("trans", ir.Bool(trans)))
    name = "ptx.ldmatrix" if load else "ptx.stmatrix"
    return ir.ExprStmt(ir.Call(name, (regs, addr), kwargs))


def _choose(j: ir.Expr, values: list) -> ir.Expr:
    """values[j] for a run-time j < len(values) (1, 2 or 4 of them): an
    affine function of j's bits when the values are one, else selects."""
    v = values
    if len(v) == 1 or len(set(v)) == 1:
        return ir.Int(v[0])
    if len(v) == 2:
        return add(ir.Int(v[0]), mul(j, v[1] - v[0]))
    if v[3] - v[2] == v[1] - v[0]:
        return add(add(ir.Int(v[0]), mul(mod(j, 2), v[1] - v[0])), mul(floordiv(j, 2), v[2] - v[0]))
    out = ir.Int(v[-1])
    for k in range(len(v) - 2, -1, -1):
        out = ir.Select(ir.Binary("==", j, ir.Int(k)), ir.Int(v[k]), out)
    return out

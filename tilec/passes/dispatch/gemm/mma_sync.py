"""gemm -> mma.sync.aligned.m16n8k{16,8} ("mma_sync"): D = A @ B (+ C) by
one warp, every operand in registers.

M, N and K are cut into 16 x 8 x k atoms (k = 16 when K allows it, else 8)
and each (m, n) tile accumulates over K in place: D is first set to C (beta
1) or 0 (beta 0), then one `ptx.mma` per (m, n, k) adds A(m, k) @ B(k, n).

mma.sync fixes which lane holds which element of each operand (the PTX
ISA's fragment figures; `_A`, `_B` and `_ACC` below) but not which of the
lane's registers: register arrays keep one element per register and the
instruction's operands are packed from them, so an operand layout fits when,
for every atom and fragment register, all 32 lanes hold their element of it
in one and the same storage slot.  That is checked element by element (the
"fragment grouping"); the slot is then named by the element lane 0 holds
there, which is an affine function of the atom's position, so the nest is
written as `unroll` loops.  Transposed operands are the same check with the
coordinates swapped: a transposed operand must still place each element in
the lane mma.sync reads it from.
"""
from __future__ import annotations

from typing import Optional

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import TileLayout
from tilec.compiler.printer import print_expr
from tilec.passes.dispatch import FAMILIES, Decline, predicate, register
from tilec.compiler.region import Region
from tilec.passes.dispatch.build import add, assign, mul
from tilec.passes.dispatch.operands import bind, region
from tilec.passes.dispatch.per_kernel import last_call
from tilec.passes.dispatch.register_storage import Storage, storage
from tilec.passes.dispatch.threads import Threads, WARP_COLLECTIVE
from tilec.compiler.fold import fold_expr


def _acc(i: int, lane: int) -> tuple:
    """(row, col) of accumulator register i (c0..c3) of `lane` in the 16x8 tile."""
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2


def _a(i: int, lane: int) -> tuple:
    """(row, col) of A register i (a0..a7 for k16, a0..a3 for k8) in the 16xk tile."""
    return lane // 4 + 8 * (i // 2 % 2), 2 * (lane % 4) + i % 2 + 8 * (i // 4)


def _b(i: int, lane: int) -> tuple:
    """(k, n) of B register i (b0..b3 for k16, b0..b1 for k8) in the kx8 tile."""
    return 2 * (lane % 4) + i % 2 + 8 * (i // 2), lane // 4


@last_call
def _operands(op, ctx) -> dict:
    """The gemm's regions by operand name, read once per call (`last_call`)
    for the four predicates and the lowering."""
    args = bind(op)
    out = {}
    for name in ("D", "A", "B", "C"):
        if args[name] is not None:
            out[name] = region(args[name], ctx.symbols, f"gemm operand {name}")
    return out


def _number(e: Optional[ir.Expr], default: float, what: str) -> float:
    if e is None:
        return default
    e = fold_expr(e)
    if isinstance(e, (ir.Int, ir.Float)):
        return float(e.value)
    raise TilecError(f"gemm: {what} must be a compile-time number", e.span)


# --------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------


def _operands_in_registers(op, ctx):
    for name, r in _operands(op, ctx).items():
        if r.scope != "local":
            return False, f"gemm mma requires {name} in register (local) scope, got {r.scope}"
    return True


def _no_replica(op, ctx):
    for name, r in _operands(op, ctx).items():
        layout = r.buffer.tile_layout
        if layout.replica:
            replica = "R" + str(TileLayout(layout.replica))[1:]
            return False, f"gemm mma requires {name} without replica axes, but '{r.name}' has {replica}"
    return True


def _dtypes(op, ctx):
    ops = _operands(op, ctx)
    a, b = ops["A"].dtype, ops["B"].dtype
    if a not in ("f16", "bf16") or b != a:
        return False, f"gemm mma takes f16 or bf16 A and B of one dtype, got A {a} and B {b}"
    for name in ("D", "C"):
        if name in ops and ops[name].dtype != "f32":
            return False, f"gemm mma accumulates in f32, got {name} {ops[name].dtype}"
    return True


def _alpha_beta(op, ctx):
    args = bind(op)
    alpha = _number(args["alpha"], 1.0, "alpha")
    beta = _number(args["beta"], 0.0, "beta")
    if alpha != 1.0 or beta not in (0.0, 1.0):
        return False, f"gemm mma supports alpha == 1.0 and beta 0.0 or 1.0, got alpha={alpha:g}, beta={beta:g}"
    if beta == 1.0 and args["C"] is None:
        return False, "beta=1.0 adds C, but no C is given"
    return True


# --------------------------------------------------------------------------
# Fragment grouping
# --------------------------------------------------------------------------


class _Operand:
    """One operand as mma.sync reads it: logical (rows, cols) of the matrix
    (A is M x K, B is K x N, C and D are M x N) onto its region."""

    def __init__(self, name: str, r: Region, transposed: bool, threads: Threads):
        if len(r.shape) != 2:
            raise TilecError(f"gemm operand {name} must be a 2-D region, got shape {r.shape}")
        self.name, self.region, self.transposed = name, r, transposed
        self.rows, self.cols = r.shape[::-1] if transposed else r.shape
        self.starts = r.const_starts()
        if self.starts is None:
            raise Decline(f"the region of {name} ('{print_expr(r.expr)}') must have compile-time bounds")
        self.st: Storage = storage(r.buffer, threads)
        if self.st.scope != "warp" or dict(self.st.used).get("laneid") != 32:
            raise Decline(
                f"{name} ('{r.name}') must be spread over the 32 lanes of a warp, one fragment per "
                f"lane (its layout spreads it over a {self.st.scope})"
            )
        self.slot_of = self.st.slot_of()

    def coord(self, row: int, col: int) -> tuple:
        """The buffer coordinate of logical element (row, col)."""
        index = (col, row) if self.transposed else (row, col)
        out = list(self.starts)
        for d, i in zip(self.region.dims, index):
            out[d] += i
        return tuple(out)

    def slot(self, frag, tile: tuple, i: int, frame: str) -> int:
        """The storage slot every lane keeps fragment register i of the atom
        at `tile` (row and column offsets) in; `Decline` naming the first
        element out of place."""
        r0, c0 = frag(i, 0)
        first = self.coord(tile[0] + r0, tile[1] + c0)
        s = self.slot_of.get(first)
        if s is None:
            raise Decline(f"{self.name}'s layout is not the {frame} fragment: lane 0 does not hold {self.name}{list(first)}")
        for lane in range(1, 32):
            r, c = frag(i, lane)
            want = self.coord(tile[0] + r, tile[1] + c)
            if self.st.coordinate(s, {"laneid": lane}) != want:
                raise Decline(
                    f"{self.name}'s layout is not the {frame} fragment: lane {lane} must hold "
                    f"{self.name}{list(want)} in the register where lane 0 holds {self.name}{list(first)}"
                )
        return s

    def element(self, row: ir.Expr, col: ir.Expr) -> ir.Index:
        """The register (named by lane 0's element) of logical (row, col)."""
        index = (col, row) if self.transposed else (row, col)
        coord = list(ir.Int(s) for s in self.starts)
        for d, i in zip(self.region.dims, index):
            coord[d] = add(i, self.starts[d])
        return ir.Index(ir.Name(self.region.name), tuple(coord))


def _group(ops: dict, k: int, counts: tuple) -> dict:
    """Check every atom of every operand for the m16n8k`k` frame; the slots
    of (D, C) per (m, n), by fragment register."""
    frame = f"m16n8k{k}"
    mt, nt, kt = counts
    slots = {}
    for m in range(mt):
        for n in range(nt):
            for name in ("D", "C"):
                if name in ops:
                    slots[name, m, n] = [ops[name].slot(_acc, (16 * m, 8 * n), i, frame) for i in range(4)]
    for kk in range(kt):
        for m in range(mt):
            for i in range(k // 2):
                ops["A"].slot(_a, (16 * m, k * kk), i, frame)
        for n in range(nt):
            for i in range(k // 4):
                ops["B"].slot(_b, (k * kk, 8 * n), i, frame)
    return slots


# --------------------------------------------------------------------------
# The lowering
# --------------------------------------------------------------------------


@register(
    "gemm",
    families=FAMILIES,
    name="mma_sync",
    priority=10,
    when=[
        WARP_COLLECTIVE,
        predicate("operands_in_registers", _operands_in_registers),
        predicate("no_replica", _no_replica),
        predicate("dtypes", _dtypes),
        predicate("alpha_beta", _alpha_beta),
    ],
)
def lower(op, ctx):
    args = bind(op)
    regions = _operands(op, ctx)
    beta = _number(args["beta"], 0.0, "beta")
    threads = Threads(ctx.symbols)
    try:
        ops = {
            "D": _Operand("D", regions["D"], False, threads),
            "A": _Operand("A", regions["A"], _true(args["transpose_A"]), threads),
            "B": _Operand("B", regions["B"], _true(args["transpose_B"]), threads),
        }
        if beta == 1.0:
            ops["C"] = _Operand("C", regions["C"], False, threads)
    except TilecError as err:
        raise err.with_span(op.span)
    M, N, K = ops["D"].rows, ops["D"].cols, ops["A"].cols
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N)}
    for name, want in shapes.items():
        if name in ops and (ops[name].rows, ops[name].cols) != want:
            have = (ops[name].rows, ops[name].cols)
            raise TilecError(
                f"gemm: D is {M}x{N} and A is {M}x{K} (as used), so {name} must be {want[0]}x{want[1]}, "
                f"but it is {have[0]}x{have[1]}" + (" after transposing" if ops[name].transposed else ""),
                op.span,
            )
    if M % 16 or N % 8 or K % 8:
        raise Decline(f"the shape M={M}, N={N}, K={K} does not tile into m16n8k8 atoms (M % 16, N % 8, K % 8 must be 0)")
    k = 16 if K % 16 == 0 else 8
    counts = (M // 16, N // 8, K // k)
    slots = _group(ops, k, counts)
    return _nest(ctx, ops, k, counts, slots, beta)


def _true(e: Optional[ir.Expr]) -> bool:
    return isinstance(e, ir.Bool) and e.value


def _nest(ctx, ops: dict, k: int, counts: tuple, slots: dict, beta: float) -> list:
    mt, nt, kt = counts
    dtype = ops["A"].region.dtype
    names = {}
    for var, n in (("m", mt), ("n", nt), ("k", kt)):
        names[var] = ctx.fresh(var) if n > 1 else None
    m, n, kk = (ir.Name(names[v]) if names[v] else ir.Int(0) for v in ("m", "n", "k"))

    def frag(name, layout, count, tile):
        out = []
        for i in range(count):
            r, c = layout(i, 0)
            out.append(ops[name].element(add(tile[0], r), add(tile[1], c)))
        return ir.TupleExpr(tuple(out))

    acc_tile = (mul(m, 16), mul(n, 8))
    d = frag("D", _acc, 4, acc_tile)
    a = frag("A", _a, k // 2, (mul(m, 16), mul(kk, k)))
    b = frag("B", _b, k // 4, (mul(kk, k), mul(n, 8)))
    mma = ir.ExprStmt(ir.Call("ptx.mma", (ir.Str(f"m16n8k{k}"), d, a, b, d), (ir.Keyword("dtype", ir.DTypeLit(dtype)),)))
    body = [mma] if names["k"] is None else [_loop(names["k"], kt, [mma])]
    init = []
    if beta == 0.0:
        init = [assign(x, ir.Float(0.0)) for x in d.items]
    elif not _in_place(ops, slots):
        c = frag("C", _acc, 4, acc_tile)
        init = [assign(x, y) for x, y in zip(d.items, c.items)]
    body = init + body
    if names["n"] is not None:
        body = [_loop(names["n"], nt, body)]
    if names["m"] is not None:
        body = [_loop(names["m"], mt, body)]
    return body


def _in_place(ops: dict, slots: dict) -> bool:
    """Whether C is D's own registers in every tile (then D starts as C)."""
    if ops["C"].region.buffer.storage != ops["D"].region.buffer.storage:
        return False
    return all(slots["D", m, n] == slots["C", m, n] for (name, m, n) in slots if name == "D")


def _loop(var: str, n: int, body: list) -> ir.For:
    return ir.For(var, "unroll", ir.Int(0), ir.Int(n), ir.Int(1), tuple(body))

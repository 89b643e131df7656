"""copy of a wgmma accumulator fragment from registers to shared memory ->
stmatrix, at warpgroup scope ("wgmma_frag").

The epilogue of a Hopper GEMM holds its (cast) accumulator in the wgmma
fragment layout over a warpgroup (see gemm_async/wgmma.py): in each 64-row
block, warp w holds rows 16 w ... 16 w + 15, and each 8x8 piece of those
rows is spread over the warp exactly as one `stmatrix.m8n8` matrix (lane l
holds row l / 4, columns 2 (l % 4) and + 1).  Values 8 j ... 8 j + 7 of a
thread are the four matrices of columns 16 j ... 16 j + 15 (rows 0-7 and
8-15 of the warp's band, then the next 8 columns), so one `stmatrix.x4`
per warp stores a 16x16 block where plain stores would need four 32-bit
stores per thread.  Lane l gives the address of row l % 8 of matrix l / 8.

The warp-scope `ldstmatrix` variant handles fragments of one warp; this one
takes the warpgroup-wide layout a wgmma accumulator has.  The register side
is checked element by element against the fragment (the same check
gemm_async's wgmma lowering makes), the shared side must keep each matrix
row a contiguous, 16-byte aligned run along its last dim (swizzled layouts
qualify: they permute whole 16-byte chunks).  Anything else declines to the
plain `ldst` variant.
"""
from __future__ import annotations

from typing import List

from tilec.compiler import ir
from tilec.passes.dispatch import Decline, predicate, register
from tilec.passes.dispatch.copy.operands import copy_operands
from tilec.passes.dispatch.wgmma_fragment import MMA_M, WHOLE_WARPGROUP, fragment_elements
from tilec.passes.dispatch.build import add, floordiv, located, mod, mul
from tilec.passes.dispatch.per_kernel import last_kernel
from tilec.passes.dispatch.threads import Threads
from tilec.passes.dispatch.vectors import Divisors, vector_ok

ROWS = 8  # a matrix row: 8 16-bit elements, 16 bytes


def _registers_to_shared(op, ctx):
    dst, src = copy_operands(op, ctx)
    if dst.buffer.is_shared and src.is_local:
        return True
    return False, f"stmatrix stores registers to shared memory, not {src.scope} to {dst.scope}"


def _half_elements(op, ctx):
    dst, _ = copy_operands(op, ctx)
    if dst.dtype in ("f16", "bf16"):
        return True
    return False, f"stmatrix stores 16-bit elements (f16, bf16), not {dst.dtype}"


def _fragment_shape(op, ctx):
    _, src = copy_operands(op, ctx)
    if len(src.dims) != 2 or any(e != 1 for d, e in enumerate(src.extents) if d not in src.dims):
        return False, f"the fragment '{src.name}' must be a 2-D region, got extents {src.extents}"
    rows, cols = src.shape
    if rows % MMA_M or cols % ROWS:
        return False, f"a wgmma fragment region is 64m x 8n, got {rows} x {cols}"
    return True


@register(
    "copy",
    families=("hopper", "blackwell"),
    name="wgmma_frag",
    priority=20,
    when=[
        WHOLE_WARPGROUP,
        predicate("registers_to_shared", _registers_to_shared),
        predicate("half_elements", _half_elements),
        predicate("fragment_shape", _fragment_shape),
    ],
)
def lower(op, ctx) -> List[ir.Stmt]:
    smem, frag = copy_operands(op, ctx)
    rows, cols = frag.shape
    if not vector_ok(smem, ROWS, Divisors(ctx.symbols)):
        raise Decline(
            f"the rows of '{smem.name}' are not contiguous, 16-byte aligned runs of 8 elements along its last dim"
        )
    threads = Threads(ctx.symbols)
    span = op.span
    values = fragment_elements(frag, threads, [(MMA_M * i, 0) for i in range(rows // MMA_M)], cols, "the fragment", span)
    # built at the call: the lane's address arithmetic, the kernel's (`_lane_origins`), placed there once per span
    name = ir.Name(smem.name, span=span)
    stmts = []
    for i, j, num, row, col, kwargs in _lane_origins(threads, rows, cols):
        coord = tuple(located(c, span) for c in smem.coordinate([row, col]))
        addr = ir.Method(name, "ptr_to", (ir.ListExpr(coord, span=span),), span=span)
        regs = ir.TupleExpr(tuple(values[i][4 * j: 4 * j + 2 * num]), span=span)
        kwargs = tuple(located(k, span) for k in kwargs)
        stmts.append(ir.ExprStmt(ir.Call("ptx.stmatrix", (regs, addr), kwargs, span=span), span=span))
    return stmts


_ORIGINS = last_kernel(lambda syms: {})
"""(rows, cols) -> `_lane_origins`, per kernel."""


def _lane_origins(threads: Threads, rows: int, cols: int) -> list:
    """(block i, column pair j, matrices, row, column, keywords) of each stmatrix of a
    rows x cols fragment: the (region) row and column the lane points at,
    expressions of its lane and warp, which are the kernel's; so they are
    built (and folded) once per kernel and fragment shape, not by every
    copy (an epilogue copies its fragment once per column block)."""
    table = _ORIGINS(threads.syms)
    found = table.get((rows, cols))
    if found is not None:
        return found
    lane = threads.require(threads.axis("laneid"), "the lane")
    warp = threads.require(threads.axis("wid_in_wg"), "the warp in its warpgroup")
    # what a matrix's lane address adds to its block's and its column's, by matrices per
    # instruction: the same for every instruction, so built once
    warp_rows, lane_parts = mul(warp, 16), {}
    for num in {4 if j + 1 < cols // ROWS else 2 for j in range(0, cols // ROWS, 2)}:
        # lane l points at row l % 8 of matrix q = (l / 8) % num: rows 8 (q % 2) of the
        # warp's 16, columns 8 (j + q / 2)
        q = floordiv(lane, ROWS) if num == 4 else mod(floordiv(lane, ROWS), 2)
        lane_parts[num] = (add(mul(mod(q, 2), ROWS), mod(lane, ROWS)),
                           mul(floordiv(q, 2), ROWS) if num == 4 else None,
                           (ir.Keyword("num", ir.Int(num)),))
    found = []
    for i in range(rows // MMA_M):
        band = add(ir.Int(MMA_M * i), warp_rows)
        for j in range(0, cols // ROWS, 2):
            num = 4 if j + 1 < cols // ROWS else 2
            lane_row, lane_col, kwargs = lane_parts[num]
            col = add(ir.Int(ROWS * j), lane_col) if num == 4 else ir.Int(ROWS * j)
            found.append((i, j, num, add(band, lane_row), col, kwargs))
    table[(rows, cols)] = found
    return found

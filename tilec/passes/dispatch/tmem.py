"""Tensor-memory operands: addresses (`lane << 16 | column`, columns of 32
bits) from a placed region, the 4-warp router replica, and the cta-pair
check, shared by the tcgen05 mma, cp and ld lowerings.
"""
from __future__ import annotations

from math import prod
from typing import Optional

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import TileLayout
from tilec.compiler.printer import print_expr
from tilec.compiler.symbols import Buffer
from tilec.passes.dispatch.build import add, mul
from tilec.passes.dispatch.placement import Placed
from tilec.passes.dispatch.registry import DispatchContext


ROUTER = (4, 32, "TLane")
"""The replica R[4 : 32@TLane]: a 32-lane tile copied into every warp's
quarter of tensor memory, as tcgen05.cp.warpx4 writes it and as the tensor
core reads scale factors."""


def routed(layout: TileLayout) -> bool:
    rep = layout.replica
    return len(rep) == 1 and (rep[0].extent, rep[0].stride, rep[0].axis) == ROUTER


def router_error(layout: TileLayout) -> str:
    return f"requires R[4:32@TLane] on tmem, got [{', '.join(str(it) for it in layout.replica)}]"


def tmem_base(buf: Buffer) -> ir.Expr:
    """The tensor-memory address the buffer was declared at (its
    `allocated_addr`), the origin of every address computed here."""
    if buf.allocated_addr is None:
        raise TilecError(f"tensor-memory buffer '{buf.name}' has no allocated_addr")
    return buf.allocated_addr


def tmem_columns(p: Placed, what: str) -> Optional[ir.Expr]:
    """The run-time part of a tensor-memory region's start in 32-bit
    columns; run-time lanes are an error."""
    name = f"{what} '{p.region.name}'"
    if p.dynamic.get("TLane"):
        raise TilecError(f"{name}: the lanes of a tensor-memory tile must be known at compile time")
    bits = DTYPES[p.region.dtype].bits
    out = None
    for start, stride in p.dynamic.get("TCol", ()):
        if stride * bits % 32:
            raise TilecError(
                f"{name}: the run-time start '{print_expr(start)}' moves the tile by part of a 32-bit column"
            )
        term = mul(start, stride * bits // 32)
        out = term if out is None else add(out, term)
    return out


def tmem_address(base: ir.Expr, lane: int, column: int, dynamic: Optional[ir.Expr] = None) -> ir.Expr:
    """`base` + lane << 16 + column (32-bit columns) + the run-time columns."""
    out = add(base, (lane << 16) + column)
    return out if dynamic is None else add(out, dynamic)


def column_bits(elements: int, dtype: str, name: str) -> int:
    """A TCol offset (in elements of `dtype`) as 32-bit columns; an error
    when it falls inside a column."""
    bits = elements * DTYPES[dtype].bits
    if bits % 32:
        raise TilecError(
            f"{name}: column offset {elements} of {dtype} elements is inside a 32-bit tensor-memory column"
        )
    return bits // 32


def check_cta_pair(cta_group: int, ctx: DispatchContext, what: str) -> None:
    """cta_group 2 runs on a pair of CTAs of one cluster."""
    if cta_group == 2 and prod(ctx.symbols.launch.cluster) % 2:
        raise TilecError(
            f"{what} with cta_group=2 runs on a pair of CTAs of a cluster, but the kernel's cluster is "
            f"{ctx.symbols.launch.cluster} (declare cta_id_in_cluster([2]))"
        )

"""What the tcgen05 tests check lowered kernels against: a model of what the
hardware reads, written from the PTX ISA independently of the lowering.

- `canonical_lit` writes the shared layouts the tests declare (the canonical
  K-major / MN-major atom grids, in either buffer orientation).
- `hw_smem_bytes` is the byte a matrix descriptor makes the tensor core read
  for element (i, k) of an instruction tile: the canonical layout's address
  from the descriptor's LBO/SBO, then the swizzle XOR of address bits
  [7, 7 + b) into [4, 4 + b) [PTX "Shared memory descriptor", "Canonical
  layouts"].  Tests compare it with where the buffer's layout puts the
  element (`tilec.compiler.layout.apply`).
- `compile_tile` runs the default pipeline and assembles the PTX for sm_100a
  (any ptxas warning fails), returning the final IR too, whose intrinsic
  calls carry the operands the tests decode.
"""
from __future__ import annotations

import re

from tilec.compiler import ir, visit
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout_ir import to_layout
from tilec.compiler.mma_desc import SWIZZLE_WIDTH_BYTES
from tilec.pipeline import compile_source
from tilec.grammar.parser import parse
from tilec.runtime.assemble import assemble


def compile_tile(text: str, target: str = "sm_100a"):
    """(final IR, PTX) of `text`; the PTX has passed ptxas with no warning."""
    result = compile_source(text, "case.tile", target=target)
    assemble(result.ptx, target)
    return result.module, result.ptx


def buffer_layouts(text: str) -> dict:
    """name -> (TileLayout, shape) of every allocation of the kernel text with a layout literal."""
    out = {}
    kernel = parse(text, "case.tile").kernels[0]
    for node in visit.walk(kernel):
        value = node.value if isinstance(node, ir.Assign) else None
        if isinstance(value, ir.Call) and value.func in ("alloc", "decl_buffer"):
            shape = tuple(i.value for i in node.value.args[0].items)
            lit = next((k.value for k in node.value.kwargs if k.name == "layout"), None)
            if isinstance(lit, ir.LayoutLit):
                out[node.targets[0].id] = (to_layout(lit, shape), shape)
    return out


def calls(module: ir.Module, func: str) -> list:
    return [n for n in visit.walk(module) if isinstance(n, ir.Call) and n.func == func]


def kwargs(call: ir.Call) -> dict:
    out = {}
    for k in call.kwargs:
        v = k.value
        out[k.name] = v.name if isinstance(v, ir.DTypeLit) else v.value
    return out


def plus(e: ir.Expr) -> tuple:
    """`name + k` (or `name`) as (name, k)."""
    if isinstance(e, ir.Name):
        return e.id, 0
    assert isinstance(e, ir.Binary) and e.op == "+" and isinstance(e.lhs, ir.Name) and isinstance(e.rhs, ir.Int), e
    return e.lhs.id, e.rhs.value


def assignments(module: ir.Module) -> dict:
    return {
        n.targets[0].id: n.value
        for n in visit.walk(module)
        if isinstance(n, ir.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ir.Name)
    }


def ptx_lines(ptx: str, head: str) -> list:
    return [l.strip() for l in ptx.splitlines() if l.strip().startswith(head)]


def immediates(line: str) -> list:
    return [int(x, 16) for x in re.findall(r"0x[0-9a-f]+", line)]


def atom_width(dtype: str, mode: int) -> int:
    """Elements in one atom row: the swizzle width (16 bytes unswizzled)."""
    return SWIZZLE_WIDTH_BYTES[mode] * 8 // DTYPES[dtype].bits


def canonical_lit(dtype: str, mode: int, mn: int, k: int, major: str, mn_first: bool) -> str:
    """The layout literal of an MN x K operand stored `major`-major (the atoms
    of the hardware's canonical layout, column of atoms along MN first), for
    a buffer of shape (mn, k) when `mn_first`, else (k, mn)."""
    w = atom_width(dtype, mode)
    assert (k if major == "K" else mn) % w == 0, "the contiguous extent must be whole atom rows"
    if major == "K":  # element (m, kk) at (kk / w) * mn * w + m * w + kk % w
        mn_it, k_it = [(mn, w)], [(k // w, mn * w), (w, 1)]
    else:  # element (m, kk) at (m / w) * k * w + m % w + kk * w
        mn_it, k_it = [(mn // w, k * w), (w, 1)], [(k, w)]
    its = [it for it in (mn_it + k_it if mn_first else k_it + mn_it) if it[0] > 1]
    body = f"S[({', '.join(str(e) for e, _ in its)}) : ({', '.join(str(s) for _, s in its)})]"
    if mode == 0:
        return body
    per_16b = (128 // DTYPES[dtype].bits).bit_length() - 1
    return f"SW[{per_16b}, {mode}, 3] * {body}"


def hw_smem_bytes(desc, start: int, major: str, dtype: str, i, k):
    """Byte offsets the tensor core reads for elements (i, k) of a tile whose
    descriptor is `desc` (a decoded `SmemDescriptor`) with start byte
    `start` (relative to a buffer aligned to the swizzle pattern)."""
    bits = DTYPES[dtype].bits
    width = SWIZZLE_WIDTH_BYTES[desc.swizzle]
    if major == "K":
        kb = k * bits // 8
        row = (i // 8) * desc.sbo + (i % 8) * width
        col = kb if desc.swizzle else (kb // 16) * desc.lbo + kb % 16
        addr = start + row + col
    else:
        ib = i * bits // 8
        if desc.swizzle:
            addr = start + (ib // width) * desc.lbo + ib % width + (k // 8) * desc.sbo + (k % 8) * width
        else:
            addr = start + (ib // 16) * desc.sbo + ib % 16 + (k // 8) * desc.lbo + (k % 8) * 16
    b = {16: 0, 32: 1, 64: 2, 128: 3}[width]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)

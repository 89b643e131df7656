"""The verifier: is this module a well-formed program for this target?

The pass manager runs it after `fold-constants` (so mistakes are reported
before any lowering) and, with `--verify-each`, after every later pass (so a
pass that writes a malformed program is caught where it does so).  Most facts come from the analysis
every later pass also relies on, `tilec.compiler.symbols`: names, the kind
and type of each, builtin and intrinsic signatures, buffer declarations,
launch ids.  On top of that it checks what no single pass owns:

- every intrinsic exists on the target (`ptx.tcgen05.*` on sm_90a is an
  error here, not a ptxas failure later);
- every layout of a buffer is a layout literal that means something and
  fits its shape; a register array's is on `m` and thread axes and fits
  a thread's local memory;
- tile-primitive operands: regions inside their buffers, a copy's two sides
  of equal dtype, and the non-unit extents of copy and cast operands equal.

The module is checked as it will be compiled: consts (with the `-D`
values), meta values and inline helpers substituted, asserts checked,
schedulers lowered, constants folded -- the front passes have run, and the
verifier runs none itself (it reads IR; it does not transform it).  So a
mistake inside an inline helper is reported at its call's expansion, and a
helper that is never called is not checked, as in Python.
"""
from __future__ import annotations

from typing import Optional

from tilec.compiler import intrinsics, ir, visit
from tilec.compiler.builtins import tile_primitive
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout import storage_size
from tilec.compiler.region import Region
from tilec.compiler.symbols import Analyses, Buffer, KernelSymbols
from tilec.compiler.targets import Target

_SAME_SHAPE = ("copy", "copy_async", "cast")
_SAME_DTYPE = ("copy", "copy_async")


def verify(module: ir.Module, target: Target, analyses: Optional[Analyses] = None) -> None:
    """Raise a located `TilecError` for the first problem found in a module
    the front passes (through `fold-constants`) have run on.  The kernels'
    analyses are made in `analyses` (the compile's, kept for the passes
    after) when given."""
    analyses = analyses or Analyses()
    seen = {}
    for k in module.kernels:
        if k.name in seen:
            raise TilecError(f"kernel '{k.name}' is defined twice (first on line {seen[k.name]})", k.span)
        seen[k.name] = k.span.line if k.span else "?"
        syms = analyses.of(k, module, target)
        for buf in syms.buffers.values():
            _check_layout(buf)
        for node in visit.walk(k):
            kind = type(node)  # (node classes have no subclasses)
            if kind is ir.Call:
                _check_call(node, syms, target)
            elif kind is ir.Index:
                _check_constant_index(node, syms)


def _check_constant_index(e: ir.Index, syms: KernelSymbols) -> None:
    """An element index that is a constant lies inside its dimension: an
    address computed from one outside would be another element's, or wrap
    past 2**64 (`A[2**62]` on an f32 buffer stores to `A[0]`)."""
    buf = syms.buffers.get(e.base.id) if isinstance(e.base, ir.Name) else None
    if buf is None or len(e.indices) != len(buf.shape):
        return
    for d, (i, extent) in enumerate(zip(e.indices, buf.shape)):
        if isinstance(i, ir.Int) and isinstance(extent, int) and not 0 <= i.value < extent:
            raise TilecError(
                f"index {i.value} is outside dimension {d} of '{buf.name}' (extent {extent})", i.span or e.span
            )


MAX_LOCAL_BYTES = 512 * 1024
"""The local memory one thread can address (CUDA's per-thread limit): a
register array larger than this cannot exist, not even spilled."""

_TMEM_AXES = ("TLane", "TCol")


def _check_layout(buf: Buffer) -> None:
    """The layout is a layout that fits the shape; a register array's uses
    only `m` and thread axes and fits in a thread's local memory."""
    if buf.scope != "local":
        if buf.layout is not None:
            buf.tile_layout  # raises unless the layout means something and fits the shape
        return
    layout = buf.tile_layout
    axes = [it.axis for it in layout.shard + layout.replica] + [name for name, _ in layout.offset]
    for axis in axes:
        if axis in _TMEM_AXES:
            raise TilecError(
                f"the layout of register array '{buf.name}' places elements on tensor-memory axis "
                f"'{axis}'; registers are laid out on m and thread axes",
                buf.layout.span or buf.span,
            )
    nbytes = storage_size(layout) * buf.elem_bytes
    if buf.is_root and nbytes > MAX_LOCAL_BYTES:
        raise TilecError(
            f"register array '{buf.name}' needs {nbytes} bytes per thread, more than the "
            f"{MAX_LOCAL_BYTES // 1024} KiB of local memory a thread can have",
            buf.span,
        )


def _check_call(call: ir.Call, syms: KernelSymbols, target: Target) -> None:
    if intrinsics.is_intrinsic_name(call.func):
        intrinsics.lookup(call.func, call.span).check_target(target, call.span)
        return
    op = tile_primitive(call.func)
    if op is None:
        return
    regions = [Region.read(arg, syms.buffer_of(arg)) for arg in call.args if _names_buffer(arg, syms)]
    # `copy(dst, src, oob="zero")` reads zeros where src runs past its
    # tensor's end (dispatch checks the rest of what that needs)
    oob_source = op == "copy" and any(kw.name == "oob" for kw in call.kwargs)
    for i, r in enumerate(regions):
        # TMA clips a copy_async region at a global tensor's edge (fill on
        # load, skip on store); dispatch refuses it for variants that do not.
        r.check_bounds(past_end=op == "copy_async" or oob_source and i == 1)
    extents = [None if None in r.extents else list(r.extents) for r in regions]
    if op in _SAME_DTYPE and len(regions) >= 2:
        dst, src = (r.buffer for r in regions[:2])
        if dst.dtype != src.dtype:
            raise TilecError(
                f"{call.func}: '{dst.name}' is {dst.dtype} but '{src.name}' is {src.dtype} "
                "(use cast to convert)",
                call.span,
            )
    if op in _SAME_SHAPE and len(extents) >= 2 and None not in extents[:2]:
        dst, src = ([e for e in ext if e != 1] for ext in extents[:2])
        if dst != src:
            raise TilecError(
                f"{call.func}: the destination region has extents {tuple(extents[0])} but the "
                f"source region {tuple(extents[1])}",
                call.span,
            )


def _names_buffer(arg: ir.Expr, syms: KernelSymbols) -> bool:
    base = arg.base if isinstance(arg, ir.Index) else arg
    if not isinstance(base, ir.Name):
        return False
    sym = syms.symbols.get(base.id)
    return sym is not None and sym.buffer is not None

"""The kernel.json dict (docs/internals.md): what the runtime needs to launch
each kernel -- parameter order and kinds, grid/block/cluster, dynamic shared
memory, and the tensor maps to encode on the host."""
from __future__ import annotations

from typing import List

import tilec
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.runtime_dims import MAGIC_MUL, MAGIC_SHIFT, SM_COUNT, SM_COUNT_PARAM, to_json
from tilec.compiler.symbols import KernelSymbols
from tilec.compiler.targets import Target


def module_meta(target: Target, kernels: List[dict]) -> dict:
    return {"tilec_version": tilec.__version__, "target": target.name, "kernels": kernels}


def kernel_meta(syms: KernelSymbols) -> dict:
    k = syms.kernel
    params = []
    for p in k.params:
        if p.shape is None:
            params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype})
        else:
            shape = list(syms.buffer(p.name).shape)
            params.append({"name": p.name, "kind": "buffer", "dtype": p.dtype, "shape": shape})
    maps = []
    for name, stmt in syms.tensormaps.items():
        entry = tensormap_entry(stmt)
        params.append({"name": name, "kind": "tensormap", "tensor": entry["tensor"]})
        maps.append(entry)
    for dim in syms.dims.values():
        params.append({"name": dim.name, "kind": "dim", "dtype": "i32", "tensor": dim.param, "axis": dim.axis})
    if syms.uses_sm_count:
        params.append({"name": SM_COUNT_PARAM, "kind": "device", "dtype": "i32", "value": [SM_COUNT]})
    for div in syms.divisors.values():
        d = to_json(div.expr)
        params.append({"name": div.mul_param, "kind": "device", "dtype": "u32", "value": [MAGIC_MUL, d]})
        params.append({"name": div.shift_param, "kind": "device", "dtype": "u32", "value": [MAGIC_SHIFT, d]})
    launch = syms.launch
    out = {
        "name": k.name,
        "entry": k.name,
        "params": params,
        "grid": [g if isinstance(g, int) else to_json(g) for g in launch.grid],
        "block": list(launch.block),
        "cluster": list(launch.cluster),
        "dynamic_smem": syms.dynamic_smem,
        "tensormaps": maps,
    }
    if syms.assumes:
        out["assumes"] = [{"cond": to_json(cond), "message": message} for cond, message in syms.assumes]
    if syms.waits_grid_dependency:
        # the kernel executes griddepcontrol.wait: safe to launch with
        # programmatic stream serialization (only such a kernel is)
        out["grid_dependency_wait"] = True
    return out


def tensormap_entry(stmt: ir.TensorMap) -> dict:
    """`tensormap NAME = tensormap(A, f16, dims=..., ...)` as its kernel.json
    entry: the tensor, the dtype, the rank, then every keyword as written."""
    call = stmt.value
    if len(call.args) != 2 or not isinstance(call.args[0], ir.Name) or not isinstance(call.args[1], ir.DTypeLit):
        raise TilecError("tensormap(...) takes the tensor and its dtype, then keywords", call.span)
    entry = {"name": stmt.name, "tensor": call.args[0].id, "dtype": call.args[1].name}
    fields = {kw.name: _json(kw.value, kw.name) for kw in call.kwargs}
    if "dims" not in fields:
        raise TilecError("tensormap(...) needs dims=", call.span)
    entry["rank"] = len(fields["dims"])
    entry.update(fields)
    return entry


def _json(e: ir.Expr, what: str):
    if isinstance(e, (ir.Int, ir.Str, ir.Bool)):
        return e.value
    if isinstance(e, (ir.TupleExpr, ir.ListExpr)):
        return [_json(i, what) for i in e.items]
    if what in ("dims", "strides") and isinstance(e, (ir.Name, ir.Binary)):
        return to_json(e)  # an expression of runtime extents, evaluated at launch
    raise TilecError(f"tensormap '{what}' must be a literal", e.span)

"""Dispatch: lowering tile primitives through registered variants.

A variant lives in `tilec/passes/dispatch/<op>/<variant>.py` and registers
itself with the decorator:

    from tilec.passes.dispatch import predicate, register

    @register("gemm", families=("ampere", "hopper", "blackwell"), name="mma_sync",
              priority=10, when=[predicate("warp_scope", lambda op, ctx: op.scope == "warp")])
    def lower(op, ctx):
        return [...]   # ir.Stmt list replacing the call, or raise Decline(reason)

`load_variants(op)` imports every module under `<op>/` the first time a call
of `op` is dispatched, so that module is all a new variant needs (and a
compile loads only the variants of the primitives it uses).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

from tilec.passes.dispatch.registry import (
    FAMILIES,
    REGISTRY,
    Decline,
    DispatchContext,
    NameGen,
    Predicate,
    Registry,
    Selection,
    TileOp,
    Variant,
    predicate,
    register,
)


@functools.lru_cache(maxsize=None)
def load_variants(op: str) -> None:
    """Import every module of the package of tile primitive `op`, once per
    process (walking a package lists directories, which every dispatched call
    would otherwise repeat).  A variant registers for the primitive its
    package is named after and imports no other primitive's variants, so
    the variants of `op` are then all registered, in the order of a load of
    every package; loading only the primitives a compile dispatches spares a
    small kernel's driver the import of some forty modules it never runs."""
    package = importlib.import_module(f"{__name__}.{op}")
    for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
        importlib.import_module(info.name)


def select(op: TileOp, ctx: DispatchContext) -> Selection:
    """`REGISTRY.select` with the variant modules of `op` loaded."""
    load_variants(op.name)
    return REGISTRY.select(op, ctx)


__all__ = [
    "FAMILIES",
    "REGISTRY",
    "Decline",
    "DispatchContext",
    "NameGen",
    "Predicate",
    "Registry",
    "Selection",
    "TileOp",
    "Variant",
    "load_variants",
    "predicate",
    "register",
    "select",
]

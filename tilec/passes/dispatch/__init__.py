"""Dispatch: lowering tile primitives through registered variants.

A variant lives in `tilec/passes/dispatch/<op>/<variant>.py` and registers
itself with the decorator:

    from tilec.passes.dispatch import predicate, register

    @register("gemm", families=("ampere", "hopper", "blackwell"), name="mma_sync",
              priority=10, when=[predicate("warp_scope", lambda op, ctx: op.scope == "warp")])
    def lower(op, ctx):
        return [...]   # ir.Stmt list replacing the call, or raise Decline(reason)

`load_variants` imports every module under this package, so that module is
all a new variant needs.
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
def load_variants() -> None:
    """Import every variant module, once per process (walking the package
    lists directories, which every dispatched call would otherwise repeat)."""
    for info in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        importlib.import_module(info.name)


def select(op: TileOp, ctx: DispatchContext) -> Selection:
    """`REGISTRY.select` with every variant module loaded."""
    load_variants()
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

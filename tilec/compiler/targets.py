"""Compilation targets.

A target fixes the PTX ISA version and `.target` line, and the feature family
that dispatch variants and the intrinsic table check against."""
from __future__ import annotations


from tilec.compiler import records
from tilec.compiler.diagnostics import TilecError


@records.frozen
class Target:
    name: str  # "sm_80", "sm_90a", "sm_100a"
    sm: int  # 80, 90, 100
    ptx_version: str  # the `.version` line
    family: str  # "ampere", "hopper", "blackwell"
    max_smem: int  # shared memory one block may use, static and dynamic (the opt-in maximum)
    max_static_smem: int  # of which static (`.shared`): ptxas' "uses too much shared data" limit

    def at_least(self, other: "str | Target") -> bool:
        """True when this target has every instruction of `other` (sm_90a does
        not have sm_100a's tcgen05; sm_100a has sm_90a's TMA but not wgmma —
        intrinsics that are family-specific say so in their own table row)."""
        other = TARGETS[other] if isinstance(other, str) else other
        return self.sm >= other.sm

    def __str__(self) -> str:
        return self.name


TARGETS = {
    "sm_80": Target("sm_80", 80, "8.0", "ampere", 163 * 1024, 48 * 1024),
    "sm_90a": Target("sm_90a", 90, "8.4", "hopper", 227 * 1024, 227 * 1024),  # 8.4: wgmma with mixed integer types
    "sm_100a": Target("sm_100a", 100, "8.7", "blackwell", 227 * 1024, 227 * 1024),
}

DEFAULT_TARGET = "sm_90a"


def target(name: str, span=None) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise TilecError(
            f"unknown target '{name}' (expected one of {', '.join(TARGETS)})", span
        ) from None

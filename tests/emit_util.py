"""Shared helpers of the emitter tests: compile .tile text down to PTX the
way the pipeline's front and back end do, assemble it (any ptxas warning
fails), and run it in the PTX simulator."""
from __future__ import annotations

import numpy as np

from ptx_sim import Kernel
from tilec.compiler.targets import TARGETS
from tilec.grammar.parser import parse
from tilec.passes.emit_ptx import emit_module
from tilec.passes.expand_inline import expand_module
from tilec.compiler.fold import fold
from tilec.runtime.assemble import assemble


def lower(text: str, defines=None, filename: str = "test.tile"):
    """Parsed, expanded and folded: the IR emit-ptx receives for kernels
    written without tile primitives."""
    return fold(expand_module(parse(text, filename), defines or {}))


def build(text: str, target: str = "sm_90a", defines=None, filename: str = "test.tile"):
    """(ptx, meta) for `text`, after checking that ptxas accepts the PTX."""
    ptx, meta = emit_module(lower(text, defines, filename), TARGETS[target])
    assemble(ptx, target)
    return ptx, meta


def run(text: str, args: dict, defines=None, kernel: str = None, ctas=None):
    """Build for sm_90a and simulate: `args` maps parameter names to numpy
    arrays (updated in place) or numbers.  Returns the PTX."""
    ptx, meta = build(text, defines=defines)
    entry = meta["kernels"][0] if kernel is None else next(k for k in meta["kernels"] if k["name"] == kernel)
    Kernel(ptx, entry["name"]).run(args, grid=entry["grid"], ctas=ctas, dynamic_smem=entry["dynamic_smem"],
                                   cluster=entry.get("cluster"))
    return ptx


def zeros(n, dtype=np.int32):
    return np.zeros(n, dtype)

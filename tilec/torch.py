"""tilec kernels as PyTorch custom operators.

``tilec.torch.custom_op(kernel, mutates=("D",))`` registers a compiled
kernel as a `torch.library` operator (``torch.ops.tilec.<name>``) with a
fake implementation, so that ``torch.compile(fullgraph=True)`` traces
through it instead of breaking the graph, and CUDA graph capture records
its launch.  The operator takes the kernel's caller arguments (buffers as
tensors, scalars as int or float), returns nothing, and writes the buffers
named in `mutates` in place; torch needs that list to order the op against
the tensors' other readers and writers.  The launch goes to torch's current
stream (the capture stream under CUDA graph capture), with the kernel's
grid, through the same fast path as calling the kernel.

torch is imported here only: importing tilec never imports it.
"""
from __future__ import annotations

import threading

import torch

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.runtime.launch import Kernel, caller_params

_registered: dict[str, Kernel] = {}
_libraries: dict[str, torch.library.Library] = {}
_lock = threading.Lock()


def schema(kernel: Kernel, mutates=()) -> str:
    """The operator schema of `kernel`: one argument per caller parameter,
    the mutated buffers marked, no result."""
    caller = caller_params(kernel.params)
    names = {p["name"] for p in caller if p["kind"] == "buffer"}
    unknown = [m for m in mutates if m not in names]
    if unknown:
        raise TilecError(
            f"kernel '{kernel.name}': mutates names {unknown}, which are not buffer parameters "
            f"(it has {sorted(names)})"
        )
    args = []
    for i, p in enumerate(caller):
        if p["kind"] == "buffer":
            alias = f"(a{i}!)" if p["name"] in mutates else ""
            args.append(f"Tensor{alias} {p['name']}")
        else:
            args.append(f"{'float' if DTYPES[p['dtype']].kind == 'float' else 'int'} {p['name']}")
    return f"({', '.join(args)}) -> ()"


def custom_op(kernel: Kernel, mutates=None, *, name: str | None = None, namespace: str = "tilec"):
    """Register `kernel` as ``torch.ops.<namespace>.<name>`` (name: the
    kernel's) and return the operator.  `mutates`: the buffer parameters the
    kernel writes (None: every buffer, the safe assumption).  Registering
    the same kernel again returns the same operator; another kernel under a
    taken name is an error."""
    name = name or kernel.name
    if mutates is None:
        mutates = tuple(p["name"] for p in kernel.params if p["kind"] == "buffer")
    text = schema(kernel, tuple(mutates))
    qualified = f"{namespace}::{name}"
    with _lock:
        if qualified in _registered:
            if _registered[qualified] is not kernel:
                raise TilecError(f"the operator {qualified} is already registered for another kernel")
            return getattr(getattr(torch.ops, namespace), name)
        library = _libraries.get(namespace)
        if library is None:
            library = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
        library.define(name + text)

        def launch(*args):
            kernel(*args)

        def fake(*args):
            return None

        library.impl(name, launch, "CUDA")
        torch.library.register_fake(qualified, fake, lib=library)
        _registered[qualified] = kernel
    return getattr(getattr(torch.ops, namespace), name)

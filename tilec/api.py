"""`tilec.compile`: source (or a path) in, a launchable module out.

This is the one place where the compiler meets the runtime: it runs the
pipeline, or takes the result from the on-disk cache, and wraps the PTX and
its kernel.json in a `CompiledModule`.  Compiling touches no GPU; the module
loads onto the device when a kernel is first asked for."""
from __future__ import annotations

import os
from typing import Optional, Union

from tilec.compiler import source, targets
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.runtime import cache
from tilec.runtime.module import CompiledModule

PathOrSource = Union[str, "os.PathLike[str]"]


def read_source(path_or_source: PathOrSource) -> tuple[str, str]:
    """(text, filename).  A path-like, or a one-line string naming a .tile
    file, is read from disk (it must be UTF-8); any other string is the
    source itself."""
    if isinstance(path_or_source, os.PathLike) or (
        isinstance(path_or_source, str) and "\n" not in path_or_source and path_or_source.endswith(".tile")
    ):
        path = os.fspath(path_or_source)
        if isinstance(path, bytes):
            raise TilecError("tilec.compile: pass a path as str or pathlib.Path, not bytes")
        return source.read(path), path
    if not isinstance(path_or_source, str):
        hint = " (decode it: data.decode('utf-8'))" if isinstance(path_or_source, (bytes, bytearray)) else ""
        raise TilecError(
            f"tilec.compile: expected the .tile source as a str, or a path to a .tile file, "
            f"got {type(path_or_source).__name__}{hint}"
        )
    return path_or_source, "<string>"


_DEFINE_TYPES = (bool, int, float, str)


def _check_arguments(target, defines) -> dict:
    """`defines` as a dict after checking the arguments' types; a
    `TilecError` naming what to pass otherwise."""
    if target is not None:
        if not isinstance(target, str):
            raise TilecError(f"tilec.compile: target must be a str such as 'sm_90a', got {type(target).__name__}")
        targets.target(target)
    if defines is None:
        return {}
    if not isinstance(defines, dict):
        raise TilecError(
            f"tilec.compile: defines must be a dict of const name to value, such as {{'M': 4096}}, "
            f"got {type(defines).__name__}"
        )
    for name, value in defines.items():
        if not isinstance(name, str):
            raise TilecError(f"tilec.compile: define names must be str, got {name!r}")
        if not isinstance(value, _DEFINE_TYPES):
            raise TilecError(
                f"tilec.compile: define '{name}' must be an int, float, bool or str, got {type(value).__name__}"
            )
    return dict(defines)


def compile(
    path_or_source: PathOrSource,
    target: Optional[str] = None,
    defines: Optional[dict] = None,
    options: Optional[Options] = None,
) -> CompiledModule:
    """Compile a .tile program and return its `CompiledModule`.

    The target is `target`, else the file's `target` line, else sm_90a.
    `defines` override consts like `-D`.  Results are cached on disk by
    source, defines, target and tilec version (see `tilec.runtime.cache`);
    a compile with non-default `options` (debugging, dumps) bypasses it."""
    text, filename = read_source(path_or_source)
    return compile_text(text, filename, target=target, defines=defines, options=options)


def compile_text(
    text: str,
    filename: str,
    target: Optional[str] = None,
    defines: Optional[dict] = None,
    options: Optional[Options] = None,
) -> CompiledModule:
    """`compile` of source `text` already read; `filename` locates its
    diagnostics."""
    defines = _check_arguments(target, defines)
    cacheable = options is None
    key = cache.cache_key(text, defines, target or "", source.dependencies(text, filename)) if cacheable else None
    hit = cache.lookup(key) if cacheable else None
    if hit is not None:
        ptx, meta = hit
    else:
        result = compile_source(text, filename, target=target, defines=defines, options=options)
        if result.ptx is None:
            raise TilecError("the pipeline stopped before emit-ptx; no module to load")
        ptx, meta = result.ptx, result.meta
        if cacheable:
            cache.store(key, ptx, meta)
    return CompiledModule(ptx, meta, meta["target"])

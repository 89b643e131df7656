"""On-disk cache of compiled modules (PTX text + kernel.json metadata).

A key is the sha256 of everything that decides the output: the source text,
the defines, the target, and the compiler itself -- a hash of every file of
the installed `tilec` package (`compiler_fingerprint`), so a changed
compiler never serves an older one's PTX even when `tilec.__version__` stays
the same.

An entry is one file, ``KEY.entry``: a JSON object holding the key, the PTX,
the metadata and a sha256 of both, written as one atomic rename
(`tilec.compiler.files`), so two writers under one key cannot mix their PTX
and metadata and a reader sees a whole entry or none.  An entry that is
truncated, malformed, from another key, or whose checksum does not match is
a miss, and the compile that follows replaces it.  Temporary files of a
writer killed mid-write are removed by later writes.

The directory (``$TILEC_CACHE_DIR``, default ``~/.cache/tilec``;
``TILEC_CACHE=0`` turns the cache off) must belong to the user and be
writable by no one else: anyone who can write there could hand this user
PTX to run.  Another directory is refused with an error saying how to fix
it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Optional

from tilec.cache_dir import cache_dir, enabled
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.files import read_no_follow, remove_stale_temps, write_atomic

STALE_TEMP_SECONDS = 600.0
"""A temporary file older than this belongs to a killed writer (a compile
that stores takes seconds at most)."""

_PACKAGE = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def compiler_fingerprint() -> str:
    """sha256 over the path and bytes of every file of the tilec package
    (sources, grammar, tables), computed once per process: about a
    megabyte read, a few milliseconds."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.is_file() and path.suffix not in (".pyc", ".pyo") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def cache_key(source: str, defines: dict, target: str, includes: tuple = ()) -> str:
    """The hex sha256 naming the module compiled from `source` with
    `defines` for `target` by this compiler.  Defines are sorted, and their
    values keyed by repr so 8192 and "8192" stay distinct.  `includes` are
    the (path, text) of the files the source includes
    (`tilec.compiler.source.dependencies`): editing one makes a new key."""
    import tilec  # at call time: tilec/__init__ may import this module

    blob = json.dumps(
        {
            "source": source,
            "includes": [list(i) for i in includes],
            "defines": sorted((str(k), repr(v)) for k, v in defines.items()),
            "target": target,
            "tilec": tilec.__version__,
            "compiler": compiler_fingerprint(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def directory() -> Optional[Path]:
    """The cache directory, created private if missing; None when the cache
    is off or the directory cannot be created.  A `TilecError` when it is a
    link, not a directory, not the user's, or writable by others."""
    if not enabled():
        return None
    path = cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError:
        return None
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "it is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "it is not a directory"
    elif info.st_uid != os.getuid():
        problem = "it belongs to another user"
    elif info.st_mode & 0o022:
        problem = f"other users can write to it (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is not None:
        raise TilecError(
            f"refusing the compile cache directory '{path}': {problem}; make it a private directory "
            "(chmod go-w), choose another with TILEC_CACHE_DIR, or turn the cache off with TILEC_CACHE=0"
        )
    return path


def _digest(ptx: str, meta: dict) -> str:
    return hashlib.sha256(json.dumps([ptx, meta], sort_keys=True).encode()).hexdigest()


def lookup(key: str) -> Optional[tuple[str, dict]]:
    """(ptx, meta) stored under `key`, or None: a miss, the cache off, or an
    entry that is not whole and this key's."""
    folder = directory()
    if folder is None:
        return None
    try:
        entry = json.loads(read_no_follow(folder / f"{key}.entry").decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    ptx, meta = entry.get("ptx"), entry.get("meta")
    if not (isinstance(ptx, str) and isinstance(meta, dict) and isinstance(meta.get("target"), str)
            and isinstance(meta.get("kernels"), list)):
        return None
    if entry.get("sha256") != _digest(ptx, meta):
        return None
    return ptx, meta


def store(key: str, ptx: str, meta: dict) -> None:
    """Save (ptx, meta) under `key` as one file; nothing when the cache is
    off.  A directory that cannot be written (read-only, full) leaves the
    cache empty rather than failing the compile that called this."""
    folder = directory()
    if folder is None:
        return
    entry = {"key": key, "sha256": _digest(ptx, meta), "ptx": ptx, "meta": meta}
    try:
        write_atomic(folder / f"{key}.entry", json.dumps(entry, sort_keys=True), mode=0o600)
    except OSError:
        return
    remove_stale_temps(folder, STALE_TEMP_SECONDS)

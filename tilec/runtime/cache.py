"""On-disk cache of compiled modules (PTX text + kernel.json metadata).

A key is the sha256 of everything that decides the output: the source text,
the defines, the target and the tilec version (a new tilec never reuses an
old one's PTX).  Entries live in ``$TILEC_CACHE_DIR`` (default
``~/.cache/tilec``) as ``KEY.ptx`` and ``KEY.json``; ``TILEC_CACHE=0``
turns the cache off.  Files are written to a temporary name and renamed, so
a concurrent reader sees a whole entry or none; an unreadable entry is a
miss, never an error.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from tilec.cache_dir import cache_dir, enabled


def cache_key(source: str, defines: dict, target: str) -> str:
    """The hex sha256 naming the module compiled from `source` with
    `defines` for `target` by this tilec.  Defines are sorted, and their
    values keyed by repr so 8192 and "8192" stay distinct."""
    import tilec  # at call time: tilec/__init__ may import this module

    blob = json.dumps(
        {
            "source": source,
            "defines": sorted((str(k), repr(v)) for k, v in defines.items()),
            "target": target,
            "tilec": tilec.__version__,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def lookup(key: str) -> tuple[str, dict] | None:
    """(ptx, meta) stored under `key`, or None (a miss, or the cache off)."""
    if not enabled():
        return None
    base = cache_dir() / key
    try:
        ptx = base.with_suffix(".ptx").read_text(encoding="utf-8")
        meta = json.loads(base.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(meta, dict):
        return None
    return ptx, meta


def store(key: str, ptx: str, meta: dict) -> None:
    """Save (ptx, meta) under `key`; nothing when the cache is off.  A
    directory that cannot be written (read-only, full) leaves the cache
    empty rather than failing the compile that called this."""
    if not enabled():
        return
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_atomic(directory / f"{key}.ptx", ptx)
        _write_atomic(directory / f"{key}.json", json.dumps(meta, indent=1, sort_keys=True))
    except OSError:
        return


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise

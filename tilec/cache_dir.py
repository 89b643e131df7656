"""Where tilec keeps its on-disk caches, and whether it may: `$TILEC_CACHE_DIR`
(default ``~/.cache/tilec``), and ``TILEC_CACHE=0`` turns every cache off.

Its own module, importing nothing heavy, so that a reader need not import
`tilec.runtime` to find it.  (The parser keeps nothing here: its tables
ship with the package, and nothing executable is ever read from a cache.)
"""
from __future__ import annotations

import os
from pathlib import Path


def enabled() -> bool:
    return os.environ.get("TILEC_CACHE", "1") != "0"


def cache_dir() -> Path:
    configured = os.environ.get("TILEC_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tilec"

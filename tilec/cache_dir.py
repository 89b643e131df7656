"""Where tilec keeps its on-disk caches, and whether it may: `$TILEC_CACHE_DIR`
(default ``~/.cache/tilec``), and ``TILEC_CACHE=0`` turns every cache off.

Its own module, importing nothing heavy, because two readers need it at very
different costs: the compiled-module cache (`tilec.runtime.cache`) and the
parser's grammar-table cache (`tilec.grammar.parser`), for which importing
`tilec.runtime` would cost more than the cache saves.
"""
from __future__ import annotations

import os
from pathlib import Path


def enabled() -> bool:
    return os.environ.get("TILEC_CACHE", "1") != "0"


def cache_dir() -> Path:
    configured = os.environ.get("TILEC_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tilec"

"""Regenerate `tilec/grammar/tables.py`, the parser tables that ship with
tilec, from `tilec/grammar/tile.lark` (with Lark: `tilec.grammar.generate`).
Run it after editing the grammar:

    python3 tools/grammar_tables.py

`tests/test_parser_tables.py` fails while the tables and the grammar differ.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilec.grammar.generate import TABLES, render  # noqa: E402


def main() -> int:
    Path(TABLES).write_text(render(), encoding="utf-8")
    print(f"wrote {Path(TABLES).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

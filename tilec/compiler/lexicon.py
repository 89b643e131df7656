"""The words of the `.tile` language: keywords, namespaces, layout heads,
and the reserved words they make up.

The parser refuses a reserved word as a name and the printer checks that a
dotted call starts at a namespace; both read these sets from here, so that
printing IR does not import the parser (and Lark with it).
"""
from __future__ import annotations

from tilec.compiler.dtypes import DTYPES

KEYWORDS = frozenset(
    "target include const kernel inline def meta tensormap for in range unroll "
    "if elif else while pass return and or not True False".split()
)
NAMESPACES = frozenset("ptx cuda cta wg warp thread".split())
LAYOUT_HEADS = frozenset({"S", "R", "O", "SW"})
"""Layout literal heads.  They are not reserved: `O = ...`, `O[i, j]` and a
parameter `O` work; only `S[...]` always means a layout."""
RESERVED = KEYWORDS | NAMESPACES | frozenset(DTYPES)
"""Words that cannot name anything.  (`layout` is a keyword only after a
buffer parameter's shape, so `layout=` keyword arguments stay legal.)"""

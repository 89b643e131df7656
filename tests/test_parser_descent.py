"""The parser's fast path (`tilec.grammar.descent`) against the LALR driver:
for every text it takes, the same IR with the same spans; every text with a
syntax error, a node nested too deeply or a builder's error refused (the
driver then words the error); every example and test program taken."""
from pathlib import Path

import attrs
import pytest

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.grammar import descent, parser

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(ROOT.glob("examples/**/*.tile")) + sorted(ROOT.glob("tests/**/*.tile"))


def _dump(node):
    """The IR with every field, spans included (equality leaves spans out)."""
    if isinstance(node, (ir.Node, ir.Span)):
        fields = ", ".join(f"{f.name}={_dump(getattr(node, f.name))}" for f in attrs.fields(type(node)))
        return f"{type(node).__name__}({fields})"
    if isinstance(node, tuple):
        return "(" + ", ".join(_dump(x) for x in node) + ")"
    return repr(node)


_ERRORS = (TilecError, parser._LexError, parser.UnexpectedCharacters)  # (what `parser.parse` words)


def _both(text: str, filename: str = "t.tile"):
    """(the descent's value or None, the driver's value or its TilecError)."""
    eof = parser._eof(text)
    source = text if text.endswith("\n") else text + "\n"
    fast = descent.read(parser._parser(), source, parser._Builder(filename, eof), eof, parser.MAX_DEPTH)
    try:
        try:
            slow = parser._parse(parser._parser(), source, filename, eof, tree=False)
        except parser.lalr.Redo:
            slow = parser._parse(parser._parser(), source, filename, eof, tree=True)
    except _ERRORS as e:
        slow = e
    return fast, slow


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_program_is_read_by_the_descent_as_the_driver_reads_it(path):
    fast, slow = _both(path.read_text(encoding="utf-8"), str(path))
    if isinstance(slow, _ERRORS):
        assert fast is None
        return
    assert fast is not None, "the descent refused a program the driver takes"
    assert _dump(fast) == _dump(slow)


KERNEL = "kernel k(a: f32[M, N] layout S[(M, N) : (N, 1)], n: i32, flag: i32 if n > 0):\n"

TAKEN = [
    # names that are keywords elsewhere, layout heads as names, `layout=` keyword arguments
    KERNEL + "    x = a.if + a.for\n    O = 1\n    y = O[0] + S\n    f(layout=S[8 : 1], S=2)\n",
    KERNEL + "    S: f16 = 1\n    R: i32 = R + 1\n    w: f32 = -3 * -(3) - --3 + ~x\n",
    KERNEL + "    z = S[(8, 4) : (1@tid, 8@lane)] + R[2 : 4@warp] + O[1@tid]\n    v = SW[3, 4, 3] * S[8 : 1]\n",
    # statements: tuples, aug, meta, return, pass, semicolons, elif chains, loops, helpers
    KERNEL + "    a, b = 1, 2,\n    c = (1,)\n    d = ()\n    x += 1; y -= 2;\n    meta m = {\"k\": 1, \"j\": [1, 2,],}\n",
    KERNEL + "    if a < b:\n        pass\n    elif not a == b and c or d:\n        x = y if c else z\n"
             "    elif e:\n        x = 1\n    else:\n        x = 2\n    while i < 3:\n        i += 1\n",
    KERNEL + "    for i in range(0, n, 2):\n        for j in unroll(4,):\n            x[i, j:] = y[:j, :][i:]\n"
             "    inline def h(p, q,):\n        return p * q\n    tensormap tm = tensormap(a, box=(8, 8))\n",
    "target sm_90a\ninclude \"x.tile\"\nconst C = 1, 2\n# comment\n\ninline def g():\n    pass\n"
    "kernel k():\n    x = ptx.mma.sync(f16, **cfg)[2].t\n    y = f16(x) + 1.5e3 + 0x1F + \"s\\n\"\n"
    "    z = (a\n         + b)  # inside brackets\n    return\n",
    "",
    "\n\n",
]

REFUSED = [
    KERNEL + "    x = a < b < c\n",  # comparisons do not chain
    KERNEL + "    x = a @ i @ j\n",
    KERNEL + "    x = a @ i + 1\n",
    KERNEL + "    x = 1 + not a\n",
    KERNEL + "    x = a.\n    if\n",
    KERNEL + "    x = (a.\n    if)\n",  # a reserved word after a newline inside brackets
    KERNEL + "    for = 1\n",
    KERNEL + "    a, b += 1\n",
    KERNEL + "    x = a = b\n",
    KERNEL + "    x = f(a=1, 2)\n",  # the builder's error
    KERNEL + "    x = 99999999999999999999999\n",
    KERNEL + "    x = " + "(" * 120 + "1" + ")" * 120 + "\n",  # nested too deeply
    KERNEL + "    x = " + " + ".join(["1"] * 120) + "\n",
    KERNEL + "  x = 1\n     y = 2\n",
    KERNEL + "\tx = 1\n",
    "  kernel k():\n    pass\n",
    KERNEL + "    x = (1\n",
    KERNEL + "    x = 1)\n",
    KERNEL + "    x = $\n",
    KERNEL + "    x = R[1, 2]\n",  # (a builder's error at module end: a loose part) -- taken only if the driver takes it
]


@pytest.mark.parametrize("text", TAKEN, ids=range(len(TAKEN)))
def test_the_descent_reads_what_the_driver_reads(text):
    fast, slow = _both(text)
    assert not isinstance(slow, _ERRORS), slow
    assert fast is not None
    assert _dump(fast) == _dump(slow)


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_the_descent_refuses_what_the_driver_refuses(text):
    fast, slow = _both(text)
    if isinstance(slow, _ERRORS):
        assert fast is None
    else:
        assert fast is not None and _dump(fast) == _dump(slow)

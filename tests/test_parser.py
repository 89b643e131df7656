"""The .tile parser: each construct's IR, spans, and every kind of syntax error
with its location and wording."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest

from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.printer import print_module
from tilec.compiler.visit import walk
from tilec.compiler.lexicon import RESERVED
from tilec.grammar.parser import parse

N = ir.Name
I = ir.Int
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def expr(text: str) -> ir.Expr:
    return parse(f"const X = {text}\n").consts[0].value


def body(text: str):
    src = "kernel k():\n" + textwrap.indent(textwrap.dedent(text), "    ")
    return parse(src).kernels[0].body


def it(extent, stride=None, axis=None):
    return ir.LayoutIter(extent, stride, axis)


# ---------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, want",
    [
        ("42", I(42)),
        ("0x1F", I(31)),
        ("007", I(7)),
        ("1.5", ir.Float(1.5)),
        ("2.", ir.Float(2.0)),
        (".25", ir.Float(0.25)),
        ("1e-05", ir.Float(1e-05)),
        ("3E+2", ir.Float(300.0)),
        ("True", ir.Bool(True)),
        ("False", ir.Bool(False)),
        ('"shared::cta"', ir.Str("shared::cta")),
        (r'"a\"b\\c\nd\te"', ir.Str('a"b\\c\nd\te')),
        ("BLK_M", N("BLK_M")),
        ("f16", ir.DTypeLit("f16")),
        ("layout", N("layout")),
        # `-` folds into a literal only when written directly before it
        ("-3", I(-3)),
        ("-1.5", ir.Float(-1.5)),
        ("-(3)", ir.Unary("-", I(3))),
        ("--3", ir.Unary("-", I(-3))),
        ("-x", ir.Unary("-", N("x"))),
        ("~-3", ir.Unary("~", I(-3))),
        ("-3[0]", ir.Unary("-", ir.Index(I(3), (I(0),)))),
        ("a - -3", ir.Binary("-", N("a"), I(-3))),
    ],
)
def test_atoms_and_literals(text, want):
    assert expr(text) == want


def B(op, a, b):
    return ir.Binary(op, a, b)


a, b, c, d, e = (N(x) for x in "abcde")


@pytest.mark.parametrize(
    "text, want",
    [
        ("a + b * c", B("+", a, B("*", b, c))),
        ("(a + b) * c", B("*", B("+", a, b), c)),
        ("a - b - c", B("-", B("-", a, b), c)),
        ("a - (b - c)", B("-", a, B("-", b, c))),
        ("a // b % c", B("%", B("//", a, b), c)),
        ("a << b + c", B("<<", a, B("+", b, c))),
        ("a | b ^ c & d", B("|", a, B("^", b, B("&", c, d)))),
        ("a & b == c", B("==", B("&", a, b), c)),
        ("a < b and c >= d", B("and", B("<", a, b), B(">=", c, d))),
        ("a or b and c", B("or", a, B("and", b, c))),
        ("not a == b", ir.Unary("not", B("==", a, b))),
        ("not a and b", B("and", ir.Unary("not", a), b)),
        ("a != b", B("!=", a, b)),
        ("a <= b", B("<=", a, b)),
        ("a > b", B(">", a, b)),
        ("a / b", B("/", a, b)),
        ("a >> b", B(">>", a, b)),
        ("~a * b", B("*", ir.Unary("~", a), b)),
        ("a if b else c", ir.Select(b, a, c)),
        ("a if b else c if d else e", ir.Select(b, a, ir.Select(d, c, e))),
        ("(a if b else c) + d", B("+", ir.Select(b, a, c), d)),
    ],
)
def test_operator_precedence(text, want):
    assert expr(text) == want


@pytest.mark.parametrize(
    "text, want",
    [
        ("f(a, k=1, **d)", ir.Call("f", (a,), (ir.Keyword("k", I(1)), ir.Keyword(None, d)))),
        ("f()", ir.Call("f")),
        ("f(a,)", ir.Call("f", (a,))),
        ("alloc(x, f16, layout=L)", ir.Call("alloc", (N("x"), ir.DTypeLit("f16")), (ir.Keyword("layout", N("L")),))),
        ("f16(a)", ir.Call("f16", (a,))),
        ("x.ptr_to([0])", ir.Method(N("x"), "ptr_to", (ir.ListExpr((I(0),)),))),
        ("ts.m_idx", ir.Attr(N("ts"), "m_idx")),
        ("a.b.c(d)", ir.Method(ir.Attr(a, "b"), "c", (d,))),
        ("a.f16", ir.Attr(a, "f16")),
        ("ptx.mbarrier.arrive.expect_tx(a, 16384)",
         ir.Call("ptx.mbarrier.arrive.expect_tx", (a, I(16384)))),
        ("warp.gemm(a, b)", ir.Call("warp.gemm", (a, b))),
        ("cuda.cta_sync()", ir.Call("cuda.cta_sync")),
        ("ptx.cvt.f32.if()", ir.Call("ptx.cvt.f32.if")),
        ("ptx.elect_sync().x", ir.Attr(ir.Call("ptx.elect_sync"), "x")),
        ("a[:, 0:8]", ir.Index(a, (ir.Slice(), ir.Slice(I(0), I(8))))),
        ("a[i]", ir.Index(a, (N("i"),))),
        ("a[:n, m:]", ir.Index(a, (ir.Slice(None, N("n")), ir.Slice(N("m"), None)))),
        ("a[i][j]", ir.Index(ir.Index(a, (N("i"),)), (N("j"),))),
        ("()", ir.TupleExpr(())),
        ("(a,)", ir.TupleExpr((a,))),
        ("(a, b)", ir.TupleExpr((a, b))),
        ("a, b", ir.TupleExpr((a, b))),
        ("(a)", a),
        ("[]", ir.ListExpr(())),
        ("[a, b,]", ir.ListExpr((a, b))),
        ("{}", ir.DictExpr((), ())),
        ('{"dispatch": "tma", "mbar": b}', ir.DictExpr(("dispatch", "mbar"), (ir.Str("tma"), b))),
    ],
)
def test_postfix_and_displays(text, want):
    assert expr(text) == want


@pytest.mark.parametrize(
    "text, want",
    [
        ("S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]",
         ir.LayoutLit((it(I(2), I(2)), it(I(8), I(4), "laneid"), it(I(4), I(1), "laneid"), it(I(2), I(1))))),
        ("S[8 : 1]", ir.LayoutLit((it(I(8), I(1)),))),
        ("S[8 : -1]", ir.LayoutLit((it(I(8), I(-1)),))),
        ("S[(8,) : (1,)]", ir.LayoutLit((it(I(8), I(1)),))),
        ("S[8, 256]", ir.LayoutLit((it(I(8)), it(I(256))))),
        ("S[N, K]", ir.LayoutLit((it(N("N")), it(N("K"))))),
        ("S[(128, 512) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]",
         ir.LayoutLit((it(I(128), I(1), "TLane"), it(I(512), I(1), "TCol")), (it(I(4), I(32), "TLane"),))),
        ("SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)]",
         ir.LayoutLit((it(I(8), I(64)), it(I(4), I(512)), it(I(64), I(1))), swizzle=(I(3), I(3), I(3)))),
        ("S[8 : 1] + O[5@TCol, 3]",
         ir.LayoutLit((it(I(8), I(1)),), offset=(it(I(1), I(5), "TCol"), it(I(1), I(3))))),
        ("SW[0, 4, 3] * S[64 : 1] + R[2 : 1 @ x] + O[7]",
         ir.LayoutLit((it(I(64), I(1)),), (it(I(2), I(1), "x"),), (it(I(1), I(7)),), (I(0), I(4), I(3)))),
        ("S[(BLK_N, 2*K) : (1, BLK_N)]",
         ir.LayoutLit((it(N("BLK_N"), I(1)), it(B("*", I(2), N("K")), N("BLK_N"))))),
        ("S[8 : 2*K@TCol]", ir.LayoutLit((it(I(8), B("*", I(2), N("K")), "TCol"),))),
        ("(S[8 : 1]) + R[2 : 8]", ir.LayoutLit((it(I(8), I(1)),), (it(I(2), I(8)),))),
        # a layout is an ordinary operand of anything but `+ R/O` and `SW *`
        ("S[8] + 1", B("+", ir.LayoutLit((it(I(8)),)), I(1))),
        ("S[8][0]", ir.Index(ir.LayoutLit((it(I(8)),)), (I(0),))),
    ],
)
def test_layout_literals(text, want):
    assert expr(text) == want


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_dtype_is_a_literal_and_a_param_type(name):
    m = parse(f"kernel k(A: {name}[4], n: {name}):\n    x = alloc((4,), {name})\n")
    assert [p.dtype for p in m.kernels[0].params] == [name, name]
    assert m.kernels[0].body[0].value.args[1] == ir.DTypeLit(name)


# ---------------------------------------------------------------------------
# Statements and declarations
# ---------------------------------------------------------------------------


def test_assignments():
    stmts = body(
        """\
        bx, by = cta_id([2, 2])
        kp, kHi = s % 2, s // 2
        t = 1, 2
        buf[i, j] = x
        phase: i32 = 0
        meta m_st = bx * 128
        meta cfg = {"dispatch": "tma"}
        """
    )
    assert stmts == (
        ir.Assign((N("bx"), N("by")), ir.Call("cta_id", (ir.ListExpr((I(2), I(2))),))),
        ir.Assign((N("kp"), N("kHi")), ir.TupleExpr((B("%", N("s"), I(2)), B("//", N("s"), I(2))))),
        ir.Assign((N("t"),), ir.TupleExpr((I(1), I(2)))),
        ir.Assign((ir.Index(N("buf"), (N("i"), N("j"))),), N("x")),
        ir.Assign((N("phase"),), I(0), "i32"),
        ir.Meta("m_st", B("*", N("bx"), I(128))),
        ir.Meta("cfg", ir.DictExpr(("dispatch",), (ir.Str("tma"),))),
    )


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^"])
def test_augmented_assignment(op):
    assert body(f"x {op}= 1\nb[0] {op}= y\n") == (
        ir.AugAssign(N("x"), op, I(1)),
        ir.AugAssign(ir.Index(N("b"), (I(0),)), op, N("y")),
    )


def test_loops_default_their_bounds():
    stmts = body(
        """\
        for i in range(n):
            pass
        for i in range(a, b):
            pass
        for s in unroll(a, b, 2):
            pass
        while ts.valid():
            ts.next_tile()
        """
    )
    p = (ir.Pass(),)
    assert stmts == (
        ir.For("i", "range", I(0), N("n"), I(1), p),
        ir.For("i", "range", a, b, I(1), p),
        ir.For("s", "unroll", a, b, I(2), p),
        ir.While(ir.Method(N("ts"), "valid"), (ir.ExprStmt(ir.Method(N("ts"), "next_tile")),)),
    )


def test_if_elif_else_nests_in_orelse():
    stmts = body(
        """\
        if a:
            x = 1
        elif b:
            x = 2
        elif c:
            x = 3
        else:
            x = 4
        if d:
            pass
        """
    )

    def set_x(v):
        return (ir.Assign((N("x"),), I(v)),)

    inner = ir.If(c, set_x(3), set_x(4))
    assert stmts == (
        ir.If(a, set_x(1), (ir.If(b, set_x(2), (inner,)),)),
        ir.If(d, (ir.Pass(),)),
    )


def test_inline_defs_tensormaps_and_semicolons():
    stmts = body(
        """\
        inline def tma_load(stage, k_offset):
            copy_async(x, y, **cfg)
        tensormap A_tmap0 = tensormap(A, f16, dims=(64, 8))
        cta_id([1]); warp_id([1]); lane = lane_id([32]);
        """
    )
    assert stmts[0] == ir.InlineDef(
        "tma_load", ("stage", "k_offset"),
        (ir.ExprStmt(ir.Call("copy_async", (N("x"), N("y")), (ir.Keyword(None, N("cfg")),))),),
    )
    assert stmts[1] == ir.TensorMap(
        "A_tmap0",
        ir.Call("tensormap", (N("A"), ir.DTypeLit("f16")), (ir.Keyword("dims", ir.TupleExpr((I(64), I(8)))),)),
    )
    assert stmts[2:] == (
        ir.ExprStmt(ir.Call("cta_id", (ir.ListExpr((I(1),)),))),
        ir.ExprStmt(ir.Call("warp_id", (ir.ListExpr((I(1),)),))),
        ir.Assign((N("lane"),), ir.Call("lane_id", (ir.ListExpr((I(32),)),))),
    )


def test_module_structure():
    m = parse(
        textwrap.dedent(
            """\
            # leading comment

            target sm_100a
            const M = 4096   # trailing comment
            inline def helper(x):
                pass
            kernel gemm(A: f16[M, K], B: f16[N, K] layout S[N, K], n: i32,):
                pass
            const K = 2 * M
            kernel other():
                pass
            """
        ),
        "m.tile",
    )
    assert m.target == "sm_100a"
    assert [c.name for c in m.consts] == ["M", "K"]
    assert [h.name for h in m.helpers] == ["helper"]
    assert [k.name for k in m.kernels] == ["gemm", "other"]
    assert m.kernels[0].params == (
        ir.Param("A", "f16", (N("M"), N("K"))),
        ir.Param("B", "f16", (N("N"), N("K")), ir.LayoutLit((it(N("N")), it(N("K"))))),
        ir.Param("n", "i32"),
    )
    assert parse("") == ir.Module(None, (), (), ())


def test_brackets_continue_lines_and_comments_are_ignored():
    stmts = body(
        """\
        tmem = decl_buffer(
            (128, 512), f32,   # shape and dtype
            # a comment line inside the call

            layout=S[(128, 512) :
                     (1@TLane, 1@TCol)]
        )
        x = [1,
        2]
        """
    )
    assert len(stmts) == 2
    assert stmts[1] == ir.Assign((N("x"),), ir.ListExpr((I(1), I(2))))


def test_spans_locate_every_node():
    src = "kernel k(A: f16[8]):\n    x = a + bb * 2\n    for i in range(4):\n        A[i] = x\n"
    m = parse(src, "s.tile")
    assign = m.kernels[0].body[0]
    assert assign.span == ir.Span("s.tile", 2, 5, 2, 19)
    assert assign.value.span == ir.Span("s.tile", 2, 9, 2, 19)
    assert assign.value.rhs.span == ir.Span("s.tile", 2, 13, 2, 19)
    assert assign.value.rhs.lhs.span == ir.Span("s.tile", 2, 13, 2, 15)
    loop = m.kernels[0].body[1]
    assert (loop.span.line, loop.span.col, loop.span.end_line, loop.span.end_col) == (3, 5, 4, 17)
    assert m.kernels[0].span == ir.Span("s.tile", 1, 1, 4, 17)
    assert m.kernels[0].params[0].span == ir.Span("s.tile", 1, 10, 1, 19)
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.tile"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            module = parse(f.read(), path)
        for node in walk(module):
            assert node.span is not None and node.span.file == path, node


def test_a_fresh_process_parses_from_the_shipped_tables(tmp_path):
    """Import and parse in a fresh process never compute the LALR tables
    from the grammar (Lark takes about a second for that): the parser comes
    from the tables shipped in the package.  (A timing would say the same
    only on an idle machine.)"""
    code = (
        "import tilec.grammar.parser as p\n"
        "def refuse(*a, **k):\n"
        "    raise SystemExit('the grammar was compiled at run time')\n"
        "p.build_parser = refuse\n"
        "p.parse(open('examples/hgemm_v6.tile').read())\n"
        "print('ok')\n"
    )
    env = dict(os.environ, TILEC_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# ---------------------------------------------------------------------------
# Syntax errors
# ---------------------------------------------------------------------------

K = "kernel k():\n"


@pytest.mark.parametrize(
    "src, line, col, message",
    [
        (K + "    x = 1 2\n", 2, 11, "expected end of line or an operator, found number 2"),
        (K + "    x = )\n", 2, 9, "expected an expression, found ')'"),
        (K + "    if x\n        pass\n", 2, 9, "expected ':', found end of line"),
        (K + "    for i in foo(3):\n        pass\n", 2, 14, "expected 'range' or 'unroll', found name 'foo'"),
        ("kernel k(A: float16[4]):\n    pass\n", 1, 13, "expected a dtype (f16, bf16"),
        ("kernel a.b():\n    pass\n", 1, 9, "expected '(', found '.'"),
        # indentation
        (K + "    x = 1\n        y = 2\n", 3, 9, "unexpected indentation"),
        ("  const A = 1\n", 1, 1, "unexpected indentation"),
        (K + "    if a:\n        x = 1\n      y = 2\n", 4, 1, "matches no enclosing block"),
        (K + "x = 1\n", 2, 1, "expected an indented block, found name 'x'"),
        (K + "\tx = 1\n", 2, 1, "indentation contains a tab"),
        # strings and characters
        (K + '    f("abc)\n', 2, 7, "unterminated string"),
        (K + "    f('abc')\n", 2, 7, "strings are written in double quotes"),
        (K + "    x = $\n", 2, 9, "unexpected character '$'"),
        ('const A = "a\\qb"\n', 1, 11, "unknown escape '\\q'"),
        # truncated input
        ("kernel k(A: f16[8],\n", 1, 20, "unexpected end of input: the '(' at 1:9 is never closed"),
        ("kernel k():\n", 1, 12, "unexpected end of input, expected an indented block"),
        ("kernel k()", 1, 11, "unexpected end of input, expected ':'"),
        (K + "    f(a, b\n    x = 1\n", 3, 5, "(the '(' at 2:6 is not closed)"),
        # namespaces, layouts and reserved words in the wrong place
        (K + "    x = ptx + 1\n", 2, 13, "'ptx' is a namespace of intrinsics"),
        (K + "    x = ptx.mbarrier\n", 2, 21, "expected '(' or '.' ('ptx' is a namespace"),
        ("kernel k(S: f32[4]):\n    S[0] = 1.0\n", 2, 5, "a buffer named 'S' cannot be indexed or sliced: rename it"),
        # a slice of a buffer named S: no layout has this form, so the error says what was meant
        (K + "    copy(S[:], A[:])\n", 2, 12,
         "a layout needs both extents and strides: S[extents : strides]; S[...] is always a layout literal, "
         "so a buffer named 'S' cannot be indexed or sliced: rename it"),
        (K + "    copy(S[0:8, :], A[0:8, :])\n", 2, 10, "so a buffer named 'S' cannot be indexed or sliced"),
        (K + "    copy(S[i:], A[:])\n", 2, 12, "so a buffer named 'S' cannot be indexed or sliced"),
        (K + "    kernel = 1\n", 2, 5, "'kernel' is a reserved word"),
        (K + "    x = range + S\n", 2, 9, "'range' is a reserved word"),
        (K + "    else:\n        pass\n", 2, 5, "'else' is a reserved word"),
        ("const f16 = 1\n", 1, 7, "'f16' is a reserved word"),
        # shapes the grammar accepts but the language does not
        (K + "    x = a < b < c\n", 2, 15, "comparisons do not chain"),
        (K + "    a.b = 1\n", 2, 5, "can only assign to a name or to buffer elements"),
        (K + "    a + 1 = 2\n", 2, 5, "can only assign to a name"),
        (K + "    a, = f()\n", 2, 5, "unpacking needs at least two targets"),
        (K + "    x = a[0](1)\n", 2, 9, "only a name or a method can be called"),
        (K + "    f(a=1, 2)\n", 2, 12, "a positional argument cannot follow keyword arguments"),
        (K + "    for i in range(1, 2, 3, 4):\n        pass\n", 2, 29, "takes at most 3 arguments"),
        ("const A = 1\ntarget sm_90a\n", 2, 1, "the 'target' line must come before everything else"),
        ("target sm_90a\ntarget sm_80\n", 2, 1, "already set"),
        ("const L = R[4 : 32@TLane]\n", 1, 11, "a replica R[...] must be added to a layout"),
        ("const L = 4@TLane\n", 1, 11, "'@axis' may only follow a stride inside a layout literal"),
        ("const L = S[1:2, 3]\n", 1, 11, "a layout is written S[(extents) : (strides)]"),
        ("const L = S[:2]\n", 1, 13, "a layout needs both extents and strides"),
        ("const L = S[(1, 2) : (3,)]\n", 1, 13, "2 extents but 1 strides"),
        ("const L = S[(1@x, 2) : (3, 4)]\n", 1, 14, "an extent takes no '@axis'"),
        ("const L = S[8 : 1] + O[1:2]\n", 1, 24, "an offset is written O[offset@axis, ...]"),
        ("const L = SW[1, 2] * S[8 : 1]\n", 1, 11, "a swizzle is written SW[per_element_bits"),
        ("const L = SW[1, 2, 3] * (SW[1, 2, 3] * S[8 : 1])\n", 1, 26, "already has a swizzle"),
    ],
)
def test_syntax_errors(src, line, col, message):
    with pytest.raises(TilecError) as info:
        parse(src, "bad.tile")
    err = info.value
    assert message in err.message
    assert (err.span.file, err.span.line, err.span.col) == ("bad.tile", line, col)


@pytest.mark.parametrize("word", sorted(RESERVED))
@pytest.mark.parametrize(
    "template, line, col",
    [
        ("const {} = 1\n", 1, 7),
        ("kernel k(A: f16[4], {}: i32):\n    pass\n", 1, 21),
        ("kernel k():\n    for {} in range(3):\n        pass\n", 2, 9),
        ("inline def h(a, {}):\n    pass\n", 1, 17),
    ],
)
def test_reserved_words_cannot_name_things(word, template, line, col):
    with pytest.raises(TilecError) as info:
        parse(template.format(word))
    assert (info.value.span.line, info.value.span.col) == (line, col)


def test_error_messages_never_show_lark_terminal_names():
    bad = [K + "    x = (1 +\n", K + "    f(a))\n", "kernel k(:\n", K + "    x = 1 2\n", "const = 1\n"]
    for src in bad:
        with pytest.raises(TilecError) as info:
            parse(src)
        msg = info.value.message
        assert "__ANON" not in msg and "_NL" not in msg and "LPAR" not in msg and "$END" not in msg, msg


def test_language_reference_programs_parse():
    """The whole-file examples in docs/language.md are valid programs."""
    with open(os.path.join(ROOT, "docs", "language.md"), encoding="utf-8") as f:
        blocks = f.read().split("```")[1::2]
    programs = [b.lstrip("\n") for b in blocks if b.lstrip("\n").startswith(("target", "const", "kernel"))]
    assert len(programs) >= 2
    for program in programs:
        parse(program, "language.md")


# ---------------------------------------------------------------------------
# Layout heads as names
# ---------------------------------------------------------------------------


def test_layout_heads_name_variables_where_no_layout_is_written():
    """O (every attention kernel's output), R, SW and S are free names; the
    same words still head layout literals, which print and parse back."""
    src = (
        "const L = S[(128, 64) : (1@TLane, 1@TCol)] + R[4 : 32@TLane] + O[5@TCol, 3]\n"
        "const W = SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)]\n\n"
        "kernel k(O: f32[64], S: f32[64], R: i32[4]):\n"
        "    t = thread_id([64])\n"
        "    SW: f32 = 1.0\n"
        "    O[t] = O[t] * 2.0 + SW\n"
        "    O[0:4] = O[4:8]\n"
        "    R[0] = R[1] + 1\n"
        "    p = S.ptr_to([0])\n"
    )
    m = parse(src)
    assert print_module(m) == src
    assert parse(print_module(m)) == m
    body = m.kernels[0].body
    assert body[2].targets[0] == ir.Index(ir.Name("O"), (ir.Name("t"),))
    lit = m.consts[0].value
    assert isinstance(lit, ir.LayoutLit) and len(lit.offset) == 2 and len(lit.replica) == 1


def test_a_layout_where_a_value_is_expected_says_to_rename_S():
    from emit_util import build

    with pytest.raises(TilecError, match="a buffer named 'S' cannot be indexed or sliced: rename it") as info:
        build("kernel k(S: f32[4], B: f32[4]):\n    cta_id([1])\n    B[0] = S[1]\n")
    assert info.value.span.line == 3


def test_a_region_of_S_in_a_tile_primitive_says_to_rename_S():
    """`S[0:64]` parses (a layout of one iterator); as copy's operand it is
    a layout, and the error says why a buffer named S does not work."""
    from tilec.pipeline import compile_source

    with pytest.raises(TilecError, match="the destination of copy must be a buffer or a region of one, not a "
                                         "layout; S.*cannot be indexed or sliced: rename it") as info:
        compile_source("target sm_90a\nkernel k(A: f32[128]):\n    t = thread_id([128])\n"
                       "    S = alloc_shared((128,), f32)\n    copy(S[0:64], A[0:64])\n")
    assert (info.value.span.line, info.value.span.col) == (5, 10)


def test_layout_heads_as_keyword_argument_names():
    """(a fuzz find: `R=` read as the start of a layout literal)"""
    m = parse("kernel k():\n    a += a(R=(), S=1, SW=2, O=3)\n")
    assert [k.name for k in m.kernels[0].body[0].value.kwargs] == ["R", "S", "SW", "O"]
    assert parse(print_module(m)) == m


def test_ir_depth_stops_at_its_room_and_measures_a_shared_subtree_once():
    """check_printable measures each statement no deeper than the depth that
    decides whether it is printed, and a subtree shared by many uses once: a
    chain of 200 sums each adding the last to itself (2**200 paths) is
    measured at once, capped or exact."""
    from tilec.grammar.parser import _ir_depth

    e = ir.Name("x")
    for i in range(200):
        e = ir.Binary("+", e, e) if i % 3 else ir.Binary("*", ir.Int(3), e)
        assert _ir_depth(e, 34, {}) == min(i + 2, 34)
    assert _ir_depth(e, 500, {}) == 201
    # an unshared tree: the deepest path counts, wherever it is
    value = ir.Binary("+", ir.Int(1), ir.Binary("*", ir.Name("a"), ir.Unary("-", ir.Name("b"))))
    stmt = ir.Assign((ir.Name("y"),), value)
    assert _ir_depth(stmt, 34, {}) == 5
    assert _ir_depth(stmt, 3, {}) == 3

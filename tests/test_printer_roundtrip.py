"""The printer's laws: `parse(print_module(m)) == m` for every module and
`print_module(parse(t)) == t` for canonical text; plus the canonical form
itself and the nodes that have no text."""
import glob
import os
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

import strategies
from tilec.compiler import ir
from tilec.compiler.printer import print_expr, print_module, print_stmt
from tilec.grammar.parser import parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.tile"), recursive=True))
SEED_PORTS = [
    "gemm_mma_16x8x16.tile", "gemm_async_tcgen05.tile", "smem_tmem_copy.tile", "tma_copy.tile",
    "hgemm_v4.tile", "hgemm_v5.tile", "hgemm_v6.tile",
]
def fuzz(n):
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_seed_has_its_port():
    assert set(SEED_PORTS) <= {os.path.basename(p) for p in EXAMPLES}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_examples_round_trip(path):
    with open(path, encoding="utf-8") as f:
        module = parse(f.read(), path)
    text = print_module(module)
    assert parse(text) == module
    assert print_module(parse(text)) == text


@fuzz(60)
@given(strategies.modules())
def test_random_modules_round_trip(module):
    text = print_module(module)
    assert parse(text) == module
    assert print_module(parse(text)) == text


@fuzz(200)
@given(strategies.exprs(16))
def test_random_expressions_round_trip(e):
    assert parse(f"const X = {print_expr(e)}\n").consts[0].value == e


@fuzz(100)
@given(strategies.stmts())
def test_random_statements_round_trip(s):
    text = "kernel k():\n" + print_stmt(s, indent=1)
    assert parse(text).kernels[0].body == (s,)


CANONICAL = '''\
target sm_100a

const M = 4096
const L = SW[3, 3, 3] * S[(8, 4, 64) : (64, 512, 1)] + R[4 : 32@TLane] + O[5@TCol, 3]
const FRAG = S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]
const ROW = S[8, 256]
const ONE = S[8 : -1]

inline def helper(x, y):
    return_value = x + y

kernel gemm(A: f16[M, K], B: f16[N, K] layout S[N, K], n: i32):
    bx, by = cta_id([M // 128, N // 128])
    kp, kHi = s % 2, s // 2 % 2
    t = (1, 2)
    u = (1,)
    phase: i32 = 0
    meta m_st = bx * 128
    x = a - (b - c) + -3 - -(3) * ~d
    y = (a < b) == (not c) and (d or e)
    z = a if b else c if d else e
    w = (a if b else c) if d else e
    v = (3).bit_length() + f(1, k=2, **cfg)[0, :, 1:2, m_st : m_st + 128, : n + 1, ts.m:]
    for k in range(K // 64):
        if k == 0:
            copy_async(buf[:, :], A[m_st : m_st + 128, :], dispatch="tma", mbar=bar.ptr_to([0]))
        elif k == 1:
            ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 16384)
        else:
            pass
    for s in unroll(2, 8):
        pass
    for s in range(0, 8, 2):
        while ts.valid():
            phase ^= 1
    if a:
        pass
    else:
        if b:
            pass
        x = 1
    tensormap A_tmap0 = tensormap(A, f16, dims=(64, 8, 4), swizzle="128B")
    warp.gemm(D, A, B, D, transpose_A=False, alpha=1.0, beta=0.0)
    s = "a \\"quoted\\" \\\\ string\\n"
'''


def test_canonical_text_is_a_fixed_point():
    assert print_module(parse(CANONICAL)) == CANONICAL


def test_printing_normalises_layout_and_spacing():
    src = textwrap.dedent(
        """\
        const  A = 0x10
        const L = S[ (8,) : (1 @ x,) ] + R[(4,) : (32,)]
        kernel k(  ):
              if a :
                    x = ( 1 , 2 )[ 0:8 ]
              else :
                    if b:
                          pass
        """
    )
    assert print_module(parse(src)) == textwrap.dedent(
        """\
        const A = 16
        const L = S[8 : 1@x] + R[4 : 32]

        kernel k():
            if a:
                x = (1, 2)[0:8]
            elif b:
                pass
        """
    )


@pytest.mark.parametrize(
    "node, text",
    [
        (ir.Unary("-", ir.Int(3)), "-(3)"),
        (ir.Unary("-", ir.Float(2.5)), "-(2.5)"),
        (ir.Unary("-", ir.Int(-3)), "--3"),
        (ir.Int(-3), "-3"),
        (ir.Float(1e16), "1e+16"),
        (ir.Attr(ir.Int(3), "x"), "(3).x"),
        (ir.Index(ir.Int(-3), (ir.Int(0),)), "(-3)[0]"),
        (ir.Binary("-", ir.Name("a"), ir.Binary("-", ir.Name("b"), ir.Name("c"))), "a - (b - c)"),
        (ir.Binary("<", ir.Binary("<", ir.Name("a"), ir.Name("b")), ir.Name("c")), "(a < b) < c"),
        (ir.Binary("*", ir.Name("a"), ir.LayoutLit((ir.LayoutIter(ir.Int(8), ir.Int(1)),), swizzle=(ir.Int(1),) * 3)),
         "a * (SW[1, 1, 1] * S[8 : 1])"),
        (ir.LayoutLit((ir.LayoutIter(ir.TupleExpr((ir.Int(1), ir.Int(2))), ir.Int(1)),)), "S[((1, 2),) : (1,)]"),
        (ir.Str('say "hi"\n'), '"say \\"hi\\"\\n"'),
        (ir.DictExpr(("a",), (ir.Int(1),)), '{"a": 1}'),
    ],
)
def test_expression_text(node, text):
    assert print_expr(node) == text
    assert parse(f"const X = {text}\n").consts[0].value == node


def test_print_stmt_indents_and_ends_lines():
    loop = ir.For("i", "range", ir.Int(0), ir.Name("n"), ir.Int(1), (ir.Pass(),))
    assert print_stmt(loop, indent=1) == "    for i in range(n):\n        pass\n"
    assert print_stmt(ir.Meta("m", ir.Int(1))) == "meta m = 1\n"


@pytest.mark.parametrize(
    "node",
    [
        ir.For("i", "range", ir.Int(0), ir.Int(4), ir.Int(1), ()),
        ir.ExprStmt(ir.Call("a.b")),
        ir.ExprStmt(ir.Float(float("nan"))),
        ir.ExprStmt(ir.Index(ir.Name("a"), ())),
        ir.TensorMap("t", ir.Call("alloc")),
        ir.ExprStmt(ir.LayoutLit(())),
        ir.ExprStmt(ir.LayoutLit((ir.LayoutIter(ir.Int(8)),), offset=(ir.LayoutIter(ir.Int(2), ir.Int(1)),))),
    ],
)
def test_nodes_without_text_are_rejected(node):
    with pytest.raises(ValueError):
        print_stmt(node)

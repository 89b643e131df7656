"""The canonicalize-layouts pass: on every example, every buffer's layout
maps every element of the buffer where it did before, the pass is
idempotent, and its output round-trips through the printer and parser.
Small programs pin the spellings it produces."""
import itertools
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tilec.compiler import ir, layout, targets
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout_ir import to_layout, to_lit
from tilec.compiler.passmanager import Options, PassContext
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.compiler.symbols import analyze_kernel
from tilec.grammar.parser import parse
from tilec.passes.canonicalize_layouts import CanonicalizeLayouts, canonicalize_module
from tilec.passes.infer_scope import _layout_scope
from test_layout_props import layout_and_shape

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("examples/hopper/*.tile"))


def folded(text, filename="t.tile"):
    """The module after fold-constants (the pass's input) and its target."""
    result = compile_source(text, filename, options=Options(stop_after="fold-constants"))
    target = targets.target(result.module.target or targets.DEFAULT_TARGET)
    return result.module, target


def canonical(module, target):
    return CanonicalizeLayouts().apply(module, PassContext(target=target))


def buffer_layouts(module, target):
    """{(kernel, buffer): (shape, LayoutLit)} for every buffer with a literal layout."""
    out = {}
    for k in module.kernels:
        for buf in analyze_kernel(k, module, target).buffers.values():
            if isinstance(buf.layout, ir.LayoutLit):
                out[k.name, buf.name] = (buf.shape, buf.layout)
    return out


def assert_same_mapping(before, after, shape=None):
    """Every element lands at the same place under both literals (trivially
    so when the pass left the literal as it was)."""
    if before == after:
        return
    old, new = to_layout(before), to_layout(after)
    if shape is None:
        coords = range(layout.size(old))
    else:
        coords = itertools.product(*(range(e) for e in shape))
    for c in coords:  # an axis left out of apply's answer is at 0
        a, b = layout.apply(old, c, shape), layout.apply(new, c, shape)
        assert {k: v for k, v in a.items() if v} == {k: v for k, v in b.items() if v}, (c, str(old), str(new))


def test_examples_are_found():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_example_layouts_keep_their_mapping(path):
    module, target = folded(path.read_text(), str(path))
    after = canonical(module, target)

    before_bufs, after_bufs = buffer_layouts(module, target), buffer_layouts(after, target)
    assert before_bufs.keys() == after_bufs.keys()
    checked = set()
    for key, (shape, old) in before_bufs.items():
        new_shape, new = after_bufs[key]
        assert new_shape == shape
        to_layout(new, shape)  # still groups by the buffer's shape
        if (shape, old, new) not in checked:
            assert_same_mapping(old, new, shape)
            checked.add((shape, old, new))

    for c_old, c_new in zip(module.consts, after.consts):
        if isinstance(c_old.value, ir.LayoutLit):
            assert_same_mapping(c_old.value, c_new.value)

    assert canonical(after, target) == after
    assert parse(print_module(after), "again.tile") == after


def src(text):
    return textwrap.dedent(text).strip() + "\n"


PROGRAM = src(
    """
    target sm_90a
    const L = S[(4, 32) : (1@wid_in_wg, 1@laneid)]

    kernel k(A: f16[8, 256] layout S[8, 256], n: i32):
        cta_id([1])
        warpgroup_id([1])
        w = warp_id_in_wg([4])
        lane = lane_id([32])
        regs = alloc_local((2,), f32)
        wide = regs.view(128, 2, layout=S[(1, 4, 32, 2) : (7, 1@wid_in_wg, 1@laneid, 1)])
        tile = alloc((16, 8), f32, scope="shared", layout=S[(16, 8) : (8, 1)] + O[0@m])
        same = alloc((16, 8), f32, scope="shared", layout=S[(16, 8) : (1, 16)])
    """
)


def test_spellings():
    module, target = folded(PROGRAM)
    out = canonical(module, target)
    expected = parse(
        src(
            """
            target sm_90a
            const L = S[128 : 1@tid_in_wg]

            kernel k(A: f16[8, 256] layout S[2048 : 1], n: i32):
                cta_id([1])
                warpgroup_id([1])
                w = warp_id_in_wg([4])
                lane = lane_id([32])
                regs = alloc_local((2,), f32)
                wide = regs.view(128, 2, layout=S[(128, 2) : (1@tid_in_wg, 1)])
                tile = alloc((16, 8), f32, scope="shared", layout=S[128 : 1])
                same = alloc((16, 8), f32, scope="shared", layout=S[(16, 8) : (1, 16)])
            """
        ),
        "expected.tile",
    )
    assert out == expected


def test_spans_point_at_the_written_layout():
    module, target = folded(PROGRAM)
    out = canonical(module, target)
    tile_stmt = out.kernels[0].body[6]
    lit = tile_stmt.value.kwargs[-1].value
    assert lit.span is not None and lit.span.line == 11
    assert all(it.span == lit.span for it in lit.shard)
    # An already canonical literal is kept as written, spans and all.
    same = out.kernels[0].body[7].value.kwargs[-1].value
    written = module.kernels[0].body[7].value.kwargs[-1].value
    assert [it.extent.span for it in same.shard] == [it.extent.span for it in written.shard]
    assert same.shard[1].extent.span != same.span


def test_a_bad_const_layout_is_a_located_error():
    module, target = folded(src("const L = S[(2, 40) : (1, 1@laneid)]\n"))
    with pytest.raises(TilecError) as info:
        canonical(module, target)
    assert info.value.span is not None and info.value.span.line == 1
    assert "laneid" in info.value.message


def test_runs_right_after_fold_constants():
    result = compile_source(PROGRAM, "t.tile", options=Options(stop_after="canonicalize-layouts"))
    assert list(result.timings)[-2:] == ["fold-constants", "canonicalize-layouts"]


def _sites(lit, shape):
    """A module with `lit` at every place a buffer's layout is written."""
    dims = ir.TupleExpr(tuple(ir.Int(e) for e in shape))
    kw = (ir.Keyword("layout", lit),)
    allocs = [
        ir.Call("alloc_local", (dims, ir.DTypeLit("f32")), kw),
        ir.Call("decl_buffer", (dims, ir.DTypeLit("f32")), kw),
        ir.Method(ir.Name("pool"), "alloc", (dims, ir.DTypeLit("f32")), kw),
        ir.Method(ir.Name("r"), "view", tuple(ir.Int(e) for e in shape), kw),
    ]
    body = tuple(ir.Assign((ir.Name(f"b{i}"),), a) for i, a in enumerate(allocs))
    param = ir.Param("A", "f32", tuple(ir.Int(e) for e in shape), lit)
    return ir.Module(None, (ir.Const("L", lit),), (), (ir.Kernel("k", (param,), body),))


def _site_layouts(module):
    kernel = module.kernels[0]
    return [module.consts[0].value, kernel.params[0].layout] + [s.value.kwargs[0].value for s in kernel.body]


@settings(max_examples=40, deadline=None)
@given(layout_and_shape(), st.booleans())
def test_random_layouts_keep_their_mapping_at_every_site(case, shape_only):
    value, shape = case
    lit = to_lit(value)
    if shape_only:  # the row-major spelling S[e0, e1, ...]
        lit = ir.LayoutLit(tuple(ir.LayoutIter(ir.Int(e)) for e in shape))
    module = _sites(lit, shape)
    out = canonicalize_module(module)
    canonical = to_lit(layout.canonicalize(to_layout(lit)))
    for after in _site_layouts(out):
        assert after == canonical
    assert_same_mapping(lit, canonical, shape)
    assert canonicalize_module(out) == out


def test_a_thread_axis_named_at_zero_keeps_the_buffer_scope():
    """Issue 18 item 3: `O[0@wgid]` beside lanes is the CTA's threads 0-15, written
    `S[16 : 1@tx]`; a thread axis that only a zero offset names stays as `O[0@axis]`,
    and infer-scope reads the same scope before and after the pass."""
    module, target = folded(src(
        """
        target sm_90a
        kernel k(A: f32[16]):
            cta_id([1])
            lane = lane_id([32])
            a = alloc((16,), f32, scope="local", layout=S[16 : 1@laneid] + O[0@wgid])
            b = alloc((4,), f32, scope="local", layout=S[(4, 1) : (1, 1@laneid)] + O[0@m])
        """
    ))
    out = canonical(module, target)
    assert [str(to_layout(lit)) for _, lit in buffer_layouts(out, target).values()] == [
        "S[16 : 1@tx]", "S[4 : 1] + O[0@laneid]"]
    for (_, old), (_, new) in zip(buffer_layouts(module, target).values(), buffer_layouts(out, target).values()):
        assert _layout_scope(old) == _layout_scope(new)
    assert [_layout_scope(lit) for _, lit in buffer_layouts(out, target).values()] == ["cta", "warp"]

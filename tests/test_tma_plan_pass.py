"""The plan-tma pass: tensormap statements and annotated copy_async calls.

The annotation is checked end to end: the `tma_issues` expressions the pass
writes are evaluated at sample values of the kernel's variables and played
through the brute-force TMA model (tests/tma_sim.py) with the descriptor of
the tensormap statement; the result must be the copy the layouts describe."""
import textwrap

import pytest

from tilec.compiler import ir, targets, visit
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.layout_ir import to_layout
from tilec.compiler.passmanager import PassContext, order_passes
from tilec.compiler.printer import print_expr, print_module
from tilec.compiler.symbols import analyze_kernel
from tilec.compiler.tma_planner import Affine, TmaIssue, TmaPlan
from tilec.compiler.visit import walk
from tilec.grammar.parser import parse
from tilec.passes.emit_ptx.metadata import tensormap_entry
from tilec.passes.canonicalize_layouts import CanonicalizeLayouts
from tilec.passes.expand_inline import ExpandInline
from tilec.passes.fold_constants import FoldConstants
from tilec.passes.infer_scope import InferScope
from tilec.passes.lower_scheduler import LowerScheduler
from tilec.passes.parse import Parse
from tilec.passes.plan_smem import PlanSmem
from tilec.passes.plan_tma import PlanTma
from tma_sim import intended, simulate

FRONT = (ExpandInline(), FoldConstants(), LowerScheduler(), CanonicalizeLayouts(), InferScope(), PlanSmem())


def run(text, target="sm_90a"):
    text = textwrap.dedent(text).strip() + "\n"
    ctx = PassContext(targets.target(target), "t.tile", text)
    module = parse(text, "t.tile")
    for p in FRONT + (PlanTma(),):
        module = p.apply(module, ctx)
    assert parse(print_module(module), "t.tile") == module
    return module


def tensormaps(module):
    return {s.name: s for s in module.kernels[0].body if isinstance(s, ir.TensorMap)}


def copies(module):
    return [n for n in walk(module.kernels[0]) if isinstance(n, ir.Call) and n.func.endswith("copy_async")]


def kwargs(call):
    return {k.name: k.value for k in call.kwargs if k.name}


GEMM = """
const M = 256
const K = 512
kernel k(A: f16[M, K], D: f16[M, 128]):
    bx = cta_id([M // 128])
    w = warp_id_in_wg([4])
    lane = lane_id([32])
    pool = smem_pool()
    bar = pool.alloc((2,), u64, align=8)
    pool.move_base_to(1024)
    As = pool.alloc((2, 128, 64), f16, layout=tma_shared_layout(f16, SWIZZLE_128B_ATOM, (2, 128, 64)))
    Ds = pool.alloc((128, 128), f16, layout=tma_shared_layout(f16, SWIZZLE_128B_ATOM, (128, 128)))
    pool.commit()
    meta m_st = bx * 128
    if w == 0 and lane == 0:
        for s in range(2):
            copy_async(As[s, :, :], A[m_st : m_st + 128, s * 64 : s * 64 + 64], dispatch="tma", mbar=bar.ptr_to([s]))
    for k in range(K // 64):
        stage = k % 2
        if w == 0 and lane == 0:
            copy_async(As[stage, :, :], A[m_st : m_st + 128, k * 64 : (k + 1) * 64], mbar=bar.ptr_to([stage]))
    if w == 0 and lane == 0:
        copy_async(D[m_st : m_st + 128, :], Ds[:, :], dispatch="tma", oob="zero")
"""


def test_gemm_loads_share_one_descriptor_and_the_store_has_its_own():
    m = run(GEMM)
    maps = tensormaps(m)
    assert list(maps) == ["A_tmap0", "D_tmap0"]
    assert m.kernels[0].body[:2] == tuple(maps.values())
    a = tensormap_entry(maps["A_tmap0"])
    assert a == {
        "name": "A_tmap0", "tensor": "A", "dtype": "f16", "rank": 2, "dims": [512, 256], "strides": [1024],
        "box": [64, 128], "elem_strides": [1, 1], "interleave": "none", "swizzle": "128B",
        "l2_promotion": "128B", "oob_fill": "zero",
    }
    assert tensormap_entry(maps["D_tmap0"])["box"] == [64, 128, 2]
    prefetch, loop, store = copies(m)
    assert [kwargs(c)["tmap"].value for c in (prefetch, loop, store)] == ["A_tmap0", "A_tmap0", "D_tmap0"]
    assert print_expr(kwargs(loop)["tma_issues"]) == "[((k * 64, bx * 128), stage * 8192)]"
    assert print_expr(kwargs(prefetch)["tma_issues"]) == "[((s * 64, bx * 128), s * 8192)]"
    assert print_expr(kwargs(store)["tma_issues"]) == "[((0, bx * 128, 0), 0)]"
    assert list(kwargs(loop)) == ["mbar", "tmap", "tma_issues"]


def plan_of(stmt: ir.TensorMap, call: ir.Call, env: dict, direction: str) -> TmaPlan:
    """The plan the pass wrote, with the issue expressions evaluated at `env`."""
    entry = tensormap_entry(stmt)
    issues = []
    for item in kwargs(call)["tma_issues"].items:
        coords, offset = item.items
        issues.append(TmaIssue(tuple(Affine(value(c, env)) for c in coords.items), Affine(value(offset, env))))
    return TmaPlan(entry["dtype"], tuple(entry["dims"]), tuple(entry["strides"]), tuple(entry["box"]),
                   tuple(entry["elem_strides"]), entry["interleave"], entry["swizzle"], entry["l2_promotion"],
                   entry["oob_fill"], direction, tuple(issues), 0)


def value(e: ir.Expr, env: dict) -> int:
    """An integer expression at the variable values `env` (the printed form
    of these expressions is Python)."""
    return eval(print_expr(e), {}, dict(env))


def region_of(arg: ir.Expr, shape, env):
    if isinstance(arg, ir.Name):
        return [(0, n) for n in shape]
    out = []
    for index, n in zip(arg.indices, shape):
        if isinstance(index, ir.Slice):
            start = value(index.start, env) if index.start else 0
            stop = value(index.stop, env) if index.stop else n
            out.append((start, stop - start))
        else:
            out.append((value(index, env), 1))
    return out


def test_annotations_move_exactly_the_copied_elements():
    check_annotations(run(GEMM), [{"bx": 0, "s": 0, "k": 0, "stage": 0}, {"bx": 1, "s": 1, "k": 5, "stage": 1}])


def check_annotations(m, envs):
    """Every copy of `m`, as annotated, at each binding of `envs`: the model
    of the hardware moves what the layouts describe, clipping at the edges."""
    syms = analyze_kernel(m.kernels[0], m, targets.target("sm_90a"))
    maps = tensormaps(m)
    for call in copies(m):
        dst, src = (syms.buffer_of(a) for a in call.args)
        g, s, garg, sarg = (src, dst, *call.args[::-1]) if src.scope == "global" else (dst, src, *call.args)
        glayout, slayout = (to_layout(b.layout, b.shape) if b.layout is not None else None for b in (g, s))
        for env in envs:
            plan = plan_of(maps[kwargs(call)["tmap"].value], call, env, "g2s")
            gr, sr = region_of(garg, g.shape, env), region_of(sarg, s.shape, env)
            assert simulate(plan, 2) == intended(glayout, g.shape, slayout, s.shape, gr, sr, 2)


RAGGED = """
const N = {n}
kernel k(A: f16[256, N], D: f16[256, N]):
    bx, by = cta_id([2, (N + 127) // 128])
    t = thread_id([128])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    Ts = pool.alloc((128, 128), f16, layout=tma_shared_layout(f16, SWIZZLE_128B_ATOM, (128, 128)))
    pool.commit()
    meta m_st = bx * 128
    meta n_st = by * 128
    if t == 0:
        copy_async(Ts[:, :], A[m_st : m_st + 128, n_st : n_st + 128], dispatch="tma", mbar=bar.ptr_to([0]))
        copy_async(D[m_st : m_st + 128, n_st : n_st + 128], Ts[:, :], dispatch="tma")
"""


def test_ragged_128_wide_tiles_split_columns_only_when_exact():
    """A 128-column tile of a 128B-swizzled buffer is two 64-column atom
    columns.  At N = 136 the last tile holds 8 columns: the two atom columns
    are two issues at coordinates n and n + 64 of a descriptor dim of 136
    (one box of dims (64, 2) would clip columns 128..135 at the inner dim).
    At N = 192, whole atom rows, one box spans both atom columns."""
    envs = [{"bx": bx, "by": by} for bx in (0, 1) for by in (0, 1)]
    m = run(RAGGED.format(n=136))
    entries = [tensormap_entry(s) for s in tensormaps(m).values()]
    assert [(e["tensor"], e["dims"], e["box"]) for e in entries] == [("A", [136, 256], [64, 128]),
                                                                      ("D", [136, 256], [64, 128])]
    for call in copies(m):
        assert print_expr(kwargs(call)["tma_issues"]) == "[((by * 128, bx * 128), 0), ((by * 128 + 64, bx * 128), 8192)]"
    check_annotations(m, envs)
    m = run(RAGGED.format(n=192))
    entries = [tensormap_entry(s) for s in tensormaps(m).values()]
    assert [(e["dims"], e["box"]) for e in entries] == [([64, 256, 3], [64, 128, 2])] * 2
    for call in copies(m):
        assert print_expr(kwargs(call)["tma_issues"]) == "[((0, bx * 128, by * 2), 0)]"
    check_annotations(m, envs)


SEED = """
const SMEM_BYTES = 8 * 256 * 2
kernel tma_copy(A: f16[8, 256] layout S[8, 256]):
    cta_id([1]); tid = thread_id([8])
    dyn = alloc([SMEM_BYTES + 8], u8, scope="shared.dyn")
    A_smem = decl_buffer((8, 256), f16, data=dyn, elem_offset=0, layout=mma_shared_layout(f16, 3, (8, 256)))
    mbarrier = decl_buffer([1], u64, data=dyn, elem_offset=SMEM_BYTES // 8)
    A_tmap0 = 1
    if tid == 0:
        copy_async(A_smem[0:8, 0:256], A[0:8, 0:256], dispatch="tma", mbar=mbarrier.ptr_to([0]))
"""


def test_seed_demo_and_fresh_names():
    m = run(SEED)
    (name, stmt), = tensormaps(m).items()
    assert name == "A_tmap0_1"  # A_tmap0 is taken by a variable
    entry = tensormap_entry(stmt)
    assert (entry["rank"], entry["dims"], entry["strides"], entry["box"]) == (3, [64, 8, 4], [512, 128], [64, 8, 4])
    (call,) = copies(m)
    assert print_expr(kwargs(call)["tma_issues"]) == "[((0, 0, 0), 0)]"


def test_the_pass_is_idempotent():
    m = run(GEMM)
    again = PlanTma().apply(m, PassContext(targets.target("sm_90a")))
    assert again == m


def unplanned(module, maps):
    """`module` as it was before plan-tma, with the tensormap statements
    `maps` at the top of its kernel."""
    def strip(n):
        if isinstance(n, ir.Call) and n.func.endswith("copy_async"):
            return visit.evolve(n, kwargs=tuple(k for k in n.kwargs if k.name not in ("tmap", "tma_issues")))
        return n

    kernel = visit.transform(module.kernels[0], strip)
    body = tuple(maps) + tuple(s for s in kernel.body if not isinstance(s, ir.TensorMap))
    return visit.evolve(module, kernels=(visit.evolve(kernel, body=body),))


def test_a_tensormap_the_kernel_has_is_used_and_counted():
    m = run(GEMM)
    ctx = PassContext(targets.target("sm_90a"))
    a_map, d_map = tensormaps(m).values()
    again = PlanTma().apply(unplanned(m, [a_map]), ctx)
    assert again.kernels[0].body[:2] == (d_map, a_map) and tensormaps(again) == tensormaps(m)
    # a statement over D with another box: the store's map is D's second
    box = ir.Keyword("box", ir.TupleExpr((ir.Int(64), ir.Int(64), ir.Int(2))))
    other = ir.TensorMap("D_mine", visit.evolve(d_map.value, kwargs=tuple(
        box if k.name == "box" else k for k in d_map.value.kwargs)))
    again = PlanTma().apply(unplanned(m, [other]), ctx)
    assert list(tensormaps(again)) == ["A_tmap0", "D_tmap1", "D_mine"]
    assert tensormaps(again)["D_tmap1"].value == d_map.value


COPY = """
kernel k(A: f16[64, 64]{glayout}):
    t = thread_id([128])
    As = alloc((64, 64), f16, scope="shared", layout={slayout}, align={align})
    if t == 0:
        {call}
"""


def case(call="copy_async(As[:, :], A[:, :])", slayout="S[64, 64]", align=128, glayout=""):
    return COPY.format(call=call, slayout=slayout, align=align, glayout=glayout)


def test_which_copies_are_planned():
    assert len(tensormaps(run(case()))) == 1  # one thread, no variant named, sm_90a
    assert not tensormaps(run(case(), target="sm_80"))
    assert not tensormaps(run(case("cta.copy_async(As[:, :], A[:, :])")))
    assert not tensormaps(run(case('copy_async(As[:, :], A[:, :], dispatch="cp_async")')))
    transposed = case(glayout=" layout S[(64, 64) : (1, 64)]")
    assert not tensormaps(run(transposed))  # not expressible, and TMA was not asked for


@pytest.mark.parametrize(
    "text, needle",
    [
        (case('copy_async(As[:, :], A[:, :], dispatch="tma")', glayout=" layout S[(64, 64) : (1, 64)]"),
         "cannot transpose"),
        (case('copy_async(As[:, :], A[:, :], dispatch="tma")', align=16), "align=128"),
        (case('copy_async(As[0:t, :], A[0:t, :], dispatch="tma")'), "compile-time constant"),
        (case('copy_async(As[:, :], A[:, :], dispatch="tma", oob="nan")', slayout="S[64, 64]"), None),
        (case('copy_async(As[:, :], As[:, :], dispatch="tma")'), "between global and shared"),
    ],
)
def test_explicit_tma_reports_why_it_cannot(text, needle):
    if needle is None:
        (stmt,) = tensormaps(run(text)).values()
        assert tensormap_entry(stmt)["oob_fill"] == "nan"
        return
    with pytest.raises(TilecError) as info:
        run(text)
    assert needle in info.value.message
    assert info.value.span is not None and info.value.span.line == 5


def test_explicit_tma_on_a_target_without_it():
    with pytest.raises(TilecError, match="sm_90a"):
        run(case('copy_async(As[:, :], A[:, :], dispatch="tma")'), target="sm_80")


def test_pass_runs_after_smem_planning():
    names = [p.name for p in order_passes([PlanTma(), Parse(), *FRONT])]
    for before in ("plan-smem", "infer-scope", "canonicalize-layouts", "lower-scheduler"):
        assert names.index("plan-tma") > names.index(before)
    assert PlanTma.provides == {"tma-planned"}

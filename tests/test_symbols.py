"""The per-kernel analysis (`tilec.compiler.symbols`) and the signature
notation of the builtin and intrinsic tables."""
import pathlib

import attrs
import pytest

from emit_util import lower
from tilec.compiler import ir
from tilec.compiler.passmanager import Options, PassInstrumentation
from tilec.compiler.builtins import BUILTINS, Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.symbols import DYN_ARENA, Analyses, analyze_kernel
from tilec.compiler.targets import TARGETS
from tilec.pipeline import compile_source


def analyze(text: str, target: str = "sm_90a"):
    module = lower(text)
    return analyze_kernel(module.kernels[0], module, TARGETS[target])


SEED_POOL = """
kernel gemm(A: f16[256, 128], n: i32):
    bx, by = cta_id([2, 1])
    grp = warpgroup_id([1])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    pool = smem_pool()
    tmem_addr = pool.alloc((1,), u32)
    tma_bar = pool.alloc((2,), u64, align=8)
    mma_bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    Asmem = pool.alloc((2, 128, 64), f16)
    Bsmem = pool.alloc((2, 128, 64), f16)
    pool.commit()
    regs = alloc_local((8,), f32)
    tile = alloc((16, 16), f16, scope="shared", align=128)
    phase: i32 = 0
    tmem = decl_buffer((128, 512), f32, scope="tmem", allocated_addr=tmem_addr[0], layout=S[(128, 512) : (1@TLane, 1@TCol)])
    for k in range(n):
        stage = k % 2
        phase ^= 1
"""


def test_kinds_and_types_of_every_name():
    syms = analyze(SEED_POOL)
    kinds = {name: (s.kind, s.type) for name, s in syms.symbols.items()}
    assert kinds["A"] == ("buffer", None) and kinds["n"] == ("scalar_param", "i32")
    assert kinds["bx"] == kinds["lane"] == ("launch_id", "i32")
    assert kinds["pool"] == ("pool", None)
    assert kinds["phase"] == ("scalar", "i32")
    assert kinds["k"] == ("loop_var", "i32") and kinds["stage"] == ("value", "i32")
    assert syms.lookup("by").launch_id.dim == 1
    assert syms.buffer("A").scope == "global" and syms.buffer("A").shape == (256, 128)
    assert syms.buffer("regs").scope == "local" and syms.buffer("tile").align == 128
    tmem = syms.buffer("tmem")
    assert tmem.scope == "tmem" and isinstance(tmem.allocated_addr, ir.Index)


def test_pool_places_allocations_like_the_seed():
    syms = analyze(SEED_POOL)
    offsets = {n: (b.storage, b.byte_offset) for n, b in syms.buffers.items() if b.scope == "shared.dyn"}
    assert offsets == {
        "tmem_addr": (DYN_ARENA, 0),
        "tma_bar": (DYN_ARENA, 8),
        "mma_bar": (DYN_ARENA, 24),
        "Asmem": (DYN_ARENA, 1024),
        "Bsmem": (DYN_ARENA, 1024 + 32768),
    }
    assert syms.dynamic_smem == 1024 + 2 * 32768
    assert syms.pools["pool"].committed


def test_pool_sizes_a_padded_layout_by_its_reach():
    """A layout whose rows are padded spans more than its element count; the
    next allocation must start after the last element the layout reaches."""
    syms = analyze("""
kernel k(A: f16[64]):
    tx = thread_id([32])
    pool = smem_pool()
    a = pool.alloc((2, 8, 32), f16, layout=S[(2, 8, 32) : (2048, 128, 1)])
    b = pool.alloc((16,), f16)
    pool.commit()
""")
    reach = (1 * 2048 + 7 * 128 + 31 + 1) * 2
    assert syms.buffer("a").nbytes == reach
    assert syms.buffer("b").byte_offset >= reach


VIEWS = """
kernel k(b: f32[64], D: f32[8, 64]):
    t = thread_id([64])
    v = b.view({shape}{layout})
"""


@pytest.mark.parametrize("shape, layout, reach", [
    ("8, 64", ", layout=S[(8, 64) : (0, 1)]", 64),       # a broadcast over rows: each row is b
    ("64, 8", ", layout=S[(64, 8) : (1, 0)]", 64),       # over columns
    ("4, 8", ", layout=S[(4, 8) : (16, 1)]", 56),        # padded rows, inside
    ("2, 32", ", layout=S[2, 32]", 64),                  # row-major, all of it
    ("4, 16", "", 64),                                   # no layout: row-major
])
def test_a_view_is_as_large_as_what_its_layout_addresses(shape, layout, reach):
    """The view check compares the positions a view's layout reaches with
    its base, not its element count: a stride-0 broadcast of a vector has
    more elements than the vector but addresses only it."""
    view = analyze(VIEWS.format(shape=shape, layout=layout)).buffer("v")
    assert view.nbytes == reach * 4


@pytest.mark.parametrize("shape, layout, message", [
    ("8, 64", ", layout=S[(8, 64) : (8, 1)]", r"view \(8, 64\) reaches 120 elements of 'b', which holds 64"),
    ("2, 64", ", layout=S[(2, 64) : (0, 2)]", r"reaches 127 elements"),
    ("65", "", r"view \(65,\) has 65 elements of 'b', which holds 64"),
    ("8, 8", ", layout=S[(8, 8) : (8, 1)] + O[1]", r"reaches 65 elements"),
])
def test_a_view_past_its_base_is_refused_where_it_is_written(shape, layout, message):
    with pytest.raises(TilecError, match=message) as err:
        analyze(VIEWS.format(shape=shape, layout=layout))
    assert err.value.span is not None and (err.value.span.line, err.value.span.col) == (4, 9)


def test_launch_configuration():
    launch = analyze(SEED_POOL).launch
    assert (launch.grid, launch.block, launch.cluster) == ((2, 1, 1), (128, 1, 1), (1, 1, 1))
    assert [i.level for i in launch.ids] == ["cta", "cta", "warpgroup", "warp_in_wg", "lane"]


@pytest.mark.parametrize("decls, block", [
    ("grp = warpgroup_id([2])\n    w = warp_id_in_wg([4])\n    l = lane_id([32])", 256),
    ("w = warp_id([4])\n    l = lane_id([32])", 128),
    ("t = thread_id([8])", 8),
    ("l = lane_id([16])", 16),
    ("grp = warpgroup_id([3])\n    t = thread_id_in_wg([128])", 384),
    ("w = warp_id_in_wg([4])", 128),
    ("pass", 1),
])
def test_block_size_is_the_product_of_thread_extents(decls, block):
    assert analyze(f"kernel k():\n    {decls}\n").launch.block == (block, 1, 1)


def test_cluster_shape():
    launch = analyze("kernel k():\n    b = cta_id([8])\n    c = cta_id_in_cluster([2])\n").launch
    assert launch.grid == (8, 1, 1) and launch.cluster == (2, 1, 1)


@pytest.mark.parametrize("text, message, line", [
    ("kernel k():\n    grp = warpgroup_id([2])\n    w = warp_id_in_wg([2])\n", "would not tile the block", 3),
    ("kernel k():\n    b = cta_id([3])\n    c = cta_id_in_cluster([2])\n", "whole number of clusters", 1),
    ("kernel k():\n    w = warp_id([40])\n", "out of range", 2),
    ("kernel k():\n    a, b = cta_id([4])\n", "assigned to 2", 2),
    ("kernel k():\n    t = thread_id([4])\n    u = thread_id([4])\n", "declared twice", 3),
])
def test_bad_launch_declarations(text, message, line):
    with pytest.raises(TilecError, match=message) as err:
        analyze(text)
    assert err.value.span.line == line


def test_clusters_need_hopper():
    with pytest.raises(TilecError, match="clusters need sm_90a"):
        analyze("kernel k():\n    b = cta_id([4])\n    c = cta_id_in_cluster([2])\n", "sm_80")


@pytest.mark.parametrize("body, message, line", [
    ("x = y + 1", "'y' is not defined", 2),
    ("for i in range(4):\n        x = i\n    z = x", "outside the block", 4),
    ("x = 1\n    x = 2", "already defined.*'x: i32 = \\.\\.\\.'", 3),
    ("b = alloc((4,), f32, scope=\"shared\")\n    if True:\n        pass\n    b = alloc((4,), f32, scope=\"shared\")",
     "already defined", 5),
    ("for i in range(4):\n        i = 3", "cannot assign to loop variable 'i'", 3),
    ("t = thread_id([4])\n    x = t / 2", "use '//'", 3),
    ("x: f32 = 1.5\n    D[0] = x", "cannot store a f32 into f16 buffer 'D'", 3),
    ("x: i8 = 0", "use i32", 2),
    ("x = D[0, 1]", "has 1 dimension", 2),
    ("x = frob(1)", "unknown function 'frob'", 2),
    ("x = fill(D[0:8], 0.0)", "fill\\(\\.\\.\\.\\) is a statement, not a value", 2),
    ("x = ptx.frob(1)", "unknown intrinsic 'ptx.frob'", 2),
    ("b = alloc((4,), f32)", "missing argument 'scope'", 2),
    ("b = alloc((4,), f32, scope=\"texture\")", "'scope' must be one of", 2),
    ("p = smem_pool()\n    p.commit()\n    q = p.alloc((4,), f32)", "already committed", 4),
    ("p = smem_pool()\n    a = p.alloc((64,), u8)\n    p.move_base_to(16)", "move back", 4),
    ("D.frob()", "has no method 'frob'", 2),
    ("x = D.ptr_to([0]).frob", "unknown attribute", 2),
    ("ptx.mbarrier.init(1)", "missing argument 'count'", 2),
    ("t = thread_id([4])\n    t = 2", "cannot assign to launch id 't'", 3),
    ("if 1:\n        pass", "condition must be bool", 2),
    ("x = address_of(D) * 2", "not defined on addresses", 2),
])
def test_located_user_errors(body, message, line):
    with pytest.raises(TilecError, match=message) as err:
        analyze(f"kernel k(D: f16[8]):\n    {body}\n")
    assert err.value.span is not None and err.value.span.line == line


@pytest.mark.parametrize("dtype", ["e2m1", "ue8m0", "tf32"])
@pytest.mark.parametrize("body", ["E[1] = 0", "E[1] = 1.0", "x = E[1]"])
def test_packed_elements_are_neither_read_nor_written_one_by_one(dtype, body):
    """fp4, ue8m0 and tf32 elements move only through the tile primitives: a
    store of a literal into one was an internal error in emit-ptx (found by
    test_fuzz's mutated gemm_small_m_split_k), a read was already refused."""
    with pytest.raises(TilecError, match=f"{dtype} elements are not scalar values") as err:
        analyze(f"kernel k(E: {dtype}[8]):\n    {body}\n")
    assert err.value.span.line == 2 and err.value.span.col == body.index("E[1]") + 5


def test_a_tuple_at_two_uses_is_checked_again_where_its_names_are_not_visible():
    """The analysis checks a tuple object met again (a wgmma group's register
    tuple) once while the block it was checked in is open; past that block,
    its names are checked again."""
    module = lower(
        "kernel k():\n"
        "    t = thread_id([32])\n"
        "    S = alloc((64,), f16, scope=\"shared\")\n"
        "    for i in range(2):\n"
        "        r = alloc_local((2,), f16)\n"
        "        ptx.ldmatrix((r[0], r[1]), S.ptr_to([0]), num=1)\n"
        "        ptx.ldmatrix((r[0], r[1]), S.ptr_to([0]), num=1)\n"
        "    ptx.ldmatrix((t, t), S.ptr_to([0]), num=1)\n"
    )
    k = module.kernels[0]
    loop, last = k.body[2], k.body[3]
    regs = loop.body[1].expr.args[0]
    inner = attrs.evolve(loop.body[2], expr=attrs.evolve(loop.body[2].expr, args=(regs,) + loop.body[2].expr.args[1:]))
    after = attrs.evolve(last, expr=attrs.evolve(last.expr, args=(regs,) + last.expr.args[1:]))
    loop = attrs.evolve(loop, body=(loop.body[0], loop.body[1], inner))
    analyze_kernel(attrs.evolve(k, body=k.body[:2] + (loop,)), module, TARGETS["sm_90a"])  # one block: fine
    with pytest.raises(TilecError, match="'r' is used outside the block that defines it") as err:
        analyze_kernel(attrs.evolve(k, body=k.body[:2] + (loop, after)), module, TARGETS["sm_90a"])
    assert err.value.span.line == 6


def test_sibling_blocks_may_reuse_a_name():
    syms = analyze("kernel k(D: i32[8]):\n    for s in range(4):\n        D[s] = s\n    for s in range(2):\n        D[s] = 0\n")
    assert syms.lookup("s").kind == "loop_var"


@pytest.mark.parametrize("text, expected", [
    ("n + 1", "i32"),
    ("u + 1", "u32"),
    ("u + n", "u32"),
    ("w + n", "i64"),
    ("w + 4294967296", "i64"),
    ("n + 4294967296", "i64"),
    ("x * 2", "f32"),
    ("h + 1.0", "f16"),
    ("h + b", "f32"),
    ("h + x", "f32"),
    ("n < 3", "bool"),
    ("n < 3 and not (u == 2)", "bool"),
    ("n if n > 0 else u", "u32"),
    ("A[0]", "f16"),
    ("C[0]", "i32"),
    ("Sm.ptr_to([1])", "shared_ptr"),
    ("A.ptr_to([1])", "global_ptr"),
    ("address_of(Sm[2]) - address_of(Sm)", "i32"),
    ("convert(x, bf16)", "bf16"),
    ("pack_f16x2(x, 1.0)", "u32"),
    ("reinterpret(x, u32)", "u32"),
    ("min(n, 3)", "i32"),
    ("ptx.elect_sync()", "bool"),
])
def test_expression_types(text, expected):
    syms = analyze(
        "kernel k(A: f16[4], C: i8[4], n: i32, u: u32, w: i64, x: f32, h: f16, b: bf16):\n"
        "    Sm = alloc_shared((4,), f32)\n"
        f"    e = {text}\n"
    )
    assert syms.lookup("e").type == expected


# --------------------------------------------------------------------------
# Signatures
# --------------------------------------------------------------------------


def test_signature_text_round_trips():
    text = "shape: shape, dtype: dtype, *, scope: str(shared|local) = \"shared\", align: int = 0"
    sig = Signature.parse(text)
    assert Signature.parse(str(sig)) == sig
    assert [p.keyword_only for p in sig.params] == [False, False, True, True]
    assert sig.params[2].choices == ("shared", "local")


def test_variadic_parameters_collect_positionals():
    sig = Signature.parse("*shape: int, layout: layout = None")
    bound = sig.bind("view", (ir.Int(4), ir.Int(8)), (), None)
    assert bound == {"shape": (ir.Int(4), ir.Int(8)), "layout": None}
    assert sig.literals("view", bound, None) == {"shape": (4, 8)}


def test_every_builtin_signature_parses_back():
    for row in BUILTINS.values():
        assert Signature.parse(str(row.signature)) == row.signature


# --------------------------------------------------------------------------
# The analyses a compile keeps (`Analyses`, on the pass context)
# --------------------------------------------------------------------------

_EXAMPLES = sorted((pathlib.Path(__file__).resolve().parent.parent / "examples").rglob("*.tile"))


def _same_analysis(kept, fresh) -> bool:
    """Equal, and in the same order where an analysis keeps one."""
    return kept == fresh and all(
        list(getattr(kept, f)) == list(getattr(fresh, f)) for f in ("symbols", "buffers", "tensormaps", "pools", "dims")
    )


class _CheckKept(PassInstrumentation):
    """After every pass, the analysis kept for each kernel of the module is
    the one a fresh analysis of that kernel gives."""

    def __init__(self):
        self.checked = 0

    def after_pass(self, p, module, ctx, position):
        current = {id(k) for k in module.kernels}
        for kernel, syms in ctx.analyses.kept():
            if id(kernel) in current:
                assert _same_analysis(syms, analyze_kernel(kernel, module, ctx.target)), (p.name, kernel.name)
                self.checked += 1


@pytest.mark.parametrize("path", _EXAMPLES, ids=[p.name for p in _EXAMPLES])
def test_kept_analyses_are_never_stale(path):
    """Passes hand the analysis of a kernel on to the passes after them
    (infer-scope, plan-smem, plan-tma); for every example, what is kept for a kernel
    after each pass equals a fresh analysis of it."""
    check = _CheckKept()
    result = compile_source(path.read_text(), filename=str(path), options=Options(instrumentations=(check,)))
    assert check.checked >= len(result.module.kernels)  # (a library of helpers has none)


_POOL_VIEWS = """
kernel k(A: f16[128, 64]):
    bx = cta_id([1])
    t = thread_id([128])
    pool = smem_pool()
    bar = pool.alloc((2,), u64, align=8)
    pool.move_base_to(1024)
    Cs = pool.alloc((64, 64), f32)
    Cv = Cs.view(64, 16, 4)
    Cw = Cv.view(4096)
    Cd = decl_buffer((32, 64), f32, data=Cs, elem_offset=2048)
    pool.commit()
    x = Cs[0, 0] + Cv[0, 0, 0] + Cw[0] + Cd[0, 0]
"""


class _AfterPlanSmem(PassInstrumentation):
    """Whether plan-smem left an analysis for each kernel it wrote (kept:
    handed on; not kept: analyzed afresh when asked)."""

    def __init__(self):
        self.kept = None

    def after_pass(self, p, module, ctx, position):
        if p.name == "plan-smem":
            held = {id(kernel) for kernel, _ in ctx.analyses.kept()}
            self.kept = [id(k) in held for k in module.kernels]


@pytest.mark.parametrize("extra, handed_on", [
    ("", True),  # one pool: its buffers, and the views and declarations over them, built again
    ("    D = alloc((16,), f32, scope=\"shared.dyn\")\n", False),  # another allocation in the arena
    ("    p2 = smem_pool()\n    E = p2.alloc((16,), f32)\n", False),  # two pools
])
def test_plan_smem_hands_its_analysis_on_where_it_can(extra, handed_on):
    """plan-smem writes a pool out as an arena with declarations over it;
    with one pool and nothing else in the arena, the analysis is handed on
    with the pool's buffers (now aligned to what their offsets guarantee:
    bar's 8 and Cs's 16 bytes become 1024, as do the views and the
    declaration over Cs) and everything declared over them built again,
    equal to a fresh analysis (`_CheckKept`); otherwise the written kernel
    is analyzed afresh."""
    check, after = _CheckKept(), _AfterPlanSmem()
    text = _POOL_VIEWS.replace("    pool.commit()\n", extra + "    pool.commit()\n")
    names = ("bar", "Cs", "Cv", "Cw", "Cd")
    assert [analyze(text).buffers[n].align for n in names] == [8, 16, 16, 16, 16]
    result = compile_source(text, "t.tile", options=Options(stop_after="plan-smem", instrumentations=(check, after)))
    assert after.kept == [handed_on] and check.checked >= 1
    syms = analyze_kernel(result.module.kernels[0], result.module, TARGETS["sm_90a"])
    assert [syms.buffers[n].align for n in names] == [1024] * 5


_INTERLEAVED = """
kernel k(out: f32[16]):
    bx = cta_id([1])
    t = thread_id([32])
{before}    pool = smem_pool()
    a = pool.alloc((16,), f32)
{between}    b = pool.alloc((16,), f32)
    x = a[0] + b[0]
"""

_D = '    D = alloc((16,), f32, scope="shared.dyn")\n'


@pytest.mark.parametrize("before, between, offsets, size", [
    # another allocation in the arena while the pool still allocates: after all of the pool's bytes
    ("", _D, {"a": 0, "b": 64, "D": 128}, 192),
    ("", _D + "    Dv = decl_buffer((4,), f32, data=D, elem_offset=4)\n", {"a": 0, "b": 64, "D": 128, "Dv": 144}, 192),
    # a second pool: its base the first 1024-byte boundary after the first pool's bytes
    ("", "    p2 = smem_pool()\n    E = p2.alloc((16,), f32)\n    c = pool.alloc((256,), f32)\n",
     {"a": 0, "c": 64, "b": 1088, "E": 2048}, 2112),
    # made before the pool: the pool's base the next 1024-byte boundary
    (_D, "", {"D": 0, "a": 1024, "b": 1088}, 1152),
])
def test_the_arena_is_placed_as_plan_smem_writes_it(before, between, offsets, size):
    """plan-smem writes a pool out as one allocation, where `smem_pool()`
    stands, of the bytes it ends up holding: what the arena holds after the
    pool comes after all of them, even when made while the pool still
    allocates.  The analysis before plan-smem places every buffer where the
    written-out kernel has it, and counts the same arena."""
    text = _INTERLEAVED.format(before=before, between=between)
    first = analyze(text)
    assert {n: first.buffers[n].byte_offset for n in offsets} == offsets
    assert first.dynamic_smem == size
    result = compile_source(text, "t.tile", options=Options(stop_after="plan-smem"))
    written = analyze_kernel(result.module.kernels[0], result.module, TARGETS["sm_90a"])
    assert {n: written.buffers[n].byte_offset for n in offsets} == offsets
    assert written.dynamic_smem == size == compile_source(text, "t.tile").meta["kernels"][0]["dynamic_smem"]


def test_carried_tensor_maps_come_after_the_parameters():
    """A tensor map put at the top of the body is defined after the
    parameters and their runtime extents, before the body's names."""
    module = lower("""
kernel k(A: f16[M, 64], x: i32):
    bx = cta_id([1])
    t = thread_id([128])
    y = x + 1
""")
    k = module.kernels[0]
    analyses = Analyses()
    syms = analyses.of(k, module, TARGETS["sm_90a"])
    tmap = ir.TensorMap("A_tmap0", ir.Call("tensormap", (ir.Name("A"), ir.DTypeLit("f16")), ()))
    planned = attrs.evolve(k, body=(tmap,) + k.body)
    analyses.carry(k, planned, module, TARGETS["sm_90a"], (tmap,))
    carried = analyses.of(planned, module, TARGETS["sm_90a"])
    assert carried is not syms and carried.kernel is planned
    assert list(carried.symbols) == ["M", "A", "x", "A_tmap0", "bx", "t", "y"]
    assert _same_analysis(carried, analyze_kernel(planned, module, TARGETS["sm_90a"]))
    assert analyses.of(k, module, TARGETS["sm_90a"]) is syms


def test_the_analysis_aligns_swizzled_shared_buffers_before_plan_smem():
    """A shared buffer with a swizzled layout is aligned to the swizzle's
    period (1024 bytes for 128B) from the first analysis on, as plan-smem
    writes it out; one without a swizzle keeps what it asked for (or 16)."""
    syms = analyze("""
kernel k(A: f16[128, 64]):
    bx = cta_id([1])
    t = thread_id([128])
    pool = smem_pool()
    bar = pool.alloc((2,), u64, align=8)
    As = pool.alloc((64, 64), f16, layout=tma_shared_layout(f16, SWIZZLE_128B_ATOM, (64, 64)))
    Cs = pool.alloc((64, 64), f32)
    Ts = alloc((8, 64), f16, scope="shared", layout=tma_shared_layout(f16, SWIZZLE_64B_ATOM, (8, 64)), align=128)
""")
    bufs = syms.buffers
    assert (bufs["bar"].align, bufs["As"].align, bufs["Cs"].align, bufs["Ts"].align) == (8, 1024, 16, 512)
    assert bufs["As"].byte_offset - syms.pools["pool"].base == 1024

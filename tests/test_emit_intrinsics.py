"""Every row of the intrinsic table, on every target: emitted and assembled
where the target has it, a located error where it does not."""
import re

import numpy as np
import pytest

from emit_util import build, run
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.intrinsics import INTRINSICS, Intrinsic
from tilec.compiler.targets import TARGETS

PRELUDE = """kernel k(D: u32[4]):
    tensormap D_tmap = tensormap(D, u32, dims=(4,), box=(4,), elem_strides=(1,), interleave="none", swizzle="none", l2_promotion="none", oob_fill="zero")
    cta_id([1])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    bar = alloc_shared((2,), u64, align=8)
    taddr = alloc_shared((1,), u32)
    acc = alloc_local((4,), f32)
    frag = alloc_local((8,), f16)
    bfrag = alloc_local((2,), bf16)
    phase: u32 = 0
    desc: u64 = 0
"""
CALL_LINE = PRELUDE.count("\n") + 1

EXAMPLES = {
    "ptx.mbarrier.init": "ptx.mbarrier.init(bar.ptr_to([1]), 128)",
    "ptx.mbarrier.arrive": "ptx.mbarrier.arrive(bar.ptr_to([0]))",
    "ptx.mbarrier.arrive.cluster": "ptx.mbarrier.arrive.cluster(bar.ptr_to([1]), 1)",
    "ptx.mbarrier.arrive.expect_tx": "ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 16384)",
    "ptx.mbarrier.try_wait": "ptx.mbarrier.try_wait(bar.ptr_to([0]), phase)",
    "ptx.fence.proxy_async": 'ptx.fence.proxy_async("shared::cta")',
    "ptx.fence.mbarrier_init": "ptx.fence.mbarrier_init()",
    "ptx.fence.acq_rel": 'ptx.fence.acq_rel("gpu")',
    "ptx.elect_sync": "D[0] = 1 if ptx.elect_sync() else 0",
    "ptx.cp_async.bulk.commit_group": "ptx.cp_async.bulk.commit_group()",
    "ptx.cp_async.bulk.wait_group": "ptx.cp_async.bulk.wait_group(0)",
    "ptx.setmaxnreg": 'ptx.setmaxnreg(240, "inc")',
    "ptx.griddepcontrol.wait": "ptx.griddepcontrol.wait()",
    "ptx.griddepcontrol.launch_dependents": "ptx.griddepcontrol.launch_dependents()",
    "ptx.tcgen05.alloc": "ptx.tcgen05.alloc(address_of(taddr), n_cols=256, cta_group=1)",
    "ptx.tcgen05.dealloc": "ptx.tcgen05.dealloc(taddr[0], n_cols=256)",
    "ptx.tcgen05.relinquish_alloc_permit": "ptx.tcgen05.relinquish_alloc_permit(cta_group=1)",
    "ptx.tcgen05.commit": "ptx.tcgen05.commit(bar.ptr_to([0]), cta_group=1)",
    "ptx.tcgen05.fence.before_thread_sync": "ptx.tcgen05.fence.before_thread_sync()",
    "ptx.tcgen05.fence.after_thread_sync": "ptx.tcgen05.fence.after_thread_sync()",
    "ptx.tcgen05.wait.ld": "ptx.tcgen05.wait.ld()",
    "ptx.tcgen05.wait.st": "ptx.tcgen05.wait.st()",
    "ptx.wgmma.fence": "ptx.wgmma.fence()",
    "ptx.wgmma.commit_group": "ptx.wgmma.commit_group()",
    "ptx.wgmma.wait_group": "ptx.wgmma.wait_group(1)",
    "ptx.wgmma.encode_matrix_descriptor": "desc = ptx.wgmma.encode_matrix_descriptor(bar.ptr_to([0]), 1, 64, 3)",
    "ptx.wgmma.mma_async": "ptx.wgmma.mma_async((acc[0], acc[1], acc[2], acc[3]), desc, desc, True, n=8, dtype=f16)",
    "ptx.wgmma.mma_async.rs": "ptx.wgmma.mma_async.rs((acc[0], acc[1], acc[2], acc[3]), "
                              "(frag[0], frag[1], frag[2], frag[3], frag[4], frag[5], frag[6], frag[7]), "
                              "desc, phase == 0, n=8, dtype=f16)",
    "ptx.mma": 'ptx.mma("m16n8k16", (acc[0], acc[1], acc[2], acc[3]), (frag[0], frag[1], frag[2], frag[3], frag[4], frag[5], frag[6], frag[7]), '
               '(frag[0], frag[1], frag[2], frag[3]), (acc[0], acc[1], acc[2], acc[3]), dtype=f16)',
    "ptx.ldmatrix": "ptx.ldmatrix((frag[0], frag[1], frag[2], frag[3]), bar.ptr_to([0]), num=2)",
    "ptx.stmatrix": "ptx.stmatrix((frag[0], frag[1]), bar.ptr_to([0]), num=1, trans=True)",
    "ptx.cvt.f16x2.f32": "ptx.cvt.f16x2.f32(frag[0], frag[1], acc[0], acc[1])",
    "ptx.cvt.bf16x2.f32": "ptx.cvt.bf16x2.f32(bfrag[0], bfrag[1], acc[0], 2.0)",
    "ptx.cp_async.bulk.tensor.g2s": "ptx.cp_async.bulk.tensor.g2s(bar.ptr_to([1]), bar.ptr_to([0]), D_tmap, (lane, 0))",
    "ptx.cp_async.bulk.tensor.s2g": "ptx.cp_async.bulk.tensor.s2g(bar.ptr_to([0]), D_tmap, (2,))",
    "cuda.cta_sync": "cuda.cta_sync()",
    "cuda.warpgroup_sync": "cuda.warpgroup_sync(3)",
    "cuda.warp_sync": "cuda.warp_sync()",
    "ptx.mov.b32.pack": "D[0] = ptx.mov.b32.pack(frag[0], frag[1])",
    "ptx.mov.b32.pack4": "D[0] = ptx.mov.b32.pack4(phase, D[1], D[2], D[3])",
    "cuda.named_barrier_sync": "cuda.named_barrier_sync(2, 256)",
    "cuda.named_barrier_arrive": "cuda.named_barrier_arrive(3, 256)",
    "cuda.cluster_sync": "cuda.cluster_sync()",
    "ptx.tcgen05.encode_matrix_descriptor": "desc = ptx.tcgen05.encode_matrix_descriptor(bar.ptr_to([0]), 16, 8, 0)",
    "ptx.tcgen05.mma": 'ptx.tcgen05.mma(taddr[0], desc, desc, phase == 0, kind="f16", a_dtype=f16, b_dtype=f16, '
                       'm=128, n=64)',
    "ptx.tcgen05.mma.block_scale": 'ptx.tcgen05.mma.block_scale(taddr[0], desc, desc, taddr[0], taddr[0], True, '
                                   'kind="mxf8f6f4", a_dtype=e4m3, b_dtype=e4m3, m=128, n=64)',
    "ptx.tcgen05.cp": 'ptx.tcgen05.cp(taddr[0], desc, shape="32x128b", multicast="warpx4")',
    "ptx.tcgen05.ld": "ptx.tcgen05.ld((acc[0], acc[1], acc[2], acc[3]), taddr[0], num=4, dtype=f32)",
    "ptx.shfl.sync.bfly": "phase = ptx.shfl.sync.bfly(phase, 1)",
    "ptx.shfl.sync.up": "phase = ptx.shfl.sync.up(phase, 1, width=16)",
    "ptx.shfl.sync.down": "acc[0] = ptx.shfl.sync.down(acc[1], 2)",
    "ptx.shfl.sync.idx": "desc = ptx.shfl.sync.idx(desc, 0)",
    "ptx.redux.sync": 'phase = ptx.redux.sync(phase, op="max")',
    "ptx.vote.sync.all": "D[0] = 1 if ptx.vote.sync.all(phase == 0) else 0",
    "ptx.vote.sync.any": "D[0] = 1 if ptx.vote.sync.any(phase == 0) else 0",
    "ptx.vote.sync.uni": "D[0] = 1 if ptx.vote.sync.uni(phase == 0) else 0",
    "ptx.vote.sync.ballot": "phase = ptx.vote.sync.ballot(lane < 4)",
    "ptx.match.sync.any": "phase = ptx.match.sync.any(desc)",
    "ptx.match.sync.all": "phase = ptx.match.sync.all(phase)",
    "ptx.activemask": "phase = ptx.activemask()",
    "ptx.atom.add": "phase = ptx.atom.add(D.ptr_to([1]), phase)",
    "ptx.atom.min": "phase = ptx.atom.min(taddr.ptr_to([0]), phase)",
    "ptx.atom.max": "desc = ptx.atom.max(bar.ptr_to([0]), desc)",
    "ptx.atom.exch": "phase = ptx.atom.exch(taddr.ptr_to([0]), 7)",
    "ptx.atom.cas": "phase = ptx.atom.cas(D.ptr_to([2]), 0, phase)",
    "ptx.red.add": 'ptx.red.add(D.ptr_to([0]), phase, packed="f16x2")',
    "ptx.red.min": "ptx.red.min(taddr.ptr_to([0]), phase)",
    "ptx.red.max": "ptx.red.max(D.ptr_to([3]), lane)",
    "ptx.cp_async": "ptx.cp_async(taddr.ptr_to([0]), D.ptr_to([0]), size=4, src_size=lane)",
    "ptx.cp_async.commit_group": "ptx.cp_async.commit_group()",
    "ptx.cp_async.wait_group": "ptx.cp_async.wait_group(1)",
    "ptx.cp_async.wait_all": "ptx.cp_async.wait_all()",
}

# The instruction each example must produce (one distinctive piece of it).
EXPECT = {
    "ptx.mbarrier.init": "mbarrier.init.shared::cta.b64 [%r{}], 128;",
    "ptx.mbarrier.arrive.expect_tx": "mbarrier.arrive.expect_tx.shared::cta.b64 _, [",
    "ptx.fence.proxy_async": "fence.proxy.async.shared::cta;",
    "ptx.fence.mbarrier_init": "fence.mbarrier_init.release.cluster;",
    "ptx.fence.acq_rel": "fence.acq_rel.gpu;",
    "ptx.elect_sync": "elect.sync _|%p",
    "ptx.cp_async.bulk.wait_group": "cp.async.bulk.wait_group 0;",
    "ptx.setmaxnreg": "setmaxnreg.inc.sync.aligned.u32 240;",
    "ptx.griddepcontrol.wait": "griddepcontrol.wait;",
    "ptx.griddepcontrol.launch_dependents": "griddepcontrol.launch_dependents;",
    "ptx.tcgen05.alloc": "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [",
    "ptx.tcgen05.dealloc": "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r",
    "ptx.tcgen05.relinquish_alloc_permit": "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
    "ptx.tcgen05.commit": "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [",
    "ptx.tcgen05.fence.before_thread_sync": "tcgen05.fence::before_thread_sync;",
    "ptx.tcgen05.fence.after_thread_sync": "tcgen05.fence::after_thread_sync;",
    "ptx.tcgen05.wait.ld": "tcgen05.wait::ld.sync.aligned;",
    "ptx.tcgen05.wait.st": "tcgen05.wait::st.sync.aligned;",
    "ptx.wgmma.fence": "wgmma.fence.sync.aligned;",
    "ptx.wgmma.commit_group": "wgmma.commit_group.sync.aligned;",
    "ptx.wgmma.wait_group": "wgmma.wait_group.sync.aligned 1;",
    "ptx.wgmma.encode_matrix_descriptor": "shr.u32 %r{}, %r{}, 4;",
    "ptx.wgmma.mma_async": "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f{}, %f{}, %f{}, %f{}}, %rd{}, %rd{}, ",
    "ptx.wgmma.mma_async.rs": "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f{}, %f{}, %f{}, %f{}}, "
                              "{%r{}, %r{}, %r{}, %r{}}, %rd{}, %p{}, 1, 1, 0;",
    "ptx.mma": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f{}, %f{}, %f{}, %f{}}, {%r{}, %r{}, %r{}, %r{}}, ",
    "ptx.ldmatrix": "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r{}, %r{}}, [%r{}];",
    "ptx.stmatrix": "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%r{}], {%r{}};",
    "ptx.cvt.f16x2.f32": "cvt.rn.f16x2.f32 %r{}, %f{}, %f{};",
    "ptx.cvt.bf16x2.f32": "cvt.rn.bf16x2.f32 %r{}, 0f40000000, %f{};",
    "ptx.cp_async.bulk.tensor.g2s": "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                                    "[%r{}], [%rd{}, {%r{}, %r{}}], [%r{}];",
    "ptx.cp_async.bulk.tensor.s2g": "cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd{}, {%r{}}], [%r{}];",
    "cuda.cta_sync": "bar.sync 0;",
    "cuda.warpgroup_sync": "bar.sync 3, 128;",
    "cuda.warp_sync": "bar.warp.sync 0xffffffff;",
    "ptx.mov.b32.pack": "mov.b32 %r{}, {%rs{}, %rs{}};",
    "ptx.mov.b32.pack4": "prmt.b32 %r{}, %r{}, %r{}, 0x5410;",
    "cuda.named_barrier_sync": "bar.sync 2, 256;",
    "cuda.named_barrier_arrive": "bar.arrive 3, 256;",
    "cuda.cluster_sync": "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;",
    "ptx.cp_async.bulk.commit_group": "cp.async.bulk.commit_group;",
    "ptx.mbarrier.arrive": "mbarrier.arrive.shared::cta.b64 _, [",
    "ptx.mbarrier.arrive.cluster": "mapa.shared::cluster.u32 %r{}, %r{}, 1;\n\t"
                                   "mbarrier.arrive.shared::cluster.b64 _, [%r{}];",
    "ptx.tcgen05.encode_matrix_descriptor": "or.b64 %rd{}, %rd{}, 0x0000400800100000;",
    "ptx.tcgen05.mma": "tcgen05.mma.cta_group::1.kind::f16 [%r{}], %rd{}, %rd{}, 0x08100010, %p{};",
    "ptx.tcgen05.mma.block_scale": "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%r{}], %rd{}, %rd{}, "
                                   "0x08900000, [%r{}], [%r{}], 1;",
    "ptx.tcgen05.cp": "tcgen05.cp.cta_group::1.32x128b.warpx4 [%r{}], %rd{};",
    "ptx.tcgen05.ld": "tcgen05.ld.sync.aligned.32x32b.x4.b32 {%f{}, %f{}, %f{}, %f{}}, [%r{}];",
    "ptx.shfl.sync.bfly": "shfl.sync.bfly.b32 %r{}, %r{}, 1, 31, 4294967295;",
    "ptx.shfl.sync.up": "shfl.sync.up.b32 %r{}, %r{}, 1, 4096, 4294967295;",
    "ptx.shfl.sync.down": "shfl.sync.down.b32 %f{}, %f{}, 2, 31, 4294967295;",
    "ptx.shfl.sync.idx": "shfl.sync.idx.b32 %r{}, %r{}, 0, 31, 4294967295;",
    "ptx.redux.sync": "redux.sync.max.u32 %r{}, %r{}, 4294967295;",
    "ptx.vote.sync.all": "vote.sync.all.pred %p{}, %p{}, 4294967295;",
    "ptx.vote.sync.any": "vote.sync.any.pred %p{}, %p{}, 4294967295;",
    "ptx.vote.sync.uni": "vote.sync.uni.pred %p{}, %p{}, 4294967295;",
    "ptx.vote.sync.ballot": "vote.sync.ballot.b32 %r{}, %p{}, 4294967295;",
    "ptx.match.sync.any": "match.any.sync.b64 %r{}, %rd{}, 4294967295;",
    "ptx.match.sync.all": "match.all.sync.b32 %r{}|%p{}, %r{}, 4294967295;",
    "ptx.activemask": "activemask.b32 %r{};",
    "ptx.atom.add": "atom.global.add.u32 %r{}, [%rd{}], %r{};",
    "ptx.atom.min": "atom.shared.min.u32 %r{}, [%r{}], %r{};",
    "ptx.atom.max": "atom.shared.max.u64 %rd{}, [%r{}], %rd{};",
    "ptx.atom.exch": "atom.shared.exch.b32 %r{}, [%r{}], 7;",
    "ptx.atom.cas": "atom.global.cas.b32 %r{}, [%rd{}], 0, %r{};",
    "ptx.red.add": "red.global.add.noftz.f16x2 [%rd{}], %r{};",
    "ptx.red.min": "red.shared.min.u32 [%r{}], %r{};",
    "ptx.red.max": "red.global.max.s32 [%rd{}], %r{};",
    "ptx.cp_async": "cp.async.ca.shared.global [%r{}], [%rd{}], 4, %r{};",
    "ptx.cp_async.commit_group": "cp.async.commit_group;",
    "ptx.cp_async.wait_group": "cp.async.wait_group 1;",
    "ptx.cp_async.wait_all": "cp.async.wait_all;",
}

CASES = [(name, target) for name in sorted(INTRINSICS) for target in TARGETS]


def test_every_row_has_an_example():
    """A new row needs an example call in EXAMPLES (one statement using the
    PRELUDE's names) and a piece of the instruction it emits in EXPECT."""
    assert sorted(EXAMPLES) == sorted(INTRINSICS)
    assert set(EXPECT) == set(INTRINSICS) - {"ptx.mbarrier.try_wait"}  # a loop: tested below


@pytest.mark.parametrize("name, target", CASES)
def test_intrinsic_on_each_target(name, target):
    row = INTRINSICS[name]
    text = PRELUDE + "    " + EXAMPLES[name] + "\n"
    if row.supported_on(TARGETS[target]):
        ptx, _ = build(text, target)
        if name in EXPECT:  # try_wait: see test_try_wait_is_a_retry_loop
            pattern = re.escape(EXPECT[name]).replace(re.escape("{}"), r"\d+")
            assert re.search(pattern, ptx), ptx
    else:
        with pytest.raises(TilecError, match=f"{re.escape(name)} is not available on {target}") as err:
            build(text, target)
        assert err.value.span.line == CALL_LINE


def test_try_wait_is_a_retry_loop():
    ptx, _ = build(PRELUDE + "    ptx.mbarrier.try_wait(bar.ptr_to([0]), phase)\n")
    m = re.search(
        r"(\$L\d+_wait):\n\tmbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[%r\d+\], %r\d+;\n\t@!\2 bra \1;",
        ptx,
    )
    assert m, ptx


def test_mbarrier_address_follows_the_element():
    """ptr_to([1]) of an u64 array is 8 bytes past the array."""
    ptx, _ = build(PRELUDE + "    ptx.mbarrier.init(bar.ptr_to([1]), 1)\n")
    base = re.search(r"mov\.u32 (%r\d+), \$shared_bar;", ptx).group(1)
    addr = re.search(rf"add\.u32 (%r\d+), {base}, 8;", ptx).group(1)
    assert f"mbarrier.init.shared::cta.b64 [{addr}], 1;" in ptx


@pytest.mark.parametrize("call, message", [
    ("cuda.warpgroup_sync(0)", r"'barrier_id' must be in \[1, 15\]"),
    ("cuda.named_barrier_sync(16, 256)", r"'barrier_id' must be in \[0, 15\]"),
    ("cuda.named_barrier_arrive(1, 100)", r"'threads' must be in \[32, 1024\] and a multiple of 32"),
    ('ptx.setmaxnreg(20, "inc")', r"'n' must be in \[24, 256\] and a multiple of 8"),
    ('ptx.setmaxnreg(64, "up")', "'action' must be one of 'inc', 'dec'"),
    ("ptx.tcgen05.alloc(address_of(taddr), n_cols=48)", "power of two"),
    ("ptx.mbarrier.init(bar.ptr_to([0]))", "missing argument 'count'"),
    ("ptx.mbarrier.init(bar.ptr_to([0]), 1, 2)", "at most 2 positional"),
    ("ptx.wgmma.wait_group(n=1, depth=2)", "no parameter 'depth'"),
    ("ptx.mbarrier.init(address_of(D), 1)", "shared-memory address"),
    ("ptx.nonexistent()", "unknown intrinsic"),
    ('ptx.fence.acq_rel("block")', "block"),
])
def test_bad_intrinsic_calls_are_located(call, message):
    target = "sm_100a" if "tcgen05" in call else "sm_90a"
    with pytest.raises(TilecError, match=message) as err:
        build(PRELUDE + "    " + call + "\n", target)
    assert err.value.span.line == CALL_LINE


# --------------------------------------------------------------------------
# Adding a row: register operands, packing, write-back
# --------------------------------------------------------------------------


def _swap_halves(e, a):
    word = e.pack_b32(a.src[0], a.src[1])
    e.unpack_b32(word, a.dst[1], a.dst[0])


NEW_ROWS = [
    Intrinsic("ptx.test.swap_halves", "dst: regs(f16), src: values(f16)", "sm_80", _swap_halves),
    Intrinsic("ptx.test.negate", "dst: reg(f32), src: value(f32)", "sm_80", "neg.f32 {dst}, {src};"),
]


@pytest.fixture
def new_rows(monkeypatch):
    for row in NEW_ROWS:
        monkeypatch.setitem(INTRINSICS, row.name, row)


def test_a_new_row_writes_register_array_elements(new_rows):
    h = np.array([1.5, -2.0, 0, 0], np.float16)
    run("""
kernel k(H: f16[4]):
    thread_id([1])
    r = alloc_local((4,), f16)
    r[0] = H[0]
    r[1] = H[1]
    ptx.test.swap_halves((r[2], r[3]), (r[0], r[1]))
    H[2] = r[2]
    H[3] = r[3]
""", {"H": h})
    assert list(h) == [1.5, -2.0, -2.0, 1.5]


def test_a_new_row_writes_back_to_memory_and_scalars(new_rows):
    f = np.array([3.0, 0, 0, 0], np.float32)
    ptx = run("""
kernel k(F: f32[4], n: i32):
    thread_id([1])
    acc = alloc_local((2,), f32)
    x: f32 = 0.0
    ptx.test.negate(acc[n], F[0])
    ptx.test.negate(x, acc[n] + 1.0)
    F[1] = acc[n]
    F[2] = x
""", {"F": f, "n": 1})
    assert list(f[1:3]) == [-3.0, 2.0]
    assert "st.local.f32" in ptx  # acc is indexed at run time: the result was stored back


def test_errors_raised_by_a_row_are_located_at_the_call(monkeypatch):
    def refuse(e, a):
        raise TilecError("this row refuses")

    monkeypatch.setitem(INTRINSICS, "ptx.test.refuse", Intrinsic("ptx.test.refuse", "", "sm_80", refuse))
    with pytest.raises(TilecError, match="refuses") as err:
        build(PRELUDE + "    ptx.test.refuse()\n")
    assert err.value.span.line == CALL_LINE


def test_a_new_row_checks_its_operands(new_rows):
    with pytest.raises(TilecError, match="must be a f32 register, got a i32") as err:
        build(PRELUDE + "    y: i32 = 0\n    ptx.test.negate(y, 1.0)\n")
    assert err.value.span.line == CALL_LINE + 1


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_kernel_that_waits_on_its_grid_dependency_says_so_in_kernel_json(target):
    """kernel.json's `grid_dependency_wait` (the runtime's cue for a
    programmatic launch) is set by a wait the kernel executes, not by
    launch_dependents alone, and not by a wait folded away."""
    waits = "    ptx.griddepcontrol.launch_dependents()\n    if HAS_WAIT:\n        ptx.griddepcontrol.wait()\n"
    for has_wait in (True, False):
        text = "const HAS_WAIT = " + str(has_wait) + "\n" + PRELUDE + waits
        ptx, meta = build(text, target)
        assert meta["kernels"][0].get("grid_dependency_wait", False) is has_wait
        assert ("griddepcontrol.wait;" in ptx) is has_wait and "griddepcontrol.launch_dependents;" in ptx
    ptx, meta = build(PRELUDE, target)
    assert "grid_dependency_wait" not in meta["kernels"][0]


def test_the_grid_dependency_pair_runs_in_the_simulator():
    """One kernel has no neighbour in flight: the pair orders nothing, and
    what follows the wait runs as written."""
    a, b = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    run("""kernel k(A: i32[64], B: i32[64]):
    t = thread_id([64])
    ptx.griddepcontrol.launch_dependents()
    ptx.griddepcontrol.wait()
    B[t] = A[t] * 3
""", {"A": a, "B": b})
    np.testing.assert_array_equal(b, np.arange(64) * 3)

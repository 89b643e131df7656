"""The protocol checks (tilec/passes/check_protocol.py): each fires, at the
statement it names, on the mistake it is about; stays quiet once the
mistake is fixed; and is silenced by `# tilec: allow(NAME)` on that line.
The examples, all correct, pass every check (test_examples_pipeline)."""
import pytest

from tilec.compiler.diagnostics import TilecError
from tilec.passes.check_protocol import CHECKS
from tilec.pipeline import compile_source

TMA = """target sm_90a
kernel k(A: f16[64, 64], B: f16[64, 64]):
    cta_id([1]); tid = thread_id([128])
    dyn = alloc([8200], u8, scope="shared.dyn")
    A_smem = decl_buffer((64, 64), f16, data=dyn, elem_offset=0, layout=SW[3, 3, 3] * S[(64, 64) : (64, 1)])
    bar = decl_buffer([1], u64, data=dyn, elem_offset=1024)
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.proxy_async("shared::cta"); cuda.cta_sync()
"""

WGMMA = """target sm_90a
const ACC = S[(2, 4, 2, 8, 16, 4, 2) : (64, 32@tid_in_wg, 2, 4@tid_in_wg, 4, 1@tid_in_wg, 1)]
kernel gemm(A: f16[128, 64], B: f16[128, 64], D: f32[128, 128]):
    cta_id([1])
    tid = thread_id([128])
    pool = smem_pool()
    Asmem = pool.alloc((128, 64), f16, layout=mma_shared_layout(f16, SWIZZLE_128B_ATOM, (128, 64)))
    Bsmem = pool.alloc((128, 64), f16, layout=mma_shared_layout(f16, SWIZZLE_128B_ATOM, (128, 64)))
    pool.commit()
    acc = alloc_local((128, 128), f32, layout=ACC)
    copy(Asmem[:, :], A[:, :])
    copy(Bsmem[:, :], B[:, :])
    {fence}
    cuda.cta_sync()
    gemm_async(acc[:, :], Asmem[:, :], Bsmem[:, :])
    ptx.wgmma.commit_group()
    {wait}
    copy(D[:, :], acc[:, :])
"""

TCGEN05 = """target sm_100a
kernel k(A: f32[4]):
    cta_id([1]); w = warp_id([4]); lane = lane_id([32])
    tmem_addr = alloc_shared([1], u32)
    bar = alloc_shared([1], u64)
    if w == 0:
        ptx.tcgen05.alloc(address_of(tmem_addr), n_cols=32, cta_group=1)
    if w == 0:
        ptx.tcgen05.commit(bar.ptr_to([0]), cta_group={group})
"""

CP_ASYNC = """target sm_80
kernel k(A: f16[64, 32], B: f16[64, 32]):
    cta_id([1])
    t = thread_id([128])
    As = alloc_shared((64, 32), f16, layout=S[64, 32])
    copy_async(As[:, :], A[0:64, 0:32])
    ptx.cp_async.commit_group()
    {wait}
    cuda.cta_sync()
    copy(B[:, :], As[:, :])
"""

CASES = {
    # check: (wrong program, the line reported, the fixed program)
    "missing-wait": (
        TMA + """    if tid == 0:
        copy_async(A_smem[0:64, 0:64], A[0:64, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 8192)
    cta.copy(B[0:32, 0:64], A_smem[0:32, 0:64])
""", 13, TMA + """    if tid == 0:
        copy_async(A_smem[0:64, 0:64], A[0:64, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 8192)
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
    cta.copy(B[0:64, 0:64], A_smem[0:64, 0:64])
"""),
    "cp-async-wait": (CP_ASYNC.format(wait="pass"), 10, CP_ASYNC.format(wait="ptx.cp_async.wait_group(0)")),
    "expect-tx": (
        TMA + """    if tid == 0:
        copy_async(A_smem[0:64, 0:64], A[0:64, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 4096)
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
""", 12, TMA + """    if tid == 0:
        copy_async(A_smem[0:32, 0:64], A[0:32, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        copy_async(A_smem[32:64, 0:64], A[32:64, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 8192)
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
"""),
    "missing-proxy-fence": (
        WGMMA.format(fence="pass", wait="ptx.wgmma.wait_group(0)"), 15,
        WGMMA.format(fence='ptx.fence.proxy_async("shared::cta")', wait="ptx.wgmma.wait_group(0)"),
    ),
    "wgmma-wait": (
        WGMMA.format(fence='ptx.fence.proxy_async("shared::cta")', wait="pass"), 18,
        WGMMA.format(fence='ptx.fence.proxy_async("shared::cta")', wait="ptx.wgmma.wait_group(0)"),
    ),
    "divergent-sync": (
        TMA + "    if tid < 64:\n        cuda.cta_sync()\n", 11,
        TMA + "    if tid < 64:\n        cuda.cta_sync()\n    else:\n        cuda.cta_sync()\n",
    ),
    "cta-group-mix": (TCGEN05.format(group=2), 9, TCGEN05.format(group=1)),
}


def _error(text: str) -> TilecError:
    with pytest.raises(TilecError) as info:
        compile_source(text, "p.tile")
    return info.value


def test_every_check_has_a_case():
    assert sorted(CASES) == sorted(CHECKS)


@pytest.mark.parametrize("check", sorted(CASES))
def test_check_fires_at_the_mistake(check):
    wrong, line, _ = CASES[check]
    err = _error(wrong)
    assert err.message.endswith(f"[{check}]") and err.span.line == line, err
    assert any(f"tilec: allow({check})" in note for note in err.notes)


@pytest.mark.parametrize("check", sorted(CASES))
def test_check_is_quiet_on_the_fixed_program(check):
    compile_source(CASES[check][2], "p.tile")


@pytest.mark.parametrize("check", sorted(CASES))
def test_check_is_silenced_at_its_line(check):
    wrong, line, _ = CASES[check]
    lines = wrong.split("\n")
    lines[line - 1] += f"  # tilec: allow({check})"
    try:
        compile_source("\n".join(lines), "p.tile")
    except TilecError as err:  # a later stage may refuse the program; never this check
        assert f"[{check}]" not in err.message


def test_an_allow_names_its_check():
    wrong, line, _ = CASES["missing-wait"]
    lines = wrong.split("\n")
    lines[line - 1] += "  # tilec: allow(expect-tx)"
    assert "[missing-wait]" in _error("\n".join(lines)).message


def test_warpgroup_sync_needs_the_whole_warpgroup():
    text = """target sm_90a
kernel k(A: f32[4]):
    cta_id([1]); wgid = warpgroup_id([2]); w = warp_id_in_wg([4]); lane = lane_id([32])
    if wgid == 0:
        cuda.warpgroup_sync(1)
    if w == 0:
        cuda.warpgroup_sync(2)
"""
    err = _error(text)
    assert err.span.line == 7 and "[divergent-sync]" in err.message


def test_a_value_assigned_under_a_lane_condition_diverges():
    text = TMA + "    x: i32 = 0\n    if tid == 3:\n        x = 1\n    if x == 0:\n        cuda.cta_sync()\n"
    assert _error(text).span.line == 14


def test_loads_of_another_stage_are_not_a_missing_wait():
    """A pipeline reads stage s while stage s + 1 loads: the regions differ."""
    text = TMA + """    if tid == 0:
        copy_async(A_smem[32:64, 0:64], A[32:64, 0:64], dispatch="tma", mbar=bar.ptr_to([0]))
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 4096)
    cta.copy(B[0:32, 0:64], A_smem[0:32, 0:64])
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
"""
    compile_source(text, "p.tile")

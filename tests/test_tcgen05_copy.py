"""copy_async with tensor memory on sm_100a: shared -> tmem as
tcgen05.cp.32x128b.warpx4 (variant tcgen05_cp) and tmem -> registers as
tcgen05.ld.32x32b (variant tcgen05_ld).  Each kernel is compiled through the
whole pipeline and assembled; the copies are checked by their PTX forms,
their decoded descriptors, and a replay of what the hardware reads."""
from __future__ import annotations

import pytest

from tcgen05_model import buffer_layouts, calls, compile_tile, hw_smem_bytes, immediates, kwargs, plus, ptx_lines
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import apply
from tilec.compiler.mma_desc import SmemDescriptor
from tilec.compiler.printer import print_expr

CP = "tcgen05.cp.cta_group::1.32x128b.warpx4 ["


def cp_kernel(dtype: str, smem: tuple, smem_layout: str, tmem: tuple, tmem_layout: str, dst: str, src: str,
              guard="tid == 0", cluster="", cta_group=1) -> str:
    return f"""target sm_100a
kernel k(out: u32[1]):
    cta_id([{2 if cluster else 1}])
    {cluster}
    tid = thread_id([128])
    S_buf = alloc({smem}, {dtype}, scope="shared", layout={smem_layout}, align=1024)
    tmem_addr = alloc_shared([1], u32)
    T_buf = decl_buffer({tmem}, {dtype}, scope="tmem", allocated_addr=tmem_addr[0], layout={tmem_layout})
    if {guard}:
        copy_async({dst}, {src}, cta_group={cta_group})
"""


def check_cp(text: str, dtype: str, dst_name="T_buf", src_name="S_buf"):
    """Replay every tcgen05.cp: lane l, byte b of atom a reads the shared byte
    the descriptor names, which must hold the element the tensor-memory
    layout puts at that lane and column."""
    module, ptx = compile_tile(text)
    layouts = buffer_layouts(text)
    t_lay, t_shape = layouts[dst_name]
    s_lay, s_shape = layouts[src_name]
    cps = calls(module, "ptx.tcgen05.cp")
    assert len(ptx_lines(ptx, CP)) == len(cps) > 0
    (enc,) = calls(module, "ptx.tcgen05.encode_matrix_descriptor")
    ldo, sdo, swz = (a.value for a in enc.args[1:])
    desc = SmemDescriptor.from_intrinsic_args("tcgen05", ldo, sdo, swz)
    assert desc.encode() in [immediates(l)[0] for l in ptx_lines(ptx, "or.b64")]
    bits = DTYPES[dtype].bits
    per = 128 // bits
    # tensor-memory element at (lane, element column) -> its index in the tile
    where = {}
    for r in range(t_shape[0]):
        for c in range(t_shape[1]):
            at = apply(t_lay, (r, c), t_shape)
            where[(at["TLane"], at["TCol"])] = (r, c)
    for call in cps:
        col32 = plus(call.args[0])[1]
        units = plus(call.args[1])[1]
        assert col32 >> 16 == 0
        for lane in range(32):
            for e in range(per):
                r, c = where[(lane, col32 * 32 // bits + e)]
                hw = hw_smem_bytes(desc, units * 16, "K", dtype, lane, e)
                assert hw == apply(s_lay, (r, c), s_shape)["m"] * bits // 8, (call, lane, e)
    return module, ptx, desc


# --------------------------------------------------------------------------
# shared -> tensor memory
# --------------------------------------------------------------------------


def test_seed_example_copies_one_atom_with_the_seed_descriptor():
    module, ptx = compile_tile(open("examples/smem_tmem_copy.tile").read())
    (line,) = ptx_lines(ptx, CP)
    (enc,) = calls(module, "ptx.tcgen05.encode_matrix_descriptor")
    assert [a.value for a in enc.args[1:]] == [16, 8, 0]  # seed 002: ldo 16, sdo 8, no swizzle
    assert enc.args[0].obj.id == "A_smem"
    desc = SmemDescriptor.decode("tcgen05", [immediates(l)[0] for l in ptx_lines(ptx, "or.b64")][0])
    assert (desc.lbo, desc.sbo, desc.swizzle) == (256, 128, 0)
    (cp,) = calls(module, "ptx.tcgen05.cp")
    assert plus(cp.args[1])[1] == 0 and plus(cp.args[0])[1] == 0
    assert kwargs(cp) == {"shape": "32x128b", "multicast": "warpx4", "cta_group": 1}
    # the readback: warp 0 loads its 16 bytes per lane as 4 columns and unpacks them
    (ld,) = ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x4.b32")
    assert len(ptx_lines(ptx, "bfe.u32")) == 16


def test_single_atom_u8():
    text = cp_kernel("u8", (32, 16), "S[(32, 16) : (16, 1)]", (32, 16),
                     "S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, :]", "S_buf[:, :]")
    _, _, desc = check_cp(text, "u8")
    assert desc.intrinsic_args() == (16, 8, 0)


@pytest.mark.parametrize("mode, width", [(1, 16), (2, 32), (3, 64)])
def test_swizzled_source_many_atoms(mode, width):
    """32 rows of `width` f16 in one swizzle atom column: width / 8 atoms,
    each a 16-byte chunk of the rows, SBO one 8-row atom."""
    lit = f"SW[3, {mode}, 3] * S[(32, {width}) : ({width}, 1)]"
    text = cp_kernel("f16", (32, width), lit, (32, width),
                     f"S[(32, {width}) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, :]", "S_buf[:, :]")
    module, ptx, desc = check_cp(text, "f16")
    assert len(calls(module, "ptx.tcgen05.cp")) == width // 8
    assert (desc.swizzle, desc.sbo) == (mode, 8 * width * 2)


def test_atoms_from_separate_row_blocks():
    """Scale-factor style: 128 rows of 4 bytes in shared memory, row r to lane
    r % 32 and column r / 32 -- four 32-row blocks side by side in one atom."""
    text = cp_kernel("u8", (128, 4), "S[(128, 4) : (4, 1)]", (128, 4),
                     "S[(4, 32, 4) : (4@TCol, 1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, :]", "S_buf[:, :]")
    with pytest.raises(TilecError, match="not 32 rows of 16 contiguous bytes"):
        compile_tile(text)
    # the same data stored the way the copy reads it: each 32-row block's bytes interleaved per row
    text = cp_kernel("u8", (128, 4), "S[(4, 32, 4) : (4, 16, 1)]", (128, 4),
                     "S[(4, 32, 4) : (4@TCol, 1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, :]", "S_buf[:, :]")
    module, _, desc = check_cp(text, "u8")
    assert len(calls(module, "ptx.tcgen05.cp")) == 1 and desc.intrinsic_args() == (16, 8, 0)


def test_sub_tile_moves_column_and_descriptor():
    text = cp_kernel("u8", (32, 64), "S[(32, 4, 16) : (16, 512, 1)]", (32, 64),
                     "S[(32, 64) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, 32:64]", "S_buf[:, 32:64]")
    module, _, _ = check_cp(text, "u8")
    cps = calls(module, "ptx.tcgen05.cp")
    assert [plus(c.args[0])[1] for c in cps] == [8, 12]  # u8 columns 32 and 48 are 32-bit columns 8 and 12
    assert [plus(c.args[1])[1] for c in cps] == [64, 96]  # 1024 and 1536 bytes in


def test_cta_group_2():
    text = cp_kernel("u8", (32, 16), "S[(32, 16) : (16, 1)]", (32, 16),
                     "S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", "T_buf[:, :]", "S_buf[:, :]",
                     cluster="cta_id_in_cluster([2])", cta_group=2)
    _, ptx = compile_tile(text)
    assert len(ptx_lines(ptx, "tcgen05.cp.cta_group::2.32x128b.warpx4 [")) == 1
    with pytest.raises(TilecError, match="pair of CTAs of a cluster"):
        compile_tile(text.replace("cta_id_in_cluster([2])", "pass").replace("cta_id([2])", "cta_id([1])"))


CP_OK = dict(dtype="u8", smem=(32, 16), smem_layout="S[(32, 16) : (16, 1)]", tmem=(32, 16),
             tmem_layout="S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", dst="T_buf[:, :]", src="S_buf[:, :]")


@pytest.mark.parametrize("change, message", [
    (dict(tmem_layout="S[(32, 16) : (1@TLane, 1@TCol)]"), r"requires R\[4:32@TLane\] on tmem, got \[\]"),
    (dict(tmem_layout="S[(32, 16) : (1@TLane, 1@TCol)] + R[2 : 32@TLane]"),
     r"requires R\[4:32@TLane\] on tmem, got \[2:32@TLane\]"),
    (dict(guard="True"), "exec_scope: tcgen05.cp is issued by one thread"),
    (dict(tmem=(64, 16), tmem_layout="S[(64, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", smem=(64, 16),
          smem_layout="S[(64, 16) : (16, 1)]"), "writes lanes 0-31"),
    (dict(tmem=(32, 8), tmem_layout="S[(32, 8) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]", smem=(32, 8),
          smem_layout="S[(32, 8) : (8, 1)]"), "whole 32-lane x 128-bit atoms"),
    (dict(smem=(32, 32), smem_layout="S[(32, 32) : (32, 1)]", src="S_buf[:, 0:16]"),
     "not in a layout the tensor core reads"),
    (dict(tmem_layout="S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane] + O[2@TCol]"), "inside a 32-bit"),
])
def test_cp_rejections(change, message):
    with pytest.raises(TilecError, match=message):
        compile_tile(cp_kernel(**{**CP_OK, **change}))


def test_cp_keyword_and_type_rules():
    text = cp_kernel(**CP_OK)
    with pytest.raises(TilecError, match="has no parameter 'mbar'"):
        compile_tile(text.replace("cta_group=1)", "cta_group=1, mbar=tmem_addr.ptr_to([0]))"))
    with pytest.raises(TilecError, match="must be one of 1, 2, got 3"):
        compile_tile(text.replace("cta_group=1)", "cta_group=3)"))


# --------------------------------------------------------------------------
# tensor memory -> registers
# --------------------------------------------------------------------------


def ld_kernel(n: int, body: str, dtype="f32", tmem_layout=None, scope="wg", rows=128) -> str:
    tmem_layout = tmem_layout or f"S[({rows}, {n}) : (1@TLane, 1@TCol)]"
    return f"""target sm_100a
kernel k(out: f32[1]):
    cta_id([1])
    wid = warp_id_in_wg([4])
    lane = lane_id([32])
    tmem_addr = alloc_shared([1], u32)
    T_buf = decl_buffer(({rows}, {n}), {dtype}, scope="tmem", allocated_addr=tmem_addr[0], layout={tmem_layout})
    R_loc = alloc_local(({n},), {dtype})
{body}
    ptx.tcgen05.wait.ld()
"""


WG_VIEW = "    R_wg = R_loc.view(128, {n}, layout=S[(128, {n}) : (1@tid_in_wg, 1)])\n"


def test_tutorial_epilogue_one_x128_load():
    text = ld_kernel(128, WG_VIEW.format(n=128) + "    wg.copy_async(R_wg[:, :], T_buf[:, :])")
    module, ptx = compile_tile(text)
    (ld,) = calls(module, "ptx.tcgen05.ld")
    regs, taddr = ld.args
    assert regs.items == tuple(ir.Index(ir.Name("R_wg"), (ir.Int(0), ir.Int(c))) for c in range(128))
    assert kwargs(ld) == {"num": 128, "dtype": "f32"}
    # each warp reads its own lane quarter: 32 * wid lanes, i.e. wid << 21
    assert print_expr(taddr).endswith("+ wid * 2097152")
    assert len(ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x128.b32 {%f")) == 1
    assert len(ptx_lines(ptx, "tcgen05.wait::ld")) == 1  # only the caller's


@pytest.mark.parametrize("n, nums", [(96, [64, 32]), (200, [128, 64, 8]), (1, [1])])
def test_columns_split_into_powers_of_two(n, nums):
    module, ptx = compile_tile(ld_kernel(n, WG_VIEW.format(n=n) + "    wg.copy_async(R_wg[:, :], T_buf[:, :])"))
    lds = calls(module, "ptx.tcgen05.ld")
    assert [kwargs(c)["num"] for c in lds] == nums
    starts = [plus(c.args[1].lhs)[1] if isinstance(c.args[1], ir.Binary) and isinstance(c.args[1].lhs, ir.Binary)
              else None for c in lds]
    assert starts[1:] == [sum(nums[:i]) for i in range(1, len(nums))]
    for num in nums:
        assert ptx_lines(ptx, f"tcgen05.ld.sync.aligned.32x32b.x{num}.b32")


def test_packed_f16_unpacks_after_waiting():
    text = ld_kernel(16, WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[:, :], T_buf[:, :])", dtype="f16")
    _, ptx = compile_tile(text)
    body = ptx[ptx.index("tcgen05.ld"):]
    (ld,) = ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x8.b32 {%r")
    assert body.index("tcgen05.wait::ld") < body.index("mov.b32 {%rs")
    assert body.count("mov.b32 {%rs") == 8


def test_warp_reads_a_fixed_quarter():
    body = ("    R_w = R_loc.view(32, 16, layout=S[(32, 16) : (1@laneid, 1)])\n"
            "    if wid == 1:\n        warp.copy_async(R_w[:, :], T_buf[32:64, :])")
    module, _ = compile_tile(ld_kernel(16, body))
    (ld,) = calls(module, "ptx.tcgen05.ld")
    assert plus(ld.args[1])[1] == 32 << 16  # lanes 32-63: the second quarter


def test_warp_reads_its_own_replica():
    body = ("    R_w = R_loc.view(32, 16, layout=S[(32, 16) : (1@laneid, 1)])\n"
            "    if wid == 2:\n        warp.copy_async(R_w[:, :], T_buf[:, :])")
    text = ld_kernel(16, body, dtype="u8", rows=32, tmem_layout="S[(32, 16) : (1@TLane, 1@TCol)] + R[4 : 32@TLane]")
    module, ptx = compile_tile(text)
    (ld,) = calls(module, "ptx.tcgen05.ld")
    assert print_expr(ld.args[1]).endswith("+ wid * 2097152")
    assert kwargs(ld) == {"num": 4, "dtype": "u8"} and len(ptx_lines(ptx, "bfe.u32")) == 16


@pytest.mark.parametrize("body, message", [
    (WG_VIEW.format(n=16) + "    if lane < 16:\n        wg.copy_async(R_wg[:, :], T_buf[:, :])", "leaves some of its threads out"),
    ("    wg.copy_async(R_loc[:], T_buf[0, :])", "must be spread over the 128 threads"),
    ("    R_w = R_loc.view(32, 16, layout=S[(32, 16) : (1@laneid, 1)])\n"
     "    if wid == 0:\n        warp.copy_async(R_w[:, :], T_buf[16:48, :])", "gives lane l of a warp's quarter to its thread l"),
    (WG_VIEW.format(n=16) + "    if wid * 32 + lane == 0:\n        copy_async(R_wg[:, :], T_buf[:, :])", "warp_or_warpgroup"),
    (WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[:, 0:8], T_buf[:, 0:8])", None),
])
def test_ld_rejections(body, message):
    text = ld_kernel(16, body)
    if message is None:  # a sub-tile of whole columns is fine
        compile_tile(text)
        return
    with pytest.raises(TilecError, match=message):
        compile_tile(text)


# The thread and element named are the first that break the rule, threads
# in the order of their positions (lane, then warp) and each thread's
# registers in order, though the check goes by thread and class of registers.
@pytest.mark.parametrize("view, tmem_layout, message", [
    ("S[(32, 4, 16) : (1@laneid, 1@wid_in_wg, 1)]", None,
     "thread 32 holds element (1, 0), which is in tensor-memory lane 1; tcgen05.ld gives lane l of a warp's quarter "
     "to its thread l (S[(128, 16) : (1@TLane, 1@TCol)])"),
    ("S[(128, 16) : (1@tid_in_wg, 1)]", "S[(128, 16) : (1@TCol, 1@TLane)]",
     "thread 0 holds element (0, 1), which is in tensor-memory lane 1; tcgen05.ld gives lane l of a warp's quarter "
     "to its thread l (S[(128, 16) : (1@TCol, 1@TLane)])"),
    ("S[(128, 16) : (1@tid_in_wg, 1)]", "S[(2, 64, 16) : (16@TCol, 1@TLane, 1@TCol)]",
     "thread 64 holds element (64, 0), which is in tensor-memory lane 0; tcgen05.ld gives lane l of a warp's "
     "quarter to its thread l (S[(2, 64, 16) : (16@TCol, 1@TLane, 1@TCol)])"),
    ("S[(128, 16) : (1@tid_in_wg, 1)]", "S[(128, 2, 8) : (1@TLane, 64@TLane, 1@TCol)]",
     "thread 0 holds element (0, 8), which is in tensor-memory lane 64; tcgen05.ld gives lane l of a warp's quarter "
     "to its thread l (S[(128, 2, 8) : (1@TLane, 64@TLane, 1@TCol)])"),
])
def test_ld_names_the_first_thread_off_its_lane(view, tmem_layout, message):
    body = f"    R_wg = R_loc.view(128, 16, layout={view})\n    wg.copy_async(R_wg[:, :], T_buf[:, :])"
    with pytest.raises(TilecError) as info:
        compile_tile(ld_kernel(16, body, tmem_layout=tmem_layout))
    assert info.value.message == f"the registers 'R_wg': {message}"


def test_ld_rows_of_a_thread_share_its_lane():
    """A warpgroup reads a 256-row tile: thread t holds rows t and t + 128,
    both in lane t, side by side in the columns -- one x16 load."""
    body = "    R_wg = R_loc.view(256, 8, layout=S[(2, 128, 8) : (8, 1@tid_in_wg, 1)])\n" \
           "    wg.copy_async(R_wg[:, :], T_buf[:, :])"
    text = ld_kernel(8, body, rows=256, tmem_layout="S[(2, 128, 8) : (8@TCol, 1@TLane, 1@TCol)]")
    module, ptx = compile_tile(text.replace("alloc_local((8,)", "alloc_local((16,)"))
    (ld,) = calls(module, "ptx.tcgen05.ld")
    assert ld.args[0].items == tuple(ir.Index(ir.Name("R_wg"), (ir.Int(r), ir.Int(c))) for r in (0, 128)
                                     for c in range(8))
    assert kwargs(ld) == {"num": 16, "dtype": "f32"} and len(ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x16")) == 1


def test_ld_threads_hold_the_same_registers():
    body = WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[0:64, :], T_buf[0:64, :])"
    with pytest.raises(TilecError, match="the threads hold different registers of the region; copy whole rows"):
        compile_tile(ld_kernel(16, body))


def test_ld_warp_reads_one_quarter():
    body = ("    R_w = R_loc.view(64, 8, layout=S[(2, 32, 8) : (8, 1@laneid, 1)])\n"
            "    if wid == 1:\n        warp.copy_async(R_w[:, :], T_buf[0:64, 0:8])")
    with pytest.raises(TilecError, match=r"one warp reads one 32-lane quarter, the tile spans lanes of quarters \[0, 1\]"):
        compile_tile(ld_kernel(16, body))


def test_ld_needs_whole_columns_of_packed_elements():
    body = WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[:, 0:2], T_buf[:, 0:2])"
    with pytest.raises(TilecError, match="all 4 u8 elements of each 32-bit column"):
        compile_tile(ld_kernel(16, body, dtype="u8"))


def test_ld_takes_no_keywords():
    body = WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[:, :], T_buf[:, :], cta_group=1)"
    with pytest.raises(TilecError, match="has no parameter 'cta_group'"):
        compile_tile(ld_kernel(16, body))


def test_ld_moves_register_scalars_only():
    body = WG_VIEW.format(n=16) + "    wg.copy_async(R_wg[:, :], T_buf[:, :])"
    with pytest.raises(TilecError, match="into registers, not f64"):
        compile_tile(ld_kernel(16, body, dtype="f64"))

"""The tcgen05 intrinsic rows, written by hand: their PTX text, the
descriptors packed into it (decoded back with tilec.compiler.mma_desc), the
rules their checks enforce, and that every emitted form assembles for
sm_100a with no ptxas warning."""
from __future__ import annotations

import pytest

from tcgen05_model import compile_tile, immediates, ptx_lines
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.mma_desc import SmemDescriptor, Tcgen05InstrDesc


def kernel(body: str, target: str = "sm_100a", cluster: bool = False) -> str:
    """`body` run by warp 0 after it allocated 256 tensor-memory columns at
    `t`; `cluster`: a pair of CTAs, and every tcgen05 instruction of the
    kernel at cta_group 2 (ptxas refuses a kernel that mixes the two)."""
    lines = "\n".join("        " + l for l in body.strip().splitlines())
    return f"""target {target}
kernel k(out: u32[1]):
    cta_id([{2 if cluster else 1}])
    {"cta_id_in_cluster([2])" if cluster else "pass"}
    tid = thread_id([128])
    A_smem = alloc((128, 64), f16, scope="shared", align=1024)
    tmem_addr = alloc_shared([1], u32)
    bar = alloc_shared([1], u64)
    regs = alloc_local((16,), f32)
    bytes8 = alloc_local((8,), i8)
    if tid < 32:
        ptx.tcgen05.alloc(address_of(tmem_addr), n_cols=256, cta_group={2 if cluster else 1})
    cuda.cta_sync()
    t = tmem_addr[0]
    if tid < 32:
{lines}
"""


def ptx_of(body: str, **kw) -> str:
    return compile_tile(kernel(body, **kw))[1]


def test_tensor_memory_management_rows():
    ptx = ptx_of("""
ptx.tcgen05.relinquish_alloc_permit(cta_group=2)
ptx.tcgen05.fence.before_thread_sync()
ptx.tcgen05.fence.after_thread_sync()
ptx.tcgen05.commit(bar.ptr_to([0]), cta_group=2)
ptx.tcgen05.wait.st()
ptx.tcgen05.dealloc(t, n_cols=256, cta_group=2)
""", cluster=True)
    for text in ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r",
                 "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;",
                 "tcgen05.fence::before_thread_sync;", "tcgen05.fence::after_thread_sync;",
                 "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%r",
                 "tcgen05.wait::st.sync.aligned;", "tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r"):
        assert ptx_lines(ptx, text), text
    assert ptx_lines(ptx, "tcgen05.alloc")[0].endswith(", 256;")


@pytest.mark.parametrize("n_cols", [16, 48, 1024])
def test_alloc_columns_are_a_power_of_two_from_32(n_cols):
    with pytest.raises(TilecError, match=f"'n_cols' must be a power of two in \\[32, 512\\], got {n_cols}"):
        ptx_of(f"ptx.tcgen05.dealloc(t, n_cols={n_cols})")


@pytest.mark.parametrize("ldo, sdo, swizzle", [(16, 8, 0), (64, 64, 3), (1, 2, 1), (16383, 1, 2)])
def test_matrix_descriptor_constant(ldo, sdo, swizzle):
    ptx = ptx_of(f"""
d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), {ldo}, {sdo}, {swizzle})
ptx.tcgen05.cp(t, d, shape="128x256b")
""")
    (line,) = ptx_lines(ptx, "or.b64")
    desc = SmemDescriptor.decode("tcgen05", immediates(line)[0])
    assert desc.intrinsic_args() == (ldo, sdo, swizzle) and desc.start_addr == 0
    # the start address field is the run-time (addr >> 4) & 0x3FFF
    assert ptx_lines(ptx, "shr.u32") and ptx_lines(ptx, "and.b32")[0].endswith(", 16383;")


@pytest.mark.parametrize("args, message", [
    ("16384, 8, 0", "outside \\[0, 262144\\)"),
    ("16, 8, 4", "'swizzle' must be one of 0, 1, 2, 3, got 4"),
])
def test_matrix_descriptor_rules(args, message):
    with pytest.raises(TilecError, match=message):
        ptx_of(f"d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), {args})")


MMA_CASES = [
    ('kind="f16", a_dtype=f16, b_dtype=f16, m=128, n=256', "f16", {}),
    ('kind="f16", a_dtype=bf16, b_dtype=bf16, m=64, n=8, b_major="MN"', "f16", {}),
    ('kind="tf32", a_dtype=tf32, b_dtype=tf32, m=256, n=32, cta_group=2', "tf32", {"cta_group": 2}),
    ('kind="f8f6f4", a_dtype=e4m3, b_dtype=e5m2, m=128, n=64, a_major="MN"', "f8f6f4", {}),
    ('kind="i8", a_dtype=i8, b_dtype=u8, d_dtype=i32, m=128, n=24', "i8", {}),
]


@pytest.mark.parametrize("kw, kind, extra", MMA_CASES)
def test_mma_packs_the_instruction_descriptor(kw, kind, extra):
    cg = extra.get("cta_group", 1)
    ptx = ptx_of(f"""
d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 64, 64, 3)
ptx.tcgen05.mma(t + 64, d, d + 2, tid == 0, {kw})
""", cluster=cg == 2)
    (line,) = ptx_lines(ptx, f"tcgen05.mma.cta_group::{cg}.kind::{kind} [%r")
    idesc = Tcgen05InstrDesc.decode(kind, immediates(line)[0], cta_group=cg)
    fields = dict(part.split("=") for part in kw.replace('"', "").split(", "))
    assert idesc.a_dtype == fields["a_dtype"] and idesc.b_dtype == fields["b_dtype"]
    assert (idesc.m, idesc.n) == (int(fields["m"]), int(fields["n"]))
    assert idesc.d_dtype == fields.get("d_dtype", "f32")
    assert (idesc.a_major, idesc.b_major) == (fields.get("a_major", "K"), fields.get("b_major", "K"))
    assert line.endswith(", %p" + line.rsplit("%p", 1)[1])  # the run-time enable_input_d predicate


def test_mma_reads_a_from_tensor_memory():
    ptx = ptx_of("""
d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 64, 64, 3)
ptx.tcgen05.mma(t, t + 128, d, True, kind="f16", a_dtype=f16, b_dtype=f16, m=128, n=128)
""")
    (line,) = ptx_lines(ptx, "tcgen05.mma.cta_group::1.kind::f16")
    operands = line.split(" ", 1)[1].split(", ")
    assert operands[0].startswith("[%r") and operands[1].startswith("[%r") and operands[2].startswith("%rd")
    assert operands[-1] == "1;"


@pytest.mark.parametrize("call, message", [
    ('ptx.tcgen05.mma(t, t, d, True, kind="f16", a_dtype=f16, b_dtype=f16, m=128, n=128, a_major="MN")',
     "reads A from tensor memory K-major only"),
    ('ptx.tcgen05.mma(t, 5, d, True, kind="f16", a_dtype=f16, b_dtype=f16, m=128, n=128)',
     "u64 shared-memory matrix descriptor or a u32 tensor-memory address, got a i32"),
    ('ptx.tcgen05.mma(t, d, d, True, kind="f16", a_dtype=f16, b_dtype=f16, m=96, n=128)',
     "needs M in \\{64, 128\\} for cta_group 1, got 96"),
    ('ptx.tcgen05.mma(t, d, d, True, kind="f16", a_dtype=f16, b_dtype=f16, m=128, n=12)',
     "needs N a multiple of 8 in \\[8, 256\\] for cta_group 1, got 12"),
    ('ptx.tcgen05.mma(t, d, d, True, kind="f16", a_dtype=e4m3, b_dtype=e4m3, m=128, n=128)',
     "needs A in \\{f16, bf16\\}"),
    ('ptx.tcgen05.mma(t, d, d, True, kind="mxf4", a_dtype=e2m1, b_dtype=e2m1, m=128, n=128)',
     "'kind' must be one of"),
    ('ptx.tcgen05.mma.block_scale(t, d, d, t, t, True, kind="mxf4", a_dtype=e2m1, b_dtype=e2m1, m=128, n=64, sfa_id=1)',
     "SFA scale factor id in \\{0, 2\\}, got 1"),
    ('ptx.tcgen05.mma.block_scale(t, d, d, t, t, True, kind="mxf8f6f4", a_dtype=e4m3, b_dtype=e4m3, m=64, n=64)',
     "needs M in \\{128\\} for cta_group 1"),
])
def test_mma_rules(call, message):
    with pytest.raises(TilecError, match=message):
        ptx_of(f"d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 64, 64, 3)\n{call}")


@pytest.mark.parametrize("kind, dt, sfa_id, sfb_id", [("mxf8f6f4", "e4m3", 3, 1), ("mxf4", "e2m1", 2, 0)])
def test_block_scaled_mma(kind, dt, sfa_id, sfb_id):
    ptx = ptx_of(f"""
d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 64, 64, 3)
ptx.tcgen05.mma.block_scale(t, d, d + 4, t + 200, t + 204, False, kind="{kind}", a_dtype={dt}, b_dtype={dt},
                            m=128, n=64, sfa_id={sfa_id}, sfb_id={sfb_id})
""")
    (line,) = ptx_lines(ptx, f"tcgen05.mma.cta_group::1.kind::{kind}.block_scale [%r")
    idesc = Tcgen05InstrDesc.decode(kind, immediates(line)[0])
    assert (idesc.sfa_id, idesc.sfb_id, idesc.scale_dtype, idesc.m, idesc.n) == (sfa_id, sfb_id, "ue8m0", 128, 64)
    operands = line.split(" ", 1)[1].rstrip(";").split(", ")
    assert operands[4].startswith("[%r") and operands[5].startswith("[%r") and operands[6] == "0"


@pytest.mark.parametrize("shape, multicast", [
    ("128x256b", None), ("4x256b", None), ("128x128b", None),
    ("64x128b", "warpx2::02_13"), ("64x128b", "warpx2::01_23"), ("32x128b", "warpx4"),
])
def test_cp_forms(shape, multicast):
    mc = f', multicast="{multicast}"' if multicast else ""
    ptx = ptx_of(f"""
d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 16, 8, 0)
ptx.tcgen05.cp(t, d, shape="{shape}"{mc}, cta_group=2)
""", cluster=True)
    suffix = f".{multicast}" if multicast else ""
    assert ptx_lines(ptx, f"tcgen05.cp.cta_group::2.{shape}{suffix} [%r")


@pytest.mark.parametrize("shape, multicast, message", [
    ("32x128b", None, 'tcgen05.cp.32x128b takes multicast="warpx4", got None'),
    ("128x256b", "warpx4", "tcgen05.cp.128x256b takes no multicast, got warpx4"),
    ("64x128b", "warpx4", 'takes multicast="warpx2::02_13" or multicast="warpx2::01_23"'),
])
def test_cp_shape_needs_its_multicast(shape, multicast, message):
    mc = f', multicast="{multicast}"' if multicast else ""
    with pytest.raises(TilecError, match=message):
        ptx_of(f'ptx.tcgen05.cp(t, t, shape="{shape}"{mc})')


def test_ld_forms():
    ptx = ptx_of("""
ptx.tcgen05.ld((regs[0], regs[1], regs[2], regs[3]), t, num=4, dtype=f32)
ptx.tcgen05.ld((bytes8[0], bytes8[1], bytes8[2], bytes8[3], bytes8[4], bytes8[5], bytes8[6], bytes8[7]), t + 4,
               num=2, dtype=i8)
ptx.tcgen05.wait.ld()
""")
    (f32,) = ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x4.b32 {%f")
    (i8,) = ptx_lines(ptx, "tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r")
    fields = [l.split(", ", 2)[2] for l in ptx_lines(ptx, "bfe.s32")]
    assert fields == ["0, 8;", "8, 8;", "16, 8;", "24, 8;"] * 2  # signed bytes, lowest first
    assert len(ptx_lines(ptx, "tcgen05.wait::ld")) == 2  # the unpack's and the caller's


@pytest.mark.parametrize("call, message", [
    ("ptx.tcgen05.ld((regs[0], regs[1]), t, num=4, dtype=f32)", "fills 4 registers per thread, got 2"),
    ("ptx.tcgen05.ld((regs[0], regs[1]), t, num=2, dtype=i32)", "writes i32 or u32 registers, got a f32"),
    ("ptx.tcgen05.ld((regs[0], regs[1]), t, num=3, dtype=f32)", "'num' must be one of 1, 2, 4"),
    ("ptx.tcgen05.ld((regs[0], regs[1]), t, num=2, dtype=f64)", "tcgen05.ld reads f32, i32"),
    ("ptx.tcgen05.ld((regs[tid % 2], regs[1]), t, num=2, dtype=f32)", "indexed by constants, not local memory"),
])
def test_ld_rules(call, message):
    with pytest.raises(TilecError, match=message):
        ptx_of(call)


def test_rows_are_blackwell_only():
    with pytest.raises(TilecError, match="ptx.tcgen05.encode_matrix_descriptor is not available on sm_90a"):
        compile_tile("""target sm_90a
kernel k(out: u32[1]):
    tid = thread_id([128])
    A_smem = alloc((128, 64), f16, scope="shared", align=1024)
    d = ptx.tcgen05.encode_matrix_descriptor(A_smem.ptr_to([0, 0]), 64, 64, 3)
""", target="sm_90a")

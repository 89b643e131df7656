"""Tensor-core descriptor encoders: every field against values worked out by
hand from the PTX ISA tables, the seeds' descriptor arguments, round trips."""
import pytest
from hypothesis import given, settings, strategies as st

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.mma_desc import (
    SWIZZLE_128B_BASE32B,
    SmemDescriptor,
    Tcgen05InstrDesc,
    smem_desc_for_layout,
    tcgen05_check_operand_swizzle,
    tcgen05_instr_desc,
    tcgen05_mma_k,
    wgmma_mma_k,
)

FIXED = 1 << 46  # tcgen05's constant 0b001 in bits 46-48


def tc(**kw):
    kw = {"start_addr": 0, "lbo": 0, "sbo": 0, "swizzle": 0, **kw}
    return SmemDescriptor("tcgen05", **kw)


def wg(**kw):
    kw = {"start_addr": 0, "lbo": 0, "sbo": 0, "swizzle": 0, **kw}
    return SmemDescriptor("wgmma", **kw)


# --------------------------------------------------------------------------
# shared memory descriptors: fields
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, bits",
    [
        ({}, 0),
        ({"start_addr": 16}, 1),
        ({"start_addr": 0x3FFF0}, 0x3FFF),
        ({"lbo": 16}, 1 << 16),
        ({"lbo": 0x3FFF0}, 0x3FFF << 16),
        ({"sbo": 1024}, 64 << 32),
        ({"sbo": 0x3FFF0}, 0x3FFF << 32),
        ({"base_offset": 5}, 5 << 49),
        ({"lbo_mode": 1}, 1 << 52),
        ({"swizzle": 1}, 6 << 61),  # 32B
        ({"swizzle": 2}, 4 << 61),  # 64B
        ({"swizzle": 3}, 2 << 61),  # 128B
        ({"swizzle": SWIZZLE_128B_BASE32B}, 1 << 61),
    ],
)
def test_tcgen05_smem_fields(kw, bits):
    assert tc(**kw).encode() == FIXED | bits


@pytest.mark.parametrize(
    "kw, bits",
    [
        ({}, 0),
        ({"start_addr": 0x3FFF0}, 0x3FFF),
        ({"lbo": 32}, 2 << 16),
        ({"sbo": 1024}, 64 << 32),
        ({"base_offset": 7}, 7 << 49),
        ({"swizzle": 1}, 3 << 62),  # 32B
        ({"swizzle": 2}, 2 << 62),  # 64B
        ({"swizzle": 3}, 1 << 62),  # 128B
    ],
)
def test_wgmma_smem_fields(kw, bits):
    assert wg(**kw).encode() == bits


def test_encode_parts_are_the_high_and_low_words():
    d = tc(start_addr=0x400, lbo=1024, sbo=1024, swizzle=3)
    assert d.encode() == 0x4000404000400040
    assert d.encode_parts() == (0x40004040, 0x00400040)


def test_seed_000_descriptor():
    # 128x64 f16, K-major, 128B swizzle: encode_matrix_descriptor(..., 64, 64, 3)
    d = smem_desc_for_layout("tcgen05", "f16", "K", 3, mn_stride=8 * 128)
    assert d.intrinsic_args() == (64, 64, 3)
    assert d.sbo == 1024
    assert d.encode() == FIXED | (64 << 16) | (64 << 32) | (2 << 61)
    assert SmemDescriptor.from_intrinsic_args("tcgen05", 64, 64, 3) == d


def test_seed_002_descriptor():
    # 32x16 u8 S[(32, 16) : (16, 1)], no swizzle: encode_matrix_descriptor(..., 16, 8, 0)
    d = smem_desc_for_layout("tcgen05", "u8", "K", 0, mn_stride=8 * 16)
    assert d.intrinsic_args() == (16, 8, 0)
    assert d.encode() == FIXED | (16 << 16) | (8 << 32)


@pytest.mark.parametrize(
    "major, swizzle, lbo, sbo",
    [
        ("K", 0, 128, 256),  # LBO steps K core matrices, SBO 8-row groups
        ("K", 2, 16 * 16, 256),  # swizzled K-major: LBO unread, filled with 64 B / 4 B = 16 elements
        ("MN", 0, 128, 256),  # unswizzled MN-major: SBO = MN stride, LBO = K stride
        ("MN", 3, 256, 128),  # swizzled MN-major: LBO = MN stride, SBO = K stride
    ],
)
def test_smem_desc_for_layout_assigns_strides(major, swizzle, lbo, sbo):
    d = smem_desc_for_layout("wgmma", "f32", major, swizzle, mn_stride=256, k_stride=128)
    assert (d.lbo, d.sbo, d.swizzle) == (lbo, sbo, swizzle)


def test_smem_desc_for_layout_fills_unread_fields_with_atom_row_elements():
    d = smem_desc_for_layout("tcgen05", "bf16", "MN", 3, k_stride=1024)
    assert d.intrinsic_args() == (64, 64, 3)  # one MN atom: LBO unread
    d = smem_desc_for_layout("tcgen05", "e4m3", "K", 1, mn_stride=256)
    assert d.intrinsic_args() == (32, 16, 1)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"mn_stride": 24}, "atoms along MN are 24 B apart"),
        ({"k_stride": 0}, "atoms along K are 0 B apart"),
        ({"mn_stride": 1 << 18}, "outside [0, 262144)"),
    ],
)
def test_smem_desc_for_layout_rejects_bad_strides(kw, message):
    with pytest.raises(TilecError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        smem_desc_for_layout("tcgen05", "f16", "K", 0, **kw)


def test_smem_desc_for_layout_rejects_base32b_swizzle():
    with pytest.raises(TilecError, match="swizzle modes 0-3"):
        smem_desc_for_layout("tcgen05", "tf32", "MN", SWIZZLE_128B_BASE32B, mn_stride=128)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: tc(start_addr=8), "start addr 8 B is not a multiple of 16"),
        (lambda: tc(lbo=1 << 18), "lbo 262144 B is outside"),
        (lambda: tc(sbo=-16), "sbo -16 B is outside"),
        (lambda: tc(swizzle=5), "tcgen05 matrix descriptors take swizzle modes"),
        (lambda: wg(swizzle=SWIZZLE_128B_BASE32B), "wgmma matrix descriptors take swizzle modes"),
        (lambda: tc(base_offset=8), "base offset must be in"),
        (lambda: wg(lbo_mode=1), "wgmma matrix descriptor leading-dimension mode must be 0"),
    ],
)
def test_smem_descriptor_rejects(make, message):
    with pytest.raises(TilecError, match=message):
        make()


@pytest.mark.parametrize(
    "family, value, message",
    [
        ("tcgen05", 0, "fixed 0b001"),
        ("tcgen05", FIXED | (3 << 61), "invalid swizzle field 3"),
        ("tcgen05", FIXED | (1 << 15), "reserved bits 0x8000"),
        ("wgmma", 1 << 46, "reserved bits"),
        ("wgmma", 1 << 64, "reserved bits"),
    ],
)
def test_smem_decode_rejects_values_no_encoder_makes(family, value, message):
    with pytest.raises(ValueError, match=message):
        SmemDescriptor.decode(family, value)


def _smem_descriptors():
    offs = st.integers(0, 0x3FFF).map(lambda u: u * 16)
    return st.one_of(
        st.builds(
            SmemDescriptor,
            st.just("tcgen05"),
            offs,
            offs,
            offs,
            st.sampled_from([0, 1, 2, 3, 4]),
            st.integers(0, 7),
            st.integers(0, 1),
        ),
        st.builds(SmemDescriptor, st.just("wgmma"), offs, offs, offs, st.sampled_from([0, 1, 2, 3]), st.integers(0, 7)),
    )


@settings(max_examples=200, deadline=None)
@given(_smem_descriptors())
def test_smem_round_trip(d):
    value = d.encode()
    assert 0 <= value < 1 << 64
    assert SmemDescriptor.decode(d.family, value) == d
    hi, lo = d.encode_parts()
    assert hi << 32 | lo == value


# --------------------------------------------------------------------------
# tcgen05 instruction descriptor
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kw, value",
    [
        # bf16 x bf16 -> f32, 128x256: D F32 (1<<4), A/B BF16 (1<<7, 1<<10), N>>3=32 at 17, M>>4=8 at 24
        (("f16", "bf16", "bf16", "f32", 128, 256), {}, 0x08400490),
        (("f16", "f16", "f16", "f16", 64, 8), {}, (4 << 24) | (1 << 17)),
        # tf32: A/B TF32 = 2
        (("tf32", "tf32", "tf32", "f32", 64, 64), {}, 0x04100910),
        # f8f6f4 mixed: E4M3 = 0, E5M2 = 1, E2M1 = 5; D f16 = 0
        (("f8f6f4", "e4m3", "e5m2", "f16", 128, 16), {}, (8 << 24) | (2 << 17) | (1 << 10)),
        (("f8f6f4", "e2m1", "e4m3", "f32", 128, 16), {}, (8 << 24) | (2 << 17) | (5 << 7) | (1 << 4)),
        (("f16", "f16", "f16", "f32", 128, 8), {"a_major": "MN"}, 0x08020010 | (1 << 15)),
        (("f16", "f16", "f16", "f32", 128, 8), {"b_major": "MN"}, 0x08020010 | (1 << 16)),
        (("f16", "f16", "f16", "f32", 128, 8), {"negate_a": True}, 0x08020010 | (1 << 13)),
        (("f16", "f16", "f16", "f32", 128, 8), {"negate_b": True}, 0x08020010 | (1 << 14)),
        (("f16", "f16", "f16", "f32", 128, 8), {"sparse": True, "sparse_selector": 3}, 0x08020010 | 0b111),
        (("f16", "f16", "f16", "f32", 128, 64), {"ws": True, "max_shift": 2}, 0x08000010 | (8 << 17) | (2 << 30)),
        (("f16", "f16", "f16", "f32", 32, 64), {"ws": True}, (2 << 24) | (8 << 17) | (1 << 4)),
        # i8: U8 = 0, S8 = 1, D S32 = 2, saturate bit 3
        (("i8", "i8", "u8", "i32", 128, 24), {"saturate": True}, (8 << 24) | (3 << 17) | (1 << 7) | (2 << 4) | 8),
        (("f16", "f16", "f16", "f32", 256, 256), {"cta_group": 2}, (16 << 24) | (32 << 17) | (1 << 4)),
    ],
)
def test_instr_desc_dense_fields(args, kw, value):
    assert tcgen05_instr_desc(*args, **kw) == value


def test_instr_desc_mxf8f6f4_fields():
    # SFB id at 4-5, scale UE8M0 at 23, M>>7 at 27-28, SFA id at 29-30
    value = tcgen05_instr_desc(
        "mxf8f6f4", "e4m3", "e2m1", "f32", 128, 256, scale_dtype="ue8m0", sfa_id=3, sfb_id=1
    )
    assert value == (3 << 29) | (1 << 27) | (1 << 23) | (32 << 17) | (5 << 10) | (1 << 4)
    # [CUTLASS] writes M >> 4 at bit 24: the same bits for M in {128, 256}.
    m256 = tcgen05_instr_desc("mxf8f6f4", "e5m2", "e5m2", "f32", 256, 16, cta_group=2, scale_dtype="ue8m0")
    assert m256 & (0x1F << 24) == (256 >> 4) << 24 == (256 >> 7) << 27


def test_instr_desc_mxf4_fields():
    # E2M1 = 1 here (not 5), B type is 2 bits, bit 31 selects K = 96
    value = tcgen05_instr_desc("mxf4", "e2m1", "e2m1", "f32", 128, 8, scale_dtype="ue8m0", sfa_id=2, sfb_id=2)
    assert value == (2 << 29) | (1 << 27) | (1 << 23) | (1 << 17) | (1 << 10) | (1 << 7) | (2 << 4)
    k96 = tcgen05_instr_desc("mxf4", "e2m1", "e2m1", "f32", 256, 16, cta_group=2, scale_dtype="ue8m0", k=96)
    assert k96 >> 31 == 1


@pytest.mark.parametrize(
    "args, kw, message",
    [
        (("f16", "f16", "f16", "f32", 96, 128), {}, "tcgen05 kind::f16 needs M in {64, 128} for cta_group 1, got 96"),
        (("f16", "f16", "f16", "f32", 64, 128), {"cta_group": 2}, "needs M in {128, 256} for cta_group 2, got 64"),
        (("f16", "f16", "f16", "f32", 128, 12), {}, "needs N a multiple of 8 in [8, 256] for cta_group 1, got 12"),
        (("f16", "f16", "f16", "f32", 128, 264), {}, "got 264"),
        (("f16", "f16", "f16", "f32", 128, 24), {"cta_group": 2}, "multiple of 16 in [16, 256] for cta_group 2"),
        (("i8", "i8", "i8", "i32", 128, 40), {}, "N in {8, 16, 24} or a multiple of 16 in [32, 256]"),
        (("i8", "i8", "i8", "i32", 128, 48), {"cta_group": 2}, "multiple of 32 in [32, 256]"),
        (("f16", "f16", "f16", "f32", 128, 32), {"ws": True}, "N in {64, 128, 256} for .ws, got 32"),
        (("f16", "f16", "f16", "f32", 128, 256), {"ws": True, "sparse": True}, "N in {64, 128} for sparse .ws"),
        (("f16", "f16", "f16", "f32", 128, 64), {"ws": True, "cta_group": 2}, "no .ws form for cta_group 2"),
        (("f16", "f32", "f32", "f32", 128, 64), {}, "needs A in {f16, bf16}, got A=f32"),
        (("f16", "f16", "bf16", "f32", 128, 64), {}, "A and B of one type"),
        (("f16", "bf16", "bf16", "f16", 128, 64), {}, "with bf16 inputs needs D f32"),
        (("tf32", "tf32", "tf32", "f16", 128, 64), {}, "needs D in {f32}, got D=f16"),
        (("f8f6f4", "e2m1", "e4m3", "f32", 128, 64), {"a_major": "MN"}, "reads e2m1 A only K-major"),
        (("f16", "f16", "f16", "f32", 128, 64), {"saturate": True}, "only kind::i8 saturates"),
        (("i8", "i8", "i8", "i32", 128, 64), {"negate_a": True}, "cannot negate"),
        (("f16", "f16", "f16", "f32", 128, 64), {"max_shift": 1}, "max shift only with .ws"),
        (("f16", "f16", "f16", "f32", 128, 64), {"sparse_selector": 1}, "selector only for sparse"),
        (("f16", "f16", "f16", "f32", 128, 64), {"k": 32}, "needs K in {16}"),
        (("f16", "f16", "f16", "f32", 128, 64), {"scale_dtype": "ue8m0"}, "not block-scaled"),
        (("mxf8f6f4", "e4m3", "e4m3", "f32", 64, 64), {"scale_dtype": "ue8m0"}, "needs M in {128} for cta_group 1"),
        (("mxf8f6f4", "e4m3", "e4m3", "f32", 128, 64), {"cta_group": 2, "sparse": True, "scale_dtype": "ue8m0"},
         "needs M in {256} for sparse cta_group 2"),
        (("mxf8f6f4", "e4m3", "e4m3", "f32", 128, 64), {}, "needs scale factors of type {ue8m0}, got None"),
        (("mxf8f6f4", "e4m3", "e4m3", "f32", 128, 64), {"scale_dtype": "ue8m0", "ws": True}, "has no .ws form"),
        (("mxf4", "e2m1", "e2m1", "f32", 128, 64), {"scale_dtype": "ue8m0", "sfa_id": 1}, "SFA scale factor id in {0, 2}"),
        (("mxf4", "e2m1", "e2m1", "f32", 128, 64), {"scale_dtype": "ue8m0", "k": 96}, "needs K in {64}"),
        (("mxf4", "e4m3", "e2m1", "f32", 128, 64), {"scale_dtype": "ue8m0"}, "needs A in {e2m1}"),
        (("f32", "f16", "f16", "f32", 128, 64), {}, "unknown tcgen05 MMA kind 'f32'"),
    ],
)
def test_instr_desc_rejects(args, kw, message):
    with pytest.raises(TilecError) as err:
        tcgen05_instr_desc(*args, **kw)
    assert message in err.value.message


_DENSE_TYPES = {
    "f16": [("f16", "f16", "f16"), ("f16", "f16", "f32"), ("bf16", "bf16", "f32")],
    "tf32": [("tf32", "tf32", "f32")],
    "f8f6f4": [(a, b, d) for a in ("e4m3", "e5m2", "e2m1") for b in ("e4m3", "e5m2", "e2m1") for d in ("f16", "f32")],
    "i8": [(a, b, "i32") for a in ("i8", "u8") for b in ("i8", "u8")],
}


@st.composite
def _instr_descs(draw):
    kind = draw(st.sampled_from(["f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4"]))
    cta_group = draw(st.sampled_from([1, 2]))
    sparse = draw(st.booleans())
    kw = {"cta_group": cta_group, "sparse": sparse}
    if kind in ("mxf8f6f4", "mxf4"):
        ab = ("e4m3", "e5m2", "e2m1") if kind == "mxf8f6f4" else ("e2m1",)
        a, b, d = draw(st.sampled_from(ab)), draw(st.sampled_from(ab)), "f32"
        m = 128 if cta_group == 1 else (256 if sparse else draw(st.sampled_from([128, 256])))
        ids = [0, 2] if kind == "mxf4" else [0, 1, 2, 3]
        kw.update(scale_dtype="ue8m0", sfa_id=draw(st.sampled_from(ids)), sfb_id=draw(st.sampled_from(ids)))
        if kind == "mxf4" and not sparse and cta_group == 2 and m == 256 and draw(st.booleans()):
            kw["k"] = 96
    else:
        a, b, d = draw(st.sampled_from(_DENSE_TYPES[kind]))
        m = draw(st.sampled_from([64, 128] if cta_group == 1 else [128, 256]))
        if sparse:
            kw["sparse_selector"] = draw(st.integers(0, 3))
        if kind == "i8":
            kw["saturate"] = draw(st.booleans())
        else:
            kw.update(negate_a=draw(st.booleans()), negate_b=draw(st.booleans()))
    step = 8 if cta_group == 1 else (32 if kind == "i8" else 16)
    n = draw(st.integers(1, 256 // step)) * step
    if kind == "i8" and cta_group == 1 and n > 32:
        n = n // 16 * 16
    for key, dt in (("a_major", a), ("b_major", b)):
        kw[key] = "K" if dt == "e2m1" else draw(st.sampled_from(["K", "MN"]))
    return Tcgen05InstrDesc(kind, a, b, d, m, n, **kw)


@settings(max_examples=300, deadline=None)
@given(_instr_descs())
def test_instr_desc_round_trip(desc):
    value = desc.encode()
    assert 0 <= value < 1 << 32
    assert Tcgen05InstrDesc.decode(desc.kind, value, cta_group=desc.cta_group, ws=desc.ws) == desc


@pytest.mark.parametrize(
    "kind, value, message",
    [
        ("f16", 1 << 6, "reserved bits 0x40"),
        ("f16", (8 << 24) | (1 << 17) | (1 << 4) | (3 << 7), "unknown A type code 3"),
        ("mxf8f6f4", (1 << 27) | (1 << 17) | 1, "reserved bits 0x1"),
        ("mxf8f6f4", (1 << 27) | (1 << 17), "unknown scale type code 0"),
    ],
)
def test_instr_desc_decode_rejects(kind, value, message):
    with pytest.raises(ValueError, match=message):
        Tcgen05InstrDesc.decode(kind, value)


def test_mma_k_per_kind():
    assert [tcgen05_mma_k(k) for k in ("tf32", "f16", "f8f6f4", "i8", "mxf8f6f4", "mxf4")] == [8, 16, 32, 32, 32, 64]
    assert tcgen05_mma_k("f16", sparse=True) == 32


def test_operand_swizzle_rule():
    tcgen05_check_operand_swizzle("tf32", "MN", SWIZZLE_128B_BASE32B)
    tcgen05_check_operand_swizzle("tf32", "K", 3)
    with pytest.raises(TilecError, match="kind::tf32 reads an MN-major operand only"):
        tcgen05_check_operand_swizzle("tf32", "MN", 3)
    with pytest.raises(TilecError, match="kind::f16 cannot read an MN-major operand"):
        tcgen05_check_operand_swizzle("f16", "MN", SWIZZLE_128B_BASE32B)


# --------------------------------------------------------------------------
# wgmma
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, d, k",
    [("f16", "f16", "f16", 16), ("bf16", "bf16", "f32", 16), ("tf32", "tf32", "f32", 8), ("e4m3", "e5m2", "f16", 32),
     ("i8", "u8", "i32", 32)],
)
def test_wgmma_k(a, b, d, k):
    assert wgmma_mma_k(a, b, d, 256) == k


@pytest.mark.parametrize(
    "args, kw, message",
    [
        (("f64", "f64", "f64", 64), {}, "wgmma needs A in {f16, bf16, tf32, e4m3, e5m2, i8, u8}, got A=f64"),
        (("i8", "i8", "i32", 40), {}, "with i8 inputs needs N in {8, 16, 24} or a multiple of 16 in [32, 256], got 40"),
        (("u8", "i8", "f32", 64), {}, "with u8 inputs needs D in {i32}"),
        (("f16", "bf16", "f32", 64), {}, "with A=f16 needs B in {f16}, got B=bf16"),
        (("bf16", "bf16", "f16", 64), {}, "with bf16 inputs needs D in {f32}"),
        (("f16", "f16", "f32", 12), {}, "N a multiple of 8 in [8, 256], got 12"),
        (("e4m3", "e4m3", "f32", 64), {"b_major": "MN"}, "reads e4m3 B only K-major"),
    ],
)
def test_wgmma_rejects(args, kw, message):
    with pytest.raises(TilecError) as err:
        wgmma_mma_k(*args, **kw)
    assert message in err.value.message

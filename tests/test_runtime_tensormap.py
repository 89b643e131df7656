"""TMA tensor-map rules, checked before the driver is asked (no GPU), and
encoding on a GPU."""
import ctypes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime_kernels
from tilec.compiler.diagnostics import TilecError
from tilec.runtime import driver, tensormap
from tilec.runtime.driver import CudaError
from tilec.runtime.tensormap import TENSORMAP_BYTES, TensorMapError, check_tensormap, encode_tiled

SEED = runtime_kernels.SEED_MAP


def with_(**changes):
    return {**SEED, **changes}


def test_seed_descriptor_is_legal():
    check_tensormap(SEED, 0x7F0000000000)
    check_tensormap(runtime_kernels.TMA_ROWS_MAP, 0x7F0000000100)


def test_address_may_be_unknown():
    check_tensormap(SEED, None)


BROKEN = [
    (with_(rank=0, dims=[], strides=[], box=[], elem_strides=[]), "rank 0 is not within 1..5"),
    (
        with_(rank=6, dims=[2] * 6, strides=[16] * 5, box=[8] * 6, elem_strides=[1] * 6),
        "rank 6 is not within 1..5",
    ),
    (with_(dims=[64, 8]), "dims must list 3 integers"),
    (with_(strides=[512]), "strides must list 2 integers"),
    (with_(dims=[64, 0, 4]), "dims[1] = 0 is not within 1..2^32"),
    (with_(dims=[64, 8, (1 << 32) + 1]), "dims[2] = 4294967297 is not within 1..2^32"),
    (with_(strides=[520, 128]), "strides[0] = 520 bytes is not a positive multiple of 16"),
    (with_(strides=[512, 1 << 40]), "strides[1] = 1099511627776 bytes is not below 2^40"),
    (with_(box=[64, 257, 4]), "box[1] = 257 is not within 1..256"),
    (with_(box=[64, 8, 0]), "box[2] = 0 is not within 1..256"),
    (with_(elem_strides=[1, 9, 1]), "elem_strides[1] = 9 is not within 1..8"),
    (with_(elem_strides=[1, 1, 0]), "elem_strides[2] = 0 is not within 1..8"),
    (with_(box=[60, 8, 4], swizzle="none"), "120 B is not a multiple of 16 bytes"),
    (with_(box=[128, 8, 4]), "256 B exceeds the 128B swizzle span"),
    (with_(box=[32, 8, 4], swizzle="32B"), "64 B exceeds the 32B swizzle span"),
    (with_(box=[64, 8, 4], swizzle="64B"), "128 B exceeds the 64B swizzle span"),
    (with_(interleave="32B", swizzle="128B"), "32B interleave needs swizzle '32B'"),
    (
        with_(rank=2, dims=[64, 8], strides=[128], box=[8, 8], elem_strides=[1, 1], interleave="16B"),
        "an interleaved map needs rank >= 3",
    ),
    (with_(dtype="i32", oob_fill="nan", box=[32, 8, 4]), "NaN out-of-bounds fill needs a float dtype"),
    (with_(dtype="f8"), "dtype 'f8' is not one of"),
    (with_(swizzle="256B"), "swizzle '256B' is not one of"),
    (with_(interleave="8B"), "interleave '8B' is not one of"),
    (with_(l2_promotion="512B"), "l2_promotion '512B' is not one of"),
    (with_(oob_fill="one"), "oob_fill 'one' is not one of"),
]


@pytest.mark.parametrize("desc, message", BROKEN, ids=[m for _, m in BROKEN])
def test_each_broken_rule_is_named(desc, message):
    with pytest.raises(TensorMapError) as info:
        check_tensormap(desc, 0x10000)
    assert isinstance(info.value, TilecError)
    assert "tensor map 'A_tmap0'" in info.value.message
    assert message in info.value.message


def test_base_address_alignment():
    with pytest.raises(TensorMapError, match="base address 0x10008 is not 16-byte aligned"):
        check_tensormap(SEED, 0x10008)
    interleaved = with_(interleave="32B", swizzle="32B", box=[16, 8, 4], strides=[512, 128])
    check_tensormap(interleaved, 0x10020)
    with pytest.raises(TensorMapError, match="not 32-byte aligned"):
        check_tensormap(interleaved, 0x10010)


def test_interleave_strides_are_multiples_of_32():
    desc = with_(interleave="32B", swizzle="32B", box=[16, 8, 4], strides=[528, 128])
    with pytest.raises(TensorMapError, match="528 bytes is not a positive multiple of 32"):
        check_tensormap(desc, 0x10000)


@st.composite
def legal_maps(draw):
    """Descriptors within every rule (no interleave)."""
    dtype, elem = draw(st.sampled_from([("u8", 1), ("f16", 2), ("bf16", 2), ("f32", 4), ("f64", 8)]))
    swizzle = draw(st.sampled_from(["none", "32B", "64B", "128B"]))
    span = {"none": 256 * elem, "32B": 32, "64B": 64, "128B": 128}[swizzle]
    rank = draw(st.integers(1, 5))
    inner_units = draw(st.integers(1, max(1, min(256 * elem, span) // 16)))
    inner = inner_units * 16 // elem
    box = [inner] + [draw(st.integers(1, 256)) for _ in range(rank - 1)]
    return {
        "name": "m",
        "tensor": "T",
        "dtype": dtype,
        "rank": rank,
        "dims": [draw(st.integers(1, 1 << 32)) for _ in range(rank)],
        "strides": [draw(st.integers(1, (1 << 36) - 1)) * 16 for _ in range(rank - 1)],
        "box": box,
        "elem_strides": [draw(st.integers(1, 8)) for _ in range(rank)],
        "interleave": "none",
        "swizzle": swizzle,
        "l2_promotion": draw(st.sampled_from(["none", "64B", "128B", "256B"])),
        "oob_fill": draw(st.sampled_from(["zero", "nan"] if dtype != "u8" else ["zero"])),
    }


@settings(max_examples=60, deadline=None)
@given(legal_maps(), st.integers(0, 1 << 44))
def test_legal_maps_pass(desc, base16):
    check_tensormap(desc, base16 * 16)


@settings(max_examples=60, deadline=None)
@given(legal_maps(), st.integers(1, 15))
def test_misaligned_base_always_fails(desc, offset):
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        check_tensormap(desc, 0x100000 + offset)


class FakeEncoder:
    """Stands in for cuTensorMapEncodeTiled: records its arguments, writes
    0, 1, ..., 127 as the descriptor, returns `status`."""

    def __init__(self):
        self.calls = []
        self.status = 0

    def __call__(self, out, dtype, rank, base, dims, strides, box, elem_strides, interleave, swizzle, l2, oob):
        self.calls.append(
            {
                "out": out,
                "dtype": dtype,
                "rank": rank,
                "base": base,
                "dims": dims[:rank],
                "strides": strides[: rank - 1],
                "box": box[:rank],
                "elem_strides": elem_strides[:rank],
                "enums": (interleave, swizzle, l2, oob),
            }
        )
        ctypes.memmove(out, bytes(range(128)), 128)
        return self.status


@pytest.fixture
def fake_encoder(monkeypatch):
    fake = FakeEncoder()
    monkeypatch.setattr(tensormap, "_encode", ctypes.CFUNCTYPE(ctypes.c_int, *tensormap._ENCODE_ARGTYPES)(fake))
    monkeypatch.setattr(driver, "device", lambda: None)
    return fake


def test_encode_passes_the_descriptor_to_the_driver(fake_encoder):
    blob = encode_tiled(SEED, 0x7F0000001000)
    assert blob == bytes(range(128))
    (call,) = fake_encoder.calls
    assert call["out"] % 128 == 0
    # the seed's host call: FLOAT16 (6), rank 3, interleave 0, swizzle 3, L2 128B (2), fill 0
    assert call == {
        "out": call["out"],
        "dtype": 6,
        "rank": 3,
        "base": 0x7F0000001000,
        "dims": [64, 8, 4],
        "strides": [512, 128],
        "box": [64, 8, 4],
        "elem_strides": [1, 1, 1],
        "enums": (0, 3, 2, 0),
    }


def test_encode_checks_rules_before_the_driver(fake_encoder):
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        encode_tiled(SEED, 0x7F0000001008)
    assert fake_encoder.calls == []


def test_encode_failure_is_a_cuda_error(fake_encoder):
    fake_encoder.status = 1  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaError, match="cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE"):
        encode_tiled(SEED, 0x7F0000001000)


@pytest.mark.gpu
def test_encode_seed_descriptor():
    if driver.device().compute_capability < (9, 0):
        pytest.skip("tensor maps need compute capability 9.0")
    ptr = driver.mem_alloc(8 * 256 * 2)
    try:
        blob = encode_tiled(SEED, ptr)
        assert len(blob) == TENSORMAP_BYTES
        assert any(blob)
        assert encode_tiled(SEED, ptr) == blob
        with pytest.raises(TensorMapError, match="not 16-byte aligned"):
            encode_tiled(SEED, ptr + 8)
    finally:
        driver.mem_free(ptr)

"""copy_async -> cp.async (sm_80 and newer), the cp.async intrinsics, and
copies into strided (padded, column-major) shared tiles falling back to
narrower accesses.  The PTX simulator runs cp.async as an immediate copy
with its zero-fill, so the data each thread moves is checked on the CPU."""
import numpy as np
import pytest

import test_dispatch_copy
from test_dispatch_copy import simulate
from tilec.compiler.diagnostics import TilecError


def compile_kernel(text, target="sm_80"):
    return test_dispatch_copy.compile_kernel(text, target)


def _round_trip(layout: str, shape=(64, 32), extra: str = "", src_shape=None, region=None) -> str:
    """A CTA copies A (or a region of it) into a shared tile with `layout`
    by copy_async, waits, and copies the tile back out to B."""
    m, n = shape
    sm, sn = src_shape or shape
    region = region or f"A[0:{m}, 0:{n}]"
    return (f"kernel k(A: f16[{sm}, {sn}], B: f16[{m}, {n}]):\n"
            f"    cta_id([1])\n    t = thread_id([128])\n"
            f"    As = alloc_shared(({m}, {n}), f16, layout={layout})\n"
            f"    copy_async(As[:, :], {region}{extra})\n"
            f"    ptx.cp_async.commit_group()\n    ptx.cp_async.wait_group(0)\n    cuda.cta_sync()\n"
            f"    copy(B[:, :], As[:, :])\n")


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("layout, size, cache", [
    ("S[64, 32]", 16, "cg"),  # row-major: 16-byte runs
    ("S[(64, 32) : (40, 1)]", 16, "cg"),  # rows padded to 40 elements (80 bytes): still 16-byte aligned runs
    ("S[(64, 32) : (36, 1)]", 8, "ca"),  # 72-byte rows: 8-byte runs
    ("S[(64, 32) : (34, 1)]", 4, "ca"),  # 68-byte rows: 4-byte runs
])
def test_cp_async_takes_the_widest_run_the_layouts_allow(layout, size, cache, target):
    r = compile_kernel(_round_trip(layout), target)
    assert f"cp.async.{cache}.shared.global [%r" in r.ptx and f"], {size};" in r.ptx
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float16)
    b = np.full((64, 32), np.nan, np.float16)
    if target == "sm_80":
        simulate(r, {"A": a, "B": b})
        np.testing.assert_array_equal(a, b)


def test_column_major_tiles_fall_back_to_element_copies():
    """A column-major padded tile has no two consecutive elements of a row
    next to each other: copy_async copies element by element, and cta.copy
    into it (which used to be refused with an error about copy_vec) too."""
    layout = "S[(64, 32) : (1, 72)]"
    a = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float16)
    for text in (_round_trip(layout), _round_trip(layout).replace("copy_async(As", "copy(As")):
        r = compile_kernel(text)
        assert "cp.async.ca" not in r.ptx and "st.shared.b16" in r.ptx or "st.shared.u16" in r.ptx
        b = np.full((64, 32), np.nan, np.float16)
        simulate(r, {"A": a, "B": b})
        np.testing.assert_array_equal(a, b)


def test_zero_fill_past_the_edge_of_a_ragged_tensor():
    """A 64x32 tile at (48, 16) of a 100x40 tensor: rows 100.. and columns
    40.. are outside; their bytes are zero-filled, runs that straddle the
    column edge read only the part inside."""
    text = _round_trip("S[64, 32]", src_shape=(100, 40), region="A[48:112, 16:48]", extra=', oob="zero"')
    r = compile_kernel(text)
    assert "cp.async.cg.shared.global" in r.ptx
    a = np.random.default_rng(2).standard_normal((100, 40)).astype(np.float16)
    b = np.full((64, 32), np.nan, np.float16)
    simulate(r, {"A": a, "B": b})
    want = np.zeros((64, 32), np.float16)
    want[:52, :24] = a[48:100, 16:40]
    np.testing.assert_array_equal(b, want)


def test_ragged_column_edge_with_4_byte_runs():
    text = _round_trip("S[(64, 32) : (34, 1)]", src_shape=(64, 38), region="A[0:64, 8:40]", extra=', oob="zero"')
    r = compile_kernel(text)
    a = np.random.default_rng(3).standard_normal((64, 38)).astype(np.float16)
    b = np.full((64, 32), np.nan, np.float16)
    simulate(r, {"A": a, "B": b})
    want = np.zeros((64, 32), np.float16)
    want[:, :30] = a[:, 8:38]
    np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("text, message", [
    (_round_trip("S[64, 32]", extra=', cache="cg"').replace("S[64, 32]", "S[(64, 32) : (36, 1)]"),
     'cache="cg" needs 16-byte copies'),
    (_round_trip("S[(64, 32) : (1, 72)]", extra=', oob="zero"'), 'oob="zero" needs cp.async runs of 4 bytes'),
    (_round_trip("S[64, 32]", extra=', oob="nan"'), "copy_async"),
])
def test_bad_cp_async_copies_are_located(text, message):
    with pytest.raises(TilecError, match=message) as err:
        compile_kernel(text)
    assert err.value.span.line == 5


@pytest.mark.parametrize("call, message", [
    ('ptx.cp_async(As.ptr_to([0, 0]), A.ptr_to([0, 0]), size=8, cache="cg")', "cp.async.cg copies 16 bytes"),
    ("ptx.cp_async(As.ptr_to([0, 0]), As.ptr_to([0, 8]), size=16)", "cp.async reads global memory"),
    ("ptx.cp_async.wait_group(9)", r"'n' must be in \[0, 7\]"),
])
def test_bad_cp_async_intrinsic_calls(call, message):
    text = ("kernel k(A: f16[64, 32]):\n    cta_id([1])\n    t = thread_id([128])\n"
            "    As = alloc_shared((64, 32), f16)\n    " + call + "\n")
    with pytest.raises(TilecError, match=message) as err:
        compile_kernel(text)
    assert err.value.span.line == 5

"""Internal errors found by tools/fuzz.py, each as the smallest program that
showed it.  Every one must now end in a located `TilecError`, in well under
the fuzzer's time limit."""
import signal
import textwrap
from contextlib import contextmanager

import pytest

from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse


class _TooSlow(Exception):
    pass


@contextmanager
def _within(seconds: float):
    def alarm(signum, frame):
        raise _TooSlow(f"compiling took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def located_error(text: str, target: str = "sm_90a") -> TilecError:
    text = textwrap.dedent(text).strip() + "\n"
    with _within(5), pytest.raises(TilecError) as info:
        compile_source(text, "regression.tile", target=target)
    err = info.value
    assert err.span is not None, err.message
    return err


@pytest.mark.parametrize("dtype", ["e2m1", "ue8m0", "tf32"])  # e4m3 and e5m2 are register values (test_fp8_registers.py)
def test_register_array_of_a_storage_only_dtype(dtype):
    """KeyError in the emitter's register classes (seed 11, input 4445)."""
    err = located_error(
        f"""
        kernel k(A: u8[256]):
            r = alloc_local((4,), {dtype})
        """,
        target="sm_80",
    )
    assert dtype in err.message and err.span.line == 2


def test_huge_register_array():
    """The emitter made one register per element of 2**31 (seed 11, input 4013)."""
    err = located_error(
        """
        kernel k(A: f16[128]):
            r = alloc_local((2147483647,), u8)
        """
    )
    assert err.span.line == 2 and "512 KiB" in err.message


@pytest.mark.parametrize("stride", [65535, 2**31])
def test_register_layout_spanning_a_huge_storage(stride):
    """Dispatch listed every storage slot of a fragment layout with a huge
    stride: MemoryError, or minutes (seed 13, inputs 751 and 6355)."""
    err = located_error(
        f"""
        kernel k(A: f32[16, 8]):
            cta_id([1])
            lane = lane_id([32])
            D = alloc((16, 8), f32, scope="local", layout=S[(2, 8, 4, 2) : ({stride}, 4@laneid, 1@laneid, 1)])
            warp.fill(D, 0.0)
        """,
        target="sm_80",
    )
    assert err.span.line in (4, 5)  # the layout (too big to exist) or the fill (too big for registers)


def test_register_layout_on_tensor_memory_axes():
    """IndexError in dispatch's register storage, and element accesses that
    silently ignored the TLane step (seed 13, input 7867)."""
    err = located_error(
        """
        kernel k(A: f32[64]):
            cta_id([1])
            lane = lane_id([32])
            r = alloc_local((4,), f32, layout=S[4 : 1@TLane])
            r[1] = 2.0
        """
    )
    assert err.span.line == 4 and "'TLane'" in err.message


def test_layout_that_is_not_a_layout():
    """`S[..] + S[..]` is an addition of two layouts, not a layout:
    AttributeError in dispatch (seed 13, input 4479)."""
    err = located_error(
        """
        kernel k(A: u8[32, 16]):
            cta_id([1])
            s = alloc((32, 16), u8, scope="shared", layout=S[(32, 16) : (16, 1)] + S[(2, 2) : (1, 2)])
            cta.copy(s[:, :], A[:, :])
        """
    )
    assert err.span.line == 3 and "must be a layout" in err.message


@pytest.mark.parametrize("dtype", ["tf32", "e4m3", "e2m1"])
def test_mutable_scalar_of_a_storage_only_dtype(dtype):
    """KeyError in the emitter's register widths (seed 12, input 2630)."""
    err = located_error(
        f"""
        kernel k(A: f32[4]):
            x: {dtype} = 0
        """
    )
    assert dtype in err.message and err.span.line == 2


_KERNEL = """
kernel k(A: f32[4]):
    cta_id([1])
    tx = thread_id([32])
    A[0] = {}
"""


@pytest.mark.parametrize(
    "expr, message",
    [
        # folding made a number of 2**66 bits, for minutes (seed 15, input 6604)
        ("2 << (31 << 31)", "overflows 64 bits"),
        # OverflowError: integer division result too large for a float
        ("(1 << 63) * 4 / 3.0", "overflows 64 bits"),
        ("1" + "0" * 400 + " / 3", "does not fit in 64 bits"),
        # ValueError: a literal of more than 4300 digits reached int()
        ("1" + "0" * 5000, "does not fit in 64 bits"),
        ("0x1" + "0" * 16, "does not fit in 64 bits"),
        # an inf constant has no literal: the IR no longer printed
        ("1e999", "beyond the f64 range"),
        ("1e308 * 10.0", "overflows the f64 range"),
    ],
    ids=["huge-shift", "int-to-float", "huge-literal-division", "5000-digits", "hex-65-bits",
         "inf-literal", "inf-folded"],
)
def test_constants_beyond_64_bits(expr, message):
    err = located_error(_KERNEL.format(expr))
    assert message in err.message and err.span.line == 4


@pytest.mark.parametrize("literal", ["18446744073709551615", "0xFFFFFFFFFFFFFFFF", "000000000000000000000000007"])
def test_the_widest_integer_literals_still_parse(literal):
    module = parse(f"const X = {literal}\n", "t.tile")
    assert module.consts[0].value.value == int(literal, 0 if literal.startswith("0x") else 10)


@pytest.mark.parametrize(
    "body",
    [
        "lane = lane_id([32])\n    if lane == 0:\n        meta m = 1",
        "for i in range(4):\n        meta m = i",
        "lane = lane_id([32])\n    while lane < 0:\n        inline def h():\n            pass",
        "meta m = 1",
    ],
    ids=["if", "for", "while", "kernel"],
)
def test_blocks_of_only_metas_still_print(body):
    """expand-inline emptied the block, and the printer cannot write an empty
    body (seed 16, input 195)."""
    text = f"kernel k(A: f32[4]):\n    {body}\n"
    module = compile_source(text, "regression.tile", target="sm_90a").module
    assert parse(print_module(module), "printed.tile") == module


@pytest.mark.parametrize("method", ["r.local(0)", "r.view(0, 4)", "r.view(-2, 4)", "pool.alloc((-16,), i16)"])
def test_buffers_of_no_elements(method):
    """A layout of extent 0 failed to build, with no location (found by
    tests/test_fuzz.py: `D_f.local(0)`); a pool of negative size vanished
    while its buffers still named it (seed 18, input 7272)."""
    err = located_error(
        f"""
        kernel k(A: f32[4]):
            r = alloc_local((4,), f32)
            pool = smem_pool()
            v = {method}
        """
    )
    assert "extents must be positive" in err.message and err.span.line == 4


def test_tmem_copy_over_a_huge_column_span():
    """tcgen05.cp dispatch made a slot table as wide as the tile's column
    span: 7.5 TiB (seed 19, input 9196)."""
    err = located_error(
        """
        kernel k(A: u8[32, 16]):
            cta_id([1])
            warpgroup_id([1])
            wid = warp_id_in_wg([4])
            lane = lane_id([32])
            s = alloc([32, 16], u8, scope="shared", layout=S[(32, 16) : (16, 1)], align=1024)
            taddr = alloc_shared([1], u32)
            tmem = decl_buffer([32, 16], u8, scope="tmem", allocated_addr=taddr[0],
                               layout=S[(32, 16) : (1@TLane, 2147483647@TCol)] + R[4 : 32@TLane])
            if wid == 0 and lane == 0:
                copy_async(tmem[:, :], s[:, :], cta_group=1)
        """,
        target="sm_100a",
    )
    assert err.span.line == 11

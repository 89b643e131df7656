"""Every class of bad input in tests/bad_inputs.py ends, within a second, in
a GCC-style error located where the seed says -- not in an internal error, a
hang, an error without a place, or PTX that ptxas rejects."""
import pytest

from bad_inputs import SEEDS
from test_fuzz_regressions import _within
from tilec.cli import main
from tilec.compiler import source
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.passes.expand_inline import parse_define_value
from tilec.runtime.assemble import assemble


def _compile(seed):
    text = seed.program
    if isinstance(text, bytes):
        text = source.decode(text, "bad.tile")
    return compile_source(text, "bad.tile", target=seed.target)


@pytest.mark.parametrize("seed", SEEDS, ids=[s.name for s in SEEDS])
def test_bad_input_ends_in_a_located_error(seed):
    # a second of the compiler's own time; the margin is for a loaded machine
    with _within(5), pytest.raises(TilecError) as info:
        _compile(seed)
    err = info.value
    assert err.span is not None, err.message
    assert (err.span.line, seed.says in err.message) == (seed.line, True), err.message


@pytest.mark.parametrize("name", ["form feed in a comment", "U+2028 in a comment"])
def test_caret_is_under_the_line_the_error_names(name):
    seed = next(s for s in SEEDS if s.name == name)
    with pytest.raises(TilecError) as info:
        _compile(seed)
    rendered = info.value.render({"bad.tile": seed.program}).splitlines()
    assert rendered[1] == "    x = undefined_name" and rendered[2] == "        ^" + "~" * 13


def test_invalid_utf8_names_the_byte_and_its_column(tmp_path, capsys):
    path = tmp_path / "latin1.tile"
    path.write_bytes("kernel k(A: f32[4]):\n    # caf\xe9 au lait\n".encode("latin-1"))
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2:10: error: byte 0xe9 is not valid UTF-8" in err
    assert "^" in err.splitlines()[2]


def test_end_of_file_after_a_block_header_points_at_the_header():
    seed = next(s for s in SEEDS if s.name.startswith("file ending"))
    with pytest.raises(TilecError) as info:
        _compile(seed)
    assert (info.value.span.line, info.value.span.col) == (4, 13)  # just after `if True:`


@pytest.mark.parametrize("text, value", [("08", 8), ("0x10", 16), ("-007", -7)])
def test_define_values_with_leading_zeros_are_decimal(text, value):
    assert parse_define_value("N", text).value == value


def test_a_define_that_is_not_a_value_is_located_at_the_const():
    with pytest.raises(TilecError) as info:
        compile_source("const N = 4\nkernel k(A: f32[4]):\n    pass\n", "d.tile", defines={"N": "1.5x"})
    assert info.value.span.line == 1 and "-D N=1.5x" in info.value.message


def test_limits_leave_room_for_real_kernels():
    """Shared memory up to the limits, and unrolls up to theirs, compile."""
    head = "target sm_90a\nkernel k(A: f32[16]):\n    tx = thread_id([32])\n"
    compile_source(head + '    s = alloc((49152,), u8, scope="shared")\n    s[tx] = 1\n', "ok.tile")
    compile_source(head + '    s = alloc((232448,), u8, scope="shared.dyn")\n    s[tx] = 1\n', "ok.tile")
    compile_source(head + "    for i in unroll(1024):\n        A[0] = 1.0\n", "ok.tile")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_static_shared_memory_may_fill_the_block_on_hopper_and_blackwell(target):
    """Issue 18 item 4: the per-block limit of static shared memory is 227 KiB
    on sm_90a/sm_100a, not 48 KiB.  ptxas assembles a 227 KiB static `.shared`
    array there, and an H200 launched one with no opt-in (docs/language.md,
    Limits); one byte more is refused at the allocation, naming the limit and
    the target, with no advice to go dynamic (that limit is the same)."""
    head = f"target {target}\nkernel k(A: f32[16]):\n    tx = thread_id([32])\n"
    result = compile_source(head + '    s = alloc((232448,), u8, scope="shared")\n    s[tx] = 1\n', "ok.tile")
    assert "\t.shared .align 16 .b8 $shared_s[232448];" in result.ptx.splitlines()
    assemble(result.ptx, target)
    with pytest.raises(TilecError) as info:
        compile_source(head + '    s = alloc((232449,), u8, scope="shared")\n', "big.tile")
    assert info.value.span.line == 4
    assert info.value.message == (
        "static shared memory reaches 232449 bytes, over the 232448 bytes (227 KiB) of static "
        f"shared memory a block may have on {target}"
    )


@pytest.mark.parametrize("index", ["16", "-1", "4611686018427387904"])
def test_a_constant_element_index_outside_its_buffer_is_refused(index):
    """A[2**62] on an f32 buffer used to store to A[0] (the byte offset
    wrapped past 2**64); A[16] and A[-1] wrote past the buffer."""
    text = f"kernel k(A: f32[16]):\n    tx = thread_id([32])\n    A[{index}] = A[15]\n"
    with pytest.raises(TilecError) as info:
        compile_source(text, "idx.tile")
    assert info.value.span.line == 3 and "outside dimension 0 of 'A' (extent 16)" in info.value.message

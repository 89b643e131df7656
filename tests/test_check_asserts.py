"""assert_const(cond, "message"): compile-time limits of a kernel, checked
with the -D values, reported at the statement, and gone after check-asserts."""
import pytest

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_module

PROGRAM = """target sm_90a
const N = 256
const TILE = 128

kernel k(A: f32[N]):
    assert_const(N % TILE == 0, "N must be a multiple of the tile")
    tid = thread_id([128])
    if TILE > 64:
        assert_const(N >= TILE, "N must hold one tile")
    else:
        assert_const(False, "never checked: the branch is not taken")
    A[tid] = 0.0
"""


def compiled(text=PROGRAM, **defines):
    return compile_source(text, "k.tile", defines=defines, options=Options(stop_after="check-asserts"))


def test_holding_assertions_disappear():
    text = print_module(compiled().module)
    assert text.count("assert_const") == 1  # the untaken branch's, which fold-constants drops
    folded = compile_source(PROGRAM, "k.tile", options=Options(stop_after="fold-constants")).module
    assert "assert_const" not in print_module(folded)
    assert "A[tid] = 0.0" in print_module(folded)


@pytest.mark.parametrize("defines, message, line", [
    ({"N": 200}, "assertion failed: N must be a multiple of the tile", 6),
    ({"N": 0}, "assertion failed: N must hold one tile", 9),
])
def test_failing_assertion_is_located(defines, message, line):
    with pytest.raises(TilecError, match=message) as err:
        compiled(**defines)
    assert err.value.span.line == line


def test_untaken_branch_is_not_checked_but_taken_one_is():
    with pytest.raises(TilecError, match="never checked"):
        compiled(TILE=32, N=64)


@pytest.mark.parametrize("call, message", [
    ('assert_const(tid == 0, "x")', "the condition must be a compile-time bool"),
    ("assert_const(N > 0)", "missing argument 'message'"),
    ('assert_const(N > 0, 3)', "'message' must be a string literal"),
])
def test_malformed_assertions(call, message):
    text = PROGRAM.replace("    A[tid] = 0.0\n", f"    {call}\n    A[tid] = 0.0\n")
    with pytest.raises(TilecError, match=message):
        compiled(text)


def test_the_verifier_reports_it_before_any_lowering():
    with pytest.raises(TilecError, match="assertion failed") as err:
        compile_source(PROGRAM, "k.tile", defines={"N": 200}, options=Options(stop_after="check-asserts"))
    assert err.value.span.line == 6

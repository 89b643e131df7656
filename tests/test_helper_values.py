"""Inline helpers that return values (`return expr`, tuples too), and what
assigning inside a helper does: a variable the caller can see is updated
(as `+=` does), a name of the helper's own stays local."""
import numpy as np
import pytest

from emit_util import lower, run
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse

N = 32


def _kernel(helpers: str, body: str) -> str:
    return (helpers + f"\nkernel k(A: f32[{N}], B: f32[{N}]):\n    cta_id([1])\n    t = thread_id([{N}])\n"
            + "".join("    " + line + "\n" for line in body.strip("\n").split("\n")))


def _run(src: str, a: np.ndarray) -> np.ndarray:
    b = np.zeros(N, np.float32)
    run(src, {"A": a, "B": b})
    return b


A = np.arange(N, dtype=np.float32) - 10


def test_a_helper_value_in_an_expression():
    src = _kernel("inline def sq_plus(v, c):\n    s = v * v\n    return s + c\n",
                  "B[t] = sq_plus(A[t], 1.0) * 2.0 + sq_plus(3.0, A[t])")
    np.testing.assert_array_equal(_run(src, A), (A * A + 1) * 2 + (9 + A))


def test_two_calls_in_one_statement_keep_their_own_values():
    """The second expansion reassigns the shared variable `m`; the first
    call's value was taken before it."""
    src = _kernel("inline def bigger(x, y):\n    m = max(x, y)\n    return m\n",
                  "m: f32 = 0.0\nB[t] = bigger(A[t], 0.0) - bigger(A[t], 5.0)")
    np.testing.assert_array_equal(_run(src, A), np.maximum(A, 0) - np.maximum(A, 5))


def test_a_helper_returns_a_tuple():
    src = _kernel("inline def split(x):\n    return x + 1.0, x * 3.0\n",
                  "lo, hi = split(A[t])\nB[t] = lo - hi")
    np.testing.assert_array_equal(_run(src, A), (A + 1) - A * 3)


def test_helpers_calling_helpers_and_conditions():
    src = _kernel("inline def twice(x):\n    return x * 2.0\n"
                  "inline def quad(x):\n    y = twice(x)\n    return twice(y)\n",
                  "if quad(A[t]) > 8.0:\n    B[t] = quad(A[t])\nelif twice(A[t]) < -4.0:\n    B[t] = -1.0")
    want = np.where(4 * A > 8, 4 * A, np.where(2 * A < -4, -1, 0)).astype(np.float32)
    np.testing.assert_array_equal(_run(src, A), want)


def test_assignment_in_a_helper_updates_the_callers_variable():
    """`acc = acc + x` in the helper is the kernel's acc, exactly like
    `acc += x`; the helper's own temporary `tmp` does not leak."""
    src = _kernel("inline def add_to(x):\n    tmp = x * 2.0\n    acc = acc + tmp\n    acc += 1.0\n",
                  "acc: f32 = 0.0\nadd_to(A[t])\nadd_to(1.0)\nB[t] = acc")
    np.testing.assert_array_equal(_run(src, A), (2 * A + 1) + 3)
    text = print_module(lower(src))
    assert "acc = acc + tmp" in text and "tmp_1 = 2.0" in text


def test_a_helpers_own_name_does_not_capture_a_later_kernel_variable():
    src = _kernel("inline def f(x):\n    r = x + 1.0\n    return r\n", "B[t] = f(A[t])\nr = 5.0\nB[t] = B[t] + r")
    np.testing.assert_array_equal(_run(src, A), A + 1 + 5)


def test_return_prints_and_parses_back():
    src = "inline def f(x):\n    return x + 1, x\n\ninline def g():\n    return\n\nkernel k(A: f32[4]):\n    pass\n"
    m = parse(src)
    assert parse(print_module(m)) == m
    assert "    return x + 1, x\n" in print_module(m) and "    return\n" in print_module(m)


@pytest.mark.parametrize("helpers, body, message, line", [
    ("inline def f(x):\n    return x\n    x = 1\n", "B[t] = f(1.0)",
     "'return' ends inline helper 'f': it must be the last statement of its body", 2),
    ("inline def f(x):\n    if x > 0.0:\n        return x\n    return 0.0\n", "B[t] = f(A[t])",
     "'return' ends inline helper 'f'", 3),
    ("", "return 1", "'return' is allowed only as the last statement of an inline helper", None),
    ("inline def f(x):\n    B[0] = x\n", "B[t] = f(1.0)", "inline helper 'f' returns no value", None),
    ("inline def f(x):\n    return x > 0.0\n", "while f(A[t]):\n    pass",
     "inline helper 'f' in a while condition would run once", None),
])
def test_helper_value_errors_are_located(helpers, body, message, line):
    src = _kernel(helpers, body)
    with pytest.raises(TilecError, match=message) as err:
        lower(src)
    assert err.value.span.line == (helpers.count("\n") + 5 if line is None else line)  # None: the kernel's body

"""The symbolic-integer layer: linear forms (`tilec.compiler.affine`) and
regions (`tilec.compiler.region`), which the verifier, dispatch and the TMA
planner all read operands through."""
import pytest

from tilec.compiler import ir
from tilec.compiler.affine import Affine, linear, to_expr
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_expr
from tilec.compiler.region import Region
from tilec.compiler.symbols import Buffer
from tilec.grammar.parser import parse


def parse_expr(text: str) -> ir.Expr:
    return parse(f"const X = {text}\n").consts[0].value


def test_linear_reads_sums_of_multiples_and_keeps_other_terms_opaque():
    atoms = {}
    form = linear(parse_expr("(k + 1) * 64 - 2 * (k % 2) + bx * 128 - k * 64"), atoms)
    assert form == Affine(64, (("bx", 128), ("k % 2", -2)))
    assert set(atoms) == {"k", "k % 2", "bx"}
    assert print_expr(to_expr(form, atoms)) == "bx * 128 - k % 2 * 2 + 64"
    assert linear(to_expr(form, atoms)) == form


def test_divisor_facts_travel_with_the_form():
    K = Affine.symbol("K", divisor=8)
    assert (K * 2 + 16).divisible_by(16)
    assert not (K + 4).divisible_by(8)
    assert (K * 4).known_divisor() == 32
    assert not (K * 2).divisible_termwise(16)  # K / 8 would be a new symbol
    with pytest.raises(ValueError):
        (K * 2).exact_div(16)
    assert (K * 16 + 32).exact_div(16) == K + 2
    # a fact is not the value: the same value compares equal whatever is known
    assert Affine.symbol("K", 8) == Affine.of("K")
    # facts from both sides are kept (a multiple of 8 and of 12 is one of 24)
    assert (Affine.symbol("K", 8) + Affine.symbol("K", 12) * 0).divisor("K") == 24
    assert linear(parse_expr("n * 3"), divisor=lambda e: 4).divisible_by(12)


def _buf(shape, scope="global"):
    return Buffer("A", "f16", tuple(shape), scope)


def test_region_extents_are_linear_differences():
    r = Region.read(parse_expr("A[k * 64 : k * 64 + 64, 3, :]"), _buf((128, 8, 32)))
    assert r.extents == (64, 1, 32) and r.shape == (64, 32) and r.dims == (0, 2)
    assert r.affine_starts() == (Affine(0, (("k", 64),)), Affine(3), Affine())
    assert Region.read(parse_expr("A[0:n]"), _buf((64,))).extents == (None,)
    assert Region.read(parse_expr("A"), _buf((4, 8))).extents == (4, 8)


@pytest.mark.parametrize(
    "text, extent",
    [
        # `x + a : x + b` is read without linear forms ...
        ("A[n + 64 : n + 128]", 64),
        ("A[k * 64 - 8 : k * 64 + 8]", 16),
        ("A[(k + 1) * 2 : (k + 1) * 2 + 4]", 4),
        ("A[4 : 2 * 6]", 8),
        ("A[n + 64 : m + 128]", None),
        ("A[n + 4 : n * 2]", None),
        # ... every other slice with them, to the same answers
        ("A[k * 2 : k + k + 8]", 8),
        ("A[n : n * 1 + 3]", 3),
        ("A[k - n : k + 5 - n]", 5),
        ("A[2 * k + 1 : k * 2 + 9]", 8),
        ("A[k : k * 2]", None),
    ],
)
def test_region_extent_of_a_slice_is_stop_minus_start_as_linear_forms(text, extent):
    r = Region.read(parse_expr(text), _buf((256,)))
    assert r.extents == (extent,)
    i = parse_expr(text).indices[0]
    d = linear(i.stop) - linear(i.start)
    assert (d.const if d.is_const else None) == extent


@pytest.mark.parametrize(
    "text, scope, past_end, message",
    [
        ("A[120:136, 0:64]", "global", False, "slice 120:136 is out of bounds for dimension 0 of 'A' (size 128)"),
        ("A[120:136, 0:64]", "global", True, None),
        ("A[120:136, 0:64]", "shared", True, "slice 120:136 is out of bounds"),  # only a tensor is clipped
        ("A[128:144, 0:64]", "global", True, "slice 128:144"),  # nothing of it is inside
        ("A[r:r + 200, 0:64]", "global", True, "slice r:r + 200"),  # longer than the dim
        ("A[128, 0:64]", "global", True, "index 128 is out of bounds for dimension 0"),
        ("A[r:r + 64, 0:64]", "global", False, None),
    ],
)
def test_region_bounds(text, scope, past_end, message):
    r = Region.read(parse_expr(text), _buf((128, 64), scope))
    if message is None:
        r.check_bounds(past_end)
        return
    with pytest.raises(TilecError) as info:
        r.check_bounds(past_end)
    assert message in info.value.message


def test_buffer_layout_value_is_computed_once():
    b = _buf((4, 8), "shared")
    assert str(b.tile_layout) == "S[(4, 8) : (8, 1)]" and b.tile_layout is b.tile_layout


def test_known_divisor_of_a_choice_divides_both_choices():
    """A select or min/max is one of its two values: what divides both
    divides it (the clamped start of an `oob="zero"` copy, `s if s < n else
    0`, keeps the alignment of s)."""
    from tilec.compiler.divisors import known_divisor

    d = {"s": 64, "t": 48}.get
    assert known_divisor(parse_expr("s if s < n else 0"), lambda n: d(n, 1)) == 64
    assert known_divisor(parse_expr("s if c else t"), lambda n: d(n, 1)) == 16
    assert known_divisor(parse_expr("min(s, t)"), lambda n: d(n, 1)) == 16
    assert known_divisor(parse_expr("max(s, 3)"), lambda n: d(n, 1)) == 1

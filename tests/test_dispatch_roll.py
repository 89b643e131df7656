"""dispatch/roll.py: `roll_rows` (statements built from integer rows, what
the cast lowering uses) writes exactly what `roll` writes for the same
statements built out, spans included."""
import pytest

from tilec.compiler import ir, visit
from tilec.passes.dispatch.registry import DispatchContext, NameGen
from tilec.compiler.targets import target
from tilec.passes.dispatch.roll import roll, roll_rows

SPAN = ir.Span("k.tile", 3, 5)


def build(kind, values):
    """A cast-like statement: `kind` is "pair" (two destinations, two
    sources) or "one"; `values` the indices of its 2-D elements."""
    def element(name, two):
        return ir.Index(ir.Name(name, span=SPAN),
                        tuple(ir.Int(v, span=SPAN) if isinstance(v, int) else v for v in two), span=SPAN)
    elems = [element("d" if k < len(values) // 4 or kind == "one" and k == 0 else "s", values[2 * k:2 * k + 2])
             for k in range(len(values) // 2)]
    if kind == "one":
        return ir.Assign((elems[0],), ir.Call("convert", (elems[1], ir.DTypeLit("f16"))), span=SPAN)
    return ir.ExprStmt(ir.Call("ptx.cvt.f16x2.f32", tuple(elems), span=SPAN), span=SPAN)


def ctx():
    return DispatchContext(target("sm_90a"), names=NameGen(["j"]))


def located(stmts) -> list:
    """Every node with its span, in walk order (node equality leaves spans out)."""
    return [(n, n.span) for s in stmts for n in visit.walk(s)]


@pytest.mark.parametrize("rows", [
    [("pair", (0, 0, 0, 1, 0, 0, 0, 1)), ("pair", (8, 0, 8, 1, 8, 0, 8, 1)), ("pair", (0, 8, 0, 9, 0, 8, 0, 9))],
    [("pair", (0, 2 * k, 0, 2 * k + 1, 1, 2 * k, 1, 2 * k + 1)) for k in range(5)] + [("one", (0, 10, 1, 10))],
    [("one", (0, k, 0, k)) for k in range(4)] + [("one", (1, 0, 1, 0))] + [("one", (2, 3 * k, 5, k)) for k in range(3)],
    [("one", (0, 0, 0, 0)), ("one", (0, 1, 0, 1))],
])
def test_roll_rows_writes_what_roll_writes(rows):
    stmts = [build(kind, values) for kind, values in rows]
    assert located(roll_rows(ctx(), rows, build, SPAN)) == located(roll(ctx(), stmts, SPAN))


def register_copy(coords) -> list:
    """A register copy's statements, as ldst writes them: register
    `r[coord]` from memory at an offset that moves with it."""
    def stmt(row, col):
        mem = ir.Index(ir.Name("m"), (ir.Binary("+", ir.Name("t"), ir.Int(row)), ir.Int(col)))
        return ir.Assign((ir.Index(ir.Name("r"), (ir.Int(row), ir.Int(col))),), mem)
    return [stmt(*c) for c in coords]


@pytest.mark.parametrize("coords", [
    [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)],  # a wgmma fragment's: no run
    [(0, k) for k in range(6)],  # one run
    [(0, 0), (8, 0), (0, 1), (0, 2), (0, 3), (8, 8)],  # a run in the middle
    [(0, 0), (0, 1)],  # too short
    [],
])
def test_roll_with_anchors_writes_what_roll_writes(coords):
    """The registers' coordinates as anchors spare the keying where no
    run can be, and change nothing where one is."""
    stmts = register_copy(coords)
    assert located(roll(ctx(), stmts, SPAN, anchors=list(coords))) == located(roll(ctx(), stmts, SPAN))

"""Every example, through every pass: the IR between passes prints and parses
back to itself, the driver's instrumentation works on it, and its PTX
assembles for its target with no ptxas warning."""
import pathlib

import pytest

from tilec import cli
from tilec.compiler.passmanager import Options, PassContext
from tilec.pipeline import pass_manager
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse
from tilec.runtime.assemble import assemble

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.tile"))
IDS = [str(p.relative_to(ROOT / "examples")) for p in EXAMPLES]


def test_there_are_examples():
    assert len(EXAMPLES) >= 15


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_ir_round_trips_at_every_pass_boundary(path):
    """parse(print(ir)) == ir after each pass, and the printed text is a
    fixed point of print . parse; the last pass leaves PTX that assembles."""
    ctx = PassContext(filename=str(path), source=path.read_text(), options=Options())
    module = None
    boundaries = []
    for p in pass_manager().passes:
        module = p.apply(module, ctx)
        text = print_module(module)
        again = parse(text, f"{p.name}.tile")
        assert again == module, f"the IR after {p.name} does not survive print/parse"
        assert print_module(again) == text
        boundaries.append(p.name)
    assert boundaries[-1] == "emit-ptx"
    assemble(ctx.artifacts["ptx"], ctx.target.name)


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_instrumented_driver_run(path, tmp_path, capsys):
    """`tilec FILE --time-passes --dump-ir-after=all --dump-dir d` writes one
    parseable dump per pass, a timing table, the PTX and its kernel.json."""
    out = tmp_path / "k.ptx"
    dumps = tmp_path / "d"
    code = cli.main([str(path), "-o", str(out), "--time-passes", "--dump-ir-after=all", "--dump-dir", str(dumps)])
    assert code == 0
    names = pass_manager().names
    files = sorted(dumps.iterdir())
    assert [f.name for f in files] == [f"{i:02d}-{n}.tile" for i, n in enumerate(names, 1)]
    for f in files:
        parse(f.read_text(), f.name)
    table = capsys.readouterr().err
    assert all(n in table for n in names)
    assert out.read_text().startswith("//") and (tmp_path / "k.json").exists()

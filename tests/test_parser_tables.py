"""The parser's LALR tables ship with the package (`tilec/grammar/tables.py`,
written by `tools/grammar_tables.py`): they match the grammar, they are what
the parser loads, a run does not import Lark, and nothing -- no pickle, no
file of the cache directory -- is loaded from a place another user could
write to."""
import fnmatch
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tilec.grammar import generate, lalr, parser

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("grammar_tables", ROOT / "tools" / "grammar_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_tables_match_the_grammar():
    shipped = Path(generate.TABLES).read_text(encoding="utf-8")
    assert shipped == _tool().render(), "tile.lark changed: run python3 tools/grammar_tables.py"


def test_the_parser_loads_the_shipped_tables(monkeypatch):
    tables = parser._shipped_tables()
    assert tables is not None and tables["grammar"] == parser.grammar_text()
    built = []
    monkeypatch.setattr(parser, "build_parser", lambda *a, **k: built.append(1))
    parser._parser.cache_clear()
    try:
        parser._parser()
    finally:
        parser._parser.cache_clear()
    assert built == []


def test_stale_tables_fall_back_to_the_grammar(monkeypatch):
    monkeypatch.setattr(parser, "_shipped_tables", lambda: {"grammar": "stale"})
    parser._parser.cache_clear()
    try:
        module = parser.parse("kernel k(A: f32[4]):\n    A[0] = 1.0\n", "k.tile")
    finally:
        parser._parser.cache_clear()
    assert module.kernels[0].name == "k"


def test_every_node_of_the_grammar_has_a_builder_method():
    """The builder makes every node the tables name (Lark would have made a
    bare tree of a node without one; the IR has no such thing)."""
    names = {rule[3] for rule in generate.build()["rules"] if rule[2] == lalr.NODE}
    assert names and not {n for n in names if not callable(getattr(parser._Builder, n, None))}


def test_a_compile_does_not_import_lark(tmp_path):
    """Lark builds the tables; a run parses without it (its import, and the
    `regex` module's it brings, cost more than the parse)."""
    code = (
        "import sys\n"
        "from tilec.cli import main\n"
        f"status = main([{str(ROOT / 'examples' / 'hopper' / 'hgemm_v7.tile')!r}, '-o', {str(tmp_path / 'k.ptx')!r}])\n"
        "print(status, sorted(m for m in sys.modules if m.split('.')[0] in ('lark', 'regex')))\n"
    )
    env = dict(os.environ, TILEC_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "[]"], out.stderr


class _Planted:
    """Unpickling this writes the marker file: the proof that a pickle ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "unpickled"))


_PROBE = """
import json, sys
events = []
cache = sys.argv[1]
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(cache):
        events.append(["open", args[0]])
    elif event.startswith("pickle."):
        events.append([event, str(args)])
sys.addaudithook(hook)
from tilec.cli import main
status = main(sys.argv[2:])
print(json.dumps([status, events]))
"""


def test_a_file_planted_in_the_cache_directory_is_never_loaded(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    marker = tmp_path / "marker"
    for name in ("tile-grammar.lark-cache", "tables.json", "tile.lark"):
        (cache / name).write_bytes(pickle.dumps(_Planted(str(marker))))
    env = dict(os.environ, TILEC_CACHE_DIR=str(cache), TILEC_CACHE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(cache), str(ROOT / "examples" / "tma_copy.tile"),
         "-o", str(tmp_path / "k.ptx")],
        env=env, capture_output=True, text=True, check=True,
    )
    status, events = json.loads(out.stdout.splitlines()[-1])
    assert status == 0, out.stderr
    assert events == []
    assert not marker.exists()


def test_the_tables_are_installed_with_the_package():
    """An installed tilec without them would rebuild the grammar in every process."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["tilec.grammar"]
    assert any(fnmatch.fnmatch("tile.lark", p) for p in patterns)
    # the tables are a module of the package, installed with its code
    assert Path(generate.TABLES).parent == Path(parser.__file__).parent and generate.TABLES.endswith(".py")

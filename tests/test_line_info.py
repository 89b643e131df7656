"""`-g` / `Options(line_info=True)`: the PTX carries `.file`/`.loc`
directives that map each instruction back to the `.tile` statement it comes
from (what cuda-gdb, compute-sanitizer and Nsight Compute report); without
it the PTX has none."""
import re
from pathlib import Path

import pytest

from tilec.compiler import ir
from tilec.compiler.passmanager import Options
from tilec.compiler.visit import walk
from tilec.grammar.parser import parse
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble

ROOT = Path(__file__).resolve().parent.parent

LOC = re.compile(r"^\t\.loc (\d+) (\d+) (\d+)$")
FILE = re.compile(r'^\.file (\d+) "(.*)"$')

# instruction -> a word of the source line it must be attributed to
CASES = {
    "examples/tma_copy.tile": {"cp.async.bulk.tensor": "copy_async", "mbarrier.try_wait": "try_wait",
                               "mbarrier.init": "mbarrier.init"},
    "examples/gemm_mma_16x8x16.tile": {"mma.sync": "gemm"},
    "examples/hopper/hgemm_v7.tile": {"wgmma.mma_async": "gemm_async", "stmatrix": "copy"},
}


def attributed(ptx: str) -> list:
    """(instruction line, (file, line, col) of the .loc in force)."""
    out, where = [], None
    for text in ptx.splitlines():
        m = LOC.match(text)
        if m:
            where = tuple(int(g) for g in m.groups())
        elif text.startswith("\t") and where is not None:
            out.append((text.strip(), where))
    return out


@pytest.mark.parametrize("example", sorted(CASES))
def test_loc_directives_point_at_the_statements(example):
    source = (ROOT / example).read_text()
    result = compile_source(source, example, options=Options(line_info=True))
    ptx = result.ptx
    assemble(ptx, result.meta["target"])  # no ptxas warning either
    assert f'.file 1 "{example}"' in ptx.splitlines()
    # the example's file, and the files it includes (hgemm_v7's store path
    # is in gemm_epilogue.tile)
    files = {int(m.group(1)): m.group(2) for m in map(FILE.match, ptx.splitlines()) if m}
    texts = {n: (ROOT / name).read_text() for n, name in files.items()}
    starts = {n: {(x.span.line, x.span.col) for x in walk(parse(texts[n], files[n])) if x.span is not None}
              for n in files}
    pairs = attributed(ptx)
    assert pairs, "no instruction carries a .loc"
    lines = {n: text.splitlines() for n, text in texts.items()}
    for _, (file, line, col) in pairs:
        assert (line, col) in starts[file], (files[file], line, col, lines[file][line - 1])
    for instruction, word in CASES[example].items():
        found = [lines[file][line - 1] for text, (file, line, _) in pairs if text.startswith(instruction)
                 or text.startswith("@") and text.split(None, 1)[1].startswith(instruction)]
        assert found, instruction
        assert all(word in text for text in found), (instruction, found)


def test_without_line_info_there_is_none():
    text = (ROOT / "examples/tma_copy.tile").read_text()
    ptx = compile_source(text, "examples/tma_copy.tile").ptx
    assert ".loc" not in ptx and ".file" not in ptx


def test_a_file_name_ptxas_cannot_read_is_made_ascii():
    text = "kernel k(A: f32[4]):\n    t = thread_id([4])\n    A[t] = 1.0\n"
    ptx = compile_source(text, 'dir "é"\\k.tile', options=Options(line_info=True)).ptx
    assert '.file 1 "dir ???\\k.tile"' in ptx.splitlines()
    assemble(ptx, "sm_90a")


def test_cli_flag(tmp_path):
    from tilec.cli import main

    out = tmp_path / "k.ptx"
    assert main(["-g", str(ROOT / "examples/tma_copy.tile"), "-o", str(out)]) == 0
    assert any(LOC.match(line) for line in out.read_text().splitlines())


def test_statements_keep_their_spans_to_the_emitter():
    """Every statement the emitter sees has a location, so no instruction
    after the first statement is left without a .loc."""
    path = ROOT / "examples/hopper/hgemm_v7.tile"
    module = compile_source(path.read_text(), str(path), options=Options(stop_after="unroll")).module
    # (tensormap declarations, written by plan-tma, become parameters: no instructions)
    missing = [n for n in walk(module) if isinstance(n, ir.Stmt) and not isinstance(n, ir.TensorMap)
               and n.span is None]
    assert missing == []


OUT_OF_BOUNDS = """\
target sm_80

kernel oob(A: f32[64]):
    t = thread_id([64])
    A[t + 64] = 1.0
"""

_LAUNCH = """
import sys
import numpy as np
import tilec
from tilec.compiler.passmanager import Options
kernel = tilec.compile(sys.argv[1], options=Options(line_info=True)).kernel("oob")
kernel(np.zeros(64, np.float32))
"""


@pytest.mark.gpu
def test_compute_sanitizer_reports_the_tile_line(tmp_path):
    """The line information reaches the tools: compute-sanitizer's memcheck,
    catching the out-of-bounds store of a kernel compiled with line info,
    names the `.tile` file and the line of the store."""
    import os
    import shutil
    import subprocess
    import sys

    from tilec.runtime import driver

    if shutil.which("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not on PATH")
    if driver.device().compute_capability < (8, 0):
        pytest.skip("sm_80 code needs compute capability 8.0")
    source = tmp_path / "oob.tile"
    source.write_text(OUT_OF_BOUNDS)
    line = OUT_OF_BOUNDS.splitlines().index("    A[t + 64] = 1.0") + 1
    env = dict(os.environ, TILEC_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        ["compute-sanitizer", "--tool", "memcheck", sys.executable, "-c", _LAUNCH, str(source)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    report = done.stdout + done.stderr
    assert "Invalid __global__ write" in report, report[-3000:]
    assert f"oob.tile:{line}" in report, report[-3000:]

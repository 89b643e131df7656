"""The `tilec` driver end to end, in a subprocess: outputs, instrumentation
flags, and GCC-style diagnostics with the right exit codes."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tilec.pipeline import pass_manager
from tilec.grammar.parser import parse

TILEC = Path(__file__).resolve().parent.parent / "bin" / "tilec"
EXAMPLES = TILEC.parent.parent / "examples"

NEEDS_EMIT = pytest.mark.skipif(
    "emit-ptx" not in pass_manager().names,
    reason="needs the emit-ptx pass (tilec/passes/emit_ptx) in the default pipeline",
)

GOOD = """\
target sm_90a

const BLK = 64

kernel scale(A: f32[256], B: f32[256]):
    bx = cta_id([256 // BLK])
    t = thread_id([BLK])
    B[bx * BLK + t] = A[bx * BLK + t] * 2.0
"""


def tilec(*args, cwd=None):
    return subprocess.run(
        [sys.executable, str(TILEC), *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def write(tmp_path, text, name="k.tile"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_stop_after_parse_prints_canonical_text(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "--stop-after", "parse", "--emit", "ir", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout == GOOD


def test_emit_ir_writes_the_lowered_program_which_parses_back(tmp_path):
    path = write(tmp_path, GOOD)
    out = tmp_path / "k.ir.tile"
    r = tilec(path, "--stop-after", "fold-constants", "--emit", "ir", "-o", out, "-D", "BLK=32")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "cta_id([8])" in text and "thread_id([32])" in text
    parse(text, str(out))


def test_dump_dir_has_one_numbered_file_per_pass(tmp_path):
    path = write(tmp_path, GOOD)
    dumps = tmp_path / "dumps"
    r = tilec(path, "--stop-after", "infer-scope", "--emit", "ir", "--dump-dir", dumps)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in dumps.iterdir())
    passes = pass_manager().names
    passes = passes[: passes.index("infer-scope") + 1]
    assert names == [f"{i:02d}-{name}.tile" for i, name in enumerate(passes, 1)]
    assert (dumps / "01-parse.tile").read_text() == GOOD
    assert (dumps / f"{len(passes):02d}-infer-scope.tile").read_text() == r.stdout


def test_dump_ir_after_selected_passes_goes_to_stderr(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "--stop-after", "fold-constants", "--emit", "ir", "--dump-ir-after=parse,fold-constants")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("IR Dump After") == 2
    assert "After parse" in r.stderr and "After fold-constants" in r.stderr


def test_time_passes_and_verify_each(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "--stop-after", "fold-constants", "--emit", "ir", "--time-passes", "--verify-each")
    assert r.returncode == 0, r.stderr
    rows = [line.split()[0] for line in r.stderr.splitlines() if line.endswith("%")]
    passes = pass_manager().names
    assert rows == passes[: passes.index("fold-constants") + 1] + ["(verifier)", "total"]


def test_print_pipeline_needs_no_file():
    r = tilec("--print-pipeline")
    assert r.returncode == 0
    assert [line.split()[1] for line in r.stdout.splitlines()] == pass_manager().names


@NEEDS_EMIT
def test_ptx_and_kernel_json_are_written_side_by_side(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "-o", tmp_path / "out.ptx")
    assert r.returncode == 0, r.stderr
    assert ".entry scale" in (tmp_path / "out.ptx").read_text()
    meta = json.loads((tmp_path / "out.json").read_text())
    assert meta["target"] == "sm_90a" and meta["kernels"][0]["name"] == "scale"


@NEEDS_EMIT
def test_emit_meta_prints_the_json(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "--emit", "meta", "--target", "sm_100a")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["target"] == "sm_100a"


def test_emitting_ptx_after_stopping_early_is_a_user_error(tmp_path):
    path = write(tmp_path, GOOD)
    r = tilec(path, "--stop-after", "parse", "-o", tmp_path / "x.ptx")
    assert r.returncode == 1
    assert "no PTX to write: --stop-after parse stops before emit-ptx" in r.stderr
    assert not (tmp_path / "x.ptx").exists()


# --------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------

BAD = [
    (
        "syntax",
        "kernel k(A: f16[4]):\n    x = (1 +\n",
        [],
        "k.tile:2:13: error: expected an expression",
        "    x = (1 +",
    ),
    (
        "indentation",
        "kernel k(A: f16[4]):\n    x = 1\n      y = 2\n",
        [],
        "k.tile:3:7: error: unexpected indentation",
        "      y = 2",
    ),
    (
        "truncated",
        "kernel k(A: f16[4]):\n",
        [],
        "k.tile:1:21: error: unexpected end of input",
        "kernel k(A: f16[4]):",
    ),
    (
        "unknown-name",
        "kernel k(A: f16[4]):\n    x = y + 1\n",
        [],
        "k.tile:2:9: error: 'y' is not defined",
        "    x = y + 1",
    ),
    (
        "unknown-intrinsic",
        "kernel k(A: f16[4]):\n    ptx.mbarrier.frobnicate(1)\n",
        [],
        "k.tile:2:5: error: unknown intrinsic 'ptx.mbarrier.frobnicate'",
        "    ptx.mbarrier.frobnicate(1)",
    ),
    (
        "wrong-dtype",
        "kernel k(A: f16[4]):\n    b = alloc((4,), f17, scope=\"shared\")\n",
        [],
        "k.tile:2:21: error: alloc: 'dtype' must be a dtype",
        "    b = alloc((4,), f17, scope=\"shared\")",
    ),
    (
        "copy-dtypes",
        "kernel k(A: f16[64, 8]):\n    b = alloc((64, 8), f32, scope=\"shared\")\n    copy(b[:, :], A[:, :])\n",
        [],
        "k.tile:3:5: error: copy: 'b' is f32 but 'A' is f16",
        "    copy(b[:, :], A[:, :])",
    ),
    (
        "shape-mismatch",
        "const N = 32\nkernel k(A: f16[64, 8]):\n    b = alloc((N, 8), f16, scope=\"shared\")\n"
        "    copy(b[:, :], A[0:64, :])\n",
        [],
        "k.tile:4:5: error: copy: the destination region has extents (32, 8) but the source region (64, 8)",
        "    copy(b[:, :], A[0:64, :])",
    ),
    (
        "shape-mismatch-with-define",
        "const N = 64\nkernel k(A: f16[64, 8]):\n    b = alloc((N, 8), f16, scope=\"shared\")\n"
        "    copy(b[:, :], A[0:64, :])\n",
        ["-D", "N=16"],
        "k.tile:4:5: error: copy: the destination region has extents (16, 8)",
        "    copy(b[:, :], A[0:64, :])",
    ),
    (
        "malformed-layout",
        "kernel k(A: f16[4]):\n    b = alloc((8, 8), f16, scope=\"shared\", layout=S[(4, 4) : (4, 1)])\n",
        [],
        "k.tile:2:51: error: layout S[(4, 4) : (4, 1)] has 16 elements but shape (8, 8) has 64",
        "    b = alloc((8, 8), f16, scope=\"shared\", layout=S[(4, 4) : (4, 1)])",
    ),
    (
        "target-lacks-intrinsic",
        "kernel k(A: f16[4]):\n    t = thread_id([32])\n    if t == 0:\n"
        "        ptx.tcgen05.fence.before_thread_sync()\n",
        ["--target", "sm_90a"],
        "k.tile:4:9: error: ptx.tcgen05.fence.before_thread_sync is not available on sm_90a",
        "        ptx.tcgen05.fence.before_thread_sync()",
    ),
    (
        "unknown-define",
        GOOD,
        ["-D", "BLKK=3"],
        "tilec: error: -D BLKK: the program has no const named 'BLKK'",
        None,
    ),
    (
        "unknown-pass",
        GOOD,
        ["--dump-ir-after", "parse,fold"],
        "tilec: error: unknown pass 'fold' in --dump-ir-after (passes: parse, expand-inline",
        None,
    ),
]


@pytest.mark.parametrize("name, text, flags, first, source_line", BAD, ids=[b[0] for b in BAD])
def test_user_errors_are_reported_gcc_style(tmp_path, name, text, flags, first, source_line):
    path = write(tmp_path, text)
    r = tilec(path.name, *flags, "--emit", "ir", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith(first), r.stderr
    assert "Traceback" not in r.stderr
    if source_line is not None:
        assert lines[1] == source_line
        col = int(first.split(":")[2])
        assert lines[2].startswith(" " * (col - 1) + "^")


def test_traceback_flag_shows_the_python_traceback_for_user_errors(tmp_path):
    path = write(tmp_path, "kernel k(A: f16[4]):\n    x = y\n")
    r = tilec(path, "--emit", "ir", "--traceback")
    assert r.returncode == 1
    assert "Traceback" in r.stderr and "'y' is not defined" in r.stderr


@pytest.mark.parametrize("command", [[str(TILEC)], ["-m", "tilec.cli"]])
def test_the_command_flushes_what_it_prints_before_it_exits(tmp_path, command):
    """`cli.run` ends the process without the interpreter's teardown: what
    it wrote to a pipe must still arrive, with the exit status."""
    path = write(tmp_path, GOOD)
    r = subprocess.run([sys.executable, *command, str(path), "--emit", "meta"], capture_output=True, text=True,
                       cwd=TILEC.parent.parent)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernels"][0]["name"] == "scale"
    r = subprocess.run([sys.executable, *command, str(path), "-o", str(tmp_path / "missing" / "k.ptx")],
                       capture_output=True, text=True, cwd=TILEC.parent.parent)
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_the_command_runs_with_stdout_closed(tmp_path):
    path = write(tmp_path, GOOD)
    r = subprocess.run([sys.executable, str(TILEC), str(path), "-o", str(tmp_path / "k.ptx")],
                       stdout=None, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.ptx").read_text().startswith("// Generated by tilec")


@pytest.mark.parametrize("source", ["small", "large"])
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, source):
    """`tilec k.tile -o - | head`: once the pipe's reader has gone, writing
    (a large output) or flushing at exit (a small one) fails; the command
    stops with status 1 and says nothing, as filters do."""
    path = write(tmp_path, GOOD) if source == "small" else EXAMPLES / "hopper" / "hgemm_v7.tile"
    p = subprocess.Popen([sys.executable, str(TILEC), str(path), "-o", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=TILEC.parent.parent)
    p.stdout.close()
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait() == 1 and err == b""


def test_missing_file_is_a_clean_error(tmp_path):
    r = tilec(tmp_path / "nope.tile")
    assert r.returncode == 1
    assert r.stderr == f"tilec: error: cannot read '{tmp_path / 'nope.tile'}': No such file or directory\n"


def test_bad_command_line_is_a_user_error():
    r = tilec("--target", "sm_75", "x.tile")
    assert r.returncode == 1
    assert "invalid choice: 'sm_75'" in r.stderr


_CRASH = """
import sys
import tilec.passes.fold_constants as f
def boom(self, module, ctx):
    raise RuntimeError("kaboom")
f.FoldConstants.apply = boom
from tilec.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("traceback", [False, True])
def test_an_exception_that_is_not_a_user_error_is_an_internal_compiler_error(tmp_path, traceback):
    path = write(tmp_path, GOOD)
    flags = ["--traceback"] if traceback else []
    r = subprocess.run(
        [sys.executable, "-c", _CRASH, str(path), "--emit", "ir", *flags],
        capture_output=True,
        text=True,
        cwd=TILEC.parent.parent,
    )
    assert r.returncode == 2
    assert "tilec: internal compiler error: RuntimeError: kaboom" in r.stderr
    assert ("rerun with --traceback" in r.stderr) != traceback
    assert ("Traceback (most recent call last)" in r.stderr) == traceback


def test_a_crash_with_dump_dir_leaves_a_reproducer(tmp_path):
    path = write(tmp_path, GOOD)
    dumps = tmp_path / "dumps"
    r = subprocess.run(
        [sys.executable, "-c", _CRASH, str(path), "--emit", "ir", "--dump-dir", str(dumps)],
        capture_output=True,
        text=True,
        cwd=TILEC.parent.parent,
    )
    assert r.returncode == 2
    (failed,) = dumps.glob("*-fold-constants.failed.tile")
    assert f"tilec: note: the IR pass 'fold-constants' was given is in {failed}" in r.stderr
    position = int(failed.name[:2])
    previous = dumps / f"{position - 1:02d}-{pass_manager().names[position - 2]}.tile"
    assert failed.read_text() == previous.read_text()  # the input is the previous pass's output


# --------------------------------------------------------------------------
# Outputs that would lose data or cannot be files: refused before compiling
# (in process: tilec.cli.main, for speed)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, says",
    [
        (["-o", "k.tile"], "would overwrite the source file"),
        (["--emit", "ir", "-o", "k.tile"], "would overwrite the source file"),
        (["-o", "out.json"], "name the PTX output with the suffix .ptx"),
        (["-o", "."], "-o '.' is not a file name"),
        (["-o", "/"], "-o '/' is not a file name"),
        (["-o", "sub/"], "is not a file name"),
        (["-o", ""], "is not a file name"),
        (["-o", "missing/k.ptx"], "the directory 'missing' does not exist"),
        (["-o", "k.tile/x.ptx"], "'k.tile' is not a directory"),
        (["--dump-dir", "k.tile"], "--dump-dir 'k.tile' is a file"),
        (["--dump-dir", "missing/dumps"], "the directory 'missing' does not exist"),
    ],
)
def test_outputs_that_would_lose_data_are_refused(tmp_path, monkeypatch, capsys, flags, says):
    from tilec.cli import main

    (tmp_path / "sub").mkdir()
    path = write(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path)
    assert main(["k.tile", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilec: error: ") and says in err, err
    assert path.read_text() == GOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.tile", "sub"]


def test_the_kernel_json_of_a_source_named_like_it_is_refused(tmp_path, monkeypatch, capsys):
    from tilec.cli import main

    source = write(tmp_path, GOOD, name="k.json")
    monkeypatch.chdir(tmp_path)
    assert main(["k.json", "-o", "k.ptx"]) == 1
    assert "would overwrite the source file 'k.json'" in capsys.readouterr().err
    assert source.read_text() == GOOD


def test_an_output_that_is_a_link_is_replaced_not_followed(tmp_path, monkeypatch):
    from tilec.cli import main

    write(tmp_path, GOOD)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "out.ptx").symlink_to(victim)
    monkeypatch.chdir(tmp_path)
    assert main(["k.tile", "-o", "out.ptx"]) == 0
    assert victim.read_text() == "keep"
    assert not (tmp_path / "out.ptx").is_symlink() and ".entry scale" in (tmp_path / "out.ptx").read_text()


@pytest.mark.parametrize("collecting", [True, False])
def test_main_leaves_the_garbage_collector_as_it_found_it(tmp_path, monkeypatch, collecting):
    """`main` pauses the collector for its run; a caller that goes on gets it back as it was."""
    import gc

    from tilec.cli import main

    write(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path)
    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        assert main(["k.tile", "-o", "k.ptx"]) == 0
        assert gc.isenabled() == collecting
    finally:
        (gc.enable if was else gc.disable)()


_COLLECTIONS = """
import gc, os, sys
from tilec.cli import run
gc.callbacks.append(lambda phase, info: phase == "start" and os.write(2, b"collection\\n"))
sys.argv[1:] = {args!r}
run()
"""


def test_the_command_collects_no_garbage(tmp_path):
    """The command has the collector off from its start to its exit: a
    collection there would walk every object the compile kept, to free
    memory the process is about to return whole."""
    path = write(tmp_path, GOOD)
    r = subprocess.run([sys.executable, "-c", _COLLECTIONS.format(args=[str(path), "-o", str(tmp_path / "k.ptx")])],
                       capture_output=True, text=True, cwd=TILEC.parent.parent)
    assert r.returncode == 0, r.stderr
    assert "collection" not in r.stderr
    assert (tmp_path / "k.ptx").read_text().startswith("// Generated by tilec")


_LOADED = """
import sys
from tilec.cli import run
sys.argv[1:] = [{flag!r}]
try:
    run()
finally:
    print(sorted(m for m in sys.modules if m.split(".")[0] in ("attr", "attrs") or m == "tilec.compiler.ir"
                 or m.split(".")[:2] in (["tilec", "pipeline"], ["tilec", "grammar"], ["tilec", "passes"])),
          file=sys.stderr)
"""


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_none_of_the_compiler(flag):
    r = subprocess.run([sys.executable, "-c", _LOADED.format(flag=flag)], capture_output=True, text=True,
                       cwd=TILEC.parent.parent)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "[]\n"

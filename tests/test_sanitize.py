"""tools/sanitize.py and the launch table it shares (tests/example_launches.py),
without a GPU: every example has a small launch or a reason not to, each
launch is well-formed for the runtime's checks, and sanitizer output is read
into the right summary.  The sanitizer runs themselves need the device:
`python3 tools/sanitize.py`."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

import example_launches
from tilec.runtime.launch import bind_args, check_args, kernel_grid

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("sanitize_tool", ROOT / "tools" / "sanitize.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

HOPPER = (9, 0)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))


def test_every_example_has_a_small_launch_or_a_reason_not_to():
    names = set(example_launches.example_names())
    table = set(example_launches.SMALL) | set(example_launches.NOT_LAUNCHED)
    assert names - table == set(), "add the new examples to tests/example_launches.py"
    assert table - names == set(), "the table names examples that do not exist"
    assert not set(example_launches.SMALL) & set(example_launches.NOT_LAUNCHED)


def test_which_examples_run_on_hopper():
    runs = {n for n in example_launches.example_names() if example_launches.runs_on(n, HOPPER)}
    assert {"elementwise_add.tile", "tma_copy.tile", "hopper/hgemm_v7.tile", "gemm_mma_16x8x16.tile"} <= runs
    assert not {"hgemm_v4.tile", "gemm_async_tcgen05.tile"} & runs  # sm_100a


LAUNCHES = [n for n in example_launches.example_names() if n in example_launches.SMALL]


@pytest.mark.parametrize("name", LAUNCHES)
def test_small_launch_is_small_and_passes_the_launch_checks(name):
    entry = example_launches.compile_small(name).meta["kernels"][0]
    args = example_launches.random_args(entry, dims=example_launches.RUNTIME_DIMS.get(name))
    # raises LaunchError on any mismatch
    sm_count = 2  # a persistent grid of one CTA per SM counted as on a 2-SM device
    _bound, layout = bind_args(
        entry["params"], args, entry["tensormaps"], assumes=entry.get("assumes", ()), sm_count=sm_count
    )
    grid = kernel_grid(entry["grid"], layout.values)
    assert sum(a.nbytes for a in args) <= 4 << 20
    assert grid[0] * grid[1] * grid[2] <= 16


def test_random_args_are_seeded_and_cover_bit_pattern_dtypes():
    entry = {"name": "k", "params": [
        {"name": "w", "kind": "buffer", "dtype": "bf16", "shape": [4, 8]},
        {"name": "x", "kind": "buffer", "dtype": "f32", "shape": [16]},
        {"name": "x_tmap", "kind": "tensormap", "tensor": "x"},
    ], "tensormaps": []}  # fmt: skip
    w, x = example_launches.random_args(entry, seed=3)
    assert (w.dtype.name, w.shape, x.dtype.name, x.shape) == ("uint16", (4, 8), "float32", (16,))
    again = example_launches.random_args(entry, seed=3)
    assert (again[0] == w).all() and (again[1] == x).all()
    check_args(entry["params"][:2], [w, x])


CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""

OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at hgemm_v4+0x1b30
=========     by thread (3,0,0) in block (1,0,0)
=========     Address 0x7f3a00010000 is out of bounds
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
========= ERROR SUMMARY: 2 errors
"""

RACE = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at tma_copy+0x2a0
=========     and Read access at tma_copy+0x310 [4 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
========= ERROR SUMMARY: 1 error
"""


def test_sanitizer_output_becomes_a_row():
    clean = tool.classify("a.tile", "memcheck", 0, CLEAN)
    assert (clean.errors, clean.result, clean.detail, clean.ok) == (0, "clean", "", True)
    oob = tool.classify("a.tile", "memcheck", tool.ERROR_EXIT, OOB)
    assert (oob.errors, oob.result, oob.ok) == (2, "errors", False)
    assert oob.detail == "Invalid __global__ read of size 16 bytes"
    race = tool.classify("a.tile", "racecheck", tool.ERROR_EXIT, RACE)
    assert (race.errors, race.detail) == (1, "Error: Race reported between Write access at tma_copy+0x2a0")


# What compute-sanitizer 2025.3 printed for a clean racecheck run on the H100.
RACE_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""


def test_racecheck_summary_alone_counts():
    clean = tool.classify("a.tile", "racecheck", 0, RACE_CLEAN)
    assert (clean.errors, clean.result, clean.ok) == (0, "clean", True)
    warned = tool.classify(
        "a.tile", "racecheck", 0, RACE_CLEAN.replace("0 hazards displayed (0 errors, 0 warnings)", "2 hazards displayed (0 errors, 2 warnings)")
    )
    assert (warned.errors, warned.result, warned.ok) == (2, "errors", False)


def test_a_failing_child_or_a_timeout_is_not_clean():
    crashed = tool.classify("a.tile", "synccheck", 1, "Traceback ...\nLaunchError: ...\n" + CLEAN)
    assert (crashed.result, crashed.ok) == ("failed (exit 1)", False)
    no_summary = tool.classify("a.tile", "synccheck", 0, "")
    assert (no_summary.result, no_summary.ok) == ("failed (no ERROR SUMMARY)", False)
    hung = tool.classify("a.tile", "racecheck", None, "========= COMPUTE-SANITIZER\n")
    assert (hung.errors, hung.result, hung.ok) == (None, "timeout", False)


def test_plan_skips_by_design_and_by_architecture():
    runnable, rows = tool.plan(["hang_demo.tile", "hgemm_v4.tile", "elementwise_add.tile"], HOPPER)
    assert runnable == ["elementwise_add.tile"]
    assert [(r.example, r.result, r.ok) for r in rows] == [
        ("hang_demo.tile", "skipped", True), ("hgemm_v4.tile", "skipped", True),
    ]  # fmt: skip
    assert rows[1].detail == "sm_100a does not run here"


def test_plan_reports_an_example_that_does_not_compile(monkeypatch):
    monkeypatch.setitem(example_launches.SMALL, "elementwise_add.tile", {"N": 0})  # cta_id([0])
    runnable, rows = tool.plan(["elementwise_add.tile"], HOPPER)
    assert runnable == []
    assert [(r.result, r.ok) for r in rows] == [("compile error", False)]
    assert "elementwise_add.tile" in rows[0].detail


def test_summary_table_lines_up():
    rows = [
        tool.classify("hopper/hgemm_v5.tile", "memcheck", 0, CLEAN),
        tool.classify("tma_copy.tile", "racecheck", tool.ERROR_EXIT, RACE),
        tool.Row("hang_demo.tile", "-", None, "skipped", "hangs on purpose"),
    ]
    lines = tool.format_table(rows).splitlines()
    assert lines[0].split() == ["example", "tool", "errors", "result", "detail"]
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split()[:4] == ["hopper/hgemm_v5.tile", "memcheck", "0", "clean"]
    assert lines[3].split()[:4] == ["tma_copy.tile", "racecheck", "1", "errors"]
    assert lines[4].split() == ["hang_demo.tile", "-", "-", "skipped", "hangs", "on", "purpose"]
    assert len({line.index(line.split()[1], len(line.split()[0])) for line in lines[2:]}) == 1  # one tool column


FAKE_SANITIZER = """\
#!/bin/sh
echo "$@" >> "{log}"
echo "========= COMPUTE-SANITIZER"
if [ "$2" = racecheck ]; then
    echo "========= Error: Race reported between Write access at k+0x10"
    echo "========= ERROR SUMMARY: 1 error"
    exit 9
fi
echo "========= ERROR SUMMARY: 0 errors"
"""


def test_parent_runs_each_example_under_each_tool(tmp_path, monkeypatch, capsys):
    """The command lines the parent builds, and its verdict, with a stand-in
    compute-sanitizer and device."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.parent.mkdir()
    fake.write_text(FAKE_SANITIZER.format(log=log))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    from tilec.runtime import driver

    monkeypatch.setattr(driver, "device", lambda: driver.Device(0, None, None, "fake", HOPPER, 232448, 132))
    status = tool.main(["--examples", "elementwise_add.tile,hgemm_v4.tile", "--tools", "memcheck,racecheck"])
    assert status == 1
    calls = log.read_text().splitlines()
    script = str(ROOT / "tools" / "sanitize.py")
    assert [c.split() for c in calls] == [
        ["--tool", t, "--error-exitcode", "9", sys.executable, script, "--run-one", "elementwise_add.tile"]
        for t in ("memcheck", "racecheck")
    ]
    out = capsys.readouterr().out
    table = out[out.index("example "):]
    assert [line.split()[:4] for line in table.splitlines()[2:5]] == [
        ["elementwise_add.tile", "memcheck", "0", "clean"],
        ["elementwise_add.tile", "racecheck", "1", "errors"],
        ["hgemm_v4.tile", "-", "-", "skipped"],
    ]
    assert "===== elementwise_add.tile under racecheck: errors =====" in out


def test_parent_needs_compute_sanitizer(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert tool.main([]) == 2
    assert "compute-sanitizer is not on PATH" in capsys.readouterr().err

"""Module-level `include`, conditional kernel parameters, and the GEMM
epilogue built on them (examples/hopper/gemm_epilogue.tile): the syntax
round-trips, every misuse is a located error, kernel.json holds only the
present parameters, an edit to an included file is a new cache entry, the
default epilogue adds nothing to the PTX, every configuration assembles,
the residual is read with wide loads, and hgemm_v7 with a bias, an
activation and a residual computes act(alpha A B^T + bias) + R in the PTX
simulator (and the decode kernel on D^T, and hgemm_v7_runtime with its
extents at launch), and (`gpu`) on an H100 or H200 against torch."""
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import wgmma_ptx_sim
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.printer import print_module
from tilec.grammar.parser import parse
from tilec.pipeline import compile_source
from tilec.runtime import dims as runtime_dims
from tilec.runtime.assemble import assemble
from tilec.runtime.launch import LaunchError, check_args

ROOT = Path(__file__).resolve().parent.parent
HOPPER = ROOT / "examples" / "hopper"
EPILOGUE_KERNELS = ("hgemm_v7", "gemm_split_k", "hgemm_v7_mn", "gemm_small_m", "gemm_small_m_split_k",
                    "gemm_stream_k", "gemm_small_m_stream_k", "hgemm_v7_runtime", "fp8_gemm",
                    "fp8_gemm_blockscaled")


def write(directory: Path, files: dict) -> None:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def compile_file(path: Path, **defines):
    return compile_source(path.read_text(), str(path), defines=defines)


def error_of(path: Path, **defines) -> TilecError:
    with pytest.raises(TilecError) as info:
        compile_file(path, **defines)
    assert info.value.span is not None, info.value
    return info.value


# --------------------------------------------------------------------------
# Syntax
# --------------------------------------------------------------------------

CANONICAL = """target sm_90a

include "lib/epi.tile"
include "../shared.tile"

const N = 64

kernel k(A: f32[N], bias: f32[N] if HAS_BIAS, n: i32 if not HAS_BIAS and N > 8, L: f16[8] layout (S[8] if X else S[8 : 1]) if Y):
    pass
"""


def test_include_lines_and_conditional_parameters_round_trip():
    module = parse(CANONICAL, "k.tile")
    assert [i.path for i in module.includes] == ["lib/epi.tile", "../shared.tile"]
    assert [p.cond is not None for p in module.kernels[0].params] == [False, True, True, True]
    assert print_module(module) == CANONICAL
    assert parse(print_module(module), "k.tile") == module


@pytest.mark.parametrize(
    "text, message",
    [
        ('const X = 1\ninclude "a.tile"\n', "'include' lines come before consts"),
        ('kernel k():\n    pass\ninclude "a.tile"\n', "'include' lines come before consts"),
        ("include a.tile\n", "expected a string"),
        ('kernel k():\n    include = 1\n', "'include' is a reserved word"),
    ],
)
def test_misplaced_include_lines_are_syntax_errors(text, message):
    with pytest.raises(TilecError, match=message) as info:
        parse(text, "k.tile")
    assert info.value.span is not None


# --------------------------------------------------------------------------
# Including files
# --------------------------------------------------------------------------

KERNEL = """target sm_90a
include "lib/b.tile"
const N = X + 1
kernel k(A: f32[N]):
    cta_id([1])
    t = thread_id([32])
    put(t)
"""


def test_an_include_brings_consts_and_helpers_relative_to_the_including_file(tmp_path):
    write(tmp_path, {
        "a.tile": KERNEL,
        "lib/b.tile": 'include "c.tile"\nconst X = Y * 2\ninline def put(t):\n    if t < N:\n        A[t] = 1.0\n',
        "lib/c.tile": "const Y = 3\n",
    })
    result = compile_file(tmp_path / "a.tile", Y=5)  # -D reaches an included const
    assert result.meta["kernels"][0]["params"][0]["shape"] == [11]
    expanded = compile_source(KERNEL, str(tmp_path / "a.tile"), options=_stop("parse")).module
    assert expanded.includes == ()
    assert [c.name for c in expanded.consts] == ["Y", "X", "N"]  # included first, depth first
    assert expanded.helpers[0].span.file == str(tmp_path / "lib" / "b.tile")
    assert parse(print_module(expanded), "x.tile") == expanded  # the parse pass's IR round-trips


def test_a_file_reached_twice_is_included_once(tmp_path):
    write(tmp_path, {
        "a.tile": 'include "b.tile"\ninclude "c.tile"\nconst N = X + Z\nkernel k(A: f32[N]):\n    pass\n',
        "b.tile": 'include "d.tile"\nconst X = D\n',
        "c.tile": 'include "./d.tile"\nconst Z = D\n',
        "d.tile": "const D = 4\n",
    })
    assert compile_file(tmp_path / "a.tile").meta["kernels"][0]["params"][0]["shape"] == [8]


def _stop(name):
    from tilec.compiler.passmanager import Options

    return Options(stop_after=name)


@pytest.mark.parametrize(
    "files, where, message",
    [
        ({"lib/b.tile": 'include "c.tile"\n', "lib/c.tile": 'include "b.tile"\n'},
         ("lib/c.tile", 1, 9), "makes a cycle: "),
        ({"lib/b.tile": 'include "../a.tile"\n'}, ("lib/b.tile", 1, 9), "makes a cycle"),
        ({"lib/b.tile": 'include "nothing.tile"\n'}, ("lib/b.tile", 1, 9), "cannot read"),
        ({"lib/b.tile": 'include "/etc/x.tile"\n'}, ("lib/b.tile", 1, 9), "relative to the including file"),
        ({"lib/b.tile": 'include "c.txt"\n'}, ("lib/b.tile", 1, 9), "names a .tile file"),
        ({"lib/b.tile": 'include "c\\\\d.tile"\n'}, ("lib/b.tile", 1, 9), "with '/' between directories"),
        ({"lib/b.tile": "target sm_90a\n"}, ("a.tile", 2, 9), "has a 'target' line"),
        ({"lib/b.tile": "const X = 1\nkernel z():\n    pass\n"}, ("lib/b.tile", 2, 1), "kernel 'z' is in an included"),
        ({"lib/b.tile": "const X = (\n"}, ("lib/b.tile", 1, 12), "never closed"),
        ({"lib/b.tile": "const X = 1\nconst N = 2\n"}, ("a.tile", 3, 1), "const 'N' is defined twice"),
        ({"lib/b.tile": "const X = 1\ninline def put(t):\n    A[t] = Q\n"}, ("lib/b.tile", 3, 12), "'Q'"),
    ],
)
def test_include_mistakes_are_located(tmp_path, files, where, message):
    write(tmp_path, {"a.tile": KERNEL, **files})
    err = error_of(tmp_path / "a.tile")
    assert message in err.message
    file, line, col = where
    assert (err.span.file, err.span.line, err.span.col) == (str(tmp_path / file), line, col)


def test_an_error_in_an_included_file_notes_the_include_lines(tmp_path):
    write(tmp_path, {"a.tile": KERNEL, "lib/b.tile": 'include "c.tile"\n', "lib/c.tile": "const X = (\n"})
    err = error_of(tmp_path / "a.tile")
    assert err.notes == (f"included from {tmp_path / 'lib' / 'b.tile'}:1:9", f"included from {tmp_path / 'a.tile'}:2:9")
    assert "const X = (" in err.render()  # the included file's line under the message


def test_an_included_file_that_is_not_utf8_is_located_in_it(tmp_path):
    write(tmp_path, {"a.tile": KERNEL})
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "b.tile").write_bytes(b"const X = 1\n# caf\xe9\n")
    err = error_of(tmp_path / "a.tile")
    assert "not valid UTF-8" in err.message
    assert (err.span.file, err.span.line, err.span.col) == (str(tmp_path / "lib" / "b.tile"), 2, 6)
    assert err.notes == (f"included from {tmp_path / 'a.tile'}:2:9",)


def test_a_program_that_is_not_a_file_cannot_include():
    with pytest.raises(TilecError, match="<string> is not a file") as info:
        compile_source('include "b.tile"\nkernel k():\n    pass\n')
    assert (info.value.span.line, info.value.span.col) == (1, 9)


def test_the_dependencies_are_the_files_the_parse_pass_reads(tmp_path):
    """`source.dependencies` (the cache key's view, read from the lines
    without parsing) names the files the parse pass includes, each once,
    and a file it cannot read with no text."""
    from tilec.compiler import source

    write(tmp_path, {
        "a.tile": 'target sm_90a\ninclude "b.tile"   # a comment\ninclude "c.tile"\nkernel k():\n    pass\n',
        "b.tile": 'include "d.tile"\n',
        "c.tile": 'include "d.tile"\ninclude "gone.tile"\n',
        "d.tile": "const D = 1\n",
    })
    a = tmp_path / "a.tile"
    deps = source.dependencies(a.read_text(), str(a))
    assert [(Path(p).name, t is None) for p, t in deps] == [
        ("b.tile", False), ("d.tile", False), ("c.tile", False), ("gone.tile", True)]
    v7 = HOPPER / "hgemm_v7.tile"
    assert source.dependencies(v7.read_text(), str(v7)) == (
        (str(HOPPER / "gemm_epilogue.tile"), (HOPPER / "gemm_epilogue.tile").read_text()),)


def test_a_file_reached_under_two_names_is_one_dependency(tmp_path):
    """Like the parse pass, `dependencies` takes a file once however it is
    named: through a directory link back to its own directory, a file that
    includes itself under a longer name each time is read once, not until
    the path is too long to open."""
    from tilec.compiler import source

    write(tmp_path, {"x.tile": 'include "link/x.tile"\nconst Q = 1\n'})
    (tmp_path / "link").symlink_to(".")
    main = tmp_path / "main.tile"
    main.write_text('include "x.tile"\ninclude "link/x.tile"\nkernel k():\n    pass\n')
    assert [Path(p).name for p, _ in source.dependencies(main.read_text(), str(main))] == ["x.tile"]


def test_editing_an_included_file_is_a_new_cache_entry(tmp_path, monkeypatch):
    import tilec

    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    write(tmp_path, {"a.tile": KERNEL, "lib/b.tile": "const X = 1\ninline def put(t):\n    A[t] = 1.0\n"})
    first = tilec.compile(tmp_path / "a.tile")
    assert first.meta["kernels"][0]["params"][0]["shape"] == [2]
    write(tmp_path, {"lib/b.tile": "const X = 3\ninline def put(t):\n    A[t] = 1.0\n"})
    assert tilec.compile(tmp_path / "a.tile").meta["kernels"][0]["params"][0]["shape"] == [4]


# --------------------------------------------------------------------------
# Conditional parameters
# --------------------------------------------------------------------------

COND = """target sm_90a
const HAS_BIAS = False
const N = 64
kernel k(A: f32[N], bias: f32[N] if HAS_BIAS, n: i32 if not HAS_BIAS):
    cta_id([1])
    t = thread_id([N])
    if HAS_BIAS:
        A[t] = A[t] + bias[t]
    else:
        A[t] = A[t] + convert(n, f32)
"""


def params(result):
    return [(p["name"], p["kind"]) for p in result.meta["kernels"][0]["params"]]


def test_only_the_present_parameters_reach_kernel_json_and_the_ptx():
    absent = compile_source(COND, "k.tile")
    assert params(absent) == [("A", "buffer"), ("n", "scalar")]
    assert ".param .u64 A,\n\t.param .s32 n\n)" in absent.ptx
    present = compile_source(COND, "k.tile", defines={"HAS_BIAS": True})
    assert params(present) == [("A", "buffer"), ("bias", "buffer")]
    for r in (absent, present):
        assemble(r.ptx, "sm_90a")


def test_a_decided_parameter_prints_as_an_ordinary_one():
    module = compile_source(COND, "k.tile", defines={"HAS_BIAS": True}, options=_stop("fold-constants")).module
    assert "kernel k(A: f32[64], bias: f32[64]):" in print_module(module).splitlines()


@pytest.mark.parametrize(
    "old, new, where, message",
    [
        ("    if HAS_BIAS:\n", "    if True:\n", (8, 23), "parameter 'bias' is absent: its condition (at k.tile:4:37) is False"),
        ("if not HAS_BIAS)", "if n > 1)", (4, 57), "'n' is not a const"),
        ("if not HAS_BIAS)", "if MISSING)", (4, 57), "'MISSING' is not a const"),
        ("if not HAS_BIAS)", "if 3)", (4, 57), "must fold to True or False, got 3"),
    ],
)
def test_conditional_parameter_mistakes_are_located(old, new, where, message):
    with pytest.raises(TilecError) as info:
        compile_source(COND.replace(old, new), "k.tile")
    assert message in info.value.message
    assert (info.value.span.line, info.value.span.col) == where


def test_exclusive_declarations_of_one_name():
    text = COND.replace("n: i32 if not HAS_BIAS", "n: i32 if not HAS_BIAS, n: u32 if HAS_BIAS").replace(
        "A[t] + bias[t]", "A[t] + bias[t] + convert(n, f32)")
    assert params(compile_source(text, "k.tile", defines={"HAS_BIAS": True}))[-1] == ("n", "scalar")
    both = text.replace("n: u32 if HAS_BIAS", "n: u32 if True")
    with pytest.raises(TilecError, match="'n'"):
        compile_source(both, "k.tile")


# --------------------------------------------------------------------------
# The GEMM epilogue
# --------------------------------------------------------------------------

CONFIGS = [
    {"HAS_BIAS": True},
    {"HAS_RESIDUAL": True},
    {"ALPHA": 0.5},
    {"ACT": "ACT_RELU"},
    {"ACT": "ACT_GELU"},
    {"ACT": "ACT_SILU"},
    {"HAS_BIAS": True, "ACT": "ACT_GELU", "HAS_RESIDUAL": True, "ALPHA": 2},
]
INSTRUCTION = {"ACT_RELU": "max.f32", "ACT_GELU": "tanh.approx.f32", "ACT_SILU": "ex2.approx.ftz.f32"}


def build(name, **defines):
    return compile_file(HOPPER / f"{name}.tile", **defines)


@pytest.mark.parametrize("name", EPILOGUE_KERNELS)
def test_the_default_epilogue_adds_nothing(name, tmp_path):
    """The kernel as it is and the same kernel with every call of
    `epilogue(...)` deleted (in it and in gemm_epilogue.tile, copied beside
    it) give the same PTX to the byte.  (Checked against the kernels before
    the epilogue existed when it was written: same bytes.)"""
    calls = 0
    for file in (f"{name}.tile", "gemm_epilogue.tile"):
        lines = (HOPPER / file).read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.strip().startswith("epilogue(")]
        calls += len(lines) - len(kept)
        (tmp_path / file).write_text("".join(kept))
    assert calls >= 1
    without = compile_file(tmp_path / f"{name}.tile")
    assert build(name).ptx == without.ptx
    assert params(build(name)) == params(without)
    assert not {"bias", "R"} & {p for p, _ in params(without)}


@pytest.mark.parametrize(
    "name, config",
    [("hgemm_v7", c) for c in CONFIGS] + [(name, CONFIGS[-1]) for name in EPILOGUE_KERNELS[1:]],
    ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else x,
)
def test_every_configuration_assembles(name, config):
    r = build(name, **config)
    assemble(r.ptx, "sm_90a")  # no ptxas warning either
    names = [p for p, _ in params(r)]
    assert ("bias" in names) == config.get("HAS_BIAS", False)
    assert ("R" in names) == config.get("HAS_RESIDUAL", False)
    if "ACT" in config:
        assert INSTRUCTION[config["ACT"]] in r.ptx


@pytest.mark.parametrize(
    "defines, message",
    [
        ({"ACT": 7}, "ACT must be ACT_NONE, ACT_RELU, ACT_GELU or ACT_SILU"),
    ],
)
def test_unsupported_epilogues_are_compile_errors(defines, message):
    with pytest.raises(TilecError, match=message) as info:
        build("hgemm_v7", **defines)
    assert info.value.span is not None


STORE_TILE_KERNELS = ("hgemm_v7", "gemm_split_k", "hgemm_v7_mn", "gemm_stream_k", "hgemm_v7_runtime", "fp8_gemm",
                      "fp8_gemm_blockscaled")
GLOBAL_LOAD = re.compile(r"\bld\.global(?:\.[a-z]+)*?(?:\.v(\d))?\.[bfsu](\d+)\s")


def global_loads(ptx: str) -> Counter:
    """The global loads of a PTX text by width in bytes (a vector's whole width)."""
    return Counter(int(v or 1) * int(bits) // 8 for v, bits in GLOBAL_LOAD.findall(ptx))


@pytest.mark.parametrize("step", ["HAS_RESIDUAL", "HAS_BIAS"])
@pytest.mark.parametrize("name", STORE_TILE_KERNELS)
def test_bias_and_residual_are_read_with_wide_loads(name, step):
    """store_tile copies R's slice into the f16 registers and the bias's
    into a per-column register tile before the epilogue, so the loads
    either adds to a kernel are 4 bytes or more (a thread's two adjacent
    columns at once), never one 2-byte element; the bias is loaded once
    for both rows a thread holds of a column (a quarter of the accumulator
    elements it adds to, in 4-byte loads: one load per 4 elements)."""
    added = global_loads(build(name, **{step: True}).ptx) - global_loads(build(name).ptx)
    assert added, f"{step} adds no global load"
    assert min(added) >= 4, dict(added)
    if step == "HAS_BIAS":
        residual = global_loads(build(name, HAS_RESIDUAL=True).ptx) - global_loads(build(name).ptx)
        assert sum(added.values()) * 2 == sum(residual.values())


RAGGED = dict(M=1000, N=1000, K=520)   # 1000 = 7 * 128 + 104 = 3 * 256 + 232
# fp8_gemm's N and K are multiples of 16 (16-byte rows of e4m3); fp8_gemm_blockscaled takes
# multiples of 128 only (its scale blocks), so it has no ragged tiles
RAGGED_SHAPES = {"hgemm_v7_runtime": {}, "fp8_gemm": dict(M=1000, N=1008, K=528)}


@pytest.mark.parametrize("name", [n for n in STORE_TILE_KERNELS if n != "fp8_gemm_blockscaled"])
def test_ragged_shapes_take_a_bias_and_a_residual(name):
    """M and N need not be multiples of the tile with a bias or a residual:
    every store_tile kernel compiles and assembles at 1000 x 1000 x 520
    (fp8_gemm 1000 x 1008 x 528) with every epilogue step
    (hgemm_v7_runtime: any extents at launch)."""
    r = build(name, ALPHA=0.5, HAS_BIAS=True, ACT="ACT_GELU", HAS_RESIDUAL=True,
              **RAGGED_SHAPES.get(name, RAGGED))
    assemble(r.ptx, "sm_90a")


ACTIVATIONS = {
    "ACT_NONE": lambda x: x,
    "ACT_RELU": lambda x: np.maximum(x, 0),
    "ACT_GELU": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    "ACT_SILU": lambda x: x / (1 + np.exp(-x)),
}


def reference(A, B, bias, R, alpha, act):
    acc = alpha * (A.astype(np.float64) @ B.astype(np.float64).T)
    return ACTIVATIONS[act](acc + bias.astype(np.float64)) + R.astype(np.float64)


def operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    R = rng.standard_normal((m, n)).astype(np.float16)
    return A, B, bias, R


def relative_error(d, ref) -> float:
    d = d.astype(np.float64)
    if np.isnan(d).any():
        return float("inf")
    return float(np.linalg.norm(d - ref) / np.linalg.norm(ref))


def test_v7_epilogue_in_the_simulator():
    """One 128 x 128 tile (two consumers, two column stores each) with a
    scale, a bias, GELU and a residual."""
    m, n, k = 128, 128, 64
    A, B, bias, R = operands(m, n, k)
    r = build("hgemm_v7", M=m, N=n, K=k, BLK_N=128, SM_COUNT=1, ALPHA=0.5, HAS_BIAS=True, ACT="ACT_GELU",
              HAS_RESIDUAL=True)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "bias": bias, "R": R})
    assert relative_error(D, reference(A, B, bias, R, 0.5, "ACT_GELU")) < 2e-3


def test_small_m_epilogue_in_the_simulator():
    """The swap-AB decode kernel holds D^T: the bias is per row of its
    accumulator and R is read transposed.  Two CTAs, M = 24, SiLU."""
    m, n, k = 24, 128, 3 * 64
    A, B, bias, R = operands(m, n, k)
    r = build("gemm_small_m", M=m, N=n, K=k, STAGES=3, ALPHA=0.5, HAS_BIAS=True, ACT="ACT_SILU", HAS_RESIDUAL=True)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "bias": bias, "R": R})
    assert relative_error(D, reference(A, B, bias, R, 0.5, "ACT_SILU")) < 2e-3


def test_small_m_stream_k_epilogue_in_the_simulator():
    """Both of gemm_small_m_stream_k's stores: 3 slabs x 3 K tiles on 2 CTAs,
    slabs 0 and 2 whole (stored directly), slab 1 summed from two CTAs."""
    m, n, k, sms = 16, 192, 3 * 64, 2
    A, B, bias, R = operands(m, n, k)
    r = build("gemm_small_m_stream_k", M=m, N=n, K=k, SM_COUNT=sms, STAGES=2, ALPHA=0.5, HAS_BIAS=True,
              ACT="ACT_SILU", HAS_RESIDUAL=True)
    D = np.full((m, n), np.nan, np.float16)
    W = np.full((sms, 2, 64, m), np.nan, np.float32)
    C = np.zeros(n // 64, np.int32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "W": W, "C": C, "bias": bias, "R": R})
    assert relative_error(D, reference(A, B, bias, R, 0.5, "ACT_SILU")) < 2e-3
    assert not C.any()


def test_runtime_v7_epilogue_in_the_simulator():
    """hgemm_v7_runtime (M, N, K bound at launch) with a scale, a bias, GELU
    and a residual: one 128 x 128 tile, R copied from a buffer whose row
    stride is the runtime N."""
    m, n, k = 128, 128, 64
    A, B, bias, R = operands(m, n, k)
    r = build("hgemm_v7_runtime", BLK_N=128, ALPHA=0.5, HAS_BIAS=True, ACT="ACT_GELU", HAS_RESIDUAL=True)
    entry = r.meta["kernels"][0]
    env = {"M": m, "N": n, "K": k}
    hidden = runtime_dims.device_values(entry["params"], {**env, runtime_dims.SM_COUNT: 1})
    maps = [runtime_dims.tensormap_for(t, env) for t in entry["tensormaps"]]
    meta = {"kernels": [{**entry, "grid": (1, 1, 1), "tensormaps": maps}]}
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, meta, {"A": A, "B": B, "D": D, "bias": bias, "R": R, **hidden, **env})
    assert relative_error(D, reference(A, B, bias, R, 0.5, "ACT_GELU")) < 2e-3


@pytest.mark.parametrize("defines", [{"HAS_BIAS": True}, {"HAS_RESIDUAL": True}])
def test_runtime_v7_takes_ragged_tiles_with_a_bias_or_residual(defines):
    """The epilogue's reads of bias and R stop at M and N, so the launch
    takes an M or N that is not a multiple of the tile with either, as
    without them (the TMA clips the rest); a shape the kernel refuses
    without them (N not a multiple of 8) is still refused."""
    entry = build("hgemm_v7_runtime", BLK_N=128, **defines).meta["kernels"][0]
    k = 64

    def args(m, n):
        extra = [np.zeros(n, np.float16)] if defines.get("HAS_BIAS") else [np.zeros((m, n), np.float16)]
        return [np.zeros((m, k), np.float16), np.zeros((n, k), np.float16), np.zeros((m, n), np.float16), *extra]

    for m, n in [(256, 256), (200, 256), (256, 200), (129, 136)]:
        check_args(entry["params"], args(m, n), entry["tensormaps"], assumes=entry["assumes"], sm_count=132)
    with pytest.raises(LaunchError, match=r"N and K must be multiples of 8"):
        check_args(entry["params"], args(200, 203), entry["tensormaps"], assumes=entry["assumes"], sm_count=132)


def test_v7_epilogue_at_ragged_edges_in_the_simulator():
    """M = 100, N = 104 in 64 x 80 tiles (one consumer, 2 CTAs; stores of
    64 and 16 columns): the last tile row has 36 rows, the last tile column
    24 columns (its 64-column store 24 inside, its 16-column store none).
    bias and R are exactly M x N (the simulator faults on any access
    outside an array), and D, NaN-poisoned, must be the reference
    everywhere."""
    m, n, k = 100, 104, 64
    A, B, bias, R = operands(m, n, k)
    r = build("hgemm_v7", M=m, N=n, K=k, BLK_M=64, BLK_N=80, SM_COUNT=2, STAGES=2, ALPHA=0.5, HAS_BIAS=True,
              ACT="ACT_GELU", HAS_RESIDUAL=True)
    D = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "bias": bias, "R": R})
    ref = reference(A, B, bias, R, 0.5, "ACT_GELU")
    assert relative_error(D, ref) < 2e-3
    assert relative_error(D[64:, 80:], ref[64:, 80:]) < 2e-3


@pytest.fixture
def cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("the sm_90a kernels need an H100 (compute capability 9.0)")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("act", ["ACT_RELU", "ACT_GELU", "ACT_SILU"])
@pytest.mark.parametrize("name", ("hgemm_v7", "gemm_split_k", "hgemm_v7_runtime"))
def test_epilogue_matches_torch_on_the_gpu(cuda, name, act):
    """D = act(alpha A B^T + bias) + R at 1024 x 2048 x 512 against torch's
    f32 computation of the same (hgemm_v7_runtime: M, N, K at launch)."""
    torch = cuda
    m, n, k = 1024, 2048, 512
    defines = dict(ALPHA=0.5, HAS_BIAS=True, ACT=act, HAS_RESIDUAL=True)
    if name != "hgemm_v7_runtime":
        defines.update(M=m, N=n, K=k, SM_COUNT=torch.cuda.get_device_properties(0).multi_processor_count)
    r = build(name, **defines)
    from tilec.runtime.module import CompiledModule

    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    g = torch.Generator(device="cuda").manual_seed(1)
    A = torch.randn(m, k, device="cuda", generator=g).half()
    B = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).half()
    bias = torch.randn(n, device="cuda", generator=g).half()
    R = torch.randn(m, n, device="cuda", generator=g).half()
    D = torch.full((m, n), float("nan"), device="cuda", dtype=torch.half)
    if name == "gemm_split_k":
        tm, tn = m // 128, n // 256
        W = torch.empty(2, tm * 128, tn * 256, device="cuda")
        C = torch.zeros(tm * tn * 2, dtype=torch.int32, device="cuda")
        kernel(A, B, D, W, C, bias, R)
    else:
        kernel(A, B, D, bias, R)
    torch.cuda.synchronize()
    x = 0.5 * (A.float() @ B.float().T) + bias.float()
    act_fn = {"ACT_RELU": torch.relu, "ACT_GELU": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
              "ACT_SILU": torch.nn.functional.silu}[act]
    ref = act_fn(x) + R.float()
    assert not torch.isnan(D).any()
    err = ((D.float() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err


@pytest.mark.gpu
@pytest.mark.parametrize("name", STORE_TILE_KERNELS[:5])
def test_ragged_epilogue_matches_torch_on_the_gpu(cuda, name):
    """alpha, bias, GELU and residual at 1000 x 1000 x 520 (neither M nor N
    a multiple of the tile; hgemm_v7_runtime: M, N, K at launch), D
    NaN-poisoned, against torch's f32 computation.  The workspaces of
    split-K and stream-K are shaped from kernel.json."""
    torch = cuda
    m, n, k = RAGGED["M"], RAGGED["N"], RAGGED["K"]
    defines = dict(ALPHA=0.5, HAS_BIAS=True, ACT="ACT_GELU", HAS_RESIDUAL=True)
    if name != "hgemm_v7_runtime":
        defines.update(RAGGED, SM_COUNT=torch.cuda.get_device_properties(0).multi_processor_count)
    r = build(name, **defines)
    from tilec.runtime.module import CompiledModule

    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    g = torch.Generator(device="cuda").manual_seed(2)
    A = torch.randn(m, k, device="cuda", generator=g).half()
    B = (torch.randn(n, k, device="cuda", generator=g) / k**0.5).half()
    args = {
        "A": A,
        "B": B.T.contiguous() if name == "hgemm_v7_mn" else B,   # v7_mn takes B as K x N
        "D": torch.full((m, n), float("nan"), device="cuda", dtype=torch.half),
        "bias": torch.randn(n, device="cuda", generator=g).half(),
        "R": torch.randn(m, n, device="cuda", generator=g).half(),
    }
    for p in r.meta["kernels"][0]["params"]:
        if p["name"] in ("W", "C"):   # the split-K / stream-K workspace and its counters (zeros)
            dtype = torch.float32 if p["dtype"] == "f32" else torch.int32
            args[p["name"]] = torch.zeros(p["shape"], device="cuda", dtype=dtype)
    kernel(*(args[p["name"]] for p in r.meta["kernels"][0]["params"] if p["kind"] == "buffer"))
    torch.cuda.synchronize()
    x = 0.5 * (A.float() @ B.float().T) + args["bias"].float()
    ref = torch.nn.functional.gelu(x, approximate="tanh") + args["R"].float()
    D = args["D"]
    assert not torch.isnan(D).any()
    err = ((D.float() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err
    edge = (D.float() - ref)[896:, 768:]   # the last tile row and column of every configuration
    assert (edge.norm() / ref[896:, 768:].norm()).item() < 2e-3


def test_fp8_epilogue_in_the_simulator():
    """fp8_gemm (one 128 x 128 tile) with its per-tensor scales and the
    epilogue in bf16: D = silu(ALPHA scale_a scale_b A B^T + bias) + R."""
    m, n, k = 128, 128, 128
    rng = np.random.default_rng(3)
    values = np.array([float(x) for x in np.arange(-6, 7)], np.float64)
    ia, ib = rng.integers(0, len(values), (m, k)), rng.integers(0, len(values), (n, k))
    A = _e4m3_bits(values[ia]).astype(np.uint8)
    B = _e4m3_bits(values[ib]).astype(np.uint8)
    bias, R = rng.standard_normal(n), rng.standard_normal((m, n))
    r = build("fp8_gemm", M=m, N=n, K=k, SM_COUNT=1, BLK_N=128, ALPHA=0.5, HAS_BIAS=True, ACT="ACT_SILU",
              HAS_RESIDUAL=True)
    D = np.full((m, n), 0xFFFF, np.uint16)   # NaN
    sa, sb = np.array([0.25], np.float32), np.array([0.125], np.float32)
    wgmma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B, "D": D, "scale_a": sa, "scale_b": sb,
                                      "bias": _bf16_bits(bias), "R": _bf16_bits(R)})
    acc = 0.5 * 0.25 * 0.125 * (values[ia] @ values[ib].T)
    ref = ACTIVATIONS["ACT_SILU"](acc + _bf16(bias)) + _bf16(R)
    assert relative_error(_bf16(D, bits=True), ref) < 1e-2


def _bf16_bits(x):
    """bf16 bit patterns of x (round to nearest even)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16(x, bits=False):
    """The values of bf16 bit patterns, or of x rounded to bf16."""
    b = x if bits else _bf16_bits(x)
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _e4m3_bits(x):
    """e4m3 bit patterns of small integers (|x| <= 6, exact in e4m3)."""
    out = np.zeros(x.shape, np.uint8)
    for v in np.unique(x):
        mag = abs(v)
        if mag == 0:
            bits = 0
        else:
            e = int(np.floor(np.log2(mag)))
            mant = int(round((mag / 2**e - 1) * 8))
            bits = ((e + 7) << 3) | mant
        out[x == v] = bits | (0x80 if v < 0 else 0)
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("name, shape", [("fp8_gemm", (1000, 1008, 528)), ("fp8_gemm", (1024, 1024, 512)),
                                         ("fp8_gemm_blockscaled", (1024, 1024, 512))])
def test_fp8_epilogue_matches_torch_on_the_gpu(cuda, name, shape):
    """The FP8 GEMMs with ALPHA 0.5, a bias, GELU and a residual (bf16),
    D NaN-poisoned, against torch in f64 (fp8_gemm at a ragged shape too)."""
    torch = cuda
    m, n, k = shape
    r = build(name, M=m, N=n, K=k, SM_COUNT=torch.cuda.get_device_properties(0).multi_processor_count,
              ALPHA=0.5, HAS_BIAS=True, ACT="ACT_GELU", HAS_RESIDUAL=True)
    from tilec.runtime.module import CompiledModule

    kernel = CompiledModule(r.ptx, r.meta, "sm_90a").kernel()
    g = torch.Generator(device="cuda").manual_seed(4)
    A = (torch.randn(m, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    B = (torch.randn(n, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    bias = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16)
    R = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
    D = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    a, b = A.double(), B.double()
    if name == "fp8_gemm":
        sa, sb = torch.tensor([0.25], device="cuda"), torch.tensor([0.125], device="cuda")
        kernel(A.view(torch.uint8), B.view(torch.uint8), D, sa, sb, bias, R)
        acc = (a @ b.T) * (0.25 * 0.125)
    else:
        SA = torch.rand(k // 128, m, device="cuda", generator=g) + 0.5
        SB = torch.rand(n // 128, k // 128, device="cuda", generator=g) + 0.5
        kernel(A.view(torch.uint8), B.view(torch.uint8), D, SA, SB, bias, R)
        a = a * SA.double().T.repeat_interleave(128, dim=1)
        b = b * SB.double().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
        acc = a @ b.T
    torch.cuda.synchronize()
    ref = torch.nn.functional.gelu(0.5 * acc + bias.double(), approximate="tanh") + R.double()
    assert not torch.isnan(D).any()
    err = ((D.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, err

"""Runtime extents (issue 15 item 1): a name in a parameter extent is bound
at launch from the arrays' shapes.  The compiled PTX runs on the PTX
simulator at several shapes from one compile; the launch binds, checks and
replays them against the fake driver of tests/test_runtime_launch.py."""
import re
import struct

import numpy as np
import pytest

from example_launches import EXAMPLES
from ptx_sim import Kernel as Sim
from test_runtime_launch import (  # noqa: F401  (fixtures)
    FLOAT16,
    build,
    compiled_launcher,
    device_tensor,
    gpu,
    launches,
    torch_gpu,
)
from tilec.compiler.diagnostics import TilecError
from tilec.pipeline import compile_source
from tilec.runtime import dims as runtime_dims
from tilec.runtime.assemble import assemble
from tilec.runtime.launch import DimValue, LaunchError, check_args, kernel_grid

ADD = (EXAMPLES / "runtime_add.tile").read_text()

TWO_D = """
const BLOCK = 128

kernel transpose(X: f32[M, N], Y: f32[N, M]):
    bx, by = cta_id([M, (N + BLOCK - 1) // BLOCK])
    tx = thread_id([BLOCK])
    j = by * BLOCK + tx
    if j < N:
        Y[j, bx] = X[bx, j]

kernel rows4(X: f16[M, N], Y: f16[M, N]):
    assume(N % 4 == 0 and M >= 1, "rows of whole 8-byte chunks")
    bx, by = cta_id([M, N // 4 // 32])
    tx = thread_id([32])
    r = alloc_local((4,), f16)
    col = (by * 32 + tx) * 4
    copy_vec(r[0], X[bx, col], 4)
    copy_vec(Y[bx, col], r[0], 4)
"""


def compiled(text, target="sm_90a"):
    result = compile_source(text, "dims.tile", target)
    assemble(result.ptx, target)  # no ptxas error or warning
    return result


def grid_of(entry, **values):
    return kernel_grid(entry["grid"], values)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_one_compile_adds_vectors_of_every_length(target):
    result = compiled(ADD, target)
    entry = result.meta["kernels"][0]
    sim = Sim(result.ptx, "runtime_add")
    rng = np.random.default_rng(0)
    for n in (1, 300, 512):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        c = np.full(n, np.nan, np.float32)
        sim.run({"A": a, "B": b, "C": c, "n": n}, grid=grid_of(entry, n=n))
        assert np.array_equal(c, a + b)


def test_kernel_json_records_dims_grid_and_assumptions():
    meta = compiled(TWO_D).meta["kernels"]
    transpose, rows4 = meta
    assert transpose["params"] == [
        {"name": "X", "kind": "buffer", "dtype": "f32", "shape": ["M", "N"]},
        {"name": "Y", "kind": "buffer", "dtype": "f32", "shape": ["N", "M"]},
        {"name": "M", "kind": "dim", "dtype": "i32", "tensor": "X", "axis": 0},
        {"name": "N", "kind": "dim", "dtype": "i32", "tensor": "X", "axis": 1},
    ]
    assert transpose["grid"] == ["M", ["//", ["-", ["+", "N", 128], 1], 128], 1]
    assert "assumes" not in transpose
    assert rows4["assumes"] == [
        {"cond": ["and", ["==", ["%", "N", 4], 0], [">=", "M", 1]], "message": "rows of whole 8-byte chunks"}
    ]
    assert grid_of(transpose, M=3, N=129) == (3, 2, 1)


def test_row_strides_come_from_the_runtime_extents():
    result = compiled(TWO_D)
    entry = result.meta["kernels"][0]
    sim = Sim(result.ptx, "transpose")
    for m, n in ((3, 200), (2, 5)):
        x = np.random.default_rng(m).standard_normal((m, n)).astype(np.float32)
        y = np.full((n, m), np.nan, np.float32)
        sim.run({"X": x, "Y": y, "M": m, "N": n}, grid=grid_of(entry, M=m, N=n))
        assert np.array_equal(y, x.T)


def test_an_assumed_divisor_proves_vector_alignment():
    result = compiled(TWO_D)
    assert "ld.global.v2.b32" in result.ptx and "st.global.v2.b32" in result.ptx
    sim = Sim(result.ptx, "rows4")
    x = np.random.default_rng(1).standard_normal((2, 256)).astype(np.float16)
    y = np.zeros((2, 256), np.float16)
    sim.run({"X": x, "Y": y, "M": 2, "N": 256}, grid=(2, 2, 1))
    assert np.array_equal(y, x)


def test_without_the_assumption_the_vector_access_is_refused():
    text = TWO_D.replace('    assume(N % 4 == 0 and M >= 1, "rows of whole 8-byte chunks")\n', "")
    with pytest.raises(TilecError, match=r"copy_vec: cannot move 4 elements of 'X'.*assume\(N % 4 == 0\)"):
        compile_source(text, "dims.tile", "sm_90a")


STAGE = """
const ALIGN = 1

kernel stage(X: f16[M, N], Y: f16[M, N]):
    assume(N >= 64 and N % ALIGN == 0, "rows of whole chunks")
    bx = cta_id([M])
    tx = thread_id([8])
    pool = smem_pool()
    row = pool.alloc((64,), f16)
    pool.commit()
    copy(row[:], X[bx, 0 : 64])
    cuda.cta_sync()
    copy(Y[bx, 0 : 64], row[:])
"""


@pytest.mark.parametrize("align, width", [(1, "u16"), (2, "b32"), (8, "v4.b32"), (16, "v4.b32")])
def test_tile_copies_of_a_runtime_buffer_are_as_wide_as_the_assumes_allow(align, width):
    """`copy` over a region of a buffer with runtime extents moves vectors
    as wide as its row stride (N, a multiple of ALIGN by the assume), the
    start and the alignment allow -- the same proof the emitter makes --
    and copies the row."""
    result = compile_source(STAGE, "stage.tile", "sm_90a", defines={"ALIGN": align})
    assemble(result.ptx, "sm_90a")
    assert set(re.findall(r"\b(?:ld|st)\.global\.([\w.]+)", result.ptx)) == {width}
    m, n = 3, 64 + 16 * align
    x = np.random.default_rng(align).standard_normal((m, n)).astype(np.float16)
    y = np.zeros((m, n), np.float16)
    Sim(result.ptx, "stage").run({"X": x, "Y": y, "M": m, "N": n}, grid=(m, 1, 1),
                                 dynamic_smem=result.meta["kernels"][0]["dynamic_smem"])
    assert np.array_equal(y[:, :64], x[:, :64]) and not y[:, 64:].any()


BAD = [
    ("kernel k(A: f32[n] layout S[8 : 1]):\n    pass\n", "runtime extents and a layout"),
    ("kernel k(n: i32, A: f32[n]):\n    pass\n", "'n' is a scalar parameter"),
    ("kernel k(A: f32[2 * n]):\n    pass\n", "compile-time integer or a name"),
    (
        "kernel k(A: f32[n]):\n    tx = thread_id([32])\n    if tx == 0:\n        assume(n > 0)\n",
        "belongs at the kernel's top level",
    ),
    ("kernel k(A: f32[n], x: i32):\n    assume(n > x)\n", "'x' is neither"),
    ("kernel k(A: f32[n]):\n    assume(n)\n", "comparisons of runtime extents"),
    ("kernel k(A: f32[n]):\n    assume(n > 0, 3)\n", "message must be a string"),
    ("kernel k(A: f32[n]):\n    tx = thread_id([n])\n", "'extents' must be a compile-time shape"),
    ("kernel k(A: f32[n], x: i32):\n    bx = cta_id([n // x])\n", "a grid extent may use only"),
    (
        "kernel k(A: f32[n]):\n    v = A.view(128)\n",
        "needs the shape of 'A' at compile time, but its extent\\(s\\) n are bound at launch",
    ),
]


@pytest.mark.parametrize("text,message", BAD)
def test_mistakes_are_located_errors(text, message):
    with pytest.raises(TilecError, match=message) as info:
        compile_source(text, "bad.tile", "sm_90a")
    assert info.value.span is not None


def test_the_launch_binds_checks_and_refuses():
    entry = compiled(TWO_D).meta["kernels"][1]  # rows4: assume(N % 4 == 0 and M >= 1)
    params, assumes = entry["params"], entry["assumes"]
    x, y = np.zeros((3, 64), np.float16), np.zeros((3, 64), np.float16)
    bound = check_args(params, [x, y], assumes=assumes)
    assert bound["M"] == DimValue(3) and bound["N"] == DimValue(64) and bound["N"].data == struct.pack("<i", 64)
    with pytest.raises(LaunchError, match=r"'Y': shape \[3, 60\] does not match f16\[M, N\] with N = 64 \(from 'X'\)"):
        check_args(params, [x, np.zeros((3, 60), np.float16)], assumes=assumes)
    with pytest.raises(LaunchError, match=r"'Y': shape \[3\] does not match f16\[M, N\]"):
        check_args(params, [x, np.zeros(3, np.float16)], assumes=assumes)
    odd = np.zeros((3, 62), np.float16)
    with pytest.raises(LaunchError, match=r"break the kernel's assumption 'rows of whole 8-byte chunks' \(M = 3, N = 62\)"):
        check_args(params, [odd, odd], assumes=assumes)


def test_extents_beyond_32_bits_are_refused():
    class Huge:
        def __init__(self, shape):
            self.__cuda_array_interface__ = {
                "data": (0x7F0000000000, False), "shape": shape, "typestr": "<f4", "strides": None, "version": 3,
            }  # fmt: skip

    params = compiled(ADD).meta["kernels"][0]["params"]
    with pytest.raises(LaunchError, match=r"runtime extent n = 2147483648 is more than"):
        check_args(params, [Huge((2**31,))] * 3)
    params = compiled(TWO_D).meta["kernels"][0]["params"]
    with pytest.raises(LaunchError, match=r"'X': 2199023255552 elements; a buffer with runtime extents"):
        check_args(params, [Huge((2**20, 2**21)), Huge((2**21, 2**20))])


def test_grid_expressions():
    entry = compiled(ADD).meta["kernels"][0]
    assert grid_of(entry, n=257) == (2, 1, 1)
    with pytest.raises(LaunchError, match=r"the grid \[0, 1, 1\] computed for n = 0 is empty"):
        grid_of(entry, n=0)
    assert runtime_dims.evaluate(["min", ["neg", "a"], ["//", 7, 2]], {"a": 1}) == -1
    assert runtime_dims.evaluate(["or", ["not", [">", "a", 0]], ["%", -7, 3]], {"a": 1}) == 1
    with pytest.raises(runtime_dims.DimError, match="divides by zero"):
        runtime_dims.evaluate(["//", 1, "a"], {"a": 0})
    with pytest.raises(runtime_dims.DimError, match="not an expression"):
        runtime_dims.evaluate(["pow", 2, 3], {})
    with pytest.raises(LaunchError, match="cannot be computed for a = 0"):
        kernel_grid([["%", 4, "a"], 1, 1], {"a": 0})


def test_a_new_shape_rechecks_and_each_signature_replays_its_own_extents(torch_gpu):
    gpu = torch_gpu
    seen = []

    def run_runtime_add(grid, block, address):
        a, b, c, n = gpu.params(address, [8, 8, 8, 4])
        a, b, c = (struct.unpack("<Q", v)[0] for v in (a, b, c))
        (n,) = struct.unpack("<i", n)
        seen.append((grid, n))
        out = np.frombuffer(gpu.memory[c], dtype=np.float32)
        out[:n] = gpu.array(a, np.float32, n) + gpu.array(b, np.float32, n)

    gpu.run_runtime_add = run_runtime_add
    result = compiled(ADD)
    kernel = build((result.ptx, result.meta)).kernel()
    tensors = {}
    for n in (300, 16):
        a = device_tensor(gpu, np.arange(n, dtype=np.float32))
        b = device_tensor(gpu, np.ones(n, np.float32))
        c = device_tensor(gpu, np.zeros(n, np.float32))
        tensors[n] = (a, b, c)
    for n in (300, 300, 16, 16, 300):
        kernel(*tensors[n])
    assert launches(gpu) == ["launch", "fast_launch", "launch", "fast_launch", "fast_launch"]
    assert seen == [((2, 1, 1), 300)] * 2 + [((1, 1, 1), 16)] * 2 + [((2, 1, 1), 300)]
    for n, (_, _, c) in tensors.items():
        assert gpu.array(c.ptr, np.float32, n).tolist() == [i + 1.0 for i in range(n)]
    a, b, c = tensors[16]
    with pytest.raises(LaunchError, match=r"'C': shape \[300\] does not match f32\[n\] with n = 16 \(from 'A'\)"):
        kernel(a, b, tensors[300][2])


TMA_COPY = (EXAMPLES / "runtime_tma_copy.tile").read_text()


def test_tensor_maps_are_expressions_of_the_extents():
    entry = compiled(TMA_COPY).meta["kernels"][0]
    a_map = entry["tensormaps"][0]
    assert (a_map["dims"], a_map["strides"], a_map["box"]) == (["N", "M"], [["*", "N", 2]], [64, 64])
    assert runtime_dims.tensormap_for(a_map, {"M": 100, "N": 72})["dims"] == [72, 100]
    assert runtime_dims.tensormap_for(a_map, {"M": 100, "N": 72})["strides"] == [144]


@pytest.mark.parametrize("m,n", [(100, 72), (64, 136)])
def test_one_tma_compile_copies_every_shape(m, n):
    from tma_ptx_sim import TmaModel

    result = compiled(TMA_COPY)
    entry = result.meta["kernels"][0]
    env = {"M": m, "N": n}
    maps = [runtime_dims.tensormap_for(t, env) for t in entry["tensormaps"]]
    sim = Sim(result.ptx, entry["name"], extension=TmaModel(maps))
    a = np.random.default_rng(m).standard_normal((m, n)).astype(np.float16)
    b = np.full((m, n), np.nan, np.float16)
    sim.run({"A": a, "B": b, **env}, grid=grid_of(entry, **env), dynamic_smem=entry["dynamic_smem"])
    assert np.array_equal(a, b)


def test_a_plan_that_needs_more_than_the_assumptions_is_refused():
    text = TMA_COPY.replace('    assume(N % 8 == 0, "N must be a multiple of 8: TMA needs 16-byte row strides")\n', "")
    with pytest.raises(TilecError, match=r"not a positive multiple of 16 \(planned with the runtime extents of .A. standing in as M = 1009, N = 1013"):
        compile_source(text, "dims.tile", "sm_90a")


def test_a_new_shape_encodes_each_map_once(torch_gpu, monkeypatch):
    gpu = torch_gpu
    from tilec.runtime import launch as launch_py

    encodes = []

    def encode(desc, base):
        encodes.append((desc["name"], base, desc["dims"], desc["strides"]))
        return struct.pack("<Q", base) + bytes(120)

    monkeypatch.setattr(launch_py, "encode_tiled", encode)
    gpu.run_runtime_tma_copy = lambda grid, block, address: gpu.log.append(("ran", grid))
    result = compiled(TMA_COPY)
    kernel = build((result.ptx, result.meta)).kernel()
    small = [device_tensor(gpu, np.zeros((100, 72), np.float16), FLOAT16) for _ in range(2)]
    wide = [device_tensor(gpu, np.zeros((64, 136), np.float16), FLOAT16) for _ in range(2)]
    for args in (small, small, wide, wide, small):
        kernel(*args)
    assert launches(gpu) == ["launch", "fast_launch", "launch", "fast_launch", "fast_launch"]
    assert [e[1] for e in gpu.log if e[0] == "ran"] == [(2, 2, 1)] * 2 + [(3, 1, 1)] * 2 + [(2, 2, 1)]
    assert [(name, dims, strides) for name, _, dims, strides in encodes] == [
        ("A_tmap0", [72, 100], [144]), ("B_tmap0", [72, 100], [144]),
        ("A_tmap0", [136, 64], [272]), ("B_tmap0", [136, 64], [272]),
    ]  # fmt: skip
    odd = [device_tensor(gpu, np.zeros((8, 12), np.float16), FLOAT16) for _ in range(2)]
    with pytest.raises(LaunchError, match="N must be a multiple of 8"):
        kernel(*odd)


def test_one_hgemm_compile_computes_a_ragged_tile():
    """hgemm_v7 with runtime M, N, K in the PTX simulator: the CTA of the
    second tile of M = 130 (2 of its 128 rows exist) over two K tiles, the
    last one ragged (K = 72)."""
    import wgmma_ptx_sim

    path = EXAMPLES / "hopper" / "hgemm_v7_runtime.tile"
    result = compile_source(path.read_text(), str(path), "sm_90a")  # the path: it includes gemm_epilogue.tile
    assemble(result.ptx, "sm_90a")
    entry = result.meta["kernels"][0]
    assert [t["dims"] for t in entry["tensormaps"]] == [["K", "M"], ["K", "N"], ["N", "M"]]
    assert entry["grid"] == [["sm_count"], 1, 1]  # one persistent CTA per SM of the device
    device = [p for p in entry["params"] if p["kind"] == "device"]
    assert device[0] == {"name": "__sm_count", "kind": "device", "dtype": "i32", "value": ["sm_count"]}
    # the scheduler's two divisors (tiles per group, rows of the last group): magic numbers at launch
    assert [(p["name"], p["value"][0]) for p in device[1:]] == [
        ("__div0_mul", "magic_mul"), ("__div0_shift", "magic_shift"),
        ("__div1_mul", "magic_mul"), ("__div1_shift", "magic_shift"),
    ]
    m, n, k = 130, 256, 72
    env = {"M": m, "N": n, "K": k}
    hidden = runtime_dims.device_values(entry["params"], {**env, runtime_dims.SM_COUNT: 2})
    assert hidden["__sm_count"] == 2
    grid = kernel_grid(entry["grid"], {**env, runtime_dims.SM_COUNT: 2})
    assert grid == (2, 1, 1)
    maps = [runtime_dims.tensormap_for(t, env) for t in entry["tensormaps"]]
    meta = {"kernels": [{**entry, "grid": grid, "tensormaps": maps}]}
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((n, k)).astype(np.float16)
    d = np.full((m, n), np.nan, np.float16)
    wgmma_ptx_sim.run(result.ptx, meta, {"A": a, "B": b, "D": d, **hidden, **env}, ctas=[(1, 0, 0)])
    ref = a[128:].astype(np.float64) @ b.astype(np.float64).T
    assert np.linalg.norm(d[128:].astype(np.float64) - ref) / np.linalg.norm(ref) < 1e-3
    assert np.isnan(d[:128].astype(np.float32)).all()  # the first tile is the other CTA's


PERSISTENT = """
kernel persistent(C: i32[n]):
    bx = cta_id([sm_count()])
    tx = thread_id([32])
    i: i32 = bx * 32 + tx
    while i < n:
        C[i] = sm_count()
        i += sm_count() * 32
"""


def test_a_persistent_grid_from_the_sm_count(gpu):
    result = compiled(PERSISTENT)
    entry = result.meta["kernels"][0]
    assert entry["grid"] == [["sm_count"], 1, 1]
    sim = Sim(result.ptx, "persistent")
    c = np.zeros(100, np.int32)
    sim.run({"C": c, "n": 100, "__sm_count": 3}, grid=(3, 1, 1))
    assert (c == 3).all()
    seen = []
    gpu.run_persistent = lambda grid, block, address: seen.append((grid, gpu.params(address, [8, 4, 4])[1:]))
    kernel = build((result.ptx, result.meta)).kernel()
    kernel(np.zeros(100, np.int32))
    assert seen == [((132, 1, 1), [struct.pack("<i", 100), struct.pack("<i", 132)])]  # the fake device's 132 SMs

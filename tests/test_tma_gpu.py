"""copy_async -> tma on the GPU (an sm_90a or sm_100a device; skipped
elsewhere): the acceptance grid of tests/tma_kernels.py -- every swizzle
mode for 1-, 2- and 4-byte elements, loads and stores, partial regions at
offsets, 3-D tensors, multi-stage shared buffers, issue loops, fills past
the tensor's edge, ragged last tiles of 128-column 128B-swizzled tiles
(`-k ragged`: a dim split over descriptor dims must clip where the tensor
ends), reductions -- with random data, the output poisoned first and every
element compared with numpy; then the seed's demo and the streaming copy.
The same kernels and expectations run in the PTX simulator in
test_tma_variant.py, which is what makes them trustworthy here.  Multicast
and cache hints are checked on the CPU only (PTX and assembly): a multicast
needs a cluster barrier before the peer's mbarrier may be signalled, and a
cache policy a createpolicy, which the language does not have yet."""
from pathlib import Path

import numpy as np
import pytest

import tma_kernels
from tilec.pipeline import compile_source
from tilec.runtime import driver
from tilec.runtime.module import CompiledModule

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGETS = {(9, 0): "sm_90a", (10, 0): "sm_100a"}


@pytest.fixture(scope="module")
def target():
    cc = driver.device().compute_capability
    if cc not in TARGETS:
        pytest.skip(f"TMA kernels need an sm_90a or sm_100a device, this one is {cc[0]}.{cc[1]}")
    return TARGETS[cc]


def launch(text: str, target: str, *args, defines=None):
    r = compile_source(text, "test.tile", target=target, defines=defines)
    CompiledModule(r.ptx, r.meta, target).kernel()(*args)


@pytest.mark.parametrize("case", tma_kernels.grid_cases(), ids=lambda c: c.name)
def test_grid_case(case, target):
    args = case.inputs(seed=len(case.name))
    want = case.expected(args["A"], args["B"])
    launch(case.source(), target, args["A"], args["B"])
    assert tma_kernels.same_bits(args["B"], want), case.name


def test_seed_demo(target):
    a = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float16)
    b = np.full_like(a, np.nan)
    launch((EXAMPLES / "tma_copy.tile").read_text(), target, a, b)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("ctas, stages, ahead", [(7, 4, 2), (300, 3, 1), (16, 2, 0)])
def test_stream_copy(target, ctas, stages, ahead):
    """The bench's kernel at a test's size: fewer and more CTAs than tiles,
    several ring depths."""
    defines = {"M": 2048, "N": 1024, "NUM_CTAS": ctas, "STAGES": stages, "AHEAD": ahead}
    a = np.random.default_rng(ctas).standard_normal((2048, 1024)).astype(np.float16)
    b = np.full_like(a, np.nan)
    launch((EXAMPLES / "tma_stream_copy.tile").read_text(), target, a, b, defines=defines)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", tma_kernels.edge_cases(), ids=lambda c: c.name)
def test_run_time_starts_at_every_edge_position(case, target):
    """Issue 18 item 1: a run-time start at every row (and 16-byte column)
    position, on tiles as long as the tensor too, loads and stores, the
    output poisoned with NaN each time."""
    r_ = compile_source(case.source(), "test.tile", target=target)
    kernel = CompiledModule(r_.ptx, r_.meta, target).kernel()
    bad = []
    for r, c in case.starts():
        args = case.inputs(seed=r * 131 + c)
        want_g, want_t = case.expected(args["G"], args["T"], r, c)
        kernel(args["G"], args["T"], r, c)
        if not (tma_kernels.same_bits(args["G"], want_g) and tma_kernels.same_bits(args["T"], want_t)):
            bad.append((r, c))
    assert not bad, f"{case.name}: wrong at starts {bad[:8]}"

"""The example kernels on a real GPU (skipped without one).  They are
compiled for sm_80 so that any device of compute capability 8.0 or newer
runs them; the CPU tests check the same kernels in the PTX simulator."""
from pathlib import Path

import numpy as np
import pytest

from emit_util import build
from tilec.runtime import driver
from tilec.runtime.module import CompiledModule

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def ampere_or_newer():
    if driver.device().compute_capability < (8, 0):
        pytest.skip("needs compute capability 8.0 or newer")


def kernel(name: str, defines: dict):
    ptx, meta = build((EXAMPLES / f"{name}.tile").read_text(), "sm_80", defines)
    return CompiledModule(ptx, meta, "sm_80").kernel(name)


def test_elementwise_add_on_the_device(ampere_or_newer):
    n = 1 << 16
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    kernel("elementwise_add", {"N": n})(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_tile_copy_sync_on_the_device(ampere_or_newer):
    a = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float16)
    b = np.zeros_like(a)
    kernel("tile_copy_sync", {"M": 256, "N": 512})(a, b)
    np.testing.assert_array_equal(a, b)

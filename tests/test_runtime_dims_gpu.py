"""Runtime extents on a real GPU: one compile of examples/runtime_add.tile
and of a 2-D kernel with runtime row strides and an assumed divisor, run at
several shapes on torch tensors (fast path included) and numpy arrays,
checked against torch."""
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.runtime.launch import LaunchError

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent

ROWS = """
kernel rows4(X: f16[M, N], Y: f16[N, M], Z: f16[M, N]):
    assume(N % 4 == 0, "N must be a multiple of 4")
    bx, by = cta_id([M, (N // 4 + 31) // 32])
    tx = thread_id([32])
    r = alloc_local((4,), f16)
    col = (by * 32 + tx) * 4
    if col < N:
        copy_vec(r[0], X[bx, col], 4)
        copy_vec(Z[bx, col], r[0], 4)
        for k in unroll(4):
            Y[col + k, bx] = r[k]
"""


def test_one_compile_serves_every_length():
    kernel = tilec.compile(ROOT / "examples" / "runtime_add.tile").kernel()
    for n in (1, 255, 256, 1000, 1 << 20, 3 * (1 << 20) + 7, 1000):
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.full((n,), float("nan"), device="cuda")
        kernel(a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), n
    x = np.arange(77, dtype=np.float32)
    y = np.zeros(77, np.float32)
    kernel(x, x, y)  # numpy: staged, synchronous
    assert np.array_equal(y, 2 * x)
    with pytest.raises(LaunchError, match="with n = 77"):
        kernel(x, x, np.zeros(78, np.float32))


def test_runtime_row_strides_and_vector_accesses():
    kernel = tilec.compile(ROWS).kernel()
    for m, n in ((1, 4), (3, 200), (64, 1028), (5, 4096), (3, 200)):
        x = torch.randn(m, n, device="cuda", dtype=torch.float16)
        y = torch.full((n, m), float("nan"), device="cuda", dtype=torch.float16)
        z = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        kernel(x, y, z)
        torch.cuda.synchronize()
        assert torch.equal(z, x) and torch.equal(y, x.T), (m, n)
    x = torch.zeros(2, 6, device="cuda", dtype=torch.float16)
    with pytest.raises(LaunchError, match="N must be a multiple of 4"):
        kernel(x, torch.zeros(6, 2, device="cuda", dtype=torch.float16), x)


def test_tensor_maps_encoded_at_launch_for_every_shape():
    kernel = tilec.compile(ROOT / "examples" / "runtime_tma_copy.tile").kernel()
    for m, n in ((64, 64), (100, 72), (1000, 1032), (3, 8), (4096, 520), (100, 72)):
        a = torch.randn(m, n, device="cuda", dtype=torch.float16)
        b = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        kernel(a, b)
        torch.cuda.synchronize()
        assert torch.equal(a, b), (m, n)


def test_one_hgemm_compile_serves_every_shape():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("hgemm_v7 needs sm_90a")
    kernel = tilec.compile(ROOT / "examples" / "hopper" / "hgemm_v7_runtime.tile").kernel()
    assert kernel.grid == (["sm_count"], 1, 1)
    for m, n, k in ((128, 256, 64), (1000, 1032, 1064), (256, 4096, 520), (4096, 256, 4096), (2048, 2048, 2048)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, k, device="cuda", dtype=torch.float16)
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        kernel(a, b, d)
        ref = a.float() @ b.float().T
        error = float(torch.linalg.norm(d.float() - ref) / torch.linalg.norm(ref))
        assert error < 1e-2, (m, n, k, error)
    small = torch.zeros(64, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(LaunchError, match="at least one tile"):
        kernel(small, torch.zeros(256, 64, device="cuda", dtype=torch.float16), torch.zeros(64, 256, device="cuda", dtype=torch.float16))

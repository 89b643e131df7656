"""Tests marked `gpu` run only where a CUDA driver and device answer.

The probe opens device 0 through tilec's own driver wrapper, once, and only
when a collected test carries the marker, so CPU-only runs never load the
driver library.

Under CI (the `CI` environment variable set) hypothesis runs derandomized:
the same examples on every run, so a submission's CI result does not depend
on the luck of the draw.  Elsewhere each run explores new inputs, and
`tools/fuzz.py` explores for longer."""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def hopper():
    """For tests whose kernels are compiled for sm_90a: skipped on any other
    device (the driver refuses an sm_90a module elsewhere)."""
    from tilec.runtime import driver

    if driver.device().compute_capability != (9, 0):
        pytest.skip("the sm_90a kernels need compute capability 9.0")


def _gpu_skip_reason() -> str | None:
    from tilec.runtime.driver import CudaError, device

    try:
        device()
    except CudaError as e:
        return f"no usable CUDA device: {e.message}"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    if reason is not None:
        skip = pytest.mark.skip(reason=reason)
        for item in gpu_items:
            item.add_marker(skip)

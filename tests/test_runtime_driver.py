"""The driver wrapper: every status checked, nothing touched at import."""
import subprocess
import sys

import pytest
from cuda.bindings import driver as cu

from tilec.compiler.diagnostics import TilecError
from tilec.runtime import driver
from tilec.runtime.driver import CudaError, call


def cuPretend(*args):
    return (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)


def cuAnswers(x):
    return (cu.CUresult.CUDA_SUCCESS, x, x + 1)


def cuAnswersOne():
    return (cu.CUresult.CUDA_SUCCESS, "one")


def cuAnswersNothing():
    return (cu.CUresult.CUDA_SUCCESS,)


def test_failing_status_names_call_and_error():
    with pytest.raises(CudaError) as info:
        call(cuPretend, 1, 2)
    assert isinstance(info.value, TilecError)
    assert info.value.call_name == "cuPretend"
    assert info.value.message.startswith("cuPretend failed: CUDA_ERROR_INVALID_VALUE")


def test_values_after_the_status():
    assert call(cuAnswers, 1) == (1, 2)
    assert call(cuAnswersOne) == "one"
    assert call(cuAnswersNothing) is None


def test_importing_tilec_touches_no_driver():
    """With every driver entry point sabotaged, importing the runtime and
    building a module (no kernel asked for) still works."""
    script = """
import cuda.bindings.driver as cu
def boom(*args, **kwargs):
    raise AssertionError("the driver was called")
for name in dir(cu):
    if name.startswith("cu") and callable(getattr(cu, name)):
        setattr(cu, name, boom)
import tilec, tilec.runtime
from tilec.runtime import assemble, cache, driver, launch, module, tensormap
import runtime_kernels
ptx, meta = runtime_kernels.vadd()
m = module.CompiledModule(ptx, meta, "sm_90a")
assemble.assemble(ptx, "sm_90a")
print("ok")
"""
    tests_dir = __file__.rsplit("/", 1)[0]
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tests_dir + "/..",
        env={"PYTHONPATH": f"{tests_dir}/..:{tests_dir}", "PATH": "/usr/bin:/bin"},
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_missing_driver_is_a_cuda_error(monkeypatch):
    def no_library(flags):
        raise RuntimeError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(driver, "_device", None)
    monkeypatch.setattr(cu, "cuInit", no_library)
    with pytest.raises(CudaError, match="cuInit failed: no NVIDIA driver library"):
        driver.device()


def test_failing_init_is_a_cuda_error(monkeypatch):
    monkeypatch.setattr(driver, "_device", None)
    monkeypatch.setattr(cu, "cuInit", lambda flags: (cu.CUresult.CUDA_ERROR_NO_DEVICE,))
    with pytest.raises(CudaError, match="cuInit failed: CUDA_ERROR_NO_DEVICE"):
        driver.device()

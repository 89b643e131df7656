"""tilec's runtime: PTX to cubin (nvJitLink), the CUDA driver, TMA tensor
maps, launching kernels, and the on-disk cache of compiled modules.

The function `assemble` is not re-exported here, so that
`tilec.runtime.assemble` stays the module: call
`tilec.runtime.assemble.assemble(ptx, target)`."""
from tilec.runtime.assemble import PtxAssemblyError
from tilec.runtime.driver import CudaError
from tilec.runtime.launch import Kernel, LaunchError
from tilec.runtime.module import CompiledModule
from tilec.runtime.tensormap import TensorMapError

__all__ = [
    "CompiledModule",
    "CudaError",
    "Kernel",
    "LaunchError",
    "PtxAssemblyError",
    "TensorMapError",
]

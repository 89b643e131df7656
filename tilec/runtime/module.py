"""A compiled module: PTX text and its kernel.json metadata, loaded onto the
device on first use.

Construction touches no GPU, so a module can be built, inspected and cached
anywhere; `kernel(name)` assembles the PTX for the device in hand, loads it
and returns a launchable `Kernel`.
"""
from __future__ import annotations

import threading
import weakref

from tilec.compiler import targets
from tilec.runtime import driver
from tilec.runtime.assemble import assemble
from tilec.runtime.launch import Kernel, LaunchError


def device_arch(target: str, compute_capability: tuple[int, int]) -> str:
    """The architecture to assemble a `target` module for, on a device of
    `compute_capability`; `LaunchError` when the device cannot run it.

    An arch-specific target ("sm_90a", "sm_100a") uses instructions that
    exist only on that exact chip, so it needs that compute capability.  A
    portable target ("sm_80") runs on any later device, its PTX assembled
    for the device's own architecture (a cubin runs only within one major
    version, so sm_80 code is not reused on sm_90)."""
    t = targets.target(target)
    major, minor = compute_capability
    sm = major * 10 + minor
    if t.name.endswith("a"):
        if sm != t.sm:
            raise LaunchError(
                f"the module is compiled for {t.name}, which runs only on compute capability "
                f"{t.sm // 10}.{t.sm % 10}; this device is {major}.{minor}"
            )
        return t.name
    if sm < t.sm:
        raise LaunchError(
            f"the module is compiled for {t.name}; this device (compute capability {major}.{minor}) "
            f"is older"
        )
    return f"sm_{sm}"


def _unload(module) -> None:
    driver.unload_module(module)


class CompiledModule:
    """`ptx` and `meta` (the kernel.json dict) produced for `target`."""

    def __init__(self, ptx: str, meta: dict, target: str):
        targets.target(target)
        if meta.get("target", target) != target:
            raise ValueError(f"kernel.json is for {meta['target']}, the module for {target}")
        self.ptx = ptx
        self.meta = meta
        self.target = target
        self._entries = {k["name"]: k for k in meta["kernels"]}
        self._module = None
        self._kernels: dict[str, Kernel] = {}
        self._lock = threading.Lock()

    @property
    def kernel_names(self) -> list[str]:
        return list(self._entries)

    def kernel(self, name: str | None = None) -> Kernel:
        """The kernel called `name` (may be left out when there is only
        one), loaded on the device.  Raises `LaunchError` when the device
        cannot run the module or the kernel's shared memory."""
        if name is None:
            if len(self._entries) != 1:
                raise LaunchError(f"the module has kernels {self.kernel_names}: name one")
            (name,) = self._entries
        if name not in self._entries:
            have = ", ".join(self._entries) or "none"
            raise LaunchError(f"no kernel '{name}' in the module (it has {have})")
        with self._lock:
            if name not in self._kernels:
                device = driver.device()
                module = self._load(device)
                entry = self._entries[name]
                function = driver.get_function(module, entry["entry"])
                self._kernels[name] = Kernel(self, entry, function, device)
            return self._kernels[name]

    def _load(self, device: driver.Device):
        """Check the PTX strictly with `assemble`, then load the PTX itself
        for the driver to compile.  nvJitLink compiles relocatable code,
        and there ptxas drops `setmaxnreg` ("ignored to maintain
        compatibility across compilation units", C7504): a warp-specialized
        kernel's consumers would keep the launch's per-thread registers,
        spill, and have their wgmmas serialized.  The driver compiles the
        module whole, as ptxas does without -c, and honours it."""
        if self._module is None:
            assemble(self.ptx, device_arch(self.target, device.compute_capability))
            self._module = driver.load_module(self.ptx.encode() + b"\0")
            # Unloaded when the module is collected; not at interpreter exit,
            # where the process frees it anyway and the driver may be gone.
            weakref.finalize(self, _unload, self._module).atexit = False
        return self._module

    def __repr__(self) -> str:
        return f"<tilec CompiledModule {self.target} kernels={self.kernel_names}>"

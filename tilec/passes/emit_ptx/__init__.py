"""PTX emission: the `emit-ptx` pass (see `emitter`)."""
from tilec.passes.emit_ptx.emitter import EmitPTX, emit_module

__all__ = ["EmitPTX", "emit_module"]

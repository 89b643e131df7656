"""TMA and mbarriers for the PTX simulator (tests/ptx_sim.py), so that
kernels built on copy_async -> tma can be run, element by element, on a
machine without a GPU.

The model is the one the planner is written against (tests/tma_sim.py):
one `cp.async.bulk.tensor` walks the box of its tensor map from the given
coordinates, dim 0 fastest, lands it densely at the shared address and
XOR-swizzles each 16-byte chunk by its absolute address; positions outside
any dim of the tensor map (each coordinate bounded by its own dim) read as
zero (or NaN) on a load and are skipped on a store.  The
copy happens when the instruction runs and completes its bytes on the
mbarrier at once, which is one legal schedule of the real, asynchronous
one.  An mbarrier keeps its state in its own 8 shared bytes: the expected
arrival count (bits 0-15), the arrivals still missing (16-31), the pending
transaction bytes (32-62, signed) and the phase parity (bit 63).  A wait
that finds its phase incomplete ends the thread's turn (ptx_sim.YIELD), so
a wait nobody completes ends in the simulator's "kernel did not finish"
rather than spinning forever; while it waits, the simulator counts it as
waiting at a barrier, so the kernels run here complete each phase before
anyone waits on it (the issuing thread itself, or a barrier between).

In a cluster launch the `shared::cluster` operands are addresses of any
CTA of the cluster (ptx_sim.SharedMemory): `mbarrier.arrive.shared::cluster`
arrives on the barrier of the CTA its (mapa'd) address names, and a TMA
load lands its box where its destination address points.  A
`.multicast::cluster` load lands the box at the same CTA-relative offset
in every CTA of its mask, and completes its bytes on the mbarrier at the
mbarrier's offset in each of them, as the PTX ISA has it.
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from ptx_sim import YIELD, Kernel
from tilec.compiler.dtypes import DTYPES
from tma_sim import MODES, hw_swizzle

_TMAP_BASE = 0xFF << 40
_NAN_BITS = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000}
_LOAD = re.compile(r"^\[(\S+)\], \[(\S+), \{([^}]*)\}\], \[(\S+)\]((?:, \S+)*)$")
_STORE = re.compile(r"^\[(\S+), \{([^}]*)\}\], \[(\S+)\]((?:, \S+)*)$")


def run(ptx: str, meta: dict, args: dict, ctas=None, kernel: str = None, max_steps: int = 2_000_000) -> int:
    """Simulate the kernel of kernel.json `meta` (or the one named) over
    numpy `args` (updated in place); returns the instructions executed."""
    entry = meta["kernels"][0] if kernel is None else next(k for k in meta["kernels"] if k["name"] == kernel)
    k = Kernel(ptx, entry["name"], extension=TmaModel(entry["tensormaps"]))
    return k.run(args, grid=entry["grid"], ctas=ctas, dynamic_smem=entry["dynamic_smem"], max_steps=max_steps,
                 cluster=entry.get("cluster"))


class TmaModel:
    """The extension: mbarrier.*, cp.async.bulk.tensor and
    cp.reduce.async.bulk.tensor, and reading a tensor map parameter."""

    def __init__(self, tensormaps):
        self.maps = list(tensormaps)
        self.by_name = {t["name"]: i for i, t in enumerate(self.maps)}

    def claims(self, op, ops) -> bool:
        """Whether `op ops` may be one of this model's (ptx_sim.Kernel)."""
        return op.startswith(("mov.", "mbarrier.", "cp.async.bulk.tensor.", "cp.reduce.async.bulk.tensor."))

    def __call__(self, op, ops, regs, special, symbols, mem, shared) -> bool:
        def val(x):
            for table in (regs, special, symbols):
                if x in table:
                    return table[x]
            return int(x, 0)

        if op.startswith("mov.") and len(ops) == 2 and ops[1] in self.by_name:
            regs[ops[0]] = _TMAP_BASE + self.by_name[ops[1]]
            return True
        if op.startswith("mbarrier."):
            return self.mbarrier(op, ops, regs, val, shared)
        if op.startswith(("cp.async.bulk.tensor.", "cp.reduce.async.bulk.tensor.")):
            self.tensor_copy(op, ", ".join(ops), val, mem, shared)
            return True
        return False

    # ---- mbarriers ------------------------------------------------------

    def mbarrier(self, op, ops, regs, val, shared):
        if ".try_wait.parity." in op:
            state = _Barrier.read(shared, val(ops[1].strip("[]")))
            done = state.phase != (val(ops[2]) & 1)
            regs[ops[0]] = done
            return True if done else YIELD
        addr = val((ops[0] if op.startswith("mbarrier.init") else ops[1]).strip("[]"))
        if ".shared::cluster." in op:  # a barrier of any CTA of the cluster
            shared, addr = shared.window(addr)
        if op.startswith("mbarrier.init"):
            _Barrier(val(ops[1]), val(ops[1]), 0, 0).write(shared, addr)
        elif op.startswith("mbarrier.arrive.expect_tx"):
            _Barrier.read(shared, addr).arrive(val(ops[2])).write(shared, addr)
        elif op.startswith("mbarrier.arrive."):
            _Barrier.read(shared, addr).arrive(0).write(shared, addr)
        else:
            raise AssertionError(f"mbarrier instruction not modelled: {op}")
        return True

    # ---- tensor copies ----------------------------------------------------

    def tensor_copy(self, op, text, val, mem, shared):
        parts = op.split(".")
        if parts[0] == "cp" and parts[1] == "async" and parts[5] == "shared::cluster":
            m = _LOAD.match(text)
            assert m, f"cannot parse TMA load operands: {text}"
            smem, tmap, coords, mbar = val(m[1]), val(m[2]), m[3], val(m[4])
            desc = self.maps[tmap - _TMAP_BASE]
            dst, smem = shared.window(smem)
            bar, mbar = shared.window(mbar)  # the same CTA's as dst's (PTX ISA), unchecked
            if ".multicast::cluster" in op:  # the mask is the first operand after the mbarrier
                mask = val(m[5].split(",")[1].strip()) & 0xFFFF
                ranks = [r for r in range(16) if mask >> r & 1]
                assert ranks, "a multicast TMA load with an empty CTA mask"
                targets = [(shared.peer(r), shared.peer(r)) for r in ranks]
            else:
                targets = [(dst, bar)]
            for dst, bar in targets:
                nbytes = self._walk(desc, _coords(coords, val), smem, mem, dst, "load", None)
                _Barrier.read(bar, mbar).complete_tx(nbytes).write(bar, mbar)
            return
        m = _STORE.match(text)
        assert m, f"cannot parse TMA store operands: {text}"
        tmap, coords, smem = val(m[1]), m[2], val(m[3])
        desc = self.maps[tmap - _TMAP_BASE]
        reduce = parts[8] if parts[1] == "reduce" else None
        self._walk(desc, _coords(coords, val), smem, mem, shared, "store", reduce)

    def _walk(self, desc, coords, smem, mem, shared, direction, reduce) -> int:
        assert smem % 128 == 0, f"TMA shared address {smem} is not 128-byte aligned"
        assert len(coords) == desc["rank"], f"{len(coords)} coordinates for a rank-{desc['rank']} tensor map"
        dt = DTYPES[desc["dtype"]]
        pe = dt.bytes
        strides = (pe,) + tuple(desc["strides"])
        mode = MODES[desc["swizzle"]]
        data, base = mem.view(mem.params[desc["tensor"]])
        box = desc["box"]
        for k, p in enumerate(itertools.product(*(range(b) for b in reversed(box)))):
            pos = tuple(reversed(p))
            s = hw_swizzle(smem + k * pe, mode)
            inside = all(0 <= c + q < d for c, q, d in zip(coords, pos, desc["dims"]))
            g = base + sum((c + q) * st for c, q, st in zip(coords, pos, strides))
            if direction == "load":
                if inside:
                    shared[s : s + pe] = data[g : g + pe]
                else:
                    fill = 0 if desc["oob_fill"] == "zero" else _NAN_BITS[desc["dtype"]]
                    shared[s : s + pe] = fill.to_bytes(pe, "little")
            elif inside:
                if reduce is None:
                    data[g : g + pe] = shared[s : s + pe]
                else:
                    data[g : g + pe] = _reduce(reduce, desc["dtype"], data[g : g + pe], shared[s : s + pe])
        return int(np.prod(box)) * pe


def _coords(text, val) -> tuple:
    return tuple(_signed32(val(c.strip())) for c in text.split(","))


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _reduce(op, dtype, old: bytes, new: bytes) -> bytes:
    assert op == "add", f"TMA reduction {op} not modelled"
    t = np.dtype(DTYPES[dtype].numpy)
    a, b = np.frombuffer(bytes(old), t), np.frombuffer(bytes(new), t)
    with np.errstate(over="ignore"):
        return (a + b).astype(t).tobytes()


class _Barrier:
    def __init__(self, count, pending, tx, phase):
        self.count, self.pending, self.tx, self.phase = count, pending, tx, phase

    @classmethod
    def read(cls, shared, addr):
        assert addr % 8 == 0, f"mbarrier at {addr} is not 8-byte aligned"
        assert 0 <= addr <= len(shared) - 8, f"mbarrier at {addr:#x} is outside its CTA's {len(shared)} shared bytes"
        v = int.from_bytes(shared[addr : addr + 8], "little")
        tx = (v >> 32) & 0x7FFFFFFF
        if tx >> 30:
            tx -= 1 << 31
        return cls(v & 0xFFFF, (v >> 16) & 0xFFFF, tx, v >> 63)

    def write(self, shared, addr):
        assert self.count, f"mbarrier at {addr} is used before mbarrier.init"
        v = self.count | self.pending << 16 | (self.tx & 0x7FFFFFFF) << 32 | self.phase << 63
        shared[addr : addr + 8] = v.to_bytes(8, "little")

    def arrive(self, tx_bytes):
        assert self.pending > 0, "more arrivals than the mbarrier expects in this phase"
        self.pending -= 1
        self.tx += tx_bytes
        return self._advance()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        return self._advance()

    def _advance(self):
        if self.pending == 0 and self.tx == 0:
            self.pending, self.phase = self.count, self.phase ^ 1
        return self

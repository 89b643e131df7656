"""Hopper's warpgroup instructions for the PTX simulator (tests/ptx_sim.py):
wgmma, stmatrix and setmaxnreg, on top of the TMA and mbarrier model of
tests/tma_ptx_sim.py, so that the sm_90a GEMM kernels run, element by
element, on a machine without a GPU.

The model is written from the PTX ISA, independently of the lowering it
checks (tilec/passes/dispatch/gemm_async/wgmma.py):

- a shared matrix descriptor (9.7.15.5.1.2) is decoded bit by bit -- start
  address bits 0-13, LBO 16-29, SBO 32-45 (all >> 4), swizzle 62-63 (0
  none, 1 128B, 2 64B, 3 32B) -- and element (r, k) of a K-major operand
  is read where the canonical layout puts it: 8-row core groups SBO apart,
  rows 16 bytes apart without swizzle (16-byte K chunks LBO apart) or one
  swizzle row (32/64/128 bytes) apart with it, the 16-byte chunks of the
  absolute address XOR-ed with its 128-byte line index.  An MN-major
  operand (imm-trans 1) is the transpose: K rows one atom row apart in
  groups of 8, the groups SBO apart, MN atoms LBO apart when swizzled;
  unswizzled, 16-byte MN chunks SBO apart and 8-row K groups LBO apart
  (CUTLASS's canonical GMMA layouts);
- element types: f16, bf16, tf32 (the f32 bits, low 13 mantissa bits
  ignored), e4m3, e5m2 (decoded from their bit fields), s8, u8 (s32
  accumulators);
- the accumulator fragment of m64nNk16 (the ISA's figure for D): value i of
  thread t = 32 w + l is row 16 w + l / 4 + 8 ((i / 2) % 2), column
  8 (i / 4) + 2 (l % 4) + i % 2, one f32/s32 register each, or for an f16
  D two to an f16x2 register, the lower one first (rounded to f16 once per
  instruction); the A register fragment is the same with N = 16, two 16-bit
  values per 32-bit register, the lower one first; for 8-bit A (k32) four
  to a register, for tf32 A (k8) one: value i at row l / 4 + 8 (i % 2),
  column 4 (i / 2) + l % 4 (CUTLASS's ALayout_64x8);
- stmatrix.m8n8: lane l gives the address of row l % 8 of matrix l / 8; the
  row's 8 elements come from lanes 4 r ... 4 r + 3 (two each, in the
  register of that matrix).

A wgmma reading only shared memory runs when each thread issues it (its
results are the thread's own registers and nothing else depends on other
threads); that is one legal schedule of the asynchronous instruction, so
commit_group and wait_group do nothing.  Collective instructions whose
inputs are other threads' registers (stmatrix, wgmma with A in registers)
gather every participant's operands: each thread deposits its own and ends
its turn, and the last of the warp (warpgroup) to arrive executes the
instruction for all of them.  A failed mbarrier.try_wait also ends the
thread's turn, so that a producer and its consumers take turns.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ptx_sim import YIELD, Kernel
from tma_ptx_sim import TmaModel

_MMA = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k(\d+)\.(f32|s32|f16)\.(\w+)\.(\w+)$")
_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
_K = {2: 16, 4: 8, 1: 32}
_OWN = ("wgmma.", "stmatrix.", "setmaxnreg.")


def run(ptx: str, meta: dict, args: dict, ctas=None, kernel: str = None, max_steps: int = 20_000_000) -> int:
    """Simulate the kernel of kernel.json `meta` (or the one named) over
    numpy `args` (updated in place); returns the instructions executed."""
    entry = meta["kernels"][0] if kernel is None else next(k for k in meta["kernels"] if k["name"] == kernel)
    model = HopperModel(TmaModel(entry.get("tensormaps", [])))
    k = Kernel(ptx, entry["name"], extension=model)
    steps = k.run(args, grid=entry["grid"], ctas=ctas, dynamic_smem=entry["dynamic_smem"], max_steps=max_steps,
                  cluster=entry.get("cluster"))
    assert not model.pending, f"collective instructions some threads never reached: {sorted(model.pending)}"
    return steps


def fragment(t: int, i: int, per: int = 2) -> tuple:
    """(row, column) of accumulator value i of warpgroup thread t; with
    `per` = 4, of value i of the 8-bit A fragment of m64nNk32 (four values
    to a register: rows l/4 and l/4 + 8, columns 4 (l % 4) ... + 3, then
    16 columns on)."""
    w, lane = divmod(t, 32)
    return (16 * w + lane // 4 + 8 * ((i // per) % 2),
            4 * per * (i // (2 * per)) + per * (lane % 4) + i % per)


def operand_addresses(desc: int, rows: int, eb: int = 2, trans: bool = False) -> np.ndarray:
    """Byte addresses of the `eb`-byte elements (r, k), r < rows, k < the
    instruction's K, of an operand named by matrix descriptor `desc`
    (K-major, or MN-major when `trans`)."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    assert (desc >> 49) & 7 == 0, "base offset is not modelled"
    mode = (desc >> 62) & 3
    r = np.arange(rows)[:, None]
    k = np.arange(_K[eb])[None, :]
    width = {0: 16, 1: 128, 2: 64, 3: 32}[mode]
    if not trans:
        kb = k * eb
        if mode == 0:
            return start + (r // 8) * sbo + (kb // 16) * lbo + (r % 8) * 16 + kb % 16
        a = start + (r // 8) * sbo + (r % 8) * width + kb
    else:
        rb = r * eb
        if mode == 0:
            return start + (rb // 16) * sbo + (k // 8) * lbo + (k % 8) * 16 + rb % 16
        a = start + (rb // width) * lbo + (k // 8) * sbo + (k % 8) * width + rb % width
    xor_bits = {1: 3, 2: 2, 3: 1}[mode]
    return a ^ (((a >> 7) & ((1 << xor_bits) - 1)) << 4)


@functools.lru_cache(maxsize=None)
def _addresses(desc: int, rows: int, eb: int, trans: bool) -> np.ndarray:
    """operand_addresses, computed once per operand (every thread of a
    warpgroup reads the same ones); read-only, as it is shared."""
    a = operand_addresses(desc, rows, eb, trans)
    a.flags.writeable = False
    return a


@functools.lru_cache(maxsize=None)
def _positions(t: int, count: int) -> tuple:
    """(rows, columns) of accumulator values 0 .. count - 1 of thread t."""
    rows, cols = np.array([fragment(t, i) for i in range(count)]).T
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def _halves(words, dtype: str) -> np.ndarray:
    """32-bit registers -> their two 16-bit values as floats, lower first."""
    bits = np.array([(w >> s) & 0xFFFF for w in words for s in (0, 16)], np.uint16)
    return _from_bits(bits, dtype)


def _minifloat(bits: np.ndarray, exp_bits: int, man_bits: int, ieee_inf: bool) -> np.ndarray:
    """An 8-bit float's value from its sign, exponent and mantissa fields
    (e4m3 has no infinity: only S.1111.111 is NaN; e5m2 follows IEEE)."""
    bits = bits.astype(np.int64)
    sign = np.where(bits >> 7, -1.0, 1.0)
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = bits & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    value = np.where(e == 0, m / (1 << man_bits) * 2.0 ** (1 - bias),
                     (1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
    top = (1 << exp_bits) - 1
    nan = (e == top) & ((m != 0) if ieee_inf else (m == (1 << man_bits) - 1))
    value = np.where(nan, np.nan, np.where(ieee_inf & (e == top) & (m == 0), np.inf, value))
    return sign * value


def _from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if dtype == "e4m3":
        return _minifloat(bits, 4, 3, False)
    if dtype == "e5m2":
        return _minifloat(bits, 5, 2, True)
    if dtype == "s8":
        return bits.astype(np.uint8).view(np.int8).astype(np.float64)
    assert dtype == "u8", dtype
    return bits.astype(np.float64)


def _read(shared, addrs: np.ndarray, dtype: str) -> np.ndarray:
    raw = np.frombuffer(shared, np.uint8)
    bits = np.zeros(addrs.shape, np.uint64)
    for byte in range(_BYTES[dtype]):
        bits |= raw[addrs + byte].astype(np.uint64) << np.uint64(8 * byte)
    return _from_bits(bits, dtype)


def _regs(text: str) -> list:
    return [x.strip() for x in text.strip("{}").split(",")]


class HopperModel:
    """The extension: wgmma.*, stmatrix, setmaxnreg, and every instruction
    `inner` (the TMA and mbarrier model) handles."""

    def __init__(self, inner=None):
        self.inner = inner
        self.pending = {}  # (kind, cta, group, n) -> {tid: operands}
        self.count = {}  # (cta, tid, kind) -> collectives of that kind the thread has reached

    def claims(self, op, ops) -> bool:
        """Whether `op ops` may be one of this model's (ptx_sim.Kernel)."""
        return op.startswith(_OWN) or (self.inner is not None and self.inner.claims(op, ops))

    def __call__(self, op, ops, regs, special, symbols, mem, shared):
        if not op.startswith(_OWN):
            handled = self.inner(op, ops, regs, special, symbols, mem, shared) if self.inner else False
            if handled and op.startswith("mbarrier.try_wait") and not regs[ops[0]]:
                return YIELD
            return handled

        def val(x):
            for table in (regs, special, symbols):
                if x in table:
                    return table[x]
            return int(x, 0)

        if op.startswith("wgmma."):
            if op.startswith("wgmma.mma_async"):
                return self.mma(op, ops, regs, special, val, shared)
            assert op.split(".")[1] in ("fence", "commit_group", "wait_group"), op
            return True
        if op.startswith("stmatrix."):
            return self.stmatrix(op, ops, regs, special, val, shared)
        return True  # setmaxnreg

    # ---- collectives ------------------------------------------------------

    def arrive(self, kind: str, size: int, special, operands):
        """Deposit this thread's operands; the group's dict when the thread
        is the last of its group to arrive, else None."""
        tid = special["%tid.x"]
        cta = (special["%ctaid.x"], special["%ctaid.y"], special["%ctaid.z"])
        n = self.count.get((cta, tid, kind), 0)
        self.count[(cta, tid, kind)] = n + 1
        key = (kind, cta, tid // size, n)
        group = self.pending.setdefault(key, {})
        group[tid % size] = operands
        if len(group) < size:
            return None
        del self.pending[key]
        return group

    # ---- wgmma ------------------------------------------------------------

    def mma(self, op, ops, regs, special, val, shared):
        m = _MMA.match(op)
        assert m, f"wgmma form not modelled: {op}"
        n, k, d_type, a_type, b_type = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4), m.group(5)
        eb = _BYTES[a_type]
        assert _BYTES[b_type] == eb and _K[eb] == k, op
        d = _regs(ops[0])
        assert len(d) == (n // 4 if d_type == "f16" else n // 2), f"{op} with {len(d)} accumulators"
        from_registers = ops[1].startswith("{")
        b_desc, scale_d = val(ops[2]), bool(val(ops[3]))
        imms = [int(x) for x in ops[4:]]
        if d_type == "s32":
            assert imms == [], f"integer wgmma takes no immediates: {imms}"
            trans_a = trans_b = 0
        elif eb == 2:
            assert imms[:2] == [1, 1], f"scale immediates not modelled: {imms}"
            trans_a, trans_b = (0, imms[2]) if from_registers else imms[2:]
        else:
            assert imms == [1, 1], f"{a_type} takes scale-a, scale-b only: {imms}"
            trans_a = trans_b = 0
        B = _read(shared, _addresses(b_desc, n, eb, bool(trans_b)), b_type)
        if not from_registers:
            A = _read(shared, _addresses(val(ops[1]), 64, eb, bool(trans_a)), a_type)
            self._accumulate(regs, special["%tid.x"] % 128, d, A, B, scale_d, d_type)
            return True
        words = [val(x) for x in _regs(ops[1])]
        assert len(words) == 4, f"{op}: A from registers is four 32-bit registers"
        group = self.arrive("wgmma.rs", 128, special, (regs, d, words, B, scale_d))
        if group is not None:
            A = np.zeros((64, k), np.float64)
            for t, (_, _, w, _, _) in group.items():
                if eb == 4:
                    values = _from_bits(np.array(w, np.uint32), a_type)
                elif eb == 2:
                    values = _halves(w, a_type)
                else:  # four bytes to a register, the lowest first
                    values = _from_bits(np.array([(x >> s) & 0xFF for x in w for s in (0, 8, 16, 24)]), a_type)
                for i, x in enumerate(values):
                    A[fragment(t, i, 4 // eb)] = x
            for t, (r, dd, _, BB, s) in group.items():
                self._accumulate(r, t, dd, A, BB, s, d_type)
        return YIELD

    @staticmethod
    def _accumulate(regs, t, d, A, B, scale_d, d_type="f32"):
        if d_type == "f16":
            rows, cols = _positions(t, 2 * len(d))
            acc = (A @ B.T)[rows, cols]
            if scale_d:
                acc = acc + _halves([regs[name] for name in d], "f16")
            bits = acc.astype(np.float16).view(np.uint16).astype(np.uint32)
            for name, lo, hi in zip(d, bits[0::2].tolist(), bits[1::2].tolist()):
                regs[name] = lo | hi << 16
            return
        rows, cols = _positions(t, len(d))
        prod = (A @ B.T)[rows, cols]
        if d_type == "s32":
            acc = prod.astype(np.int64)
            if scale_d:
                acc = acc + np.array([regs[name] for name in d], np.uint32).view(np.int32)
            for name, bits in zip(d, acc.astype(np.int32).view(np.uint32).tolist()):
                regs[name] = bits
            return
        acc = prod.astype(np.float32)
        if scale_d:
            acc = acc + np.array([regs[name] for name in d], np.uint32).view(np.float32)
        for name, bits in zip(d, acc.astype(np.float32).view(np.uint32).tolist()):
            regs[name] = bits

    # ---- stmatrix ---------------------------------------------------------

    def stmatrix(self, op, ops, regs, special, val, shared):
        parts = op.split(".")
        assert parts[3] == "m8n8" and parts[-1] == "b16" and ".trans" not in op, f"form not modelled: {op}"
        num = int(parts[4][1:])
        addr = val(ops[0].strip("[]"))
        words = [val(x) for x in _regs(ops[1])]
        assert len(words) == num
        group = self.arrive("stmatrix", 32, special, (addr, words))
        if group is not None:
            for mat in range(num):
                for row in range(8):
                    base = group[8 * mat + row][0]
                    assert base % 16 == 0, f"stmatrix row address {base} is not 16-byte aligned"
                    for q in range(4):
                        w = group[4 * row + q][1][mat]
                        shared[base + 4 * q: base + 4 * q + 4] = (w & 0xFFFFFFFF).to_bytes(4, "little")
        return YIELD

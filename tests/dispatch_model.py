"""A model of one CTA running lowered tile IR, to check on a CPU what the
dispatch lowerings compute -- warp-collective instructions included, which
the PTX simulator (ptx_sim) does not model: mma.sync, ldmatrix, stmatrix.

It runs the IR after `unroll` (before emit-ptx): every thread executes a
statement before any thread executes the next, a collective instruction
runs once per warp with all 32 lanes' operands, and an `if` runs its branch
for the threads whose condition holds.  Memory is one numpy array per
buffer indexed by *storage* offset -- a layout (swizzle included) places
each element, so a run of consecutive storage elements (a vector access, a
matrix row) is what the hardware would move.  Registers are one array of
storage slots per thread and register buffer.

The instruction semantics below are written from the PTX ISA's fragment
figures, not taken from the lowerings: that is the point of the model.
"""
from __future__ import annotations

import struct

import numpy as np

from tilec.compiler import ir
from tilec.compiler.layout import apply, cosize, row_major, storage_size
from tilec.compiler.layout_ir import to_layout
from tilec.compiler.symbols import analyze_kernel
from tilec.compiler.targets import TARGETS

NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8,
         "i16": np.int16, "u16": np.uint16, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
         "u64": np.uint64, "bf16": np.float32}


def bf16(x) -> float:
    """x rounded to bf16 (to nearest even), as a float."""
    bits = struct.unpack("<I", struct.pack("<f", float(x)))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def round_to(x, dtype: str):
    if dtype == "bf16":
        return bf16(x)
    if dtype in ("f16", "f32", "f64"):
        return float(NUMPY[dtype](x))
    return int(x)


# ---- mma.sync fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 / k8") ----
# groupID = lane >> 2, threadID_in_group = lane % 4


def acc_fragment(lane: int) -> list:
    """(row, col) of c0..c3 / d0..d3."""
    g, t = lane >> 2, lane % 4
    return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def a_fragment(lane: int, k: int) -> list:
    """(row, col) of a0..a7 (k16) or a0..a3 (k8)."""
    g, t = lane >> 2, lane % 4
    regs = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
    if k == 16:
        regs += [(g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9)]
    return regs


def b_fragment(lane: int, k: int) -> list:
    """(row, col) = (k, n) of b0..b3 (k16) or b0..b1 (k8)."""
    g, t = lane >> 2, lane % 4
    regs = [(2 * t, g), (2 * t + 1, g)]
    if k == 16:
        regs += [(2 * t + 8, g), (2 * t + 9, g)]
    return regs


class Pointer:
    def __init__(self, buf, offset):
        self.buf, self.offset = buf, offset


class Model:
    def __init__(self, module: ir.Module, target: str = "sm_90a", cta=(0, 0, 0)):
        self.kernel = module.kernels[0]
        self.cta = tuple(cta)  # the CTA it runs: what cta_id gives, per dim
        self.syms = analyze_kernel(self.kernel, module, TARGETS[target])
        self.threads = self.syms.launch.threads
        self.layouts = {}
        self.memory = {}
        self.registers = {}  # (storage root, thread) -> slots
        self.env = [dict() for _ in range(self.threads)]

    # ---- storage ----------------------------------------------------------

    def layout(self, buf):
        if buf.name not in self.layouts:
            self.layouts[buf.name] = row_major(buf.shape) if buf.layout is None else to_layout(buf.layout, buf.shape)
        return self.layouts[buf.name]

    def where(self, buf, coord) -> int:
        """The storage offset (memory) or slot (registers) of element `coord`."""
        return apply(self.layout(buf), tuple(coord), buf.shape)["m"]

    def array(self, buf, t):
        if buf.scope == "local":
            root = self.syms.buffer(buf.storage)
            key = (root.name, t)
            if key not in self.registers:
                self.registers[key] = np.full(storage_size(self.layout(root)), np.nan, np.float64)
            return self.registers[key]
        if buf.scope == "global":
            return self.memory[buf.name]
        root = self.syms.buffer(buf.storage)
        if root.name not in self.memory:
            self.memory[root.name] = np.full(cosize(self.layout(root)), np.nan, np.float64)
        return self.memory[root.name]

    # ---- running ----------------------------------------------------------

    def run(self, args: dict) -> None:
        """Run the kernel on `args` (numpy arrays for buffers, updated in place)."""
        for p in self.kernel.params:
            if p.shape is not None:
                self.memory[p.name] = args[p.name].astype(np.float64).reshape(-1).copy()
            else:
                for env in self.env:
                    env[p.name] = args[p.name]
        self.block(self.kernel.body, list(range(self.threads)))
        for p in self.kernel.params:
            if p.shape is not None:
                a = args[p.name]
                a[...] = self.memory[p.name].reshape(a.shape).astype(a.dtype)

    def block(self, stmts, active):
        for s in stmts:
            self.stmt(s, active)

    def stmt(self, s, active):
        if isinstance(s, ir.If):
            yes = [t for t in active if self.eval(s.cond, t)]
            self.block(s.then, yes)
            self.block(s.orelse, [t for t in active if t not in yes])
        elif isinstance(s, ir.Assign):
            self.assign(s, active)
        elif isinstance(s, ir.ExprStmt) and isinstance(s.expr, ir.Call):
            self.call(s.expr, active)
        elif isinstance(s, ir.Pass):
            pass
        elif isinstance(s, ir.For) and active:  # a run-time loop: its bounds are the same in every thread
            t0 = active[0]
            for v in range(self.eval(s.start, t0), self.eval(s.stop, t0), self.eval(s.step, t0)):
                for env in self.env:
                    env[s.var] = v
                self.block(s.body, active)
        else:
            raise NotImplementedError(f"the model does not run {type(s).__name__}")

    def assign(self, s, active):
        v = s.value
        if isinstance(v, ir.Call) and v.func in ("lane_id", "thread_id", "warp_id", "warp_id_in_wg",
                                                 "warpgroup_id", "thread_id_in_wg", "cta_id"):
            ids = {"lane_id": lambda t: t % 32, "thread_id": lambda t: t, "warp_id": lambda t: t // 32,
                   "warp_id_in_wg": lambda t: t // 32 % 4, "warpgroup_id": lambda t: t // 128,
                   "thread_id_in_wg": lambda t: t % 128, "cta_id": lambda t: 0}[v.func]
            for t in range(self.threads):
                for d, target in enumerate(s.targets):
                    self.env[t][target.id] = self.cta[d] if v.func == "cta_id" else ids(t)
            return
        if len(s.targets) == 1 and isinstance(s.targets[0], ir.Name) and s.targets[0].id in self.syms.buffers:
            return  # a buffer declaration: storage is made on first use
        (target,) = s.targets
        values = {t: self.eval(v, t) for t in active}
        for t in active:
            if isinstance(target, ir.Name):
                self.env[t][target.id] = values[t]
            else:
                self.store(target, values[t], t)

    def call(self, c, active):
        f = c.func
        if f in ("cuda.cta_sync", "cuda.warp_sync") or f in ("cta_id", "lane_id", "warp_id", "thread_id"):
            return
        if f == "copy_vec":
            dst, src, n = c.args
            for t in active:
                self.copy_vec(dst, src, n.value, t)
            return
        if f in ("ptx.cvt.f16x2.f32", "ptx.cvt.bf16x2.f32"):
            for t in active:
                lo_dst, hi_dst, lo, hi = c.args
                self.store(lo_dst, self.eval(lo, t), t)
                self.store(hi_dst, self.eval(hi, t), t)
            return
        if f in ("ptx.cp_async.commit_group", "ptx.cp_async.wait_group", "ptx.cp_async.wait_all"):
            return  # the model completes each cp.async at once
        if f == "ptx.cp_async":
            for t in active:
                self.cp_async(c, t)
            return
        if f in ("ptx.mma", "ptx.ldmatrix", "ptx.stmatrix"):
            warps = sorted({t // 32 for t in active})
            for w in warps:
                lanes = [w * 32 + l for l in range(32)]
                assert all(t in active for t in lanes), f"{f} with part of warp {w} active"
                getattr(self, f.split(".")[1])(c, lanes)
            return
        raise NotImplementedError(f"the model does not run {f}")

    # ---- elements ---------------------------------------------------------

    def buffer(self, e):
        return self.syms.buffer_of(e)

    def load(self, e, t):
        buf = self.buffer(e)
        coord = [self.eval(i, t) for i in e.indices]
        v = self.array(buf, t)[self.where(buf, coord)]
        assert not np.isnan(v), f"read of an unset element {buf.name}{coord} in thread {t}"
        return float(v)

    def store(self, e, value, t):
        buf = self.buffer(e)
        coord = [self.eval(i, t) for i in e.indices]
        self.array(buf, t)[self.where(buf, coord)] = round_to(value, buf.dtype)

    def copy_vec(self, dst, src, n, t):
        places = []
        for e in (dst, src):
            buf = self.buffer(e)
            off = self.where(buf, [self.eval(i, t) for i in e.indices])
            if buf.scope != "local":
                assert off % n == 0, f"copy_vec of {n} from misaligned storage offset {off} of {buf.name}"
            places.append((self.array(buf, t), off))
        (da, do), (sa, so) = places
        da[do:do + n] = sa[so:so + n]

    def cp_async(self, c, t):
        """`size` bytes from the global pointer to the shared one, the bytes
        past `src_size` zero-filled (the PTX ISA's cp.async)."""
        dst, src = (self.eval(a, t) for a in c.args)
        kw = {k.name: k.value for k in c.kwargs}
        size = kw["size"].value
        eb = np.dtype(NUMPY[src.buf.dtype]).itemsize if src.buf.dtype != "bf16" else 2
        n = size // eb
        keep = n if "src_size" not in kw else self.eval(kw["src_size"], t) // eb
        assert dst.offset % n == 0 and src.offset % n == 0, "misaligned cp.async"
        sa, da = self.array(src.buf, t), self.array(dst.buf, t)
        da[dst.offset:dst.offset + n] = 0
        da[dst.offset:dst.offset + keep] = sa[src.offset:src.offset + keep]

    # ---- expressions ------------------------------------------------------

    def eval(self, e, t):
        if isinstance(e, (ir.Int, ir.Float, ir.Bool)):
            return e.value
        if isinstance(e, ir.Name):
            return self.env[t][e.id]
        if isinstance(e, ir.Binary):
            a, b = self.eval(e.lhs, t), self.eval(e.rhs, t)
            return {
                "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "//": lambda: a // b, "%": lambda: a % b, "&": lambda: a & b, "|": lambda: a | b,
                "^": lambda: a ^ b, "<<": lambda: a << b, ">>": lambda: a >> b,
                "==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
                ">": lambda: a > b, ">=": lambda: a >= b, "and": lambda: a and b, "or": lambda: a or b,
            }[e.op]()
        if isinstance(e, ir.Unary):
            x = self.eval(e.operand, t)
            return {"-": lambda: -x, "not": lambda: not x, "~": lambda: ~x}[e.op]()
        if isinstance(e, ir.Select):
            return self.eval(e.then, t) if self.eval(e.cond, t) else self.eval(e.orelse, t)
        if isinstance(e, ir.Index):
            return self.load(e, t)
        if isinstance(e, ir.Method) and e.name == "ptr_to":
            buf = self.syms.buffer(e.obj.id)
            coord = [self.eval(i, t) for i in e.args[0].items]
            return Pointer(buf, self.where(buf, coord))
        if isinstance(e, ir.Call) and e.func in ("min", "max"):
            return (min if e.func == "min" else max)(self.eval(a, t) for a in e.args)
        if isinstance(e, ir.Call) and e.func == "convert":
            return round_to(self.eval(e.args[0], t), e.args[1].name)
        raise NotImplementedError(f"the model does not evaluate {type(e).__name__}")

    # ---- warp-collective instructions --------------------------------------

    def mma(self, c, lanes):
        shape, d, a, b, cc = c.args
        k = int(shape.value.split("k")[1])
        A = np.zeros((16, k))
        B = np.zeros((k, 8))
        C = np.zeros((16, 8))
        for l, t in enumerate(lanes):
            for (r, col), e in zip(a_fragment(l, k), a.items, strict=True):
                A[r, col] = self.eval(e, t)
            for (r, col), e in zip(b_fragment(l, k), b.items, strict=True):
                B[r, col] = self.eval(e, t)
            for (r, col), e in zip(acc_fragment(l), cc.items, strict=True):
                C[r, col] = self.eval(e, t)
        D = (A @ B + C).astype(np.float32)
        for l, t in enumerate(lanes):
            for (r, col), e in zip(acc_fragment(l), d.items, strict=True):
                self.store(e, float(D[r, col]), t)

    def _rows(self, c, lanes):
        """Per matrix j, the 8 rows (array, storage offset) the lanes point at."""
        regs, addr = c.args
        kw = {k.name: k.value.value for k in c.kwargs}
        num, trans = kw["num"], kw.get("trans", False)
        rows = []
        for j in range(num):
            rows.append([])
            for r in range(8):
                p = self.eval(addr, lanes[8 * j + r])
                assert p.offset % 8 == 0, f"matrix row at storage offset {p.offset} is not 16-byte aligned"
                rows[j].append((self.array(p.buf, None), p.offset))
        return regs.items, num, trans, rows

    def _elements(self, l, trans):
        """(row, col) of the two elements lane l holds of an 8x8 matrix."""
        if trans:
            return [(2 * (l % 4), l // 4), (2 * (l % 4) + 1, l // 4)]
        return [(l // 4, 2 * (l % 4)), (l // 4, 2 * (l % 4) + 1)]

    def ldmatrix(self, c, lanes):
        regs, num, trans, rows = self._rows(c, lanes)
        for l, t in enumerate(lanes):
            for j in range(num):
                for (r, col), e in zip(self._elements(l, trans), regs[2 * j:2 * j + 2]):
                    arr, off = rows[j][r]
                    self.store(e, arr[off + col], t)

    def stmatrix(self, c, lanes):
        regs, num, trans, rows = self._rows(c, lanes)
        for l, t in enumerate(lanes):
            for j in range(num):
                for (r, col), e in zip(self._elements(l, trans), regs[2 * j:2 * j + 2]):
                    arr, off = rows[j][r]
                    arr[off + col] = self.eval(e, t)

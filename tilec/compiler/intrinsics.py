"""The one table of intrinsics: every dotted `ptx.*`/`cuda.*` call the
language knows, with its signature, the targets that have it, and how it is
emitted.

Keeping signature, target support and emission in one row means a dispatch
variant that needs a new instruction adds exactly one row here (next to
nothing else) and the verifier, the symbol analysis and the emitter all see
it.  A row:

    Intrinsic(
        "ptx.mbarrier.init",                        # the dotted name as written
        "addr: shared_addr, count: value(u32)",     # builtins.Signature notation
        "sm_80",                                    # the minimum target
        "mbarrier.init.shared::cta.b64 [{addr}], {count};",
        doc="Initialise an mbarrier with an expected arrival count.",
    )

plus, when needed, `families=("hopper",)` for an arch-specific instruction
(wgmma only exists on sm_90a, tcgen05 only on sm_100a), `result="bool"` for an
intrinsic used as a value (`result="=x"`: of the type of argument `x`), `check=fn(values, span)` to validate its
compile-time arguments beyond what the signature says, and
`ranges={"phase": (0, 1)}` for a run-time operand whose PTX range is
narrower than its type: an immediate outside it (after folding and
unrolling) is a located error at emission, where ptxas would reject it or,
worse, accept a value the hardware misreads; a register operand is the
program's business.

`emit` is either a template or a function.  A template is `str.format`ted
with one field per parameter: runtime parameters become operand text
(registers or immediates, already converted to the declared dtype), list
parameters (`values(T)`, `regs(T)`) print as `{%r1, %r2}` and can be indexed,
compile-time parameters are their Python values, and `{result}` is the
register receiving the value.  Literal braces are doubled.  A function is
called as `fn(e, a)`: `a` has the same fields as attributes, and `e` offers
`e.line(text)` (one PTX line), `e.reg(dtype)` (a fresh virtual register),
`e.label(stem)` (a fresh label), `e.pack_b32(lo, hi)` / `e.unpack_b32(w, lo,
hi)` (two 16-bit registers to and from one b32), `e.wait_loop(poll, done,
addr, phase)` (repeat the PTX line `poll` until it sets predicate `done`: an
mbarrier wait, bounded under --debug-hangs) and `e.target`.  A
`TilecError` it raises is located at the call.

Output operands (`reg`, `regs`) are register-array elements or mutable
scalars; when an element lives in local memory the row writes a temporary
that the emitter stores back after the instruction.
"""
from __future__ import annotations

import functools
from typing import Callable, Dict, Optional, Tuple, Union

from tilec.compiler import records
from tilec.compiler.builtins import Signature
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.mma_desc import BLOCK_SCALED_KINDS, SmemDescriptor, Tcgen05InstrDesc, wgmma_mma_k
from tilec.compiler.targets import TARGETS, Target


class Operands(tuple):
    """The operands of a list parameter; formats as a PTX vector `{%a, %b}`.
    The text and the set of the operands' types are worked out once: the
    emitter hands the same accumulator list to every wgmma of a loop."""

    @functools.cached_property
    def text(self) -> str:
        return "{" + ", ".join([str(x) for x in self]) + "}"

    @functools.cached_property
    def types(self) -> frozenset:
        """The value types of the operands (emitted operands have one)."""
        return frozenset([x.type for x in self])

    def __format__(self, spec: str) -> str:
        return self.text


@records.frozen
class Intrinsic:
    name: str
    signature: Signature = records.field(converter=lambda s: Signature.parse(s) if isinstance(s, str) else s)
    min_target: str  # a name in TARGETS
    emit: Union[str, Callable]
    families: Tuple[str, ...] = ()
    result: Optional[str] = None
    check: Optional[Callable] = None
    doc: str = ""
    ranges: Dict[str, Tuple[int, int]] = records.field(factory=dict)

    def __post_init__(self):
        if self.min_target not in TARGETS:
            raise ValueError(f"{self.name}: min_target must be in {set(TARGETS)}, got {self.min_target!r}")

    def check_range(self, param: str, value: int, span) -> None:
        """A located error for an immediate operand outside its PTX range."""
        lo, hi = self.ranges.get(param, (value, value))
        if not lo <= value <= hi:
            raise TilecError(f"{self.name}: '{param}' must be in [{lo}, {hi}], got {value}", span)

    def result_type(self, fields: Dict) -> str:
        """The value type of a call's result; `result="=x"` means the type
        of the (emitted) argument `x`."""
        if self.result.startswith("="):
            return fields[self.result[1:]].type
        return self.result

    def supported_on(self, target: Target) -> bool:
        if not target.at_least(self.min_target):
            return False
        return not self.families or target.family in self.families

    def requirement(self) -> str:
        """The targets that have it, in words."""
        if self.families:
            names = [t.name for t in TARGETS.values() if t.family in self.families and self.supported_on(t)]
            return " or ".join(names) + " only"
        return f"{self.min_target} or newer"

    def check_target(self, target: Target, span) -> None:
        """A located error when `target` lacks this intrinsic."""
        if not self.supported_on(target):
            raise TilecError(
                f"{self.name} is not available on {target.name} (it needs {self.requirement()})", span
            )


# --------------------------------------------------------------------------
# Emission helpers and argument checks used by rows below
# --------------------------------------------------------------------------


def _try_wait(e, a) -> None:
    """A real loop: try_wait.parity returns false when its time slice expires
    before the phase completes, so the thread retries until it does
    (`e.wait_loop`; bounded under --debug-hangs)."""
    done = e.reg("bool")
    e.wait_loop(f"mbarrier.try_wait.parity.shared::cta.b64 {done}, [{a.addr}], {a.phase};", done, a.addr, a.phase)


def _mbarrier_arrive_cluster(e, a) -> None:
    """`mapa` turns the CTA's own shared address into the address of the
    same offset in CTA `cta` of the cluster, and the arrive goes there.  Its
    semantics are the PTX default (release at CTA scope), as CUTLASS's
    cluster barriers arrive: a release at cluster scope waits for the
    thread's outstanding memory operations at every arrive, which a main
    loop cannot afford, and a consumer releasing a stage has already waited
    for the wgmmas that read it."""
    remote = e.reg("u32")
    e.line(f"mapa.shared::cluster.u32 {remote}, {a.addr}, {a.cta};")
    e.line(f"mbarrier.arrive.shared::cluster.b64 _, [{remote}];")


def _fence_proxy_async(e, a) -> None:
    e.line("fence.proxy.async;" if a.space is None else f"fence.proxy.async.{a.space};")


def _bulk_wait_group(e, a) -> None:
    e.line(f"cp.async.bulk.wait_group{'.read' if a.read else ''} {a.n};")


def _cluster_sync(e, a) -> None:
    e.line("barrier.cluster.arrive.release.aligned;")
    e.line("barrier.cluster.wait.acquire.aligned;")


def _check_range(param: str, lo: int, hi: int, multiple: int = 1):
    def check(values: Dict, span) -> None:
        v = values[param]
        if not (lo <= v <= hi and v % multiple == 0):
            extra = f" and a multiple of {multiple}" if multiple > 1 else ""
            raise TilecError(f"'{param}' must be in [{lo}, {hi}]{extra}, got {v}", span)

    return check


def _check_tmem_cols(values: Dict, span) -> None:
    n = values["n_cols"]
    if n < 32 or n > 512 or n & (n - 1):
        raise TilecError(f"'n_cols' must be a power of two in [32, 512], got {n}", span)


# Shared-memory matrix descriptors (wgmma and tcgen05 alike): the rows of
# both families are built from these, with every bit from
# tilec.compiler.mma_desc.


def _smem_descriptor(family: str):
    """Emission of ptx.<family>.encode_matrix_descriptor: the descriptor's
    constant fields OR-ed with the run-time start address field,
    (addr >> 4) & 0x3FFF (bits 0-13)."""

    def emit(e, a) -> None:
        const = SmemDescriptor(family, 0, a.ldo * 16, a.sdo * 16, a.swizzle).encode()
        start = e.reg("u32")
        e.line(f"shr.u32 {start}, {a.addr}, 4;")
        e.line(f"and.b32 {start}, {start}, 16383;")
        e.line(f"cvt.u64.u32 {a.result}, {start};")
        if const:
            e.line(f"or.b64 {a.result}, {a.result}, 0x{const:016x};")

    return emit


def _check_smem_descriptor(family: str):
    def check(values: Dict, span) -> None:
        try:
            SmemDescriptor(family, 0, values["ldo"] * 16, values["sdo"] * 16, values["swizzle"])
        except TilecError as err:
            raise err.with_span(span)

    return check


# ---- wgmma (Hopper) emission, for gemm_async -> wgmma -------------------
# (rows below, after ptx.wgmma.wait_group; the lowering that writes them is
# tilec/passes/dispatch/gemm_async/wgmma.py)

def _check_wgmma_mma(values: Dict, span) -> None:
    """The ISA's rules for the form the compile-time fields describe
    (`mma_desc.wgmma_mma_k`, the one table of wgmma types and shapes)."""
    try:
        wgmma_mma_k(values["dtype"], values["b_dtype"] or values["dtype"],
                    "i32" if values["dtype"] in ("i8", "u8") else "f32", values["n"],
                    a_major="MN" if values.get("trans_a") else "K", b_major="MN" if values.get("trans_b") else "K")
    except TilecError as err:
        raise err.with_span(span)


def _as_pred(e, p) -> str:
    """`p` as a predicate register: itself when it is one, else `p != 0`
    (wgmma's scale-d, 0: D = A*B, 1: D += A*B; vote's operand)."""
    if p.is_reg:
        return str(p)
    r = e.reg("bool")
    e.line(f"setp.ne.u32 {r}, {p}, 0;")
    return r


def _wgmma_opcode(e, a, trans_a) -> str:
    """`wgmma.mma_async.sync.aligned.m64nNkK.D.A.B d, A, b_desc, scale-d`
    and the immediates the type family takes: scale-a, scale-b (floats)
    and the transpose flags (16-bit types only) [PTX 9.7.15.5.2].  An f16
    accumulator is N/4 packed f16x2 registers, the others N/2 registers."""
    d_dtype = {"f16x2": "f16"}.get(a.d[0].type, a.d[0].type) if a.d else "f32"
    b_dtype = a.b_dtype or a.dtype
    k = wgmma_mma_k(a.dtype, b_dtype, d_dtype, a.n)
    count = a.n // 4 if d_dtype == "f16" else a.n // 2
    if len(a.d) != count or len(a.d.types) > 1:
        kind = "packed f16x2" if d_dtype == "f16" else d_dtype
        raise TilecError(f"wgmma m64n{a.n}k{k} accumulates into {count} {kind} registers per thread, "
                         f"got {len(a.d)}")
    ptx = {t: DTYPES[t].ptx for t in (a.dtype, b_dtype, d_dtype)}
    head = f"wgmma.mma_async.sync.aligned.m64n{a.n}k{k}.{ptx[d_dtype]}.{ptx[a.dtype]}.{ptx[b_dtype]}"
    if a.dtype in ("i8", "u8"):
        imm = ""
    elif a.dtype in ("f16", "bf16"):
        imm = ", 1, 1" + (f", {trans_a}" if trans_a is not None else "") + f", {a.trans_b}"
    else:
        imm = ", 1, 1"
    return head, imm


def _wgmma_mma_async(e, a) -> None:
    head, imm = _wgmma_opcode(e, a, a.trans_a)
    scale = _as_pred(e, a.scale_d)
    e.line(f"{head} {a.d}, {a.a_desc}, {a.b_desc}, {scale}{imm};")


def _wgmma_mma_async_rs(e, a) -> None:
    head, imm = _wgmma_opcode(e, a, None)
    scale = _as_pred(e, a.scale_d)
    e.line(f"{head} {a.d}, {_wgmma_a_words(e, a)}, {a.b_desc}, {scale}{imm};")


def _wgmma_a_words(e, a) -> Operands:
    """The four 32-bit registers of a register A fragment: given already
    (u32/i32, packed before the wgmma.fence by gemm_async), or moved or
    packed here from the thread's 4 f32 (tf32), 8 16-bit or 16 8-bit
    elements."""
    if len(a.a) == 4 and all(x.is_reg and x.type in ("u32", "i32") for x in a.a):
        return Operands(a.a)
    if a.dtype == "tf32":
        if len(a.a) != 4 or not all(x.is_reg and x.type == "f32" for x in a.a):
            raise TilecError("wgmma with tf32 A in registers takes the thread's 4 elements of the 64x8 A tile "
                             "as f32 registers (read as tf32)")
        words = Operands(e.reg("u32") for _ in a.a)
        for w, x in zip(words, a.a):
            e.line(f"mov.b32 {w}, {x};")
        return words
    bits = DTYPES[a.dtype].bits
    per = 32 // bits  # values in one 32-bit register
    held = ("i32", "u32") if a.dtype in ("i8", "u8") else (a.dtype,)
    if len(a.a) != 4 * per or not all(x.is_reg and x.type in held for x in a.a):
        raise TilecError(f"wgmma with A in registers takes the thread's {4 * per} {a.dtype} elements of the "
                         f"64xK A tile")
    if per == 4:
        return Operands(_pack_bytes(e, a.a[i:i + 4]) for i in range(0, 16, 4))
    return Operands(e.pack_b32(lo, hi) for lo, hi in zip(a.a[0::2], a.a[1::2]))


def _pack_bytes(e, four, d=None) -> str:
    """Four 8-bit values as one b32 register, the first in bits 0-7: the low
    byte of each operand (an e4m3/e5m2 16-bit register, or an i8/u8 value
    read as a 32-bit integer).  16-bit registers are paired first (mov.b32
    {lo, hi}), then one prmt picks the low byte of each half.  Written to
    `d` (a fresh register when None), which is returned."""
    if all(x.type in ("e4m3", "e5m2") for x in four):
        lo, hi = e.pack_b32(four[0], four[1]), e.pack_b32(four[2], four[3])
        select = "0x6420"
    else:
        lo, hi = e.reg("u32"), e.reg("u32")
        e.line(f"prmt.b32 {lo}, {four[0]}, {four[1]}, 0x0040;")
        e.line(f"prmt.b32 {hi}, {four[2]}, {four[3]}, 0x0040;")
        select = "0x5410"
    d = d if d is not None else e.reg("u32")
    e.line(f"prmt.b32 {d}, {lo}, {hi}, {select};")
    return d


_HOPPER = ("hopper",)
_BLACKWELL = ("blackwell",)

GRID_DEPENDENCY_WAIT = "ptx.griddepcontrol.wait"
"""A kernel that calls it is launched with programmatic stream serialization
(KernelSymbols.waits_grid_dependency, kernel.json `grid_dependency_wait`)."""

# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

_TABLE = [
    # mbarriers
    Intrinsic("ptx.mbarrier.init", "addr: shared_addr, count: value(u32)", "sm_80",
              "mbarrier.init.shared::cta.b64 [{addr}], {count};", ranges={"count": (1, 2**20 - 1)},
              doc="Initialise an mbarrier (8 bytes of shared memory) expecting `count` arrivals per phase."),
    Intrinsic("ptx.mbarrier.arrive", "addr: shared_addr", "sm_80",
              "mbarrier.arrive.shared::cta.b64 _, [{addr}];",
              doc="Arrive once on an mbarrier."),
    Intrinsic("ptx.mbarrier.arrive.cluster", "addr: shared_addr, cta: value(u32)", "sm_90a",
              _mbarrier_arrive_cluster, ranges={"cta": (0, 15)},
              doc="Arrive once on the mbarrier at the same shared offset as `addr` in CTA `cta` (its rank, "
                  "cta_id_in_cluster) of the cluster: a consumer releasing a stage that a multicast load "
                  "fills in several CTAs."),
    Intrinsic("ptx.mbarrier.arrive.expect_tx", "addr: shared_addr, bytes: value(u32)", "sm_90a",
              "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{addr}], {bytes};", ranges={"bytes": (0, 2**20 - 1)},
              doc="Arrive and announce `bytes` of asynchronous (TMA) transfer the phase waits for."),
    Intrinsic("ptx.mbarrier.try_wait", "addr: shared_addr, phase: value(u32)", "sm_90a", _try_wait,
              ranges={"phase": (0, 1)},
              doc="Block until the mbarrier phase with parity `phase` completes."),
    # fences
    Intrinsic("ptx.fence.proxy_async", "space: str(shared::cta|shared::cluster|global) = None",
              "sm_90a", _fence_proxy_async,
              doc="Order generic-proxy memory accesses against the async proxy (TMA, tcgen05)."),
    Intrinsic("ptx.fence.acq_rel", "scope: str(cta|gpu|sys)", "sm_80", "fence.acq_rel.{scope};",
              doc="A release and acquire fence at `scope`: a thread's writes before it are seen by a thread "
                  "of the scope that observes a later atomic of this thread (and fences after its own "
                  "atomic), as in a split-K tile counter."),
    Intrinsic("ptx.fence.mbarrier_init", "", "sm_90a", "fence.mbarrier_init.release.cluster;",
              doc="Make mbarrier initialisation visible to the cluster and the async proxy."),
    # warp-level
    Intrinsic("ptx.elect_sync", "", "sm_90a", "elect.sync _|{result}, 0xffffffff;", result="bool",
              doc="True in exactly one active lane of the warp."),
    # bulk async copies
    Intrinsic("ptx.cp_async.bulk.commit_group", "", "sm_90a", "cp.async.bulk.commit_group;",
              doc="Close the current group of bulk async copies (TMA stores)."),
    Intrinsic("ptx.cp_async.bulk.wait_group", "n: int, *, read: bool = False", "sm_90a",
              _bulk_wait_group,
              doc="Wait until at most n bulk groups are pending (`read`: only their source reads)."),
    # programmatic dependent launch (docs/python.md, "Programmatic dependent launch")
    Intrinsic(GRID_DEPENDENCY_WAIT, "", "sm_90a", "griddepcontrol.wait;",
              doc="Block until every prerequisite grid (the kernels before this one on the stream that a "
                  "programmatic launch let it overlap) has completed and its memory operations are performed "
                  "and visible to this grid (PTX ISA, griddepcontrol).  Marks the kernel in kernel.json "
                  "(`grid_dependency_wait`), so the runtime launches it with programmatic stream "
                  "serialization: what runs before the wait must read nothing the preceding kernels write "
                  "and write nothing they read.  Without a prerequisite grid in flight it returns at once."),
    Intrinsic("ptx.griddepcontrol.launch_dependents", "", "sm_90a", "griddepcontrol.launch_dependents;",
              doc="Let the next kernel on the stream, when it is launched programmatically, be scheduled once "
                  "every CTA of this grid has executed this or exited (a hint: the first execution per CTA "
                  "counts; it makes none of this grid's writes visible, the dependent's wait does)."),
    # registers
    Intrinsic("ptx.setmaxnreg", "n: int, action: str(inc|dec)", "sm_90a",
              "setmaxnreg.{action}.sync.aligned.u32 {n};", check=_check_range("n", 24, 256, 8),
              doc="Grow or shrink this warpgroup's register budget to n per thread."),
    # tensor memory (Blackwell)
    Intrinsic("ptx.tcgen05.alloc", "addr: shared_addr, *, n_cols: int, cta_group: int(1|2) = 1",
              "sm_100a", "tcgen05.alloc.cta_group::{cta_group}.sync.aligned.shared::cta.b32 [{addr}], {n_cols};",
              families=_BLACKWELL, check=_check_tmem_cols,
              doc="Allocate n_cols tensor-memory columns (warp-wide); the address lands at `addr`."),
    Intrinsic("ptx.tcgen05.dealloc", "taddr: value(u32), *, n_cols: int, cta_group: int(1|2) = 1",
              "sm_100a", "tcgen05.dealloc.cta_group::{cta_group}.sync.aligned.b32 {taddr}, {n_cols};",
              families=_BLACKWELL, check=_check_tmem_cols,
              doc="Free tensor-memory columns allocated by tcgen05.alloc (warp-wide)."),
    Intrinsic("ptx.tcgen05.relinquish_alloc_permit", "*, cta_group: int(1|2) = 1", "sm_100a",
              "tcgen05.relinquish_alloc_permit.cta_group::{cta_group}.sync.aligned;",
              families=_BLACKWELL, doc="Give up the right to allocate more tensor memory."),
    Intrinsic("ptx.tcgen05.commit", "mbar: shared_addr, *, cta_group: int(1|2) = 1", "sm_100a",
              "tcgen05.commit.cta_group::{cta_group}.mbarrier::arrive::one.shared::cluster.b64 [{mbar}];",
              families=_BLACKWELL,
              doc="Arrive on `mbar` once this thread's prior tcgen05 operations complete."),
    Intrinsic("ptx.tcgen05.fence.before_thread_sync", "", "sm_100a", "tcgen05.fence::before_thread_sync;",
              families=_BLACKWELL, doc="Order prior tcgen05 operations before a thread barrier."),
    Intrinsic("ptx.tcgen05.fence.after_thread_sync", "", "sm_100a", "tcgen05.fence::after_thread_sync;",
              families=_BLACKWELL, doc="Order later tcgen05 operations after a thread barrier."),
    Intrinsic("ptx.tcgen05.wait.ld", "", "sm_100a", "tcgen05.wait::ld.sync.aligned;",
              families=_BLACKWELL, doc="Wait for this thread's tcgen05.ld operations."),
    Intrinsic("ptx.tcgen05.wait.st", "", "sm_100a", "tcgen05.wait::st.sync.aligned;",
              families=_BLACKWELL, doc="Wait for this thread's tcgen05.st operations."),
    # warpgroup MMA (Hopper)
    Intrinsic("ptx.wgmma.fence", "", "sm_90a", "wgmma.fence.sync.aligned;", families=_HOPPER,
              doc="Order register accesses before the next wgmma.mma_async."),
    Intrinsic("ptx.wgmma.commit_group", "", "sm_90a", "wgmma.commit_group.sync.aligned;",
              families=_HOPPER, doc="Close the current group of wgmma.mma_async operations."),
    Intrinsic("ptx.wgmma.wait_group", "n: int", "sm_90a", "wgmma.wait_group.sync.aligned {n};",
              families=_HOPPER, check=_check_range("n", 0, 7),
              doc="Wait until at most n wgmma groups are pending."),
    # ---- wgmma (Hopper), rows for gemm_async -> wgmma ----
    Intrinsic("ptx.wgmma.encode_matrix_descriptor",
              "addr: shared_addr, ldo: int, sdo: int, swizzle: int(0|1|2|3)", "sm_90a", _smem_descriptor("wgmma"),
              families=_HOPPER, result="u64", check=_check_smem_descriptor("wgmma"),
              doc="The 64-bit wgmma matrix descriptor of the shared tile at `addr`: leading and stride "
                  "byte offsets `ldo`, `sdo` in 16-byte units, `swizzle` a SWIZZLE_* mode "
                  "(tilec.compiler.mma_desc).  Adding k to it advances the start address by 16k bytes."),
    Intrinsic("ptx.wgmma.mma_async",
              "d: regs(f32|i32|f16x2), a_desc: value(u64), b_desc: value(u64), scale_d: pred, *, n: int, "
              "dtype: dtype, b_dtype: dtype = None, trans_a: int(0|1) = 0, trans_b: int(0|1) = 0",
              "sm_90a", _wgmma_mma_async, families=_HOPPER, check=_check_wgmma_mma,
              doc="wgmma.mma_async m64nNkK with accumulators `d` (the thread's N/2 f32 registers, i32 for "
                  "i8/u8 inputs, in fragment order; or, for an f16 accumulator of f16 or e4m3/e5m2 inputs, "
                  "its N/2 f16 elements, which must be the halves of N/4 packed registers in order) and A, B "
                  "in shared memory; D = A*B + (scale_d ? D : 0).  "
                  "`dtype` is A's type, `b_dtype` B's (default: A's): f16, bf16 (K 16), tf32 (K 8), "
                  "e4m3/e5m2 in any mix (K 32), i8/u8 in any mix (K 32).  trans_a/trans_b select "
                  "MN-major operands (f16 and bf16 only)."),
    Intrinsic("ptx.wgmma.mma_async.rs",
              "d: regs(f32|i32|f16x2), a: values(any), b_desc: value(u64), scale_d: pred, *, n: int, "
              "dtype: dtype, b_dtype: dtype = None, trans_b: int(0|1) = 0",
              "sm_90a", _wgmma_mma_async_rs, families=_HOPPER, check=_check_wgmma_mma,
              doc="wgmma.mma_async m64nNkK with A from registers: `a` is the thread's elements of the 64xK "
                  "A tile in fragment order, packed into four 32-bit registers (8 16-bit elements in pairs, "
                  "or 16 e4m3/e5m2/i8/u8 in fours), or those four registers packed already "
                  "(ptx.mov.b32.pack, ptx.mov.b32.pack4); for tf32, four f32 registers (the tensor core "
                  "reads their top 19 bits)."),
    # thread barriers
    Intrinsic("cuda.cta_sync", "", "sm_80", "bar.sync 0;", doc="Barrier over the whole CTA."),
    Intrinsic("cuda.warpgroup_sync", "barrier_id: int", "sm_80", "bar.sync {barrier_id}, 128;",
              check=_check_range("barrier_id", 1, 15),
              doc="Barrier over the 128 threads of this warpgroup on named barrier 1-15 "
                  "(0 is cta_sync's); warpgroups synchronising independently use distinct ids."),
    Intrinsic("cuda.warp_sync", "", "sm_80", "bar.warp.sync 0xffffffff;", doc="Barrier over the warp."),
    Intrinsic("cuda.cluster_sync", "", "sm_90a", _cluster_sync,
              doc="Barrier over every thread of every CTA of the cluster (release/acquire: shared memory "
                  "written before it by one CTA is visible after it to the others)."),
]

# ---- named barriers over any set of warps --------------------------------
# Warp-specialized kernels order groups of warps against each other without
# stopping the rest of the CTA: FlashAttention-3's ping-pong has consumer
# warpgroup 0 wait (sync) on a barrier that warpgroup 1 only signals (arrive)
# after issuing its GEMMs, and the other way round.  A barrier completes when
# `threads` threads (whole warps) have reached it, counting both kinds.


def _check_named_barrier(values: Dict, span) -> None:
    _check_range("barrier_id", 0, 15)(values, span)
    _check_range("threads", 32, 1024, 32)(values, span)


_TABLE += [
    Intrinsic("cuda.named_barrier_sync", "barrier_id: int, threads: int", "sm_80",
              "bar.sync {barrier_id}, {threads};", check=_check_named_barrier,
              doc="Wait on named barrier `barrier_id` (0-15) until `threads` threads (a multiple of 32, "
                  "whole warps) have arrived at it, this warp included."),
    Intrinsic("cuda.named_barrier_arrive", "barrier_id: int, threads: int", "sm_80",
              "bar.arrive {barrier_id}, {threads};", check=_check_named_barrier,
              doc="Arrive at named barrier `barrier_id` without waiting: counts this warp's threads towards "
                  "the `threads` that complete it (the producer side of a named_barrier_sync)."),
]

# ---- warp MMA, matrix loads/stores, paired conversions -------------------
# Rows for gemm -> mma_sync, copy -> ldstmatrix and cast -> cvt (the
# lowerings are tilec/passes/dispatch/{gemm/mma_sync,copy/ldstmatrix,cast/cvt}.py).
# Register arrays hold one 16-bit element per register; these instructions
# take them two to a b32, the lower-addressed (lower-index) one in bits 0-15.

_MMA_COUNTS = {"m16n8k16": (4, 8, 4), "m16n8k8": (4, 4, 2)}
"""Per lane: f32 accumulators, A elements, B elements."""


def _check_half(values: Dict, span) -> None:
    if values["dtype"] not in ("f16", "bf16"):
        raise TilecError(f"this instruction takes f16 or bf16 elements, got {values['dtype']}", span)


def _halves(what: str, regs, dtype: str) -> None:
    for r in regs:
        if r.type != dtype or not r.is_reg:
            raise TilecError(f"{what} must be {dtype} registers, got a {r.type}" + ("" if r.is_reg else " literal"))


def _pairs(e, regs) -> Operands:
    return Operands(e.pack_b32(lo, hi) for lo, hi in zip(regs[0::2], regs[1::2]))


def _mma_sync(e, a) -> None:
    nd, na, nb = _MMA_COUNTS[a.shape]
    if (len(a.d), len(a.a), len(a.b), len(a.c)) != (nd, na, nb, nd):
        raise TilecError(
            f"mma.sync {a.shape} takes {nd} f32 accumulators, {na} A and {nb} B elements and {nd} "
            f"C values per lane, got {len(a.d)}, {len(a.a)}, {len(a.b)} and {len(a.c)}"
        )
    _halves("mma.sync operands A and B", tuple(a.a) + tuple(a.b), a.dtype)
    t = a.dtype
    e.line(f"mma.sync.aligned.{a.shape}.row.col.f32.{t}.{t}.f32 {a.d}, {_pairs(e, a.a)}, {_pairs(e, a.b)}, {a.c};")


def _matrix_count(what: str, n: int, num: int) -> None:
    if n != 2 * num:
        raise TilecError(f"{what} .x{num} moves {2 * num} 16-bit elements per lane, got {n}")


def _ldmatrix(e, a) -> None:
    _matrix_count("ldmatrix", len(a.dst), a.num)
    words = Operands(e.reg("u32") for _ in range(a.num))
    trans = ".trans" if a.trans else ""
    e.line(f"ldmatrix.sync.aligned.m8n8.x{a.num}{trans}.shared.b16 {words}, [{a.addr}];")
    for w, lo, hi in zip(words, a.dst[0::2], a.dst[1::2]):
        e.unpack_b32(w, lo, hi)


def _stmatrix(e, a) -> None:
    _matrix_count("stmatrix", len(a.src), a.num)
    _halves("stmatrix sources", a.src, "bf16" if a.src[0].type == "bf16" else "f16")
    trans = ".trans" if a.trans else ""
    e.line(f"stmatrix.sync.aligned.m8n8.x{a.num}{trans}.shared.b16 [{a.addr}], {_pairs(e, a.src)};")


def _cvt_pair(half: str):
    def emit(e, a) -> None:
        w = e.reg("u32")
        e.line(f"cvt.rn.{half}x2.f32 {w}, {a.hi}, {a.lo};")
        e.unpack_b32(w, a.lo_dst, a.hi_dst)

    return emit


_TABLE += [
    Intrinsic("ptx.mma",
              "shape: str(m16n8k16|m16n8k8), d: regs(f32), a: values(any), b: values(any), c: values(f32), "
              "*, dtype: dtype",
              "sm_80", _mma_sync, check=_check_half,
              doc="Warp-wide mma.sync.aligned.<shape>.row.col.f32.<dtype>.<dtype>.f32: d = a.b + c.  Per "
                  "lane, in the PTX ISA's fragment order: 4 f32 accumulators d and c (d and c may be the "
                  "same registers), a's 8 (k16) or 4 (k8) elements and b's 4 or 2, packed in pairs."),
    Intrinsic("ptx.ldmatrix", "dst: regs(f16|bf16), addr: shared_addr, *, num: int(1|2|4), trans: bool = False",
              "sm_80", _ldmatrix,
              doc="Warp-wide ldmatrix.m8n8.x<num>[.trans].b16: lane l gives the address of row l % 8 of "
                  "matrix l // 8 (16 contiguous bytes); each lane receives 2 elements of each matrix, "
                  "(row l // 4, columns 2 (l % 4) + 0, 1), or with trans (rows 2 (l % 4) + 0, 1, column l // 4)."),
    Intrinsic("ptx.stmatrix", "src: values(any), addr: shared_addr, *, num: int(1|2|4), trans: bool = False",
              "sm_90a", _stmatrix,
              doc="Warp-wide stmatrix.m8n8.x<num>[.trans].b16, the inverse of ptx.ldmatrix: `src` are "
                  "2 * num f16 or bf16 elements per lane."),
    Intrinsic("ptx.cvt.f16x2.f32", "lo_dst: reg(f16), hi_dst: reg(f16), lo: value(f32), hi: value(f32)",
              "sm_80", _cvt_pair("f16"),
              doc="Two f32 rounded to f16 (to nearest even) by one cvt.rn.f16x2.f32."),
    Intrinsic("ptx.cvt.bf16x2.f32", "lo_dst: reg(bf16), hi_dst: reg(bf16), lo: value(f32), hi: value(f32)",
              "sm_80", _cvt_pair("bf16"),
              doc="Two f32 rounded to bf16 (to nearest even) by one cvt.rn.bf16x2.f32."),
]

# ---- TMA bulk tensor copies, for copy_async -> tma ----------------------
# (the lowering that writes them is tilec/passes/dispatch/copy_async/tma.py).
# One thread issues each; the tensor map is a kernel parameter read through
# its generic address, coordinates are in the map's elements, innermost
# first.  Qualifier order is the PTX ISA's: completion mechanism, then
# .multicast::cluster, .cta_group::N, .L2::cache_hint; the multicast CTA
# mask and the cache policy follow the mbarrier operand in that order.

_TMA_MAX_RANK = 5


def _tma_rank(coords) -> int:
    if not 1 <= len(coords) <= _TMA_MAX_RANK:
        raise TilecError(f"a TMA copy takes 1 to {_TMA_MAX_RANK} coordinates, got {len(coords)}")
    return len(coords)


def _cta_mask(e, mask) -> str:
    """The multicast mask as the 16-bit operand PTX requires: an immediate
    as is, a register narrowed into a .b16 register (the class f16 values
    use; cvt.u16 may write any 16-bit register)."""
    if not mask.is_reg:
        if not 0 <= int(mask.text) <= 0xFFFF:
            raise TilecError(f"the multicast CTA mask has 16 bits (one per CTA of the cluster), got {mask.text}")
        return mask.text
    narrow = e.reg("f16")
    e.line(f"cvt.u16.u32 {narrow}, {mask};")
    return narrow


def _tma_load(e, a) -> None:
    rank = _tma_rank(a.coords)
    qualifiers, extra = "", []
    if a.multicast is not None:
        qualifiers += ".multicast::cluster"
        extra.append(_cta_mask(e, a.multicast))
    if a.cta_group is not None:
        if e.target.family != "blackwell":
            raise TilecError(f"cta_group on a TMA load needs sm_100a (target is {e.target.name})")
        qualifiers += f".cta_group::{a.cta_group}"
    if a.cache_hint is not None:
        qualifiers += ".L2::cache_hint"
        extra.append(str(a.cache_hint))
    tail = "".join(f", {x}" for x in extra)
    e.line(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes{qualifiers} "
           f"[{a.dst}], [{a.tmap}, {a.coords}], [{a.mbar}]{tail};")


def _tma_store(e, a) -> None:
    rank = _tma_rank(a.coords)
    if a.reduce is None:
        head = f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"
    else:
        head = f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{a.reduce}.tile.bulk_group"
    hint = ".L2::cache_hint" if a.cache_hint is not None else ""
    tail = f", {a.cache_hint}" if a.cache_hint is not None else ""
    e.line(f"{head}{hint} [{a.tmap}, {a.coords}], [{a.src}]{tail};")


_TABLE += [
    Intrinsic("ptx.cp_async.bulk.tensor.g2s",
              "dst: shared_addr, mbar: shared_addr, tmap: generic_addr, coords: values(i32), *, "
              "cta_group: int(1|2) = None, multicast: value(u32) = None, cache_hint: value(u64) = None",
              "sm_90a", _tma_load,
              doc="One TMA load: the box of tensor map `tmap` at `coords` (innermost first) into shared "
                  "memory at `dst`, completing `mbar`'s transaction bytes.  `multicast`: a 16-bit mask of "
                  "the cluster's CTAs that receive the box (each at the same offset); `cta_group` "
                  "(sm_100a): 2 lets the mbarrier be in the peer CTA of the pair; `cache_hint`: a 64-bit "
                  "L2 cache policy."),
    Intrinsic("ptx.cp_async.bulk.tensor.s2g",
              "src: shared_addr, tmap: generic_addr, coords: values(i32), *, reduce: str(add) = None, "
              "cache_hint: value(u64) = None",
              "sm_90a", _tma_store,
              doc="One TMA store: shared memory at `src` into the box of tensor map `tmap` at `coords`, in "
                  "the current bulk group (close it with ptx.cp_async.bulk.commit_group, wait with "
                  "wait_group).  `reduce=\"add\"` adds into global memory instead of overwriting it."),
]

# ---- tcgen05 (Blackwell): gemm_async -> tcgen05, copy_async -> tcgen05_cp / tcgen05_ld
# (the lowerings that write these rows are tilec/passes/dispatch/gemm_async/
# tcgen05.py and copy_async/tcgen05_{cp,ld}.py).  One thread issues
# tcgen05.mma and tcgen05.cp; tcgen05.ld is warp-collective.  All three run
# asynchronously: mma and cp complete through ptx.tcgen05.commit on an
# mbarrier, ld through ptx.tcgen05.wait.ld.  A tensor-memory address is a
# u32, lane << 16 | 32-bit column; a shared operand is a 64-bit matrix
# descriptor.  Every descriptor bit comes from tilec.compiler.mma_desc, so
# the instruction descriptor is packed from the call's keywords at compile
# time and checked there, not trusted as a number.


def _tcgen05_idesc(v: Dict) -> Tcgen05InstrDesc:
    """The instruction descriptor the keywords of a ptx.tcgen05.mma or
    ptx.tcgen05.mma.block_scale call describe (a TilecError naming the
    violated rule when there is none)."""
    scaled = v["kind"] in BLOCK_SCALED_KINDS
    return Tcgen05InstrDesc(
        v["kind"], v["a_dtype"], v["b_dtype"], "f32" if scaled else v["d_dtype"], v["m"], v["n"],
        a_major=v["a_major"], b_major=v["b_major"], cta_group=v["cta_group"],
        scale_dtype=v["scale_dtype"] if scaled else None,
        sfa_id=v["sfa_id"] if scaled else 0, sfb_id=v["sfb_id"] if scaled else 0,
    )


def _check_tcgen05_mma(values: Dict, span) -> None:
    try:
        _tcgen05_idesc(values)
    except TilecError as err:
        raise err.with_span(span)


def _tcgen05_a(a) -> str:
    """Operand A: a shared-memory matrix descriptor (u64) or, in brackets, a
    tensor-memory address (u32), which the hardware reads K-major only."""
    if a.a.type == "u64":
        return str(a.a)
    if a.a.type == "u32":
        if a.a_major != "K":
            raise TilecError("tcgen05.mma reads A from tensor memory K-major only (a_major=\"K\")")
        return f"[{a.a}]"
    raise TilecError(f"tcgen05.mma's A is a u64 shared-memory matrix descriptor or a u32 tensor-memory "
                     f"address, got a {a.a.type}")


def _tcgen05_mma(e, a) -> None:
    idesc = _tcgen05_idesc(vars(a)).encode()
    e.line(f"tcgen05.mma.cta_group::{a.cta_group}.kind::{a.kind} [{a.d}], {_tcgen05_a(a)}, {a.b_desc}, "
           f"0x{idesc:08x}, {a.enable_input_d};")


def _tcgen05_mma_block_scale(e, a) -> None:
    idesc = _tcgen05_idesc(vars(a)).encode()
    e.line(f"tcgen05.mma.cta_group::{a.cta_group}.kind::{a.kind}.block_scale [{a.d}], {_tcgen05_a(a)}, "
           f"{a.b_desc}, 0x{idesc:08x}, [{a.sfa}], [{a.sfb}], {a.enable_input_d};")


_TCGEN05_CP_MULTICAST = {
    "128x256b": (None,),
    "4x256b": (None,),
    "128x128b": (None,),
    "64x128b": ("warpx2::02_13", "warpx2::01_23"),
    "32x128b": ("warpx4",),
}
"""The multicast each tcgen05.cp shape takes (None: none) [PTX 9.7.16.8.x]."""


def _check_tcgen05_cp(values: Dict, span) -> None:
    allowed = _TCGEN05_CP_MULTICAST[values["shape"]]
    if values["multicast"] not in allowed:
        want = " or ".join(f'multicast="{m}"' for m in allowed if m) or "no multicast"
        raise TilecError(f"tcgen05.cp.{values['shape']} takes {want}, got {values['multicast']}", span)


def _tcgen05_cp(e, a) -> None:
    multicast = f".{a.multicast}" if a.multicast else ""
    e.line(f"tcgen05.cp.cta_group::{a.cta_group}.{a.shape}{multicast} [{a.taddr}], {a.desc};")


TCGEN05_LD_DTYPES = ("f32", "i32", "u32", "f16", "bf16", "i16", "u16", "i8", "u8")
"""The element types tcgen05.ld moves into registers: scalars of 8, 16 or 32 bits."""


def _check_tcgen05_ld(values: Dict, span) -> None:
    if values["dtype"] not in TCGEN05_LD_DTYPES:
        raise TilecError(f"tcgen05.ld reads {', '.join(TCGEN05_LD_DTYPES)} elements, got {values['dtype']}", span)


def _tcgen05_ld(e, a) -> None:
    """32 lanes x num 32-bit columns: lane l of the warp's quarter into
    thread l's registers.  Narrower elements are packed in a column, lowest
    bits first; they are loaded into words, waited for (the load is
    asynchronous) and unpacked, so `dst` holds one element per register."""
    d = DTYPES[a.dtype]
    per = 32 // d.bits
    if len(a.dst) != a.num * per:
        raise TilecError(f"tcgen05.ld .x{a.num} of {a.dtype} fills {a.num * per} registers per thread, got {len(a.dst)}")
    want = (a.dtype,) if d.is_float else ("i32", "u32")
    for r in a.dst:
        if r.type not in want:
            raise TilecError(f"tcgen05.ld of {a.dtype} writes {' or '.join(want)} registers, got a {r.type}")
    op = f"tcgen05.ld.sync.aligned.32x32b.x{a.num}.b32"
    if per == 1:
        if any(r.temp for r in a.dst):
            raise TilecError("tcgen05.ld writes its registers asynchronously: its destination must be "
                             "register-array elements indexed by constants, not local memory")
        e.line(f"{op} {a.dst}, [{a.taddr}];")
        return
    words = Operands(e.reg("u32") for _ in range(a.num))
    e.line(f"{op} {words}, [{a.taddr}];")
    e.line("tcgen05.wait::ld.sync.aligned;")
    for w, i in zip(words, range(0, len(a.dst), per)):
        part = a.dst[i:i + per]
        if d.is_float:
            e.unpack_b32(w, part[0], part[1])
            continue
        for j, r in enumerate(part):
            e.line(f"bfe.{'s' if d.is_signed else 'u'}32 {r}, {w}, {j * d.bits}, {d.bits};")


_TCGEN05_MMA_SHAPE = (
    "kind: str({kinds}), a_dtype: dtype, b_dtype: dtype, {d}m: int, n: int, "
    'a_major: str(K|MN) = "K", b_major: str(K|MN) = "K", {scale}cta_group: int(1|2) = 1'
)

_TABLE += [
    Intrinsic("ptx.tcgen05.encode_matrix_descriptor",
              "addr: shared_addr, ldo: int, sdo: int, swizzle: int(0|1|2|3)", "sm_100a",
              _smem_descriptor("tcgen05"), families=_BLACKWELL, result="u64",
              check=_check_smem_descriptor("tcgen05"),
              doc="The 64-bit tcgen05 shared-memory matrix descriptor of the tile at `addr`: leading and "
                  "stride byte offsets `ldo`, `sdo` in 16-byte units, `swizzle` a SWIZZLE_* mode.  Adding "
                  "k to it advances the start address by 16k bytes (the seeds' smem_desc_add_16B_offset)."),
    Intrinsic("ptx.tcgen05.mma",
              "d: value(u32), a: value(any), b_desc: value(u64), enable_input_d: pred, *, "
              + _TCGEN05_MMA_SHAPE.format(kinds="f16|tf32|f8f6f4|i8", d='d_dtype: dtype = "f32", ', scale=""),
              "sm_100a", _tcgen05_mma, families=_BLACKWELL, check=_check_tcgen05_mma,
              doc="tcgen05.mma.cta_group::N.kind::K [d], a, b_desc, idesc, enable_input_d: D (tensor memory "
                  "at `d`) = A * B + (enable_input_d ? D : 0).  A is a shared matrix descriptor (u64) or a "
                  "tensor-memory address (u32), B a descriptor.  The instruction descriptor is packed from "
                  "the keywords: M x N (for cta_group 2 the pair's M), the A/B/D types, and each operand's "
                  "major (\"MN\": transposed).  One thread issues it; ptx.tcgen05.commit completes it."),
    Intrinsic("ptx.tcgen05.mma.block_scale",
              "d: value(u32), a: value(any), b_desc: value(u64), sfa: value(u32), sfb: value(u32), "
              "enable_input_d: pred, *, "
              + _TCGEN05_MMA_SHAPE.format(kinds="mxf8f6f4|mxf4", d="",
                                          scale='scale_dtype: dtype = "ue8m0", sfa_id: int = 0, sfb_id: int = 0, '),
              "sm_100a", _tcgen05_mma_block_scale, families=_BLACKWELL, check=_check_tcgen05_mma,
              doc="tcgen05.mma.cta_group::N.kind::K.block_scale [d], a, b_desc, idesc, [sfa], [sfb], "
                  "enable_input_d: (A * SFA) (B * SFB) accumulated in f32, with the scale factors in tensor "
                  "memory at `sfa`, `sfb` (ue8m0, one per 32 K: kind::mxf8f6f4 reads one per row and "
                  "instruction (scale_vec::1X), kind::mxf4 two (scale_vec::2X)).  `sfa_id`/`sfb_id` pick the "
                  "byte of the 32-bit column the first scale factor is in."),
    Intrinsic("ptx.tcgen05.cp",
              "taddr: value(u32), desc: value(u64), *, shape: str(128x256b|4x256b|128x128b|64x128b|32x128b), "
              "multicast: str(warpx2::02_13|warpx2::01_23|warpx4) = None, cta_group: int(1|2) = 1",
              "sm_100a", _tcgen05_cp, families=_BLACKWELL, check=_check_tcgen05_cp,
              doc="tcgen05.cp: the shared-memory matrix `desc` names into tensor memory at `taddr`, "
                  "`shape` lanes x bits (32x128b: 32 rows of 16 bytes, which multicast=\"warpx4\" writes "
                  "into the same 32 lanes of all four warps' quarters).  One thread issues it; "
                  "ptx.tcgen05.commit completes it."),
    Intrinsic("ptx.tcgen05.ld",
              "dst: regs(f32|i32|u32|f16|bf16), taddr: value(u32), *, num: int(1|2|4|8|16|32|64|128), "
              "dtype: dtype",
              "sm_100a", _tcgen05_ld, families=_BLACKWELL, check=_check_tcgen05_ld,
              doc="Warp-wide tcgen05.ld.sync.aligned.32x32b.x<num>.b32: lane l of the warp reads tensor-memory "
                  "lane (taddr's lane + l), `num` 32-bit columns from taddr's column, into its registers "
                  "`dst` in column order, one `dtype` element per register (32 / bits of them per column, "
                  "lowest bits first).  32-bit elements arrive asynchronously: wait with "
                  "ptx.tcgen05.wait.ld before reading them; narrower ones are waited for and unpacked here."),
]

# ---- two 16-bit values in one 32-bit register -----------------------------


def _mov_pack(e, a) -> None:
    for x in (a.lo, a.hi):
        if not x.is_reg or DTYPES[x.type].bits != 16:
            raise TilecError(f"ptx.mov.b32.pack packs two 16-bit registers, got a {x.type}"
                             + ("" if x.is_reg else " literal"))
    e.line(f"mov.b32 {a.result}, {{{a.lo}, {a.hi}}};")


def _mov_pack4(e, a) -> None:
    four = (a.b0, a.b1, a.b2, a.b3)
    types = {x.type for x in four}
    if not all(x.is_reg for x in four) or not (types <= {"i32", "u32"} or types in ({"e4m3"}, {"e5m2"})):
        raise TilecError("ptx.mov.b32.pack4 packs four 8-bit values: e4m3 or e5m2 registers of one type, or "
                         f"i32/u32 registers (i8/u8 values), got {', '.join(x.type for x in four)}")
    _pack_bytes(e, four, a.result)


_TABLE += [
    Intrinsic("ptx.mov.b32.pack", "lo: value(any), hi: value(any)", "sm_80", _mov_pack, result="u32",
              doc="Two 16-bit registers (f16, bf16, i16, u16) as one 32-bit value, `lo` in bits 0-15: "
                  "mov.b32 d, {lo, hi}; the form in which instructions take 16-bit pairs (wgmma's A "
                  "from registers)."),
    Intrinsic("ptx.mov.b32.pack4", "b0: value(any), b1: value(any), b2: value(any), b3: value(any)", "sm_80",
              _mov_pack4, result="u32",
              doc="Four 8-bit values as one 32-bit value, `b0` in bits 0-7: the low byte of each operand "
                  "(e4m3/e5m2 registers, or i8/u8 values read as i32/u32), by prmt; the form in which wgmma "
                  "takes an 8-bit A from registers."),
]

# ---- warp collectives and atomics ------------------------------------------
# Shuffles, reductions, votes and matches are warp-collective over the lanes
# of `mask` (every lane of the warp by default); each lane in the mask must
# execute the same call.  A shuffle or redux returns the type of its value;
# 64-bit values shuffle as two 32-bit halves and 16-bit ones in the low half
# of a word.  Atomics take the address of a shared or global element
# (`b.ptr_to([..])`) and operate on the type of their value, returning the
# old contents (`atom`) or nothing (`red`).

_FULL_MASK = "mask: value(u32) = 0xFFFFFFFF"
_VALUE_BITS = {"f16": 16, "bf16": 16, "i32": 32, "u32": 32, "f32": 32, "i64": 64, "u64": 64, "f64": 64}


def _in_reg(e, x, t: str) -> str:
    """An operand as a register (PTX takes only registers in some places)."""
    if x.is_reg:
        return str(x)
    r = e.reg(t)
    e.line(f"mov.b{_VALUE_BITS[t]} {r}, {x};")
    return r


def _shfl(mode: str):
    def emit(e, a) -> None:
        t = a.x.type
        if t not in _VALUE_BITS:
            raise TilecError(f"shfl.sync moves f16, bf16 and 32- or 64-bit values, got a {t}")
        c = ((32 - a.width) << 8) | (0 if mode == "up" else 31)
        tail = f"{a.lane}, {c}, {a.mask};"
        x = _in_reg(e, a.x, t)
        bits = _VALUE_BITS[t]
        if bits == 32:
            e.line(f"shfl.sync.{mode}.b32 {a.result}, {x}, {tail}")
            return
        if bits == 16:
            w, got, rest = e.reg("u32"), e.reg("u32"), e.reg(t)
            e.line(f"mov.b32 {w}, {{{x}, {x}}};")
            e.line(f"shfl.sync.{mode}.b32 {got}, {w}, {tail}")
            e.unpack_b32(got, a.result, rest)
            return
        lo, hi, lo2, hi2 = (e.reg("u32") for _ in range(4))
        e.line(f"mov.b64 {{{lo}, {hi}}}, {x};")
        e.line(f"shfl.sync.{mode}.b32 {lo2}, {lo}, {tail}")
        e.line(f"shfl.sync.{mode}.b32 {hi2}, {hi}, {tail}")
        e.line(f"mov.b64 {a.result}, {{{lo2}, {hi2}}};")

    return emit


def _redux(e, a) -> None:
    t = a.x.type
    if t == "f32":
        if a.op not in ("min", "max"):
            raise TilecError(f"redux.sync on f32 does min and max only, got '{a.op}'")
        if e.target.family != "blackwell":
            raise TilecError(f"redux.sync on f32 needs sm_100a (target is {e.target.name})")
        suffix = "f32"
    elif t in ("i32", "u32"):
        suffix = "b32" if a.op in ("and", "or", "xor") else ("s32" if t == "i32" else "u32")
    else:
        raise TilecError(f"redux.sync reduces i32 or u32 (f32 min/max on sm_100a), got a {t}")
    e.line(f"redux.sync.{a.op}.{suffix} {a.result}, {_in_reg(e, a.x, t)}, {a.mask};")


def _vote(mode: str):
    def emit(e, a) -> None:
        kind = "b32" if mode == "ballot" else "pred"
        e.line(f"vote.sync.{mode}.{kind} {a.result}, {_as_pred(e, a.pred)}, {a.mask};")

    return emit


def _match(mode: str):
    def emit(e, a) -> None:
        t = a.x.type
        if _VALUE_BITS.get(t) not in (32, 64):
            raise TilecError(f"match.sync compares 32- or 64-bit values, got a {t}")
        d = f"{a.result}|{e.reg('bool')}" if mode == "all" else str(a.result)
        e.line(f"match.{mode}.sync.b{_VALUE_BITS[t]} {d}, {_in_reg(e, a.x, t)}, {a.mask};")

    return emit


_ATOM_TYPES = {
    "add": {"i32": "s32", "u32": "u32", "u64": "u64", "i64": "u64", "f32": "f32", "f64": "f64",
            "f16": "noftz.f16", "bf16": "noftz.bf16"},
    "min": {"i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64"},
    "max": {"i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64"},
    "exch": {"i32": "b32", "u32": "b32", "f32": "b32", "i64": "b64", "u64": "b64", "f64": "b64"},
    "cas": {"i32": "b32", "u32": "b32", "f32": "b32", "i64": "b64", "u64": "b64", "f64": "b64"},
}
"""The PTX type of atom/red.<op> for each value type (i64 adds as u64: the same bits)."""


def _atom_head(e, a, op: str) -> str:
    """`.space.op.type` of an atom/red on the value `a.value`."""
    t = a.value.type
    space = {"shared_ptr": ".shared", "global_ptr": ".global"}[a.addr.type]
    packed = getattr(a, "packed", None)
    if packed is not None:
        if t not in ("u32", "i32"):
            raise TilecError(f"a packed {packed} operand is a u32 holding two halves, got a {t}")
        ptx = f"noftz.{packed}"
    elif t in _ATOM_TYPES[op]:
        ptx = _ATOM_TYPES[op][t]
    else:
        raise TilecError(f"atom/red .{op} takes {', '.join(_ATOM_TYPES[op])} values, got a {t}")
    if "bf16" in ptx and not e.target.at_least("sm_90a"):
        raise TilecError(f"atomic .{op} on {packed or t} needs sm_90a or newer (target is {e.target.name})")
    return f"{space}.{op}.{ptx}"


def _atom(op: str):
    def emit(e, a) -> None:
        head = _atom_head(e, a, op)
        if op == "cas":
            e.line(f"atom{head} {a.result}, [{a.addr}], {a.compare}, {a.value};")
        else:
            e.line(f"atom{head} {a.result}, [{a.addr}], {a.value};")

    return emit


def _red(op: str):
    def emit(e, a) -> None:
        e.line(f"red{_atom_head(e, a, op)} [{a.addr}], {a.value};")

    return emit


def _check_width(values: Dict, span) -> None:
    if values["width"] not in (1, 2, 4, 8, 16, 32):
        raise TilecError(f"'width' must be a power of two in [1, 32], got {values['width']}", span)


_SHFL_DOC = {
    "bfly": "the value of lane (this lane XOR `lane`)",
    "up": "the value of lane (this lane - `lane`), or this lane's own below that",
    "down": "the value of lane (this lane + `lane`), or this lane's own past the end",
    "idx": "the value of lane `lane`",
}

_TABLE_COLLECTIVES = [
    Intrinsic(f"ptx.shfl.sync.{mode}", f"x: value(any), lane: value(u32), *, width: int = 32, {_FULL_MASK}",
              "sm_80", _shfl(mode), result="=x", check=_check_width,
              doc=f"shfl.sync.{mode}: {_SHFL_DOC[mode]}, within segments of `width` lanes.")
    for mode in ("bfly", "up", "down", "idx")
] + [
    Intrinsic("ptx.redux.sync", f"x: value(any), *, op: str(add|min|max|and|or|xor), {_FULL_MASK}",
              "sm_80", _redux, result="=x",
              doc="redux.sync: `op` over `x` of every lane in the mask, returned to each (i32/u32; "
                  "f32 min/max on sm_100a)."),
    Intrinsic("ptx.vote.sync.all", f"pred: pred, *, {_FULL_MASK}", "sm_80", _vote("all"), result="bool",
              doc="True when `pred` holds in every lane of the mask."),
    Intrinsic("ptx.vote.sync.any", f"pred: pred, *, {_FULL_MASK}", "sm_80", _vote("any"), result="bool",
              doc="True when `pred` holds in some lane of the mask."),
    Intrinsic("ptx.vote.sync.uni", f"pred: pred, *, {_FULL_MASK}", "sm_80", _vote("uni"), result="bool",
              doc="True when `pred` is the same in every lane of the mask."),
    Intrinsic("ptx.vote.sync.ballot", f"pred: pred, *, {_FULL_MASK}", "sm_80", _vote("ballot"), result="u32",
              doc="Bit l set when `pred` holds in lane l (lanes of the mask)."),
    Intrinsic("ptx.match.sync.any", f"x: value(any), *, {_FULL_MASK}", "sm_80", _match("any"), result="u32",
              doc="The lanes of the mask whose `x` (32 or 64 bits) equals this lane's."),
    Intrinsic("ptx.match.sync.all", f"x: value(any), *, {_FULL_MASK}", "sm_80", _match("all"), result="u32",
              doc="The mask when every lane of it has the same `x`, else 0."),
    Intrinsic("ptx.activemask", "", "sm_80", "activemask.b32 {result};", result="u32",
              doc="The lanes of the warp executing this instruction now."),
] + [
    Intrinsic(f"ptx.atom.{op}",
              "addr: mem_addr, value: value(any)" + (", *, packed: str(f16x2|bf16x2) = None" if op == "add" else ""),
              "sm_80", _atom(op), result="=value",
              doc=f"atom.{op} on the shared or global element at `addr`, returning its old value "
                  f"(types: {', '.join(_ATOM_TYPES[op])}" + ("; bf16 needs sm_90a; `packed`: `value` is a u32 "
                                                              "holding two f16 or bf16, added lane-wise" if op == "add" else "") + ").")
    for op in ("add", "min", "max", "exch")
] + [
    Intrinsic("ptx.atom.cas", "addr: mem_addr, compare: value(any), value: value(any)", "sm_80", _atom("cas"),
              result="=value",
              doc="atom.cas: stores `value` at `addr` if it holds `compare`; returns the old contents "
                  "(32- and 64-bit values; `compare` of the same type)."),
] + [
    Intrinsic(f"ptx.red.{op}",
              "addr: mem_addr, value: value(any)" + (", *, packed: str(f16x2|bf16x2) = None" if op == "add" else ""),
              "sm_80", _red(op),
              doc=f"red.{op}: atom.{op} without the result (types as ptx.atom.{op}).")
    for op in ("add", "min", "max")
]

_TABLE += _TABLE_COLLECTIVES

# ---- cp.async (sm_80): global -> shared without registers, for copy_async -> cp_async
# (the lowering is tilec/passes/dispatch/copy_async/cp_async.py).  Each thread
# issues its own copies; they complete in commit groups.


def _check_cp_async(values: Dict, span) -> None:
    if values["cache"] == "cg" and values["size"] != 16:
        raise TilecError(f"cp.async.cg copies 16 bytes; a {values['size']}-byte copy takes cache=\"ca\"", span)


def _cp_async(e, a) -> None:
    if a.src.type != "global_ptr":
        raise TilecError("cp.async reads global memory: 'src' must be the address of a global element")
    tail = "" if a.src_size is None else f", {a.src_size}"
    e.line(f"cp.async.{a.cache}.shared.global [{a.dst}], [{a.src}], {a.size}{tail};")


_TABLE += [
    Intrinsic("ptx.cp_async", "dst: shared_addr, src: mem_addr, *, size: int(4|8|16), src_size: value(u32) = None, "
              'cache: str(ca|cg) = "ca"',
              "sm_80", _cp_async, check=_check_cp_async,
              doc="cp.async.{ca,cg}.shared.global: `size` bytes (4, 8 or 16, both addresses aligned to it) from "
                  "global `src` to shared `dst`, asynchronously, in the thread's current cp.async group.  "
                  "`src_size` (run time, 0..size): read only that many bytes and zero-fill the rest.  "
                  "cache=\"cg\" (16 bytes only) bypasses L1."),
    Intrinsic("ptx.cp_async.commit_group", "", "sm_80", "cp.async.commit_group;",
              doc="Close this thread's current group of cp.async copies."),
    Intrinsic("ptx.cp_async.wait_group", "n: int", "sm_80", "cp.async.wait_group {n};",
              check=_check_range("n", 0, 7),
              doc="Wait until at most n of this thread's cp.async groups are pending (their data in shared "
                  "memory for this thread; a barrier makes it visible to others)."),
    Intrinsic("ptx.cp_async.wait_all", "", "sm_80", "cp.async.wait_all;",
              doc="Wait for all of this thread's cp.async copies."),
]

INTRINSICS: Dict[str, Intrinsic] = {}
for _row in _TABLE:
    assert _row.name not in INTRINSICS, _row.name
    INTRINSICS[_row.name] = _row

NAMESPACES = ("ptx", "cuda")


def is_intrinsic_name(func: str) -> bool:
    return func.split(".", 1)[0] in NAMESPACES


def lookup(func: str, span) -> Intrinsic:
    """The row for a dotted call, or a located error for an unknown one."""
    try:
        return INTRINSICS[func]
    except KeyError:
        raise TilecError(f"unknown intrinsic '{func}'", span) from None

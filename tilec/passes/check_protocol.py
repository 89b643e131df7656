"""The `check-protocol` pass: mistakes in the asynchronous protocol that
compile silently and then hang or compute garbage on the GPU, reported at
the source where they can be proven.

It reads the program as the user wrote it, once consts, metas and helpers
are substituted and constants folded (right after `canonicalize-layouts`,
before tile primitives are lowered), and changes nothing.  Each check has a name; `# tilec: allow(NAME)` (or
`allow(NAME1, NAME2)`) on the reported line silences it there.  The checks
(docs/language.md, "Protocol checks", has an example of each):

- `missing-wait`: shared memory a TMA load fills is read with no
  `ptx.mbarrier.try_wait` on that load's barrier in between;
- `cp-async-wait`: shared memory a cp.async copy (`copy_async` from global
  without `mbar`) fills is read with no `ptx.cp_async.wait_group` or
  `wait_all` in between;
- `expect-tx`: an `expect_tx` byte count differs from the bytes the TMA
  loads beside it signal to the same barrier;
- `missing-proxy-fence`: threads write shared memory that a TMA store, a
  wgmma or a tcgen05 operation then reads, with no `ptx.fence.proxy_async`
  in between (the async proxy may not see the writes);
- `wgmma-wait`: a wgmma accumulator is read before `ptx.wgmma.wait_group`;
- `divergent-sync`: `cuda.cta_sync()` or `cuda.warpgroup_sync(..)` under a
  branch or loop whose condition differs between threads of the group
  that must all arrive (a hang);
- `cta-group-mix`: tcgen05 operations with `cta_group` 1 and 2 in one
  kernel (ptxas refuses the mix, far from the source).

Shared memory over the target's limit is the seventh mistake of the issue;
it can never be right, so the symbol analysis refuses it outright
(`KernelSymbols`, "over the ... a block may use").

"Proven" means: the accesses name the same buffer with regions that
provably overlap (constant ranges that intersect, or the same index
expressions with no assignment to their names in between), on a path
through the program in order.  A loop body is followed once, and a branch
only joins what both of its sides leave pending, so a check never fires on
a pipelined kernel whose stages it cannot tell apart.
"""
from __future__ import annotations

import functools
import math
import re
from typing import Dict, Optional

from tilec.compiler import records
from tilec.compiler import ir, visit
from tilec.compiler.builtins import LAUNCH_AXES, tile_primitive
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.intrinsics import INTRINSICS
from tilec.compiler.passmanager import Pass, PassContext
from tilec.compiler.symbols import KernelSymbols
from tilec.compiler.tile_op import TileOp

CHECKS = ("missing-wait", "cp-async-wait", "expect-tx", "missing-proxy-fence", "wgmma-wait", "divergent-sync",
          "cta-group-mix")

_ALLOW = re.compile(r"#.*\btilec:\s*allow\(([^)]*)\)")


class CheckProtocol(Pass):
    name = "check-protocol"
    requires = frozenset({"folded", "scheduler-lowered"})
    provides = frozenset()  # it only reads

    def apply(self, module: ir.Module, ctx: PassContext) -> ir.Module:
        lines = (ctx.source or "").split("\n")
        for k in module.kernels:
            syms = ctx.symbols(k, module)
            for check, message, span in kernel_findings(k, syms):
                if not _allowed(check, span, lines, ctx.filename):
                    raise TilecError(
                        f"{message} [{check}]", span,
                        notes=(f"if this is intended, write '# tilec: allow({check})' at the end of line "
                               f"{span.line}",) if span else (),
                    )
        return module


def _allowed(check: str, span: Optional[ir.Span], lines: list, filename: str) -> bool:
    if span is None or span.file != filename or not 1 <= span.line <= len(lines):
        return False
    m = _ALLOW.search(lines[span.line - 1])
    return m is not None and check in {n.strip() for n in m.group(1).split(",")}


def kernel_findings(kernel: ir.Kernel, syms: KernelSymbols) -> list:
    """(check, message, span) of every finding in one kernel, in source order."""
    found: list = []
    calls = _OwnCalls()
    _Flow(syms, found).block(kernel.body, _State())
    _expect_tx(kernel.body, syms, found, calls)
    _divergent_syncs(kernel, syms, found, calls)
    _cta_group_mix(kernel, syms, found, calls)
    return sorted(found, key=lambda f: (f[2].line, f[2].col) if f[2] else (0, 0))


# --------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------


class _OwnCalls:
    """The calls in a statement's own expressions (not in the statements
    nested in it), in `visit.walk`'s order, found once per statement: the
    divergent-sync check counts the barriers among them, the cta-group
    check reads them all, and the expect-tx check looks for loads and
    expect_tx under a branch or loop.  A statement's expressions come before its nested
    statements in every statement class, so the calls of the statements of
    a block in `visit.statements`' order are the block's calls in walk order."""

    def __init__(self):
        self.found: Dict[int, tuple] = {}  # id(statement) -> (statement, calls); the statement keeps its id its own

    def of(self, s: ir.Stmt) -> list:
        hit = self.found.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        calls = [call for e in visit.expressions(s) if type(e) not in ir.LEAVES for call in visit.find_all(e, ir.CALLS)]
        self.found[id(s)] = (s, calls)
        return calls

    def in_block(self, stmts) -> list:
        return [c for s in visit.statements(stmts) for c in self.of(s)]


_INDEX = frozenset({ir.Index})


def _buffer_name(operand: ir.Expr) -> Optional[str]:
    base = operand.base if isinstance(operand, ir.Index) else operand
    return base.id if isinstance(base, ir.Name) else None


def _interval(item: ir.Expr):
    """(lo, hi) of a constant index or slice, "all" for `:`, None otherwise."""
    if isinstance(item, ir.Slice):
        if item.start is None and item.stop is None:
            return "all"
        if isinstance(item.start or ir.Int(0), ir.Int) and isinstance(item.stop, ir.Int):
            return ((item.start.value if item.start else 0), item.stop.value)
        return None
    if isinstance(item, ir.Int):
        return (item.value, item.value + 1)
    return None


def _overlap(a: ir.Expr, b: ir.Expr) -> bool:
    """True when the two operands provably share an element."""
    if _buffer_name(a) is None or _buffer_name(a) != _buffer_name(b):
        return False
    if not (isinstance(a, ir.Index) and isinstance(b, ir.Index)):
        return True
    if len(a.indices) != len(b.indices):
        return False
    for x, y in zip(a.indices, b.indices):
        ix, iy = _interval(x), _interval(y)
        if "all" in (ix, iy) or x == y:
            continue
        if ix is None or iy is None or ix[1] <= iy[0] or iy[1] <= ix[0]:
            return False
    return True


def _barrier(mbar: Optional[ir.Expr]) -> Optional[str]:
    """The buffer an mbarrier address points into (`bar.ptr_to([i])`,
    `address_of(bar[i])`)."""
    if isinstance(mbar, ir.Method) and isinstance(mbar.obj, ir.Name):
        return mbar.obj.id
    if isinstance(mbar, ir.Call) and mbar.func == "address_of" and mbar.args:
        return _buffer_name(mbar.args[0])
    return None


# --------------------------------------------------------------------------
# missing-wait, missing-proxy-fence, wgmma-wait: what is in flight, in order
# --------------------------------------------------------------------------


@records.frozen(eq=False)
class _Pending:
    """An access still in flight: a TMA load into `region` (on `barrier`), a
    cp.async copy, a thread write not yet fenced, or a wgmma accumulator."""

    region: ir.Expr
    span: Optional[ir.Span]
    barrier: Optional[str] = None

    @functools.cached_property
    def names(self) -> frozenset:
        """The names the region mentions (found once: every assignment asks
        of every access still pending)."""
        return frozenset(n.id for n in visit.find_all(self.region, ir.NAMES))


_FIELDS = ("tma", "cp_async", "writes", "accumulators")


@records.mutable
class _State:
    tma: list = records.field(factory=list)
    cp_async: list = records.field(factory=list)
    writes: list = records.field(factory=list)
    accumulators: list = records.field(factory=list)

    def copy(self) -> "_State":
        return _State(list(self.tma), list(self.cp_async), list(self.writes), list(self.accumulators))

    def join(self, before: "_State", *paths: "_State") -> None:
        """Pending after the paths: what was pending before survives only if
        every path left it; what a path started survives.  (`self` may be
        one of the paths: each field is read from every path before it is
        set.)"""
        for field in _FIELDS:
            old = getattr(before, field)
            kept = [p for p in old if all(p in getattr(s, field) for s in paths)]
            new = [p for s in paths for p in getattr(s, field) if p not in old]
            setattr(self, field, kept + [p for i, p in enumerate(new) if p not in new[:i]])

    def forget(self, name: str) -> None:
        """A name was assigned: regions indexed by it mean other elements now."""
        for field in _FIELDS:
            setattr(self, field, [p for p in getattr(self, field) if name not in p.names])


class _Flow:
    def __init__(self, syms: KernelSymbols, found: list):
        self.syms, self.found = syms, found
        self.hopper = syms.target.family == "hopper"

    def scope(self, operand: ir.Expr) -> Optional[str]:
        name = _buffer_name(operand)
        buf = self.syms.buffers.get(name) if name else None
        return buf.scope if buf is not None else None

    def shared(self, operand: ir.Expr) -> bool:
        return self.scope(operand) in ("shared", "shared.dyn")

    def block(self, stmts, state: _State) -> _State:
        for s in stmts:
            state = self.stmt(s, state)
        return state

    def stmt(self, s: ir.Stmt, state: _State) -> _State:
        kind = type(s)  # (node classes have no subclasses)
        if kind is ir.If:
            self.reads(s.cond, state)
            # (each path's state is a copy of its own, which a branch with no statement needs not;
            # the join is written over the `then` path's, read by nothing else)
            then = self.block(s.then, state.copy())
            orelse = self.block(s.orelse, state.copy()) if s.orelse else state
            then.join(state, then, orelse)
            return then
        if kind is ir.For or kind is ir.While:
            for e in (s.cond,) if kind is ir.While else (s.start, s.stop, s.step):
                self.reads(e, state)
            inner = state.copy()
            if kind is ir.For:
                inner.forget(s.var)
            body = self.block(s.body, inner)
            body.join(state, state, body)  # (over the body's own state, as for an `if`)
            return body
        if kind is ir.Assign:
            self.reads(s.value, state)
            for t in s.targets:
                if type(t) is ir.Index:
                    for i in t.indices:
                        self.reads(i, state)
                    if self.shared(t):
                        state.writes.append(_Pending(t, s.span))
                elif type(t) is ir.Name:
                    state.forget(t.id)
            return state
        if kind is ir.AugAssign:
            self.reads(s.value, state)
            if isinstance(s.target, ir.Index):
                self.read(s.target, state, s.span)
                if self.shared(s.target):
                    state.writes.append(_Pending(s.target, s.span))
            elif isinstance(s.target, ir.Name):
                state.forget(s.target.id)
            return state
        if kind is ir.ExprStmt and type(s.expr) is ir.Call:
            self.call(s.expr, state)
        return state

    # -- reads ----------------------------------------------------------

    def reads(self, e: Optional[ir.Expr], state: _State) -> None:
        """Element reads inside an expression.  Only what is in flight makes
        a read a finding (`read`), and mostly nothing is: no walk then."""
        if e is None or type(e) in ir.LEAVES or not (state.tma or state.cp_async or state.accumulators):
            return
        for node in visit.find_all(e, _INDEX):
            if _buffer_name(node) in self.syms.buffers:
                self.read(node, state, node.span)

    def read(self, operand: ir.Expr, state: _State, span, async_proxy: bool = False) -> None:
        for p in state.tma:
            if _overlap(operand, p.region):
                self.report("missing-wait", (
                    f"'{_buffer_name(operand)}' is read here while the TMA load into it on line "
                    f"{_line(p.span)} may still be in flight: wait on its barrier "
                    f"('ptx.mbarrier.try_wait({p.barrier}...)') first"), span)
        for p in state.cp_async:
            if _overlap(operand, p.region):
                self.report("cp-async-wait", (
                    f"'{_buffer_name(operand)}' is read here while the cp.async copy into it on line "
                    f"{_line(p.span)} may still be in flight: ptx.cp_async.commit_group() and "
                    "ptx.cp_async.wait_group(..) first"), span)
        if async_proxy:
            for p in state.writes:
                if _overlap(operand, p.region):
                    self.report("missing-proxy-fence", (
                        f"'{_buffer_name(operand)}' is read through the async proxy here after threads wrote "
                        f"it on line {_line(p.span)} with no ptx.fence.proxy_async(\"shared::cta\") in "
                        "between; the writes may not be visible to it"), span)
        for p in state.accumulators:
            if _overlap(operand, p.region):
                self.report("wgmma-wait", (
                    f"the wgmma accumulator '{_buffer_name(operand)}' (gemm_async on line {_line(p.span)}) "
                    "is read before ptx.wgmma.wait_group"), span)

    def report(self, check: str, message: str, span) -> None:
        self.found.append((check, message, span))

    # -- calls ----------------------------------------------------------

    def call(self, call: ir.Call, state: _State) -> None:
        f = call.func
        if f == "ptx.mbarrier.try_wait":
            waited = _barrier(call.args[0]) if call.args else None
            state.tma = [p for p in state.tma if waited is None or p.barrier != waited]
            return
        if f in ("ptx.cp_async.wait_group", "ptx.cp_async.wait_all"):
            state.cp_async = []
            return
        if f == "ptx.fence.proxy_async":
            state.writes = []
            return
        if f == "ptx.wgmma.wait_group":
            state.accumulators = []
            return
        name = tile_primitive(f)
        if name is None:
            for a in call.args:
                self.reads(a, state)
            return
        op = TileOp.from_call(call)
        args = list(op.args)
        span = call.span
        if name in ("copy", "cast", "copy_async") and len(args) >= 2:
            dst, src = args[0], args[1]
            dst_scope, src_scope = self.scope(dst), self.scope(src)
            async_read = name == "copy_async" and self.shared(src) and dst_scope in ("global", "tmem")
            self.read(src, state, span, async_proxy=async_read)
            if name == "copy_async" and dst_scope in ("shared", "shared.dyn") and src_scope == "global":
                mbar = op.kwargs.get("mbar")  # without one it is a cp.async (waited with its groups)
                if mbar is not None:
                    state.tma.append(_Pending(dst, span, _barrier(mbar)))
                else:
                    state.cp_async.append(_Pending(dst, span))
            elif dst_scope in ("shared", "shared.dyn") and name != "copy_async":
                state.writes.append(_Pending(dst, span))
        elif name == "fill" and args:
            if self.shared(args[0]):
                state.writes.append(_Pending(args[0], span))
        elif name == "gemm" and len(args) >= 3:
            for a in args[1:]:
                self.read(a, state, span)
            if self.shared(args[0]):
                state.writes.append(_Pending(args[0], span))
        elif name == "gemm_async" and len(args) >= 3:
            for a in args[1:3]:
                self.read(a, state, span, async_proxy=self.shared(a))
            if self.hopper and self.scope(args[0]) == "local":
                state.accumulators.append(_Pending(args[0], span))


def _line(span) -> str:
    return str(span.line) if span is not None else "?"


# --------------------------------------------------------------------------
# expect-tx: the bytes announced and the bytes the loads beside them signal
# --------------------------------------------------------------------------


def _tma_load_bytes(call: ir.Call, syms: KernelSymbols):
    """(barrier, bytes or None) of a TMA load, None when `call` is not one."""
    if tile_primitive(call.func) != "copy_async" or len(call.args) < 2:
        return None
    op = TileOp.from_call(call)
    dst, src = op.args[0], op.args[1]
    bufs = syms.buffers
    d, s = bufs.get(_buffer_name(dst) or ""), bufs.get(_buffer_name(src) or "")
    if d is None or s is None or not d.is_shared or s.scope != "global" or "mbar" not in op.kwargs:
        return None
    barrier = _barrier(op.kwargs["mbar"])
    if "multicast" in op.kwargs or "cta_group" in op.kwargs and op.kwargs["cta_group"] != ir.Int(1):
        return barrier, None
    count = 1
    items = dst.indices if isinstance(dst, ir.Index) else ()
    for extent, item in zip(d.shape, items + (ir.Slice(),) * (len(d.shape) - len(items))):
        iv = _interval(item)
        if iv == "all":
            count *= extent
        elif iv is None:
            return barrier, None
        else:
            count *= iv[1] - iv[0]
    return barrier, count * DTYPES[d.dtype].bits // 8


def _touches(s: ir.Stmt, barrier: str, syms: KernelSymbols, calls: _OwnCalls) -> bool:
    """Does a nested statement load to or expect bytes on `barrier`?"""
    for node in calls.in_block((s,)):
        load = _tma_load_bytes(node, syms)
        if load is not None and load[0] == barrier:
            return True
        if node.func == "ptx.mbarrier.arrive.expect_tx" and node.args and _barrier(node.args[0]) == barrier:
            return True
    return False


def _expect_tx(stmts, syms: KernelSymbols, found: list, calls: _OwnCalls) -> None:
    """In each statement list, between waits on a barrier: the expect_tx
    counts against the bytes of the loads at the same level, when every one
    of them is known and nothing nested also touches the barrier."""
    windows: Dict[str, dict] = {}

    def close(barrier: str) -> None:
        w = windows.pop(barrier, None)
        if w is None or w["unknown"] or not w["loads"] or w["expect"] is None:
            return
        if w["expect"] != w["loads"]:
            found.append(("expect-tx", (
                f"expect_tx announces {w['expect']} bytes on '{barrier}', but the TMA loads to it here "
                f"signal {w['loads']} (line {', '.join(map(str, w['lines']))})"), w["span"]))

    def window(barrier: str) -> dict:
        return windows.setdefault(barrier, {"loads": 0, "expect": None, "unknown": False, "lines": [],
                                            "span": None})

    for s in stmts:
        kind = type(s)  # (node classes have no subclasses)
        for field in visit.block_fields(kind):
            _expect_tx(getattr(s, field), syms, found, calls)
        if kind is not ir.ExprStmt or type(s.expr) is not ir.Call:
            for barrier in list(windows):
                if (kind is ir.If or kind is ir.For or kind is ir.While) and _touches(s, barrier, syms, calls):
                    window(barrier)["unknown"] = True
            continue
        call = s.expr
        load = _tma_load_bytes(call, syms)
        if load is not None and load[0] is not None:
            w = window(load[0])
            if load[1] is None:
                w["unknown"] = True
            else:
                w["loads"] += load[1]
                w["lines"].append(_line(call.span))
        elif call.func == "ptx.mbarrier.arrive.expect_tx" and len(call.args) >= 2:
            barrier = _barrier(call.args[0])
            if barrier is None:
                continue
            w = window(barrier)
            if not isinstance(call.args[1], ir.Int):
                w["unknown"] = True
            else:
                w["expect"] = (w["expect"] or 0) + call.args[1].value
                w["span"] = w["span"] or call.span
        elif call.func == "ptx.mbarrier.try_wait" and call.args:
            barrier = _barrier(call.args[0])
            if barrier is not None:
                close(barrier)
    for barrier in list(windows):
        close(barrier)


# --------------------------------------------------------------------------
# divergent-sync: barriers under conditions that differ within the group
# --------------------------------------------------------------------------

_UNIFORM = math.inf


def _divergent_syncs(kernel: ir.Kernel, syms: KernelSymbols, found: list, calls: _OwnCalls) -> None:
    """Each value gets the size of the aligned thread groups it is uniform
    over (1: may differ between lanes; 32: per warp; 128: per warpgroup;
    infinite: the whole CTA), from the launch ids it derives from.  A
    variable assigned under a condition (or in a loop) that differs between
    threads differs after it, as a phi would.  A barrier under a condition
    uniform over fewer threads than must arrive is reported, unless both
    sides of the branch have barriers."""
    launch = syms.launch
    block = launch.threads if launch is not None else 1
    ids = {lid.name: lid for lid in (launch.ids if launch is not None else ())}

    def group(e: Optional[ir.Expr], env: dict) -> float:
        kind = type(e)  # (node classes have no subclasses)
        if e is None or kind in ir.LITERALS:
            return _UNIFORM
        if kind is ir.Name:
            lid = ids.get(e.id)
            if lid is not None:
                stride = LAUNCH_AXES[lid.builtin].stride
                return _UNIFORM if stride is None else stride
            return env.get(e.id, _UNIFORM)
        if kind is ir.Binary:
            if type(e.rhs) is ir.Int and e.rhs.value > 0:
                base = _launch_stride(e.lhs, ids)
                if base is not None and e.op in ("//", ">>", "<", "<=", ">", ">="):
                    step = e.rhs.value if e.op in ("//", "<", ">=") else (
                        1 << e.rhs.value if e.op == ">>" else e.rhs.value + 1)
                    stride, extent = base
                    return stride * math.gcd(step, extent)
            return min(group(e.lhs, env), group(e.rhs, env))
        if kind is ir.Call and e.func == "ptx.elect_sync":
            return 1
        if kind is ir.Index:
            buf = syms.buffers.get(_buffer_name(e) or "")
            if buf is not None and buf.scope == "local":
                return 1
        return min([group(c, env) for c in visit.children(e) if isinstance(c, ir.Expr)] or [_UNIFORM])

    # id(block or statement) -> (it, barriers in it, names it assigns): blocks are revisited, and a
    # block's summary is made of its statements', each nested statement's made once (not once per
    # enclosing block); the node is kept so that its id stays its own
    summaries: Dict[int, tuple] = {}

    def summary(stmts) -> tuple:
        key = id(stmts)
        if key not in summaries:
            barriers, names = 0, set()
            for s in stmts:
                inner_barriers, inner_names = statement_summary(s)
                barriers += inner_barriers
                names |= inner_names
            summaries[key] = (stmts, barriers, names)
        return summaries[key][1:]

    def statement_summary(s: ir.Stmt) -> tuple:
        key = id(s)
        if key not in summaries:
            barriers, names = 0, set()
            kind = type(s)
            if kind is ir.Assign:
                names |= {t.id for t in s.targets if type(t) is ir.Name}
            elif kind is ir.AugAssign and type(s.target) is ir.Name:
                names.add(s.target.id)
            elif kind is ir.For:
                names.add(s.var)
            for field in visit.block_fields(kind):  # (statements are only in blocks)
                for child in getattr(s, field):
                    inner_barriers, inner_names = statement_summary(child)
                    barriers += inner_barriers
                    names |= inner_names
            barriers += sum(1 for c in calls.of(s) if c.func in ("cuda.cta_sync", "cuda.warpgroup_sync"))
            summaries[key] = (s, barriers, names)
        return summaries[key][1:]

    def syncs(stmts) -> int:
        return summary(stmts)[0]

    def assigned(stmts) -> set:
        return summary(stmts)[1]

    def diverge(env: dict, names: set, g: float) -> None:
        for name in names:
            env[name] = min(env.get(name, _UNIFORM), g)

    def walk(stmts, env: dict, guard: float, report: bool, need_env: bool = True) -> dict:
        # `env` is changed in place and returned: every caller gives a copy or its own.  A reporting
        # walk whose caller reads no env (`need_env` false) stops where no barrier is left to report.
        left = syncs(stmts) if report and not need_env else -1  # the barriers in `s` and after it
        for s in stmts:
            if left == 0:
                break
            if left > 0:
                left -= statement_summary(s)[0]
            kind = type(s)  # (node classes have no subclasses)
            if kind is ir.Assign:
                for t in s.targets:
                    if type(t) is ir.Name:
                        env[t.id] = group(s.value, env)
            elif kind is ir.AugAssign and type(s.target) is ir.Name:
                env[s.target.id] = min(env.get(s.target.id, _UNIFORM), group(s.value, env))
            elif kind is ir.If:
                g = group(s.cond, env)
                inner = guard if syncs(s.then) and syncs(s.orelse) else min(guard, g)
                rest = need_env or left > 0  # whether what comes after reads the env
                then = walk(s.then, dict(env), inner, report, rest)
                orelse = walk(s.orelse, dict(env), inner, report, rest)
                # the branches start from copies of env and change only the names they assign
                changed = assigned(s.then) | assigned(s.orelse)
                for k in changed:
                    env[k] = min(then.get(k, _UNIFORM), orelse.get(k, _UNIFORM))
                diverge(env, changed, g)
            elif kind is ir.For or kind is ir.While:
                names = assigned(s.body) | ({s.var} if kind is ir.For else set())
                first = dict(env)
                for _ in range(2):  # values assigned late in the body reach its start
                    g = (min(group(s.start, first), group(s.stop, first), group(s.step, first))
                         if kind is ir.For else group(s.cond, first))
                    diverge(first, names, g)
                    first = walk(s.body, first, min(guard, g), False)
                    for k in names:  # the only values the body changes
                        first[k] = min(first[k], env.get(k, _UNIFORM))
                    if all(first[k] == env.get(k, _UNIFORM) for k in names):
                        break  # every value as it came in: a second pass would repeat the first
                if report and syncs(s.body):
                    walk(s.body, dict(first), min(guard, g), True, need_env=False)
                env = first
            elif report and kind is ir.ExprStmt and type(s.expr) is ir.Call:
                f = s.expr.func
                need = block if f == "cuda.cta_sync" else min(128, block) if f == "cuda.warpgroup_sync" else 0
                if need and guard < need:
                    who = "the CTA" if f == "cuda.cta_sync" else "the warpgroup"
                    found.append(("divergent-sync", (
                        f"{f}() is under a condition that differs between threads of {who} (uniform only over "
                        f"groups of {int(guard)} threads); the threads that skip it never arrive and the "
                        "others wait forever"), s.span))
        return env

    try:
        walk(kernel.body, {}, _UNIFORM, report=True, need_env=False)
    finally:
        group = statement_summary = walk = None  # the recursive closures: see visit._NO_CYCLE


def _launch_stride(e: ir.Expr, ids: dict):
    """(stride, extent) of a thread-level launch id named by `e`."""
    if isinstance(e, ir.Name) and e.id in ids:
        lid = ids[e.id]
        stride = LAUNCH_AXES[lid.builtin].stride
        if stride is not None:
            return stride, lid.extent
    return None


# --------------------------------------------------------------------------
# cta-group-mix
# --------------------------------------------------------------------------


def _cta_group_mix(kernel: ir.Kernel, syms: KernelSymbols, found: list, calls: _OwnCalls) -> None:
    """Every call that becomes a tcgen05 instruction -- `ptx.tcgen05.*`,
    gemm_async on Blackwell, copy_async into tensor memory -- with its
    cta_group (1 unless written); the first that differs from the first
    one seen is reported."""
    first = None
    blackwell = syms.target.family == "blackwell"
    for node in calls.in_block(kernel.body):  # (a kernel's parameters hold no call)
        prim = tile_primitive(node.func)
        row = INTRINSICS.get(node.func) if node.func.startswith("ptx.tcgen05.") else None
        if not ((row is not None and any(p.name == "cta_group" for p in row.signature.params))
                or (blackwell and prim == "gemm_async")
                or (prim == "copy_async" and node.args and _scope_of(node.args[0], syms) == "tmem")):
            continue
        value = next((kw.value for kw in node.kwargs if kw.name == "cta_group"), ir.Int(1))
        if not isinstance(value, ir.Int):
            continue
        if first is None:
            first = (value.value, node.span)
        elif value.value != first[0]:
            found.append(("cta-group-mix", (
                f"this tcgen05 operation uses cta_group={value.value}, but the one on line {_line(first[1])} "
                f"uses cta_group={first[0]}; all tcgen05 operations of a kernel use the same cta_group"),
                node.span))


def _scope_of(operand: ir.Expr, syms: KernelSymbols) -> Optional[str]:
    buf = syms.buffers.get(_buffer_name(operand) or "")
    return buf.scope if buf is not None else None

"""Intrinsic calls to PTX: arguments resolved by their signature kinds, then
the row's template or function from `tilec.compiler.intrinsics` runs.

This is the only place that knows how each parameter kind becomes PTX
operand text, so a new row never deals with registers, immediates, address
spaces or write-back itself."""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import List, NamedTuple, Optional, Tuple

from tilec.compiler import intrinsics, ir
from tilec.compiler.builtins import ParamSpec
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.intrinsics import Operands
from tilec.compiler.value_types import assignable
from tilec.passes.emit_ptx.registers import Operand


@functools.lru_cache(maxsize=None)
def _register_types(want: str) -> frozenset:
    """The register types a `reg`/`regs` operand of type `want` ("f32",
    "f16x2|u32"...) takes: those named, and a 32- or 64-bit integer of
    either signedness for "u32"/"i32" and "u64"/"i64"."""
    types = set(want.split("|"))
    for same in (("u32", "i32"), ("u64", "i64")):
        if want in same:
            types.update(same)
    return frozenset(types)


class EmitAPI:
    """What a row's emit function sees as `e` (see `tilec.compiler.intrinsics`)."""

    def __init__(self, k, span=None):
        self._k = k
        self.target = k.target
        self._span = span  # the call's, for --debug-hangs messages

    def line(self, text: str) -> None:
        self._k.line(text)

    def reg(self, dtype: str) -> str:
        """A fresh register for a value type ("u32", "f32", "bool", "u64"...)."""
        return self._k.regs.new(dtype)

    def label(self, stem: str) -> str:
        return self._k.regs.label(stem)

    def wait_loop(self, poll: str, done: str, addr, phase) -> None:
        """Repeat the PTX line `poll` until it sets the predicate `done` (a
        wait on `phase` of the mbarrier at `addr`).  Under --debug-hangs the
        loop is bounded and reports where it hung (`debug_hangs`)."""
        if self._k.hang_guard is not None:
            self._k.hang_guard.wait_loop(self._k, poll, done, addr, phase, self._span)
            return
        loop = self.label("wait")
        self.line(f"{loop}:")
        self.line(poll)
        self.line(f"@!{done} bra {loop};")

    def pack_b32(self, lo, hi) -> str:
        """Two 16-bit registers as one b32 register (lo in bits 0-15)."""
        d = self._k.regs.new("u32")
        self.line(f"mov.b32 {d}, {{{lo}, {hi}}};")
        return d

    def unpack_b32(self, src, lo, hi) -> None:
        """The inverse of pack_b32: write the halves of `src` to `lo`, `hi`."""
        self.line(f"mov.b32 {{{lo}, {hi}}}, {src};")


class RowUse(NamedTuple):
    """An intrinsic row as one kernel's calls use it, worked out at its
    first call: `runtime` the parameters that are not literals (those
    evaluated when the kernel runs, and a layout, buffer or expression the
    row reads: `builtins.NOT_LITERAL_KINDS`), each with the name errors give
    it ("ptx.mma: 'd'"), and `literals` whether it has literal ones (`Signature.literals` finds none
    otherwise: a conversion or a fence skips it)."""

    row: intrinsics.Intrinsic
    runtime: Tuple[Tuple[ParamSpec, str], ...]
    literals: bool


def row_use(row: intrinsics.Intrinsic) -> RowUse:
    sig = row.signature
    return RowUse(row, tuple((p, f"{row.name}: '{p.name}'") for p in sig.not_literal), bool(sig.compile_time))


class IntrinsicCalls:
    """Mixed into `KernelEmitter`."""

    def call_intrinsic(self, call: ir.Call) -> Optional[Operand]:
        use = self.intrinsic_rows.get(call.func)
        if use is None:  # looked up and checked against the target once per name
            row = intrinsics.lookup(call.func, call.span)
            row.check_target(self.target, call.span)
            use = self.intrinsic_rows[call.func] = row_use(row)
        row = use.row
        bound = self.syms.bound(call)  # (bound by the analysis already)
        fields = row.signature.literals(call.func, bound, call.span) if use.literals else {}
        if row.check is not None:
            row.check(fields, call.span)
        writebacks: List = []
        for p, what in use.runtime:
            fields[p.name] = self.intrinsic_arg(call, p, bound[p.name], writebacks, what)
        for name in row.ranges:
            op = fields.get(name)
            if isinstance(op, Operand) and not op.is_reg:
                row.check_range(name, int(op.text, 0), bound[name].span or call.span)
        result = None
        if row.result is not None:
            result = self.regs.temp(row.result_type(fields))
            fields["result"] = result
        try:
            if isinstance(row.emit, str):
                self.line(row.emit.format(**fields))
            else:
                row.emit(EmitAPI(self, call.span), SimpleNamespace(**fields))
        except TilecError as err:  # a row's own check, located at the call
            raise err.with_span(call.span)
        for target, reg in writebacks:
            self.store(target, reg)
        return result

    def intrinsic_arg(self, call: ir.Call, p: ParamSpec, arg, writebacks, what: str):
        if not isinstance(arg, ir.Expr):
            return arg  # a default (None)
        kind = p.kind
        if kind in ("value", "pred"):
            want = "bool" if kind == "pred" else p.arg
            return self.checked_value(arg, want, what)
        if kind in ("values", "regs", "index"):
            if not isinstance(arg, (ir.TupleExpr, ir.ListExpr)):
                raise TilecError(f"{what} must be a tuple of {'registers' if kind == 'regs' else 'values'}", arg.span or call.span)
            if kind == "regs":
                return self.register_list(arg, p.arg, what, writebacks)
            want = None if kind == "index" else p.arg
            # PTX vector operands `{a, b}` take registers only
            return Operands([self.reg(self.checked_value(a, want, what)) for a in arg.items])
        if kind == "reg":
            return self.lvalue(arg, p.arg, what, writebacks)
        if kind == "shared_addr":
            t = self.syms.type_of(arg)
            if t not in ("shared_ptr", "u32"):
                raise TilecError(f"{what} must be a shared-memory address (b.ptr_to([..]) or address_of), got {t}",
                                 arg.span or call.span)
            return self.value(arg)
        if kind == "mem_addr":
            t = self.syms.type_of(arg)
            if t not in ("shared_ptr", "global_ptr"):
                raise TilecError(f"{what} must be the address of a shared or global element (b.ptr_to([..]) or "
                                 f"address_of), got {t}", arg.span or call.span)
            return self.value(arg)
        if kind == "generic_addr":
            t = self.syms.type_of(arg) if not self._is_tensormap(arg) else "generic_ptr"
            if t not in ("generic_ptr", "u64"):
                raise TilecError(f"{what} must be a generic address, got {t}", arg.span or call.span)
            return self.address_of_expr(arg, arg.span) if self._is_tensormap(arg) else self.value(arg)
        if kind == "buffer":
            return self.syms.buffer_of(arg)
        if kind == "element":
            if not isinstance(arg, ir.Index):
                raise TilecError(f"{what} must be a buffer element", arg.span or call.span)
            return self.element_ref(arg)
        return arg  # layout, expr: the row interprets the expression

    def register_list(self, arg, want: str, what: str, writebacks) -> Operands:
        """The registers of a `regs` operand.  When they are all registers
        of register-array elements they are kept per tuple node, until a
        register array is declared again (`register_refs`): a lowered GEMM
        hands the same accumulator tuple to every wgmma of its K loop."""
        hit = self.register_lists.get(id(arg))
        if hit is not None and hit[0] is arg and hit[1] == want:
            return hit[2]
        pair = self._pair_type(arg.items, want)
        if pair is not None:
            ops = Operands([self.packed_pair(lo, hi, pair, what) for lo, hi in self._two_by_two(arg, what)])
        else:
            written = len(writebacks)
            ops = Operands([self.lvalue(a, want, what, writebacks) for a in arg.items])
            if len(writebacks) != written or not all(type(a) is ir.Index for a in arg.items):
                return ops  # a temporary stored back, or a mutable scalar's register
        self.register_lists[id(arg)] = (arg, want, ops)
        return ops

    def _pair_type(self, items, accepted: str) -> Optional[str]:
        """"f16x2" (or "bf16x2") when a `regs` operand accepting it is given
        elements of that 16-bit type: they are taken two to a register."""
        if not items:
            return None
        pair = f"{self.syms.type_of(items[0])}x2"
        return pair if pair in accepted.split("|") else None

    @staticmethod
    def _two_by_two(arg, what):
        items = arg.items
        if len(items) % 2:
            raise TilecError(f"{what} takes 16-bit elements in pairs, got {len(items)}", arg.span)
        return zip(items[0::2], items[1::2])

    def packed_pair(self, lo: ir.Expr, hi: ir.Expr, pair: str, what: str) -> Operand:
        """The b32 register whose low and high halves are elements `lo` and
        `hi` of a packed register array (`addressing`), as a `pair` operand."""
        refs = [self.element_ref(x) if isinstance(x, ir.Index) else None for x in (lo, hi)]
        if not all(r is not None and r.word is not None for r in refs) or refs[0].word != refs[1].word \
                or (refs[0].half, refs[1].half) != (0, 1):
            raise TilecError(
                f"{what} must be pairs of elements of a packed {pair[:-2]} register array, each pair the low and "
                f"high halves of one register (consecutive slots from an even one, in registers, never "
                f"indexed at run time)", lo.span)
        return Operand(refs[0].word.text, pair)

    def _is_tensormap(self, e: ir.Expr) -> bool:
        return isinstance(e, ir.Name) and self.syms.lookup(e.id, e.span).kind == "tensormap"

    def checked_value(self, arg: ir.Expr, want: Optional[str], what: str) -> Operand:
        """`arg` as a value of type `want` (any type for None or "any"), a
        located error when it is not assignable.  A register-array element
        read before is its register (`kept_register`), as `value` finds it:
        a lowered epilogue hands every accumulator to an instruction."""
        kept = self.kept_register(arg) if type(arg) is ir.Index else None
        if want in (None, "any"):
            return kept[0] if kept is not None else self.value(arg)
        t = kept[1] if kept is not None else self.read_type(arg)
        if not assignable(t, want, arg):
            raise TilecError(f"{what} must be a {want}, got a {t} (use convert)", arg.span)
        if kept is None:
            return self.value(arg, want)
        reg = kept[0]
        return reg if reg.type == want else self.convert(reg, want, None, arg.span)

    def lvalue(self, arg: ir.Expr, want: str, what: str, writebacks) -> Operand:
        """The register an intrinsic writes for `arg`: a mutable scalar's or a
        register-array element's own register, or a temporary stored back to
        a memory element after the instruction."""
        kind = type(arg)
        if kind is ir.Index:
            reg = self.element_ref(arg, read=True).reg
            if reg is None:
                reg = self.regs.temp(self.syms.type_of(arg))
                writebacks.append((arg, reg))
        elif kind is ir.Name:
            sym = self.syms.lookup(arg.id, arg.span)
            if sym.kind != "scalar":
                raise TilecError(f"{what}: '{arg.id}' is not a mutable scalar", arg.span)
            reg = self.binding(arg)
        else:
            raise TilecError(f"{what} must be a register-array element or a mutable scalar", arg.span)
        if reg.type not in _register_types(want):
            raise TilecError(f"{what} must be a {want} register, got a {reg.type}", arg.span)
        return reg

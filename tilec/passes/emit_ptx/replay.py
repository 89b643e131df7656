"""Recorded instruction sequences, replayed with new register numbers.

A lowered kernel evaluates the same few things over and over: an unrolled
epilogue computes `lane // 4 + warp_id * 16` for every element it stores,
and every element of a buffer goes through the same digit, stride and
swizzle arithmetic of its layout.  The PTX must keep every one of those
instructions (the emitter does no common-subexpression elimination: ptxas
does), but the decisions that produce them (typing, folding, identities,
strength reduction, one Python call per operand) need not be taken again.

So a piece of emission whose text depends only on a key (the shape of an
expression, the types of the operands it reads, which of them are
immediates and their values) is recorded the second time the key is met:
its lines become a format string in which the registers it read
(`params`) and the registers it created are placeholders.  From the third
time on, the lines are formatted with the current operands and freshly
numbered registers, in the same order and numbering that emitting them
would give, so the output is byte-identical.  A piece that made a label is
not recorded (labels are not renumbered), nor one whose parameters share a
register (a placeholder each could not say which).

`.loc` lines are not part of a recording: the replay writes one where
`line` would (the first instruction of a statement).
"""
from __future__ import annotations

import operator
import re
from typing import Callable, Optional, Sequence

from tilec.compiler import ir
from tilec.passes.emit_ptx.registers import Operand

_REGISTER = re.compile(r"%(?:rd|rs|fd|r|f|p)\d+")
"""A virtual register's name in an instruction (`registers._CLASS`)."""

_TEXT = operator.attrgetter("text")

_SEEN = object()
"""A key met once: not recorded yet (most keys are never met again)."""

_NEVER = object()
"""A key whose emission cannot be replayed (it made a label)."""

REPLAYED = frozenset({ir.Binary, ir.Unary, ir.Select})
"""The expressions whose emission `expressions.value` replays when their
shape allows: the others emit one instruction or none."""

_SHAPE_KINDS = REPLAYED | {ir.Name, ir.Int, ir.Float, ir.Bool}
"""The expression nodes whose emission reads nothing but their operands'
registers: no memory, no call, no label (an `and`, `or` or select of such
operands emits no branch)."""


class Recording:
    """A recorded piece of emission: `text`, its lines joined by newlines
    with `{i}` for the i-th register (the parameters, then the new
    registers), `fresh` the new registers per class ((prefix, count) in the
    order `Registers` numbers them), and `outputs`, how to rebuild each
    result: ("param", i) the i-th parameter itself, ("reg", i, type, temp,
    divisor) an operand on the i-th register, or ("const", value)."""

    __slots__ = ("text", "fresh", "outputs")

    def __init__(self, text: Optional[str], fresh: tuple, outputs: tuple):
        self.text, self.fresh, self.outputs = text, fresh, outputs


class Replays:
    """One kernel's recordings and expression shapes: `recordings` key ->
    Recording or a marker (`Replay.replayed`); `memo` id(node) -> (the node,
    its shape id or None), `ids` a shape's key -> its id, `names` shape id
    -> the names it reads (`Replay.shape`), `types` shape id -> the value
    type of its expressions (`Replay.shape_type`)."""

    __slots__ = ("recordings", "memo", "ids", "names", "types")

    def __init__(self):
        self.recordings, self.memo, self.ids, self.names, self.types = {}, {}, {}, [], {}


def signature(op: Operand) -> tuple:
    """What the emission of an instruction takes from an operand: its type,
    and an immediate's text (a register's name is a parameter)."""
    return (op.type, op.temp) if op.is_reg else (op.type, None, op.text)


class Replay:
    """Mixed into `KernelEmitter`; uses `lines`, `regs`, `visible`, `syms`,
    `locate`, `location` and `located`, and keeps its state in `replays`
    (`Replays`)."""

    def replayed(self, key, params: Sequence[Operand], emit: Callable[[], tuple]) -> tuple:
        """`emit()` (a tuple of operands and ints), or its recording for `key`
        replayed with `params` (the registers it reads that the key leaves
        open, in an order the key fixes)."""
        recordings = self.replays.recordings
        rec = recordings.get(key)
        if type(rec) is Recording:
            return self._replay(rec, params)
        if rec is None:
            recordings[key] = _SEEN
            return emit()
        if rec is _NEVER:
            return emit()
        start, counts, labels = len(self.lines), dict(self.regs.counts), self.regs.labels
        outputs = emit()
        recordings[key] = self._record(start, counts, labels, params, outputs)
        return outputs

    def _record(self, start: int, counts: dict, labels: int, params, outputs):
        if self.regs.labels != labels:
            return _NEVER
        names = {}
        for p in params:
            if p.text in names:
                return _NEVER
            names[p.text] = "{%d}" % len(names)
        fresh = []
        for prefix, n in self.regs.counts.items():
            if n != counts[prefix]:
                fresh.append((prefix, n - counts[prefix]))
                for i in range(counts[prefix] + 1, n + 1):
                    names[f"{prefix}{i}"] = "{%d}" % len(names)
        place = lambda m: names.get(m[0], m[0])
        lines = [_REGISTER.sub(place, line.replace("{", "{{").replace("}", "}}"))
                 for line in self.lines[start:] if not line.startswith("\t.loc ")]
        shapes = []
        for out in outputs:
            if type(out) is not Operand:
                shapes.append(("const", out))
                continue
            for i, p in enumerate(params):
                if out is p:
                    shapes.append(("param", i))
                    break
            else:
                slot = names.get(out.text) if out.is_reg else None
                if slot is None:
                    shapes.append(("const", out))
                else:
                    shapes.append(("reg", int(slot[1:-1]), out.type, out.temp, out.divisor))
        return Recording("\n".join(lines) if lines else None, tuple(fresh), tuple(shapes))

    def _replay(self, rec: Recording, params: Sequence[Operand]) -> tuple:
        args = list(map(_TEXT, params))
        counts = self.regs.counts
        for prefix, n in rec.fresh:  # the new registers, numbered as `Registers.new` numbers them
            c = counts[prefix]
            counts[prefix] = c + n
            args += map(prefix.__add__, map(str, range(c + 1, c + n + 1)))
        if rec.text is not None:
            if self.location != self.located:
                self.locate()
            self.lines += rec.text.format(*args).split("\n")
        out = []
        for shape in rec.outputs:
            kind = shape[0]
            if kind == "const":
                out.append(shape[1])
            elif kind == "param":
                out.append(params[shape[1]])
            else:
                out.append(Operand(args[shape[1]], shape[2], True, shape[3], shape[4]))
        return out

    # ---- expressions ------------------------------------------------------

    def value_key(self, sid: int, want: Optional[str]):
        """(key, params) of the value of an expression of shape `sid`
        converted to `want`: the shape, `want` and the signatures of the
        operands its names are bound to (their registers are the params);
        None when a name is not bound (`binding` reports it)."""
        key, params = [sid, want], []
        visible = self.visible
        for name in self.replays.names[sid]:
            op = visible.get(name)
            if op is None:
                return None, None
            key.append(signature(op))
            if op.is_reg:
                params.append(op)
        return tuple(key), params

    def shape_type(self, e: ir.Expr) -> str:
        """`syms.type_of(e)`, kept per shape: the type of an expression of
        names, constants and operators follows from its shape (a name has
        one type in a kernel, an int literal's type depends on its value),
        and an unrolled kernel asks for the type of the same index
        expression, a new node each time, at every element it addresses
        (the analysis types each new node again, operand by operand)."""
        sid = self.shape(e)
        if sid is None:
            return self.syms.type_of(e)
        types = self.replays.types
        t = types.get(sid)
        if t is None:
            t = types[sid] = self.syms.type_of(e)
        return t

    def shape(self, e: ir.Expr) -> Optional[int]:
        """A number for `e`'s structure (spans aside; names by name), the same
        for equal expressions of this kernel; None when `e` is not made of
        `_SHAPE_KINDS` only."""
        kind = type(e)
        if kind not in _SHAPE_KINDS:
            return None
        shaped = self.replays
        hit = shaped.memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if kind is ir.Binary:
            a = self.shape(e.lhs)
            b = None if a is None else self.shape(e.rhs)
            key = None if b is None else (e.op, a, b)
        elif kind is ir.Name:
            key = e.id
        elif kind is ir.Int or kind is ir.Bool:
            key = (kind, e.value)
        elif kind is ir.Unary:
            a = self.shape(e.operand)
            key = None if a is None else (e.op, a)
        elif kind is ir.Float:
            key = (kind, repr(e.value))  # 0.0 and -0.0 are different immediates
        else:
            parts = (self.shape(e.cond), self.shape(e.then), self.shape(e.orelse))
            key = None if None in parts else parts
        sid = None if key is None else shaped.ids.get(key)
        if sid is None and key is not None:
            sid = shaped.ids[key] = len(shaped.names)
            names = (e.id,) if kind is ir.Name else ()
            if kind is ir.Binary or kind is ir.Unary or kind is ir.Select:
                for part in key if kind is ir.Select else key[1:]:  # the operands' shapes
                    names += tuple(n for n in shaped.names[part] if n not in names)
            shaped.names.append(names)
        shaped.memo[id(e)] = (e, sid)
        return sid

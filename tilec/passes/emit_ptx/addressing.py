"""Buffer elements: addresses from layouts, register arrays, vector moves.

An element `b[i, j]` is located by the buffer's layout (row-major when none
is given): the layout is grouped by the buffer's shape
(`layout_shape.group`), each index is cut into the digits of its dim's
iterators, and digit * stride is summed per axis -- `m` for memory, `TLane`
and `TCol` for tensor memory.  A swizzle XORs the `m` offset last, on
element offsets (its bits are chosen so that this is the byte-address XOR
the hardware applies).  Arithmetic on constant indices folds, so a constant
element costs nothing.

Local buffers are register arrays: a thread holds the `m` part of its
elements (thread axes dropped, `layout.storage`), one virtual register each.
When any access to a local buffer (or a view of it) uses a run-time index,
its storage moves to `.local` memory instead, since registers cannot be
indexed.  A 16-bit float array that an instruction writes in packed pairs
(wgmma's f16 accumulator, `regs(f16x2)`) is packed: slots 2i and 2i + 1
are the low and high halves of its b32 register i, so the asynchronous
instruction and later reads see the same registers; an element read
unpacks its word and a write repacks it (ptxas keeps the halves in place).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence


from tilec.compiler import records
from tilec.compiler import ir
from tilec.compiler.diagnostics import TilecError
from tilec.compiler.divisors import known_divisor
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.layout import TileLayout, fuse_contiguous, storage_size
from tilec.compiler.layout_axes import LayoutError, is_thread
from tilec.compiler.symbols import Buffer, check_element
from tilec.compiler.value_types import literal_type, value_type_of_dtype
from tilec.passes.emit_ptx.expressions import imm_value, wrap
from tilec.passes.emit_ptx.registers import Operand
from tilec.passes.emit_ptx.replay import signature

_SMALL = 1 << 31  # constant digits, strides and offsets below this fold as Python ints (`axis_offsets`)

_ONLY_M = "m".__eq__
"""The axes a register array's slot keeps (`axis_offsets`' `keep`): m only;
str's own comparison, a predicate that costs no Python frame."""

_SPACE = {"global": "global", "shared": "shared", "shared.dyn": "shared", "local": "local"}


def mem_type(dtype: str) -> str:
    """The ld/st type of one element (16- and 8-bit floats move as raw bits)."""
    d = DTYPES[dtype]
    if d.name in ("f16", "bf16"):
        return "b16"
    if d.name in ("e4m3", "e5m2"):
        return "b8"
    return d.ptx


def _constant_key(name: str, indices: Sequence[ir.Expr]) -> Optional[tuple]:
    """(name, *indices) when every index is a constant, else None (asked for
    every element an instruction names: a loop, no comprehension's frame)."""
    key = [name]
    for i in indices:
        if type(i) is not ir.Int:
            return None
        key.append(i.value)
    return tuple(key)


def _element_key(e: ir.Index) -> Optional[tuple]:
    """(buffer name, *indices) of an element at constant indices, else None."""
    return _constant_key(e.base.id, e.indices) if type(e.base) is ir.Name else None


@records.frozen
class Ref:
    """Where one element lives: a register, or an address in a state space."""

    reg: Optional[Operand] = None
    space: Optional[str] = None
    addr: Optional[Operand] = None
    word: Optional[Operand] = None  # the b32 register of a packed array's element ...
    half: int = 0  # ... and which half: 0 the low 16 bits, 1 the high


@records.frozen
class RegRun:
    """n storage-consecutive slots of a register array from slot `first`:
    `regs` has one register per slot, or, `packed`, one b32 word per two."""

    regs: List[Operand]
    first: int
    n: int
    packed: bool

    def aligned_words(self) -> Optional[List[Operand]]:
        """The run's words when it is whole words of a packed array."""
        if self.packed and self.first % 2 == 0 and self.n % 2 == 0:
            return self.regs[self.first // 2:(self.first + self.n) // 2]
        return None


def _swizzled_int(v: int, sw, t: str) -> int:
    """`Addressing.swizzled` of a constant offset `v`: what the folding
    `arith` computes for `_swizzle`, on ints."""
    p, b, a = sw.per_element, sw.swizzle_bits, sw.atom_bits
    bits = wrap(wrap(v >> (p + a), t) & ((1 << b) - 1), t)
    return wrap(v ^ wrap(bits << p, t), t)


class Addressing:
    """Mixed into `KernelEmitter`; uses `value`, `arith`, `convert`, `line`,
    `regs`, `syms`, and the tables `bases` (buffer name -> base address
    operand), `reg_arrays` (storage root -> list of registers) and
    `packed_arrays` (storage root -> its b32 words), and keeps
    its per-buffer caches in `grouped`, `const_slots`, `register_refs` and
    `index_refs` (layouts are `Buffer.tile_layout`, cached on the buffer)."""

    # ---- layouts --------------------------------------------------------

    def dim_iters(self, buf: Buffer):
        """The buffer's grouped layout (`Buffer.grouped`) and per dim its
        iterators outermost first, contiguous runs fused; kept per buffer
        (`layout_memo` keys on the id of a dim's list)."""
        cached = self.grouped.get(buf.name)
        if cached is not None:
            return cached
        g = buf.grouped
        cached = self.grouped[buf.name] = g, [fuse_contiguous(g.dim(d)) for d in range(len(buf.shape))]
        return cached

    def axis_offsets(self, buf: Buffer, indices: Sequence[ir.Expr], keep, t: str) -> Dict[str, Operand]:
        """Per axis in `keep` (a predicate on axis names), the offset of element
        `indices` before the swizzle; other axes' digits are not computed.
        `layout_memo` keeps, per (id(a dim's iterators), keep), the iterators
        whose digits count and their axes; per (that, index, type) a constant
        index's terms (`_constant_digits`); and per (buffer name, "memory" or
        "tmem") the keep of `memory_offset` and `tmem_address`."""
        g, dims = self.dim_iters(buf)
        sums: Dict[str, object] = {}  # per axis: an int while every term so far is constant, else an Operand
        for idx_expr, iters in zip(indices, dims):
            if type(idx_expr) is ir.Int and 0 <= idx_expr.value < _SMALL:
                self._constant_digits(idx_expr.value, iters, keep, t, sums)
                continue
            idx = self.value(idx_expr, t)
            if not idx.is_reg and 0 <= imm_value(idx) < _SMALL:
                self._constant_digits(imm_value(idx), iters, keep, t, sums)
                continue
            plan = self.layout_memo.get((id(iters), keep))
            if plan is None:  # the iterators whose digits count, innermost first, and their axes
                kept = tuple(j for j in range(len(iters) - 1, -1, -1) if iters[j].extent > 1 and keep(iters[j].axis))
                plan = self.layout_memo[id(iters), keep] = kept, tuple({iters[j].axis: None for j in kept})
            kept, axes = plan
            key, params = ["dim", id(iters), kept, t, signature(idx)], [idx] if idx.is_reg else []
            for axis in axes:
                s = sums.get(axis)
                if type(s) is Operand:
                    key.append(signature(s))
                    if s.is_reg:
                        params.append(s)
                else:
                    key.append(s)
            new = self.replayed(tuple(key), params, lambda: self._digits(idx, iters, kept, axes, t, sums))
            sums.update(zip(axes, new))
        for name, value in g.layout.offset:
            if keep(name):
                base = sums.get(name, 0)
                sums[name] = self.arith("+", self._operand(base, t), self.imm(value, t), t)
        return {axis: self._operand(v, t) for axis, v in sums.items()}

    def _digits(self, idx: Operand, iters, kept: tuple, axes: tuple, t: str, sums) -> tuple:
        """`axis_offsets` for one index `idx` in a register: the terms of the
        digits of iterators `kept` (innermost first) added to `sums`; the
        new sums of `axes`, the axes of those iterators (a recording's
        outputs: the same index arithmetic recurs for every element)."""
        inner = 1
        for j in range(len(iters) - 1, -1, -1):
            it = iters[j]
            if j in kept:
                digit = self.arith("//", idx, self.imm(inner, t), t)
                if j > 0:  # the outermost digit of an in-bounds index needs no wrap
                    digit = self.arith("%", digit, self.imm(it.extent, t), t)
                term = self.arith("*", digit, self.imm(it.stride, t), t)
                self._add_term(sums, it.axis, term, t)
            inner *= it.extent
        return tuple(sums[axis] for axis in axes)

    def _constant_digits(self, v: int, iters, keep, t: str, sums) -> None:
        """`axis_offsets` for one constant index `v` in [0, 2**31): its digits
        and terms are Python ints, computed as the folding `arith` would
        (wrapped to `t` where a product may leave the range), so a constant
        element costs no operands; the constants of the layout are checked
        to fit as `imm` checks them."""
        for axis, term in self._constant_terms(v, iters, keep, t):
            s = sums.get(axis)
            if s is None:
                sums[axis] = term
            else:
                self._add_term(sums, axis, term, t)

    def _constant_terms(self, v: int, iters, keep, t: str) -> tuple:
        """The (axis, term) of each digit of constant index `v` in `iters`
        that `keep` keeps, kept per dim, keep, value and type in
        `layout_memo`: the elements of a register array share their
        indices' values."""
        key = (id(iters), keep, v, t)
        kept = self.layout_memo.get(key)
        if kept is not None:
            return kept
        terms = []
        inner = 1
        for j in range(len(iters) - 1, -1, -1):
            it = iters[j]
            if it.extent > 1 and keep(it.axis):
                if not (inner < _SMALL and it.extent < _SMALL and 0 <= it.stride < _SMALL):
                    self.imm(inner, t), self.imm(it.extent, t), self.imm(it.stride, t)  # the errors `imm` gives
                digit = v // inner
                if j > 0:
                    digit %= it.extent
                term = digit * it.stride
                if not 0 <= term < _SMALL:
                    term = wrap(term, t)
                terms.append((it.axis, term))
            inner *= it.extent
        kept = self.layout_memo[key] = tuple(terms)
        return kept

    def _add_term(self, sums, axis: str, term, t: str) -> None:
        """sums[axis] += term; ints add as ints (wrapped to `t` as the folding
        `arith` wraps), anything else through `arith`."""
        s = sums.get(axis)
        if s is None:
            sums[axis] = term
        elif type(s) is int and type(term) is int:
            s += term
            sums[axis] = s if 0 <= s < _SMALL else wrap(s, t)
        else:
            sums[axis] = self.arith("+", self._operand(s, t), self._operand(term, t), t)

    def _operand(self, v, t: str) -> Operand:
        return self.imm(v, t) if type(v) is int else v

    def swizzled(self, m: Operand, layout: TileLayout, t: str) -> Operand:
        sw = layout.swizzle
        if sw is None or sw.swizzle_bits == 0:
            return m
        p, b, a = sw.per_element, sw.swizzle_bits, sw.atom_bits
        if not m.is_reg:
            return self.imm(_swizzled_int(imm_value(m), sw, t), t)
        return self.replayed(("swizzle", p, b, a, t, signature(m)), [m], lambda: (self._swizzle(m, p, b, a, t),))[0]

    def _swizzle(self, m: Operand, p: int, b: int, a: int, t: str) -> Operand:
        src = self.arith(">>", m, self.imm(p + a, "u32"), t)
        bits = self.arith("&", src, self.imm((1 << b) - 1, t), t)
        return self.arith("^", m, self.arith("<<", bits, self.imm(p, "u32"), t), t)

    def _extents(self, buf: Buffer) -> list:
        """[whether `buf` has runtime extents, whether a dim has 2**31
        elements or more, whether it spans 2**31 bytes (None until
        `offset_type` asks)], kept per buffer (in `layout_memo`, by its name):
        asked for every element."""
        facts = self.layout_memo.get(buf.name)
        if facts is None:
            facts = self.layout_memo[buf.name] = [bool(buf.runtime_dims),
                                              any(type(e) is int and e >= 2**31 for e in buf.shape), None]
        return facts

    def _check_index_width(self, buf: Buffer, indices: Sequence[ir.Expr], span) -> None:
        """Refuse a 32-bit index into a dimension of 2**31 elements or more:
        it cannot reach the upper half, and the arithmetic that made it
        wrapped around (a silent wrong address otherwise)."""
        for d, (index, extent) in enumerate(zip(indices, buf.shape)):
            if isinstance(extent, str) or extent < 2**31 or isinstance(index, ir.Int):
                continue
            if self.syms.type_of(index) not in ("i64", "u64"):
                raise TilecError(
                    f"dimension {d} of '{buf.name}' has {extent} elements, more than a 32-bit index "
                    f"reaches; split the dimension so that each index stays below 2**31 "
                    f"(e.g. [{extent // 256}, 256]) or index it with an i64 value",
                    getattr(index, "span", None) or span,
                )

    def offset_type(self, buf: Buffer, indices: Sequence[ir.Expr]) -> str:
        """i32 unless an index is 64-bit or the buffer holds 2**31 bytes or
        more (a buffer with runtime extents holds fewer than 2**31
        elements: the launch refuses a larger one)."""
        wide = False
        for i in indices:  # (a constant index's type is its literal's: no node to type)
            wide = (literal_type(i.value) if type(i) is ir.Int else self.shape_type(i)) in ("i64", "u64")
            if wide:
                break
        if wide:
            return "i64"
        facts = self._extents(buf)
        big = facts[2]
        if big is None:  # (asked only here: `nbytes` may be an error the wide index avoids)
            big = facts[2] = not facts[0] and buf.nbytes >= 2**31
        return "i64" if big else "i32"

    def runtime_offset(self, buf: Buffer, indices: Sequence[ir.Expr], t: str) -> Operand:
        """The row-major offset of an element of a buffer with runtime
        extents, `(i0 * e1 + i1) * e2 + i2`, extents read from the dims'
        parameters (no wrap: every index of an in-bounds element is below
        its extent)."""
        offset = None
        for index, extent in zip(indices, buf.shape):
            idx = self.value(index, t)
            if offset is None:
                offset = idx
                continue
            size = self.value(ir.Name(extent), t) if isinstance(extent, str) else self.imm(extent, t)
            offset = self.arith("+", self.arith("*", offset, size, t), idx, t)
        return offset if offset is not None else self.imm(0, t)

    def memory_offset(self, buf: Buffer, indices: Sequence[ir.Expr], span) -> Operand:
        """The swizzled `m` offset (in elements) of a memory buffer's element."""
        runtime, huge, _ = self._extents(buf)
        if huge:
            self._check_index_width(buf, indices, span)
        t = self.offset_type(buf, indices)
        if runtime:
            return self.runtime_offset(buf, indices, t)

        # one keep per buffer (kept: it keys the constant terms), made at its first element: what it
        # refuses depends on the layout alone, so that element is the one that reports it
        keep = self.layout_memo.get((buf.name, "memory"))
        if keep is None:
            def keep(axis):
                if axis == "m":
                    return True
                raise TilecError(
                    f"the layout of {buf.scope} buffer '{buf.name}' places elements on axis '{axis}'; "
                    "only register arrays are spread over threads",
                    span,
                )

            self.layout_memo[buf.name, "memory"] = keep
        offs = self.axis_offsets(buf, indices, keep, t)
        return self.swizzled(offs.get("m", self.imm(0, t)), buf.tile_layout, t)

    # ---- addresses ------------------------------------------------------

    def element_address(self, buf: Buffer, indices: Sequence[ir.Expr], span) -> Operand:
        """The address of one element: a global_ptr, a shared_ptr, a local
        u32, or for tensor memory the u32 `base + (lane << 16) + column`."""
        if buf.scope == "tmem":
            return self.tmem_address(buf, indices, span)
        base = self.bases[buf.name]
        m = self.memory_offset(buf, indices, span)
        return self.offset_address(base, m, buf.elem_bytes)

    def offset_address(self, base: Operand, m: Operand, elem_bytes: int) -> Operand:
        """`base + m * elem_bytes` in the base's address type."""
        t = base.type
        if t == "global_ptr" and m.is_reg and m.type == "i32":
            d = self.regs.temp(t)
            self.line(f"mad.wide.s32 {d}, {m}, {elem_bytes}, {base};")
            return d
        key = ("offset", signature(base), signature(m), elem_bytes)
        return self.replayed(key, [op for op in (base, m) if op.is_reg], lambda: (self._offset(base, m, elem_bytes),))[0]

    def _offset(self, base: Operand, m: Operand, elem_bytes: int) -> Operand:
        byte = self.arith("*", m, self.imm(elem_bytes, m.type), m.type)
        return self.arith("+", base, self.convert(byte, base.type), base.type)

    def tmem_address(self, buf: Buffer, indices, span) -> Operand:
        keep = self.layout_memo.get((buf.name, "tmem"))  # one per buffer, as `memory_offset`'s
        if keep is None:
            def keep(axis):
                if axis in ("TLane", "TCol"):
                    return True
                if axis == "m" or not is_thread(axis):
                    raise TilecError(
                        f"tensor-memory buffer '{buf.name}' needs a layout on TLane and TCol (found axis '{axis}')",
                        span,
                    )
                return False

            self.layout_memo[buf.name, "tmem"] = keep
        offs = self.axis_offsets(buf, indices, keep, "u32")
        lane = self.arith("<<", offs.get("TLane", self.imm(0, "u32")), self.imm(16, "u32"), "u32")
        col = offs.get("TCol", self.imm(0, "u32"))
        return self.arith("+", self.bases[buf.name], self.arith("+", lane, col, "u32"), "u32")

    def address_of_expr(self, x: ir.Expr, span) -> Operand:
        """`address_of(b)` (the first element), `address_of(b[i, j])`, or
        `address_of(tmap)` (the tensor map parameter's generic address)."""
        if isinstance(x, ir.Name) and self.syms.lookup(x.id, x.span).kind == "tensormap":
            return self.binding(x)
        buf = self.syms.buffer_of(x)
        if isinstance(x, ir.Index):
            check_element(buf, x)
            return self.element_address(buf, x.indices, span)
        return self.element_address(buf, [ir.Int(0)] * len(buf.shape), span)

    def ptr_to(self, e: ir.Method) -> Operand:
        buf = self.syms.buffer_of(e.obj)
        index = e.args[0] if e.args else e.kwargs[0].value
        return self.element_address(buf, index.items, e.span)

    # ---- register arrays ------------------------------------------------

    def storage_slots(self, root: Buffer) -> int:
        try:
            return storage_size(root.tile_layout)
        except LayoutError as err:
            raise err.with_span(root.span)

    def local_slot(self, buf: Buffer, indices: Sequence[ir.Expr], span) -> Operand:
        """The storage index of a local element (thread axes dropped).

        Constant indices fold to an immediate and emit nothing, so that slot
        is kept per buffer: lowered kernels name the same register-array
        elements over and over (an accumulator in every wgmma, every cast)."""
        key = _constant_key(buf.name, indices)
        if key is not None:
            slot = self.const_slots.get(key)
            if slot is None:
                slot = self._constant_slot(buf, key[1:])
                if slot is not None:
                    self.const_slots[key] = slot
            if slot is not None:
                return slot
        m = self.axis_offsets(buf, indices, _ONLY_M, "i32").get("m")
        slot = self.swizzled(m if m is not None else self.imm(0, "i32"), buf.tile_layout, "i32")
        if key is not None:
            self.const_slots[key] = slot
        return slot

    def _constant_slot(self, buf: Buffer, values: Sequence[int]) -> Optional[Operand]:
        """`local_slot` of constant indices `values`: the `m` sum
        `axis_offsets` makes of their terms (`_constant_digits`) and the
        layout's offset, swizzled, computed on ints as the folding `arith`
        computes them, with one immediate at the end (every element of a
        register array comes here once: an accumulator's first wgmma names
        all of them); None when an index is outside [0, 2**31)."""
        t = "i32"
        g, dims = self.dim_iters(buf)
        m = 0
        for v, iters in zip(values, dims):
            if not 0 <= v < _SMALL:
                return None
            for _, term in self._constant_terms(v, iters, _ONLY_M, t):  # (all on axis m)
                m += term
                if not 0 <= m < _SMALL:
                    m = wrap(m, t)
        for name, value in g.layout.offset:
            if name == "m":
                self.imm(value, t)  # (the error `imm` gives for an offset that does not fit)
                m = wrap(m + value, t)
        sw = buf.tile_layout.swizzle
        return self.imm(m if sw is None or sw.swizzle_bits == 0 else _swizzled_int(m, sw, t), t)

    def element_ref(self, e: ir.Index, read: bool = False) -> Ref:
        """Where element `e` lives; with `read`, `e` is first typed as a
        value (`type_of`: the checks of a read).  A register-array element at
        constant indices is the same register wherever it is named, so its
        `Ref` is kept (`register_refs`, by buffer name and indices, and
        `index_refs`, by the node: lowered IR shares an element's node
        between the instructions naming it), with the type a read gave it
        (None before a read; `element_type`), until a register array is
        declared again: a lowered GEMM names each accumulator register in
        every instruction."""
        hit = self._kept_ref(e, read)
        if hit is not None:
            return hit[1]
        key = _element_key(e)
        typed = self.element_type(e, key) if read else None
        ref = self._element_ref(e)
        if key is not None and (ref.reg is not None or ref.word is not None):
            self.register_refs[key] = (ref, typed)
            self.index_refs[id(e)] = (e, ref, typed)
        return ref

    def element_type(self, e: ir.Index, key: Optional[tuple]) -> str:
        """`type_of(e)` for a read of element `e`; at constant indices (`key`,
        `_element_key`) kept per buffer and number of indices in
        `layout_memo`: typing an element checks and reads those alone, and
        the first read of each accumulator element would type it again."""
        if key is None:
            return self.syms.type_of(e)
        typed = self.layout_memo.get((key[0], len(key)))
        if typed is None:
            typed = self.layout_memo[key[0], len(key)] = self.syms.type_of(e)
        return typed

    def _kept_ref(self, e: ir.Index, read: bool = True) -> Optional[tuple]:
        """(e, Ref, read type) of a register-array element that `element_ref`
        has kept (by this node or another at the same constant indices:
        every instruction of a lowered epilogue reads accumulator elements
        by nodes of its own), with `read` only if it was read, else None;
        nothing is computed."""
        hit = self.index_refs.get(id(e))
        if hit is not None and hit[0] is e and (hit[2] or not read):
            return hit
        key = _element_key(e)
        kept = self.register_refs.get(key) if key is not None else None
        if kept is not None and (kept[1] or not read):
            hit = self.index_refs[id(e)] = (e, *kept)
            return hit
        return None

    def kept_register(self, e: ir.Index) -> Optional[tuple]:
        """(register, read type) of an element `_kept_ref` knows, when it
        lives in a register (not half of a packed word), else None."""
        hit = self._kept_ref(e)
        return (hit[1].reg, hit[2]) if hit is not None and hit[1].reg is not None else None

    def read_type(self, e: ir.Expr) -> str:
        """`type_of(e)`; for a register-array element read before, the type
        its read gave (`_kept_ref`)."""
        if type(e) is ir.Index:
            hit = self._kept_ref(e)
            if hit is not None:
                return hit[2]
        return self.syms.type_of(e)

    def _element_ref(self, e: ir.Index) -> Ref:
        buf = self.syms.buffer_of(e)
        check_element(buf, e)
        if buf.scope == "local":
            slot = self.local_slot(buf, e.indices, e.span)
            regs = self.reg_arrays.get(buf.storage)
            if regs is not None:
                if slot.is_reg:
                    raise AssertionError("run-time index into a register array")
                return Ref(reg=self._slot_reg(regs, int(slot.text), buf, e.span))
            words = self.packed_arrays.get(buf.storage)
            if words is not None:
                if slot.is_reg:
                    raise AssertionError("run-time index into a register array")
                word = self._slot_reg(words, int(slot.text) // 2, buf, e.span)
                return Ref(word=word, half=int(slot.text) % 2)
            return Ref(space="local", addr=self.offset_address(self.bases[buf.name], slot, buf.elem_bytes))
        if buf.scope == "tmem":
            raise TilecError(f"tensor-memory buffer '{buf.name}' has no element loads or stores", e.span)
        return Ref(space=_SPACE[buf.scope], addr=self.element_address(buf, e.indices, e.span))

    def _slot_reg(self, regs: List[Operand], slot: int, buf: Buffer, span) -> Operand:
        if not 0 <= slot < len(regs):
            raise TilecError(f"element of '{buf.name}' is outside the thread's {len(regs)} registers", span)
        return regs[slot]

    def half_read(self, word: Operand, half: int, t: str) -> Operand:
        """One 16-bit half of a packed word, as a value of type `t`."""
        lo, hi = self.regs.temp(t), self.regs.temp(t)
        self.line(f"mov.b32 {{{lo}, {hi}}}, {word};")
        return (lo, hi)[half]

    def half_write(self, word: Operand, half: int, value: Operand) -> None:
        """Replace one 16-bit half of a packed word by `value`."""
        v = self.reg(value)
        lo, hi = self.regs.temp(value.type), self.regs.temp(value.type)
        self.line(f"mov.b32 {{{lo}, {hi}}}, {word};")
        self.line(f"mov.b32 {word}, {{{v if half == 0 else lo}, {hi if half == 0 else v}}};")

    def load(self, e: ir.Index) -> Operand:
        ref = self.element_ref(e, read=True)
        if ref.reg is not None:
            return ref.reg
        buf = self.syms.buffer_of(e)
        if ref.word is not None:
            return self.half_read(ref.word, ref.half, value_type_of_dtype(buf.dtype))
        d = self.regs.temp(value_type_of_dtype(buf.dtype))
        self.line(f"ld.{ref.space}.{mem_type(buf.dtype)} {d}, [{ref.addr}];")
        return d

    def store(self, target: ir.Index, value: Operand) -> None:
        """`target = value`, `value` already of the element's value type."""
        ref = self.element_ref(target)
        if ref.reg is not None:
            self.assign_reg(ref.reg, value)
            return
        if ref.word is not None:
            self.half_write(ref.word, ref.half, value)
            return
        self.line(f"st.{ref.space}.{mem_type(self.syms.buffer_of(target).dtype)} [{ref.addr}], {value};")

    # ---- vector moves ---------------------------------------------------

    def vector_copy(self, dst: ir.Index, src: ir.Index, n: int, span) -> None:
        """`copy_vec(dst, src, n)`: n storage-consecutive elements in one
        access per memory side (see builtins)."""
        dbuf, sbuf = self.syms.buffer_of(dst), self.syms.buffer_of(src)
        if dbuf.dtype != sbuf.dtype:
            raise TilecError(f"copy_vec: '{dbuf.name}' is {dbuf.dtype} but '{sbuf.name}' is {sbuf.dtype}", span)
        if n < 1:
            raise TilecError(f"copy_vec: n must be positive, got {n}", span)
        eb = dbuf.elem_bytes
        regs_src = self._vector_regs(src, sbuf, n, span)
        regs_dst = self._vector_regs(dst, dbuf, n, span)
        if regs_src is not None and regs_dst is not None:
            self._run_write(regs_dst, self._run_values(regs_src, sbuf))
            return
        nbytes = n * eb
        if nbytes not in (1, 2, 4, 8, 16):
            raise TilecError(f"copy_vec: {n} x {dbuf.dtype} is {nbytes} bytes; a vector access is 1-16 bytes, a power of two", span)
        if DTYPES[dbuf.dtype].bits < 8:
            raise TilecError(f"copy_vec: {dbuf.dtype} elements are packed; copy them as bytes", span)
        if eb == 1 and (regs_src is not None or regs_dst is not None):
            raise TilecError("copy_vec: 8-bit elements move between memories only (not to or from registers)", span)
        src_addr = None if regs_src is not None else self._vector_address(src, sbuf, n, span)
        dst_addr = None if regs_dst is not None else self._vector_address(dst, dbuf, n, span)
        # the chunks one access moves: b32 words where possible, else the whole run
        if nbytes >= 4 and eb <= 4:
            chunk_t, count = "u32", nbytes // 4
        elif eb == 8:
            chunk_t, count = "u64", n
        else:
            chunk_t, count = ("u32" if nbytes == 4 else None), 1
        if regs_src is not None:
            words = regs_src.aligned_words() if chunk_t == "u32" else None
            chunks = words if words is not None else self._pack(self._run_values(regs_src, sbuf), eb, chunk_t)
        else:
            chunks = self._vector_load(src_addr, nbytes, chunk_t, count)
        if regs_dst is not None:
            words = regs_dst.aligned_words() if chunk_t == "u32" else None
            if words is not None:
                for w, c in zip(words, chunks):
                    self.line(f"mov.b32 {w}, {c};")
                return
            if not regs_dst.packed:
                self._unpack(chunks, regs_dst.regs[regs_dst.first:regs_dst.first + n], eb, chunk_t)
                return
            values = [self.regs.temp(value_type_of_dtype(dbuf.dtype)) for _ in range(n)]
            self._unpack(chunks, values, eb, chunk_t)
            self._run_write(regs_dst, values)
        else:
            self._vector_store(dst_addr, chunks, nbytes, chunk_t, count)

    def _vector_regs(self, e: ir.Index, buf: Buffer, n: int, span) -> Optional[RegRun]:
        if buf.scope != "local" or not ({buf.storage} & (self.reg_arrays.keys() | self.packed_arrays.keys())):
            return None
        ref = self.element_ref(e)
        packed = ref.word is not None
        regs = self.packed_arrays[buf.storage] if packed else self.reg_arrays[buf.storage]
        first = int(self.local_slot(buf, e.indices, span).text)  # the slot `element_ref` found (kept)
        slots = 2 * len(regs) if packed else len(regs)
        if first + n > slots:
            raise TilecError(f"copy_vec: {n} registers from slot {first} overrun '{buf.name}' ({slots})", span)
        return RegRun(regs, first, n, packed)

    def _run_values(self, run: RegRun, buf: Buffer) -> List[Operand]:
        """The run's elements as registers (a packed array's halves unpacked)."""
        if not run.packed:
            return run.regs[run.first:run.first + run.n]
        t = value_type_of_dtype(buf.dtype)
        return [self.half_read(run.regs[s // 2], s % 2, t) for s in range(run.first, run.first + run.n)]

    def _run_write(self, run: RegRun, values: List[Operand]) -> None:
        for s, v in zip(range(run.first, run.first + run.n), values):
            if run.packed:
                self.half_write(run.regs[s // 2], s % 2, v)
            else:
                self.assign_reg(run.regs[s], v)

    def _vector_address(self, e: ir.Index, buf: Buffer, n: int, span) -> (str, Operand):
        """The address of the first element, after proving that the n
        elements from it along the last dim are consecutive in storage and
        that the access is aligned to its size."""
        if buf.scope == "tmem":
            raise TilecError("copy_vec: tensor memory is read with tcgen05.ld", span)
        if buf.runtime_dims:
            return self._runtime_vector_address(e, buf, n, span)
        layout = buf.tile_layout
        _, dims = self.dim_iters(buf)
        why = None
        inner = dims[-1][-1] if dims[-1] else None
        if n == 1:
            pass  # one element is always one naturally aligned access, whatever the layout
        elif inner is None or inner.axis != "m" or inner.stride != 1 or inner.extent % n:
            why = "the last dim's innermost iterator is not a contiguous run of a multiple of n elements"
        elif any(it.axis == "m" and it.stride % n for iters in dims for it in iters if it is not inner):
            why = "some stride is not a multiple of n"
        elif dict(layout.offset).get("m", 0) % n:
            why = "the layout's offset is not a multiple of n"
        elif self.known_divisor(e.indices[-1]) % n:
            why = f"the last index is not provably a multiple of {n}"
        elif layout.swizzle is not None and n > 1 << layout.swizzle.per_element:
            why = f"the swizzle permutes {1 << layout.swizzle.per_element}-element chunks"
        elif buf.align % (n * buf.elem_bytes) and buf.scope != "local":
            why = f"'{buf.name}' is only {buf.align}-byte aligned"
        if why is not None:
            raise TilecError(f"copy_vec: cannot move {n} elements of '{buf.name}' in one access: {why}", span)
        ref = self.element_ref(e)
        return ref.space, ref.addr

    def _runtime_vector_address(self, e: ir.Index, buf: Buffer, n: int, span) -> (str, Operand):
        """`_vector_address` for a row-major buffer with runtime extents:
        every row stride (a product of later extents, a runtime extent
        counting as the multiple its `assume` states) and the last index
        must be multiples of n."""
        why = None
        stride = 1
        for extent in reversed(buf.shape[1:]):
            stride *= self.known_divisor(ir.Name(extent)) if isinstance(extent, str) else extent
            if stride % n:
                why = (
                    f"a row stride is not provably a multiple of {n} "
                    f"(state it with assume({extent} % {n} == 0))"
                    if isinstance(extent, str)
                    else f"a row stride is not a multiple of {n}"
                )
                break
        if why is None and self.known_divisor(e.indices[-1]) % n:
            why = f"the last index is not provably a multiple of {n}"
        elif why is None and buf.align % (n * buf.elem_bytes):
            why = f"'{buf.name}' is only {buf.align}-byte aligned"
        if why is not None:
            raise TilecError(f"copy_vec: cannot move {n} elements of '{buf.name}' in one access: {why}", span)
        ref = self.element_ref(e)
        return ref.space, ref.addr

    def known_divisor(self, e: ir.Expr) -> int:
        def of_name(name):
            op = self.visible.get(name)
            return 1 if op is None else op.divisor

        return known_divisor(e, of_name)

    def _vec(self, count: int) -> str:
        return "" if count == 1 else f".v{count}"

    def _vector_load(self, where, nbytes, chunk_t, count) -> List[Operand]:
        space, addr = where
        if chunk_t is None:  # one 1- or 2-byte access
            d = self.regs.temp("u32")
            self.line(f"ld.{space}.u{nbytes * 8} {d}, [{addr}];")
            return [d]
        ds = [self.regs.temp(chunk_t) for _ in range(count)]
        regs = ds[0].text if count == 1 else "{" + ", ".join(d.text for d in ds) + "}"
        self.line(f"ld.{space}{self._vec(count)}.b{32 if chunk_t == 'u32' else 64} {regs}, [{addr}];")
        return ds

    def _vector_store(self, where, chunks, nbytes, chunk_t, count) -> None:
        space, addr = where
        if chunk_t is None:
            self.line(f"st.{space}.u{nbytes * 8} [{addr}], {chunks[0]};")
            return
        regs = chunks[0].text if count == 1 else "{" + ", ".join(c.text for c in chunks) + "}"
        self.line(f"st.{space}{self._vec(count)}.b{32 if chunk_t == 'u32' else 64} [{addr}], {regs};")

    def _pack(self, regs: List[Operand], eb: int, chunk_t) -> List[Operand]:
        """Element registers as access chunks (two 16-bit elements per b32)."""
        if eb == 2 and chunk_t == "u32":
            out = []
            for lo, hi in zip(regs[0::2], regs[1::2]):
                d = self.regs.temp("u32")
                self.line(f"mov.b32 {d}, {{{lo}, {hi}}};")
                out.append(d)
            return out
        if eb == 2:  # a single 16-bit element
            d = self.regs.temp("u32")
            self.line(f"cvt.u32.u16 {d}, {regs[0]};")
            return [d]
        return list(regs)

    def _unpack(self, chunks: List[Operand], regs: List[Operand], eb: int, chunk_t) -> None:
        if eb == 2 and chunk_t == "u32":
            for c, lo, hi in zip(chunks, regs[0::2], regs[1::2]):
                self.line(f"mov.b32 {{{lo}, {hi}}}, {c};")
            return
        if eb == 2:
            self.line(f"cvt.u16.u32 {regs[0]}, {chunks[0]};")
            return
        for c, r in zip(chunks, regs):
            self.line(f"mov.b{8 * eb} {r}, {c};")

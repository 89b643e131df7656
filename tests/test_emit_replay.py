"""emit-ptx's replays (`emit_ptx/replay.py`): a piece of emission met again
is formatted from its recording instead of being emitted again, and the PTX
is the same text, byte for byte, as emitting every piece gives."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilec.compiler.diagnostics import TilecError
from tilec.compiler.passmanager import Options
from tilec.passes.emit_ptx.emitter import KernelEmitter
from tilec.passes.emit_ptx.registers import Operand, Registers
from tilec.passes.emit_ptx.replay import Replay, Replays
from tilec.pipeline import compile_source

ROOT = Path(__file__).resolve().parent.parent


def compiled(text: str, filename: str, replay: bool, monkeypatch, **options) -> tuple:
    """(PTX, how many pieces were replayed) of `text`, with replays on or off."""
    replays = []
    real = Replay._replay

    def counted(self, rec, params):
        replays.append(rec)
        return real(self, rec, params)

    with monkeypatch.context() as m:
        m.setattr(KernelEmitter, "_replay", counted)
        if not replay:
            m.setattr(KernelEmitter, "replayed", lambda self, key, params, emit: emit())
        ptx = compile_source(text, filename, options=Options(**options)).ptx
    return ptx, len(replays)


@pytest.mark.parametrize("example", ["examples/hopper/hgemm_v7.tile", "examples/hopper/gemm_stream_k.tile",
                                     "examples/hopper/flash_attn_fwd.tile", "examples/tma_copy.tile"])
@pytest.mark.parametrize("flags", [{}, {"line_info": True}, {"debug_hangs": True}])
def test_replayed_ptx_is_the_emitted_ptx(example, flags, monkeypatch):
    path = ROOT / example
    text = path.read_text()
    ptx, replays = compiled(text, str(path), True, monkeypatch, **flags)
    emitted, none = compiled(text, str(path), False, monkeypatch, **flags)
    assert none == 0
    assert ptx == emitted
    if "tma_copy" not in example:
        assert replays > 0  # the GEMMs and attention name the same addresses again and again


def outcome(text: str, target: str, replay: bool) -> tuple:
    """The PTX of `text` for `target`, or its error and where, replays on or off."""
    with pytest.MonkeyPatch.context() as m:
        if not replay:
            m.setattr(KernelEmitter, "replayed", lambda self, key, params, emit: emit())
        try:
            return ("ptx", compile_source(text, "k.tile", target=target).ptx)
        except TilecError as err:
            return ("error", err.message, err.span)


_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "min", "max")


@st.composite
def repeating_kernels(draw) -> str:
    """A kernel whose statements draw their indices, again and again, from a
    few random integer expressions of the thread id, two names on one
    register (`b = a`, in one loop or both), a name bound to a constant, a
    wide value and a loop index, into global and
    (swizzled) shared buffers of f32, f16 or i8: the addresses and values
    a recording is made of and replayed for."""

    def expr(depth: int) -> str:
        if depth == 0 or draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(["t", "a", "b", "c", "j", "w", str(draw(st.integers(0, 70)))]))
        op = draw(st.sampled_from(_OPS))
        lhs = expr(depth - 1)
        rhs = str(draw(st.integers(1, 17))) if op in ("//", "%") else \
            str(draw(st.integers(0, 5))) if op in ("<<", ">>") else expr(depth - 1)
        return f"{op}({lhs}, {rhs})" if op in ("min", "max") else f"({lhs} {op} {rhs})"

    dtype = draw(st.sampled_from(["f32", "f16", "i8"]))
    pool = [expr(3) for _ in range(draw(st.integers(0, 3)))]
    pool.append(f"({expr(2)} + (a {draw(st.sampled_from(['+', '-', '*', '^']))} b))")  # reads a and b
    pick = lambda: f"convert({draw(st.sampled_from(pool))}, i32) % 64"
    source = draw(st.sampled_from(["A", "Sm"]))
    lines = [
        f"kernel k(A: {dtype}[64, 64], out: {dtype}[64]):",
        "    cta_id([1])",
        "    t = thread_id([64])",
        f"    Sm = alloc((64, 64), {dtype}, scope=\"shared\"{draw(st.sampled_from(['', SWIZZLED]))})",
        f"    a = t * {draw(st.integers(1, 9))} % 64",
        f"    c = {draw(st.integers(0, 70))}",
        f"    w = convert(t, i64) * {draw(st.integers(1, 1 << 40))}",
    ]
    for _ in range(2):  # b on a's register in one loop and not in the other, or in both
        lines.append(f"    for j in range(0, {draw(st.integers(1, 4))}, 1):")
        lines.append(f"        b = {draw(st.sampled_from(['a', 'a', 't', 'a + 1']))}")
        for _ in range(draw(st.integers(2, 5))):
            lines.append(f"        out[{pick()}] = {source}[{pick()}, {pick()}]")
    return "\n".join(lines) + "\n"


SWIZZLED = ", layout=mma_shared_layout(f16, 3, (64, 64))"  # 128-byte swizzle


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repeating_kernels())
def test_random_kernels_replay_as_they_emit(text):
    """A recording's key must hold everything its text depends on."""
    for target in ("sm_90a", "sm_80"):
        assert outcome(text, target, True) == outcome(text, target, False)


KERNEL = """
kernel k(A: f32[64, 64], out: f32[64]):
    cta_id([1])
    t = thread_id([64])
    a = t * 3 % 64
    b = a
    for j in range(0, 4, 1):
        out[t] = A[t // 8 * 8 + a % 8, j * 16 + b % 16] + A[t // 8 * 8 + a % 8, j * 16 + b % 16 + 1]
        out[a] = A[(a + b) // 8 * 8 + t % 8, j * 16 + t % 16] + A[(a + b) // 8 * 8 + t % 8, j * 16 + t % 16 + 1]
"""


def test_a_kernel_with_line_info_replays_as_it_emits(monkeypatch):
    """`b = a` binds both names to one register; `.loc` lines are written
    where emitting writes them (before a statement's first instruction)."""
    ptx, replays = compiled(KERNEL, "k.tile", True, monkeypatch, line_info=True)
    emitted, _ = compiled(KERNEL, "k.tile", False, monkeypatch, line_info=True)
    assert ptx == emitted
    assert replays > 0


class Pieces(Replay):
    """The state `Replay` reads, without a kernel."""

    def __init__(self):
        self.lines, self.regs, self.replays = [], Registers(), Replays()
        self.location = self.located = None

    def add(self, a: Operand, b: Operand) -> tuple:
        d = self.regs.temp("i32")
        self.lines.append(f"\tadd.s32 {d}, {a}, {b};")
        e = self.regs.temp("i32")
        self.lines.append(f"\tmov.b32 {{{e}, {d}}}, {a};")
        return d, a

    def add_later(self, a: Operand, b: Operand) -> tuple:
        return self.replayed("add", [a, b], lambda: self.add(a, b))


def test_a_recording_renumbers_its_registers_and_places_its_parameters():
    k, plain = Pieces(), Pieces()
    regs = [Operand(f"%r{i}", "i32") for i in range(1, 7)]
    k.regs.counts["%r"] = plain.regs.counts["%r"] = 6
    for a, b in zip(regs[0::2], regs[1::2]):  # met, recorded, replayed
        got, want = k.add_later(a, b), plain.add(a, b)
        assert [op.text for op in got] == [op.text for op in want] and got[1] is a
    assert k.lines == plain.lines
    assert k.lines[-2:] == ["\tadd.s32 %r11, %r5, %r6;", "\tmov.b32 {%r12, %r11}, %r5;"]
    assert type(k.replays.recordings["add"]).__name__ == "Recording"


def test_parameters_on_one_register_are_not_recorded():
    """A placeholder per parameter could not say which of the two a
    register of the recording was: the piece is emitted every time."""
    k = Pieces()
    r1, r2 = Operand("%r1", "i32"), Operand("%r2", "i32")
    k.regs.counts["%r"] = 2
    k.add_later(r1, r1)
    k.add_later(r1, r1)  # recorded here: refused
    k.add_later(r1, r2)
    assert k.lines[-2:] == ["\tadd.s32 %r7, %r1, %r2;", "\tmov.b32 {%r8, %r7}, %r1;"]
    assert type(k.replays.recordings["add"]).__name__ != "Recording"


def test_a_piece_that_made_a_label_is_not_recorded():
    """Labels are not renumbered: such a piece is emitted every time."""
    k = Pieces()

    def branch():
        k.lines.append(f"{k.regs.label('skip')}:")
        return ()

    for _ in range(3):
        k.replayed("branch", [], branch)
    assert k.lines == ["$L1_skip:", "$L2_skip:", "$L3_skip:"]


def test_the_emitter_keeps_few_enough_attributes_for_cpython_to_specialize_them(monkeypatch):
    """CPython 3.11 keeps at most 29 attributes of an instance inline; one
    more and the instance gets a dict of its own, and no `self.x` of the
    emitter (a few per PTX line) is specialized: the emitter's caches share
    attributes (`layout_memo`, `replays`) to stay under it."""
    counts = []
    real = KernelEmitter.emit

    def emit(self):
        text = real(self)
        counts.append(len(vars(self)))
        return text

    monkeypatch.setattr(KernelEmitter, "emit", emit)
    path = ROOT / "examples/hopper/hgemm_v7.tile"
    compile_source(path.read_text(), str(path), options=Options(line_info=True, debug_hangs=True))
    assert counts and max(counts) <= 29

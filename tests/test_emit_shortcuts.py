"""emit-ptx's shortcuts give the text (or the error) of the general path they
stand for: a register-array element's slot computed on ints
(`Addressing._constant_slot` for `axis_offsets` and `swizzled`), an index's
type kept per expression shape (`Replay.shape_type` for `type_of`), an
element's read type kept per buffer (`element_type`), and an element read
before handed to an instruction as its register (`kept_register` for
`read_type`, `value`, `load`)."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilec.compiler.diagnostics import TilecError
from tilec.passes.emit_ptx.emitter import KernelEmitter
from tilec.pipeline import compile_source

ROOT = Path(__file__).resolve().parent.parent

GENERAL = {
    "_constant_slot": lambda self, buf, values: None,  # local_slot goes through axis_offsets and swizzled
    "shape_type": lambda self, e: self.syms.type_of(e),
    "kept_register": lambda self, e: None,  # checked_value reads the element as any value
    "element_type": lambda self, e, key: self.syms.type_of(e),
}


def outcome(text: str, filename: str, target: str, general: bool) -> tuple:
    """The PTX of `text`, or its error and where, with the shortcuts or
    through the general path."""
    with pytest.MonkeyPatch.context() as m:
        if general:
            for name, plain in GENERAL.items():
                m.setattr(KernelEmitter, name, plain)
        try:
            return ("ptx", compile_source(text, filename, target=target).ptx)
        except TilecError as err:
            return ("error", err.message, err.span)


@pytest.mark.parametrize("example", ["examples/hopper/hgemm_v7.tile", "examples/hopper/flash_attn_fwd.tile",
                                     "examples/hopper/fp8_gemm.tile", "examples/ampere/gemm_cp_async.tile"])
def test_the_examples_emit_as_through_the_general_path(example):
    path = ROOT / example
    target = "sm_80" if "ampere" in example else "sm_90a"
    fast = outcome(path.read_text(), str(path), target, False)
    assert fast[0] == "ptx"
    assert fast == outcome(path.read_text(), str(path), target, True)


@st.composite
def register_array_kernels(draw) -> str:
    """A kernel with a register array of a random row-major or strided
    layout, maybe with an offset and a swizzle on its storage, written and
    read at random constant indices (now and then outside it: an error),
    then read back through intrinsics (a cvt pair, an f16 pack)."""
    rows, cols = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([2, 4, 8]))
    transposed = draw(st.booleans())
    strides = f"(1, {rows})" if transposed else f"({cols}, 1)"
    layout = f"S[({rows}, {cols}) : {strides}]"
    if draw(st.booleans()):
        layout += f" + O[{draw(st.integers(0, 9))}]"
    if draw(st.booleans()):
        layout = f"SW[{draw(st.integers(0, 1))}, {draw(st.integers(1, 2))}, {draw(st.integers(1, 2))}] * " + layout
    index = lambda: f"{draw(st.sampled_from([*range(rows)] * 12 + [rows]))}, {draw(st.integers(0, cols - 1))}"
    lines = [
        "kernel k(out: f16[64, 2]):",
        "    cta_id([1])",
        "    t = thread_id([64])",
        f"    r = alloc_local(({rows}, {cols}), f32, layout={layout})",
        "    h = alloc_local((2,), f16)",
    ]
    for i in range(draw(st.integers(1, 4))):
        lines.append(f"    r[{index()}] = convert(t, f32) * {i + 1}.0")
    for _ in range(draw(st.integers(1, 4))):
        lines.append(f"    ptx.cvt.f16x2.f32(h[0], h[1], r[{index()}], r[{index()}])")
        lines.append("    out[t, 0] = h[0]")
        lines.append("    out[t, 1] = h[1]")
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(register_array_kernels())
def test_random_register_arrays_emit_as_through_the_general_path(text):
    assert outcome(text, "k.tile", "sm_90a", False) == outcome(text, "k.tile", "sm_90a", True)

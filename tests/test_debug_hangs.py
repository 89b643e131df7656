"""`--debug-hangs`: every mbarrier wait is bounded and, when it runs over,
prints where it hung and traps.

The CPU tests read the PTX (it must assemble without a single ptxas warning
on both arch-specific targets) and the message it carries; the GPU test runs
examples/hang_demo.tile, whose expect_tx byte count is wrong on purpose, in
a subprocess (a trap poisons the CUDA context) and expects the report and a
failed launch within seconds instead of a hang."""
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tilec
from tilec import cli
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.ir import Span
from tilec.compiler.passmanager import HANG_TIMEOUT_NS as TIMEOUT_NS
from tilec.passes.emit_ptx.debug_hangs import message
from tilec.runtime.assemble import assemble

ROOT = Path(__file__).resolve().parent.parent
DEMO = "examples/hang_demo.tile"
DEMO_TEXT = (ROOT / DEMO).read_text()


def demo_wait_location() -> str:
    """file:line:col of the demo's try_wait, found in its text."""
    for number, line in enumerate(DEMO_TEXT.splitlines(), 1):
        col = line.find("ptx.mbarrier.try_wait(")
        if col >= 0:
            return f"{DEMO}:{number}:{col + 1}"
    raise AssertionError("the demo has no try_wait")


def compile_demo(target="sm_90a", debug_hangs=True, text=DEMO_TEXT, filename=DEMO):
    return compile_source(text, filename, target=target, options=Options(debug_hangs=debug_hangs))


def messages(ptx: str) -> dict:
    """The .global byte strings of the PTX, decoded: name -> text."""
    out = {}
    for name, size, data in re.findall(r"\.global \.align 1 \.b8 (\$\w+)\[(\d+)\] = \{([^}]*)\};", ptx):
        raw = bytes(int(b) for b in data.split(","))
        assert len(raw) == int(size) and raw.endswith(b"\0")
        out[name] = raw[:-1].decode()
    return out


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_bounded_wait_assembles_without_warnings(target):
    ptx = compile_demo(target).ptx
    assemble(ptx, target)  # any ptxas warning or error raises
    assert ".extern .func (.param .b32 func_retval0) vprintf(.param .b64 fmt, .param .b64 args);" in ptx
    assert re.search(rf"setp\.lt\.u64 %p\d+, %rd\d+, {TIMEOUT_NS};", ptx)
    assert ptx.count("%globaltimer;") == 4  # the wait's start and clock, the report's linger loop
    assert "call.uni (status), vprintf, (fmt, args);" in ptx
    assert "\ttrap;" in ptx


def test_the_message_says_kernel_location_phase_block_and_thread():
    ptx = compile_demo().ptx
    (text,) = messages(ptx).values()
    assert text.startswith("tilec --debug-hangs: kernel hang_demo: ")
    assert f" at {demo_wait_location()} " in text
    assert f"within {TIMEOUT_NS // 1_000_000} ms" in text
    assert text.endswith("phase %u, mbarrier at shared address 0x%x, block (%u, %u, %u), thread %u\n")
    # vprintf reads one 32-bit value per conversion, consecutively from the argument buffer
    conversions = re.findall(r"%[ux]", text)
    stores = re.findall(r"st\.local\.u32 \[\$hang_args0\+(\d+)\], %r\d+;", ptx)
    assert [int(s) for s in stores] == [4 * i for i in range(len(conversions))]
    specials = re.findall(r"mov\.u32 %r\d+, (%ctaid\.[xyz]|%tid\.x);\n\tst\.local", ptx)
    assert specials == ["%ctaid.x", "%ctaid.y", "%ctaid.z", "%tid.x"]


def test_a_percent_sign_in_the_file_name_is_not_a_conversion():
    text = message("k", Span("runs/50%/k.tile", 3, 5))
    assert "runs/50%%/k.tile:3:5" in text
    assert len(re.findall(r"(?<!%)%[ux]", text.replace("%%", ""))) == 6
    assert " at (no source location) " in message("k", None)


def test_without_the_flag_the_wait_is_the_plain_loop():
    ptx = compile_demo(debug_hangs=False).ptx
    for absent in ("vprintf", "%globaltimer", "trap;", "$hang_"):
        assert absent not in ptx
    assert re.search(
        r"(\$L\d+_wait):\n\tmbarrier\.try_wait\.parity\.shared::cta\.b64 (%p\d+), \[%r\d+\], 0;\n\t@!\2 bra \1;", ptx
    )
    assert compile_source(DEMO_TEXT, DEMO).ptx == ptx  # the default options


def test_the_demo_expects_more_bytes_than_its_copy_brings():
    """What makes the demo hang: the mbarrier waits for bytes that never come."""
    result = compile_demo(debug_hangs=False)
    (tmap,) = result.meta["kernels"][0]["tensormaps"]
    box_bytes = 2 * tmap["box"][0] * tmap["box"][1]  # f16
    (expected,) = re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", result.ptx)
    assert int(expected) > box_bytes


TWO_WAITS = """\
kernel pingpong(A: f32[32]):
    cta_id([1]); tid = thread_id([32])
    bars = alloc([2], u64, scope="shared")
    if tid == 0:
        ptx.mbarrier.init(bars.ptr_to([0]), 32)
        ptx.mbarrier.init(bars.ptr_to([1]), 32)
    cuda.cta_sync()
    for i in unroll(2):
        ptx.mbarrier.arrive(bars.ptr_to([0]))
        ptx.mbarrier.try_wait(bars.ptr_to([0]), i % 2)
    ptx.mbarrier.arrive(bars.ptr_to([1]))
    ptx.mbarrier.try_wait(bars.ptr_to([1]), 0)
    A[tid] = 1.0

kernel other(A: f32[32]):
    cta_id([1]); tid = thread_id([32])
    bar = alloc([1], u64, scope="shared")
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 32)
    cuda.cta_sync()
    ptx.mbarrier.arrive(bar.ptr_to([0]))
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
"""


def test_each_wait_is_bounded_and_each_site_named_once():
    ptx = compile_demo(text=TWO_WAITS, filename="two.tile").ptx
    assemble(ptx, "sm_90a")
    texts = sorted(messages(ptx).values())
    assert [re.search(r"kernel (\w+): .* at (two\.tile:\d+:\d+) ", t).groups() for t in texts] == [
        ("other", "two.tile:22:5"), ("pingpong", "two.tile:10:9"), ("pingpong", "two.tile:12:5"),
    ]  # fmt: skip
    assert ptx.count("\ttrap;") == 4  # the unrolled site twice, and one wait each
    for kernel in ("pingpong", "other"):
        body = ptx.split(f".entry {kernel}(", 1)[1].split("\n}\n", 1)[0]
        assert len(re.findall(r"\.local \.align 8 \.b8 \$hang_args\d+\[24\];", body)) == 1


def test_driver_flag(capsys):
    assert cli.main(["--debug-hangs", str(ROOT / DEMO), "-o", "-"]) == 0
    assert "call.uni (status), vprintf" in capsys.readouterr().out
    assert cli.main([str(ROOT / DEMO), "-o", "-"]) == 0
    assert "vprintf" not in capsys.readouterr().out


def test_tilec_compile_takes_the_option(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path))
    plain = tilec.compile(ROOT / DEMO)
    bounded = tilec.compile(ROOT / DEMO, options=Options(debug_hangs=True))
    assert "vprintf" not in plain.ptx and "vprintf" in bounded.ptx


# The child launches the demo once: exit 3 and the CUDA error on stdout when
# the launch fails, 0 when it returns (it must not), a timeout when it hangs.
_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tilec
    from tilec.compiler.passmanager import Options
    from tilec.runtime.driver import CudaError
    module = tilec.compile(sys.argv[1], target=sys.argv[2], options=Options(debug_hangs=True))
    a = np.arange(8 * 64, dtype=np.float16).reshape(8, 64)
    try:
        module.kernel()(a, np.zeros_like(a))
    except CudaError as e:
        print("launch failed:", e.detail, flush=True)
        sys.exit(3)
    print("launch returned", flush=True)
    """
)


@pytest.mark.gpu
def test_hang_demo_reports_and_traps_instead_of_hanging():
    from tilec.runtime import driver

    target = {(9, 0): "sm_90a", (10, 0): "sm_100a"}.get(driver.device().compute_capability)
    if target is None:
        pytest.skip("the demo uses TMA and needs an sm_90a or sm_100a device")
    start = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, DEMO, target], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    elapsed = time.monotonic() - start
    output = child.stdout + child.stderr
    assert child.returncode == 3, output
    # trap surfaces as an illegal instruction (older drivers: an unspecified launch failure)
    assert re.search(r"launch failed: CUDA_ERROR_(ILLEGAL_INSTRUCTION|LAUNCH_FAILED)", output), output
    report = re.search(
        rf"tilec --debug-hangs: kernel hang_demo: .* at {re.escape(demo_wait_location())} did not complete "
        r"within \d+ ms: phase 0, mbarrier at shared address 0x[0-9a-f]+, block \(0, 0, 0\), thread (\d+)",
        output,
    )
    assert report, output
    assert 0 <= int(report.group(1)) < 32
    assert elapsed > TIMEOUT_NS / 1e9  # it waited its bound first

"""Every compile error names the rule it enforces and where the program
breaks it.  Small bad programs go through the `tilec` command, as a user
would run it: the first line of stderr is `file:line:col: error: <rule>`
pointing at the offending construct, the source line and a caret under it
follow, the exit status is 1, no output is written and no traceback shown.

The cases cover the rules most often hit when porting a kernel: layout
grouping, the TMA hardware rules, dispatch rejections, and intrinsics used
on a target that lacks them."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent


@attrs.frozen
class Case:
    name: str
    target: str
    program: str
    at: str  # the text the caret must point at: its first occurrence in the program
    rule: tuple  # phrases the message must contain


def _kernel(body: str, params: str = "A: f16[64, 64]") -> str:
    return f"kernel k({params}):\n    cta_id([1])\n    tx = thread_id([128])\n" + textwrap.indent(
        textwrap.dedent(body).strip() + "\n", "    "
    )


_TMA_LOAD = """
    bar = alloc_shared([1], u64)
    if tx == 0:
        copy_async({dst}, {src}, dispatch="tma", mbar=bar.ptr_to([0]))
"""


def _tma(shared: str, dst: str, src: str, params: str = "A: f16[64, 64]") -> str:
    return _kernel(shared + "\n" + textwrap.dedent(_TMA_LOAD).format(dst=dst, src=src), params)


_SWIZZLED = 's = alloc((64, 64), f16, scope="shared", layout=mma_shared_layout(f16, 3, (64, 64)), align=1024)'

CASES = [
    # layout grouping
    Case("layout-element-count", "sm_90a",
         _kernel('s = alloc((8, 8), f16, scope="shared", layout=S[(4, 8) : (8, 1)])'),
         "S[(4, 8)", ("has 32 elements but shape (8, 8) has 64",)),
    Case("layout-straddles-a-dim", "sm_90a",
         _kernel('s = alloc((3, 256), f16, scope="shared", layout=S[(8, 96) : (96, 1)])'),
         "S[(8, 96)", ("cannot be grouped by shape (3, 256)", "straddles the boundary of dim 1")),
    Case("layout-thread-axis-range", "sm_90a",
         _kernel("r = alloc_local((64,), f32, layout=S[64 : 1@laneid])"),
         "S[64", ("reaches laneid 63, but laneid < 32",)),
    # intrinsics on a target without them
    Case("wgmma-on-sm_100a", "sm_100a", _kernel("ptx.wgmma.fence()"),
         "ptx.wgmma.fence", ("ptx.wgmma.fence is not available on sm_100a", "sm_90a only")),
    Case("tcgen05-on-sm_90a", "sm_90a",
         _kernel("addr = alloc_shared([1], u32)\nptx.tcgen05.alloc(address_of(addr), n_cols=32)"),
         "ptx.tcgen05.alloc", ("ptx.tcgen05.alloc is not available on sm_90a", "sm_100a only")),
    Case("hopper-fence-on-sm_80", "sm_80", _kernel('ptx.fence.proxy_async("shared::cta")'),
         "ptx.fence.proxy_async", ("not available on sm_80", "sm_90a or newer")),
    # TMA hardware rules
    Case("tma-needs-sm_90a", "sm_80", _tma(_SWIZZLED, "s[:, :]", "A[:, :]"),
         "copy_async", ("TMA needs sm_90a or newer", "target is sm_80")),
    Case("tma-box-row-16-bytes", "sm_90a",
         _tma('s = alloc((64, 4), f16, scope="shared", align=128)', "s[:, :]", "A[:, 0:4]"),
         "copy_async", ("innermost box row is 8 bytes, not a multiple of 16",)),
    Case("tma-global-stride-16-bytes", "sm_90a",
         _tma('s = alloc((64, 64), f16, scope="shared", align=128)', "s[:, :]", "A[:, 0:64]",
              params="A: f16[64, 100]"),
         "copy_async", ("global stride", "200 bytes, not a positive multiple of 16")),
    Case("tma-cannot-transpose", "sm_90a",
         _tma('s = alloc((64, 64), f16, scope="shared", layout=S[(64, 64) : (1, 64)], align=128)',
              "s[:, :]", "A[:, :]"),
         "copy_async", ("innermost descriptor dim at global stride 1", "TMA cannot transpose")),
    Case("tma-shared-alignment", "sm_90a",
         _tma('s = alloc((64, 64), f16, scope="shared")', "s[:, :]", "A[:, :]"),
         "copy_async", ("TMA needs shared buffer 's' aligned to 128 bytes",)),
    # dispatch rejections
    Case("dispatch-unknown-variant", "sm_90a",
         _kernel('s = alloc((64, 64), f16, scope="shared")\ncopy(s[:, :], A[:, :], dispatch="warp_shuffle")'),
         "copy(s", ("unknown variant 'warp_shuffle' of 'copy'", "known:")),
    Case("dispatch-variant-of-another-family", "sm_90a",
         _kernel(
             _SWIZZLED + "\n"
             "taddr = alloc_shared([1], u32)\n"
             'tmem = decl_buffer((128, 128), f32, scope="tmem", allocated_addr=taddr[0], '
             "layout=S[(128, 128) : (1@TLane, 1@TCol)])\n"
             "if tx == 0:\n"
             '    gemm_async(tmem[0:64, 0:64], s[:, :], s[:, :], accum=False, dispatch="tcgen05")'
         ),
         "gemm_async", ("variant 'tcgen05' of 'gemm_async' is not available on sm_90a", "blackwell")),
    Case("dispatch-no-variant-accepts", "sm_90a",
         _kernel("r = alloc_local((4,), f16)\ncast(A[0, 0:4], r[0:4])", params="A: f32[64, 64]"),
         "cast(", ("no variant of 'cast' accepts this call on sm_90a", "cast converts register (local) buffers")),
]


def _location(program: str, at: str) -> tuple:
    before = program[: program.index(at)]
    return before.count("\n") + 1, len(before) - before.rfind("\n")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_error_names_the_rule_and_the_place(case, tmp_path):
    source = tmp_path / "bad.tile"
    source.write_text(case.program)
    output = tmp_path / "bad.ptx"
    proc = subprocess.run(
        [sys.executable, "-m", "tilec.cli", str(source), "--target", case.target, "-o", str(output)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal compiler error" not in proc.stderr
    assert not output.exists() and not output.with_suffix(".json").exists()

    lines = proc.stderr.splitlines()
    head = re.fullmatch(re.escape(str(source)) + r":(\d+):(\d+): error: (.+)", lines[0])
    assert head is not None, proc.stderr
    line, col = _location(case.program, case.at)
    assert (int(head[1]), int(head[2])) == (line, col), proc.stderr
    assert lines[1] == case.program.splitlines()[line - 1]
    assert re.fullmatch(" " * (col - 1) + r"\^~*", lines[2]), proc.stderr
    message = "\n".join([head[3]] + lines[3:])
    for phrase in case.rule:
        assert phrase in message, proc.stderr

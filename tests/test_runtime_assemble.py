"""PTX assembly through nvJitLink: every target assembles, and any ptxas
error or warning fails with the log."""
import pytest

import runtime_kernels
from tilec.compiler.diagnostics import TilecError
from tilec.runtime.assemble import PtxAssemblyError, assemble, parse_usage, resource_usage, severity

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"

STORE = HEADER + """
.visible .entry k(.param .u64 p)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""


@pytest.mark.parametrize("name", sorted(runtime_kernels.ALL))
def test_test_kernels_assemble_for_their_target(name):
    ptx, meta = runtime_kernels.ALL[name]()
    cubin = assemble(ptx, meta["target"])
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90", "sm_100"])
def test_portable_ptx_assembles_for_later_devices(arch):
    ptx, _ = runtime_kernels.vadd("sm_80")
    assert assemble(ptx, arch)[:4] == b"\x7fELF"


def test_error_is_reported_with_log_and_ptx_line():
    broken = STORE.replace("st.global.u32", "stx.global.u32")
    with pytest.raises(PtxAssemblyError) as info:
        assemble(broken, "sm_90a")
    err = info.value
    assert isinstance(err, TilecError)
    assert "rejected" in err.message
    assert "Not a name of any known instruction: 'stx'" in err.log
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "stx" in text)
    assert f"line {line}" in err.log
    assert f"{line:5d} | stx.global.u32 [%rd2], %r1;" in err.log


def test_arch_specific_ptx_is_refused_on_an_older_arch():
    with pytest.raises(PtxAssemblyError, match="higher than default SM version"):
        assemble(STORE, "sm_80")
    with pytest.raises(PtxAssemblyError, match="cannot be compiled for architecture 'sm_90'"):
        assemble(STORE, "sm_90")


def test_unknown_arch_is_an_assembly_error():
    with pytest.raises(PtxAssemblyError, match="sm_nope"):
        assemble(STORE, "sm_nope")


WARNINGS = {
    # ptxas ignores the directive: 1024 threads x 4 CTAs exceed an SM
    "minnctapersm": (
        HEADER + ".visible .entry k(.param .u64 p) .maxntid 1024, 1, 1 .minnctapersm 4\n{\n    ret;\n}\n",
        ".minnctapersm will be ignored",
    ),
    "pragma": (
        HEADER + '.visible .entry k(.param .u64 p)\n{\n    .pragma "nosuchpragma";\n    ret;\n}\n',
        "Pragma 'nosuchpragma' unsupported",
    ),
    "maxnreg": (
        HEADER + ".visible .entry k(.param .u64 p) .maxnreg 16\n{\n    ret;\n}\n",
        "adjusting per thread register count of 16",
    ),
}


@pytest.mark.parametrize("case", sorted(WARNINGS))
def test_ptxas_warning_fails_assembly(case):
    ptx, text = WARNINGS[case]
    with pytest.raises(PtxAssemblyError) as info:
        assemble(ptx, "sm_90a")
    assert "warned about" in info.value.message
    assert text in info.value.log
    assert "ptxas warning" in info.value.log


@pytest.mark.parametrize(
    "line, expected",
    [
        ("ptxas warning : Pragma 'foo' unsupported", "warning"),
        ("ptxas kernel.ptx, line 9; error   : Arguments mismatch", "error"),
        ("ptxas fatal   : Ptx assembly aborted due to errors", "fatal"),
        ("ptxas info    : Compiling entry function 'warning' for 'sm_90a'", "info"),
        ("info    : Function properties for 'error':", "info"),
        ("ptxas         .     0 bytes stack frame, 0 bytes spill stores", None),
    ],
)
def test_severity_is_the_word_before_the_first_colon(line, expected):
    assert severity(line) == expected


def test_kernel_named_warning_is_not_a_warning():
    ptx = HEADER + ".visible .entry warning(.param .u64 p)\n{\n    ret;\n}\n"
    assert "warning" in resource_usage(ptx, "sm_90a")


def test_resource_usage_reports_each_entry():
    ptx = HEADER + """
.visible .entry uses_smem(.param .u64 p)
{
    .reg .b64 %rd<3>;
    .reg .b32 %r<3>;
    .shared .align 16 .b8 buf[4096];
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    st.shared.u32 [buf+16], %r1;
    bar.sync 0;
    ld.shared.u32 %r2, [buf+32];
    st.global.u32 [%rd2], %r2;
    ret;
}
.visible .entry empty(.param .u64 p)
{
    ret;
}
"""
    usage = resource_usage(ptx, "sm_90a")
    assert set(usage) == {"uses_smem", "empty"}
    assert usage["uses_smem"]["smem"] == 4096
    assert usage["uses_smem"]["barriers"] == 1
    assert usage["uses_smem"]["registers"] > 0
    assert usage["empty"]["smem"] == 0
    assert usage["empty"]["spill_stores"] == 0
    assert usage["empty"]["performance_loss"] == []


def test_resource_usage_raises_like_assemble():
    with pytest.raises(PtxAssemblyError):
        resource_usage(WARNINGS["pragma"][0], "sm_90a")


def test_parse_usage_reads_stack_and_spills():
    log = "\n".join(
        [
            "ptxas info    : 0 bytes gmem",
            "ptxas info    : Function properties for helper",
            "ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            "ptxas info    : Compiling entry function 'k' for 'sm_90a'",
            "ptxas info    : Function properties for k",
            "ptxas         .     48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads",
            "ptxas info    : Used 255 registers, used 1 barriers, 99328 bytes smem",
            "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
            "serialized due to non wgmma instructions defining accumulator registers of a wgmma "
            "between start and end of the pipeline stage in the function 'k'",
        ]
    )
    assert parse_usage(log) == {
        "k": {
            "registers": 255,
            "barriers": 1,
            "smem": 99328,
            "stack": 48,
            "spill_stores": 40,
            "spill_loads": 36,
            "performance_loss": [
                "wgmma.mma_async instructions are serialized due to non wgmma instructions defining "
                "accumulator registers of a wgmma between start and end of the pipeline stage"
            ],
        }
    }


SERIALIZED_WGMMA = HEADER + """
.visible .entry wg(.param .u64 p)
{
    .reg .f32 %d<4>;
    .reg .b64 %da, %db, %rd<3>;
    ld.param.u64 %rd1, [p];
    mov.b64 %da, 0;
    mov.b64 %db, 0;
    mov.f32 %d0, 0f00000000;
    mov.f32 %d1, 0f00000000;
    mov.f32 %d2, 0f00000000;
    mov.f32 %d3, 0f00000000;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %da, %db, 1, 1, 1, 0, 0;
    mov.f32 %d0, 0f3F800000;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %da, %db, 1, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    cvta.to.global.u64 %rd2, %rd1;
    st.global.v4.f32 [%rd2], {%d0, %d1, %d2, %d3};
    ret;
}
"""


def test_performance_advisories_are_reported_not_fatal():
    """Writing an accumulator between two wgmmas makes ptxas serialise them;
    it says so in an info line (C75xx), which must not fail assembly."""
    assert assemble(SERIALIZED_WGMMA, "sm_90a")[:4] == b"\x7fELF"
    (loss,) = resource_usage(SERIALIZED_WGMMA, "sm_90a")["wg"]["performance_loss"]
    assert loss.startswith("wgmma.mma_async instructions are serialized")

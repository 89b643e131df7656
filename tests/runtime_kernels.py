"""Hand-written PTX kernels and their kernel.json entries, for the runtime
tests.  The CPU tests assemble every one of them, so the GPU tests (which
launch them) never meet a ptxas problem first."""
from __future__ import annotations

import math

_HEADER = {
    "sm_80": ".version 8.0\n.target sm_80\n.address_size 64\n",
    "sm_90a": ".version 8.0\n.target sm_90a\n.address_size 64\n",
    "sm_100a": ".version 8.7\n.target sm_100a\n.address_size 64\n",
}

# c[i] = a[i] + b[i] for i < n; one thread per element.
_VADD_BODY = """
.visible .entry vadd(
    .param .u64 vadd_a,
    .param .u64 vadd_b,
    .param .u64 vadd_c,
    .param .s32 vadd_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [vadd_a];
    ld.param.u64 %rd2, [vadd_b];
    ld.param.u64 %rd3, [vadd_c];
    ld.param.s32 %r1, [vadd_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra $L_done;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.s32 %rd7, %r5, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
$L_done:
    ret;
}
"""


def vadd(target: str = "sm_90a", n: int = 1000, block: int = 128, waits: bool = False) -> tuple[str, dict]:
    """PTX and kernel.json of an f32 vector add over n elements; `waits`:
    it executes griddepcontrol.wait before its loads (sm_90a and newer), and
    its kernel.json says so."""
    body = _VADD_BODY
    if waits:
        body = body.replace("    ld.global.f32 %f1", "    griddepcontrol.wait;\n    ld.global.f32 %f1")
    kernel = {
        "name": "vadd",
        "entry": "vadd",
        "params": [
            {"name": "a", "kind": "buffer", "dtype": "f32", "shape": [n]},
            {"name": "b", "kind": "buffer", "dtype": "f32", "shape": [n]},
            {"name": "c", "kind": "buffer", "dtype": "f32", "shape": [n]},
            {"name": "n", "kind": "scalar", "dtype": "i32"},
        ],
        "grid": [math.ceil(n / block), 1, 1],
        "block": [block, 1, 1],
        "cluster": [1, 1, 1],
        "dynamic_smem": 0,
        "tensormaps": [],
    }
    if waits:
        kernel["grid_dependency_wait"] = True
    return _HEADER[target] + body, _meta(target, kernel)


# out[ctaid] = (cluster_ctarank, cluster_nctarank): shows the cluster shape
# the kernel was launched with.
_CLUSTER_IDS = """
.visible .entry cluster_ids(
    .param .u64 cluster_ids_out
)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [cluster_ids_out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd2, %rd3;
    st.global.v2.u32 [%rd4], {%r2, %r3};
    ret;
}
"""


def cluster_ids(ctas: int = 8, cluster: int = 2) -> tuple[str, dict]:
    kernel = {
        "name": "cluster_ids",
        "entry": "cluster_ids",
        "params": [{"name": "out", "kind": "buffer", "dtype": "u32", "shape": [ctas, 2]}],
        "grid": [ctas, 1, 1],
        "block": [32, 1, 1],
        "cluster": [cluster, 1, 1],
        "dynamic_smem": 0,
        "tensormaps": [],
    }
    return _HEADER["sm_90a"] + _CLUSTER_IDS, _meta("sm_90a", kernel)


# Each of 128 threads stores its id into dynamic shared memory at byte
# offset DSMEM_OFFSET + 4 * tid, then out[tid] = the word of thread tid ^ 1:
# right only if more than 48 KiB of dynamic shared memory really exists.
DSMEM_OFFSET = 196608
_DSMEM = """
.extern .shared .align 16 .b8 dsmem[];

.visible .entry dsmem_swap(
    .param .u64 dsmem_swap_out
)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<10>;

    ld.param.u64 %rd1, [dsmem_swap_out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u64 %rd3, dsmem;
    add.s64 %rd3, %rd3, OFFSET;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd3, %rd4;
    st.shared.u32 [%rd5], %r1;
    bar.sync 0;
    xor.b32 %r2, %r1, 1;
    mul.wide.u32 %rd6, %r2, 4;
    add.s64 %rd7, %rd3, %rd6;
    ld.shared.u32 %r3, [%rd7];
    add.s64 %rd8, %rd2, %rd4;
    st.global.u32 [%rd8], %r3;
    ret;
}
""".replace("OFFSET", str(DSMEM_OFFSET))


def dsmem_swap(dynamic_smem: int = DSMEM_OFFSET + 4 * 128) -> tuple[str, dict]:
    kernel = {
        "name": "dsmem_swap",
        "entry": "dsmem_swap",
        "params": [{"name": "out", "kind": "buffer", "dtype": "u32", "shape": [128]}],
        "grid": [1, 1, 1],
        "block": [128, 1, 1],
        "cluster": [1, 1, 1],
        "dynamic_smem": dynamic_smem,
        "tensormaps": [],
    }
    return _HEADER["sm_90a"] + _DSMEM, _meta("sm_90a", kernel)


# One thread loads an 8 x 64 f16 box at rows 8..15 of the 16 x 64 tensor A
# through the tensor map A_tmap into shared memory (mbarrier completion);
# then all 128 threads copy the 1024 bytes to B.  B == A[8:16] only if the
# tensor map (dims, row stride, box) and its by-value parameter are right.
_TMA_ROWS = """
.visible .entry tma_rows(
    .param .u64 tma_rows_A,
    .param .u64 tma_rows_B,
    .param .align 64 .b8 tma_rows_A_tmap[128]
)
.reqntid 128, 1, 1
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<12>;
    .shared .align 128 .b8 tile[1024];
    .shared .align 8 .b64 bar;

    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [bar], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @!%p1 bra $L_wait;
    mov.u64 %rd1, tma_rows_A_tmap;
    cvta.param.u64 %rd2, %rd1;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], 1024;
    mov.u32 %r2, 0;
    mov.u32 %r3, 8;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [tile], [%rd2, {%r2, %r3}], [bar];
$L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
    @!%p2 bra $L_wait;
    ld.param.u64 %rd4, [tma_rows_B];
    cvta.to.global.u64 %rd5, %rd4;
    mul.wide.u32 %rd6, %r1, 8;
    mov.u64 %rd7, tile;
    add.s64 %rd8, %rd7, %rd6;
    ld.shared.u64 %rd9, [%rd8];
    add.s64 %rd10, %rd5, %rd6;
    st.global.u64 [%rd10], %rd9;
    ret;
}
"""

TMA_ROWS_MAP = {
    "name": "A_tmap",
    "tensor": "A",
    "dtype": "f16",
    "rank": 2,
    "dims": [64, 16],
    "strides": [128],
    "box": [64, 8],
    "elem_strides": [1, 1],
    "interleave": "none",
    "swizzle": "none",
    "l2_promotion": "128B",
    "oob_fill": "zero",
}


def tma_rows() -> tuple[str, dict]:
    kernel = {
        "name": "tma_rows",
        "entry": "tma_rows",
        "params": [
            {"name": "A", "kind": "buffer", "dtype": "f16", "shape": [16, 64]},
            {"name": "B", "kind": "buffer", "dtype": "f16", "shape": [8, 64]},
            {"name": "A_tmap", "kind": "tensormap", "tensor": "A"},
        ],
        "grid": [1, 1, 1],
        "block": [128, 1, 1],
        "cluster": [1, 1, 1],
        "dynamic_smem": 0,
        "tensormaps": [dict(TMA_ROWS_MAP)],
    }
    return _HEADER["sm_90a"] + _TMA_ROWS, _meta("sm_90a", kernel)


# The seed's 8 x 256 f16 tile under a 128-byte swizzle: a rank-3 map.
SEED_MAP = {
    "name": "A_tmap0",
    "tensor": "A",
    "dtype": "f16",
    "rank": 3,
    "dims": [64, 8, 4],
    "strides": [512, 128],
    "box": [64, 8, 4],
    "elem_strides": [1, 1, 1],
    "interleave": "none",
    "swizzle": "128B",
    "l2_promotion": "128B",
    "oob_fill": "zero",
}


def _meta(target: str, kernel: dict) -> dict:
    return {"tilec_version": "0.1.0", "target": target, "kernels": [kernel]}


ALL = {
    "vadd_sm_80": lambda: vadd("sm_80"),
    "vadd_sm_90a": lambda: vadd("sm_90a"),
    "vadd_sm_100a": lambda: vadd("sm_100a"),
    "vadd_waits_sm_90a": lambda: vadd("sm_90a", waits=True),
    "vadd_waits_sm_100a": lambda: vadd("sm_100a", waits=True),
    "cluster_ids": cluster_ids,
    "dsmem_swap": dsmem_swap,
    "tma_rows": tma_rows,
}

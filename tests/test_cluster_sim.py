"""Thread-block clusters in the PTX simulator (tests/ptx_sim.py,
tests/tma_ptx_sim.py): each instruction the cluster model adds, in a
kernel small enough to say what it must compute -- the cluster special
registers, mapa with ld/st.shared::cluster, barrier.cluster, an mbarrier
arrive on another CTA's barrier, and a multicast TMA load -- each with the
variant that shows the simulator would catch its absence.  hgemm_v7's
cluster pairs run in tests/test_hopper_gemm.py."""
import numpy as np
import pytest

import tma_ptx_sim
from ptx_sim import Kernel
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble


def hand_ptx(body: str, cluster=(2, 1, 1), threads: int = 1) -> str:
    """A one-parameter (`T`, a u32 buffer) kernel `k` around `body`, which
    finds T's address in %rd1; ptxas must accept it with no warning."""
    ptx = f""".version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 T)
.reqntid {threads}, 1, 1
.reqnctapercluster {cluster[0]}, {cluster[1]}, {cluster[2]}
{{
.reg .pred %p<4>;
.reg .b32 %r<32>;
.reg .b64 %rd<32>;
.shared .align 8 .b8 buf[16];
ld.param.u64 %rd1, [T];
cvta.to.global.u64 %rd1, %rd1;
{body}
ret;
}}
"""
    assemble(ptx, "sm_90a")
    return ptx


def store(index: str, value: str, n: int) -> str:
    """PTX storing u32 `value` at T[index] (`n` distinguishes the registers)."""
    return (f"cvt.u64.u32 %rd{10 + n}, {index};\nshl.b64 %rd{10 + n}, %rd{10 + n}, 2;\n"
            f"add.s64 %rd{10 + n}, %rd1, %rd{10 + n};\nst.global.u32 [%rd{10 + n}], {value};")


# --------------------------------------------------------------------------
# Special registers
# --------------------------------------------------------------------------

IDS = ("%clusterid.x", "%clusterid.y", "%nclusterid.x", "%nclusterid.y",
       "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctarank", "%cluster_nctarank")


def test_cluster_special_registers():
    """A 4 x 2 grid of 2 x 2 clusters: each CTA writes where it is."""
    body = "mov.u32 %r1, %ctaid.x;\nmov.u32 %r2, %ctaid.y;\nmad.lo.u32 %r3, %r2, 4, %r1;\nmul.lo.u32 %r3, %r3, 8;\n"
    for i, reg in enumerate(IDS):
        body += f"mov.u32 %r{10 + i}, {reg};\nadd.u32 %r4, %r3, {i};\n" + store("%r4", f"%r{10 + i}", i) + "\n"
    T = np.full((2, 4, len(IDS)), 99, np.uint32)
    Kernel(hand_ptx(body, cluster=(2, 2, 1)), "k").run({"T": T}, grid=(4, 2, 1), cluster=(2, 2, 1))
    for y in range(2):
        for x in range(4):
            rank = x % 2 + 2 * (y % 2)
            assert T[y, x].tolist() == [x // 2, y // 2, 2, 1, x % 2, y % 2, rank, 4], (x, y)


def test_tile_cluster_ids():
    """cta_id_in_cluster over a 2-D cluster reads %cluster_ctaid.x and .y."""
    text = """
target sm_90a
kernel k(T: i32[2, 4, 2]):
    bx, by = cta_id([4, 2])
    rx, ry = cta_id_in_cluster([2, 2])
    thread_id([1])
    T[by, bx, 0] = rx
    T[by, bx, 1] = ry
"""
    r = compile_source(text, "ids.tile")
    assemble(r.ptx, "sm_90a")
    assert "%cluster_ctaid.y" in r.ptx and r.meta["kernels"][0]["cluster"] == [2, 2, 1]
    T = np.full((2, 4, 2), -1, np.int32)
    tma_ptx_sim.run(r.ptx, r.meta, {"T": T})
    assert T.tolist() == [[[x % 2, y % 2] for x in range(4)] for y in range(2)]


# --------------------------------------------------------------------------
# mapa, ld/st.shared::cluster and barrier.cluster
# --------------------------------------------------------------------------

# Each CTA of a pair writes rank + 100 into its own buf[0]; after a cluster
# barrier it reads its peer's buf[0] and writes its own value into the
# peer's buf[1] through mapa; after a second barrier it reads its own buf[1].
EXCHANGE = """
mov.u32 %r1, %cluster_ctarank;
mov.u32 %r2, buf;
add.u32 %r3, %r1, 100;
st.shared.u32 [%r2], %r3;
{first_barrier}
xor.b32 %r4, %r1, 1;
mapa.shared::cluster.u32 %r5, %r2, %r4;
ld.shared::cluster.u32 %r6, [%r5];
add.u32 %r7, %r5, 4;
st.shared::cluster.u32 [%r7], %r3;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
add.u32 %r8, %r2, 4;
ld.shared.u32 %r9, [%r8];
mov.u32 %r10, %ctaid.x;
shl.b32 %r11, %r10, 1;
""" + store("%r11", "%r6", 0) + "\nadd.u32 %r12, %r11, 1;\n" + store("%r12", "%r9", 1)
RELAXED_BARRIER = "barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;"


def exchange(first_barrier: str) -> list:
    T = np.zeros(4, np.uint32)
    Kernel(hand_ptx(EXCHANGE.format(first_barrier=first_barrier), threads=32), "k").run(
        {"T": T}, grid=(2, 1, 1), cluster=(2, 1, 1))
    return T.tolist()


def test_mapa_reaches_the_peers_shared_memory():
    """[peer's buf[0], own buf[1] as the peer wrote it] for CTAs 0 and 1."""
    assert exchange(RELAXED_BARRIER) == [101, 101, 100, 100]


def test_without_the_cluster_barrier_a_peer_is_read_before_it_writes():
    """The check above can fail: without the first barrier CTA 0 runs ahead
    and reads its peer's buf[0] before the peer has written it."""
    assert exchange("")[0] == 0


def test_cluster_barrier_counts_exited_threads_as_arrived():
    """Threads 1 .. 31 exit at once; thread 0's wait completes on the
    arrivals of the two threads 0."""
    body = ("mov.u32 %r1, %tid.x;\nsetp.ne.u32 %p1, %r1, 0;\n@%p1 bra DONE;\n"
            "barrier.cluster.arrive;\nbarrier.cluster.wait;\nmov.u32 %r2, %ctaid.x;\n"
            + store("%r2", "7", 0) + "\nDONE:")
    T = np.zeros(2, np.uint32)
    Kernel(hand_ptx(body, threads=32), "k").run({"T": T}, grid=(2, 1, 1), cluster=(2, 1, 1))
    assert T.tolist() == [7, 7]


def test_a_cta_not_run_cannot_be_reached():
    with pytest.raises(MemoryError, match="no CTA of rank 1"):
        Kernel(hand_ptx(EXCHANGE.format(first_barrier=""), threads=32), "k").run(
            {"T": np.zeros(4, np.uint32)}, grid=(2, 1, 1), ctas=[(0, 0, 0)], cluster=(2, 1, 1))


# --------------------------------------------------------------------------
# An mbarrier arrive on the peer's barrier
# --------------------------------------------------------------------------

REMOTE_ARRIVE = """
target sm_90a
kernel k(T: i32[2]):
    bx = cta_id([2])
    rank = cta_id_in_cluster([2])
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.commit()
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.mbarrier_init()
    cuda.cluster_sync()
    if rank == 0 and tid == 0:
        ptx.mbarrier.arrive.cluster(bar.ptr_to([0]), {target})
    if rank == 1:
        ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
        if tid == 0:
            T[bx] = 1
    cuda.cluster_sync()
"""


def remote_arrive(target: int) -> list:
    r = compile_source(REMOTE_ARRIVE.format(target=target), "arrive.tile")
    assemble(r.ptx, "sm_90a")
    assert "mbarrier.arrive.shared::cluster.b64" in r.ptx
    T = np.zeros(2, np.int32)
    tma_ptx_sim.run(r.ptx, r.meta, {"T": T}, max_steps=50_000)
    return T.tolist()


def test_arrive_on_the_peers_mbarrier():
    """CTA 0's one arrival completes the phase CTA 1 waits on."""
    assert remote_arrive(1) == [0, 1]


def test_arrive_on_its_own_mbarrier_leaves_the_peer_waiting():
    with pytest.raises(RuntimeError, match="did not finish"):
        remote_arrive(0)


# --------------------------------------------------------------------------
# Multicast TMA loads
# --------------------------------------------------------------------------

# Each CTA of a pair loads 16 of the tile's 32 rows, multicast by `mask`
# into the same rows of both; each waits for the whole tile (4096 bytes)
# and copies it to its block of B.
MULTICAST = """
target sm_90a
const L = tma_shared_layout(f16, 3, (32, 64))
kernel k(A: f16[32, 64], B: f16[64, 64]):
    bx = cta_id([2])
    rank = cta_id_in_cluster([2])
    tid = thread_id([32])
    pool = smem_pool()
    bar = pool.alloc((1,), u64, align=8)
    pool.move_base_to(1024)
    tile = pool.alloc((32, 64), f16, layout=L, align=1024)
    pool.commit()
    if tid == 0:
        ptx.mbarrier.init(bar.ptr_to([0]), 1)
    ptx.fence.mbarrier_init()
    cuda.cluster_sync()
    if tid == 0:
        meta h = rank * 16
        copy_async(tile[h : h + 16, :], A[h : h + 16, 0:64], dispatch="tma", mbar=bar.ptr_to([0]), multicast={mask})
        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 4096)
    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)
    cta.copy(B[bx * 32 : bx * 32 + 32, 0:64], tile[:, :])
    cuda.cluster_sync()
"""


def multicast(mask: int):
    r = compile_source(MULTICAST.format(mask=mask), "multicast.tile")
    assemble(r.ptx, "sm_90a")
    assert ".multicast::cluster" in r.ptx
    A = np.random.default_rng(5).standard_normal((32, 64)).astype(np.float16)
    B = np.zeros((64, 64), np.float16)
    tma_ptx_sim.run(r.ptx, r.meta, {"A": A, "B": B}, max_steps=200_000)
    return A, B


def test_multicast_load_lands_in_every_masked_cta():
    """Both halves reach both CTAs, and each CTA's barrier counts both."""
    A, B = multicast(3)
    np.testing.assert_array_equal(B, np.concatenate([A, A]))


def test_multicast_to_one_cta_leaves_the_other_waiting():
    """With mask 1 CTA 1 never receives CTA 0's half (nor its bytes)."""
    with pytest.raises(RuntimeError, match="did not finish"):
        multicast(1)

"""unroll: names bound inside an unrolled body belong to their iteration.

Each program is compiled by the whole pipeline, its PTX assembled and run in
tests/ptx_sim.py, so the checks are on what the copies compute; the lowered
IR is checked where the form matters (a literal binding disappears, any
other gets one fresh name per copy)."""
import pathlib
import textwrap

import numpy as np
import pytest

from ptx_sim import Kernel
from tilec.compiler import ir, visit
from tilec.compiler.passmanager import Options
from tilec.pipeline import compile_source
from tilec.compiler.printer import print_stmt
from tilec.runtime.assemble import assemble


def compiled(text, target="sm_80"):
    r = compile_source(textwrap.dedent(text).strip() + "\n", "u.tile", target=target)
    assemble(r.ptx, target)
    return r


def simulate(r, args):
    entry = r.meta["kernels"][0]
    Kernel(r.ptx, entry["name"]).run(args, grid=entry["grid"], dynamic_smem=entry["dynamic_smem"])


def unrolled_body(text):
    r = compile_source(textwrap.dedent(text).strip() + "\n", "u.tile", target="sm_80",
                       options=Options(stop_after="unroll"))
    return r.module.kernels[0].body


SEED_STAGING = """
    target sm_80
    const A_FRAG_K8 = S[(2, 8, 4, 2) : (2, 4@laneid, 1@laneid, 1)]
    const A_FRAG = tile_to(A_FRAG_K8, [16, 16], [16, 8])
    kernel stage(A_g: f16[16, 16], out: f16[32, 8]):
        cta_id([1])
        lane = lane_id([32])
        A_f = alloc((16, 16), f16, scope="local", layout=A_FRAG)
        A_reg = A_f.local(8)
        for s in unroll(8):
            kp, kHi, rM = s % 2, (s // 2) % 2, s // 4
            A_reg[s] = A_g[lane // 4 + 8 * rM, 2 * (lane % 4) + kp + 8 * kHi]
        for s in unroll(8):
            out[lane, s] = A_reg[s]
"""


def test_seed_staging_loop_substitutes_each_iterations_values():
    stores = [print_stmt(s).strip() for s in unrolled_body(SEED_STAGING)
              if isinstance(s, ir.Assign) and print_stmt(s).startswith("A_reg[")]
    want = []
    for s in range(8):
        kp, k_hi, r_m = s % 2, (s // 2) % 2, s // 4
        want.append(f"A_reg[{s}] = A_g[lane // 4 + {8 * r_m}, 2 * (lane % 4) + {kp} + {8 * k_hi}]")
    assert stores == want


def test_seed_staging_loop_loads_what_the_seed_says():
    r = compiled(SEED_STAGING)
    a = np.arange(256, dtype=np.float16).reshape(16, 16)
    out = np.zeros((32, 8), np.float16)
    simulate(r, {"A_g": a, "out": out})
    for lane in range(32):
        for s in range(8):
            kp, k_hi, r_m = s % 2, (s // 2) % 2, s // 4
            assert out[lane, s] == a[lane // 4 + 8 * r_m, 2 * (lane % 4) + kp + 8 * k_hi], (lane, s)


PER_ITERATION = """
    kernel k(xs: i32[32, 4], accs: i32[32, 4], totals: i32[32, 4], ys: i32[32, 4], ts: i32[32, 4]):
        cta_id([1])
        lane = lane_id([32])
        total: i32 = 0
        for s in unroll(4):
            x = lane * 10 + s
            c = s * s
            total = total + x
            acc: i32 = c
            acc += 1
            xs[lane, s] = x
            accs[lane, s] = acc
            totals[lane, s] = total
        for i in unroll(2):
            base = lane * 2 + i
            for j in unroll(2):
                k2 = i * 2 + j
                y = base + k2
                ys[lane, k2] = y
        for s in unroll(4):
            if s % 2 == 0:
                t = lane
                ts[lane, s] = t
            else:
                t = lane + 100
                ts[lane, s] = t
"""


def test_bindings_are_per_iteration_and_mutations_accumulate():
    """x (run time) and acc (a mutable declared in the body) are new in every copy, c and
    k2 (literals) are substituted, an outer copy's binding is seen by the inner copies,
    a branch an iteration decides joins its copy, and total, declared before the loop,
    accumulates across the copies."""
    arrays = {name: np.zeros((32, 4), np.int32) for name in ("xs", "accs", "totals", "ys", "ts")}
    simulate(compiled(PER_ITERATION), arrays)
    lane = np.arange(32)[:, None]
    s = np.arange(4)[None, :]
    np.testing.assert_array_equal(arrays["xs"], lane * 10 + s)
    np.testing.assert_array_equal(arrays["accs"], np.broadcast_to(s * s + 1, (32, 4)))
    np.testing.assert_array_equal(arrays["totals"], np.cumsum(lane * 10 + s, axis=1))
    i, j = s // 2, s % 2  # ys[lane, 2 * i + j]
    np.testing.assert_array_equal(arrays["ys"], lane * 2 + i + 2 * i + j)
    np.testing.assert_array_equal(arrays["ts"], lane + 100 * (s % 2))


def test_literal_bindings_disappear_and_others_get_fresh_names():
    body = unrolled_body(PER_ITERATION)
    bound = [t.id for st in body if isinstance(st, ir.Assign) for t in st.targets if isinstance(t, ir.Name)]
    names = {n.id for st in body for n in visit.walk(st) if isinstance(n, ir.Name)}
    assert not {"c", "k2"} & names
    assert bound.count("total") == 5  # the declaration and the four updates, unrenamed
    for name, copies in (("x", 4), ("acc", 4), ("base", 2), ("y", 4), ("t", 4)):
        fresh = [b for b in bound if b == name or b.startswith(name + "_")]
        assert len(fresh) == len(set(fresh)) == copies, (name, fresh)


@pytest.mark.parametrize("example, target", [
    ("hopper/flash_attn_fwd", None), ("hopper/hgemm_v7_runtime", None), ("hopper/gemm_stream_k", None),
    ("ampere/gemm_cp_async", None), ("hgemm_v4", "sm_100a"), ("gemm_async_tcgen05_pair", None),
])
def test_a_dispatched_kernel_binds_every_name_it_uses(example, target):
    """unroll's fresh names avoid the names the kernel's statements bind
    (`visit.bound_names`), not every name of every expression: the two are
    the same set for what dispatch hands on."""
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / f"{example}.tile"
    r = compile_source(path.read_text(), str(path), target=target, options=Options(stop_after="dispatch"))
    for k in r.module.kernels:
        assert visit.bound_names(k) == visit.identifiers(k)

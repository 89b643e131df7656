""".tile kernels that move tiles with copy_async -> tma, and what each must
leave in its output, for the TMA tests: the CPU tests run a few of them in
the PTX simulator (tests/tma_ptx_sim.py), the GPU tests run them all on the
device, so the expectations the GPU checks were first checked on the CPU.

A `Case` is one kernel: a grid of CTAs, each moving the tile of its region
(`offset + cta * tile` per global dim) between the global tensors and a
multi-stage shared buffer (stage `sum(cta ids) % stages`, so the stage is a
run-time index).  Directions:

- "load":   TMA load into the stage, then `cta.copy` back out to B;
- "store":  `cta.copy` from A into the stage, then a TMA store to B;
- "both":   a TMA load and a TMA store, one thread issuing both;
- "reduce": like "store", with `reduce="add"` into B's old values.

A and B may differ in shape: a region past A's end reads the fill value
(loads), one past B's end is cut off (stores).  B is poisoned first, so
every element of it is checked.
"""
from __future__ import annotations

import itertools
from math import prod
from typing import Optional

import attrs
import numpy as np

from tilec.compiler.dtypes import DTYPES

POISON = 0xA5
THREADS = 128


@attrs.frozen
class Case:
    name: str
    dtype: str
    ashape: tuple
    bshape: tuple
    tile: tuple  # per global dim; 1 drops the dim from the shared buffer
    grid: tuple  # CTAs per global dim
    offset: tuple  # where CTA 0's region starts, per global dim
    direction: str = "load"
    mode: Optional[int] = 3  # tma_shared_layout swizzle mode; None: row-major shared buffer
    pitch: Optional[int] = None  # row-major shared rows this long, the tile in their start: one issue a row
    stages: int = 2
    oob: Optional[str] = None

    # ---- the kernel ---------------------------------------------------

    @property
    def stile(self) -> tuple:
        return tuple(t for t in self.tile if t > 1)

    @property
    def nbytes(self) -> int:
        return prod(self.tile) * DTYPES[self.dtype].bytes

    def source(self) -> str:
        sshape = (self.stages,) + self.stile
        layout = ""
        sm = "sm[stage" + ", :" * len(self.stile) + "]"
        if self.pitch is not None:  # rows of `pitch` elements, the tile in the first stile[-1]
            sshape = sshape[:-1] + (self.pitch,)
            sm = "sm[stage" + ", :" * (len(self.stile) - 1) + f", 0:{self.stile[-1]}]"
        elif self.mode is not None:
            layout = f", layout=tma_shared_layout({self.dtype}, {self.mode}, {sshape})"
        ids = [f"c{k}" for k, g in enumerate(self.grid) if g > 1]
        launch = f"{', '.join(ids)} = cta_id([{', '.join(str(g) for g in self.grid if g > 1)}])" if ids else "cta_id([1])"
        stage = f"({' + '.join(ids)}) % {self.stages}" if ids else "0"
        region = ", ".join(
            f"{o} + c{k} * {t} : {o} + c{k} * {t} + {t}" if g > 1 else f"{o} : {o + t}"
            for k, (o, t, g) in enumerate(zip(self.offset, self.tile, self.grid))
        )
        a, b = f"A[{region}]", f"B[{region}]"
        oob = f', oob="{self.oob}"' if self.oob else ""
        load = [
            f'copy_async({sm}, {a}, dispatch="tma", mbar=bar.ptr_to([0]){oob})',
            f"ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), {self.nbytes})",
        ]
        reduce = ', reduce="add"' if self.direction == "reduce" else ""
        store = [
            f'copy_async({b}, {sm}, dispatch="tma"{reduce})',
            "ptx.cp_async.bulk.commit_group()",
            "ptx.cp_async.bulk.wait_group(0)",
        ]
        wait = "ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)"
        if self.direction == "load":
            body = [("if tid == 0:", load), wait, "cuda.cta_sync()", f"cta.copy({b}, {sm})"]
        elif self.direction == "both":
            body = [("if tid == 0:", load + [wait] + store)]
        else:
            body = [f"cta.copy({sm}, {a})", 'ptx.fence.proxy_async("shared::cta")', "cuda.cta_sync()",
                    ("if tid == 0:", store)]
        lines = [
            f"kernel tma_case(A: {self.dtype}[{', '.join(map(str, self.ashape))}], "
            f"B: {self.dtype}[{', '.join(map(str, self.bshape))}]):",
            f"    {launch}",
            f"    tid = thread_id([{THREADS}])",
            "    pool = smem_pool()",
            "    bar = pool.alloc((1,), u64, align=8)",
            "    pool.move_base_to(1024)",
            f"    sm = pool.alloc({sshape}, {self.dtype}{layout}, align=1024)",
            "    pool.commit()",
            f"    stage = {stage}",
            "    if tid == 0:",
            "        ptx.mbarrier.init(bar.ptr_to([0]), 1)",
            "    ptx.fence.mbarrier_init()",
            "    cuda.cta_sync()",
        ]
        for item in body:
            if isinstance(item, tuple):
                lines.append("    " + item[0])
                lines += ["        " + s for s in item[1]]
            else:
                lines.append("    " + item)
        return "\n".join(lines) + "\n"

    # ---- data and expectations ------------------------------------------

    def inputs(self, seed: int = 0) -> dict:
        """Random A, and B poisoned (random too for a reduction, which adds
        into it).  Floats are finite and, for a reduction, small integers,
        so that every sum is exact."""
        rng = np.random.default_rng(seed)
        return {"A": self._random(rng, self.ashape),
                "B": self._random(rng, self.bshape) if self.direction == "reduce" else self.poisoned()}

    def poisoned(self) -> np.ndarray:
        t = np.dtype(DTYPES[self.dtype].numpy)
        return np.full(prod(self.bshape) * t.itemsize, POISON, np.uint8).view(t).reshape(self.bshape)

    def _random(self, rng, shape) -> np.ndarray:
        t = np.dtype(DTYPES[self.dtype].numpy)
        if self.direction == "reduce":
            return rng.integers(-64, 64, size=shape).astype(t)
        if t.kind == "f":
            return rng.standard_normal(shape).astype(t)
        return rng.integers(np.iinfo(t).min, np.iinfo(t).max, size=shape, endpoint=True, dtype=t)

    def expected(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """B after the kernel, from A and B's initial contents."""
        out = b.copy()
        loads = self.direction in ("load", "both")
        fill = np.nan if self.oob == "nan" else 0
        for cta in itertools.product(*(range(g) for g in self.grid)):
            lo = [o + c * t for o, c, t in zip(self.offset, cta, self.tile)]
            region = tuple(slice(x, x + t) for x, t in zip(lo, self.tile))
            src = np.full(self.tile, fill, a.dtype) if loads else None
            if loads:
                inside = tuple(slice(0, max(0, min(t, n - x))) for x, t, n in zip(lo, self.tile, self.ashape))
                src[inside] = a[tuple(slice(x, x + s.stop) for x, s in zip(lo, inside))]
            else:
                src = a[region]
            if self.direction == "load":
                out[region] = src
                continue
            kept = tuple(slice(0, max(0, min(t, n - x))) for x, t, n in zip(lo, self.tile, self.bshape))
            dst = tuple(slice(x, x + s.stop) for x, s in zip(lo, kept))
            out[dst] = out[dst] + src[kept] if self.direction == "reduce" else src[kept]
        return out


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal element for element, NaNs included (compared as bytes, except
    that any NaN matches any NaN: the hardware's fill NaN is its own)."""
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        if not np.array_equal(np.isnan(got), nan):
            return False
        return np.array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8))
    return np.array_equal(got.view(np.uint8), want.view(np.uint8))


def grid_cases() -> list:
    """The GPU acceptance grid: every swizzle mode (and a row-major and a
    padded shared buffer) for 1-, 2- and 4-byte elements, each direction,
    partial regions at offsets, 3-D tensors, out-of-bounds boxes, ragged
    last tiles of tiles wider than an atom row."""
    cases = []
    for dtype in ("u8", "f16", "f32"):
        eb = DTYPES[dtype].bytes
        for mode in (0, 1, 2, 3):
            width = {0: 16, 1: 32, 2: 64, 3: 128}[mode] // eb
            cols = 2 * width
            for direction in ("load", "store"):
                cases.append(Case(
                    f"{direction}-{dtype}-mode{mode}", dtype, (40, 6 * cols), (40, 6 * cols), (16, cols),
                    (2, 2), (8, cols), direction, mode,
                ))
        cases.append(Case(f"both-{dtype}-rowmajor", dtype, (64, 256 // eb), (64, 256 // eb), (16, 128 // eb),
                          (3, 2), (8, 0), "both", None, stages=3))
        cases.append(Case(f"load-{dtype}-padded", dtype, (24, 256), (24, 256), (8, 32 // eb), (2, 3),
                          (4, 64), "load", None, pitch=128 // eb))
        cases.append(Case(f"store-{dtype}-padded", dtype, (24, 256), (24, 256), (8, 32 // eb), (2, 3),
                          (4, 64), "store", None, pitch=128 // eb))
        cases.append(Case(f"load-{dtype}-3d", dtype, (6, 20, 512 // eb), (6, 20, 512 // eb), (2, 8, 128 // eb),
                          (3, 2, 2), (0, 2, 64 // eb), "load", 3))
        cases.append(Case(f"both-{dtype}-3d-unit", dtype, (5, 32, 256 // eb), (5, 32, 256 // eb),
                          (1, 16, 128 // eb), (5, 2, 2), (0, 0, 0), "both", 2, stages=4))
    cases += [
        Case("load-f16-oob-zero", "f16", (50, 72), (64, 128), (16, 64), (4, 2), (0, 0), "load", 3),
        Case("load-f32-oob-nan", "f32", (50, 40), (64, 64), (16, 32), (4, 2), (0, 0), "load", 3, oob="nan"),
        Case("store-f16-oob-clipped", "f16", (64, 128), (50, 72), (16, 64), (4, 2), (0, 0), "store", 3),
        # 128-column tiles of 64-column (128B) atom rows, the last tile ragged: at 136 columns the two
        # atom columns are two issues, at 192 (whole atom rows) one box of both, clipped by atom column
        Case("load-f16-ragged-128", "f16", (40, 136), (48, 256), (16, 128), (3, 2), (0, 0), "load", 3),
        Case("store-f16-ragged-128", "f16", (48, 256), (40, 136), (16, 128), (3, 2), (0, 0), "store", 3),
        Case("both-f16-ragged-whole-atoms", "f16", (40, 192), (40, 192), (16, 128), (3, 2), (0, 0), "both", 3),
        Case("both-u8-long-rows", "u8", (16, 1024), (16, 1024), (8, 512), (2, 2), (0, 0), "both", None),
        Case("reduce-f32", "f32", (32, 128), (32, 128), (16, 32), (2, 4), (0, 0), "reduce", 3),
        Case("reduce-i32", "i32", (32, 128), (32, 128), (16, 32), (2, 4), (0, 0), "reduce", 1),
        Case("reduce-f16", "f16", (32, 128), (32, 128), (16, 64), (2, 2), (0, 0), "reduce", 3),
    ]
    return cases


# --------------------------------------------------------------------------
# Run-time starts at every edge position (issue 18, item 1)
# --------------------------------------------------------------------------


@attrs.frozen
class EdgeCase:
    """One TMA copy of a `tile` at a run-time start (r, c) of a tensor G,
    through a 128B-swizzled shared tile, to or from a dense tile T:

    - "load":  G[r : r + TR, c : c + TC] -> shared -> T; the rows and
      columns past G's edge must read 0;
    - "store": T -> shared -> G[r : r + TR, c : c + TC]; only the part
      inside G is written.

    The output (T or G) is poisoned first.  A tile as long as its dim
    (TR == R) is the case a planner once got wrong: it dropped the start."""

    name: str
    dtype: str
    shape: tuple  # G
    tile: tuple  # (TR, TC)
    direction: str

    def source(self) -> str:
        (R, C), (TR, TC), dt = self.shape, self.tile, self.dtype
        sm = "sm[:, :]"
        g = f"G[r : r + {TR}, c : c + {TC}]"
        if self.direction == "load":
            body = [
                "    if tid == 0:",
                f'        copy_async({sm}, {g}, dispatch="tma", mbar=bar.ptr_to([0]))',
                f"        ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), {TR * TC * DTYPES[dt].bytes})",
                "    ptx.mbarrier.try_wait(bar.ptr_to([0]), 0)",
                "    cuda.cta_sync()",
                f"    cta.copy(T[:, :], {sm})",
            ]
        else:
            body = [
                f"    cta.copy({sm}, T[:, :])",
                '    ptx.fence.proxy_async("shared::cta")',
                "    cuda.cta_sync()",
                "    if tid == 0:",
                f'        copy_async({g}, {sm}, dispatch="tma")',
                "        ptx.cp_async.bulk.commit_group()",
                "        ptx.cp_async.bulk.wait_group(0)",
            ]
        lines = [
            f"kernel tma_edge(G: {dt}[{R}, {C}], T: {dt}[{TR}, {TC}], r: i32, c: i32):",
            "    cta_id([1])",
            f"    tid = thread_id([{THREADS}])",
            "    pool = smem_pool()",
            "    bar = pool.alloc((1,), u64, align=8)",
            "    pool.move_base_to(1024)",
            f"    sm = pool.alloc(({TR}, {TC}), {dt}, layout=tma_shared_layout({dt}, 3, ({TR}, {TC})), align=1024)",
            "    pool.commit()",
            "    if tid == 0:",
            "        ptx.mbarrier.init(bar.ptr_to([0]), 1)",
            "    ptx.fence.mbarrier_init()",
            "    cuda.cta_sync()",
        ]
        return "\n".join(lines + body) + "\n"

    def starts(self) -> list:
        """Every start from inside to the last one that still overlaps the
        tensor, along each dim on its own (the other start 0), and the far
        corner; column starts in whole 16-byte steps are not needed by TMA,
        but every row start is taken."""
        (R, C), (TR, TC) = self.shape, self.tile
        step = 16 // DTYPES[self.dtype].bytes
        out = [(r, 0) for r in range(R)] + [(0, c) for c in range(step, C, step)]
        return out + [(R - 1, C - step), (R - TR // 2, C - TC // 2)]

    def inputs(self, seed: int = 0) -> dict:
        rng = np.random.default_rng(seed)
        t = np.dtype(DTYPES[self.dtype].numpy)
        g, tile = rng.standard_normal(self.shape).astype(t), rng.standard_normal(self.tile).astype(t)
        if self.direction == "load":
            tile = np.full(self.tile, np.nan, t)
        else:
            g = np.full(self.shape, np.nan, t)
        return {"G": g, "T": tile}

    def expected(self, g: np.ndarray, tile: np.ndarray, r: int, c: int) -> tuple:
        """(G, T) after the kernel at start (r, c)."""
        (R, C), (TR, TC) = self.shape, self.tile
        rows, cols = max(0, min(TR, R - r)), max(0, min(TC, C - c))
        g, tile = g.copy(), tile.copy()
        if self.direction == "load":
            tile[:] = 0
            tile[:rows, :cols] = g[r : r + rows, c : c + cols]
        else:
            g[r : r + rows, c : c + cols] = tile[:rows, :cols]
        return g, tile


def edge_cases() -> list:
    """Tiles as long as the tensor in rows, in columns and in both, and a
    tile shorter than both dims, each direction."""
    cases = []
    for direction in ("load", "store"):
        for shape, tile in (((64, 64), (64, 64)), ((96, 64), (32, 64)), ((64, 128), (64, 64)), ((40, 128), (16, 64))):
            cases.append(EdgeCase(f"{direction}-{shape[0]}x{shape[1]}-tile{tile[0]}x{tile[1]}", "f16", shape, tile,
                                  direction))
    return cases

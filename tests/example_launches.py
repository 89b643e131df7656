"""How each program in examples/ is launched at a small size: the one table
of small launches, for tools/sanitize.py and for any GPU test that runs the
examples.

An example needs no launch code of its own.  Its entry in `SMALL` gives the
`-D` defines that shrink it (a few tiles, a few k-steps, a persistent grid
small enough that a CTA walks more than one tile, ragged sizes where the
example supports them); its inputs are random arrays made from the
kernel.json signature.  An example that must not be launched says why in
`NOT_LAUNCHED`.  Every file under examples/ must be in one of the two
(tests/test_sanitize.py checks it), so a new example cannot slip past the
sanitizers unnoticed.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import tilec
from tilec.compiler.dtypes import DTYPES
from tilec.compiler.targets import DEFAULT_TARGET
from tilec.grammar.parser import parse
from tilec.runtime.launch import LaunchError, caller_params
from tilec.runtime.module import CompiledModule, device_arch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

SMALL = {
    "elementwise_add.tile": {"N": 4096},
    "tile_copy_sync.tile": {"M": 128, "N": 128},
    "tma_copy.tile": {},
    "tma_stream_copy.tile": {"M": 1024, "N": 256, "NUM_CTAS": 2},
    "gemm_mma_16x8x16.tile": {},
    "smem_tmem_copy.tile": {},
    "gemm_async_tcgen05.tile": {},
    "hgemm_v4.tile": {"M": 256, "N": 256, "K": 256},
    "hgemm_v5.tile": {"M": 256, "N": 256, "K": 256},
    "hgemm_v6.tile": {"M": 256, "N": 256, "K": 256, "SM_COUNT": 2},
    # the edge cases of tests/test_hopper_gemm.py: ragged tiles in M, N and K
    # (TMA fills and clips), a ring that wraps, tiles that carry phases across
    "hopper/hgemm_v4.tile": {"M": 200, "N": 136, "K": 72},
    "hopper/hgemm_v5.tile": {"M": 128, "N": 128, "K": 320},
    "hopper/hgemm_v6.tile": {"M": 256, "N": 128, "K": 192, "SM_COUNT": 1},
    "hopper/hgemm_v7.tile": {"M": 256, "N": 256, "K": 192, "SM_COUNT": 1},
    # a ring that wraps three times, the last pass partial
    "hopper/gemm_small_m.tile": {"M": 24, "N": 128, "K": 576, "STAGES": 3},
    # K in uneven splits (the last shorter), the units of a tile on two
    # persistent CTAs; the counters are random here, so which split sums varies
    "hopper/gemm_split_k.tile": {"M": 256, "N": 256, "K": 328, "BLK_N": 128, "SPLIT_K": 3, "SM_COUNT": 2},
    "hopper/gemm_small_m_split_k.tile": {"M": 24, "N": 128, "K": 584, "SPLIT_K": 4, "STAGES": 3},
    "hopper/gemm_small_m_stream_k.tile": {"M": 24, "N": 128, "K": 584, "SM_COUNT": 3, "STAGES": 3},
    "hopper/gemm_stream_k.tile": {"M": 136, "N": 136, "K": 136, "BLK_M": 64, "BLK_N": 64, "STAGES": 2,
                                  "SM_COUNT": 7, "MIN_STEPS": 1},
    # ragged in M, N and K: cp.async zero-fills, the stores are guarded
    "ampere/gemm_cp_async.tile": {"M": 136, "N": 144, "K": 72},
    "runtime_add.tile": {},
    "gemm_mma_bf16_k8.tile": {},
    "gemm_async_tcgen05_pair.tile": {},
    "hopper/fp8_gemm.tile": {"M": 256, "N": 256, "K": 400, "SM_COUNT": 1},
    "hopper/fp8_gemm_blockscaled.tile": {"M": 256, "N": 256, "K": 384, "SM_COUNT": 1},
    "hopper/hgemm_v7_mn.tile": {"M": 256, "N": 256, "K": 192, "SM_COUNT": 1},
    # 3 x 2 ragged tiles on one CTA (consumer 0 takes three, consumer 1
    # two), 4 K tiles through a 5-stage ring: the consumers' walks wrap
    "hopper/hgemm_pingpong.tile": {"M": 264, "N": 136, "K": 200, "SM_COUNT": 1},
    # rows over several warps (the smem reduce), and W over RPC rows per CTA
    "softmax.tile": {"ROWS": 4, "N": 2048, "THREADS": 128},
    "rmsnorm.tile": {"ROWS": 4, "N": 1024, "THREADS": 64, "RPC": 2},
    # two heads of two query blocks each: a K/V ring that wraps, the masked
    # diagonal tile, both consumers' ping-pong and TMA stores
    "hopper/flash_attn_fwd.tile": {"BH": 2, "SEQ": 256, "CAUSAL": 1, "L2_KV_BYTES": 1},  # one head per CTA group
    "runtime_tma_copy.tile": {},
    "hopper/hgemm_v7_runtime.tile": {},
}

# the runtime extents of examples that leave some open (ragged on purpose)
RUNTIME_DIMS = {
    "runtime_add.tile": {"n": 1000},
    "runtime_tma_copy.tile": {"M": 100, "N": 72},
    "hopper/hgemm_v7_runtime.tile": {"M": 256, "N": 264, "K": 200},
}

NOT_LAUNCHED = {
    "hang_demo.tile": "hangs on purpose (tests/test_debug_hangs.py runs it with --debug-hangs)",
    "hopper/gemm_epilogue.tile": "helpers only, no kernel: the Hopper GEMMs include it",
}


def example_names() -> list[str]:
    """Every example, as its path under examples/."""
    paths = sorted(EXAMPLES.glob("*.tile")) + sorted(EXAMPLES.glob("*/*.tile"))
    return [p.relative_to(EXAMPLES).as_posix() for p in paths]


def compile_small(name: str) -> CompiledModule:
    """The example compiled for its own target at its small size (through
    the on-disk cache, so a second process compiling it again is cheap)."""
    return tilec.compile(EXAMPLES / name, defines=SMALL[name])


def target_of(name: str) -> str:
    """The example's target: its `target` line, else the default."""
    return parse((EXAMPLES / name).read_text(), str(EXAMPLES / name)).target or DEFAULT_TARGET


def runs_on(name: str, compute_capability: tuple[int, int]) -> bool:
    """Whether a device of that compute capability can run the example
    (decided from its target, before compiling it)."""
    try:
        device_arch(target_of(name), compute_capability)
    except LaunchError:
        return False
    return True


def random_args(entry: dict, seed: int = 0, dims: dict | None = None) -> list:
    """Random numpy arguments for a kernel.json entry, in call order, its
    runtime extents given by `dims`.  A dtype numpy lacks (bf16, the 8-bit
    floats) gets random bit patterns in the unsigned integers of its width,
    which the runtime accepts for it."""
    rng = np.random.default_rng(seed)
    args = []
    for p in caller_params(entry["params"]):
        if p["kind"] != "buffer":
            raise ValueError(f"{entry['name']}: scalar parameter '{p['name']}': random_args makes buffers only")
        dt = DTYPES[p["dtype"]]
        shape = tuple((dims or {})[d] if isinstance(d, str) else d for d in p["shape"])
        if dt.numpy is not None and dt.kind == "float":
            args.append(rng.standard_normal(shape).astype(dt.numpy))
        else:
            dtype = np.dtype(dt.numpy) if dt.numpy is not None else np.dtype(f"u{max(dt.bits // 8, 1)}")
            info = np.iinfo(dtype)
            args.append(rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True))
    return args


def launch(name: str, seed: int = 0) -> list:
    """Launch the example once at its small size on random inputs; return
    the arguments (outputs copied back)."""
    module = compile_small(name)
    kernel = module.kernel()
    args = random_args(kernel.meta, seed, RUNTIME_DIMS.get(name))
    kernel(*args)
    return args

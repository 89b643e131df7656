#!/usr/bin/env bash
# Everything tilec checks and measures on a GPU machine.  Logs go to $OUT
# (or ./device-out); a short table is printed.  Usage, from the repo root on
# the device:
#   bash tools/device_check.sh [tests] [bench] [sanitize]
# with no argument, all three.  `tests`: the gpu-marked tests and the SASS /
# resource check of the flagship kernels; `bench`: every benchmark of bench/
# at a size that fits one device call; `sanitize`: compute-sanitizer over
# every runnable example.  lark is not in the device image: carry its wheel
# in .whl/ (see the device README) and this script installs it first.  The C
# launcher is built in place, as `pip install .` would build it.
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
parts=${*:-tests bench sanitize}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export TILEC_CACHE_DIR=/tmp/tilec-cache PYTHONUNBUFFERED=1
python3 setup.py -q build_ext --inplace > "$OUT/build_ext.txt" 2>&1 || echo "C launcher not built (see build_ext.txt)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
bench() {  # bench NAME TIMEOUT ARGS...: bench/NAME.py, its log in $OUT/NAME.txt
  local name=$1 limit=$2; shift 2
  [ -f "bench/$name.py" ] || return 0
  (cd bench && PYTHONPATH=$PYTHONPATH:. timeout "$limit" python3 "$name.py" "$@") > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?)"; tail -${TAIL:-12} "$OUT/$name.txt"
}

case " $parts " in *" tests "*)
  timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/ > "$OUT/gpu_tests.txt" 2>&1
  echo "gpu tests: $(tail -1 "$OUT/gpu_tests.txt")"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.txt" | head -20
  python3 - > "$OUT/resources.txt" 2>&1 <<'PY'
import subprocess
from pathlib import Path
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble, parse_usage, resource_usage
from tilec.runtime.driver import jit_info_log
KERNELS = {
    "hopper/hgemm_v7.tile": {"M": 8192, "N": 8192, "K": 8192, "SM_COUNT": 132},
    "hopper/fp8_gemm.tile": {},
    "hopper/flash_attn_fwd.tile": {},
    "hopper/gemm_small_m.tile": {},
}
for name, defines in KERNELS.items():
    path = Path("examples") / name
    if not path.exists():
        continue
    r = compile_source(path.read_text(), str(path), target="sm_90a", defines=defines)
    cubin = Path("/tmp") / (path.stem + ".cubin")
    cubin.write_bytes(assemble(r.ptx, "sm_90a"))
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
    count = {op: sass.count(op) for op in ("HGMMA", "QGMMA", "MUFU.EX2", "LDL", "STL")}
    print(name, resource_usage(r.ptx, "sm_90a"), count)
    # what runs: the driver compiles the module whole (setmaxnreg kept), unlike nvJitLink above
    print(name, "as loaded:", parse_usage(jit_info_log(r.ptx)))
PY
  cat "$OUT/resources.txt";;
esac

case " $parts " in *" bench "*)
  bench gemm 240 --sizes 4096 8192 --versions 7 --dtypes f16 bf16
  bench gemm 240 --suites fp8 mn --sizes 4096 8192
  TAIL=60 bench gemm_sweep 420 --sets square llm --dtypes f16 --ms 16 64 128 2048 --runs 20 --tune-runs 8 --log "$OUT/sweep.json"
  TAIL=40 bench attention 420 --dtypes f16
  bench norms 200
  bench launch 200
  bench gemm_runtime 200
  bench ampere_gemm 120
  bench tma_copy 120;;
esac

case " $parts " in *" sanitize "*)
  timeout 480 python3 tools/sanitize.py --timeout 120 > "$OUT/sanitize.txt" 2>&1; echo "sanitize exit $?"
  awk '/^example +tool +errors/{p=1} p&&/^$/{exit} p' "$OUT/sanitize.txt";;
esac

#!/usr/bin/env bash
# Everything tilec checks and measures on a GPU machine, in one run:
# the gpu-marked tests, the GEMM and TMA-copy benchmarks, compute-sanitizer
# over every runnable example, and v7's resources and SASS.  Logs go to
# $OUT (or ./device-out).  Usage, from the repo root on the device:
#   bash tools/device_check.sh
# lark is not in the device image: carry its wheel in .whl/ (see the
# device README) and this script installs it first.
set -u
OUT=${OUT:-device-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export TILEC_CACHE_DIR=/tmp/tilec-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rfE tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests: $(tail -1 "$OUT/gpu_tests.txt")"
(cd bench && PYTHONPATH=$PYTHONPATH:. timeout 300 python3 gemm.py) > "$OUT/gemm.txt" 2>&1; tail -22 "$OUT/gemm.txt"
(cd bench && PYTHONPATH=$PYTHONPATH:. timeout 120 python3 tma_copy.py) > "$OUT/tma_copy.txt" 2>&1; tail -5 "$OUT/tma_copy.txt"
python3 - > "$OUT/v7_resources.txt" 2>&1 <<'PY'
from tilec.pipeline import compile_source
from tilec.runtime.assemble import assemble, resource_usage
src = open("examples/hopper/hgemm_v7.tile").read()
r = compile_source(src, "hgemm_v7.tile", target="sm_90a", defines={"M": 8192, "N": 8192, "K": 8192, "SM_COUNT": 132})
open("/tmp/v7.cubin", "wb").write(assemble(r.ptx, "sm_90a"))
print(resource_usage(r.ptx, "sm_90a"))
PY
cuobjdump -sass /tmp/v7.cubin > /tmp/v7.sass
echo "v7: $(cat "$OUT/v7_resources.txt"); HGMMA $(grep -c HGMMA /tmp/v7.sass), LDL/STL $(grep -cE 'LDL|STL' /tmp/v7.sass)" | tee -a "$OUT/v7_resources.txt"
timeout 400 python3 tools/sanitize.py --timeout 120 > "$OUT/sanitize.txt" 2>&1; echo "sanitize exit $?"; awk '/^example +tool +errors/{p=1} p&&/^$/{exit} p' "$OUT/sanitize.txt"

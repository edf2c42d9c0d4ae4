# Sourced by this session's call scripts, run on the GPU machine from the repository root
# (bash perf/results/20261127-s5-1xNVIDIA_H200/scripts/s5_callN.sh; $OUT is the device tool's).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
root=$(pwd)
export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
export R=$OUT/r
mkdir -p "$R"
P5=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/patches
t0=$(date +%s)
# mk NAME "TARGETS" [PATCH ...]: the tree with patches/PATCH.patch reversed, built into /tmp/b_NAME.
mk() {
  local n=$1 tg=$2 ps=(); shift 2
  for p in "$@"; do ps+=("$P5/$p.patch"); done
  tools/gpu-ab-build.sh "$n" "$tg" "${ps[@]}"
}
# fp8ab SHAPES: mkccl-perf gemm_fp8 on builds A and B in turn (A B A B) into fp8_A.log / fp8_B.log
# (and a JSON per run), the block-scale rows printed. PERF_A: A's mkccl-perf if not /tmp/b_A's.
fp8ab() {
  local n p
  for n in A B A B; do
    p=/tmp/b_$n/perf/mkccl-perf
    [ $n = A ] && p=${PERF_A:-$p}
    timeout 100 "$p" gemm_fp8 --shapes "$1" --json "$R/fp8_$n.$RANDOM.json" > "$R/fp8_$n.log.tmp" 2>&1
    echo "fp8 $n rc=$?"
    grep "block" "$R/fp8_$n.log.tmp" | awk '{print $1,$2,$3,$5,$8,$9}'
    cat "$R/fp8_$n.log.tmp" >> "$R/fp8_$n.log"
    rm -f "$R/fp8_$n.log.tmp"
  done
}

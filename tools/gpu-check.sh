#!/usr/bin/env bash
# On a GPU machine: build with every core, run every GPU test (single- and multi-process), run the
# benchmarks on all local GPUs (and on subsets), and write the JSON results under perf/results/.
#   tools/gpu-check.sh [--no-tests] [--no-bench] [--tests-regex RE] [--test-jobs N] [--bench-ops "op ..."]
#                      [--ring] [--bench-args "ARGS"] [--coll-range "ARGS"]
# --test-jobs N: N test programs at once (default 1). Their kernels then share the GPUs: fine for
# correctness (every GPU test ran with 3 at once on one H200 in ~4.5 min, against ~9 min one at a
# time), but a test that times something is then not to be trusted. The multi-process tests (label
# mp: whole GPUs per rank) run first, alone and one at a time.
# --bench-args: more mkccl-perf options for every benchmark run (e.g. "-G 20 -R 1": graph replays
# and registered buffers beside the eager, unregistered times); --coll-range: the collectives' size
# sweep (default "-b 8 -e 1G").
# --ring: the fused ops again at 3+ ranks with their opt-in ring paths (GEMM+RS/AR: the ring
# reduction by copy engines, 2 streams per slot; AllGather+GEMM: the ce plan along the ring), into
# <op>-ws<n>-ring.json beside the defaults' (the ring's speed at 4 ranks decides its default).
# Environment: MKCCL_TEST_TIMEOUT (s per test, default 600), MKCCL_TESTS_STAGE_TIMEOUT (s for all
# tests, default 3600), MKCCL_BENCH_TIMEOUT (s per benchmark run, default 900), MKCCL_BENCH_WS (world sizes, default
# "2 4 8" where they fit), MKCCL_BENCH_OPS (default: every op), MKCCL_BENCH_EMULATED=0 to skip the
# collectives on 2 emulated nodes (MKCCL_BENCH_EMULATED_OPS).
# Logs and a tarball of the results also go to $OUT when it is set (the lent-GPU tool's folder).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tests=1; bench=1; prebuilt=0; ring=0; tests_re=""; test_jobs=1; bench_args=""; coll_range="-b 8 -e 1G"; bench_ops="${MKCCL_BENCH_OPS:-gemm allgather reducescatter allreduce alltoall ag_gemm gemm_rs gemm_ar}"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --prebuilt) prebuilt=1 ;;  # use $MKCCL_BUILD_DIR as it is (built elsewhere, same paths)
    --tests-regex) tests_re="$2"; shift ;;
    --test-jobs) test_jobs="$2"; shift ;;
    --bench-ops) bench_ops="$2"; shift ;;
    --ring) ring=1 ;;
    --bench-args) bench_args="$2"; shift ;;
    --coll-range) coll_range="$2"; shift ;;
    *) echo "gpu-check: unknown argument $1"; exit 2 ;;
  esac
  shift
done
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
# The lent-GPU tool returns at most 8 files: logs go to one folder that is tarred at the end.
logs=$(mktemp -d /tmp/gpu-check-logs.XXXX)
build=${MKCCL_BUILD_DIR:-build-gpu}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
stamp=$(date -u +%Y%m%d-%H%M%S)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
resdir=perf/results/${stamp}-${ngpu}x${gpu}
mkdir -p "$resdir"
echo "== gpu-check: $ngpu x $gpu, results in $resdir"

extra=""
# libfabric carried from tools/deps-libfabric.sh (GPU images without its headers): build with it,
# and let libmkccl's dlopen find it and the libraries its providers load.
if [ -d .deps/libfabric/include ]; then
  extra="-DLIBFABRIC_ROOT=$root/.deps/libfabric"
  export LD_LIBRARY_PATH="$root/.deps/libfabric/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
t0=$(date +%s)
if [ $prebuilt = 0 ]; then
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release $extra > "$logs/configure.log" 2>&1 || { cat "$logs/configure.log"; exit 1; }
grep "mkccl:" "$logs/configure.log"
if ! cmake --build "$build" -j "$(nproc)" > "$logs/build.log" 2>&1; then
  grep -E "error|FAILED" "$logs/build.log" | head -40
  exit 1
fi
echo "== build: $(( $(date +%s) - t0 )) s"
fi

status=0
if [ $tests = 1 ]; then
  t0=$(date +%s)
  # The multi-process tests (label mp) run alone, one at a time: their ranks' persistent kernels take
  # whole GPUs, and the in-process tests whose ranks share a GPU need their grids co-resident (a
  # 4-rank GEMM+AllReduce test timed out beside gemm_ar_test_np2 under --test-jobs 3 on 2 GPUs).
  args=(-L gpu -LE mp -j "$test_jobs" --output-on-failure --timeout "${MKCCL_TEST_TIMEOUT:-600}")
  margs=(-L mp -j 1 --output-on-failure --timeout "${MKCCL_TEST_TIMEOUT:-600}")
  [ -n "$tests_re" ] && args+=(-R "$tests_re") && margs+=(-R "$tests_re")
  (cd "$build" && timeout "${MKCCL_TESTS_STAGE_TIMEOUT:-3600}" ctest "${margs[@]}") > "$logs/ctest-gpu.log" 2>&1 || status=1
  (cd "$build" && timeout "${MKCCL_TESTS_STAGE_TIMEOUT:-3600}" ctest "${args[@]}") >> "$logs/ctest-gpu.log" 2>&1 || status=1
  grep -E "tests passed|Test +#|Failed|\*\*\*" "$logs/ctest-gpu.log" | tail -60
  echo "== GPU tests: $(( $(date +%s) - t0 )) s"
fi

if [ $bench = 1 ] && [ -x "$build/perf/mkccl-perf" ]; then
  perf="$build/perf/mkccl-perf"
  # One run of $op on $g GPUs into <op>-ws<g><tag>.json (and its log), with env assignments.
  bench_run() {  # op g tag lines-of-log-to-show [VAR=value ...]
    local op=$1 g=$2 tag=$3 lines=$4; shift 4
    local t0 name="${op}-ws${g}${tag}"
    t0=$(date +%s)
    env "$@" timeout "${MKCCL_BENCH_TIMEOUT:-900}" "$perf" "$op" -g "$g" "${range[@]}" $bench_args --json "$resdir/$name.json" \
      > "$logs/bench-$name.log" 2>&1 || status=1
    tail -"$lines" "$logs/bench-$name.log"
    echo "== bench $op ws=$g${tag:+ ($*)}: $(( $(date +%s) - t0 )) s"
  }
  for op in $bench_ops; do
    if ! "$perf" --list 2>/dev/null | grep -qw "$op"; then echo "== bench $op: not in this build"; continue; fi
    range=()
    case "$op" in allgather|reducescatter|allreduce|alltoall) read -r -a range <<< "$coll_range" ;; esac
    case "$op" in
      gemm) sizes=(1) ;;
      *) sizes=() ; for g in ${MKCCL_BENCH_WS:-2 4 8}; do [ "$g" -le "$ngpu" ] && sizes+=("$g"); done ;;
    esac
    for g in "${sizes[@]}"; do
      bench_run "$op" "$g" "" 25
      [ $ring = 1 ] && [ "$g" -ge 3 ] || continue
      case "$op" in
        gemm_rs|gemm_ar) bench_run "$op" "$g" -ring 8 MKCCL_TUNING="$op.reduce=ring;$op.push=ce;$op.ce_streams=2" ;;
        ag_gemm) bench_run "$op" "$g" -ring 8 MKCCL_TUNING="ag_gemm.plan=ce;ag_gemm.ce=ring" ;;
      esac
    done
  done
fi
# The inter-node path on emulated nodes (MKCCL_RANKS_PER_NODE splits this host; the wire is libfabric
# tcp through the proxy): correctness and speed of the hierarchical collectives, not a NIC's.
if [ $bench = 1 ] && [ "${MKCCL_BENCH_EMULATED:-1}" = 1 ] && [ "$ngpu" -ge 2 ] && [ -x "$build/perf/mkccl-perf" ]; then
  for op in ${MKCCL_BENCH_EMULATED_OPS:-allreduce allgather reducescatter}; do
    t0=$(date +%s)
    MKCCL_RANKS_PER_NODE=$((ngpu / 2)) timeout "${MKCCL_BENCH_TIMEOUT:-900}" "$build/perf/mkccl-perf" "$op" -g "$ngpu" \
      -b 8 -e 64M -f 8 --json "$resdir/${op}-ws${ngpu}-2nodes-tcp.json" > "$logs/bench-${op}-2nodes.log" 2>&1 || status=1
    tail -12 "$logs/bench-${op}-2nodes.log"
    echo "== bench $op ws=$ngpu as 2 emulated nodes: $(( $(date +%s) - t0 )) s"
  done
fi
# The FIFO + proxy command rate and the tcp transport's bandwidth (mkccl-perf fifo / netbw).
if [ $bench = 1 ] && [ "${MKCCL_BENCH_EMULATED:-1}" = 1 ] && [ -x "$build/perf/mkccl-perf" ]; then
  for spec in "fifo 1" "netbw 2"; do
    set -- $spec
    [ "$2" -le "$ngpu" ] || continue
    if ! "$build/perf/mkccl-perf" --list 2>/dev/null | grep -qw "$1"; then echo "== bench $1: not in this build"; continue; fi
    t0=$(date +%s)
    timeout "${MKCCL_BENCH_TIMEOUT:-900}" "$build/perf/mkccl-perf" "$1" -g "$2" --json "$resdir/$1-ws$2.json" \
      > "$logs/bench-$1.log" 2>&1 || status=1
    tail -14 "$logs/bench-$1.log"
    echo "== bench $1 ws=$2: $(( $(date +%s) - t0 )) s"
  done
fi
tar czf "$out/results.tgz" "$resdir" 2>/dev/null
cp "$logs/ctest-gpu.log" "$out/" 2>/dev/null
tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null
exit $status

# Sourced by this session's call scripts after session 6's common.sh.
# gemm_sweep NAME VARIANTS [mkccl-perf gemm arguments...]: one mkccl-perf gemm run with
# MKCCL_PERF_GEMM_VARIANTS=VARIANTS into $R/NAME.json, its rows (NAME.txt), any wrong row, and the
# best configurations per shape.
gemm_sweep() {
  local name=$1 variants=$2
  shift 2
  MKCCL_PERF_GEMM_VARIANTS="$variants" timeout 300 $B/perf/mkccl-perf gemm "$@" --json $R/$name.json > $R/$name.log 2>&1
  echo "$name rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/$name.json > $R/$name.txt
  grep -c wrong $R/$name.txt; grep -v "wrong 0" $R/$name.txt | head -3
  python3 perf/results/20261128-s11/scripts/best.py $R/$name.json
}

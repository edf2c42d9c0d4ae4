#!/usr/bin/env bash
# Session-5 call 12: the fp8 per-tensor planner with its own tile efficiencies: gemm_fp8 on the
# default shapes twice, gemm_fp8_test, gemm_fp8_plan_test.
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf gemm_fp8_test gemm_fp8_plan_test"
for i in 1 2; do
  timeout 90 /tmp/b_A/perf/mkccl-perf gemm_fp8 --json $R/gemm_fp8_$i.json > $R/gemm_fp8_$i.log 2>&1; echo "== run $i rc=$?"
  grep -v "^#" $R/gemm_fp8_$i.log | awk '{print $1"x"$2"x"$3, $5, $8, $9, ($0 ~ /per-tensor/ ? "tensor" : "block")}'
done
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; tail -2 $R/gemm_fp8_test.log
/tmp/b_A/tests/kernels/gemm_fp8_plan_test > $R/gemm_fp8_plan_test.log 2>&1; echo "plan test rc=$?"
cd $OUT && tar czf s5l.tgz r && rm -rf r

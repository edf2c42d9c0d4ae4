#!/usr/bin/env bash
# Session-12 call 3 (2 GPUs): the AllGather+GEMM split route: ag_gemm_net_test (fused kernel and
# split route at 2 x 1, 2 x 2, 4 x 1; ranks share the GPUs), gemm_rs_net_test (every route), then
# both overlap benches twice with one GPU per emulated node.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl ag_gemm_net_test gemm_rs_net_test"
timeout 240 $B/tests/fused/ag_gemm_net_test > $R/ag_gemm_net_test.log 2>&1
echo "ag_gemm_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $R/ag_gemm_net_test.log | head -24
timeout 200 $B/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1
echo "gemm_rs_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $R/gemm_rs_net_test.log | head -10
for i in 1 2; do
  timeout 150 $B/tests/fused/ag_gemm_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/ag-overlap-$i.log 2>&1
  echo "ag overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261128-s12/scripts/bench_show.py $R/ag-overlap-$i.log
  timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/rs-overlap-$i.log 2>&1
  echo "rs overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261128-s12/scripts/bench_show.py $R/rs-overlap-$i.log
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

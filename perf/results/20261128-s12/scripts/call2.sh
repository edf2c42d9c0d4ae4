#!/usr/bin/env bash
# Session-12 call 2 (2 GPUs): the split route with each piece summed as it lands and auto taking
# it: gemm_rs_net_test's split, auto and error tests (ranks share the GPUs), its overlap bench three
# times (one GPU per emulated node), and AllGather+GEMM's overlap bench twice beside it.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl gemm_rs_net_test ag_gemm_net_test"
timeout 200 $B/tests/fused/gemm_rs_net_test --gtest_filter='*Split*:*Errors*' > $R/gemm_rs_net_test-split.log 2>&1
echo "gemm_rs_net_test split rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $R/gemm_rs_net_test-split.log | head -20
for i in 1 2 3; do
  timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/rs-overlap-$i.log 2>&1
  echo "rs overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261128-s12/scripts/bench_show.py $R/rs-overlap-$i.log
done
for i in 1 2; do
  timeout 150 $B/tests/fused/ag_gemm_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/ag-overlap-$i.log 2>&1
  echo "ag overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261128-s12/scripts/bench_show.py $R/ag-overlap-$i.log
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

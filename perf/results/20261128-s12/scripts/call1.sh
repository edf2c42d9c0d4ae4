#!/usr/bin/env bash
# Session-12 call 1 (2 GPUs): the split route of GEMM+ReduceScatter / GEMM+AllReduce across
# emulated nodes: gemm_rs_net_test (every route at 2 x 1, 2 x 2, 4 x 1; ranks share the GPUs),
# then its overlap bench twice with one GPU per emulated node (sequential, fused and split routes
# in the same run).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl gemm_rs_net_test"
timeout 300 $B/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1
echo "gemm_rs_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure|error" $R/gemm_rs_net_test.log | head -40
for i in 1 2; do
  timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/overlap-$i.log 2>&1
  echo "overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  python3 perf/results/20261128-s12/scripts/bench_show.py $R/overlap-$i.log
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-9 call 8 (1 GPU): after the split-K scheduler's whole-tile branch became one (split
# remainder and stream-K) and gemm_test's host reference a helper: the scheduler's CPU tests and
# gemm_test's split K, split remainder and stream-K cases, and a decode/odd spot check.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl gemm_test gemm_split_k_test"
$B/tests/kernels/gemm_split_k_test > $R/gemm_split_k_test.log 2>&1; echo "split_k_test rc=$?"
timeout 100 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitRemainder:Gemm.StreamK:Gemm.SplitK*:Gemm.BackToBackLaunches' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |^\[       OK|Failure" $R/gemm_test.log | head -20
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

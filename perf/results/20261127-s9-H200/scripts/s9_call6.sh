#!/usr/bin/env bash
# Session-9 call 6 (1×H100): the 128 × 192 tiles and the split remainder on an H100, whose planner
# rates for 128 × 192 are estimates: gemm_test's variants and split remainder; the odd set with
# every tile configuration forced, the defaults, and the defaults without the split remainder,
# against cuBLAS (alternating blocks).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 120 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitRemainder:*Variants*' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.stream_k=off,256x2,256x1,192x2,192x1,128x2,128x1" MKCCL_PERF_GEMM_SET=odd timeout 240 \
  $B/perf/mkccl-perf gemm --iters 24 --json $R/gemm-odd-variants.json > $R/gemm-odd-variants.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-variants.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

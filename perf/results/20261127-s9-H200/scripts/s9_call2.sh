#!/usr/bin/env bash
# Session-9 call 2 (1 GPU): 128 x 192 tiles for the plain GEMM. gemm_test (every variant, 192x1 and
# 192x2 included, against cuBLAS) and the planner's CPU tests; then the odd set with every tile
# configuration forced beside auto against cuBLAS (alternating blocks), and the default shapes.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_plan_test gemm_split_k_test gemm_fp8_plan_test"
for t in gemm_plan_test gemm_split_k_test gemm_fp8_plan_test; do $B/tests/kernels/$t > $R/$t.log 2>&1; echo "$t rc=$?"; done
timeout 200 $B/tests/kernels/gemm_test > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
MKCCL_PERF_GEMM_VARIANTS="auto,256x2,256x1,192x2,192x1,128x2,128x1" MKCCL_PERF_GEMM_SET=odd timeout 200 \
  $B/perf/mkccl-perf gemm --iters 24 --json $R/gemm-odd-variants.json > $R/gemm-odd-variants.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-variants.json
timeout 90 $B/perf/mkccl-perf gemm --iters 30 --json $R/gemm-default.json > $R/gemm-default.log 2>&1
echo "default rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-default.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

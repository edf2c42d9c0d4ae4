#!/usr/bin/env bash
# Session-9 call 7 (1×H100): the defaults after the split remainder's rule was tightened (6 k-blocks
# per part, >= 12% predicted) and the H100's 128 x 192 rates measured: the CPU rule tests, the odd
# set auto against cuBLAS (alternating blocks).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_split_k_test gemm_plan_test"
$B/tests/kernels/gemm_split_k_test > $R/gemm_split_k_test.log 2>&1; echo "split_k_test rc=$?"
$B/tests/kernels/gemm_plan_test > $R/gemm_plan_test.log 2>&1; echo "plan_test rc=$?"
MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.stream_k=off" MKCCL_PERF_GEMM_SET=odd timeout 150 $B/perf/mkccl-perf gemm --iters 40 \
  --json $R/gemm-odd.json > $R/gemm-odd.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

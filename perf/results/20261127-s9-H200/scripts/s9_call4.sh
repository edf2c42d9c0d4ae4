#!/usr/bin/env bash
# Session-9 call 4 (1 GPU): what a GEMM call costs the host (gemm_host_cost_probe); gemm_test whole
# (the split remainder now on by default); the odd and decode sets, auto against cuBLAS.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_host_cost_probe"
timeout 60 $B/tools/gemm_host_cost_probe > $R/host_cost.log 2>&1; echo "host probe rc=$?"; cat $R/host_cost.log
timeout 200 $B/tests/kernels/gemm_test > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
MKCCL_PERF_GEMM_SET=odd timeout 120 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-odd.json > $R/gemm-odd.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_SET=decode timeout 120 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1
echo "decode rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd.json $R/gemm-decode.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

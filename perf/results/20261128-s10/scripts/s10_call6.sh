#!/usr/bin/env bash
# Session-10 calls 6 and 7 (1 GPU each: H200, then H100): the odd set on auto against cuBLAS with
# the planner's final tables (the other widths' rates of both GPUs).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf"
MKCCL_PERF_GEMM_SET=odd timeout 120 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-odd-auto.json > $R/gemm-odd-auto.log 2>&1
echo "odd auto rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-auto.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

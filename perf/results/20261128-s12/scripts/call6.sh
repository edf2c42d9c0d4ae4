#!/usr/bin/env bash
# Session-12 call 6 (2 GPUs): every GPU test of the final tree (tools/gpu-check.sh --no-bench:
# built here, multi-process tests first, then the rest), the net tests with auto's final rule and
# fp8_net_test among them.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl"
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=400 timeout $(( 590 - ($(date +%s) - t0) )) tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -45 $R/gpu-check.out
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.out 2>/dev/null
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-11 call 5 (2 GPUs): the decode set on auto (the final split-K rule, whole 128 x 64 tiles
# beside the parts) against the forced configurations, then every GPU test of the final tree
# (tools/gpu-check.sh --no-bench: built here, multi-process tests first, then the rest).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf"
S=1x4096x4096,1x4096x8192,1x8192x4096,1x8192x8192,16x4096x4096,16x4096x8192,16x8192x4096,16x8192x8192,64x4096x4096,64x4096x8192,64x8192x4096,64x8192x8192,128x4096x4096,128x4096x8192,128x8192x4096,128x8192x8192,256x4096x4096,256x4096x8192,256x8192x4096,256x8192x8192,32x14336x4096,32x4096x14336,64x28672x8192,128x8192x28672,1x1024x1024,8x14336x4096
V="auto,64x1,gemm.variant=64x1;gemm.split_k=2,gemm.variant=128x1;gemm.split_k=2,gemm.variant=128x1;gemm.split_k=3"
gemm_sweep gemm-decode-auto "$V" --shapes $S --iters 30 --rounds 2
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=400 timeout $(( 590 - ($(date +%s) - t0) )) tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -40 $R/gpu-check.out
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.out 2>/dev/null
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

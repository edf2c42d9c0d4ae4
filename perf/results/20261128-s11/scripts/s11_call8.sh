#!/usr/bin/env bash
# Session-11 call 8 (1 GPU, an H100 asked for): the skinny decode kernel on auto's rule (M <= 8 up to
# 64 Mi elements of W, M <= 16 up to 32 Mi): gemm_test (every variant and the decode, split-K and
# skinny tests), then the decode shapes with auto, skinny forced and the engine's splits forced
# against cuBLAS (alternating).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
S=1x4096x4096,1x4096x8192,1x8192x4096,1x8192x8192,16x4096x4096,16x4096x8192,16x8192x4096,16x8192x8192,4x4096x4096,1x1024x1024,8x14336x4096,1x14336x4096,8x8192x28672,32x4096x4096,64x4096x4096,1x152064x4096
V="auto,skinny,gemm.variant=128x1,gemm.variant=64x1;gemm.split_k=2"
gemm_sweep gemm-skinny "$V" --shapes $S --iters 40 --rounds 3
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

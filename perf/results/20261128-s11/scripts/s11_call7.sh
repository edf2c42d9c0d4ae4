#!/usr/bin/env bash
# Session-11 call 7 (1 GPU): the skinny decode kernel (gemm.variant=skinny: W streamed by 16-byte
# loads straight into mma.sync fragments, operands swapped, 8 warps splitting K per 16 rows):
# gemm_test's Skinny and every variant's tail shapes, then the decode set with skinny forced beside
# auto against cuBLAS (alternating).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.Skinny:Gemm/GemmVariants.*/vskinny:Gemm.ClustersAlongN:Gemm.DecodeShapes' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
S=1x4096x4096,1x4096x8192,1x8192x4096,1x8192x8192,16x4096x4096,16x4096x8192,16x8192x4096,16x8192x8192,32x4096x4096,32x8192x8192,32x14336x4096,32x4096x14336,1x1024x1024,8x14336x4096,1x14336x4096,4x4096x4096,8x8192x28672,1x152064x4096
gemm_sweep gemm-skinny "auto,skinny" --shapes $S --iters 40 --rounds 3
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

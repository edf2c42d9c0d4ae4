#!/usr/bin/env bash
# Session-11 call 2 (1 GPU): split K on 128 x 64 tiles (gemm.variant=64x1 with gemm.split_k=s):
# gemm_test's SplitKForced (now with it) and ClustersAlongN, then the decode set with 64-wide parts
# forced (2, 3, 4, 6 parts) beside the 128-wide ones (2, 3, 4) and auto, against cuBLAS, alternating.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitKForced:Gemm.ClustersAlongN:Gemm.DecodeShapes:Gemm.SplitKBackToBackAndGraph' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
V=auto
for s in 2 3 4 6; do V="$V,gemm.variant=64x1;gemm.split_k=$s"; done
for s in 2 3 4; do V="$V,gemm.variant=128x1;gemm.split_k=$s"; done
MKCCL_PERF_GEMM_SET=decode gemm_sweep gemm-decode-split64 "$V" --iters 40 --rounds 3
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

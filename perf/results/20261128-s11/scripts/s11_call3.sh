#!/usr/bin/env bash
# Session-11 call 3 (1 H100): auto now takes 128 x 64 split-K parts where the model predicts 3%;
# gemm_test (split K, clusters along N); the decode set and four more decode shapes with auto, the
# 64-wide parts forced (2, 3, 4, 6) and the 128-wide ones (2, 3, 4); then clusters along N on the
# small and misaligned shapes (H100), alternating with cuBLAS.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitKForced:Gemm.ClustersAlongN:Gemm.DecodeShapes:Gemm.SplitKBackToBackAndGraph:Gemm.FigureShapes' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
S=1x4096x4096,1x4096x8192,1x8192x4096,1x8192x8192,16x4096x4096,16x4096x8192,16x8192x4096,16x8192x8192,64x4096x4096,64x4096x8192,64x8192x4096,64x8192x8192,128x4096x4096,128x4096x8192,128x8192x4096,128x8192x8192,256x4096x4096,256x4096x8192,256x8192x4096,256x8192x8192,32x14336x4096,32x4096x14336,64x28672x8192,128x8192x28672,1x1024x1024,8x14336x4096,32x4096x4096,8x2048x2048,128x2048x2048,64x4096x14336
V=auto
for s in 2 3 4 6; do V="$V,gemm.variant=64x1;gemm.split_k=$s"; done
for s in 2 3 4; do V="$V,gemm.variant=128x1;gemm.split_k=$s"; done
gemm_sweep gemm-decode-split64 "$V" --shapes $S --iters 40 --rounds 3
S=1000x1032x4096,1000x1032x4104,2000x2056x4104,4097x4104x4096,4097x4104x4104,333x520x1000
V=auto
for w in 80x1 80x2 96x1 96x2 128x1 128x2 144x2 192x2 208x1 224x2; do
  V="$V,$w,gemm.variant=$w;gemm.cluster_n=2;gemm.stream_k=off"
done
gemm_sweep gemm-cluster-n "$V" --shapes $S --iters 20 --rounds 2
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

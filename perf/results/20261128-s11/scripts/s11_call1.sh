#!/usr/bin/env bash
# Session-11 call 1 (1 GPU): clusters along N sharing the A tile (gemm.cluster_n): the GEMM tests
# that force them (and the layout / plan CPU tests), then the small and misaligned shapes with
# every width forced alone, with clusters along N of 2 and 4, against cuBLAS (alternating).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_layout_test gemm_plan_test"
$B/tests/kernels/gemm_layout_test > $R/layout.log 2>&1; echo "layout rc=$?"
$B/tests/kernels/gemm_plan_test > $R/plan.log 2>&1; echo "plan rc=$?"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.ClustersAlongN:Gemm.FigureShapes:Gemm/GemmVariants.TailShapes/*:Gemm.SplitRemainder' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
S=1000x1032x4096,1000x1032x4104,333x520x1000,2000x2056x4096,2000x2056x4104,4097x4104x4096,4097x4104x4104,3072x3072x4096
V=auto
for w in 64x1 64x2 80x1 80x2 96x1 96x2 112x2 128x1 128x2 144x1 144x2 192x1 192x2 208x1 224x2 256x2; do
  V="$V,$w"
  for n in 2 4; do V="$V,gemm.variant=$w;gemm.cluster_n=$n;gemm.stream_k=off"; done
done
gemm_sweep gemm-cluster-n "$V" --shapes $S --iters 20 --rounds 2
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

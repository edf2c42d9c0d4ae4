#!/usr/bin/env bash
# Session-9 call 3 (1 GPU): the split remainder. gemm_test's new and related cases; the probe
# (whole tiles against the split remainder, three tiles, four shapes, and stream-K once); the odd
# set with the remainder forced per tile and by its rule beside auto against cuBLAS (alternating
# blocks); then the MoE tests across emulated nodes (the fused calls on the sequential route) and
# moe_test (the shared helpers), ranks sharing the GPU.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_streamk_probe_test moe_net_test moe_test"
timeout 150 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitRemainder:Gemm.StreamK:GemmVariants/*' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
timeout 150 $B/tests/kernels/gemm_streamk_probe_test > $R/skprobe.log 2>&1; echo "probe rc=$? $(( $(date +%s) - t0 ))s"
grep -E "^SKPROBE|mainloop per|epilogue \(us\)|FAILED|PASSED" $R/skprobe.log | head -120
MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.stream_k=auto,auto;gemm.stream_k=split,256x1;gemm.stream_k=split,192x1;gemm.stream_k=split,128x1;gemm.stream_k=split" \
  MKCCL_PERF_GEMM_SET=odd timeout 200 $B/perf/mkccl-perf gemm --iters 24 --json $R/gemm-odd-remainder.json > $R/gemm-odd-remainder.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-remainder.json
CUDA_MODULE_LOADING=EAGER timeout 200 $B/tests/moe/moe_net_test > $R/moe_net_test.log 2>&1; echo "moe_net_test rc=$? $(( $(date +%s) - t0 ))s"
grep -E "^\[  (FAILED|PASSED) |^\[       OK|Failure" $R/moe_net_test.log | head -30
CUDA_MODULE_LOADING=EAGER timeout 150 $B/tests/moe/moe_test > $R/moe_test.log 2>&1; echo "moe_test rc=$? $(( $(date +%s) - t0 ))s"
grep -E "^\[  (FAILED|PASSED) |Failure" $R/moe_test.log | head -20
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

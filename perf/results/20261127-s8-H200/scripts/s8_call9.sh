#!/usr/bin/env bash
# Session-8 call 9 (1 GPU): the back-to-back MoE tests after their body moved into moe_gpu_cases.h
# (moe_test: 50 calls at 2 and 3 ranks; moe_net_test: 20 calls across emulated nodes 2x1, 2x2, 4x1).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl moe_test moe_net_test"
timeout 120 $B/tests/moe/moe_test --gtest_filter='MoeGpu.FiftyCallsBackToBack' > $R/moe_test-fifty.log 2>&1; echo "moe_test rc=$?"
CUDA_MODULE_LOADING=EAGER timeout 120 $B/tests/moe/moe_net_test --gtest_filter='*TwentyCalls*' > $R/moe_net_test-twenty.log 2>&1; echo "moe_net_test rc=$?"
grep -hE "^\[  (FAILED|PASSED) |^\[       OK" $R/*.log
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c9.tgz r)

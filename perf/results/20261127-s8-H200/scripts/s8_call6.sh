#!/usr/bin/env bash
# Session-8 call 6 (2 GPUs): every GPU test of the final tree (tools/gpu-check.sh --no-bench: built
# here, the multi-process tests first (np2: one process per GPU), then the rest three at a time);
# then moe_test's fused layers at 1-4 ranks (4 ranks over the 2 GPUs) once more, and the MoE layer
# at 2 ranks on one shape (the fused calls now fork onto the communicator's second stream).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=360 timeout 470 tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -45 $R/gpu-check.out
for i in 1; do
  timeout 50 $B/tests/moe/moe_test --gtest_filter='MoeGpu.LayerBothHalvesFusedOneToFourRanks:MoeGpu.LayerFusedOneToFourRanks' > $R/moe-fused-$i.log 2>&1
  echo "moe fused run $i rc=$?"; grep -E "^\[  (FAILED|PASSED)" $R/moe-fused-$i.log | head -4
done
LAY=4096x2048x128
lay ws2 $B/perf/mkccl-perf
res=$(ls -d perf/results/*-2xNVIDIA_H* 2>/dev/null | grep -v "s[0-9]-" | tail -1)
[ -n "$res" ] && cp -r $res $R/
sed -i "s#$OUT/r/#r/#g" $R/*.log $R/*.out 2>/dev/null
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c6.tgz r)

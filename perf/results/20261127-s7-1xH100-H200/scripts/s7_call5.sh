#!/usr/bin/env bash
# Session-7 call 5 (1 GPU): every GPU test of this tree (tools/gpu-check.sh --no-bench: built here,
# the multi-process tests first, then the rest three at a time; the np2/np4 variants skip), then
# fused_reg_test alone three times (its uploads now on the ranks' streams).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=400 timeout 500 tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -40 $R/gpu-check.out
for i in 1 2 3; do
  timeout 40 $B/tests/fused/fused_reg_test > $R/reg-$i.log 2>&1; echo "fused_reg_test run $i rc=$?"
  grep -E "^\[  (FAILED|PASSED)" $R/reg-$i.log | head -4
done
res=$(ls -d perf/results/*-1xNVIDIA_H* 2>/dev/null | grep -v "s[0-9]-" | tail -1)
[ -n "$res" ] && cp -r $res $R/
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c5.tgz r)

#!/usr/bin/env bash
# Session-10 call 3 (1 GPU): the plain GEMM's other tile widths (128 x W, W = 64..240 by 16):
# gemm_test over every variant, fused_args_test's OtherWidths, gemm_plan_test; the odd set with
# every width forced (the planner's rates come from these); moe_net_test (the combine's network
# entries now dtype rows).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_plan_test fused_args_test moe_net_test"
timeout 240 $B/tests/kernels/gemm_test > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
timeout 120 $B/tests/fused/fused_args_test --gtest_filter='*OtherWidths*:*OneRank' > $R/fused_args.log 2>&1
echo "fused_args rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/fused_args.log | head
V=auto,128x1,128x2,192x1,192x2,256x1,256x2,64x1,64x2,80x1,80x2,96x1,96x2,112x1,112x2,144x1,144x2,160x1,160x2,176x2,208x1,208x2,224x2,240x2
MKCCL_PERF_GEMM_VARIANTS=$V MKCCL_PERF_GEMM_SET=odd timeout 200 $B/perf/mkccl-perf gemm --iters 20 --rounds 2 \
  --json $R/gemm-odd-widths.json > $R/gemm-odd-widths.log 2>&1
echo "odd widths rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-widths.json | awk '{print}' | head -400 > $R/gemm-odd-widths.txt
grep -c wrong $R/gemm-odd-widths.txt; grep -v "wrong 0" $R/gemm-odd-widths.txt | head
(cd $B && timeout 150 ctest -R "moe_net_test" --timeout 140 --output-on-failure > $R/ctest-moe-net.log 2>&1); echo "moe_net rc=$? $(( $(date +%s) - t0 ))s"
grep -E "tests passed|Failed" $R/ctest-moe-net.log | head -3
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-10 call 4 (1 GPU): the other tile widths forced on the odd set (the planner's rates on
# this GPU), the odd and decode sets on auto against cuBLAS; then the fused fp8 ops' block-scale
# tests (gemm_rs_fp8_test, ag_gemm_fp8_test: *Block* and the bad arguments), gemm_fp8_test.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_rs_fp8_test ag_gemm_fp8_test gemm_fp8_test fused_args_test"
V=auto,128x1,128x2,192x1,192x2,256x1,256x2,64x1,64x2,80x1,80x2,96x1,96x2,112x1,112x2,144x1,144x2,160x1,160x2,176x1,176x2,208x1,208x2,224x1,224x2,240x1,240x2
MKCCL_PERF_GEMM_VARIANTS=$V MKCCL_PERF_GEMM_SET=odd timeout 200 $B/perf/mkccl-perf gemm --iters 20 --rounds 2 \
  --json $R/gemm-odd-widths.json > $R/gemm-odd-widths.log 2>&1
echo "odd widths rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_SET=all timeout 120 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-auto.json > $R/gemm-auto.log 2>&1
echo "auto rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-auto.json
for t in gemm_rs_fp8_test:'*Block*:GemmReduceFp8.BadArguments' ag_gemm_fp8_test:'AgGemmFp8Block.*:AgGemmFp8.BadArguments' \
         gemm_fp8_test:'*' fused_args_test:'FusedArgs.CapturedAndReplayed'; do
  b=${t%%:*}; f=${t#*:}
  timeout 150 $B/tests/*/$b --gtest_filter="$f" > $R/$b.log 2>&1
  echo "$b rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED|  OK) |Failure" $R/$b.log | head -12
done
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-12 call 7 (1 GPU, ranks sharing it): the split routes on nodes of different sizes (the
# direct exchange) and the pieced collectives after their rewrite: fp8_net_test, ag_gemm_net_test,
# gemm_rs_net_test's split and uneven tests.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name --format=csv > $R/smi.txt 2>&1
build "mkccl fp8_net_test ag_gemm_net_test gemm_rs_net_test"
timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_filter='*Uneven*:*NetSplit*' > $R/gemm_rs_net_test.log 2>&1
echo "gemm_rs_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $R/gemm_rs_net_test.log | head -12
for t in fp8_net_test ag_gemm_net_test; do
  timeout 150 $B/tests/fused/$t > $R/$t.log 2>&1
  echo "$t rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $R/$t.log | head -12
done
sed -i "s#$root/#r/#g" $R/*.log 2>/dev/null
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-12 call 4 (2 GPUs): the fp8 fused ops across emulated nodes (fp8_net_test), and the
# AllGather+GEMM / GEMM+RS net tests again with auto's final rule (split with one rank per node,
# the fused kernels first with several).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl fp8_net_test ag_gemm_net_test gemm_rs_net_test"
for t in fp8_net_test ag_gemm_net_test gemm_rs_net_test; do
  timeout 280 $B/tests/fused/$t > $R/$t.log 2>&1
  echo "$t rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|error:|rank [0-9]:" $R/$t.log | head -16
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

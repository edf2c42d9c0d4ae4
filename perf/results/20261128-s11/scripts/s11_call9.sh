#!/usr/bin/env bash
# Session-11 call 9 (1 GPU, warm): the fused ops' and graph tests on the final tree (their
# sequential plans' decode-sized GEMMs now run the skinny kernel, with the Ex calls' pitches and
# bias): fused_args_test, gemm_rs_test, gemm_ar_test, ag_gemm_test, graph_test, moe_test.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl fused_args_test gemm_rs_test gemm_ar_test ag_gemm_test graph_test moe_test"
(cd $B && timeout 300 ctest -R "^(fused_args_test|gemm_rs_test|gemm_ar_test|ag_gemm_test|graph_test|moe_test)$" -j3 --timeout 280 --output-on-failure > $R/ctest.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "Test +#|tests passed|Failed|FAILED" $R/ctest.log | head -20
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

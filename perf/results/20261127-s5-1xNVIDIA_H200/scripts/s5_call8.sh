#!/usr/bin/env bash
# Session-5 call 8: A = the tree (fp8 block scales staged in shared memory by a producer-side warp),
# B = A without it (patches/scalering.patch reversed): gemm_fp8 alternating, gemm_fp8_test on A;
# gemm_rs_net_test (the fused route now the default across nodes) and its overlap benchmark on A.
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf gemm_fp8_test gemm_rs_net_test"; mk B mkccl-perf scalering
echo "built at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168,1000x4104x4112,2049x1544x1040
fp8ab $S
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_fp8_test.log | head
timeout 150 /tmp/b_A/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1; echo "gemm_rs_net_test rc=$?"; grep -E '^\[ +(OK|FAILED|PASSED) +\]|Failure' $R/gemm_rs_net_test.log | head -30
timeout 100 /tmp/b_A/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/gemm_rs_net_test-fused-overlap.log 2>&1; echo "overlap rc=$?"; grep -E 'BENCH' $R/gemm_rs_net_test-fused-overlap.log | sed 's/.*"M":\([0-9]*\),"N":\([0-9]*\),"K":\([0-9]*\).*overlap_ratio":\([0-9.]*\),"fused_call_us":\([0-9.]*\),"fused_overlap_ratio":\([0-9.]*\),"fused_vs_sequential":\([0-9.]*\).*/\1x\2x\3 seq \4 fused \6 f\/s \7/'
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5h.tgz r && rm -rf r

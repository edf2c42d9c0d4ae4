#!/usr/bin/env bash
# Session-6 call 9 (1 x H200, warm from call 8): fused_reg_test's GemmReduceScatterCRegistered
# failed in call 8 (216x520x64, 3 ranks on the GPU, C registered, gemm_rs.plan=auto): three runs of
# it on this tree with the plans logged, then three on the tree before this session
# (patches/s6-all.patch reversed).
. "$(dirname "$0")/common.sh"
F='--gtest_filter=*GemmReduceScatterCRegistered*'
for i in 1 2 3; do
  MKCCL_DEBUG=INFO timeout 60 $B/tests/fused/fused_reg_test $F > $R/reg-B$i.log 2>&1; echo "B run $i rc=$?"
  grep -E "^\[  (FAILED|     OK)|Which is" $R/reg-B$i.log | head -4
done
grep -hiE "gemm_rs|GemmReduceScatter" $R/reg-B1.log | grep -v "^\[" | sort | uniq -c | sort -rn | head -20
tools/gpu-ab-build.sh A "fused_reg_test" $P/s6-all.patch; echo "buildA rc=$? $(( $(date +%s) - t0 ))s"
for i in 1 2 3; do
  MKCCL_DEBUG=INFO timeout 60 /tmp/b_A/tests/fused/fused_reg_test $F > $R/reg-A$i.log 2>&1; echo "A run $i rc=$?"
  grep -E "^\[  (FAILED|     OK)|Which is" $R/reg-A$i.log | head -4
done
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c9.tgz r)

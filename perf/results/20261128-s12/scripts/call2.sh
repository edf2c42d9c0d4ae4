#!/usr/bin/env bash
# Session-12 call 2 (2 GPUs): the split route with each piece summed as it lands and auto taking
# it: gemm_rs_net_test's split, auto and error tests (ranks share the GPUs), its overlap bench three
# times (one GPU per emulated node), and AllGather+GEMM's overlap bench twice beside it.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl gemm_rs_net_test ag_gemm_net_test"
timeout 200 $B/tests/fused/gemm_rs_net_test --gtest_filter='*Split*:*Errors*' > $R/gemm_rs_net_test-split.log 2>&1
echo "gemm_rs_net_test split rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $R/gemm_rs_net_test-split.log | head -20
for i in 1 2 3; do
  timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/rs-overlap-$i.log 2>&1
  echo "rs overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  grep -h 'BENCH' $R/rs-overlap-$i.log | python3 -c '
import sys,json
for l in sys.stdin:
  d=json.loads(l.split("BENCH ",1)[1])
  print("  %s %dx%dx%d gemm %.0f xfer %.0f | seq %.0f (%.2f) fused %.0f (%.2f) split %.0f (%.2f)" % (d["op"],d["M"],d["N"],d["K"],
    d["gemm_alone_us"],d["transfer_alone_us"],d["call_us"],d["overlap_ratio"],d["fused_call_us"],d["fused_overlap_ratio"],
    d["split_call_us"],d["split_overlap_ratio"]))'
done
for i in 1 2; do
  timeout 150 $B/tests/fused/ag_gemm_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/ag-overlap-$i.log 2>&1
  echo "ag overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  grep -h 'BENCH' $R/ag-overlap-$i.log | python3 -c '
import sys,json
for l in sys.stdin:
  d=json.loads(l.split("BENCH ",1)[1])
  print("  ag %dx%dx%d gemm %.0f xfer %.0f | fused %.0f (%.2f) p128 %.2f p64 %.2f" % (d["M"],d["N"],d["K"],
    d["gemm_alone_us"],d["transfer_alone_us"],d["fused_us"],d["overlap_ratio"],d["overlap_ratio_piece128"],d["overlap_ratio_piece64"]))'
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

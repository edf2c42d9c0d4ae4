#!/usr/bin/env bash
# Session-12 call 3 (2 GPUs): the AllGather+GEMM split route: ag_gemm_net_test (fused kernel and
# split route at 2 x 1, 2 x 2, 4 x 1; ranks share the GPUs), gemm_rs_net_test (every route), then
# both overlap benches twice with one GPU per emulated node.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl ag_gemm_net_test gemm_rs_net_test"
timeout 240 $B/tests/fused/ag_gemm_net_test > $R/ag_gemm_net_test.log 2>&1
echo "ag_gemm_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $R/ag_gemm_net_test.log | head -24
timeout 200 $B/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1
echo "gemm_rs_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure" $R/gemm_rs_net_test.log | head -10
for i in 1 2; do
  timeout 150 $B/tests/fused/ag_gemm_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/ag-overlap-$i.log 2>&1
  echo "ag overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  grep -h 'BENCH' $R/ag-overlap-$i.log | python3 -c '
import sys,json
for l in sys.stdin:
  d=json.loads(l.split("BENCH ",1)[1])
  print("  ag %dx%dx%d gemm %.0f xfer %.0f | fused %.0f (%.2f) p128 %.2f p64 %.2f | split %.0f (%.2f)" % (d["M"],d["N"],d["K"],
    d["gemm_alone_us"],d["transfer_alone_us"],d["fused_us"],d["overlap_ratio"],d["overlap_ratio_piece128"],d["overlap_ratio_piece64"],
    d["split_us"],d["split_overlap_ratio"]))'
  timeout 150 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/rs-overlap-$i.log 2>&1
  echo "rs overlap $i rc=$? $(( $(date +%s) - t0 ))s"
  grep -h 'BENCH' $R/rs-overlap-$i.log | python3 -c '
import sys,json
for l in sys.stdin:
  d=json.loads(l.split("BENCH ",1)[1]); f=max(d["gemm_alone_us"],d["transfer_alone_us"])
  print("  %s %dx%dx%d gemm %.0f xfer %.0f | seq %.2f fused %.2f split %.2f | pieces 1 %.2f 2 %.2f 8 %.2f" % (d["op"],d["M"],d["N"],d["K"],
    d["gemm_alone_us"],d["transfer_alone_us"],d["overlap_ratio"],d["fused_overlap_ratio"],d["split_overlap_ratio"],
    d["split_pieces1_us"]/f,d["split_pieces2_us"]/f,d["split_pieces8_us"]/f))'
done
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

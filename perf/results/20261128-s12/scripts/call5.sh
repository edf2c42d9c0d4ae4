#!/usr/bin/env bash
# Session-12 call 5 (4 GPUs): the overlap benches with one GPU per rank on 2 emulated nodes of 2
# ranks (NVLink inside a node, tcp between them; twice) and on 4 nodes of 1 — the split routes
# against the fused kernels where a node has an NVLink stage (auto's rule).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name --format=csv > $R/smi.txt 2>&1
build "mkccl gemm_rs_net_test ag_gemm_net_test"
for s in 2x2 2x2 4x1; do
  for t in gemm_rs_net_test ag_gemm_net_test; do
    MKCCL_NET_BENCH_SPLIT=$s timeout 200 $B/tests/fused/$t --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/$t-$s-$(date +%s%N).log 2>&1
    echo "$t $s rc=$? $(( $(date +%s) - t0 ))s"
  done
done
python3 - $R <<'PY'
import glob,json,sys
for f in sorted(glob.glob(sys.argv[1]+"/*.log")):
  for l in open(f):
    if "BENCH " not in l: continue
    d=json.loads(l.split("BENCH ",1)[1]); fl=max(d["gemm_alone_us"],d["transfer_alone_us"])
    if d["op"]=="ag_gemm_net":
      print("  %s ag %dx%dx%d gemm %.0f xfer %.0f | fused %.2f split %.2f" % (d["split"],d["M"],d["N"],d["K"],d["gemm_alone_us"],d["transfer_alone_us"],d["overlap_ratio"],d["split_overlap_ratio"]))
    else:
      print("  %s %s %dx%dx%d gemm %.0f xfer %.0f | seq %.2f fused %.2f split %.2f" % (d["split"],d["op"],d["M"],d["N"],d["K"],d["gemm_alone_us"],d["transfer_alone_us"],d["overlap_ratio"],d["fused_overlap_ratio"],d["split_overlap_ratio"]))
PY
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

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
python3 perf/results/20261128-s12/scripts/bench_show.py $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-6 call 1 (2 x H200): where MoE dispatch / combine spend their time at 2 ranks (each
# phase left out in turn: patches/skip-*.patch, incremental rebuilds of the same tree), the
# overlap benches across emulated nodes with one GPU per node, and the grouped GEMM against
# torch._grouped_mm and dense cuBLAS on one GPU.
. "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_rs_net_test ag_gemm_net_test"
A2A="4096x7168x256,4096x2048x128,4096x4096x8"
a2a base $B/perf/mkccl-perf
for v in skip-expand skip-sendrow skip-return skip-reduce; do
  patch -s -p1 < $P/$v.patch && cmake --build $B -j 16 --target mkccl-perf > $R/build-$v.log 2>&1 && a2a $v $B/perf/mkccl-perf
  patch -s -R -p1 < $P/$v.patch
done
cmake --build $B -j 16 --target mkccl-perf > $R/build-rebase.log 2>&1
# Overlap across emulated nodes, one GPU per node (2 x 1).
for t in gemm_rs_net_test ag_gemm_net_test; do
  for i in 1 2; do
    timeout 120 $B/tests/fused/$t --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/$t-overlap-$i.log 2>&1
    echo "$t overlap $i rc=$?"; grep -h 'BENCH' $R/$t-overlap-$i.log | head -12
  done
done
echo "overlap done $(( $(date +%s) - t0 ))s"
# Grouped GEMM (one GPU): ours against torch._grouped_mm, and the dense GEMMs of the same rows.
timeout 150 python3 perf/moe_vs_torch.py --lib $B/libmkccl.so --shapes mixtral,qwen,ds --tokens 4096 --iters 20 \
  --json $R/gemms-vs-torch.json > $R/gemms-vs-torch.log 2>&1; echo "grouped rc=$?"; tail -12 $R/gemms-vs-torch.log
timeout 100 $B/perf/mkccl-perf gemm --shapes 8192x28672x4096,8192x4096x14336 --json $R/dense.json > $R/dense.log 2>&1
echo "dense rc=$?"; grep -v "^#" $R/dense.log | head
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c1.tgz r)

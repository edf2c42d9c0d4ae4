#!/usr/bin/env bash
# Session-9 call 5 (2 GPUs): every GPU test of the final tree (tools/gpu-check.sh --no-bench: built
# here, the multi-process tests first (np2: one process per GPU), then the rest three at a time);
# then the MoE layer across 2 emulated nodes x 1 rank (MKCCL_RANKS_PER_NODE=1, libfabric tcp): the
# composed calls and the fused calls on the sequential route, timed.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=360 timeout 470 tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -50 $R/gpu-check.out
MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe -g 2 --shapes 512x2048x128,4096x2048x128 --iters 10 \
  --json $R/moe-2nodes.json > $R/moe-2nodes.log 2>&1
echo "moe 2 nodes rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-2nodes.json; tail -5 $R/moe-2nodes.log
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.out 2>/dev/null
echo "total $(( $(date +%s) - t0 ))s"

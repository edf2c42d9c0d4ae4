#!/usr/bin/env bash
# Session-10 call 5 (2 GPUs): the MoE dispatch / combine and layer across 2 emulated nodes x 1 rank
# (the watcher warp and the dtype network entries of the combine), then every GPU test of the final
# tree (tools/gpu-check.sh --no-bench: built here, multi-process tests first, then the rest).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf"
for s in 512x2048x128 4096x2048x128; do
  MKCCL_RANKS_PER_NODE=1 timeout 60 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $s --iters 10 \
    --json $R/a2a-2nodes-$s.json > $R/a2a-2nodes-$s.log 2>&1
  echo "a2a $s rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-2nodes-$s.json
done
MKCCL_RANKS_PER_NODE=1 timeout 80 $B/perf/mkccl-perf moe -g 2 --shapes 512x2048x128,4096x2048x128 --iters 10 \
  --json $R/moe-2nodes.json > $R/moe-2nodes.log 2>&1
echo "moe 2 nodes rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-2nodes.json
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=400 timeout $(( 585 - ($(date +%s) - t0) )) tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$? $(( $(date +%s) - t0 ))s"; tail -45 $R/gpu-check.out
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.out 2>/dev/null
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

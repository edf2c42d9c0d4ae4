#!/usr/bin/env bash
# Session-10 call 1 (2 GPUs): the MoE dispatch and combine across 2 emulated nodes x 1 rank
# (MKCCL_RANKS_PER_NODE=1, libfabric tcp): timed, then one call of each traced (MKCCL_DEBUG=TRACE,
# whose lines now carry CLOCK_MONOTONIC microseconds) to see where the combine's time goes.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf"
for s in 512x2048x128 4096x2048x128; do
  MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $s --iters 10 \
    --json $R/a2a-2nodes-$s.json > $R/a2a-2nodes-$s.log 2>&1
  echo "a2a $s rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-2nodes-$s.json
done
for s in 512x2048x128 4096x2048x128; do
  MKCCL_DEBUG=TRACE MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $s --iters 2 \
    --warmup 1 --rounds 1 --no-baseline -c 0 > $R/trace-$s.out 2> $R/trace-$s.err
  echo "trace $s rc=$? $(( $(date +%s) - t0 ))s lines $(wc -l < $R/trace-$s.err)"
  grep -v "MKCCL TRACE" $R/trace-$s.err | tail -5
  gzip -f $R/trace-$s.err
done
rm -f $R/build.log $R/configure.log
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.out 2>/dev/null
echo "total $(( $(date +%s) - t0 ))s"

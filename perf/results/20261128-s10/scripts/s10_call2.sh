#!/usr/bin/env bash
# Session-10 call 2 (2 GPUs): the MoE watcher (one warp polls the network flags in host memory,
# the waiters poll device copies): moe_net_test (every case across emulated nodes), moe_test, then
# dispatch / combine and the layer across 2 emulated nodes x 1 rank, timed as in call 1, and one
# a2a call traced.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf moe_net_test moe_test"
(cd $B && timeout 240 ctest -R "moe_net_test|moe_test" --timeout 230 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "tests passed|Failed|FAILED|Passed" $R/ctest-moe.log | head -20
for s in 512x2048x128 4096x2048x128; do
  MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $s --iters 10 \
    --json $R/a2a-2nodes-$s.json > $R/a2a-2nodes-$s.log 2>&1
  echo "a2a $s rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-2nodes-$s.json
done
MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe -g 2 --shapes 512x2048x128,4096x2048x128 --iters 10 \
  --json $R/moe-2nodes.json > $R/moe-2nodes.log 2>&1
echo "moe 2 nodes rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-2nodes.json
s=4096x2048x128
MKCCL_DEBUG=TRACE MKCCL_RANKS_PER_NODE=1 timeout 100 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $s --iters 2 \
  --warmup 1 --rounds 1 --no-baseline -c 0 > $R/trace-$s.out 2> $R/trace-$s.err
echo "trace $s rc=$? $(( $(date +%s) - t0 ))s"; gzip -f $R/trace-$s.err; rm -f $R/trace-$s.out
rm -f $R/build.log $R/configure.log
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log 2>/dev/null
echo "total $(( $(date +%s) - t0 ))s"

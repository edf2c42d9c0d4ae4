#!/usr/bin/env bash
# Session-6 call 3 (2 x H200): the dispatch expanding pairs as they land (queue), the reduce in landing pieces,
# against the tree before (A: patches/s6-moe-v2.patch reversed): MoE GPU tests, moe_a2a (A, B, A, B),
# the phase probe (patches/probe.patch: globaltimer stamps printed by two CTAs), the layer (B, A).
. "$(dirname "$0")/common.sh"
moe_ab s6-moe-v2.patch
A2A="128x7168x256,4096x7168x256,16384x7168x256,4096x2048x128,16384x2048x128,4096x4096x8"
LAY="4096x7168x256,4096x2048x128,4096x4096x8"
a2a A1 /tmp/b_A/perf/mkccl-perf
a2a B1 $B/perf/mkccl-perf
a2a A2 /tmp/b_A/perf/mkccl-perf
a2a B2 $B/perf/mkccl-perf
patch -s -p1 < $P/probe.patch && cmake --build $B -j 24 --target mkccl-perf > $R/build-probe.log 2>&1 &&
  for sh in 128x7168x256 4096x7168x256 4096x2048x128 4096x4096x8; do
    timeout 60 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $sh --iters 4 --warmup 2 --rounds 1 > $R/probe-$sh.log 2>&1
    echo "probe $sh rc=$?"; grep PROBE $R/probe-$sh.log | tail -12
  done
patch -s -R -p1 < $P/probe.patch; cmake --build $B -j 24 --target mkccl-perf > $R/build-back.log 2>&1
lay B $B/perf/mkccl-perf
lay A /tmp/b_A/perf/mkccl-perf
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c3.tgz r)

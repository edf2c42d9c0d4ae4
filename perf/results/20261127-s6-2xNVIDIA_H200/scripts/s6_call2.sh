#!/usr/bin/env bash
# Session-6 call 2 (2 x H200): the combine's return and reduce on different warps (landing pieces
# announced) and the expansion by pair records, against the tree before (A: patches/s6-moe-v1.patch
# reversed): MoE GPU tests, moe_a2a (A, B, B with 4-slot reduce batches), the layer (A, B).
. "$(dirname "$0")/common.sh"
moe_ab s6-moe-v1.patch
A2A="4096x7168x256,4096x2048x128,4096x4096x8"; LAY=$A2A
a2a A1 /tmp/b_A/perf/mkccl-perf
a2a B1 $B/perf/mkccl-perf
cp $B/libmkccl.so.0.1.0 /tmp/libB8.so
patch -s -p1 < $P/batch4.patch && cmake --build $B -j 24 --target mkccl-perf > $R/build-batch4.log 2>&1 && a2a B4 $B/perf/mkccl-perf
patch -s -R -p1 < $P/batch4.patch; cmake --build $B -j 24 --target mkccl-perf > $R/build-back.log 2>&1
a2a A2 /tmp/b_A/perf/mkccl-perf
a2a B2 $B/perf/mkccl-perf
lay B $B/perf/mkccl-perf
lay A /tmp/b_A/perf/mkccl-perf
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c2.tgz r)

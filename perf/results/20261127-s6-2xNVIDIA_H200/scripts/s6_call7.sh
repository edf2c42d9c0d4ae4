#!/usr/bin/env bash
# Session-6 call 7 (2 x H200): the overlapped combine with 10 of 16 warps returning
# (patches/ret10.patch) against 8 (this tree), moe_a2a in two rounds, and moe_test on the variant.
. "$(dirname "$0")/common.sh"
build "mkccl mkccl-perf moe_test"
A2A="128x7168x256,4096x7168x256,4096x2048x128,4096x4096x8,16384x7168x256"
cp -r $B/perf /tmp/perf_base; cp $B/libmkccl.so* /tmp/perf_base/
patch -s -p1 < $P/ret10.patch
cmake --build $B -j "$(nproc)" --target mkccl-perf moe_test > $R/build-ret10.log 2>&1 || tail -5 $R/build-ret10.log
rm -rf /tmp/perf_ret10; cp -r $B/perf /tmp/perf_ret10; cp $B/libmkccl.so* /tmp/perf_ret10/
(cd $B && timeout 120 ctest -R "^moe_test$" --timeout 110 > $R/ctest-moe-ret10.log 2>&1); echo "moe_test ret10 rc=$?"
patch -s -R -p1 < $P/ret10.patch
run_a2a() { LD_LIBRARY_PATH=/tmp/perf_$1:$LD_LIBRARY_PATH a2a $1$2 /tmp/perf_$1/mkccl-perf; }
for round in 1 2; do for v in base ret10; do run_a2a $v $round; done; done
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c7.tgz r)

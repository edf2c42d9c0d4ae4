#!/usr/bin/env bash
# Session-6 call 6 (2 x H200): the MoE tests of this tree; the layer against PyTorch + NCCL
# (perf/moe_layer_dist.py); the warp splits of the overlapped combine (return warps 6 or 8 of 16:
# patches/ret6.patch) and dispatch (senders 12 or 8 of 16: patches/send12.patch), timed by moe_a2a
# in two rounds, with the MoE tests on the 6-return-warp variant.
. "$(dirname "$0")/common.sh"
build "mkccl mkccl-perf moe_test moe_grouped_swiglu_test moe_layout_test"
(cd $B && timeout 150 ctest -R "moe" --timeout 140 > $R/ctest-moe.log 2>&1); echo "ctest moe rc=$?"
grep -E "Test +#|tests passed" $R/ctest-moe.log
MKCCL_SO_PATH=$B/libmkccl.so timeout 200 python3 -m torch.distributed.run --nproc_per_node 2 perf/moe_layer_dist.py \
  --tokens 4096,16384 --json $R/moe-layer-dist.json > $R/moe-layer-dist.log 2>&1
echo "dist rc=$? $(( $(date +%s) - t0 ))s"; grep -E "like" $R/moe-layer-dist.log | tail -12
A2A="128x7168x256,4096x7168x256,4096x2048x128,4096x4096x8"
cp -r $B/perf /tmp/perf_base; cp $B/libmkccl.so* /tmp/perf_base/
variant() {  # NAME PATCH...: this tree with the patches, its mkccl-perf and library into /tmp/perf_NAME
  local n=$1; shift
  for p in "$@"; do patch -s -p1 < $P/$p.patch; done
  cmake --build $B -j "$(nproc)" --target mkccl-perf moe_test > $R/build-$n.log 2>&1 || tail -5 $R/build-$n.log
  rm -rf /tmp/perf_$n; cp -r $B/perf /tmp/perf_$n; cp $B/libmkccl.so* /tmp/perf_$n/
  if [ $n = ret6 ]; then (cd $B && timeout 120 ctest -R "^moe_test$" --timeout 110 > $R/ctest-moe-ret6.log 2>&1); echo "moe_test ret6 rc=$?"; fi
  for p in "$@"; do patch -s -R -p1 < $P/$p.patch; done
}
variant ret6 ret6
variant send12 send12
cmake --build $B -j "$(nproc)" --target mkccl-perf moe_test > $R/build-back.log 2>&1
run_a2a() { LD_LIBRARY_PATH=/tmp/perf_$1:$LD_LIBRARY_PATH a2a $1$2 /tmp/perf_$1/mkccl-perf; }
for round in 1 2; do for v in base ret6 send12; do run_a2a $v $round; done; done
echo "variants done $(( $(date +%s) - t0 ))s"
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c6.tgz r)

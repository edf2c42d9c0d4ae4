#!/usr/bin/env bash
# Session-5 call 5: A = the tree (fp8 block 128x192 one partial set), B = the two-slice form.
# gemm_fp8 on both (alternating builds), decode set on A, gemm_test + gemm_fp8_test on A, SASS.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
root=$(pwd)
export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
t0=$(date +%s)
mk() {  # name, targets, patches to reverse
  local n=$1 tg=$2; shift 2; local d=/tmp/src_$n
  rm -rf $d; mkdir -p $d; tar cf - --exclude=./build --exclude=./.git . | tar xf - -C $d
  for p in "$@"; do (cd $d && patch -s -R -p1 < $root/tools/probes/s5patches/$p.patch) || echo "patch $p failed for $n"; done
  (cd $d && cmake -S . -B /tmp/b_$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric >/dev/null && cmake --build /tmp/b_$n -j16 --target $tg) > $R/build_$n.log 2>&1 || tail -20 $R/build_$n.log
}
mk A "mkccl-perf gemm_fp8_test"; mk B mkccl-perf singleset
echo "built at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168
for n in A B A B; do
  timeout 100 /tmp/b_$n/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_$n.$RANDOM.json > $R/fp8_$n.log.tmp 2>&1; echo "fp8 $n rc=$?"; grep "block" $R/fp8_$n.log.tmp | awk '{print $1,$2,$3,$5,$8,$9}'; cat $R/fp8_$n.log.tmp >> $R/fp8_$n.log
done
for n in A B; do
  MKCCL_TUNING="gemm.variant=256x2" timeout 100 /tmp/b_$n/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_w_$n.json > $R/fp8_w_$n.log 2>&1; echo "fp8 forced 256x2 $n rc=$?"; grep "block" $R/fp8_w_$n.log | awk '{print $1,$2,$3,$5,$8,$9}'
done
echo "at $(( $(date +%s) - t0 )) s"
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_fp8_test.log | head
obj=$(find /tmp/b_A -name 'gemm_fp8_block_wide.cu.o' | head -1); cuobjdump -sass $obj > $R/fp8_block_wide_A.sass 2>&1
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5e.tgz r && rm -rf r

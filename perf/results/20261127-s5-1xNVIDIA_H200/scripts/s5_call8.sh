#!/usr/bin/env bash
# Session-5 call 8: A = the tree (fp8 block scales staged in shared memory by a producer-side warp),
# B = A without it (patches/scalering.patch reversed): gemm_fp8 alternating, gemm_fp8_test on A;
# gemm_rs_net_test (the fused route now the default across nodes) and its overlap benchmark on A.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
root=$(pwd); P5=$root/perf/results/20261127-s5-1xNVIDIA_H200/scripts/patches
export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
mk() {  # name, targets, patches to reverse
  local n=$1 tg=$2; shift 2; local d=/tmp/src_$n
  rm -rf $d; mkdir -p $d; tar cf - --exclude=./build --exclude=./.git . | tar xf - -C $d
  for p in "$@"; do (cd $d && patch -s -R -p1 < $P5/$p.patch) || echo "patch $p failed for $n"; done
  (cd $d && cmake -S . -B /tmp/b_$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric >/dev/null && cmake --build /tmp/b_$n -j16 --target $tg) > $R/build_$n.log 2>&1 || tail -20 $R/build_$n.log
}
mk A "mkccl-perf gemm_fp8_test gemm_rs_net_test"; mk B mkccl-perf scalering
echo "built at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168,1000x4104x4112,2049x1544x1040
for n in A B A B; do
  timeout 60 /tmp/b_$n/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_$n.$RANDOM.json > $R/fp8_$n.log.tmp 2>&1; echo "fp8 $n rc=$?"; grep "block" $R/fp8_$n.log.tmp | awk '{print $1,$2,$3,$5,$8,$9}'; cat $R/fp8_$n.log.tmp >> $R/fp8_$n.log; rm $R/fp8_$n.log.tmp
done
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_fp8_test.log | head
timeout 150 /tmp/b_A/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1; echo "gemm_rs_net_test rc=$?"; grep -E '^\[ +(OK|FAILED|PASSED) +\]|Failure' $R/gemm_rs_net_test.log | head -30
timeout 100 /tmp/b_A/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/gemm_rs_net_test-fused-overlap.log 2>&1; echo "overlap rc=$?"; grep -E 'BENCH' $R/gemm_rs_net_test-fused-overlap.log | sed 's/.*"M":\([0-9]*\),"N":\([0-9]*\),"K":\([0-9]*\).*overlap_ratio":\([0-9.]*\),"fused_call_us":\([0-9.]*\),"fused_overlap_ratio":\([0-9.]*\),"fused_vs_sequential":\([0-9.]*\).*/\1x\2x\3 seq \4 fused \6 f\/s \7/'
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5h.tgz r && rm -rf r

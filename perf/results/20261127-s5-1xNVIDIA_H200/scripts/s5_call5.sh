#!/usr/bin/env bash
# Session-5 call 5: A = the tree (fp8 block 128x192 one partial set), B = the two-slice form.
# gemm_fp8 on both (alternating builds), decode set on A, gemm_test + gemm_fp8_test on A, SASS.
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf gemm_fp8_test"; mk B mkccl-perf singleset
echo "built at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168
fp8ab $S
for n in A B; do
  MKCCL_TUNING="gemm.variant=256x2" timeout 100 /tmp/b_$n/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_w_$n.json > $R/fp8_w_$n.log 2>&1; echo "fp8 forced 256x2 $n rc=$?"; grep "block" $R/fp8_w_$n.log | awk '{print $1,$2,$3,$5,$8,$9}'
done
echo "at $(( $(date +%s) - t0 )) s"
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_fp8_test.log | head
obj=$(find /tmp/b_A -name 'gemm_fp8_block_wide.cu.o' | head -1); cuobjdump -sass $obj > $R/fp8_block_wide_A.sass 2>&1
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5e.tgz r && rm -rf r

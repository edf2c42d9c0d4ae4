#!/usr/bin/env bash
# Session-5 call 4: A = the tree, B = A without the 32-bit scale offsets (fp8 block kernel).
# gemm_fp8 on both (alternating builds), decode set on A, gemm_test + gemm_fp8_test on A, SASS.
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf gemm_test gemm_fp8_test gemm_probe_test"; mk B mkccl-perf scale32
echo "built at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168
fp8ab $S
echo "at $(( $(date +%s) - t0 )) s"
for i in 1 2; do MKCCL_PERF_GEMM_SET=decode timeout 100 /tmp/b_A/perf/mkccl-perf gemm --json $R/decode_A$i.json > $R/decode_A$i.log 2>&1; echo "decode rc=$?"; done
timeout 60 /tmp/b_A/tests/kernels/gemm_probe_test > $R/probe.log 2>&1; echo "probe rc=$?"
timeout 200 /tmp/b_A/tests/kernels/gemm_test > $R/gemm_test.log 2>&1; echo "gemm_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_test.log | head
timeout 120 /tmp/b_A/tests/kernels/gemm_fp8_test > $R/gemm_fp8_test.log 2>&1; echo "gemm_fp8_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_fp8_test.log | head
obj=$(find /tmp/b_A -name 'gemm_fp8_block_wide.cu.o' | head -1); cuobjdump -sass $obj > $R/fp8_block_wide_A.sass 2>&1
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5d.tgz r && rm -rf r

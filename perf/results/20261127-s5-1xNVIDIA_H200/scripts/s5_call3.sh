#!/usr/bin/env bash
# Session-5 call 3: A/B of three kernel changes in one run on one GPU. Builds A (the tree), B (A
# without the early descriptor prefetch), C (A without the warp-uniform warpgroup index), D (A
# without all three: prefetch, uniform index, spread split-K sum); times the decode set (auto) on
# each, and gemm_fp8 on A and C. Output: $OUT/s5c.tgz.
. "$(dirname "$0")/common.sh"
mk A mkccl-perf; mk B mkccl-perf prefetch; mk C mkccl-perf uniform; mk D mkccl-perf uniform spread prefetch
echo "built at $(( $(date +%s) - t0 )) s"
for n in A B C D; do
  MKCCL_PERF_GEMM_SET=decode timeout 100 /tmp/b_$n/perf/mkccl-perf gemm --json $R/decode_$n.json > $R/decode_$n.log 2>&1; echo "decode $n rc=$?"
done
for n in D C B A; do
  MKCCL_PERF_GEMM_SET=decode timeout 100 /tmp/b_$n/perf/mkccl-perf gemm --json $R/decode2_$n.json > $R/decode2_$n.log 2>&1; echo "decode2 $n rc=$?"
done
echo "at $(( $(date +%s) - t0 )) s"
for n in A C; do
  timeout 150 /tmp/b_$n/perf/mkccl-perf gemm_fp8 --shapes 4096x4096x4096,8192x8192x8192,8192x7168x2048 --json $R/fp8_$n.json > $R/fp8_$n.log 2>&1; echo "fp8 $n rc=$?"; grep "block" $R/fp8_$n.log | awk '{print $1,$2,$3,$5,$8,$9}'
done
obj=$(find /tmp/b_A -name 'gemm_fp8_block_wide.cu.o' | head -1); cuobjdump -sass $obj > $R/fp8_block_wide_A.sass 2>&1
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5c.tgz r && rm -rf r

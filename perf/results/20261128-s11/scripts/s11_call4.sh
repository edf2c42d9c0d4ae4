#!/usr/bin/env bash
# Session-11 call 4 (1 GPU, an H200 asked for): the final split-K rule (128 x 64 parts by each GPU's
# rows) on the decode set and more, auto beside the 128-wide and 64-wide parts forced; the odd set on
# auto; gemm_test whole (every variant, split K, clusters along N) and the GEMM CPU tests.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
. perf/results/20261128-s11/scripts/sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_split_k_test gemm_probe_test"
$B/tests/kernels/gemm_split_k_test > $R/split_k_test.log 2>&1; echo "split_k_test rc=$?"
S=1x4096x4096,1x4096x8192,1x8192x4096,1x8192x8192,16x4096x4096,16x4096x8192,16x8192x4096,16x8192x8192,64x4096x4096,64x4096x8192,64x8192x4096,64x8192x8192,128x4096x4096,128x4096x8192,128x8192x4096,128x8192x8192,256x4096x4096,256x4096x8192,256x8192x4096,256x8192x8192,32x14336x4096,32x4096x14336,64x28672x8192,128x8192x28672,1x1024x1024,8x14336x4096,32x4096x4096,8x2048x2048,128x2048x2048,64x4096x14336
V=auto,gemm.variant=64x1;gemm.split_k=2,gemm.variant=64x1;gemm.split_k=4
for s in 2 3 4; do V="$V,gemm.variant=128x1;gemm.split_k=$s"; done
gemm_sweep gemm-decode-auto "$V" --shapes $S --iters 40 --rounds 3
MKCCL_PERF_GEMM_SET=odd timeout 120 $B/perf/mkccl-perf gemm --iters 40 --rounds 3 --json $R/gemm-odd-auto.json > $R/gemm-odd-auto.log 2>&1
echo "odd auto rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-odd-auto.json
timeout 200 $B/tests/kernels/gemm_test > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
timeout 60 $B/tests/kernels/gemm_probe_test > $R/gemm_probe_test.log 2>&1; echo "probe rc=$?"
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

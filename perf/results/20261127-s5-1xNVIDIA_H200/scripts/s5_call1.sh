#!/usr/bin/env bash
# Session-5 probe call: build, gemm probe (epilogue stamps), fp8 block kernel SASS, ncu of the fp8
# kernels at 8192^3, fp8 timings. Everything into $OUT/s5.tgz.
. "$(dirname "$0")/common.sh"
mk A "mkccl mkccl-perf gemm_probe_test"; B=/tmp/b_A
nvidia-smi > $R/smi.txt 2>&1
P=$(find $B -name mkccl-perf -type f | head -1); echo "perf=$P"
T=$(find $B -name gemm_probe_test -type f | head -1)
timeout 120 $T > $R/probe.log 2>&1; echo "probe rc=$?"
obj=$(find $B -name 'gemm_fp8_block_wide.cu.o' | head -1)
cuobjdump -sass $obj > $R/fp8_block_wide.sass 2>&1; echo "sass lines $(wc -l < $R/fp8_block_wide.sass)"
obj2=$(find $B -name 'gemm_fp8_tensor.cu.o' | head -1)
cuobjdump -sass $obj2 > $R/fp8_tensor.sass 2>&1
timeout 200 $P gemm_fp8 --json $R/gemm_fp8.json > $R/gemm_fp8.log 2>&1; echo "fp8 rc=$?"; tail -15 $R/gemm_fp8.log
timeout 240 ncu --clock-control none -k regex:persistentGemmKernel -c 3 --set full --import-source no \
  $P gemm_fp8 --shapes 8192x8192x8192 --iters 2 --rounds 1 > $R/ncu_fp8.txt 2>&1; echo "ncu rc=$?"
grep -E "persistentGemm|Duration|Tensor|Issue Slots|Executed Ipc|Stall|No Eligible|Active Warps" $R/ncu_fp8.txt | head -60
cd $OUT && tar czf s5.tgz r && rm -rf r

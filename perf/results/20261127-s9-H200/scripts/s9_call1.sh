#!/usr/bin/env bash
# Session-9 call 1 (1 GPU): where stream-K's time goes. The unit-by-unit probe (stream-K against
# whole tiles in the same kernel, four odd shapes, both tiles), then ncu of the library's kernel at
# 2000x2056x4096, auto (whole tiles) and gemm.stream_k=on.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_streamk_probe_test"
timeout 150 $B/tests/kernels/gemm_streamk_probe_test > $R/skprobe.log 2>&1; echo "probe rc=$?"
grep -E "SKPROBE|^  |FAILED|PASSED" $R/skprobe.log | head -150
for v in auto "auto;gemm.stream_k=on"; do
  n=$( [ "$v" = auto ] && echo whole || echo sk )
  MKCCL_PERF_GEMM_VARIANTS="$v" timeout 150 ncu --clock-control none -k regex:persistentGemmKernel -c 2 --set full \
    --import-source no $B/perf/mkccl-perf gemm --shapes 2000x2056x4096 --iters 2 --rounds 1 > $R/ncu_$n.txt 2>&1
  echo "ncu $n rc=$?"
  grep -E "persistentGemm|Duration|Tensor|Issue Slots|Executed Ipc|Stall|No Eligible|Active Warps|L2 Cache Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Memory Throughput|Compute \(SM\)" $R/ncu_$n.txt | head -40
done
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log $R/*.txt
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

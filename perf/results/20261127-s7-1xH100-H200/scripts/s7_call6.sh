#!/usr/bin/env bash
# Session-7 call 6 (1 GPU, warm from call 5: the build in /tmp/bg): the figures of record for the
# GEMM engine: the decode set (per-call events, and 20 calls back to back with PDL on and off)
# and the odd set, against cuBLAS in the same run.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
[ -x $B/perf/mkccl-perf ] || build "mkccl mkccl-perf"
MKCCL_PERF_GEMM_SET=decode timeout 150 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1
echo "decode rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.pdl=off" MKCCL_PERF_GEMM_CHAIN=20 MKCCL_PERF_GEMM_SET=decode timeout 200 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode-chain20.json > $R/gemm-decode-chain20.log 2>&1
echo "decode chain rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_SET=odd timeout 150 $B/perf/mkccl-perf gemm --iters 20 --json $R/gemm-odd.json > $R/gemm-odd.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"
python3 $S/gemm_show.py $R/gemm-decode.json $R/gemm-decode-chain20.json $R/gemm-odd.json
sed -i "s#$OUT/r/#r/#g" $R/*.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c6.tgz r)

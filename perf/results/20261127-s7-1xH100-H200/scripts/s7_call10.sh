#!/usr/bin/env bash
# Session-7 call 10 (1 GPU): the final tree (PDL without the L2 prefetch): its GEMM tests and the
# decode (20 calls back to back, PDL on and off) and odd (one call at a time) sets against cuBLAS.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 100 $B/tests/kernels/gemm_test --gtest_filter='Gemm.PdlDependentChain:Gemm.BackToBackLaunches:Gemm.SplitK*:Gemm.StreamK:Gemm.OddKPacked:Gemm.CaptureOnFreshStream' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head
MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.pdl=off" MKCCL_PERF_GEMM_CHAIN=20 MKCCL_PERF_GEMM_SET=decode timeout 60 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode-chain20.json > $R/gemm-decode-chain20.log 2>&1
MKCCL_PERF_GEMM_SET=odd timeout 60 $B/perf/mkccl-perf gemm --iters 20 --json $R/gemm-odd.json > $R/gemm-odd.log 2>&1
MKCCL_PERF_GEMM_SET=decode timeout 60 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1
python3 $S/gemm_show.py $R/gemm-decode-chain20.json $R/gemm-odd.json $R/gemm-decode.json
sed -i "s#$OUT/r/#r/#g" $R/*.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c10.tgz r)

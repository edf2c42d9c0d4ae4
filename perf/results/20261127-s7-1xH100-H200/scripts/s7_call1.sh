#!/usr/bin/env bash
# Session-7 call 1 (1 x H200): the plain GEMM as a programmatic dependent launch (gemm.pdl):
# its GPU tests, the decode set with PDL on and off (per-call events, and 20 calls back to back),
# and which cuBLAS kernels torch.matmul runs at the decode and odd shapes.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.PdlDependentChain:Gemm.BackToBackLaunches:Gemm.SplitK*:Gemm.CaptureOnFreshStream:Gemm.DecodeShapes:Gemm.FigureShapes' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED|  OK) |Failure|wrong" $R/gemm_test.log | head -20
export MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.pdl=off"
MKCCL_PERF_GEMM_SET=decode timeout 150 $B/perf/mkccl-perf gemm --iters 40 --json $R/decode-events.json > $R/decode-events.log 2>&1
echo "decode events rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_CHAIN=20 MKCCL_PERF_GEMM_SET=decode timeout 200 $B/perf/mkccl-perf gemm --iters 40 --json $R/decode-chain20.json > $R/decode-chain20.log 2>&1
echo "decode chain rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_CHAIN=4 timeout 200 $B/perf/mkccl-perf gemm --shapes 8192x8192x8192,4096x4096x8192,8000x8184x4104,2000x2056x4104,1000x1032x4096 --iters 20 --json $R/large-chain4.json > $R/large-chain4.log 2>&1
echo "large chain rc=$? $(( $(date +%s) - t0 ))s"
python3 $S/gemm_show.py $R/decode-events.json $R/decode-chain20.json $R/large-chain4.json
timeout 90 python3 $S/torch_kernels.py 1x4096x4096 64x4096x4096 8000x8184x4104 2000x2056x4104 1000x1032x4104 333x520x1000 > $R/torch-kernels.log 2>&1
echo "torch kernels rc=$?"; cat $R/torch-kernels.log | head -60
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c1.tgz r)

#!/usr/bin/env bash
# Session-7 call 3 (1 GPU): the tree with 128-byte L2 promotion for row pitches off a multiple of
# 128 bytes: its GEMM tests, and the odd shapes with packing on and off, the 2-CTA cluster
# unpacked, and stream-K forced on either tile (is stream-K itself slow?).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.OddKPacked:Gemm.StreamK:*TailShapes*:Gemm.PdlDependentChain' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
export MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.pack_k=off,256x2;gemm.pack_k=off,256x1;gemm.stream_k=on,128x1;gemm.stream_k=on,256x1;gemm.stream_k=on;gemm.pack_k=off"
timeout 300 $B/perf/mkccl-perf gemm --shapes 8000x8184x4104,4097x4104x4104,2000x2056x4104,1000x1032x4104,333x520x1000,8000x8184x4096,4097x4104x4096,2000x2056x4096,1000x1032x4096 --iters 20 --json $R/odd.json > $R/odd.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"; python3 $S/gemm_show.py $R/odd.json
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c3.tgz r)

#!/usr/bin/env bash
# Session-7 call 4 (1 GPU): unpacked by default, tiles weighed by their efficiency on misaligned
# rows: the GEMM tests, and the odd set with auto, packing on request, and every tile
# configuration forced unpacked (the efficiencies of gemm_plan_model.h).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 250 $B/tests/kernels/gemm_test --gtest_filter='Gemm.OddKPacked:Gemm.StreamK:*TailShapes*:*RandomShapes*:Gemm.PdlDependentChain:Gemm.BackToBackLaunches' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure" $R/gemm_test.log | head -20
export MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.pack_k=on,256x1;gemm.pack_k=off,256x2;gemm.pack_k=off,128x1;gemm.pack_k=off,128x2;gemm.pack_k=off"
MKCCL_PERF_GEMM_SET=odd timeout 300 $B/perf/mkccl-perf gemm --iters 20 --json $R/odd.json > $R/odd.log 2>&1
echo "odd rc=$? $(( $(date +%s) - t0 ))s"; python3 $S/gemm_show.py $R/odd.json
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c4.tgz r)

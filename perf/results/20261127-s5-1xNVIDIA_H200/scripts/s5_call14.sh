#!/usr/bin/env bash
# Session-5 call 14 (2 x H200): the bf16 planner with the measured tile efficiencies: gemm_test and
# gemm_plan_test, the odd-shape and decode sets (auto, cuBLAS beside), then the fused ops at 2
# ranks (their plans use the same model) as in call 10.
set -uo pipefail
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
root=$(pwd); export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
MKCCL_BUILD_DIR=/tmp/bg MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 MKCCL_TESTS_STAGE_TIMEOUT=200 \
  tools/gpu-check.sh --test-jobs 2 --bench-ops "ag_gemm gemm_rs gemm_ar" \
  --tests-regex '^(gemm_test|gemm_plan_test|gemm_fusion_test|ag_gemm_test_np2|gemm_rs_test_np2)$' 2>&1 | tail -45
res=$(ls -d perf/results/*-2xNVIDIA_H200 | tail -1)
MKCCL_PERF_GEMM_SET=odd timeout 60 /tmp/bg/perf/mkccl-perf gemm --json $res/gemm-odd.json > $res/logs/gemm-odd.log 2>&1; echo "odd rc=$?"
grep -v "^#" $res/logs/gemm-odd.log | awk '{print $1"x"$2"x"$3, $5, $8, $9}'
(cd $res && tar czf $OUT/res14.tgz .)

#!/usr/bin/env bash
# Session-5 call 10 (2 x H200): the test binaries whose code changed since the full 1-GPU run
# (the shared test set-ups) and the np2 tests (one process per GPU), then AllGather+GEMM,
# GEMM+ReduceScatter and GEMM+AllReduce at 2 ranks, as in perf/results/20261127-134442-2xNVIDIA_H200.
set -uo pipefail
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
MKCCL_BUILD_DIR=/tmp/bg MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 MKCCL_TESTS_STAGE_TIMEOUT=300 \
  tools/gpu-check.sh --test-jobs 3 --bench-ops "ag_gemm gemm_rs gemm_ar" \
  --tests-regex '^(gemm_test|gemm_fp8_test|grouped_gemm_test|gemm_probe_test|ag_gemm_fp8_test|gemm_rs_fp8_test|moe_test|.*_np2)$' 2>&1 | tail -60

#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 timeout 500 tools/gpu-check.sh --prebuilt --tests-regex "gemm_rs_test$|gemm_rs_test_np2|gemm_ar_test$|gemm_ar_test_np2" --bench-ops "gemm_rs gemm_ar" 2>&1 | grep -v "^#   rank" | tail -32
grep -E "Failure|FAILED|error" -A5 build-snap/Testing/Temporary/LastTest.log 2>/dev/null | head -40
mkdir -p $OUT/res && cp -r perf/results/* $OUT/res/

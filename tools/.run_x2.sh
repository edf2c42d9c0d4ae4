#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 MKCCL_TEST_TIMEOUT=240 timeout 540 tools/gpu-check.sh --prebuilt --bench-ops "ag_gemm gemm_rs gemm_ar" 2>&1 | grep -v "^#   rank" | tail -45
grep -E "Failure|FAILED" -A6 build-snap/Testing/Temporary/LastTest.log 2>/dev/null | head -30
mkdir -p $OUT/res && cp -r perf/results/* $OUT/res/

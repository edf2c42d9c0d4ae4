#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 timeout 400 tools/gpu-check.sh --prebuilt --tests-regex "ag_gemm_test_np2" --bench-ops "ag_gemm" 2>&1 | tail -12
MKCCL_DEBUG=INFO MKCCL_AG_GEMM_PLAN=ce timeout 100 build-snap/perf/mkccl-perf ag_gemm -g 2 --shapes 8192x2048x8192,2048x8192x8192,4096x8192x8192 2>&1 | grep -E "^ +[0-9]|rror|ce \(|copy engines" | head
mkdir -p $OUT/res && cp -r perf/results/* $OUT/res/

#!/usr/bin/env bash
# session 13, call 3 (2xH200): ag_gemm tests with the ce plan; ag_gemm bench ws2 (ce_us); ce copy-size sweep
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 timeout 400 tools/gpu-check.sh --prebuilt --tests-regex "ag_gemm_test$|ag_gemm_test_np2" --bench-ops "ag_gemm" 2>&1 | tail -40
P=build-snap/perf/mkccl-perf
for g in 1024 4096 16384; do
  echo "== ce group $g KiB"
  MKCCL_AG_GEMM_PLAN=ce MKCCL_AG_GEMM_CE_GROUP_KIB=$g timeout 120 $P ag_gemm -g 2 --shapes 8192x2048x8192,8192x8192x8192 2>&1 | grep -E "^ +[0-9]|rror"
done
mkdir -p $OUT/res && cp -r perf/results/* $OUT/res/

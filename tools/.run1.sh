#!/usr/bin/env bash
# session 13, call 1 (2xH200): CE probe; GEMM+AR rs_ag tests + benches; ag_gemm ws2
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
nvcc -O2 -std=c++17 -arch=sm_90a tools/.probe/ce_probe.cu -lcublas -lcuda -o /tmp/ce_probe 2>&1 | tail -3
for args in "2 2048 1" "2 2048 8" "2 2048 32" "2 8192 8"; do timeout 60 /tmp/ce_probe $args; done
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=2 MKCCL_BENCH_EMULATED=0 timeout 420 tools/gpu-check.sh --prebuilt --tests-regex "gemm_ar|gemm_rs_test_np2" --bench-ops "gemm_ar" 2>&1 | tail -60
cp -r perf/results/* $OUT/ 2>/dev/null

#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_TEST_TIMEOUT=200 timeout 300 tools/gpu-check.sh --prebuilt --no-bench 2>&1 | tail -26
grep -E "Failure|FAILED" -A6 build-snap/Testing/Temporary/LastTest.log 2>/dev/null | head -20
MKCCL_DEBUG=INFO timeout 60 build-snap/perf/mkccl-perf allreduce -g 2 -b 1M -e 1M 2>&1 | grep -E "kernels loaded|^ +[0-9]" | head

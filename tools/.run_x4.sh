#!/usr/bin/env bash
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf perf/results/2026*
MKCCL_BUILD_DIR=build-snap MKCCL_BENCH_WS=4 MKCCL_BENCH_EMULATED=0 MKCCL_TEST_TIMEOUT=90 timeout 170 tools/gpu-check.sh --prebuilt --tests-regex "ag_gemm_test_np4|gemm_rs_test_np4|gemm_ar_test_np4|coll_test_np4|comm_gpu_test_np4" --bench-ops "ag_gemm gemm_ar gemm_rs" 2>&1 | grep -E "Test +#|tests passed|== |^ +[0-9]" | tail -40
grep -E "Failure|FAILED" -A6 build-snap/Testing/Temporary/LastTest.log 2>/dev/null | head -20
MKCCL_GEMM_RS_ORDER=phases timeout 60 build-snap/perf/mkccl-perf gemm_rs -g 4 --json $OUT/gemm_rs-ws4-phases.json 2>&1 | grep -E "^ +[0-9]|rror"
mkdir -p $OUT/res && cp -r perf/results/* $OUT/res/
MKCCL_AG_GEMM_PLAN=ce timeout 90 build-snap/perf/mkccl-perf ag_gemm -g 4 --json $OUT/ag_gemm-ws4-forced-ce.json 2>&1 | grep -E "^ +[0-9]|rror"

#!/usr/bin/env bash
# Session-5 call 7: every GPU test on the tree (tools/gpu-check.sh, no benchmarks), then gemm_fp8 on
# the tree (A) and on A without the one-ahead scale loads (B), alternating; the decode set on A.
. "$(dirname "$0")/common.sh"
mk B mkccl-perf scale1
echo "B built at $(( $(date +%s) - t0 )) s"
MKCCL_BUILD_DIR=/tmp/bg MKCCL_TESTS_STAGE_TIMEOUT=300 OUT=$R tools/gpu-check.sh --no-bench --test-jobs 3 2>&1 | tail -60
echo "tests done at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168,1000x4104x4112,2049x1544x1040
PERF_A=/tmp/bg/perf/mkccl-perf fp8ab $S
MKCCL_PERF_GEMM_SET=decode timeout 60 /tmp/bg/perf/mkccl-perf gemm --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1; echo "decode rc=$?"
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5g.tgz r && rm -rf r

#!/usr/bin/env bash
# Session-6 call 8 (1 x H200): every GPU test of this tree (tools/gpu-check.sh --no-bench: built
# here, the multi-process tests first, then the rest three at a time; the np2/np4 variants skip).
. "$(dirname "$0")/common.sh"
MKCCL_BUILD_DIR=$B MKCCL_TESTS_STAGE_TIMEOUT=420 timeout 560 tools/gpu-check.sh --no-bench --test-jobs 3 > $R/gpu-check.out 2>&1
echo "gpu-check rc=$?"; tail -40 $R/gpu-check.out
res=$(ls -d perf/results/*-1xNVIDIA_H200 2>/dev/null | grep -v s[0-9]- | tail -1)
[ -n "$res" ] && cp -r $res $R/
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c8.tgz r)

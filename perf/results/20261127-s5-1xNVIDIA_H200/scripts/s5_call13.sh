#!/usr/bin/env bash
# Session-5 call 13: the bf16 GEMM's odd-shape set and its large shapes with every tile
# configuration forced beside auto (mkccl-perf gemm variants, cuBLAS in the same run).
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf"
MKCCL_PERF_GEMM_SET=odd MKCCL_PERF_GEMM_VARIANTS="auto,256x1,256x2,128x1,128x2" timeout 200 /tmp/b_A/perf/mkccl-perf gemm --json $R/gemm-odd-variants.json > $R/gemm-odd-variants.log 2>&1; echo "odd rc=$?"
grep -v "^#" $R/gemm-odd-variants.log | awk '{v=$0; sub(/.*# variant /,"",v); sub(/,.*/,"",v); print $1"x"$2"x"$3, $5, $8, $9, v}'
cd $OUT && tar czf s5m.tgz r && rm -rf r

#!/usr/bin/env bash
# Session-5 call 11: gemm_fp8 on the odd shapes with each tile configuration forced (per-tensor and
# block scales both follow gemm.variant), to see what the planner leaves on the table.
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf"
S=1000x4104x4112,4096x2112x7168,2049x1544x1040,4096x4096x4096
for v in auto 256x2 256x1 128x2 128x1; do
  MKCCL_TUNING="gemm.variant=$v" timeout 60 /tmp/b_A/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_$v.json > $R/fp8_$v.log 2>&1
  echo "== $v rc=$?"; grep -v "^#" $R/fp8_$v.log | awk '{print $1"x"$2"x"$3, $5, $8, $9, ($0 ~ /per-tensor/ ? "tensor" : "block")}'
done
cd $OUT && tar czf s5k.tgz r && rm -rf r

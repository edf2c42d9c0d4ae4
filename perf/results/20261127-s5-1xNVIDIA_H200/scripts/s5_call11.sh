#!/usr/bin/env bash
# Session-5 call 11: gemm_fp8 on the odd shapes with each tile configuration forced (per-tensor and
# block scales both follow gemm.variant), to see what the planner leaves on the table.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
root=$(pwd); export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
R=$OUT/r; mkdir -p $R
(cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric >/dev/null && cmake --build /tmp/b -j16 --target mkccl-perf) > $R/build.log 2>&1 || tail -20 $R/build.log
S=1000x4104x4112,4096x2112x7168,2049x1544x1040,4096x4096x4096
for v in auto 256x2 256x1 128x2 128x1; do
  MKCCL_TUNING="gemm.variant=$v" timeout 60 /tmp/b/perf/mkccl-perf gemm_fp8 --shapes $S --json $R/fp8_$v.json > $R/fp8_$v.log 2>&1
  echo "== $v rc=$?"; grep -v "^#" $R/fp8_$v.log | awk '{print $1"x"$2"x"$3, $5, $8, $9, ($0 ~ /per-tensor/ ? "tensor" : "block")}'
done
cd $OUT && tar czf s5k.tgz r && rm -rf r

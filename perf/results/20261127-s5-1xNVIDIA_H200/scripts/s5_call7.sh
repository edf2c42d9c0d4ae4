#!/usr/bin/env bash
# Session-5 call 7: every GPU test on the tree (tools/gpu-check.sh, no benchmarks), then gemm_fp8 on
# the tree (A) and on A without the one-ahead scale loads (B), alternating; the decode set on A.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
root=$(pwd)
export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
d=/tmp/src_B; mkdir -p $d; tar cf - --exclude=./build --exclude=./.git . | tar xf - -C $d
(cd $d && patch -s -R -p1 < $root/tools/probes/s5patches/scale1.patch && cmake -S . -B /tmp/b_B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric >/dev/null && cmake --build /tmp/b_B -j16 --target mkccl-perf) > $R/build_B.log 2>&1 || tail -20 $R/build_B.log
echo "B built at $(( $(date +%s) - t0 )) s"
MKCCL_BUILD_DIR=/tmp/bg MKCCL_TESTS_STAGE_TIMEOUT=300 OUT=$R tools/gpu-check.sh --no-bench --test-jobs 3 2>&1 | tail -60
echo "tests done at $(( $(date +%s) - t0 )) s"
S=4096x4096x4096,8192x8192x8192,8192x8192x4096,8192x7168x2048,4096x2112x7168,1000x4104x4112,2049x1544x1040
for n in A B A B; do
  p=/tmp/b_B/perf/mkccl-perf; [ $n = A ] && p=/tmp/bg/perf/mkccl-perf
  timeout 60 $p gemm_fp8 --shapes $S --json $R/fp8_$n.$RANDOM.json > $R/fp8_$n.log.tmp 2>&1; echo "fp8 $n rc=$?"; grep "block" $R/fp8_$n.log.tmp | awk '{print $1,$2,$3,$5,$8,$9}'; cat $R/fp8_$n.log.tmp >> $R/fp8_$n.log
done
MKCCL_PERF_GEMM_SET=decode timeout 60 /tmp/bg/perf/mkccl-perf gemm --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1; echo "decode rc=$?"
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5g.tgz r && rm -rf r

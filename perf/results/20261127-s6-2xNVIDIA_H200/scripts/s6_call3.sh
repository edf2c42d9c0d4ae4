#!/usr/bin/env bash
# Session-6 call 3 (2 x H200): the dispatch expanding pairs as they land (queue), the reduce in landing pieces,
# against the tree before (A: patches/s6-moe-v2.patch reversed): MoE GPU tests, moe_a2a (A, B, A, B),
# the phase probe (patches/probe.patch: globaltimer stamps printed by two CTAs), the layer (B, A).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(pwd); export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
export R=$OUT/r; mkdir -p $R
P=$root/perf/results/20261127-s6-2xNVIDIA_H200/scripts/patches
B=/tmp/bg
t0=$(date +%s)
tools/gpu-ab-build.sh A "mkccl mkccl-perf" $P/s6-moe-v2.patch > $R/buildA.out 2>&1 &
pa=$!
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric > $R/configure.log 2>&1
cmake --build $B -j 24 --target mkccl mkccl-perf moe_test moe_grouped_swiglu_test moe_layout_test > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
wait $pa; echo "buildA rc=$? $(cat $R/buildA.out)"
echo "built $(( $(date +%s) - t0 ))s"
(cd $B && timeout 200 ctest -R "moe" --timeout 180 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$?"
grep -E "Test +#|tests passed|FAILED|Failed" $R/ctest-moe.log | head -20
echo "tests $(( $(date +%s) - t0 ))s"
A2A="128x7168x256,4096x7168x256,16384x7168x256,4096x2048x128,16384x2048x128,4096x4096x8"
LAY="4096x7168x256,4096x2048x128,4096x4096x8"
show() {
  python3 - "$1" <<'PY'
import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception as e: print("  no json", e); sys.exit()
for r in d["results"]:
  s=r["shape"]; x=r
  if r["op"]=="moe_a2a":
    print("  %sx%sx%s %s both %.0f disp %.0f comb %.0f | nccl %.0f disp %.0f comb %.0f | wrong %s" % (s["m"],s["n"],s["k"],
      r["note"].split()[0], r["time_us"], x["dispatch_us"], x["combine_us"], x.get("baseline_time_us") or -1,
      x.get("nccl_dispatch_us") or -1, x.get("nccl_combine_us") or -1, r["wrong"]))
  else:
    print("  %sx%sx%s %s composed %.0f floor %.0f ratio %.3f | base %.0f x %.2f | disp %.0f comb %.0f | fused1 %.0f both %.0f" % (s["m"],s["n"],s["k"],
      r["note"].split()[0], x["composed_us"], x["floor_us"], x["composed_floor_ratio"], x["baseline_time_us"], x["composed_speedup"],
      x["dispatch_us"], x["combine_us"], x["first_half_fused_us"], x["time_us"]))
PY
}
a2a() {  # $1 name $2 perf binary
  timeout 100 $2 moe_a2a -g 2 --shapes $A2A --json $R/a2a-$1.json > $R/a2a-$1.log 2>&1
  echo "a2a $1 rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-$1.json
}
a2a A1 /tmp/b_A/perf/mkccl-perf
a2a B1 $B/perf/mkccl-perf
a2a A2 /tmp/b_A/perf/mkccl-perf
a2a B2 $B/perf/mkccl-perf
patch -s -p1 < $P/probe.patch && cmake --build $B -j 24 --target mkccl-perf > $R/build-probe.log 2>&1 &&
  for sh in 128x7168x256 4096x7168x256 4096x2048x128 4096x4096x8; do
    timeout 60 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $sh --iters 4 --warmup 2 --rounds 1 > $R/probe-$sh.log 2>&1
    echo "probe $sh rc=$?"; grep PROBE $R/probe-$sh.log | tail -12
  done
patch -s -R -p1 < $P/probe.patch; cmake --build $B -j 24 --target mkccl-perf > $R/build-back.log 2>&1
lay() {
  timeout 150 $2 moe -g 2 --shapes $LAY --json $R/moe-$1.json > $R/moe-$1.log 2>&1
  echo "moe $1 rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-$1.json
}
lay B $B/perf/mkccl-perf
lay A /tmp/b_A/perf/mkccl-perf
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c3.tgz r)

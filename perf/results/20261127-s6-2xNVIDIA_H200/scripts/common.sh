# Sourced by this session's call scripts, run on the GPU machine from the repository root
# (bash perf/results/20261127-s6-2xNVIDIA_H200/scripts/s6_callN.sh; $OUT is the device tool's).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(pwd); export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
export R=$OUT/r; mkdir -p "$R"
P=$root/perf/results/20261127-s6-2xNVIDIA_H200/scripts/patches
B=/tmp/bg
t0=$(date +%s)
# build "TARGETS": this tree into $B (libfabric from .deps/).
build() {
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric > $R/configure.log 2>&1
  cmake --build $B -j "$(nproc)" --target $1 > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
  echo "built $(( $(date +%s) - t0 ))s"
}
# show JSON: one line per row of a moe_a2a or moe JSON.
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
# a2a NAME PERF / lay NAME PERF: mkccl-perf moe_a2a over $A2A / moe over $LAY at 2 ranks, shown.
a2a() {
  timeout 100 $2 moe_a2a -g 2 --shapes $A2A --json $R/a2a-$1.json > $R/a2a-$1.log 2>&1
  echo "a2a $1 rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-$1.json
}
lay() {
  timeout 150 $2 moe -g 2 --shapes $LAY --json $R/moe-$1.json > $R/moe-$1.log 2>&1
  echo "moe $1 rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-$1.json
}
# moe_ab PATCH: the tree before (PATCH reversed) into /tmp/b_A beside this tree's MoE targets in
# $B, then this tree's MoE GPU tests.
moe_ab() {
  tools/gpu-ab-build.sh A "mkccl mkccl-perf" $P/$1 > $R/buildA.out 2>&1 &
  local pa=$!
  build "mkccl mkccl-perf moe_test moe_grouped_swiglu_test moe_layout_test"
  wait $pa; echo "buildA rc=$? $(cat $R/buildA.out)"
  (cd $B && timeout 200 ctest -R "moe" --timeout 180 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$?"
  grep -E "Test +#|tests passed|FAILED|Failed" $R/ctest-moe.log | head -20
  echo "tests $(( $(date +%s) - t0 ))s"
}

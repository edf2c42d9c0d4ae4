#!/usr/bin/env bash
# Session-6 call 1 (2 x H200): where MoE dispatch / combine spend their time at 2 ranks (each
# phase left out in turn: patches/skip-*.patch, incremental rebuilds of the same tree), the
# overlap benches across emulated nodes with one GPU per node, and the grouped GEMM against
# torch._grouped_mm and dense cuBLAS on one GPU.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(pwd); export LD_LIBRARY_PATH=$root/.deps/libfabric/lib:${LD_LIBRARY_PATH:-}
export MKCCL_COMMIT=${MKCCL_COMMIT:-unknown}
R=$OUT/r; mkdir -p $R
P=$root/perf/results/20261127-s6-2xNVIDIA_H200/scripts/patches
B=/tmp/bg
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIBFABRIC_ROOT=$root/.deps/libfabric > $R/configure.log 2>&1
cmake --build $B -j 16 --target mkccl mkccl-perf gemm_rs_net_test ag_gemm_net_test > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "built $(( $(date +%s) - t0 ))s"
A2A="4096x7168x256,4096x2048x128,4096x4096x8"
a2a() {  # $1 name
  timeout 150 $B/perf/mkccl-perf moe_a2a -g 2 --shapes $A2A --json $R/a2a-$1.json > $R/a2a-$1.log 2>&1
  echo "a2a $1 rc=$? $(( $(date +%s) - t0 ))s"
  python3 - "$R/a2a-$1.json" <<'PY'
import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception as e: print("  no json", e); sys.exit()
for r in d["results"]:
  s=r["shape"]; x=r
  print("  %sx%sx%s %s both %.0f disp %.0f comb %.0f | nccl %.0f disp %.0f comb %.0f | GB/s %.0f %.0f wrong %s" % (s["m"],s["n"],s["k"],
    r["note"].split()[0], r["time_us"], x["dispatch_us"], x["combine_us"], x.get("baseline_time_us") or -1,
    x.get("nccl_dispatch_us") or -1, x.get("nccl_combine_us") or -1, x["dispatch_gbps"], x["combine_gbps"], r["wrong"]))
PY
}
a2a base
for v in skip-expand skip-sendrow skip-return skip-reduce; do
  patch -s -p1 < $P/$v.patch && cmake --build $B -j 16 --target mkccl-perf > $R/build-$v.log 2>&1 && a2a $v
  patch -s -R -p1 < $P/$v.patch
done
cmake --build $B -j 16 --target mkccl-perf > $R/build-rebase.log 2>&1
# Overlap across emulated nodes, one GPU per node (2 x 1).
for t in gemm_rs_net_test ag_gemm_net_test; do
  for i in 1 2; do
    timeout 120 $B/tests/fused/$t --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/$t-overlap-$i.log 2>&1
    echo "$t overlap $i rc=$?"; grep -h '^{' $R/$t-overlap-$i.log | head -12
  done
done
echo "overlap done $(( $(date +%s) - t0 ))s"
# Grouped GEMM (one GPU): ours against torch._grouped_mm, and the dense GEMMs of the same rows.
timeout 150 python3 perf/moe_vs_torch.py --lib $B/libmkccl.so --shapes mixtral,qwen,ds --tokens 4096 --iters 20 \
  --json $R/gemms-vs-torch.json > $R/gemms-vs-torch.log 2>&1; echo "grouped rc=$?"; tail -12 $R/gemms-vs-torch.log
timeout 100 $B/perf/mkccl-perf gemm --shapes 8192x28672x4096,8192x4096x14336 --json $R/dense.json > $R/dense.log 2>&1
echo "dense rc=$?"; grep -v "^#" $R/dense.log | head
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c1.tgz r)

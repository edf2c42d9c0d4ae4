#!/usr/bin/env bash
# Session-6 call 5 (2 x H200): the MoE layer at 2 ranks (one process per GPU) against the unfused
# PyTorch + NCCL layer (perf/moe_layer_dist.py), and mkccl-perf moe at T = 16384 (its lower-bound
# baseline), on the tree with the dispatch queue and the overlapped combine.
. "$(dirname "$0")/common.sh"
build "mkccl mkccl-perf"
MKCCL_SO_PATH=$B/libmkccl.so timeout 300 python3 -m torch.distributed.run --nproc_per_node 2 perf/moe_layer_dist.py \
  --tokens 4096,16384 --json $R/moe-layer-dist.json > $R/moe-layer-dist.log 2>&1
echo "dist rc=$? $(( $(date +%s) - t0 ))s"; grep -v "^W1\|^ *$" $R/moe-layer-dist.log | tail -16
timeout 200 $B/perf/mkccl-perf moe -g 2 --shapes 16384x7168x256,16384x2048x128,16384x4096x8 --json $R/moe-16384.json > $R/moe-16384.log 2>&1
echo "moe16k rc=$? $(( $(date +%s) - t0 ))s"
python3 - $R/moe-16384.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
  s=r["shape"]; x=r
  print("  %sx%sx%s %s composed %.0f floor %.0f ratio %.3f | base %.0f x %.2f | disp %.0f comb %.0f | fused1 %.0f both %.0f" % (s["m"],s["n"],s["k"],
    r["note"].split()[0], x["composed_us"], x["floor_us"], x["composed_floor_ratio"], x["baseline_time_us"], x["composed_speedup"],
    x["dispatch_us"], x["combine_us"], x["first_half_fused_us"], x["time_us"]))
PY
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c5.tgz r)

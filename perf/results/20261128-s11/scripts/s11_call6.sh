#!/usr/bin/env bash
# Session-11 call 6 (2 GPUs, warm): MoE dispatch / combine and the layer across 2 emulated nodes x 1
# rank with mkccl-perf counting the combine's network bytes as the dtype rows the wire carries.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl mkccl-perf"
MKCCL_RANKS_PER_NODE=1 timeout 60 $B/perf/mkccl-perf moe_a2a -g 2 --shapes 512x2048x128 --iters 10 \
  --json $R/a2a-2nodes.json > $R/a2a-2nodes.log 2>&1
echo "a2a rc=$? $(( $(date +%s) - t0 ))s"; show $R/a2a-2nodes.json
python3 - $R/a2a-2nodes.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
  print(" ", {k: v for k, v in r.items() if "byte" in k or "gbps" in k or k in ("note",)})
PY
MKCCL_RANKS_PER_NODE=1 timeout 80 $B/perf/mkccl-perf moe -g 2 --shapes 512x2048x128 --iters 10 \
  --json $R/moe-2nodes.json > $R/moe-2nodes.log 2>&1
echo "moe rc=$? $(( $(date +%s) - t0 ))s"; show $R/moe-2nodes.json
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

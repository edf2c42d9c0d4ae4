#!/usr/bin/env bash
# Session-11 call 2 (1 GPU): split K on 128 x 64 tiles (gemm.variant=64x1 with gemm.split_k=s):
# gemm_test's SplitKForced (now with it) and ClustersAlongN, then the decode set with 64-wide parts
# forced (2, 3, 4, 6 parts) beside the 128-wide ones (2, 3, 4) and auto, against cuBLAS, alternating.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test"
timeout 200 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitKForced:Gemm.ClustersAlongN:Gemm.DecodeShapes:Gemm.SplitKBackToBackAndGraph' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|tests ran" $R/gemm_test.log | head -20
V=auto
for s in 2 3 4 6; do V="$V,gemm.variant=64x1;gemm.split_k=$s"; done
for s in 2 3 4; do V="$V,gemm.variant=128x1;gemm.split_k=$s"; done
MKCCL_PERF_GEMM_VARIANTS="$V" MKCCL_PERF_GEMM_SET=decode timeout 300 $B/perf/mkccl-perf gemm --iters 40 --rounds 3 \
  --json $R/gemm-decode-split64.json > $R/gemm-decode-split64.log 2>&1
echo "decode rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-decode-split64.json > $R/gemm-decode-split64.txt
grep -c wrong $R/gemm-decode-split64.txt; grep -v "wrong 0" $R/gemm-decode-split64.txt | head
python3 - $R/gemm-decode-split64.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); best={}
for r in d["results"]:
  s=r["shape"]; k="%sx%sx%s"%(s["m"],s["n"],s["k"]); v=r["note"].split(",")[0].replace("variant ","")
  sp=r["baseline_time_us"]/r["time_us"]
  best.setdefault(k,[]).append((sp,v.replace("gemm.variant=","").replace(";gemm.split_k=","/s"),r["time_us"],r["baseline_time_us"]))
for k,l in best.items():
  a=[x for x in l if x[0] and x[1]=="auto"][0]; l.sort(reverse=True)
  print("%-15s cublas %6.1f auto %6.1f %.3f | "%(k,a[3],a[2],a[0]) + " | ".join("%s %.1f %.3f"%(x[1],x[2],x[0]) for x in l[:4]))
PY
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Session-10 call 7 (2 GPUs): the fused fp8 ops at 2 ranks, per-tensor and block scales in the same
# run (block rows hold the per-tensor value in every block, so cuBLASLt's per-tensor fp8 GEMM then
# NCCL is the same C), default shapes, alternating timing.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
build "mkccl mkccl-perf"
for op in gemm_rs_fp8 gemm_rs_fp8_block ag_gemm_fp8 ag_gemm_fp8_block; do
  timeout 100 $B/perf/mkccl-perf $op -g 2 --iters 10 --json $R/$op.json >> $R/fp8-fused.log 2>&1
  echo "$op rc=$? $(( $(date +%s) - t0 ))s"
  python3 -c "
import json,sys
d=json.load(open('$R/$op.json'))
for r in d['results']:
  s=r['shape']; print('  %5dx%5dx%5d ours %7.1f base %7.1f x%.2f | gemm %s comm %s floor %.2f wrong %s' % (s['m'],s['n'],s['k'],r['time_us'],r.get('baseline_time_us') or -1,r.get('speedup') or 0,r.get('gemm_alone_us'),r.get('comm_alone_us'),r.get('floor_ratio') or 0,r['wrong']))
" 2>&1 | tee -a $R/fp8-fused.txt
done
sed -i "s#$OUT/r/#r/#g; s#$root/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"

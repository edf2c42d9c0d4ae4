#!/usr/bin/env bash
# Session-7 call 7 (1 GPU): does the PDL change cost anything where nothing overlaps? This tree
# against the same tree without it (patches/pdl.patch reversed, tools/gpu-ab-build.sh), built side
# by side, on mid-size and decode shapes timed one call at a time, twice in alternating order.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
tools/gpu-ab-build.sh nopdl "mkccl mkccl-perf" $S/patches/pdl.patch > $R/buildA.out 2>&1 &
pa=$!
build "mkccl mkccl-perf"
wait $pa; echo "build nopdl rc=$? $(cat $R/buildA.out) $(( $(date +%s) - t0 ))s"
SH=1000x1032x4096,2000x2056x4096,4097x4104x4104,1x4096x4096,128x4096x4096,8192x8192x8192
for i in 1 2; do
  for v in pdl nopdl; do
    P=$B/perf/mkccl-perf; [ $v = nopdl ] && P=/tmp/b_nopdl/perf/mkccl-perf
    timeout 100 $P gemm --shapes $SH --iters 40 --json $R/ab-$v-$i.json > $R/ab-$v-$i.log 2>&1
    echo "$v $i rc=$?"; python3 $S/gemm_show.py $R/ab-$v-$i.json
  done
done
sed -i "s#$OUT/r/#r/#g" $R/*.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c7.tgz r)

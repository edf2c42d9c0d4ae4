#!/usr/bin/env bash
# Session-7 call 9 (1 GPU, warm from call 7: this tree in /tmp/bg, the tree without PDL in
# /tmp/b_nopdl): which part of the PDL change costs 1-5 us per call timed alone? This tree without
# the L2 prefetch (patches/prefetch.patch reversed) and without the griddepcontrol wait/launch
# (patches/griddep.patch reversed), one call at a time and 20 back to back.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
tools/gpu-ab-build.sh nopf "mkccl mkccl-perf" $S/patches/prefetch.patch > $R/buildP.out 2>&1 &
pa=$!
tools/gpu-ab-build.sh nogd "mkccl mkccl-perf" $S/patches/griddep.patch > $R/buildG.out 2>&1
wait $pa; echo "builds $(cat $R/buildP.out $R/buildG.out) $(( $(date +%s) - t0 ))s"
SH=1000x1032x4096,2000x2056x4096,128x4096x4096,4097x4104x4104
DS=1x4096x4096,16x8192x8192,256x4096x4096,1x1024x1024
for v in bg b_nopf b_nogd b_nopdl; do
  timeout 60 /tmp/$v/perf/mkccl-perf gemm --shapes $SH --iters 40 --json $R/c9-$v.json > /dev/null 2>&1
  MKCCL_PERF_GEMM_CHAIN=20 timeout 60 /tmp/$v/perf/mkccl-perf gemm --shapes $DS --iters 40 --json $R/c9-$v-chain.json > /dev/null 2>&1
  echo "$v"; python3 $S/gemm_show.py $R/c9-$v.json $R/c9-$v-chain.json
done
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c9.tgz r)

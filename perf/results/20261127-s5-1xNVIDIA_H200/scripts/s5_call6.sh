#!/usr/bin/env bash
# Session-5 call 6: ncu warp-stall sampling per SASS instruction of the fp8 block kernel (tree).
. "$(dirname "$0")/common.sh"
mk A "mkccl-perf"; B=/tmp/b_A
P=$B/perf/mkccl-perf
timeout 150 ncu --clock-control none --kernel-name-base demangled -k regex:Fp8BlockOp -c 1 --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section SpeedOfLight --import-source no -o $R/fp8blk \
  $P gemm_fp8 --shapes 8192x8192x8192 --iters 2 --rounds 1 > $R/ncu.log 2>&1; echo "ncu rc=$?"
ncu -i $R/fp8blk.ncu-rep --page source --csv --print-source sass > $R/fp8blk_source.csv 2>&1
ncu -i $R/fp8blk.ncu-rep --page raw --csv > $R/fp8blk_raw.csv 2>&1
ncu -i $R/fp8blk.ncu-rep > $R/fp8blk_details.txt 2>&1
cd $OUT && tar czf s5f.tgz r && rm -rf r

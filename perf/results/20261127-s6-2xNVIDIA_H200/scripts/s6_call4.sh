#!/usr/bin/env bash
# Session-6 call 4 (1 x H200): the grouped GEMM's own cost (perf/grouped_vs_dense.py: equal
# groups, no padding, against our dense GEMM and cuBLAS on the same rows), with the raster band
# at 8 (as built), 4 and 16 (patches/band*.patch), and the dense engine's tiles forced.
. "$(dirname "$0")/common.sh"
build "mkccl mkccl-perf"
SH="8x1024x4096x14336,8x1024x28672x4096,4x2048x4096x14336,4x2048x28672x4096,128x256x2048x7168,128x256x7168x2048,64x512x1536x2048"
gvd() { timeout 120 python3 perf/grouped_vs_dense.py --lib $B/libmkccl.so --shapes $SH --json $R/gvd-$1.json > $R/gvd-$1.log 2>&1; echo "gvd $1 rc=$?"; cat $R/gvd-$1.log; }
gvd band8
for v in band4 band16; do
  patch -s -p1 < $P/$v.patch && cmake --build $B -j 16 --target mkccl > $R/build-$v.log 2>&1 && gvd $v
  patch -s -R -p1 < $P/$v.patch
done
MKCCL_PERF_GEMM_VARIANTS="auto,256x1,256x2,128x1" timeout 150 $B/perf/mkccl-perf gemm \
  --shapes 1024x4096x14336,2048x4096x14336,8192x4096x14336,2048x28672x4096,256x2048x7168,256x7168x2048 --json $R/dense-variants.json > $R/dense-variants.log 2>&1
echo "dense rc=$?"; grep -v "^#" $R/dense-variants.log | sed 's/baseline_hbm_gbps=[0-9.]* //; s/hbm_gbps=[0-9.]* //' | cut -c1-230 | head -30
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s6c4.tgz r)

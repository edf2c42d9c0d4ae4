#!/usr/bin/env bash
# Session-7 call 2 (1 GPU): why rows of 8208 bytes (K = 4104) cost the engine ~1.8x: the load path
# alone (tools/probes/operand_load.cu: TMA against cp.async at pitches 8192 / 8208 / 8320), and
# the GEMM unpacked with each L2 promotion of the tensor maps (patches/promo-env.patch, an
# experiment's environment variable, not in the tree).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s7-1xH100-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf operand_load_probe"
for i in 1 2; do timeout 60 $B/tools/operand_load_probe 16384 4 > $R/probe-$i.log 2>&1; echo "probe rc=$?"; cat $R/probe-$i.log; done
patch -s -p1 < $S/patches/promo-env.patch && cmake --build $B -j 16 --target mkccl mkccl-perf > $R/build-promo.log 2>&1 || { tail $R/build-promo.log; exit 1; }
export MKCCL_PERF_GEMM_VARIANTS="256x1;gemm.pack_k=off,auto"
for p in 3 2 0; do
  MKCCL_EXP_PROMO=$p timeout 120 $B/perf/mkccl-perf gemm --shapes 8192x8192x4104,8192x8192x4160,2000x2056x4104 --iters 20 --json $R/promo-$p.json > $R/promo-$p.log 2>&1
  echo "promo $p rc=$? $(( $(date +%s) - t0 ))s"; python3 $S/gemm_show.py $R/promo-$p.json
done
patch -s -R -p1 < $S/patches/promo-env.patch
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s7c2.tgz r)

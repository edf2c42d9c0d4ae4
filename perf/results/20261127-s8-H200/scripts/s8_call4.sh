#!/usr/bin/env bash
# Session-8 call 4 (2 GPUs, one process per GPU through mkccl-perf -g 2): the MoE layer at 2 ranks
# with the baseline that now runs SwiGLU and the weighted sum (T = 128 and 4096, the three models,
# uniform and skewed), and every MoE test with its ranks spread over both GPUs (and the MoE tests
# across emulated nodes, one GPU per node, where built).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf moe_test moe_grouped_swiglu_test moe_layout_test ${EXTRA_TARGETS:-}"
LAY=128x7168x256,128x2048x128,128x4096x8,4096x7168x256,4096x2048x128,4096x4096x8
lay ws2 $B/perf/mkccl-perf
(cd $B && timeout 240 ctest -R "moe" --timeout 230 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "Test +#|tests passed|FAILED|Failed" $R/ctest-moe.log | head -20
sed -i "s#$OUT/r/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c4.tgz r)

#!/usr/bin/env bash
# Session-8 call 8 (2 GPUs): the fused MoE calls' routes (moe.fused_route: auto = sequential by
# default, overlap in the tests of the overlapped kernels): every MoE test (C and Python) with
# ranks over both GPUs; mkccl-perf moe at 2 ranks with the default route (MKCCL_TUNING names it,
# so the fused rows time it) and with the overlapped one, on the Qwen3- and DeepSeek-like shapes.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf moe_test moe_net_test moe_grouped_swiglu_test moe_layout_test moe_net_layout_test api_args_test"
(cd $B && timeout 260 ctest -R "moe|api_args" --timeout 250 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "Test +#|tests passed|FAILED|Failed" $R/ctest-moe.log | head -20
LAY=4096x2048x128,4096x7168x256
export MKCCL_TUNING=moe.fused_route=auto; lay auto $B/perf/mkccl-perf; unset MKCCL_TUNING
lay overlap $B/perf/mkccl-perf
sed -i "s#$OUT/r/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c8.tgz r)

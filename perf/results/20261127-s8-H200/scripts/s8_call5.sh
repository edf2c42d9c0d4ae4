#!/usr/bin/env bash
# Session-8 call 5 (2 GPUs): MoE dispatch/combine across nodes (merged from moe-net): its tests on
# emulated nodes (all ranks in one process on one GPU, libfabric tcp), every MoE test of the tree;
# then the one-node dispatch and combine at 2 ranks (one GPU each) against the tree before the
# merge (patches/moe-net.patch reversed), two rounds alternating.
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
PP=$root/perf/results/20261127-s8-H200/scripts/patches
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
tools/gpu-ab-build.sh A "mkccl mkccl-perf" $PP/moe-net.patch > $R/buildA.out 2>&1 &
pa=$!
build "mkccl mkccl-perf moe_test moe_net_test moe_grouped_swiglu_test moe_layout_test moe_net_layout_test"
wait $pa; echo "buildA rc=$? $(cat $R/buildA.out)"
CUDA_MODULE_LOADING=EAGER timeout 300 $B/tests/moe/moe_net_test > $R/moe_net_test.log 2>&1
echo "moe_net_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[       OK|Failure|rror" $R/moe_net_test.log | head -30
(cd $B && timeout 240 ctest -R "moe" -E "moe_net_test" --timeout 230 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "Test +#|tests passed|FAILED|Failed" $R/ctest-moe.log | head -20
A2A=4096x7168x256,4096x2048x128,4096x4096x8,128x7168x256
for i in 1 2; do a2a new$i $B/perf/mkccl-perf; a2a old$i /tmp/b_A/perf/mkccl-perf; done
sed -i "s#$OUT/r/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log $R/build_A.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c5.tgz r)

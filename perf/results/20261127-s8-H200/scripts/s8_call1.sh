#!/usr/bin/env bash
# Session-8 call 1 (1 GPU): the decode A multicast (split K in 2-CTA clusters sharing the A tile,
# gemm.variant=128x2): its GEMM tests, then the decode set with 128x2 forced beside auto against
# cuBLAS; and the grouped GEMM against torch._grouped_mm on the issue-21 shapes (T = 4096, 16384).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
S=perf/results/20261127-s8-H200/scripts
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf gemm_test gemm_split_k_test"
$B/tests/kernels/gemm_split_k_test > $R/gemm_split_k_test.log 2>&1; echo "split_k_test rc=$?"
timeout 150 $B/tests/kernels/gemm_test --gtest_filter='Gemm.SplitKClustersShareA:Gemm.SplitK*:Gemm.PdlDependentChain:Gemm.BackToBackLaunches:Gemm.StreamK' > $R/gemm_test.log 2>&1
echo "gemm_test rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^\[  (FAILED|PASSED) |Failure|^\[       OK" $R/gemm_test.log | head -20
MKCCL_PERF_GEMM_VARIANTS="auto,128x2" MKCCL_PERF_GEMM_SET=decode timeout 90 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode.json > $R/gemm-decode.log 2>&1
echo "decode rc=$? $(( $(date +%s) - t0 ))s"
MKCCL_PERF_GEMM_VARIANTS="auto,128x2" MKCCL_PERF_GEMM_CHAIN=20 MKCCL_PERF_GEMM_SET=decode timeout 90 $B/perf/mkccl-perf gemm --iters 40 --json $R/gemm-decode-chain20.json > $R/gemm-decode-chain20.log 2>&1
echo "decode chain rc=$? $(( $(date +%s) - t0 ))s"
python3 perf/results/20261127-s7-1xH100-H200/scripts/gemm_show.py $R/gemm-decode.json $R/gemm-decode-chain20.json
timeout 200 python3 perf/moe_vs_torch.py --lib $B/libmkccl.so --tokens 4096,16384 --routing uniform --json $R/grouped-vs-torch.json > $R/grouped-vs-torch.log 2>&1
echo "vs torch rc=$? $(( $(date +%s) - t0 ))s"; tail -12 $R/grouped-vs-torch.log
sed -i "s#$OUT/r/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c1.tgz r)

#!/usr/bin/env bash
# Session-5 call 2: build; gemm probe + gemm_test (split-K spread sum, early descriptor prefetch);
# the decode set with every part count forced (for the split model's refit); the fused GEMM+RS
# across emulated nodes (per-piece puts) tests and overlap; ncu source-level stalls of the fp8
# block kernel. Everything into $OUT/s5b.tgz.
. "$(dirname "$0")/common.sh"
mk A "mkccl mkccl-perf gemm_probe_test gemm_test gemm_rs_net_test gemm_rs_net_layout_test"; B=/tmp/b_A
echo "built at $(( $(date +%s) - t0 )) s"
P=$B/perf/mkccl-perf
timeout 60 $B/tests/kernels/gemm_probe_test > $R/probe.log 2>&1; echo "probe rc=$?"
grep -E "PROBE|first data|summed" $R/probe.log | head -20
timeout 150 $B/tests/kernels/gemm_test --gtest_filter='*Decode*:*SplitK*:*StreamK*' > $R/gemm_test.log 2>&1; echo "gemm_test rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gemm_test.log | head
echo "at $(( $(date +%s) - t0 )) s"
MKCCL_PERF_GEMM_SET=decode MKCCL_PERF_GEMM_VARIANTS="auto,auto;gemm.split_k=1,auto;gemm.split_k=2,auto;gemm.split_k=3,auto;gemm.split_k=4,auto;gemm.split_k=6,auto;gemm.split_k=8" \
  timeout 200 $P gemm --json $R/gemm-decode-splits.json > $R/gemm-decode-splits.log 2>&1; echo "decode rc=$?"
echo "at $(( $(date +%s) - t0 )) s"
$B/tests/fused/gemm_rs_net_layout_test > $R/gemm_rs_net_layout_test.log 2>&1; echo "layout rc=$?"
timeout 150 $B/tests/fused/gemm_rs_net_test > $R/gemm_rs_net_test.log 2>&1; echo "gemm_rs_net_test rc=$?"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure' $R/gemm_rs_net_test.log | head -40
timeout 100 $B/tests/fused/gemm_rs_net_test --gtest_also_run_disabled_tests --gtest_filter='*Overlap*' > $R/gemm_rs_net_test-fused-overlap.log 2>&1; echo "overlap rc=$?"; grep -E 'BENCH|FAILED|PASSED' $R/gemm_rs_net_test-fused-overlap.log
echo "at $(( $(date +%s) - t0 )) s"
timeout 120 ncu --clock-control none --kernel-name-base demangled -k regex:Fp8BlockOp -c 1 --set full --import-source no -o $R/fp8blk \
  $P gemm_fp8 --shapes 8192x8192x8192 --iters 2 --rounds 1 > $R/ncu_fp8blk.log 2>&1; echo "ncu rc=$?"
ncu -i $R/fp8blk.ncu-rep --page source --csv --print-source sass > $R/fp8blk_source.csv 2>&1
ncu -i $R/fp8blk.ncu-rep --page raw --csv > $R/fp8blk_raw.csv 2>&1
ls -la $R | head -30
echo "at $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s5b.tgz r && rm -rf r

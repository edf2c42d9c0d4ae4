#!/usr/bin/env bash
# Session-8 call 2 (1 GPU): the MoE changes: W1 gate rows then up rows (mkcclSwigluGateUp) in the
# grouped SwiGLU GEMM and the fused dispatch, the layer tests in fp16 and at top-16, the composed
# 50-call test; every MoE test (C and Python) on this GPU; the grouped GEMMs against torch with the
# gate-up layout timed beside the blocked one; mkccl-perf moe at one rank (new baseline, T = 128, fp16).
. perf/results/20261127-s6-2xNVIDIA_H200/scripts/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $R/smi.txt 2>&1
build "mkccl mkccl-perf moe_test moe_grouped_swiglu_test moe_layout_test"
(cd $B && timeout 330 ctest -R "moe" --timeout 320 --output-on-failure > $R/ctest-moe.log 2>&1); echo "ctest rc=$? $(( $(date +%s) - t0 ))s"
grep -E "Test +#|tests passed|FAILED|Failed|skipped" $R/ctest-moe.log | head -20
timeout 120 python3 perf/moe_vs_torch.py --lib $B/libmkccl.so --shapes qwen,mixtral --tokens 4096 --iters 10 --json $R/grouped-gate-up.json > $R/grouped-gate-up.log 2>&1
echo "vs torch rc=$? $(( $(date +%s) - t0 ))s"; grep -E "gemms|breakdown" $R/grouped-gate-up.log
python3 -c "
import json; d=json.load(open('$R/grouped-gate-up.json'))
for r in d['rows']: print(r['shape'], r['T'], 'err blocked %.1e gate-up %.1e' % (r['max_rel_err_act'], r['max_rel_err_act_gate_up']), {k: round(v) for k, v in r['breakdown_us'].items() if 'gemm1_swiglu' in k})"
timeout 100 $B/perf/mkccl-perf moe --shapes 128x2048x128,4096x2048x128 --json $R/moe-ws1-bf16.json > $R/moe-ws1-bf16.log 2>&1; echo "moe bf16 rc=$?"; show $R/moe-ws1-bf16.json
timeout 100 $B/perf/mkccl-perf moe -d fp16 --shapes 4096x2048x128 --json $R/moe-ws1-fp16.json > $R/moe-ws1-fp16.log 2>&1; echo "moe fp16 rc=$?"; show $R/moe-ws1-fp16.json
sed -i "s#$OUT/r/#r/#g" $R/*.log
rm -f $R/build.log $R/configure.log
echo "total $(( $(date +%s) - t0 ))s"
(cd $OUT && tar czf s8c2.tgz r)

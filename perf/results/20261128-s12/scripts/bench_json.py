#!/usr/bin/env python3
"""Collects the BENCH lines of the overlap benches' logs (gemm_rs_net_test / ag_gemm_net_test
*Overlap*) into one results JSON: python3 bench_json.py OUT.json COMMIT "device" "what" LOG...
Each row keeps the bench's fields and the log (run) it came from."""
import json, sys
out, commit, device, what = sys.argv[1:5]
rows = []
for log in sys.argv[5:]:
    for line in open(log):
        if "BENCH " in line:
            d = json.loads(line.split("BENCH ", 1)[1])
            d["run"] = log.rsplit("/", 1)[-1]
            rows.append(d)
json.dump({
    "device": device, "date": "2026-11-28", "commit": commit,
    "setup": "2 emulated nodes x 1 rank (MKCCL_RANKS_PER_NODE=1, libfabric tcp on loopback), one GPU per node, bf16, "
             "64 MiB window",
    "method": "tests/fused/{gemm_rs_net_test,ag_gemm_net_test} --gtest_also_run_disabled_tests --gtest_filter='*Overlap*':"
              " per case warm-up + 11 (RS/AR) or 15 (AG) timed iterations, CUDA events per call, both ranks in lockstep,"
              " median per rank, max over ranks; every route and the baselines (GEMM alone: mkcclGemm of the rank's"
              " shape; transfer alone: the hierarchical collective across the same nodes) in the same run;"
              " *_overlap_ratio = call / max(GEMM alone, transfer alone). " + what,
    "rows": rows}, open(out, "w"), indent=1)
print(out, len(rows), "rows")

#!/usr/bin/env python3
"""Prints the overlap benches' BENCH lines (gemm_rs_net_test / ag_gemm_net_test *Overlap*) of the
logs given, one line per case: every route's call / max(GEMM alone, transfer alone)."""
import json, sys
for log in sys.argv[1:]:
    for line in open(log):
        if "BENCH " not in line:
            continue
        d = json.loads(line.split("BENCH ", 1)[1])
        f = max(d["gemm_alone_us"], d["transfer_alone_us"])
        head = "  %s %s %dx%dx%d gemm %.0f xfer %.0f |" % (d.get("split", "2x1"), d["op"], d["M"], d["N"], d["K"],
                                                          d["gemm_alone_us"], d["transfer_alone_us"])
        if d["op"] == "ag_gemm_net":
            cols = [("fused", d["fused_us"]), ("p128", d.get("fused_piece128_us")), ("p64", d.get("fused_piece64_us")),
                    ("split", d.get("split_us"))]
        else:
            cols = [("seq", d["call_us"]), ("fused", d["fused_call_us"]), ("split", d.get("split_call_us")),
                    ("pieces1", d.get("split_pieces1_us")), ("pieces2", d.get("split_pieces2_us")),
                    ("pieces8", d.get("split_pieces8_us"))]
        print(head, " ".join("%s %.2f" % (n, v / f) for n, v in cols if v is not None))

# One line per row of mkccl-perf gemm JSONs: shape, variant, ours / cuBLAS us, ratio, wrong.
import json, sys
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except Exception as e:
        print("  %s: no json (%s)" % (path, e)); continue
    print("  " + path.split("/")[-1])
    for r in d["results"]:
        s = r["shape"]
        print("   %5sx%5sx%5s %-22s %8.1f / %8.1f = %.3f wrong %s" % (
            s["m"], s["n"], s["k"], r["note"].split(",")[0].replace("variant ", ""), r["time_us"],
            r.get("baseline_time_us") or -1, (r.get("baseline_time_us") or 0) / r["time_us"], r["wrong"]))

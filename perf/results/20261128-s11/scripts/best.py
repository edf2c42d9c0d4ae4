# Best configurations per shape of an mkccl-perf gemm JSON (MKCCL_PERF_GEMM_VARIANTS rows): auto,
# then the four fastest, each as time (us) and ratio to the same run's cuBLAS.
import json, sys
d = json.load(open(sys.argv[1]))
best = {}
for r in d["results"]:
    s = r["shape"]
    k = "%sx%sx%s" % (s["m"], s["n"], s["k"])
    v = r["note"].split(",")[0].replace("variant ", "")
    for a, b in (("gemm.variant=", ""), (";gemm.split_k=", "/s"), (";gemm.stream_k=off", ""), (";gemm.cluster_n=", "/n")):
        v = v.replace(a, b)
    best.setdefault(k, []).append((r["baseline_time_us"] / r["time_us"], v, r["time_us"], r["baseline_time_us"]))
for k, l in best.items():
    a = [x for x in l if x[1] == "auto"][0]
    l.sort(reverse=True)
    print("%-15s cublas %6.1f auto %6.1f %.3f | " % (k, a[3], a[2], a[0]) +
          " | ".join("%s %.1f %.3f" % (x[1], x[2], x[0]) for x in l[:4]))

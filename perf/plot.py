#!/usr/bin/env python3
"""Charts from mkccl-perf results JSON (`mkccl-perf ... --json FILE`).

Size-swept ops (collectives): one PNG per (op, dtype, redop, world size) with time and busbw
against size, ours beside the baseline. Shape ops (GEMM, fused): one PNG per (op, dtype, world
size) with a bar chart of time per shape, ours beside the baseline, and the speedup on top.

  python3 perf/plot.py perf/results/*.json -o perf/results/plots
"""
import argparse
import json
import os
import sys
from collections import defaultdict


def load_rows(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for key in ("device", "date", "commit", "results"):
            if key not in doc:
                raise ValueError(f"{path}: not mkccl-perf JSON (no '{key}')")
        label = os.path.splitext(os.path.basename(path))[0] if len(paths) > 1 else ""
        for r in doc["results"]:
            r = dict(r)
            r["_device"], r["_commit"], r["_label"] = doc["device"], doc["commit"], label
            rows.append(r)
    return rows


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:g}{unit}" if unit == "B" else f"{n:.0f}{unit}" if n == int(n) else f"{n:.1f}{unit}"
        n /= 1024.0
    return str(n)


def safe(s):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(s))


def plot_sizes(plt, key, rows, outdir, dpi):
    op, dtype, redop, ws, label = key
    rows = sorted(rows, key=lambda r: r["shape"]["bytes"])
    x = [r["shape"]["bytes"] for r in rows]
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 4.8))
    ours_t = [r["time_us"] for r in rows]
    ax_t.plot(x, ours_t, "o-", label="mkccl")
    base = [r for r in rows if r.get("baseline_time_us") is not None]
    base_name = rows[0].get("baseline") or "baseline"
    if base:
        ax_t.plot([r["shape"]["bytes"] for r in base], [r["baseline_time_us"] for r in base], "s--", label=base_name)
    ax_t.set_xscale("log", base=2)
    ax_t.set_yscale("log")
    ax_t.set_xlabel("size (bytes)")
    ax_t.set_ylabel("time (us, lower is better)")
    ax_t.set_title("time")
    ax_t.grid(True, which="both", alpha=0.3)
    ax_t.legend()

    bus = [(r["shape"]["bytes"], r["busbw_gbps"]) for r in rows if r.get("busbw_gbps") is not None]
    if bus:
        ax_b.plot([b[0] for b in bus], [b[1] for b in bus], "o-", label="mkccl")
    bbus = [(r["shape"]["bytes"], r["baseline_busbw_gbps"]) for r in rows if r.get("baseline_busbw_gbps") is not None]
    if bbus:
        ax_b.plot([b[0] for b in bbus], [b[1] for b in bbus], "s--", label=base_name)
    ax_b.set_xscale("log", base=2)
    ax_b.set_xlabel("size (bytes)")
    ax_b.set_ylabel("bus bandwidth (GB/s, higher is better)")
    ax_b.set_title("busbw")
    ax_b.grid(True, which="both", alpha=0.3)
    if bus or bbus:
        ax_b.legend()
    for ax in (ax_t, ax_b):
        ticks = [v for v in x if (v & (v - 1)) == 0][:: max(1, len(x) // 8)]
        if ticks:
            ax.set_xticks(ticks)
            ax.set_xticklabels([human_bytes(v) for v in ticks], rotation=30)
    wrong = sum(r.get("wrong", 0) for r in rows)
    title = f"{op} {dtype}{' ' + redop if redop else ''}, {ws} GPUs, {rows[0]['_device']} ({rows[0]['_commit']})"
    if wrong:
        title += f"  [{wrong} WRONG]"
    fig.suptitle(title + (f"  {label}" if label else ""))
    fig.tight_layout()
    name = f"{safe(op)}_{safe(dtype)}{'_' + safe(redop) if redop else ''}_ws{ws}{'_' + safe(label) if label else ''}.png"
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_shapes(plt, key, rows, outdir, dpi):
    op, dtype, _, ws, label = key
    names = [f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']}" for r in rows]
    ours = [r["time_us"] for r in rows]
    base = [r.get("baseline_time_us") for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows) + 2), 4.8))
    idx = list(range(len(rows)))
    w = 0.38
    ax.bar([i - w / 2 for i in idx], ours, w, label="mkccl")
    if any(b is not None for b in base):
        ax.bar([i + w / 2 for i in idx], [b or 0 for b in base], w, label=rows[0].get("baseline") or "baseline")
        for i, (o, b) in enumerate(zip(ours, base)):
            if b:
                ax.text(i, max(o, b) * 1.02, f"{b / o:.2f}x", ha="center", va="bottom", fontsize=9)
    ax.set_xticks(idx)
    ax.set_xticklabels(names, rotation=20)
    ax.set_xlabel("M x N x K")
    ax.set_ylabel("time (us, lower is better)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    ax.set_title(f"{op} {dtype}, {ws} GPUs, {rows[0]['_device']} ({rows[0]['_commit']})" + (f"  {label}" if label else ""))
    fig.tight_layout()
    name = f"{safe(op)}_{safe(dtype)}_ws{ws}{'_' + safe(label) if label else ''}.png"
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="results files written by mkccl-perf --json")
    ap.add_argument("-o", "--outdir", default=".", help="directory for the PNG files (default: .)")
    ap.add_argument("--dpi", type=int, default=110)
    args = ap.parse_args(argv)

    try:
        rows = load_rows(args.json)
    except (OSError, ValueError) as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("plot.py: no results in the input", file=sys.stderr)
        return 1
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.outdir, exist_ok=True)
    groups = defaultdict(list)
    for r in rows:
        kind = "shape" if "m" in r["shape"] else "size"
        groups[(kind, r["op"], r["dtype"], r.get("redop", ""), r["world_size"], r["_label"])].append(r)
    for (kind, *key), grp in sorted(groups.items(), key=lambda kv: kv[0]):
        path = (plot_sizes if kind == "size" else plot_shapes)(plt, tuple(key), grp, args.outdir, args.dpi)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
